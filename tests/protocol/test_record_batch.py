"""Record batch v2: layout, validation order, CRC coverage, torn tails, patches, codec."""

from __future__ import annotations

import struct

import cramjam
import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.core.errors import DecodeError, EncodeError, InvalidRecordBatchError
from odradek.protocol import record_batch as rb
from odradek.protocol.control_batch import (
    control_record_type,
    encode_control_batch,
)
from odradek.protocol.primitives import encode_varint, encode_varlong
from odradek.protocol.record_batch import (
    BAD_COMPRESSION,
    BAD_CRC,
    BAD_LENGTH,
    BAD_MAGIC,
    BAD_RECORD_COUNT,
    BAD_RECORDS,
    TRUNCATED,
    Compression,
    ControlType,
    TimestampType,
    iter_batches,
    set_base_offset,
    set_partition_leader_epoch,
    validate_batch,
    validate_batches,
    whole_batches_length,
)
from odradek.protocol.record_codec import (
    Record,
    decode_records,
    encode_batch,
    validate_records,
)

# Helpers -------------------------------------------------------------------------


def _records(n: int, *, value_size: int = 5, timestamp: int = 1_000) -> list[Record]:
    return [
        Record(
            offset_delta=i,
            timestamp=timestamp + i,
            key=f"k{i}".encode(),
            value=bytes([i % 251]) * value_size,
        )
        for i in range(n)
    ]


def _put(buf: bytearray, offset: int, fmt: str, value: int) -> None:
    struct.pack_into(fmt, buf, offset, value)


def _fix_crc(buf: bytearray, pos: int = 0) -> bytearray:
    """Recompute the CRC of the batch at ``pos`` after a test altered bytes in its range."""
    (length,) = struct.unpack_from(">i", buf, pos + rb.LENGTH_OFFSET)
    end = pos + rb.LOG_OVERHEAD + length
    crc = crc32c.crc32c(bytes(buf[pos + rb.ATTRIBUTES_OFFSET : end]))
    struct.pack_into(">I", buf, pos + rb.CRC_OFFSET, crc)
    return buf


def _problem(buf: bytes | bytearray, pos: int = 0, *, compacted: bool = False) -> str:
    with pytest.raises(InvalidRecordBatchError) as info:
        validate_batch(buf, pos, compacted=compacted)
    return info.value.problem


def _with_records_section(batch: bytes, section: bytes, codec: int) -> bytearray:
    """The header of ``batch`` over a different records section and codec, CRC fixed."""
    out = bytearray(batch[: rb.RECORDS_OFFSET]) + section
    _put(out, rb.LENGTH_OFFSET, ">i", len(out) - rb.LOG_OVERHEAD)
    (attributes,) = struct.unpack_from(">h", out, rb.ATTRIBUTES_OFFSET)
    _put(out, rb.ATTRIBUTES_OFFSET, ">h", (attributes & ~0x07) | codec)
    return _fix_crc(out)


# Strategies ----------------------------------------------------------------------

_optional_bytes = st.none() | st.binary(max_size=64)
_headers = st.lists(
    st.tuples(st.text(max_size=12), _optional_bytes),
    max_size=4,
)


@st.composite
def _record_lists(draw: st.DrawFn, min_size: int = 0, gaps: bool = True) -> list[Record]:
    n = draw(st.integers(min_size, 12))
    timestamps = draw(st.lists(st.integers(0, 2**42), min_size=n, max_size=n))
    records = []
    offset_delta = 0
    for i in range(n):
        if gaps and i > 0:
            offset_delta += draw(st.integers(0, 3))
        records.append(
            Record(
                offset_delta=offset_delta,
                timestamp=timestamps[i],
                key=draw(_optional_bytes),
                value=draw(_optional_bytes),
                headers=draw(_headers),
                attributes=draw(st.integers(-128, 127)),
            )
        )
        offset_delta += 1
    return records


_compressions = st.sampled_from(list(Compression))


# Known answers -------------------------------------------------------------------


def test_crc32c_package_is_castagnoli() -> None:
    # The check value of CRC-32C; plain CRC-32 would give 0xCBF43926.
    assert crc32c.crc32c(b"123456789") == 0xE3069283


def test_known_answer_one_record_byte_for_byte() -> None:
    record = bytes.fromhex(
        "10"  # length 8, zigzag varint
        "00"  # attributes
        "00"  # timestampDelta 0
        "00"  # offsetDelta 0
        "02"
        + b"k".hex()  # key length 1, key
        + "02"
        + b"v".hex()  # value length 1, value
        + "00"  # no headers
    )
    after_crc = (
        bytes.fromhex(
            "0000"  # attributes: no compression, create time
            "00000000"  # lastOffsetDelta
            "00000000000003e8"  # baseTimestamp 1000
            "00000000000003e8"  # maxTimestamp 1000
            "ffffffffffffffff"  # producerId -1
            "ffff"  # producerEpoch -1
            "ffffffff"  # baseSequence -1
            "00000001"  # recordsCount
        )
        + record
    )
    crc = crc32c.crc32c(after_crc)
    expected = (
        bytes.fromhex(
            "0000000000000007"  # baseOffset 7
            "0000003a"  # batchLength 58 = 70 - 12
            "00000005"  # partitionLeaderEpoch 5
            "02"  # magic
        )
        + struct.pack(">I", crc)
        + after_crc
    )
    assert len(expected) == 70

    encoded = encode_batch(
        [Record(offset_delta=0, timestamp=1000, key=b"k", value=b"v")],
        base_offset=7,
        partition_leader_epoch=5,
    )
    assert encoded == expected


def test_known_answer_null_key_header_and_negative_delta() -> None:
    def record(ts_delta: int, offset_delta: int) -> bytes:
        body = bytes([0]) + encode_varlong(ts_delta) + encode_varint(offset_delta)
        body += bytes.fromhex("01")  # null key: varint -1
        body += bytes.fromhex("06") + b"abc"  # value length 3
        body += bytes.fromhex("02")  # one header
        body += bytes.fromhex("02") + b"h"  # header key
        body += bytes.fromhex("01")  # null header value
        return encode_varint(len(body)) + body

    # Hand-written varints for the record bodies above, so encode_varint is not trusted.
    assert encode_varlong(-3) == b"\x05"
    assert encode_varint(1) == b"\x02"
    records_section = record(0, 0) + record(-3, 1)
    encoded = encode_batch(
        [
            Record(0, 100, None, b"abc", [("h", None)]),
            Record(1, 97, None, b"abc", [("h", None)]),
        ]
    )
    assert encoded[rb.RECORDS_OFFSET :] == records_section
    header = validate_batch(encoded)
    assert header.base_timestamp == 100
    assert header.max_timestamp == 100
    assert header.last_offset_delta == 1


def test_layout_constants_match_where_fields_are_written() -> None:
    batch = encode_batch(
        _records(3),
        base_offset=0x0102030405060708,
        partition_leader_epoch=0x11223344,
        compression=Compression.LZ4,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        producer_id=0x2122232425262728,
        producer_epoch=0x3132,
        base_sequence=0x41424344,
        is_transactional=True,
        base_timestamp=0x5152535455565758,
    )

    def at(offset: int, fmt: str) -> int:
        return int(struct.unpack_from(fmt, batch, offset)[0])

    assert at(rb.BASE_OFFSET_OFFSET, ">q") == 0x0102030405060708
    assert at(rb.LENGTH_OFFSET, ">i") == len(batch) - 12
    assert at(rb.PARTITION_LEADER_EPOCH_OFFSET, ">i") == 0x11223344
    assert at(rb.MAGIC_OFFSET, ">b") == 2
    assert at(rb.CRC_OFFSET, ">I") == crc32c.crc32c(batch[21:])
    assert at(rb.ATTRIBUTES_OFFSET, ">h") == 3 | 0x08 | 0x10
    assert at(rb.LAST_OFFSET_DELTA_OFFSET, ">i") == 2
    assert at(rb.BASE_TIMESTAMP_OFFSET, ">q") == 0x5152535455565758
    assert at(rb.MAX_TIMESTAMP_OFFSET, ">q") == 1002
    assert at(rb.PRODUCER_ID_OFFSET, ">q") == 0x2122232425262728
    assert at(rb.PRODUCER_EPOCH_OFFSET, ">h") == 0x3132
    assert at(rb.BASE_SEQUENCE_OFFSET, ">i") == 0x41424344
    assert at(rb.RECORDS_COUNT_OFFSET, ">i") == 3
    assert rb.RECORD_BATCH_OVERHEAD == rb.RECORDS_OFFSET == 61


def test_header_view_fields_and_derived_values() -> None:
    first = encode_batch(_records(1))
    second = encode_batch(
        _records(4),
        base_offset=100,
        partition_leader_epoch=9,
        compression=Compression.ZSTD,
        producer_id=77,
        producer_epoch=3,
        base_sequence=12,
        is_transactional=True,
    )
    buf = first + second
    header = validate_batch(buf, len(first))
    assert header.position == len(first)
    assert header.base_offset == 100
    assert header.partition_leader_epoch == 9
    assert header.magic == 2
    assert header.last_offset_delta == 3
    assert header.last_offset == 103
    assert header.next_offset == 104
    assert header.records_count == 4
    assert header.size_in_bytes == len(second)
    assert header.end == len(buf)
    assert header.compression == Compression.ZSTD
    assert header.timestamp_type == TimestampType.CREATE_TIME
    assert header.is_transactional
    assert not header.is_control
    assert not header.has_delete_horizon_ms
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 3, 12)
    assert header.base_timestamp == 1000
    assert header.max_timestamp == 1003


def test_attribute_bits_are_read_from_their_places() -> None:
    buf = bytearray(encode_batch(_records(1)))
    _put(buf, rb.ATTRIBUTES_OFFSET, ">h", 0x08 | 0x20 | 0x40 | 2)
    header = validate_batch(_fix_crc(buf))
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert header.is_control
    assert not header.is_transactional
    assert header.has_delete_horizon_ms
    assert header.compression == Compression.SNAPPY


# Round trips ---------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(records=_record_lists(), compression=_compressions)
def test_round_trip_any_records_any_compression(
    records: list[Record], compression: Compression
) -> None:
    batch = encode_batch(records, compression=compression, base_offset=5)
    header = validate_records(batch, compacted=True)
    assert header.compression == compression
    assert header.records_count == len(records)
    assert decode_records(batch) == records
    if records:
        assert header.max_timestamp == max(r.timestamp for r in records)
        assert header.base_timestamp == records[0].timestamp
        assert header.last_offset_delta == records[-1].offset_delta
    else:
        assert header.last_offset_delta == -1


@settings(max_examples=50, deadline=None)
@given(
    records=_record_lists(min_size=1, gaps=False),
    compression=_compressions,
    base_timestamp=st.integers(0, 2**42),
)
def test_round_trip_with_explicit_base_timestamp_is_a_client_batch(
    records: list[Record], compression: Compression, base_timestamp: int
) -> None:
    batch = encode_batch(records, compression=compression, base_timestamp=base_timestamp)
    header = validate_batch(batch)  # a client batch: strict count check passes
    assert header.base_timestamp == base_timestamp
    assert decode_records(batch) == records


def test_round_trip_large_values_every_compression() -> None:
    records = _records(50, value_size=4000)
    for compression in Compression:
        batch = encode_batch(records, compression=compression)
        if compression != Compression.NONE:
            # Repetitive values: a codec that silently stored raw bytes would show here.
            assert len(batch) < 50 * 4000 // 2
        assert decode_records(batch) == records


def test_snappy_uses_xerial_framing_with_32k_blocks() -> None:
    records = _records(30, value_size=4000)  # about 120 KB uncompressed: 4 blocks
    batch = encode_batch(records, compression=Compression.SNAPPY)
    section = batch[rb.RECORDS_OFFSET :]
    assert section[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks, raw = 16, 0, b""
    while pos < len(section):
        (n,) = struct.unpack_from(">i", section, pos)
        raw += bytes(cramjam.snappy.decompress_raw(section[pos + 4 : pos + 4 + n]))
        pos += 4 + n
        blocks += 1
    assert pos == len(section)
    assert blocks == (len(raw) + 32 * 1024 - 1) // (32 * 1024)
    assert blocks >= 4


def test_raw_snappy_as_librdkafka_writes_it_decodes() -> None:
    records = _records(5, value_size=300)
    plain = encode_batch(records)
    raw = bytes(cramjam.snappy.compress_raw(plain[rb.RECORDS_OFFSET :]))
    batch = _with_records_section(plain, raw, Compression.SNAPPY)
    assert decode_records(batch) == records


def test_xerial_snappy_with_little_endian_version_fields_decodes() -> None:
    # One producer in the wild writes the version fields little-endian; readers that
    # check them refuse its batches.
    records = _records(3)
    plain = encode_batch(records)
    block = bytes(cramjam.snappy.compress_raw(plain[rb.RECORDS_OFFSET :]))
    section = b"\x82SNAPPY\x00" + struct.pack("<ii", 1, 1) + struct.pack(">i", len(block)) + block
    batch = _with_records_section(plain, section, Compression.SNAPPY)
    assert decode_records(batch) == records


def test_cross_check_with_kafka_python() -> None:
    default_records = pytest.importorskip("kafka.record.default_records")
    builder = default_records.DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    records = [
        Record(0, 1_700_000_000_000, b"key", b"value", [("a", b"1"), ("b", None)]),
        Record(1, 1_699_999_999_990, None, None, []),
        Record(2, 1_700_000_000_005, b"", b"x" * 300, [("\u00e9", b"")]),
    ]
    for r in records:
        builder.append(r.offset_delta, r.timestamp, r.key, r.value, r.headers)
    theirs = bytes(builder.build())
    # kafka-python writes partitionLeaderEpoch 0 where a fresh client batch would say -1.
    ours = encode_batch(records, partition_leader_epoch=0)
    assert ours == theirs

    gzip_builder = default_records.DefaultRecordBatchBuilder(
        magic=2,
        compression_type=1,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for r in records:
        gzip_builder.append(r.offset_delta, r.timestamp, r.key, r.value, r.headers)
    gzipped = bytes(gzip_builder.build())
    assert validate_batch(gzipped).compression == Compression.GZIP
    assert decode_records(gzipped) == records

    theirs_view = default_records.DefaultRecordBatch(
        encode_batch(records, compression=Compression.GZIP)
    )
    assert theirs_view.validate_crc()
    decoded = list(theirs_view)
    assert [(d.offset, d.timestamp, d.key, d.value) for d in decoded] == [
        (r.offset_delta, r.timestamp, r.key, r.value) for r in records
    ]
    assert [list(d.headers) for d in decoded] == [r.headers for r in records]


# CRC -----------------------------------------------------------------------------


def test_every_bit_in_crc_range_and_crc_field_is_covered() -> None:
    batch = encode_batch(_records(2), base_offset=3)
    validate_batch(batch)
    for byte in range(rb.CRC_OFFSET, len(batch)):
        for bit in range(8):
            flipped = bytearray(batch)
            flipped[byte] ^= 1 << bit
            assert _problem(flipped, compacted=True) == BAD_CRC, (byte, bit)


@settings(max_examples=100, deadline=None)
@given(records=_record_lists(min_size=1), compression=_compressions, data=st.data())
def test_random_bit_flip_in_crc_range_is_bad_crc(
    records: list[Record], compression: Compression, data: st.DataObject
) -> None:
    batch = bytearray(encode_batch(records, compression=compression))
    bit = data.draw(st.integers(rb.ATTRIBUTES_OFFSET * 8, len(batch) * 8 - 1))
    batch[bit // 8] ^= 1 << (bit % 8)
    assert _problem(batch, compacted=True) == BAD_CRC


def test_bits_outside_crc_range_do_not_touch_crc() -> None:
    batch = encode_batch(_records(2))
    for byte in (*range(0, 8), *range(12, 16)):  # baseOffset, partitionLeaderEpoch
        for bit in range(8):
            flipped = bytearray(batch)
            flipped[byte] ^= 1 << bit
            header = validate_batch(flipped)
            assert (header.base_offset, header.partition_leader_epoch) != (0, -1)


# Validation problems, one crafted buffer each ------------------------------------


def test_fewer_than_twelve_bytes_is_truncated() -> None:
    batch = encode_batch(_records(1))
    for cut in range(12):
        assert _problem(batch[:cut]) == TRUNCATED
    assert _problem(batch + batch[:11], len(batch)) == TRUNCATED


def test_body_past_the_buffer_is_truncated() -> None:
    batch = encode_batch(_records(2))
    for cut in range(12, len(batch)):
        assert _problem(batch[:cut]) == TRUNCATED


def test_length_below_header_is_bad_length_before_truncation() -> None:
    batch = bytearray(encode_batch(_records(1)))
    for length in (48, 0, -1, -(2**31)):
        _put(batch, rb.LENGTH_OFFSET, ">i", length)
        assert _problem(batch) == BAD_LENGTH
        # Even with only the length readable, the length is what gets named.
        assert _problem(batch[:12]) == BAD_LENGTH


def test_minimum_length_is_accepted() -> None:
    empty = encode_batch([])
    assert len(empty) == 61
    header = validate_batch(empty, compacted=True)
    assert header.batch_length == 49
    assert header.records_count == 0


def test_magic_other_than_two_is_bad_magic_even_with_bad_crc() -> None:
    batch = bytearray(encode_batch(_records(1)))
    for magic in (0, 1, 3, -1):
        batch[rb.MAGIC_OFFSET] = magic & 0xFF
        assert _problem(batch) == BAD_MAGIC
    batch[-1] ^= 0xFF  # a CRC failure as well: magic is checked first
    assert _problem(batch) == BAD_MAGIC


def test_bad_crc_detail_names_both_values() -> None:
    batch = bytearray(encode_batch(_records(1)))
    stored = struct.unpack_from(">I", batch, rb.CRC_OFFSET)[0]
    batch[-1] ^= 1
    actual = crc32c.crc32c(bytes(batch[21:]))
    with pytest.raises(InvalidRecordBatchError) as info:
        validate_batch(batch)
    assert info.value.problem == BAD_CRC
    assert f"{stored:08x}" in info.value.detail
    assert f"{actual:08x}" in info.value.detail


def test_crc_is_checked_before_the_count() -> None:
    batch = bytearray(encode_batch(_records(2)))
    _put(batch, rb.RECORDS_COUNT_OFFSET, ">i", -5)  # bad count, CRC not refreshed
    assert _problem(batch) == BAD_CRC
    assert _problem(_fix_crc(batch)) == BAD_RECORD_COUNT


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec_is_bad_compression(codec: int) -> None:
    batch = bytearray(encode_batch(_records(1)))
    _put(batch, rb.ATTRIBUTES_OFFSET, ">h", codec)
    assert _problem(_fix_crc(batch), compacted=True) == BAD_COMPRESSION


@pytest.mark.parametrize(
    ("count", "last_offset_delta", "strict_ok", "compacted_ok"),
    [
        (2, 1, True, True),  # a client batch
        (1, 0, True, True),
        (2, 5, False, True),  # compaction removed records inside the range
        (0, 3, False, True),  # compaction removed every record
        (0, -1, False, True),
        (0, 0, False, True),
        (2, 0, False, False),  # fewer offsets than records: never valid
        (-1, -2, False, False),
        (-1, 0, False, False),
    ],
)
def test_record_count_rules(
    count: int, last_offset_delta: int, strict_ok: bool, compacted_ok: bool
) -> None:
    batch = bytearray(encode_batch(_records(2)))  # room for the count: 2 records
    _put(batch, rb.RECORDS_COUNT_OFFSET, ">i", count)
    _put(batch, rb.LAST_OFFSET_DELTA_OFFSET, ">i", last_offset_delta)
    _fix_crc(batch)
    for compacted, ok in ((False, strict_ok), (True, compacted_ok)):
        if ok:
            assert validate_batch(batch, compacted=compacted).records_count == count
        else:
            assert _problem(batch, compacted=compacted) == BAD_RECORD_COUNT


def test_count_larger_than_an_uncompressed_body_can_hold() -> None:
    batch = bytearray(encode_batch([Record(0, 0)]))  # one minimal record
    assert len(batch) - 61 == rb.MIN_RECORD_SIZE
    validate_batch(batch)
    _put(batch, rb.RECORDS_COUNT_OFFSET, ">i", 2)
    _put(batch, rb.LAST_OFFSET_DELTA_OFFSET, ">i", 1)
    assert _problem(_fix_crc(batch)) == BAD_RECORD_COUNT
    # The bound is exact: two minimal records fit in 14 bytes, not in 13.
    two = encode_batch([Record(0, 0), Record(1, 0)])
    assert len(two) - 61 == 2 * rb.MIN_RECORD_SIZE
    assert validate_batch(two).records_count == 2
    short = _with_records_section(two, two[61:-1], Compression.NONE)
    assert _problem(short) == BAD_RECORD_COUNT
    # A compressed body sets no such bound: any count may hide behind a good ratio.
    zipped = bytearray(encode_batch([Record(0, 0)], compression=Compression.GZIP))
    _put(zipped, rb.RECORDS_COUNT_OFFSET, ">i", 10_000)
    _put(zipped, rb.LAST_OFFSET_DELTA_OFFSET, ">i", 9_999)
    assert validate_batch(_fix_crc(zipped)).records_count == 10_000


def test_validation_reads_batch_at_position_only() -> None:
    good = encode_batch(_records(2))
    bad = bytearray(good)
    bad[-1] ^= 1
    buf = bytes(bad) + good
    assert validate_batch(buf, len(good)).position == len(good)
    assert _problem(buf, 0) == BAD_CRC


def test_validate_accepts_memoryviews_of_any_format() -> None:
    batch = encode_batch(_records(3))
    padded = bytearray(batch + bytes(-len(batch) % 4))
    as_words = memoryview(padded).cast("I")
    assert validate_batch(as_words).records_count == 3
    assert validate_batch(memoryview(batch)[0:]).records_count == 3


def test_validate_leaves_a_bytearray_resizable() -> None:
    buf = bytearray(encode_batch(_records(2)))
    header = validate_batch(buf)
    list(iter_batches(buf))
    buf += b"more"  # would raise BufferError if a view were still exported
    assert header.size_in_bytes == len(buf) - 4


# Deep record checks --------------------------------------------------------------


def test_validate_records_walks_every_codec() -> None:
    for compression in Compression:
        batch = encode_batch(_records(7), compression=compression)
        assert validate_records(batch).records_count == 7


def test_validate_records_count_mismatch() -> None:
    plain = encode_batch(_records(3))
    fewer = bytearray(plain)
    _put(fewer, rb.RECORDS_COUNT_OFFSET, ">i", 2)
    _put(fewer, rb.LAST_OFFSET_DELTA_OFFSET, ">i", 1)
    _fix_crc(fewer)
    validate_batch(fewer)  # the header alone is consistent
    with pytest.raises(InvalidRecordBatchError) as info:
        validate_records(fewer)
    assert info.value.problem == BAD_RECORD_COUNT

    # The same lie inside a compressed section is found after decompression.
    section = bytes(cramjam.zstd.compress(plain[61:]))
    zipped = _with_records_section(bytes(fewer), section, Compression.ZSTD)
    with pytest.raises(InvalidRecordBatchError) as info:
        validate_records(zipped)
    assert info.value.problem == BAD_RECORD_COUNT


@pytest.mark.parametrize(
    "section",
    [
        encode_varint(100) + b"\x00" * 6,  # length past the section
        encode_varint(-2) + b"\x00" * 6,  # negative length
        b"\x80\x80\x80\x80\x80\x80\x80",  # varint that never ends
        encode_varint(6) + b"\x00" * 6 + b"\x80",  # a torn varint after a good record
    ],
)
def test_validate_records_bad_lengths(section: bytes) -> None:
    batch = _with_records_section(encode_batch([Record(0, 0)]), section, Compression.NONE)
    validate_batch(batch)
    with pytest.raises(InvalidRecordBatchError) as info:
        validate_records(batch)
    assert info.value.problem == BAD_RECORDS


def test_validate_records_section_that_does_not_decompress() -> None:
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        garbage = b"\x82SNAPPY\x00" + b"\x00" * 8 + b"\x00\x00\x00\x09junk" + b"\xff" * 20
        batch = _with_records_section(encode_batch([Record(0, 0)]), garbage, codec)
        with pytest.raises(InvalidRecordBatchError) as info:
            validate_records(batch)
        assert info.value.problem == BAD_COMPRESSION, codec
        with pytest.raises(DecodeError):
            decode_records(batch)


# Malformed records in decode ------------------------------------------------------


def _one_record_batch(body: bytes) -> bytearray:
    section = encode_varint(len(body)) + body
    return _with_records_section(encode_batch([Record(0, 0)]), section, Compression.NONE)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"\x00\x00\x00\x01\x01\x00\xff", "1 extra bytes"),  # trailing byte in the record
        (b"\x00\x00\x00\x03\x01\x00", "key length -2"),
        (b"\x00\x00\x00\x01\x06ab", "value length 3"),  # null key, 2 bytes of value left
        (b"\x00\x00\x00\x01\x01\x01", "negative header count"),
        (b"\x00\x00\x00\x01\x01\x02\x02\xff\x01", "not UTF-8"),
        (b"\x00\x00\x00\x01\x01\x02\x01\x01", "header key length -1"),
        (b"\x00\x00\x00\x01\x01\x04\x00\x01", "past the end"),  # two headers, one there
    ],
)
def test_malformed_records_raise_decode_error(body: bytes, message: str) -> None:
    batch = _one_record_batch(body)
    # The message pins down which guard fired: several of these bodies would also trip a
    # later, vaguer check if the specific one were missing.
    with pytest.raises(DecodeError, match=message):
        decode_records(batch)


def test_empty_record_is_decode_error() -> None:
    # Length 0 (no attributes byte); the padding keeps the header's count check happy.
    section = b"\x00" + bytes(6)
    batch = _with_records_section(encode_batch([Record(0, 0)]), section, Compression.NONE)
    validate_batch(batch)
    with pytest.raises(DecodeError):
        decode_records(batch)


def test_well_formed_hand_record_decodes() -> None:
    # The positive twin of the malformed bodies above, so that their helper is trusted.
    batch = _one_record_batch(b"\x00\x02\x04\x01\x02z\x02\x02h\x01")
    assert decode_records(batch, 0) == [Record(2, 1, None, b"z", [("h", None)])]


def test_records_section_longer_than_the_count_is_decode_error() -> None:
    batch = bytearray(encode_batch(_records(2)))
    _put(batch, rb.RECORDS_COUNT_OFFSET, ">i", 1)
    _put(batch, rb.LAST_OFFSET_DELTA_OFFSET, ">i", 0)
    with pytest.raises(DecodeError):
        decode_records(_fix_crc(batch))


def test_decode_checks_the_crc_first() -> None:
    batch = bytearray(encode_batch(_records(2)))
    batch[-1] ^= 1
    with pytest.raises(InvalidRecordBatchError) as info:
        decode_records(batch)
    assert info.value.problem == BAD_CRC


# Iteration and torn tails ---------------------------------------------------------


def _many_batches() -> tuple[bytes, list[int]]:
    """Several batches of different sizes and codecs, and the position after each."""
    parts = [
        encode_batch(_records(1)),
        encode_batch(_records(5, value_size=40), base_offset=1, compression=Compression.GZIP),
        encode_batch([], base_offset=6),
        encode_batch(_records(3, value_size=90), base_offset=9),
        encode_control_batch(ControlType.COMMIT, b"\x00\x00\x00\x00\x00\x01", base_offset=12),
    ]
    ends = []
    total = 0
    for part in parts:
        total += len(part)
        ends.append(total)
    return b"".join(parts), ends


def test_iteration_stops_at_every_torn_tail_cut_point() -> None:
    buf, ends = _many_batches()
    starts = [0, *ends[:-1]]
    for cut in range(len(buf) + 1):
        whole = [end for end in ends if end <= cut]
        batches = iter_batches(buf[:cut])
        headers = list(batches)
        assert [h.position for h in headers] == starts[: len(whole)], cut
        assert [h.end for h in headers] == whole, cut
        expected = whole[-1] if whole else 0
        assert batches.valid_bytes == expected, cut
        assert batches.position == expected, cut
        assert batches.tail_bytes == cut - expected, cut
        assert whole_batches_length(buf[:cut]) == expected, cut


def test_iteration_from_a_start_position() -> None:
    buf, ends = _many_batches()
    batches = iter_batches(buf, ends[1])
    assert [h.position for h in batches] == ends[1:-1]
    assert batches.valid_bytes == len(buf) - ends[1]
    assert batches.position == len(buf)
    assert whole_batches_length(buf[: ends[3] + 5], ends[0]) == ends[3] - ends[0]


def test_iteration_yields_the_same_headers_as_validation() -> None:
    buf, _ = _many_batches()
    assert list(iter_batches(buf)) == validate_batches(buf, compacted=True)


def test_iteration_ignores_crc_but_not_impossible_lengths() -> None:
    buf, ends = _many_batches()
    corrupt = bytearray(buf)
    corrupt[ends[0] + 30] ^= 0xFF  # CRC failure in the second batch
    assert len(list(iter_batches(corrupt))) == len(ends)

    zero_tail = buf + bytes(20)  # zero-filled tail left by a crash
    batches = iter_batches(zero_tail)
    with pytest.raises(InvalidRecordBatchError) as info:
        list(batches)
    assert info.value.problem == BAD_LENGTH
    assert batches.valid_bytes == len(buf)

    short_zero_tail = buf + bytes(11)  # too short to hold a length: a clean stop
    assert whole_batches_length(short_zero_tail) == len(buf)


def test_validate_batches_needs_whole_batches() -> None:
    buf, ends = _many_batches()
    assert validate_batches(b"") == []
    assert [h.end for h in validate_batches(buf, compacted=True)] == ends
    for cut in (ends[2] + 1, ends[2] + 11, ends[2] + 12, len(buf) - 1):
        with pytest.raises(InvalidRecordBatchError) as info:
            validate_batches(buf[:cut], compacted=True)
        assert info.value.problem == TRUNCATED


def test_validate_batches_names_the_first_bad_batch() -> None:
    buf, ends = _many_batches()
    corrupt = bytearray(buf)
    corrupt[ends[2] + 40] ^= 1
    corrupt[ends[3] + 40] ^= 1
    with pytest.raises(InvalidRecordBatchError) as info:
        validate_batches(corrupt, compacted=True)
    assert info.value.problem == BAD_CRC
    assert f"batch at {ends[2]}:" in info.value.detail


def test_validate_batches_is_strict_about_counts_by_default() -> None:
    client = encode_batch(_records(2)) + encode_batch(_records(3), base_offset=2)
    assert len(validate_batches(client)) == 2
    compacted = client + encode_batch([Record(0, 5), Record(4, 6)], base_offset=5)
    with pytest.raises(InvalidRecordBatchError) as info:
        validate_batches(compacted)
    assert info.value.problem == BAD_RECORD_COUNT
    assert len(validate_batches(compacted, compacted=True)) == 3


# In-place patches -----------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(
    offset=st.integers(-(2**63), 2**63 - 1),
    epoch=st.integers(-(2**31), 2**31 - 1),
    compression=_compressions,
)
def test_patches_keep_the_crc_valid(offset: int, epoch: int, compression: Compression) -> None:
    first = encode_batch(_records(2), compression=compression)
    second = encode_batch(_records(3), compression=compression)
    buf = bytearray(first + second)
    set_base_offset(buf, len(first), offset)
    set_partition_leader_epoch(buf, len(first), epoch)
    patched = validate_batch(buf, len(first))
    assert (patched.base_offset, patched.partition_leader_epoch) == (offset, epoch)
    untouched = validate_batch(buf, 0)
    assert (untouched.base_offset, untouched.partition_leader_epoch) == (0, -1)
    # Nothing but the two fields changed.
    expected = bytearray(first + second)
    struct.pack_into(">q", expected, len(first), offset)
    struct.pack_into(">i", expected, len(first) + 12, epoch)
    assert buf == expected
    assert decode_records(buf, len(first)) == _records(3)


def test_patches_through_a_memoryview() -> None:
    buf = bytearray(b"pad" + encode_batch(_records(1)))
    view = memoryview(buf)[3:]
    set_base_offset(view, 0, 1234)
    set_partition_leader_epoch(view, 0, 56)
    view.release()
    header = validate_batch(buf, 3)
    assert (header.base_offset, header.partition_leader_epoch) == (1234, 56)


def test_patching_read_only_bytes_fails() -> None:
    batch = encode_batch(_records(1))
    with pytest.raises(TypeError):
        set_base_offset(batch, 0, 1)  # type: ignore[arg-type]


# Control batches ------------------------------------------------------------------


@pytest.mark.parametrize("control_type", list(ControlType))
def test_control_batch_round_trip(control_type: ControlType) -> None:
    value = b"\x00\x00" + bytes([control_type]) * 5
    batch = encode_control_batch(
        control_type,
        value,
        base_offset=40,
        producer_id=9,
        producer_epoch=2,
        timestamp=1234,
    )
    header = validate_batch(batch)
    assert header.is_control
    assert header.is_transactional == (control_type in (ControlType.ABORT, ControlType.COMMIT))
    assert (header.base_offset, header.producer_id, header.producer_epoch) == (40, 9, 2)
    assert control_record_type(batch) == control_type
    (record,) = decode_records(batch)
    assert record.key == struct.pack(">hh", 0, control_type)
    assert record.value == value
    assert record.timestamp == 1234


def test_control_type_of_a_batch_after_others() -> None:
    buf, ends = _many_batches()
    assert control_record_type(buf, ends[-2]) == ControlType.COMMIT


def test_unknown_control_type_and_longer_key_are_read() -> None:
    batch = encode_batch([Record(0, 0, b"\x00\x00\x00\x63extra", None)], is_control=True)
    assert control_record_type(batch) == 99


@pytest.mark.parametrize(
    ("key", "is_control"),
    [
        (b"\x00\x00\x00\x01", False),  # not a control batch
        (b"\x00\x00\x01", True),  # key too short
        (None, True),  # no key
        (b"\xff\xff\x00\x01", True),  # negative key version
    ],
)
def test_bad_control_batches(key: bytes | None, is_control: bool) -> None:
    batch = encode_batch([Record(0, 0, key, None)], is_control=is_control)
    with pytest.raises(DecodeError):
        control_record_type(batch)


def test_empty_control_batch_has_no_type() -> None:
    batch = encode_batch([], is_control=True)
    with pytest.raises(DecodeError):
        control_record_type(batch)


# Encoding refusals ----------------------------------------------------------------


@pytest.mark.parametrize(
    "records",
    [
        [Record(1, 0), Record(1, 0)],  # repeated offset delta
        [Record(-1, 0)],  # negative offset delta
        [Record(0, 0, attributes=128)],  # attributes beyond int8
        [Record(2**31, 0)],  # offset delta beyond int32
    ],
)
def test_encode_refuses_what_the_wire_cannot_carry(records: list[Record]) -> None:
    with pytest.raises(EncodeError):
        encode_batch(records)


def test_encode_refuses_header_fields_out_of_range() -> None:
    with pytest.raises(EncodeError):
        encode_batch(_records(1), producer_epoch=2**15)
