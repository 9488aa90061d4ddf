"""The primitive types of the Kafka protocol guide, as a Reader and a Writer.

Sans-IO: a :class:`Reader` walks a buffer it was given, a :class:`Writer` builds one.
Generated message classes (``odradek.protocol.messages``) call these methods field by
field. Anything malformed raises :class:`~odradek.core.errors.DecodeError`, and nothing
else: the fuzz tests hold the codec to that.

Two decisions shape this module:

* ``records`` fields decode to a ``memoryview`` of the input, never a copy, so that a
  produce request's batches reach the log without being copied in Python.
* The Writer keeps large ``records`` values as separate chunks instead of copying them
  into its buffer; :meth:`Writer.chunks` hands the pieces to ``writelines``/``sendmsg``.

The generated code reads and writes a run of consecutive fixed-width fields with one
precompiled :class:`struct.Struct` (:meth:`Reader.unpack`, :meth:`Writer.pack`). Those
two fail exactly as the field-by-field calls would: the same exception, message and
position, so that coalescing is invisible to callers.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any, NoReturn, Protocol, TypeVar

from odradek.core.errors import DecodeError, EncodeError

T = TypeVar("T")

Buffer = bytes | bytearray | memoryview


class RecordsRegion(Protocol):
    """Record batches that live somewhere else, typically a range of a segment file.

    The Writer never copies one: it becomes its own chunk, which the network shell
    sends with ``sendfile`` where it can, or by calling :meth:`read`.
    """

    def __len__(self) -> int: ...

    def read(self) -> bytes: ...


Records = Buffer | RecordsRegion
"""A ``records`` field: raw record batch bytes, passed through untouched."""

_BUFFER_TYPES = (bytes, bytearray, memoryview)

ZERO_UUID = uuid.UUID(int=0)

# Kafka's fixed-width big-endian primitives, shared by every encoder and decoder here
# (the record batch codec included) so that each layout is compiled once.
INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")

# The format characters that Reader.unpack and Writer.pack accept: their widths, and the
# Writer method of each integer.
_FIXED_SIZE = {"b": 1, "h": 2, "i": 4, "q": 8, "H": 2, "I": 4, "d": 8, "?": 1}
_FIXED_WRITE = {"b": "int8", "h": "int16", "i": "int32", "q": "int64", "H": "uint16", "I": "uint32"}

# A records value at least this large is sent as its own chunk rather than copied.
ZERO_COPY_THRESHOLD = 4096


def encode_unsigned_varint(value: int) -> bytes:
    if value < 0:
        raise EncodeError(f"unsigned varint cannot hold {value}")
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """A zigzag varint (int32 range), as used inside record batches."""
    if not -(1 << 31) <= value < (1 << 31):
        raise EncodeError(f"varint out of int32 range: {value}")
    return encode_unsigned_varint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def encode_varlong(value: int) -> bytes:
    """A zigzag varlong (int64 range), as used inside record batches."""
    if not -(1 << 63) <= value < (1 << 63):
        raise EncodeError(f"varlong out of int64 range: {value}")
    return encode_unsigned_varint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def decode_unsigned_varint(
    buf: bytes | bytearray | memoryview, pos: int, max_bytes: int = 5, end: int = -1
) -> tuple[int, int]:
    """Decode an unsigned varint at ``pos``; return ``(value, new_pos)``.

    ``max_bytes`` bounds the encoding (5 for 32-bit, 10 for 64-bit values) so that a
    hostile stream of continuation bits cannot make us loop.
    """
    result = 0
    shift = 0
    if end < 0:
        end = len(buf)
    for i in range(max_bytes):
        if pos >= end:
            raise DecodeError("varint runs past the end of the buffer")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            if i == max_bytes - 1 and max_bytes == 5 and b > 0x0F:
                raise DecodeError("varint does not fit in 32 bits")
            return result, pos
        shift += 7
    raise DecodeError(f"varint longer than {max_bytes} bytes")


def decode_varint(buf: bytes | bytearray | memoryview, pos: int, end: int = -1) -> tuple[int, int]:
    raw, pos = decode_unsigned_varint(buf, pos, 5, end)
    return (raw >> 1) ^ -(raw & 1), pos


def decode_varlong(buf: bytes | bytearray | memoryview, pos: int, end: int = -1) -> tuple[int, int]:
    raw, pos = decode_unsigned_varint(buf, pos, 10, end)
    if raw >> 64:
        raise DecodeError("varlong does not fit in 64 bits")
    return (raw >> 1) ^ -(raw & 1), pos


class Reader:
    """Reads primitives from a buffer, advancing ``pos``."""

    __slots__ = ("buf", "end", "pos")

    def __init__(
        self, buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None
    ) -> None:
        self.buf = memoryview(buf) if not isinstance(buf, memoryview) else buf
        if self.buf.format != "B" or self.buf.ndim != 1:
            self.buf = self.buf.cast("B")
        self.pos = pos
        self.end = len(self.buf) if end is None else end

    def remaining(self) -> int:
        return self.end - self.pos

    def _need(self, n: int) -> int:
        pos = self.pos
        if n < 0 or pos + n > self.end:
            self._short(n, pos)
        self.pos = pos + n
        return pos

    def _short(self, n: int, pos: int) -> NoReturn:
        raise DecodeError(f"need {n} bytes at position {pos}, only {self.end - pos} left")

    # Fixed-width integers ------------------------------------------------------
    # Each checks the bounds itself rather than through _need: they are the hot path.

    def int8(self) -> int:
        pos = self.pos
        if pos + 1 > self.end:
            self._short(1, pos)
        self.pos = pos + 1
        value: int = INT8.unpack_from(self.buf, pos)[0]
        return value

    def int16(self) -> int:
        pos = self.pos
        if pos + 2 > self.end:
            self._short(2, pos)
        self.pos = pos + 2
        value: int = INT16.unpack_from(self.buf, pos)[0]
        return value

    def int32(self) -> int:
        pos = self.pos
        if pos + 4 > self.end:
            self._short(4, pos)
        self.pos = pos + 4
        value: int = INT32.unpack_from(self.buf, pos)[0]
        return value

    def int64(self) -> int:
        pos = self.pos
        if pos + 8 > self.end:
            self._short(8, pos)
        self.pos = pos + 8
        value: int = INT64.unpack_from(self.buf, pos)[0]
        return value

    def uint16(self) -> int:
        pos = self.pos
        if pos + 2 > self.end:
            self._short(2, pos)
        self.pos = pos + 2
        value: int = UINT16.unpack_from(self.buf, pos)[0]
        return value

    def uint32(self) -> int:
        pos = self.pos
        if pos + 4 > self.end:
            self._short(4, pos)
        self.pos = pos + 4
        value: int = UINT32.unpack_from(self.buf, pos)[0]
        return value

    def float64(self) -> float:
        pos = self.pos
        if pos + 8 > self.end:
            self._short(8, pos)
        self.pos = pos + 8
        value: float = FLOAT64.unpack_from(self.buf, pos)[0]
        return value

    def boolean(self) -> bool:
        # The guide: 0 is false, anything else is true.
        pos = self.pos
        if pos >= self.end:
            self._short(1, pos)
        self.pos = pos + 1
        return self.buf[pos] != 0

    def unpack(self, layout: struct.Struct) -> tuple[Any, ...]:
        """Several fixed-width fields at once, ``layout`` being big-endian codes of
        :data:`_FIXED_SIZE` (a ``?`` reads as a boolean: anything but 0 is true)."""
        pos = self.pos
        end = pos + layout.size
        if end > self.end:
            self._unpack_short(layout)
        self.pos = end
        return layout.unpack_from(self.buf, pos)

    def _unpack_short(self, layout: struct.Struct) -> NoReturn:
        # Fail on the field that runs out, with the position and message (and the pos
        # left behind) of reading the fields one by one.
        pos = self.pos
        for code in layout.format.lstrip(">"):
            size = _FIXED_SIZE[code]
            if pos + size > self.end:
                self.pos = pos
                self._short(size, pos)
            pos += size
        raise AssertionError(f"{layout.format} fits in {self.end - self.pos} bytes")

    def uuid(self) -> uuid.UUID:
        pos = self._need(16)
        return uuid.UUID(bytes=bytes(self.buf[pos : pos + 16]))

    # Variable-length integers -------------------------------------------------

    def unsigned_varint(self) -> int:
        pos = self.pos
        if pos < self.end:
            first = self.buf[pos]
            if first < 0x80:
                # One byte, as every length and count below 128 is.
                self.pos = pos + 1
                return first
        value, self.pos = decode_unsigned_varint(self.buf, pos, 5, self.end)
        return value

    def varint(self) -> int:
        value, self.pos = decode_varint(self.buf, self.pos, self.end)
        return value

    def varlong(self) -> int:
        value, self.pos = decode_varlong(self.buf, self.pos, self.end)
        return value

    # Lengths ------------------------------------------------------------------

    def _length(self) -> int:
        n = self.int32()
        if n < -1:
            raise DecodeError(f"negative length {n}")
        return n

    # Compact encodings store length + 1, so 0 means null. Their readers subtract the 1
    # themselves rather than through a helper: the call would be most of their cost.

    def array_length(self) -> int | None:
        n = self._length()
        if n == -1:
            return None
        self._check_count(n)
        return n

    def compact_array_length(self) -> int | None:
        n = self.unsigned_varint() - 1
        if n == -1:
            return None
        if n > self.end - self.pos:
            self._check_count(n)
        return n

    def _check_count(self, n: int) -> None:
        # Every element takes at least one byte, so a count above what is left is a lie;
        # refusing it early stops a 4-byte frame from allocating a billion-element list.
        if n > self.end - self.pos:
            raise DecodeError(f"array of {n} elements cannot fit in {self.end - self.pos} bytes")

    # Strings ------------------------------------------------------------------

    def _text(self, n: int) -> str:
        pos = self._need(n)
        try:
            return str(self.buf[pos : pos + n], "utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(f"string at position {pos} is not UTF-8: {e.reason}") from None

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise DecodeError(f"null or negative length {n} for a non-nullable string")
        return self._text(n)

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        if n < 0:
            raise DecodeError(f"negative string length {n}")
        return self._text(n)

    def compact_string(self) -> str:
        n = self.unsigned_varint() - 1
        if n < 0:
            raise DecodeError("null for a non-nullable compact string")
        return self._text(n)

    def compact_nullable_string(self) -> str | None:
        n = self.unsigned_varint() - 1
        if n == -1:
            return None
        return self._text(n)

    # Bytes --------------------------------------------------------------------

    def _raw(self, n: int) -> bytes:
        pos = self._need(n)
        return bytes(self.buf[pos : pos + n])

    def _view(self, n: int) -> memoryview:
        pos = self._need(n)
        return self.buf[pos : pos + n]

    def bytes_(self) -> bytes:
        n = self._length()
        if n < 0:
            raise DecodeError("null for non-nullable bytes")
        return self._raw(n)

    def nullable_bytes(self) -> bytes | None:
        n = self._length()
        return None if n == -1 else self._raw(n)

    def compact_bytes(self) -> bytes:
        n = self.unsigned_varint() - 1
        if n < 0:
            raise DecodeError("null for non-nullable compact bytes")
        return self._raw(n)

    def compact_nullable_bytes(self) -> bytes | None:
        n = self.unsigned_varint() - 1
        return None if n == -1 else self._raw(n)

    def records(self) -> memoryview | None:
        """A ``records`` field: a view into the input, not a copy."""
        n = self._length()
        return None if n == -1 else self._view(n)

    def compact_records(self) -> memoryview | None:
        n = self.unsigned_varint() - 1
        if n == -1:
            return None
        pos = self.pos
        if pos + n > self.end:
            self._short(n, pos)
        self.pos = pos + n
        return self.buf[pos : pos + n]

    # Tagged fields ------------------------------------------------------------

    def tagged_field_count(self) -> int:
        pos = self.pos
        if pos < self.end and self.buf[pos] == 0:
            # Most structs carry no tagged field.
            self.pos = pos + 1
            return 0
        count = self.unsigned_varint()
        self._check_count(count)
        return count

    def tagged_field(self) -> tuple[int, Reader]:
        """One tagged field: its tag and a Reader bounded to its value."""
        tag = self.unsigned_varint()
        size = self.unsigned_varint()
        start = self._need(size)
        return tag, Reader(self.buf, start, start + size)

    def rest(self) -> bytes:
        """Everything left, as bytes (used to keep unknown tagged fields verbatim)."""
        data = bytes(self.buf[self.pos : self.end])
        self.pos = self.end
        return data

    def expect_end(self) -> None:
        if self.pos != self.end:
            raise DecodeError(f"{self.end - self.pos} unexpected trailing bytes")


class Writer:
    """Builds an encoding as a list of chunks; small writes go to one growing buffer."""

    __slots__ = ("_buf", "_chunks", "_size")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._chunks: list[Records] = []
        self._size = 0

    def __len__(self) -> int:
        return self._size + len(self._buf)

    def chunks(self) -> list[Records]:
        """The encoding as a list of buffers, large ``records`` values uncopied."""
        if self._buf:
            return [*self._chunks, self._buf]
        return list(self._chunks)

    def getvalue(self) -> bytes:
        if not self._chunks:
            return bytes(self._buf)
        parts = [c if isinstance(c, _BUFFER_TYPES) else c.read() for c in self._chunks]
        return b"".join([*parts, self._buf])

    def raw(self, data: Buffer) -> None:
        self._buf += data

    def raw_zero_copy(self, data: Records) -> None:
        if isinstance(data, _BUFFER_TYPES) and len(data) < ZERO_COPY_THRESHOLD:
            self._buf += data
            return
        if self._buf:
            self._chunks.append(self._buf)
            self._size += len(self._buf)
            self._buf = bytearray()
        self._chunks.append(data)
        self._size += len(data)

    # Fixed-width integers ------------------------------------------------------

    def int8(self, value: int) -> None:
        try:
            self._buf += INT8.pack(value)
        except struct.error:
            raise EncodeError(f"{value!r} does not fit in int8") from None

    def int16(self, value: int) -> None:
        try:
            self._buf += INT16.pack(value)
        except struct.error:
            raise EncodeError(f"{value!r} does not fit in int16") from None

    def int32(self, value: int) -> None:
        try:
            self._buf += INT32.pack(value)
        except struct.error:
            raise EncodeError(f"{value!r} does not fit in int32") from None

    def int64(self, value: int) -> None:
        try:
            self._buf += INT64.pack(value)
        except struct.error:
            raise EncodeError(f"{value!r} does not fit in int64") from None

    def uint16(self, value: int) -> None:
        try:
            self._buf += UINT16.pack(value)
        except struct.error:
            raise EncodeError(f"{value!r} does not fit in uint16") from None

    def uint32(self, value: int) -> None:
        try:
            self._buf += UINT32.pack(value)
        except struct.error:
            raise EncodeError(f"{value!r} does not fit in uint32") from None

    def float64(self, value: float) -> None:
        self._buf += FLOAT64.pack(value)

    def boolean(self, value: bool) -> None:
        self._buf.append(1 if value else 0)

    def pack(self, layout: struct.Struct, *values: int | float | bool) -> None:
        """Several fixed-width fields at once; ``layout`` as for :meth:`Reader.unpack`."""
        try:
            self._buf += layout.pack(*values)
        except struct.error:
            self._pack_each(layout, values)
            raise

    def _pack_each(self, layout: struct.Struct, values: tuple[int | float | bool, ...]) -> None:
        # Write field by field, so that the value that does not fit raises what (and
        # leaves behind what) the field-by-field calls would.
        for code, value in zip(layout.format.lstrip(">"), values, strict=True):
            if code == "?":
                self.boolean(bool(value))
            elif code == "d":
                self.float64(value)
            else:
                getattr(self, _FIXED_WRITE[code])(value)

    def uuid(self, value: uuid.UUID) -> None:
        self._buf += value.bytes

    # Variable-length integers -------------------------------------------------

    def unsigned_varint(self, value: int) -> None:
        if 0 <= value < 0x80:
            self._buf.append(value)
        elif value >> 32:
            raise EncodeError(f"unsigned varint out of range: {value}")
        else:
            self._buf += encode_unsigned_varint(value)

    def varint(self, value: int) -> None:
        self._buf += encode_varint(value)

    def varlong(self, value: int) -> None:
        self._buf += encode_varlong(value)

    # Lengths ------------------------------------------------------------------

    def array_length(self, items: list[T] | None) -> None:
        self.int32(-1 if items is None else len(items))

    def compact_array_length(self, items: list[T] | None) -> None:
        self.unsigned_varint(0 if items is None else len(items) + 1)

    # Strings ------------------------------------------------------------------

    def string(self, value: str | None) -> None:
        if value is None:
            raise EncodeError("null for a non-nullable string")
        data = value.encode("utf-8")
        if len(data) > 0x7FFF:
            raise EncodeError(f"string of {len(data)} bytes exceeds 32767")
        self._buf += INT16.pack(len(data))
        self._buf += data

    def nullable_string(self, value: str | None) -> None:
        if value is None:
            self._buf += INT16.pack(-1)
        else:
            self.string(value)

    def compact_string(self, value: str | None) -> None:
        if value is None:
            raise EncodeError("null for a non-nullable compact string")
        data = value.encode("utf-8")
        self.unsigned_varint(len(data) + 1)
        self._buf += data

    def compact_nullable_string(self, value: str | None) -> None:
        if value is None:
            self._buf.append(0)
        else:
            self.compact_string(value)

    # Bytes --------------------------------------------------------------------

    def bytes_(self, value: Buffer | None) -> None:
        if value is None:
            raise EncodeError("null for non-nullable bytes")
        self._buf += INT32.pack(len(value))
        self._buf += value

    def nullable_bytes(self, value: Buffer | None) -> None:
        if value is None:
            self._buf += INT32.pack(-1)
        else:
            self.bytes_(value)

    def compact_bytes(self, value: Buffer | None) -> None:
        if value is None:
            raise EncodeError("null for non-nullable compact bytes")
        self.unsigned_varint(len(value) + 1)
        self._buf += value

    def compact_nullable_bytes(self, value: Buffer | None) -> None:
        if value is None:
            self._buf.append(0)
        else:
            self.compact_bytes(value)

    def records(self, value: Records | None) -> None:
        if value is None:
            self._buf += INT32.pack(-1)
            return
        self._buf += INT32.pack(len(value))
        self.raw_zero_copy(value)

    def compact_records(self, value: Records | None) -> None:
        if value is None:
            self._buf.append(0)
            return
        self.unsigned_varint(len(value) + 1)
        self.raw_zero_copy(value)

    # Tagged fields ------------------------------------------------------------

    def tagged_fields(self, fields: list[tuple[int, bytes]]) -> None:
        """Write a tagged-field section from ``(tag, encoded value)`` pairs in any order."""
        if not fields:
            self._buf.append(0)
            return
        fields = sorted(fields, key=_tag_of)
        self.unsigned_varint(len(fields))
        last = -1
        for tag, data in fields:
            if tag == last:
                raise EncodeError(f"tagged field {tag} written twice")
            last = tag
            self.unsigned_varint(tag)
            self.unsigned_varint(len(data))
            self._buf += data


def _tag_of(field: tuple[int, bytes]) -> int:
    return field[0]
