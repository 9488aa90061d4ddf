"""The record codec: :class:`Record`, encoding a batch, decoding its records, and
validating every record of a batch.

For tests, tools, the controller's own metadata log and transaction markers; the
produce path checks records with :mod:`odradek.protocol.record_scan` instead, which
builds no object per record.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

import crc32c

from odradek.core.errors import (
    DecodeError,
    EncodeError,
    InvalidRecordBatchError,
)
from odradek.protocol.compression import (
    compress,
    decompress,
)
from odradek.protocol.primitives import (
    INT8,
    UINT32,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
)
from odradek.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    BAD_COMPRESSION,
    BAD_RECORD_COUNT,
    BAD_RECORDS,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_FLAG_MASK,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    RECORDS_OFFSET,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    Buffer,
    Compression,
    TimestampType,
    byte_view,
    validate_batch,
)

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
        body += INT8.pack(record.attributes)
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
    last_offset_delta: int | None = None,
    max_timestamp: int | None = None,
    delete_horizon: bool = False,
) -> bytes:
    """Encode ``records`` as one batch, computing lastOffsetDelta, maxTimestamp and CRC.

    For tests, tools and the log cleaner: the produce path never builds batches from
    records. Offset deltas must be non-negative and strictly increasing (a compacted
    batch may skip some). ``base_timestamp`` defaults to the first record's timestamp,
    as the Java client does; deltas may be negative. An empty ``records`` gives a batch
    with count 0 and timestamps of -1, the shape only compaction produces. The
    requested codec is used even when it makes the batch larger.

    The cleaner keeps what compaction must not change: ``last_offset_delta`` (the
    batch's offset range, and with it the producer's last sequence, stays whole when
    its last records go) and ``max_timestamp`` (a LOG_APPEND_TIME batch's time);
    ``delete_horizon`` sets attribute bit 6, and ``base_timestamp`` is then the delete
    horizon (KIP-534) with every record's timestamp delta taken from it.
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
    if max_timestamp is None:
        max_timestamp = max((r.timestamp for r in records), default=NO_TIMESTAMP)
    if last_offset_delta is None:
        last_offset_delta = records[-1].offset_delta if records else -1
    elif records and last_offset_delta < records[-1].offset_delta:
        raise EncodeError(
            f"lastOffsetDelta {last_offset_delta} below the last record's "
            f"{records[-1].offset_delta}"
        )

    section = b"".join([_encode_record(r, base_timestamp) for r in records])
    if compression != Compression.NONE:
        section = compress(compression, section)

    attributes = int(compression) | (int(timestamp_type) << 3)
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    if delete_horizon:
        attributes |= DELETE_HORIZON_FLAG_MASK

    return pack_batch(
        section,
        records_count=len(records),
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


def pack_batch(
    section: bytes,
    *,
    records_count: int,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
) -> bytes:
    """A batch around an encoded (and, per ``attributes``, compressed) records section,
    its CRC computed: what :func:`encode_batch` and the log cleaner, which keeps the
    bytes of the records it keeps, both end with."""
    out = bytearray(RECORD_BATCH_OVERHEAD + len(section))
    try:
        HEADER_STRUCT.pack_into(
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
            records_count,
        )
    except struct.error as e:
        raise EncodeError(f"batch header field out of range: {e}") from None
    out[RECORDS_OFFSET:] = section
    UINT32.pack_into(out, CRC_OFFSET, crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


# Decoding ------------------------------------------------------------------------


def _records_section(buf: Buffer, header: BatchHeader) -> memoryview:
    """The batch's records, decompressed if need be, as a byte view."""
    with memoryview(buf) as view:
        section = view[header.position + RECORDS_OFFSET : header.end]
    if header.compression == Compression.NONE:
        return section
    return memoryview(decompress(header.compression, section))


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
    attributes: int = INT8.unpack_from(data, pos)[0]
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
    buf = byte_view(buf)
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
    buf = byte_view(buf)
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
