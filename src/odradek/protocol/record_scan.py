"""The record scan: what the leader's produce path runs on every batch a client sends,
as Kafka's LogValidator does.

It walks the records by their length and field varints without building any object, so
that the record count, the offset deltas, each record's framing and the timestamps are
known to agree with the header.
"""

from __future__ import annotations

from typing import NamedTuple

from odradek.core.errors import (
    DecodeError,
    InvalidRecordBatchError,
)
from odradek.protocol.primitives import (
    decode_unsigned_varint,
)
from odradek.protocol.record_batch import (
    BAD_OFFSET_DELTA,
    BAD_RECORD_COUNT,
    BAD_RECORDS,
    MIN_RECORD_SIZE,
    NO_TIMESTAMP,
    BatchHeader,
    Buffer,
)

# The record scan (the produce path) ----------------------------------------------

# A record's body is at least attributes, timestampDelta, offsetDelta, key length, value
# length and header count, one byte each; its length varint comes before it.
_MIN_RECORD_BODY = MIN_RECORD_SIZE - 1


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
