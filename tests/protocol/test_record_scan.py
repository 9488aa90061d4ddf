"""The record scan of the produce path: what a batch says about its records must be true.

Each refusal is made with a batch whose header and CRC are valid, so that only the walk
over the records can find the lie: forged record counts, offset deltas out of order,
records whose length disagrees with their fields, compressed sections that hold
something else than they claim, and sections that decompress to too much.
"""

from __future__ import annotations

import struct

import cramjam
import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.core.errors import InvalidRecordBatchError
from odradek.protocol import record_batch as rb
from odradek.protocol.compression import (
    DecompressBuffer,
    compress,
)
from odradek.protocol.primitives import encode_varint, encode_varlong
from odradek.protocol.record_batch import (
    BAD_COMPRESSION,
    BAD_OFFSET_DELTA,
    BAD_RECORD_COUNT,
    BAD_RECORDS,
    DECOMPRESSED_TOO_LARGE,
    NO_TIMESTAMP,
    BatchHeader,
    Compression,
    TimestampType,
    set_max_timestamp,
    validate_batch,
)
from odradek.protocol.record_codec import (
    Record,
    encode_batch,
)
from odradek.protocol.record_scan import (
    RecordsScan,
    record_timestamps,
    scan_records,
)

LIMIT = 1 << 20
BASE_TIMESTAMP = 1_700_000_000_000


def raw_record(
    offset_delta: int,
    *,
    timestamp_delta: int = 0,
    key: bytes | None = None,
    value: bytes | None = b"v",
    headers: list[tuple[bytes, bytes | None]] | None = None,
    extra: bytes = b"",
    length_delta: int = 0,
) -> bytes:
    """One record as the wire carries it; ``extra`` bytes go inside its length and
    ``length_delta`` makes the length lie."""
    body = bytearray(b"\x00")
    body += encode_varlong(timestamp_delta)
    body += encode_varint(offset_delta)
    for field in (key, value):
        if field is None:
            body += encode_varint(-1)
        else:
            body += encode_varint(len(field)) + field
    body += encode_varint(len(headers or []))
    for header_key, header_value in headers or []:
        body += encode_varint(len(header_key)) + header_key
        if header_value is None:
            body += encode_varint(-1)
        else:
            body += encode_varint(len(header_value)) + header_value
    body += extra
    return encode_varint(len(body) + length_delta) + bytes(body)


def framed(body: bytes) -> bytes:
    """A record body behind its (true) length."""
    return encode_varint(len(body)) + body


def forge(
    section: bytes,
    *,
    count: int,
    last_offset_delta: int | None = None,
    compression: Compression = Compression.NONE,
    max_timestamp: int = BASE_TIMESTAMP,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
) -> bytearray:
    """A batch with a valid header and CRC around ``section`` (compressed here when asked)."""
    if compression != Compression.NONE:
        section = compress(compression, section)
    out = bytearray(rb.RECORDS_OFFSET) + section
    struct.pack_into(
        ">qiibIhiqqqhii",
        out,
        0,
        0,
        len(out) - rb.LOG_OVERHEAD,
        -1,
        rb.MAGIC,
        0,
        int(compression) | (int(timestamp_type) << 3),
        count - 1 if last_offset_delta is None else last_offset_delta,
        BASE_TIMESTAMP,
        max_timestamp,
        -1,
        -1,
        -1,
        count,
    )
    struct.pack_into(">I", out, rb.CRC_OFFSET, crc32c.crc32c(bytes(out[rb.ATTRIBUTES_OFFSET :])))
    return out


def scan(batch: bytes | bytearray, limit: int = LIMIT) -> RecordsScan:
    header = validate_batch(batch)
    return scan_records(DecompressBuffer(limit).records(batch, header), header)


def refusal(batch: bytes | bytearray, limit: int = LIMIT) -> str:
    # The header and CRC pass: only the records can be wrong.
    validate_batch(batch)
    with pytest.raises(InvalidRecordBatchError) as info:
        scan(batch, limit)
    return info.value.problem


# What the scan reports --------------------------------------------------------------


_records = st.lists(
    st.tuples(
        st.integers(-(2**40), 2**40),
        st.none() | st.binary(max_size=300),
        st.none() | st.binary(max_size=300),
        st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20)), max_size=3),
    ),
    min_size=1,
    max_size=200,
)


@settings(max_examples=60, deadline=None)
@given(_records, st.sampled_from(list(Compression)))
def test_a_true_batch_passes_with_its_timestamps_and_keys(
    drawn: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    compression: Compression,
) -> None:
    records = [
        Record(offset_delta=i, timestamp=BASE_TIMESTAMP + t, key=k, value=v, headers=h)
        for i, (t, k, v, h) in enumerate(drawn)
    ]
    batch = encode_batch(records, compression=compression)
    header = validate_batch(batch)
    buffer = DecompressBuffer(LIMIT)
    data = buffer.records(batch, header)
    result = scan_records(data, header)
    timestamps = [r.timestamp for r in records]
    assert result == RecordsScan(
        min(timestamps), max(max(timestamps), NO_TIMESTAMP), sum(r.key is None for r in records)
    )
    assert record_timestamps(data, header) == [(r.timestamp, r.key is not None) for r in records]


def test_an_uncompressed_batch_is_scanned_where_it_lies() -> None:
    batch = bytearray(encode_batch([Record(offset_delta=0, timestamp=5, value=b"x")]))
    header = validate_batch(batch)
    data = DecompressBuffer(LIMIT).records(batch, header)
    assert isinstance(data, memoryview) and data.obj is batch  # a view, not a copy
    assert scan_records(data, header).max_timestamp == 5


def test_one_buffer_serves_batch_after_batch() -> None:
    buffer = DecompressBuffer(LIMIT)
    for n in (50, 3, 400):
        records = [Record(offset_delta=i, timestamp=i, value=b"%d" % i) for i in range(n)]
        batch = encode_batch(records, compression=Compression.LZ4)
        header = validate_batch(batch)
        data = buffer.records(batch, header)
        assert scan_records(data, header).max_timestamp == n - 1
        assert record_timestamps(data, header)[-1] == (n - 1, False)
        data.release()


def test_records_all_before_the_epoch_give_no_timestamp_as_the_max() -> None:
    section = raw_record(0, timestamp_delta=-BASE_TIMESTAMP - 5)
    assert scan(forge(section, count=1)) == RecordsScan(-5, NO_TIMESTAMP, 1)


# Forged record counts ------------------------------------------------------------


def test_a_count_above_the_records_present_is_refused() -> None:
    # Records large enough that the header's own bound (7 bytes a record) lets it pass.
    section = raw_record(0, value=b"x" * 20) + raw_record(1, value=b"x" * 20)
    assert refusal(forge(section, count=3)) == BAD_RECORD_COUNT


def test_a_count_below_the_records_present_is_refused() -> None:
    section = raw_record(0) + raw_record(1) + raw_record(2)
    assert refusal(forge(section, count=2)) == BAD_RECORD_COUNT


def test_bytes_after_the_last_record_are_refused() -> None:
    section = raw_record(0) + raw_record(1) + b"\x00\x00"
    assert refusal(forge(section, count=2)) == BAD_RECORD_COUNT


@pytest.mark.parametrize(
    "compression", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
)
def test_a_compressed_batch_claiming_two_billion_records_over_a_tiny_body(
    compression: Compression,
) -> None:
    # The case: stored as it was, it would have moved the log end by 2^31 - 1.
    batch = forge(raw_record(0), count=2**31 - 1, compression=compression)
    assert len(batch) < 200
    assert refusal(batch) == BAD_RECORD_COUNT


@pytest.mark.parametrize("compression", [Compression.LZ4, Compression.ZSTD])
def test_compressed_records_that_hold_more_than_claimed_are_refused(
    compression: Compression,
) -> None:
    section = b"".join(raw_record(i) for i in range(10))
    assert refusal(forge(section, count=4, compression=compression)) == BAD_RECORD_COUNT


# Offset deltas --------------------------------------------------------------------


@pytest.mark.parametrize(
    "deltas",
    [
        [0, 2, 3],  # a gap, with the last delta matching the header
        [1, 2, 3],  # not starting at zero
        [0, 0, 1],  # a repeat
        [0, 2, 1],  # out of order
    ],
)
@pytest.mark.parametrize("compression", [Compression.NONE, Compression.ZSTD])
def test_offset_deltas_must_be_the_record_positions(
    deltas: list[int], compression: Compression
) -> None:
    section = b"".join(raw_record(d) for d in deltas)
    batch = forge(section, count=3, last_offset_delta=2, compression=compression)
    assert refusal(batch) == BAD_OFFSET_DELTA


def test_offset_deltas_past_the_one_byte_encoding_are_checked_too() -> None:
    deltas = list(range(200))
    deltas[150] = 151
    section = b"".join(raw_record(d) for d in deltas)
    assert refusal(forge(section, count=200)) == BAD_OFFSET_DELTA
    assert scan(forge(b"".join(raw_record(d) for d in range(200)), count=200)).keyless == 200


# Record framing -------------------------------------------------------------------


@pytest.mark.parametrize(
    "section",
    [
        raw_record(0, extra=b"\x00"),  # a byte inside the record that no field reads
        raw_record(0, extra=b"\x00\x00\x00", key=b"k"),
        raw_record(0, length_delta=-1),  # the fields run past the record's length
        raw_record(0, length_delta=1) + b"\x00",  # the length takes the next byte too
        raw_record(0, length_delta=50),  # the record runs past the batch
        encode_varint(3) + b"\x00" * 7,  # shorter than any record can be
        encode_varint(-4) + b"\x00" * 8,  # a negative length
        b"\xff" * 7,  # a length varint that does not end
        # attributes, timestampDelta, offsetDelta, then a key length of -2
        framed(b"\x00\x00\x00" + encode_varint(-2) + encode_varint(-1) + b"\x00"),
        # null key and value, then more headers than the record has bytes for
        framed(b"\x00\x00\x00" + encode_varint(-1) + encode_varint(-1) + encode_varint(2**30)),
        raw_record(0, headers=[(b"h", b"x")], length_delta=-2),
    ],
)
def test_records_whose_fields_do_not_fill_their_length_are_refused(section: bytes) -> None:
    assert refusal(forge(section, count=1)) == BAD_RECORDS


def test_a_negative_value_length_other_than_null_is_refused() -> None:
    good = raw_record(0, value=None)
    # Replace the value length -1 (0x01) by -2 (0x03): the record length stays right.
    forged = good[:-2] + b"\x03" + good[-1:]
    assert refusal(forge(forged, count=1)) == BAD_RECORDS


def test_a_negative_header_key_length_is_refused() -> None:
    good = raw_record(0, headers=[(b"", None)])
    forged = good[:-2] + encode_varint(-1) + good[-1:]
    assert refusal(forge(forged, count=1)) == BAD_RECORDS


# Compressed sections --------------------------------------------------------------


@pytest.mark.parametrize(
    "compression", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
)
def test_a_section_that_does_not_decompress_is_refused(compression: Compression) -> None:
    batch = forge(raw_record(0), count=1)
    garbage = b"\x82SNAPPY\x00" + b"\x00" * 8 + b"\x00\x00\x00\x09junk" + b"\xff" * 20
    out = bytearray(batch[: rb.RECORDS_OFFSET]) + garbage
    struct.pack_into(">i", out, rb.LENGTH_OFFSET, len(out) - rb.LOG_OVERHEAD)
    struct.pack_into(">h", out, rb.ATTRIBUTES_OFFSET, int(compression))
    struct.pack_into(">I", out, rb.CRC_OFFSET, crc32c.crc32c(bytes(out[rb.ATTRIBUTES_OFFSET :])))
    assert refusal(out) == BAD_COMPRESSION


@pytest.mark.parametrize("compression", list(Compression)[1:])
def test_a_section_that_decompresses_past_the_limit_is_refused(compression: Compression) -> None:
    # Zeros compress to almost nothing: a small batch that would inflate to 8 MiB.
    record = Record(offset_delta=0, timestamp=0, value=bytes(8 << 20))
    batch = encode_batch([record], compression=compression)
    assert len(batch) < 1 << 20
    assert refusal(batch, limit=1 << 20) == DECOMPRESSED_TOO_LARGE
    assert scan(batch, limit=9 << 20).max_timestamp == 0


def test_xerial_snappy_blocks_count_towards_the_limit_together() -> None:
    # Each 32 KiB block fits; the sum of them does not.
    batch = encode_batch(
        [Record(offset_delta=0, timestamp=0, value=bytes(200_000))], compression=Compression.SNAPPY
    )
    assert bytes(batch[rb.RECORDS_OFFSET : rb.RECORDS_OFFSET + 8]) == b"\x82SNAPPY\x00"
    assert refusal(batch, limit=100_000) == DECOMPRESSED_TOO_LARGE


def test_the_limit_is_exact() -> None:
    record = Record(offset_delta=0, timestamp=0, value=bytes(1000))
    batch = encode_batch([record], compression=Compression.ZSTD)
    size = len(raw_record(0, value=bytes(1000)))
    assert scan(batch, limit=size).keyless == 1
    assert refusal(batch, limit=size - 1) == DECOMPRESSED_TOO_LARGE


# maxTimestamp and the timestamp type ------------------------------------------------


def _header(batch: bytes | bytearray) -> BatchHeader:
    return validate_batch(batch)


def test_set_max_timestamp_rewrites_the_crc() -> None:
    batch = bytearray(encode_batch([Record(offset_delta=0, timestamp=10, value=b"x")]))
    assert set_max_timestamp(batch, 0, TimestampType.LOG_APPEND_TIME, 99)
    header = _header(batch)  # the CRC is right again
    assert (header.timestamp_type, header.max_timestamp) == (TimestampType.LOG_APPEND_TIME, 99)
    assert header.compression == Compression.NONE and header.records_count == 1
    assert set_max_timestamp(batch, 0, TimestampType.CREATE_TIME, 10)
    assert bytes(batch) == encode_batch([Record(offset_delta=0, timestamp=10, value=b"x")])


def test_set_max_timestamp_leaves_a_batch_that_already_says_so_alone() -> None:
    original = encode_batch([Record(offset_delta=0, timestamp=10)], compression=Compression.LZ4)
    batch = bytearray(original)
    assert not set_max_timestamp(batch, 0, TimestampType.CREATE_TIME, 10)
    assert bytes(batch) == original


def test_set_max_timestamp_at_a_position_keeps_other_flags() -> None:
    first = encode_batch([Record(offset_delta=0, timestamp=1)])
    second = encode_batch(
        [Record(offset_delta=0, timestamp=2)],
        compression=Compression.ZSTD,
        producer_id=5,
        producer_epoch=0,
        base_sequence=0,
    )
    buf = bytearray(first + second)
    set_max_timestamp(buf, len(first), TimestampType.LOG_APPEND_TIME, 7)
    header = validate_batch(buf, len(first))
    assert header.compression == Compression.ZSTD and header.producer_id == 5
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert bytes(buf[: len(first)]) == first


def test_a_decompressed_section_uses_cramjam_as_the_codec_does() -> None:
    # The scan's decompression reads what the codec's own decoder reads.
    records = [Record(offset_delta=i, timestamp=i, value=b"v" * i) for i in range(30)]
    batch = encode_batch(records, compression=Compression.ZSTD)
    header = validate_batch(batch)
    data = DecompressBuffer(LIMIT).records(batch, header)
    assert bytes(data) == bytes(cramjam.zstd.decompress(batch[rb.RECORDS_OFFSET :]))
