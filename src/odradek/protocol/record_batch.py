"""Kafka record batch v2 (magic 2): layout, validation, iteration, in-place patches.

This module owns the byte format of a record batch and nothing else: which batches a
Produce request may carry (control batches from clients, transactional state, sequence
numbers) is policy for the broker's handlers, and where batches live is storage's
business.

Its functions are the hot path (:func:`validate_batch`, :func:`validate_batches`,
:func:`iter_batches`, :func:`whole_batches_length`, :func:`set_base_offset`,
:func:`set_partition_leader_epoch`, :func:`set_max_timestamp`): they work on whole
batches and never look at a single record. They read the 61-byte header with one
``struct.unpack_from``, compute CRC32C over a ``memoryview`` slice, and patch fields in
place, so a batch that arrives in a produce request reaches the log without a copy made
in Python. Compressed batches are stored as they came: nothing here recompresses.

The records inside a batch are other modules' business, each with its own rules:
:mod:`~odradek.protocol.record_scan` is what the leader's produce path runs on every
batch, walking records without building any object; :mod:`~odradek.protocol.compression`
holds the codecs and the reusable buffer a batch is decompressed into once;
:mod:`~odradek.protocol.record_codec` encodes and decodes records for tests, tools and
the metadata log; :mod:`~odradek.protocol.control_batch` writes and reads control
batches.

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

import struct
from collections.abc import Iterator
from enum import IntEnum
from typing import NamedTuple, NoReturn

import crc32c

from odradek.core.errors import (
    InvalidRecordBatchError,
    InvariantError,
)
from odradek.core.invariant import invariant
from odradek.protocol.primitives import INT16, INT32, INT64, UINT32

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
    "TimestampType",
    "WritableBuffer",
    "header_at",
    "iter_batches",
    "set_base_offset",
    "set_max_timestamp",
    "set_partition_leader_epoch",
    "validate_batch",
    "validate_batches",
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

HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")

invariant(HEADER_STRUCT.size == RECORD_BATCH_OVERHEAD, "batch header struct must be 61 bytes")


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


def byte_view(buf: Buffer) -> Buffer:
    # A memoryview of another format (say 'I') would make len() count items, not bytes.
    if isinstance(buf, memoryview) and (buf.format != "B" or buf.ndim != 1):
        return buf.cast("B")
    return buf


# _make skips the keyword handling of __new__: a third cheaper, and this runs per batch.
_new_header = BatchHeader._make


def header_at(buf: Buffer, pos: int) -> BatchHeader:
    """The header of the batch at ``pos``, unchecked (for scans of already-valid logs)."""
    return _new_header((pos, *HEADER_STRUCT.unpack_from(buf, pos)))


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
    buf = byte_view(buf)
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
    fields = HEADER_STRUCT.unpack_from(buf, pos)
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
    batch_length: int = INT32.unpack_from(buf, pos + LENGTH_OFFSET)[0]
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
    buf = byte_view(buf)
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
        self._buf = byte_view(buf)
        self._size = len(self._buf)
        self.start = start
        self.position = start

    def __iter__(self) -> BatchIterator:
        return self

    def __next__(self) -> BatchHeader:
        pos = self.position
        if self._size - pos < LOG_OVERHEAD:
            raise StopIteration
        batch_length: int = INT32.unpack_from(self._buf, pos + LENGTH_OFFSET)[0]
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
    INT64.pack_into(buf, pos + BASE_OFFSET_OFFSET, offset)


def set_partition_leader_epoch(buf: WritableBuffer, pos: int, epoch: int) -> None:
    """Write partitionLeaderEpoch of the batch at ``pos``; outside the CRC range too."""
    if pos < 0:
        raise InvariantError(f"negative batch position {pos}")
    INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


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
    attributes: int = INT16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]
    current_type = (attributes & TIMESTAMP_TYPE_MASK) >> 3
    current_max: int = INT64.unpack_from(buf, pos + MAX_TIMESTAMP_OFFSET)[0]
    if current_type == timestamp_type and current_max == max_timestamp:
        return False
    attributes = (attributes & ~TIMESTAMP_TYPE_MASK) | (int(timestamp_type) << 3)
    INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
    INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
    end = pos + LOG_OVERHEAD + INT32.unpack_from(buf, pos + LENGTH_OFFSET)[0]
    with memoryview(buf) as view:
        crc = crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET : end])
    UINT32.pack_into(buf, pos + CRC_OFFSET, crc)
    return True
