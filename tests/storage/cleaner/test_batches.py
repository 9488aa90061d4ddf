"""One batch cleaned: superseded records go, offsets, producer fields and codec stay."""

from __future__ import annotations

import crc32c
import pytest

from odradek.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    Compression,
    TimestampType,
    validate_batch,
)
from odradek.protocol.record_codec import Record, decode_records, encode_batch
from odradek.storage.cleaner.batches import clean_batch, filler_batch
from odradek.storage.cleaner.offset_map import OffsetMap
from tests.storage.cleaner.helpers import keyed


def offsets_of(pairs: dict[bytes, int]) -> OffsetMap:
    offsets = OffsetMap(100)
    for key, offset in pairs.items():
        offsets.put(key, offset)
    return offsets


@pytest.mark.parametrize("codec", list(Compression))
def test_superseded_records_go_and_the_rest_keep_offsets_producer_and_codec(
    codec: Compression,
) -> None:
    data = bytes(
        keyed(
            [(b"a", b"1"), (b"b", b"2"), (b"a", b"3"), (b"c", b"4")],
            producer_id=7,
            base_sequence=40,
            compression=codec,
            base_offset=100,
            partition_leader_epoch=3,
        )
    )
    before = validate_batch(data)
    # "a" is superseded inside the batch (at 102), "c" by a later batch (at 500).
    cleaned = clean_batch(
        data, before, offsets_of({b"a": 102, b"c": 500}), 0, 1000, last_of_producer=False
    )
    assert cleaned.data is not None and (cleaned.kept, cleaned.removed) == (2, 2)
    after = validate_batch(cleaned.data, compacted=True)  # the new CRC is valid
    assert (after.base_offset, after.last_offset_delta) == (100, 3)
    assert (after.producer_id, after.producer_epoch, after.base_sequence) == (7, 0, 40)
    assert after.partition_leader_epoch == 3 and after.compression == codec
    assert [(r.offset_delta, r.key, r.value) for r in decode_records(cleaned.data)] == [
        (1, b"b", b"2"),
        (2, b"a", b"3"),
    ]


def test_a_batch_nothing_supersedes_is_kept_byte_for_byte() -> None:
    data = bytes(keyed([(b"a", b"1"), (b"b", b"2")]))
    cleaned = clean_batch(
        data, validate_batch(data), offsets_of({b"a": 0}), 0, 1000, last_of_producer=False
    )
    assert cleaned.data == data


def test_a_tombstone_gets_a_delete_horizon_on_the_first_pass_and_goes_after_it() -> None:
    data = bytes(keyed([(b"a", None), (b"b", b"2")], timestamp=5))
    offsets = offsets_of({b"a": 0, b"b": 1})
    first = clean_batch(data, validate_batch(data), offsets, 10_000, 1_000, last_of_producer=False)
    assert first.data is not None and first.horizon_set
    marked = validate_batch(first.data, compacted=True)
    assert marked.has_delete_horizon_ms and marked.base_timestamp == 11_000
    # The records' own timestamps are unchanged: their deltas count from the horizon.
    assert [r.timestamp for r in decode_records(first.data)] == [5, 6]
    before = clean_batch(first.data, marked, offsets, 10_999, 1_000, last_of_producer=False)
    assert before.data == first.data  # the horizon has not passed: kept as it is
    after = clean_batch(first.data, marked, offsets, 11_000, 1_000, last_of_producer=False)
    assert after.data is not None and after.removed == 1
    assert [(r.key, r.value) for r in decode_records(after.data)] == [(b"b", b"2")]


def test_an_emptied_batch_is_kept_only_as_its_producers_last() -> None:
    data = bytes(keyed([(b"a", b"1")], producer_id=9, base_sequence=4, base_offset=20))
    offsets = offsets_of({b"a": 99})
    dropped = clean_batch(data, validate_batch(data), offsets, 0, 1000, last_of_producer=False)
    assert dropped.data is None and dropped.removed == 1
    kept = clean_batch(data, validate_batch(data), offsets, 0, 1000, last_of_producer=True)
    assert kept.data is not None
    empty = validate_batch(kept.data, compacted=True)
    assert empty.records_count == 0 and empty.last_offset == 20
    assert (empty.producer_id, empty.base_sequence) == (9, 4)


def test_keyless_records_are_dropped_and_log_append_time_is_kept() -> None:
    data = bytearray(
        keyed([(None, b"x"), (b"a", b"1")], timestamp_type=TimestampType.LOG_APPEND_TIME)
    )
    data[35:43] = (77_777).to_bytes(8, "big")  # the broker's time, as it sets maxTimestamp
    data[CRC_OFFSET : CRC_OFFSET + 4] = crc32c.crc32c(bytes(data[ATTRIBUTES_OFFSET:])).to_bytes(
        4, "big"
    )
    header = validate_batch(bytes(data))
    assert header.max_timestamp == 77_777
    cleaned = clean_batch(bytes(data), header, OffsetMap(10), 0, 1000, last_of_producer=False)
    assert cleaned.data is not None and cleaned.removed == 1
    after = validate_batch(cleaned.data, compacted=True)
    assert after.max_timestamp == 77_777 and after.timestamp_type == TimestampType.LOG_APPEND_TIME


def test_a_filler_covers_its_range_with_no_records_and_no_producer() -> None:
    header = validate_batch(filler_batch(10, 25, 4), compacted=True)
    assert (header.base_offset, header.next_offset, header.records_count) == (10, 25, 0)
    assert header.producer_id == -1 and header.partition_leader_epoch == 4
    assert header.max_timestamp == -1


def test_the_offset_map_counts_its_capacity_from_the_buffer() -> None:
    offsets = OffsetMap.for_buffer(144 * 1000, threads=2)
    assert offsets.capacity == 450  # half the buffer, 90% of it, 144 bytes an entry
    offsets.put(b"k", 5)
    offsets.put(b"k", 9)
    assert offsets.get(b"k") == 9 and offsets.get(b"other") == -1 and len(offsets) == 1


def test_kept_records_keep_their_headers_and_timestamps_byte_for_byte() -> None:
    records = [
        Record(offset_delta=i, timestamp=500 + 7 * i, key=b"k%d" % (i % 2), value=b"v%d" % i,
               headers=[("trace", b"t%d" % i), ("empty", None)])
        for i in range(4)
    ]  # fmt: skip
    data = encode_batch(records, base_offset=10)
    cleaned = clean_batch(
        data, validate_batch(data), offsets_of({b"k0": 12, b"k1": 13}), 0, 1000,
        last_of_producer=False,
    )  # fmt: skip
    assert cleaned.data is not None
    assert decode_records(cleaned.data) == records[2:]
    assert validate_batch(cleaned.data, compacted=True).max_timestamp == 521
