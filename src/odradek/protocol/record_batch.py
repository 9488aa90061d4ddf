"""Kafka record batch v2 (magic 2): layout, validation, iteration, in-place patches, codec.

This module owns the byte format of a record batch and nothing else: which batches a
Produce request may carry (control batches from clients, transactional state, sequence
numbers) is policy for the broker's handlers, and where batches live is storage's
business.

It has three parts with different rules:

* **The hot path** (:func:`validate_batch`, :func:`validate_batches`,
  :func:`iter_batches`, :func:`whole_batches_length`, :func:`set_base_offset`,
  :func:`set_partition_leader_epoch`, :func:`set_max_timestamp`) works on whole batches
  and never looks at a single record. It reads the 61-byte header with one
  ``struct.unpack_from``, computes CRC32C over a ``memoryview`` slice, and patches fields
  in place, so a batch that arrives in a produce request reaches the log without a copy
  made in Python. Compressed batches are stored as they came: nothing here recompresses.
* **The record scan** (:func:`scan_records`, :func:`record_timestamps`,
  :class:`DecompressBuffer`) is what the leader's produce path runs on every batch a
  client sends, as Kafka's LogValidator does: it walks the records by their length and
  field varints without building any object, so that the record count, the offset
  deltas, each record's framing and the timestamps are known to agree with the header.
  An uncompressed batch is walked where it lies in the request; a compressed one is
  decompressed once, into a reusable buffer of bounded size.
* **The record codec** (:class:`Record`, :func:`encode_batch`, :func:`decode_records`,
  :func:`validate_records`, :func:`encode_control_batch`, :func:`control_record_type`)
  is for tests, tools, the controller's own metadata log and transaction markers. It
  decompresses gzip, snappy (raw and xerial-framed), lz4 (frame format) and zstd.

Batch layout (big-endian; offsets from the start of the batch)::

    baseOffset            int64   0   } outside the CRC: the broker patches these two
    batchLength           int32   8   } (and reads the length) without touching the CRC
    partitionLeaderEpoch  int32  12   }
    magic                 int8   16
    crc                   uint32 17   CRC32C of bytes [21, end of batch)
    attributes            int16  21
    lastOffsetDelta       int32  23
    baseTimestamp         int64  27
    maxTimestamp          int64  35
    producerId            int64  43
    producerEpoch         int16  51
    baseSequence          int32  53
    recordsCount          int32  57
    records               ...    61

Errors: a batch that fails a check raises
:class:`~odradek.core.errors.InvalidRecordBatchError` whose ``problem`` is one of
:data:`PROBLEMS`; a malformed record found while decoding raises
:class:`~odradek.core.errors.DecodeError`.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import NamedTuple, NoReturn

import cramjam
import crc32c

from odradek.core.errors import (
    DecodeError,
    EncodeError,
    InvalidRecordBatchError,
    InvariantError,
)
from odradek.core.invariant import invariant
from odradek.protocol.primitives import (
    decode_unsigned_varint,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
)

__all__ = [
    "ATTRIBUTES_OFFSET",
    "BAD_COMPRESSION",
    "BAD_CRC",
    "BAD_LENGTH",
    "BAD_MAGIC",
    "BAD_OFFSET_DELTA",
    "BAD_RECORDS",
    "BAD_RECORD_COUNT",
    "BASE_OFFSET_OFFSET",
    "BASE_SEQUENCE_OFFSET",
    "BASE_TIMESTAMP_OFFSET",
    "COMPRESSION_CODEC_MASK",
    "CONTROL_FLAG_MASK",
    "CRC_OFFSET",
    "DECOMPRESSED_TOO_LARGE",
    "DELETE_HORIZON_FLAG_MASK",
    "LAST_OFFSET_DELTA_OFFSET",
    "LENGTH_OFFSET",
    "LOG_OVERHEAD",
    "MAGIC",
    "MAGIC_OFFSET",
    "MAX_TIMESTAMP_OFFSET",
    "MIN_RECORD_SIZE",
    "NO_TIMESTAMP",
    "PARTITION_LEADER_EPOCH_OFFSET",
    "PROBLEMS",
    "PRODUCER_EPOCH_OFFSET",
    "PRODUCER_ID_OFFSET",
    "RECORDS_COUNT_OFFSET",
    "RECORDS_OFFSET",
    "RECORD_BATCH_OVERHEAD",
    "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_FLAG_MASK",
    "TRUNCATED",
    "BatchHeader",
    "BatchIterator",
    "Buffer",
    "Compression",
    "ControlType",
    "DecompressBuffer",
    "Record",
    "RecordsScan",
    "TimestampType",
    "WritableBuffer",
    "control_record_type",
    "decode_records",
    "encode_batch",
    "encode_control_batch",
    "header_at",
    "iter_batches",
    "record_timestamps",
    "scan_records",
    "set_base_offset",
    "set_max_timestamp",
    "set_partition_leader_epoch",
    "validate_batch",
    "validate_batches",
    "validate_records",
    "whole_batches_length",
]

Buffer = bytes | bytearray | memoryview
"""Anything a batch can be read from."""

WritableBuffer = bytearray | memoryview
"""Anything a batch can be patched in (a memoryview must be writable)."""

# Layout ---------------------------------------------------------------------------
# Kafka's own constant names (DefaultRecordBatch.java), so the two can be read side by side.

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61

RECORD_BATCH_OVERHEAD = RECORDS_OFFSET
"""Size of the batch header; a batch with no records is exactly this long."""

LOG_OVERHEAD = LENGTH_OFFSET + 4
"""baseOffset + batchLength: the bytes not counted by batchLength."""

_MIN_BATCH_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD

MAGIC = 2

MIN_RECORD_SIZE = 7
"""The smallest record on the wire: a one-byte length varint followed by attributes and
one-byte timestampDelta, offsetDelta, key length, value length and header count."""

NO_TIMESTAMP = -1

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")
_CONTROL_KEY = struct.Struct(">hh")

invariant(_HEADER.size == RECORD_BATCH_OVERHEAD, "batch header struct must be 61 bytes")


class Compression(IntEnum):
    """The codec in attribute bits 0-2."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    """Attribute bit 3: who set the timestamps."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlType(IntEnum):
    """The ``type`` in a control record's key (ControlRecordType.java)."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    VOTERS = 6


# Validation problems, in the order validate_batch checks them ----------------------

TRUNCATED = "TRUNCATED"
"""Fewer than 12 bytes for baseOffset + batchLength, or the batch runs past the buffer."""
BAD_LENGTH = "BAD_LENGTH"
"""batchLength is smaller than the rest of the header (49), so it cannot be a batch."""
BAD_MAGIC = "BAD_MAGIC"
"""magic is not 2."""
BAD_CRC = "BAD_CRC"
"""The stored CRC32C differs from the one computed over [attributes, end of batch)."""
BAD_COMPRESSION = "BAD_COMPRESSION"
"""Unknown codec id (5-7), or (deep check only) a records section that fails to
decompress."""
BAD_RECORD_COUNT = "BAD_RECORD_COUNT"
"""recordsCount and lastOffsetDelta disagree, or the count cannot fit in the batch."""
BAD_RECORDS = "BAD_RECORDS"
"""(Deep check only) a record's length runs outside the records section, or its fields do
not fill it exactly (bytes left over, a negative length, a field running past it)."""
BAD_OFFSET_DELTA = "BAD_OFFSET_DELTA"
"""(Record scan only) a record's offsetDelta is not its position in the batch: a client's
batch numbers its records 0, 1, ... n-1."""
DECOMPRESSED_TOO_LARGE = "DECOMPRESSED_TOO_LARGE"
"""(Record scan only) the records section decompresses to more than the buffer's limit."""

PROBLEMS = (
    TRUNCATED,
    BAD_LENGTH,
    BAD_MAGIC,
    BAD_CRC,
    BAD_COMPRESSION,
    BAD_RECORD_COUNT,
    BAD_RECORDS,
    BAD_OFFSET_DELTA,
    DECOMPRESSED_TOO_LARGE,
)


# The header view -----------------------------------------------------------------


class BatchHeader(NamedTuple):
    """The 61-byte header of the batch at ``position``, read with one ``unpack_from``.

    A plain tuple holds no reference to the buffer, so a ``bytearray`` the header was
    read from can still be resized or reused afterwards.
    """

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def end(self) -> int:
        """Position just past this batch: where the next batch starts."""
        return self.position + self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        """The codec id; compare with :class:`Compression`. An int, not the enum, because
        an unvalidated header may carry an unknown id (5-7)."""
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes & TIMESTAMP_TYPE_MASK) >> 3)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon_ms(self) -> bool:
        """Set by compaction; base_timestamp then holds the delete horizon."""
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)


def _byte_view(buf: Buffer) -> Buffer:
    # A memoryview of another format (say 'I') would make len() count items, not bytes.
    if isinstance(buf, memoryview) and (buf.format != "B" or buf.ndim != 1):
        return buf.cast("B")
    return buf


# _make skips the keyword handling of __new__: a third cheaper, and this runs per batch.
_new_header = BatchHeader._make


def header_at(buf: Buffer, pos: int) -> BatchHeader:
    """The header of the batch at ``pos``, unchecked (for scans of already-valid logs)."""
    return _new_header((pos, *_HEADER.unpack_from(buf, pos)))


# Validation (hot path) -----------------------------------------------------------


def validate_batch(buf: Buffer, pos: int = 0, *, compacted: bool = False) -> BatchHeader:
    """Check the batch at ``pos`` without decoding its records; return its header.

    The checks run in this order, and the first failure raises
    :class:`InvalidRecordBatchError` with that ``problem``:

    1. ``TRUNCATED``: fewer than 12 bytes at ``pos``, so batchLength cannot be read.
    2. ``BAD_LENGTH``: batchLength < 49, too short even for the rest of the header.
       Checked before the body's extent so that a negative length is named for what it is.
    3. ``TRUNCATED``: the batch (12 + batchLength bytes) runs past the end of ``buf``.
    4. ``BAD_MAGIC``: magic is not 2. Before the CRC because the CRC's place and range
       differ in the older formats.
    5. ``BAD_CRC``: CRC32C over [attributes, end) differs from the stored value. Every
       later check reads fields inside that range, so they are only trusted after it.
    6. ``BAD_COMPRESSION``: the codec id is not one of :class:`Compression`.
    7. ``BAD_RECORD_COUNT``: with ``compacted=False`` (the default, for batches a client
       produced) recordsCount must be >= 1 and lastOffsetDelta must equal count - 1, as
       Kafka's LogValidator requires. With ``compacted=True`` (log recovery, replicas
       fetching compacted data) count >= 0 and lastOffsetDelta >= count - 1, because
       compaction removes records but keeps the batch's offset range, and may leave a
       batch with no records at all. In both modes an uncompressed batch whose count
       exceeds what fits at :data:`MIN_RECORD_SIZE` bytes a record is refused.

    The records themselves are not walked; see :func:`validate_records` for that.
    """
    buf = _byte_view(buf)
    # The context manager releases the export at once, so a bytearray can be resized
    # after validation; nothing returned holds a view.
    with memoryview(buf) as view:
        return _validate_at(buf, view, pos, compacted)


def _validate_at(buf: Buffer, view: memoryview, pos: int, compacted: bool) -> BatchHeader:
    """validate_batch's body, given a byte view of ``buf`` made once by the caller."""
    size = len(buf)
    if pos < 0:
        # Not invariant(): its message would be formatted on every call of the hot path.
        raise InvariantError(f"negative batch position {pos}")
    if size - pos < RECORD_BATCH_OVERHEAD:
        # Any batch that fits is at least a header long, so this is always a failure;
        # the helper picks check 1, 2 or 3 so the documented order still holds.
        _raise_short(buf, pos, size)
    fields = _HEADER.unpack_from(buf, pos)
    batch_length: int = fields[1]
    if batch_length < _MIN_BATCH_LENGTH:
        raise _bad_length(pos, batch_length)
    end = pos + LOG_OVERHEAD + batch_length
    if end > size:
        raise _truncated(pos, batch_length, end - size)
    if fields[3] != MAGIC:
        raise InvalidRecordBatchError(BAD_MAGIC, f"batch at {pos}: magic {fields[3]}, not 2")
    # The slice is a view, so the CRC reads the caller's buffer without copying it.
    actual = int(crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET : end]))
    if actual != fields[4]:
        raise InvalidRecordBatchError(
            BAD_CRC,
            f"batch at {pos}: stored crc 0x{fields[4]:08x}, computed 0x{actual:08x}",
        )
    codec = fields[5] & COMPRESSION_CODEC_MASK
    if codec > Compression.ZSTD:
        raise InvalidRecordBatchError(
            BAD_COMPRESSION, f"batch at {pos}: unknown compression codec {codec}"
        )
    count: int = fields[12]
    delta: int = fields[6]
    if compacted:
        if count < 0 or delta < count - 1:
            raise InvalidRecordBatchError(
                BAD_RECORD_COUNT,
                f"batch at {pos}: recordsCount {count} with lastOffsetDelta {delta}; "
                f"need count >= 0 and lastOffsetDelta >= count - 1",
            )
    elif count < 1 or delta != count - 1:
        raise InvalidRecordBatchError(
            BAD_RECORD_COUNT,
            f"batch at {pos}: recordsCount {count} with lastOffsetDelta {delta}; "
            f"need count >= 1 and lastOffsetDelta == count - 1",
        )
    # Only an uncompressed body bounds the count: compressed records can be any ratio
    # smaller. This stops a lying count before anything trusts it to size a loop.
    if codec == Compression.NONE and count * MIN_RECORD_SIZE > batch_length - _MIN_BATCH_LENGTH:
        raise InvalidRecordBatchError(
            BAD_RECORD_COUNT,
            f"batch at {pos}: {count} records cannot fit in "
            f"{batch_length - _MIN_BATCH_LENGTH} bytes",
        )
    return _new_header((pos, *fields))


def _raise_short(buf: Buffer, pos: int, size: int) -> NoReturn:
    """Fewer than 61 bytes at ``pos``: name the failure in validate_batch's order."""
    if size - pos < LOG_OVERHEAD:
        raise InvalidRecordBatchError(
            TRUNCATED, f"batch at {pos}: {max(size - pos, 0)} bytes, too few for its length"
        )
    batch_length: int = _INT32.unpack_from(buf, pos + LENGTH_OFFSET)[0]
    if batch_length < _MIN_BATCH_LENGTH:
        raise _bad_length(pos, batch_length)
    raise _truncated(pos, batch_length, pos + LOG_OVERHEAD + batch_length - size)


def _bad_length(pos: int, batch_length: int) -> InvalidRecordBatchError:
    return InvalidRecordBatchError(
        BAD_LENGTH,
        f"batch at {pos}: batchLength {batch_length} is below the minimum {_MIN_BATCH_LENGTH}",
    )


def _truncated(pos: int, batch_length: int, missing: int) -> InvalidRecordBatchError:
    return InvalidRecordBatchError(
        TRUNCATED,
        f"batch at {pos}: batchLength {batch_length} needs {missing} more bytes "
        f"than the buffer holds",
    )


def validate_batches(buf: Buffer, *, compacted: bool = False) -> list[BatchHeader]:
    """Validate every batch in ``buf`` (CRC included); return their headers in order.

    This is what Produce handling calls on a partition's ``records``: the bytes must be
    whole batches end to end, so a torn tail raises ``TRUNCATED`` here rather than being
    ignored as :func:`iter_batches` would. The first bad batch raises; an empty buffer
    gives an empty list.
    """
    buf = _byte_view(buf)
    size = len(buf)
    headers: list[BatchHeader] = []
    pos = 0
    # One view for all the batches: making one per batch costs a tenth of the time spent
    # on a 1 KiB batch.
    with memoryview(buf) as view:
        while pos < size:
            header = _validate_at(buf, view, pos, compacted)
            headers.append(header)
            pos = header.end
    return headers


# Iteration (hot path) ------------------------------------------------------------


class BatchIterator(Iterator[BatchHeader]):
    """Walks concatenated batches by their length fields alone: no CRC, no magic check.

    Iteration stops without an exception at a torn tail: fewer than 12 bytes left, or a
    batchLength that runs past the end. Afterwards :attr:`position` is just past the last
    whole batch and :attr:`valid_bytes` is the length of the whole-batch prefix from
    ``start``, which is where a log segment would be truncated.

    A batchLength below 49 cannot come from a tear (the length field itself was read
    whole), so it raises ``BAD_LENGTH`` instead, with :attr:`position` left at that
    batch. A zero-filled tail, which some file systems leave after a crash, shows up
    this way.
    """

    __slots__ = ("_buf", "_size", "position", "start")

    def __init__(self, buf: Buffer, start: int = 0) -> None:
        invariant(start >= 0, f"negative start {start}")
        self._buf = _byte_view(buf)
        self._size = len(self._buf)
        self.start = start
        self.position = start

    def __iter__(self) -> BatchIterator:
        return self

    def __next__(self) -> BatchHeader:
        pos = self.position
        if self._size - pos < LOG_OVERHEAD:
            raise StopIteration
        batch_length: int = _INT32.unpack_from(self._buf, pos + LENGTH_OFFSET)[0]
        if batch_length < _MIN_BATCH_LENGTH:
            raise _bad_length(pos, batch_length)
        end = pos + LOG_OVERHEAD + batch_length
        if end > self._size:
            raise StopIteration
        header = header_at(self._buf, pos)
        self.position = end
        return header

    @property
    def valid_bytes(self) -> int:
        """Bytes from ``start`` covered by the whole batches yielded so far."""
        return self.position - self.start

    @property
    def tail_bytes(self) -> int:
        """Bytes after :attr:`position`: the torn tail once iteration has stopped."""
        return self._size - self.position


def iter_batches(buf: Buffer, start: int = 0) -> BatchIterator:
    """Iterate over the batches in ``buf`` from ``start``; see :class:`BatchIterator`."""
    return BatchIterator(buf, start)


def whole_batches_length(buf: Buffer, start: int = 0) -> int:
    """Length of the prefix of ``buf[start:]`` made of whole batches (by length fields).

    Raises ``BAD_LENGTH`` like :class:`BatchIterator` for an impossible length.
    """
    batches = BatchIterator(buf, start)
    for _ in batches:
        pass
    return batches.valid_bytes


# In-place patches (hot path) -----------------------------------------------------


def set_base_offset(buf: WritableBuffer, pos: int, offset: int) -> None:
    """Write baseOffset of the batch at ``pos``. It lies before the CRC range, so the CRC
    stays valid and need not be recomputed."""
    if pos < 0:
        raise InvariantError(f"negative batch position {pos}")
    _INT64.pack_into(buf, pos + BASE_OFFSET_OFFSET, offset)


def set_partition_leader_epoch(buf: WritableBuffer, pos: int, epoch: int) -> None:
    """Write partitionLeaderEpoch of the batch at ``pos``; outside the CRC range too."""
    if pos < 0:
        raise InvariantError(f"negative batch position {pos}")
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_max_timestamp(
    buf: WritableBuffer, pos: int, timestamp_type: TimestampType, max_timestamp: int
) -> bool:
    """Give the batch at ``pos`` this timestamp type and maxTimestamp, as Kafka's
    ``setMaxTimestamp`` does; return whether anything changed.

    Both fields lie inside the CRC range, so a change rewrites the CRC: one CRC32C pass
    over the batch, in place. A batch that already says the same is left alone, CRC and
    all, which is the common case (a CreateTime batch whose producer computed its max).
    The batch must have been validated: its attributes and length are trusted here.
    """
    if pos < 0:
        raise InvariantError(f"negative batch position {pos}")
    attributes: int = _INT16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]
    current_type = (attributes & TIMESTAMP_TYPE_MASK) >> 3
    current_max: int = _INT64.unpack_from(buf, pos + MAX_TIMESTAMP_OFFSET)[0]
    if current_type == timestamp_type and current_max == max_timestamp:
        return False
    attributes = (attributes & ~TIMESTAMP_TYPE_MASK) | (int(timestamp_type) << 3)
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
    end = pos + LOG_OVERHEAD + _INT32.unpack_from(buf, pos + LENGTH_OFFSET)[0]
    with memoryview(buf) as view:
        crc = crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET : end])
    _UINT32.pack_into(buf, pos + CRC_OFFSET, crc)
    return True


# Records -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    """One record of a batch, as a client sees it.

    ``timestamp`` is absolute (ms): the wire carries ``timestamp - baseTimestamp`` as a
    varlong. For a LOG_APPEND_TIME batch Kafka reports the batch's max_timestamp to
    consumers instead; this class keeps what the wire says so that decoding is the exact
    inverse of encoding.
    """

    offset_delta: int
    timestamp: int
    key: bytes | None = None
    value: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    attributes: int = 0
    """Unused by Kafka (always 0); kept so that any byte decodes and re-encodes."""


def _append_nullable(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out += encode_varint(-1)
    else:
        out += encode_varint(len(data))
        out += data


def _encode_record(record: Record, base_timestamp: int) -> bytes:
    body = bytearray()
    try:
        body += _INT8.pack(record.attributes)
    except struct.error:
        raise EncodeError(f"record attributes {record.attributes} do not fit in int8") from None
    body += encode_varlong(record.timestamp - base_timestamp)
    body += encode_varint(record.offset_delta)
    _append_nullable(body, record.key)
    _append_nullable(body, record.value)
    body += encode_varint(len(record.headers))
    for header_key, header_value in record.headers:
        raw_key = header_key.encode("utf-8")
        body += encode_varint(len(raw_key))
        body += raw_key
        _append_nullable(body, header_value)
    return encode_varint(len(body)) + body


# Compression ---------------------------------------------------------------------

# snappy-java's SnappyOutputStream (what the Java client uses) writes this 16-byte header
# (magic, version 1, compatible version 1) and then blocks of [int32 length][raw snappy].
# librdkafka and others write a raw snappy stream. Java's SnappyInputStream accepts both
# by looking at the magic, and so do we.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java's default, so our output matches the Java client


def _compress(codec: int, data: bytes) -> bytes:
    if codec == Compression.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == Compression.SNAPPY:
        out = bytearray(_XERIAL_HEADER)
        with memoryview(data) as view:
            for start in range(0, len(data), _XERIAL_BLOCK_SIZE):
                block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
                out += _INT32.pack(len(block))
                out += block
        return bytes(out)
    if codec == Compression.LZ4:
        # The LZ4 frame format: what Kafka's KafkaLZ4BlockOutputStream writes for magic 2.
        return bytes(cramjam.lz4.compress(data))
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise EncodeError(f"unknown compression codec {codec}")


def _decompress(codec: int, data: memoryview) -> bytes:
    """Decompress a records section; raises DecodeError for anything that does not."""
    try:
        if codec == Compression.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == Compression.SNAPPY:
            return _snappy_decompress(data)
        if codec == Compression.LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == Compression.ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as e:
        raise DecodeError(f"records do not decompress with codec {codec}: {e}") from None
    raise DecodeError(f"unknown compression codec {codec}")


def _snappy_decompress(data: memoryview) -> bytes:
    if bytes(data[: len(_XERIAL_MAGIC)]) != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(data))
    # The version fields are not checked: librdkafka ignores them too, and one producer in
    # the wild writes them little-endian.
    if len(data) < len(_XERIAL_HEADER):
        raise DecodeError("xerial snappy header is truncated")
    out = bytearray()
    pos = len(_XERIAL_HEADER)
    end = len(data)
    while pos < end:
        if end - pos < 4:
            raise DecodeError(f"xerial snappy block length truncated at {pos}")
        block_length: int = _INT32.unpack_from(data, pos)[0]
        pos += 4
        if block_length < 0 or block_length > end - pos:
            raise DecodeError(f"xerial snappy block of {block_length} bytes at {pos - 4}")
        out += cramjam.snappy.decompress_raw(data[pos : pos + block_length])
        pos += block_length
    return bytes(out)


# Encoding ------------------------------------------------------------------------


def encode_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    compression: Compression = Compression.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    base_timestamp: int | None = None,
) -> bytes:
    """Encode ``records`` as one batch, computing lastOffsetDelta, maxTimestamp and CRC.

    For tests and tools: the broker never builds batches from records. Offset deltas
    must be non-negative and strictly increasing (a compacted batch may skip some).
    ``base_timestamp`` defaults to the first record's timestamp, as the Java client
    does; deltas may be negative. An empty ``records`` gives a batch with count 0,
    lastOffsetDelta -1 and timestamps of -1, the shape only compaction produces. The
    requested codec is used even when it makes the batch larger.
    """
    previous = -1
    for record in records:
        if record.offset_delta <= previous:
            raise EncodeError(
                f"offset deltas must increase from 0: {record.offset_delta} after {previous}"
            )
        previous = record.offset_delta
    if base_timestamp is None:
        base_timestamp = records[0].timestamp if records else NO_TIMESTAMP
    max_timestamp = max((r.timestamp for r in records), default=NO_TIMESTAMP)
    last_offset_delta = records[-1].offset_delta if records else -1

    section = b"".join([_encode_record(r, base_timestamp) for r in records])
    if compression != Compression.NONE:
        section = _compress(compression, section)

    attributes = int(compression) | (int(timestamp_type) << 3)
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK

    out = bytearray(RECORD_BATCH_OVERHEAD + len(section))
    try:
        _HEADER.pack_into(
            out,
            0,
            base_offset,
            len(out) - LOG_OVERHEAD,
            partition_leader_epoch,
            MAGIC,
            0,  # The CRC covers the header fields after it, so it is written last.
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
    except struct.error as e:
        raise EncodeError(f"batch header field out of range: {e}") from None
    out[RECORDS_OFFSET:] = section
    _UINT32.pack_into(out, CRC_OFFSET, crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


# Decoding ------------------------------------------------------------------------


def _records_section(buf: Buffer, header: BatchHeader) -> memoryview:
    """The batch's records, decompressed if need be, as a byte view."""
    with memoryview(buf) as view:
        section = view[header.position + RECORDS_OFFSET : header.end]
    if header.compression == Compression.NONE:
        return section
    return memoryview(_decompress(header.compression, section))


def _decode_nullable(data: memoryview, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    length, pos = decode_varint(data, pos, end)
    if length == -1:
        return None, pos
    if length < -1 or length > end - pos:
        raise DecodeError(f"{what} length {length} at {pos} does not fit in its record")
    return bytes(data[pos : pos + length]), pos + length


def _decode_record(data: memoryview, pos: int, end: int, base_timestamp: int) -> tuple[Record, int]:
    length, pos = decode_varint(data, pos, end)
    if length < 0 or length > end - pos:
        raise DecodeError(f"record length {length} at {pos} runs outside the batch")
    record_end = pos + length
    if pos >= record_end:
        raise DecodeError(f"empty record at {pos}")
    attributes: int = _INT8.unpack_from(data, pos)[0]
    pos += 1
    timestamp_delta, pos = decode_varlong(data, pos, record_end)
    offset_delta, pos = decode_varint(data, pos, record_end)
    key, pos = _decode_nullable(data, pos, record_end, "key")
    value, pos = _decode_nullable(data, pos, record_end, "value")
    header_count, pos = decode_varint(data, pos, record_end)
    if header_count < 0:
        raise DecodeError(f"negative header count {header_count}")
    headers: list[tuple[str, bytes | None]] = []
    # A lying header count cannot make this loop long: each header reads at least two
    # bytes, and the record's end stops it.
    for _ in range(header_count):
        key_length, pos = decode_varint(data, pos, record_end)
        if key_length < 0 or key_length > record_end - pos:
            raise DecodeError(f"header key length {key_length} does not fit in its record")
        try:
            header_key = str(data[pos : pos + key_length], "utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(f"header key at {pos} is not UTF-8: {e.reason}") from None
        pos += key_length
        header_value, pos = _decode_nullable(data, pos, record_end, "header value")
        headers.append((header_key, header_value))
    if pos != record_end:
        raise DecodeError(f"record ending at {record_end} has {record_end - pos} extra bytes")
    record = Record(
        offset_delta=offset_delta,
        timestamp=base_timestamp + timestamp_delta,
        key=key,
        value=value,
        headers=headers,
        attributes=attributes,
    )
    return record, pos


def decode_records(buf: Buffer, pos: int = 0) -> list[Record]:
    """Decode every record of the batch at ``pos`` (decompressing as needed).

    The batch is checked first with ``validate_batch(compacted=True)``, CRC included,
    and those failures raise :class:`InvalidRecordBatchError`; malformed records raise
    :class:`DecodeError`, as does a records section holding more or fewer records than
    recordsCount. Not for the hot path.
    """
    buf = _byte_view(buf)
    header = validate_batch(buf, pos, compacted=True)
    data = _records_section(buf, header)
    end = len(data)
    records: list[Record] = []
    cursor = 0
    # A lying count cannot make this loop long: each record consumes at least one byte
    # and decoding stops with DecodeError when the data runs out.
    for _ in range(header.records_count):
        record, cursor = _decode_record(data, cursor, end, header.base_timestamp)
        records.append(record)
    if cursor != end:
        raise DecodeError(
            f"batch at {pos}: {end - cursor} bytes left after {header.records_count} records"
        )
    return records


def validate_records(buf: Buffer, pos: int = 0, *, compacted: bool = False) -> BatchHeader:
    """The deep check: :func:`validate_batch`, then walk the records by their lengths.

    Not on the hot path. The records section (decompressed first, if compressed) must be
    exactly a sequence of length-prefixed records, each inside the section, and their
    number must equal recordsCount. Raises ``BAD_RECORDS`` for a length varint that is
    malformed, negative or runs past the section, ``BAD_COMPRESSION`` for a section that
    does not decompress, and ``BAD_RECORD_COUNT`` for a count that does not match.
    The records' fields are not decoded; :func:`decode_records` does that.
    """
    buf = _byte_view(buf)
    header = validate_batch(buf, pos, compacted=compacted)
    try:
        data = _records_section(buf, header)
    except DecodeError as e:
        raise InvalidRecordBatchError(BAD_COMPRESSION, f"batch at {pos}: {e}") from None
    end = len(data)
    cursor = 0
    walked = 0
    while cursor < end:
        try:
            length, body = decode_varint(data, cursor, end)
        except DecodeError as e:
            raise InvalidRecordBatchError(
                BAD_RECORDS, f"batch at {pos}: record {walked}: {e}"
            ) from None
        if length < 0 or length > end - body:
            raise InvalidRecordBatchError(
                BAD_RECORDS,
                f"batch at {pos}: record {walked} has length {length} with "
                f"{end - body} bytes left in the batch",
            )
        cursor = body + length
        walked += 1
    if walked != header.records_count:
        raise InvalidRecordBatchError(
            BAD_RECORD_COUNT,
            f"batch at {pos}: recordsCount {header.records_count}, but it holds {walked}",
        )
    return header


# The record scan (the produce path) ----------------------------------------------

# A record's body is at least attributes, timestampDelta, offsetDelta, key length, value
# length and header count, one byte each; its length varint comes before it.
_MIN_RECORD_BODY = MIN_RECORD_SIZE - 1

# What cramjam says when the output buffer fills before the stream ends (lz4, zstd, gzip).
_OUTPUT_FULL = "whole buffer"

_TRIM_BYTES = 8 * 1024 * 1024
"""After a decompression this large the buffer's pages are handed back to the OS, so one
huge batch does not keep the node's memory up."""


class DecompressBuffer:
    """Decompresses records sections into one reusable buffer of at most ``limit`` bytes.

    The buffer is an anonymous memory map of ``limit + 1`` bytes, made on first use: the
    OS gives it pages only as they are written, so a large limit costs address space, not
    memory, and reusing it spares the page faults and zeroing a new buffer would cost on
    every batch (with a fresh map per batch, a 1 MiB lz4 section decompressed 1.7 times
    slower here). A section that would decompress to more than ``limit`` is refused with
    ``DECOMPRESSED_TOO_LARGE`` as soon as the output passes it: a small compressed batch
    cannot make us produce gigabytes.

    A view returned by :meth:`records` is valid until the next call or :meth:`release`;
    one thread uses one buffer.
    """

    __slots__ = ("_map", "_used", "limit")

    def __init__(self, limit: int) -> None:
        invariant(limit > 0, f"decompression limit {limit}")
        self.limit = limit
        self._map: mmap.mmap | None = None
        self._used = 0

    def records(self, buf: Buffer, header: BatchHeader) -> memoryview:
        """The batch's records section as a byte view: where it lies in ``buf`` when
        uncompressed (no copy), else decompressed into this buffer.

        Raises ``BAD_COMPRESSION`` for a section that does not decompress and
        ``DECOMPRESSED_TOO_LARGE`` for one whose records exceed the limit.
        """
        buf = _byte_view(buf)
        with memoryview(buf) as whole:
            section = whole[header.position + RECORDS_OFFSET : header.end]
        codec = header.compression
        if codec == Compression.NONE:
            return section
        self.release()
        if self._map is None:
            self._map = mmap.mmap(-1, self.limit + 1)
        with memoryview(self._map) as out:
            size = self._decompress_into(codec, section, out, header.position)
        self._used = size
        return memoryview(self._map)[:size]

    def release(self) -> None:
        """Hand the pages of a large decompression back to the OS (views go stale)."""
        if self._map is not None and self._used > _TRIM_BYTES:
            self._map.madvise(mmap.MADV_DONTNEED)
        self._used = 0

    def _decompress_into(self, codec: int, section: memoryview, out: memoryview, pos: int) -> int:
        try:
            if codec == Compression.SNAPPY:
                return self._snappy_into(section, out, pos)
            if codec == Compression.GZIP:
                size = int(cramjam.gzip.decompress_into(section, out))
            elif codec == Compression.LZ4:
                size = int(cramjam.lz4.decompress_into(section, out))
            elif codec == Compression.ZSTD:
                size = int(cramjam.zstd.decompress_into(section, out))
            else:
                raise InvalidRecordBatchError(
                    BAD_COMPRESSION, f"batch at {pos}: unknown compression codec {codec}"
                )
        except cramjam.DecompressionError as e:
            if _OUTPUT_FULL in str(e):
                raise self._too_large(pos) from None
            raise InvalidRecordBatchError(
                BAD_COMPRESSION, f"batch at {pos}: records do not decompress: {e}"
            ) from None
        if size > self.limit:
            raise self._too_large(pos)
        return size

    def _snappy_into(self, section: memoryview, out: memoryview, pos: int) -> int:
        # A raw snappy stream starts with its uncompressed length, so the limit is checked
        # before anything is decompressed; xerial framing is a sequence of such streams.
        if bytes(section[: len(_XERIAL_MAGIC)]) != _XERIAL_MAGIC:
            return self._snappy_block(section, out, 0, pos)
        if len(section) < len(_XERIAL_HEADER):
            raise InvalidRecordBatchError(
                BAD_COMPRESSION, f"batch at {pos}: xerial snappy header is truncated"
            )
        size = 0
        cursor = len(_XERIAL_HEADER)
        end = len(section)
        while cursor < end:
            if end - cursor < 4:
                raise InvalidRecordBatchError(
                    BAD_COMPRESSION, f"batch at {pos}: xerial snappy block length truncated"
                )
            block_length: int = _INT32.unpack_from(section, cursor)[0]
            cursor += 4
            if block_length < 0 or block_length > end - cursor:
                raise InvalidRecordBatchError(
                    BAD_COMPRESSION,
                    f"batch at {pos}: xerial snappy block of {block_length} bytes",
                )
            size = self._snappy_block(section[cursor : cursor + block_length], out, size, pos)
            cursor += block_length
        return size

    def _snappy_block(self, block: memoryview, out: memoryview, size: int, pos: int) -> int:
        claimed = int(cramjam.snappy.decompress_raw_len(block))
        if claimed > self.limit - size:
            raise self._too_large(pos)
        return size + int(cramjam.snappy.decompress_raw_into(block, out[size : self.limit]))

    def _too_large(self, pos: int) -> InvalidRecordBatchError:
        return InvalidRecordBatchError(
            DECOMPRESSED_TOO_LARGE,
            f"batch at {pos}: records decompress to more than {self.limit} bytes",
        )


class RecordsScan(NamedTuple):
    """What :func:`scan_records` learned from a batch's records."""

    min_timestamp: int
    """The smallest record timestamp (baseTimestamp + the smallest timestampDelta)."""
    max_timestamp: int
    """The largest record timestamp, or NO_TIMESTAMP (-1) if all are smaller: the value
    Kafka gives the batch's maxTimestamp."""
    keyless: int
    """How many records have a null key (a compacted topic refuses them)."""


def _zigzag_at(data: Buffer, pos: int, end: int, max_bytes: int, index: int) -> tuple[int, int]:
    """The signed varint at ``pos`` (the scan's slow path, for multi-byte encodings)."""
    try:
        raw, pos = decode_unsigned_varint(data, pos, max_bytes, end)
    except DecodeError as e:
        raise InvalidRecordBatchError(BAD_RECORDS, f"record {index}: {e}") from None
    return (raw >> 1) ^ -(raw & 1), pos


def scan_records(data: Buffer, header: BatchHeader) -> RecordsScan:
    """Walk the records of a client's batch; raise if they disagree with its header.

    ``data`` is the records section (from :meth:`DecompressBuffer.records`); ``header``
    the batch's validated header. For every record, in order:

    * its length varint must be sane and the record must lie inside the section
      (``BAD_RECORDS``), and its fields (attributes, timestampDelta, offsetDelta, key,
      value, headers) must fill exactly that length: no byte over, none missing
      (``BAD_RECORDS``);
    * its offsetDelta must be its position: 0, 1, ... (``BAD_OFFSET_DELTA``);
    * there must be exactly recordsCount records and nothing after the last one
      (``BAD_RECORD_COUNT``). validate_batch has already tied lastOffsetDelta to the
      count, so the last offset delta is right too.

    No key, value or header is copied or decoded: lengths are read and skipped. The walk
    stops at recordsCount records, so a batch that claims few records but carries many
    costs no more than its claim. About 0.6-0.9 us a record here (1 MiB of 1 KiB records
    in about 0.65 ms); see ``bench/bench_record_batch.py``.
    """
    count = header.records_count
    base_timestamp = header.base_timestamp
    end = len(data)
    pos = 0
    low = 1 << 63
    high = -(1 << 63)
    keyless = 0
    zigzag = _zigzag_at
    index = 0
    try:
        # One loop with the one-byte (and for lengths, two-byte) varints decoded inline:
        # those are what real records carry, and a call per field would cost twice as much.
        for index in range(count):
            if pos >= end:
                raise InvalidRecordBatchError(
                    BAD_RECORD_COUNT,
                    f"batch at {header.position}: recordsCount {count}, "
                    f"but the records end after {index}",
                )
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    raw = (b & 0x7F) | (c << 7)
                    length = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    length, pos = zigzag(data, pos, end, 5, index)
            record_end = pos + length
            if length < _MIN_RECORD_BODY or record_end > end:
                raise InvalidRecordBatchError(
                    BAD_RECORDS,
                    f"batch at {header.position}: record {index} has length {length} "
                    f"with {end - pos} bytes left in the batch",
                )
            pos += 1  # attributes: unused in magic 2
            b = data[pos]
            if b < 0x80:
                delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    raw = (b & 0x7F) | (c << 7)
                    delta = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    delta, pos = zigzag(data, pos, record_end, 10, index)
            if delta < low:
                low = delta
            if delta > high:
                high = delta
            b = data[pos]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    raw = (b & 0x7F) | (c << 7)
                    offset_delta = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    offset_delta, pos = zigzag(data, pos, record_end, 5, index)
            if offset_delta != index:
                raise InvalidRecordBatchError(
                    BAD_OFFSET_DELTA,
                    f"batch at {header.position}: record {index} has offsetDelta {offset_delta}",
                )
            b = data[pos]
            if b == 1:  # a null key (length -1)
                keyless += 1
                pos += 1
            else:
                if b < 0x80:
                    key_length = (b >> 1) ^ -(b & 1)
                    pos += 1
                else:
                    key_length, pos = zigzag(data, pos, record_end, 5, index)
                if key_length < -1:
                    raise _negative(header, index, "key", key_length)
                if key_length == -1:
                    keyless += 1
                else:
                    pos += key_length
            b = data[pos]
            if b < 0x80:
                value_length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                c = data[pos + 1]
                if c < 0x80:
                    raw = (b & 0x7F) | (c << 7)
                    value_length = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    value_length, pos = zigzag(data, pos, record_end, 5, index)
            if value_length > 0:
                pos += value_length
            elif value_length < -1:
                raise _negative(header, index, "value", value_length)
            b = data[pos]
            if b == 0:
                pos += 1
            else:
                pos = _skip_headers(data, pos, record_end, header, index)
            if pos != record_end:
                raise InvalidRecordBatchError(
                    BAD_RECORDS,
                    f"batch at {header.position}: record {index} is {length} bytes long "
                    f"but its fields take {length + pos - record_end}",
                )
    except IndexError:
        # A length ran past the end of the data: the record cannot be whole.
        raise InvalidRecordBatchError(
            BAD_RECORDS, f"batch at {header.position}: record {index} runs past the batch"
        ) from None
    if pos != end:
        raise InvalidRecordBatchError(
            BAD_RECORD_COUNT,
            f"batch at {header.position}: recordsCount {count}, but {end - pos} bytes "
            f"follow the last of them",
        )
    return RecordsScan(base_timestamp + low, max(base_timestamp + high, NO_TIMESTAMP), keyless)


def _negative(header: BatchHeader, index: int, what: str, length: int) -> InvalidRecordBatchError:
    return InvalidRecordBatchError(
        BAD_RECORDS, f"batch at {header.position}: record {index} has {what} length {length}"
    )


def _skip_headers(data: Buffer, pos: int, end: int, header: BatchHeader, index: int) -> int:
    """Skip a record's headers (the scan's slow path: most records have none)."""
    count, pos = _zigzag_at(data, pos, end, 5, index)
    # Each header takes at least two bytes, which bounds a lying count before it loops.
    if count < 0 or count > (end - pos) // 2:
        raise InvalidRecordBatchError(
            BAD_RECORDS,
            f"batch at {header.position}: record {index} claims {count} headers",
        )
    for _ in range(count):
        key_length, pos = _zigzag_at(data, pos, end, 5, index)
        if key_length < 0:
            raise _negative(header, index, "header key", key_length)
        pos += key_length
        value_length, pos = _zigzag_at(data, pos, end, 5, index)
        if value_length < -1:
            raise _negative(header, index, "header value", value_length)
        if value_length > 0:
            pos += value_length
        if pos > end:
            break  # the caller's length check names the overrun
    return pos


def record_timestamps(data: Buffer, header: BatchHeader) -> list[tuple[int, bool]]:
    """Each record's (timestamp, has a key), in order: the slow path that names the
    records a policy refuses, once :func:`scan_records` has passed the batch."""
    out: list[tuple[int, bool]] = []
    pos = 0
    end = len(data)
    for index in range(header.records_count):
        length, pos = _zigzag_at(data, pos, end, 5, index)
        record_end = pos + length
        delta, pos = _zigzag_at(data, pos + 1, record_end, 10, index)
        _, pos = _zigzag_at(data, pos, record_end, 5, index)
        key_length, _ = _zigzag_at(data, pos, record_end, 5, index)
        out.append((header.base_timestamp + delta, key_length >= 0))
        pos = record_end
    return out


# Control batches -----------------------------------------------------------------


def encode_control_batch(
    control_type: int,
    value: bytes | None,
    *,
    version: int = 0,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    timestamp: int = 0,
    is_transactional: bool | None = None,
) -> bytes:
    """A control batch of one record whose key is ``version`` int16 + ``control_type``
    int16 and whose value is ``value`` (an EndTxnMarker, a LeaderChangeMessage, ...).

    ``is_transactional`` defaults to true for ABORT and COMMIT markers, which belong to a
    producer's transaction, and to false for the KRaft control records.
    """
    if is_transactional is None:
        is_transactional = control_type in (ControlType.ABORT, ControlType.COMMIT)
    try:
        key = _CONTROL_KEY.pack(version, control_type)
    except struct.error:
        raise EncodeError(f"control key ({version}, {control_type}) out of int16 range") from None
    record = Record(offset_delta=0, timestamp=timestamp, key=key, value=value)
    return encode_batch(
        [record],
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=is_transactional,
        is_control=True,
    )


def control_record_type(buf: Buffer, pos: int = 0) -> int:
    """The control type (see :class:`ControlType`) of the control batch at ``pos``.

    An int rather than the enum because a newer Kafka may define types we do not know,
    and the caller decides whether that matters. Raises :class:`DecodeError` if the
    batch is not a control batch, holds no record, or its key is not a control key.
    """
    buf = _byte_view(buf)
    header = validate_batch(buf, pos, compacted=True)
    if not header.is_control:
        raise DecodeError(f"batch at {pos} is not a control batch")
    records = decode_records(buf, pos)
    if not records:
        raise DecodeError(f"control batch at {pos} holds no record")
    key = records[0].key
    # Kafka requires at least 4 bytes and ignores any beyond them.
    if key is None or len(key) < _CONTROL_KEY.size:
        raise DecodeError(f"control batch at {pos}: key {key!r} is shorter than 4 bytes")
    version, control_type = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise DecodeError(f"control batch at {pos}: negative control key version {version}")
    return int(control_type)
