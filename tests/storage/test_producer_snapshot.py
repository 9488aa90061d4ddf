"""Producer state snapshots: Kafka's exact bytes and names, corruption, crashes.

A partition dir moved between Kafka and Odradek must keep its ``.snapshot`` files
readable both ways, so the bytes are pinned against a hand-assembled file. A torn or
damaged file must be refused by name (the state is then rebuilt from the log), and a
power loss during a write must leave the old or the new snapshot, never one that reads
as something else.
"""

from __future__ import annotations

import random
import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.core.errors import CorruptLogError, InvariantError
from odradek.protocol.record_batch import (
    BatchHeader,
)
from odradek.replication.producer_state import ProducerStateManager
from odradek.storage.fs import join
from odradek.storage.producer_snapshot import (
    ENTRY_SIZE,
    HEADER_SIZE,
    ProducerSnapshotEntry,
    SnapshotFile,
    decode_snapshot,
    delete_snapshots_after,
    delete_snapshots_before,
    encode_snapshot,
    list_snapshots,
    load_latest_snapshot,
    read_snapshot,
    snapshot_file_name,
    snapshot_offset,
    write_snapshot,
)
from odradek.testing.sim_disk import PowerLoss, SimDisk

DIR = "data/topic-0"

ENTRY = ProducerSnapshotEntry(
    producer_id=1234,
    producer_epoch=3,
    last_sequence=41,
    last_offset=1000,
    offset_delta=2,
    timestamp=1_700_000_000_000,
    coordinator_epoch=-1,
    current_txn_first_offset=-1,
)

# Assembled by hand from Kafka's schema (version int16, crc uint32, then an ARRAY of
# int64 int16 int32 int64 int32 int64 int32 int64), not by the encoder under test.
ENTRY_BYTES = bytes.fromhex(
    "00000000000004d2"  # producer_id 1234
    "0003"  # epoch 3
    "00000029"  # last_sequence 41
    "00000000000003e8"  # last_offset 1000
    "00000002"  # offset_delta 2
    "0000018bcfe56800"  # timestamp 1700000000000
    "ffffffff"  # coordinator_epoch -1
    "ffffffffffffffff"  # current_txn_first_offset -1
)
ONE_ENTRY_FILE = bytes.fromhex("00010f35175100000001") + ENTRY_BYTES
EMPTY_FILE = bytes.fromhex("000148674bc700000000")


def new_disk(seed: int = 0) -> SimDisk:
    disk = SimDisk(random.Random(seed))
    disk.makedirs(DIR)
    disk.fsync_dir("data")
    disk.fsync_dir("")
    return disk


def entry(producer_id: int, **changes: int) -> ProducerSnapshotEntry:
    return ENTRY._replace(producer_id=producer_id, **changes)


def with_crc(body_after_crc: bytes, version: int = 1) -> bytes:
    """A file whose CRC is right for whatever follows it."""
    return struct.pack(">hI", version, crc32c.crc32c(body_after_crc)) + body_after_crc


# Names -----------------------------------------------------------------------------


def test_file_names_are_twenty_digit_offsets() -> None:
    assert snapshot_file_name(0) == "00000000000000000000.snapshot"
    assert snapshot_file_name(1234) == "00000000000000001234.snapshot"
    assert snapshot_offset("00000000000000001234.snapshot") == 1234
    assert snapshot_offset("7.snapshot") == 7  # Kafka parses any digits
    for name in [
        "00000000000000001234.snapshot.tmp",
        "00000000000000001234.snapshot.deleted",
        "00000000000000001234.log",
        ".snapshot",
        "x1.snapshot",
        "-1.snapshot",
        "١٢.snapshot",  # Arabic-Indic digits: str.isdigit() says yes, Kafka says no
    ]:
        assert snapshot_offset(name) is None, name


def test_list_snapshots_ignores_other_files_and_sorts_by_offset() -> None:
    disk = new_disk()
    for offset in (300, 5, 40):
        write_snapshot(disk, DIR, offset, [])
    for name in ("00000000000000000000.log", "00000000000000000077.snapshot.tmp", "leader-epoch"):
        disk.open(join(DIR, name), create=True).close()
    assert list_snapshots(disk, DIR) == [
        SnapshotFile(offset, join(DIR, snapshot_file_name(offset))) for offset in (5, 40, 300)
    ]


# Bytes -----------------------------------------------------------------------------


def test_crc32c_is_castagnoli() -> None:
    # The standard check value; zlib's CRC-32 would give 0xcbf43926.
    assert crc32c.crc32c(b"123456789") == 0xE3069283


def test_exact_bytes_of_an_empty_snapshot() -> None:
    assert encode_snapshot([]) == EMPTY_FILE
    assert decode_snapshot(EMPTY_FILE, "f") == []


def test_exact_bytes_of_a_known_snapshot() -> None:
    data = encode_snapshot([ENTRY])
    assert data == ONE_ENTRY_FILE
    assert len(data) == HEADER_SIZE + ENTRY_SIZE == 10 + 46
    # The CRC covers the entry count and the entries: bytes 6 to the end, not the
    # version and not itself.
    assert struct.unpack_from(">I", data, 2)[0] == crc32c.crc32c(data[6:])
    assert struct.unpack_from(">I", data, 2)[0] != crc32c.crc32c(data[10:])
    assert decode_snapshot(data, "f") == [ENTRY]


def test_plain_tuples_encode_like_entries() -> None:
    assert encode_snapshot([(1234, 3, 41, 1000, 2, 1_700_000_000_000, -1, -1)]) == ONE_ENTRY_FILE


def test_out_of_range_fields_are_a_bug() -> None:
    with pytest.raises(InvariantError):
        encode_snapshot([entry(1, producer_epoch=2**15)])


entries_strategy = st.lists(
    st.builds(
        ProducerSnapshotEntry,
        producer_id=st.integers(0, 2**63 - 1),
        producer_epoch=st.integers(-(2**15), 2**15 - 1),
        last_sequence=st.integers(0, 2**31 - 1),
        last_offset=st.integers(2**20, 2**62),
        offset_delta=st.integers(0, 2**20),
        timestamp=st.integers(-(2**63), 2**63 - 1),
        coordinator_epoch=st.integers(-(2**31), 2**31 - 1),
        current_txn_first_offset=st.integers(-1, 2**62),
    ),
    max_size=20,
    unique_by=lambda e: e.producer_id,
)


@settings(max_examples=200, deadline=None)
@given(entries_strategy)
def test_encode_decode_round_trip(entries: list[ProducerSnapshotEntry]) -> None:
    data = encode_snapshot(entries)
    assert len(data) == HEADER_SIZE + ENTRY_SIZE * len(entries)
    assert decode_snapshot(data, "f") == entries


# Corruption ------------------------------------------------------------------------


def corrupt(data: bytes) -> CorruptLogError:
    with pytest.raises(CorruptLogError) as caught:
        decode_snapshot(data, "data/topic-0/00000000000000001000.snapshot")
    assert "00000000000000001000.snapshot" in str(caught.value)
    return caught.value


def test_every_flipped_bit_is_detected() -> None:
    for position in range(len(ONE_ENTRY_FILE)):
        for bit in range(8):
            damaged = bytearray(ONE_ENTRY_FILE)
            damaged[position] ^= 1 << bit
            corrupt(bytes(damaged))


def test_every_torn_length_is_detected() -> None:
    two = encode_snapshot([ENTRY, entry(99)])
    for size in range(len(two)):
        corrupt(two[:size])


def test_bad_version_crc_and_lengths_name_the_problem() -> None:
    assert "version 0" in corrupt(with_crc(ONE_ENTRY_FILE[6:], version=0)).reason
    assert "version 2" in corrupt(with_crc(ONE_ENTRY_FILE[6:], version=2)).reason
    bad_crc = corrupt(ONE_ENTRY_FILE[:2] + b"\0\0\0\0" + ONE_ENTRY_FILE[6:])
    assert bad_crc.position == 2 and "crc" in bad_crc.reason
    # A CRC that matches does not excuse trailing bytes or a count that lies.
    corrupt(with_crc(ONE_ENTRY_FILE[6:] + b"\0"))
    corrupt(with_crc(struct.pack(">i", 2) + ENTRY_BYTES))
    corrupt(with_crc(struct.pack(">i", -1)))


@pytest.mark.parametrize(
    "bad",
    [
        [entry(-1)],
        [entry(5), entry(5)],
        [entry(5, last_offset=-2)],
        [entry(5, offset_delta=-1)],
        [entry(5, last_offset=3, offset_delta=4)],
        [entry(5, last_sequence=-1)],
    ],
)
def test_entries_kafka_could_not_have_written_are_refused(bad: list[ProducerSnapshotEntry]) -> None:
    error = corrupt(encode_snapshot(bad))
    assert error.position >= HEADER_SIZE


def test_a_producer_with_no_batch_is_a_valid_entry() -> None:
    # What Kafka writes for a producer known only by its epoch.
    quiet = entry(5, last_sequence=-1, last_offset=-1, offset_delta=0)
    assert decode_snapshot(encode_snapshot([quiet]), "f") == [quiet]


# Files on a (simulated) disk -------------------------------------------------------


def test_write_list_read_round_trip() -> None:
    disk = new_disk()
    path = write_snapshot(disk, DIR, 1000, [ENTRY, entry(7)])
    assert path == join(DIR, "00000000000000001000.snapshot")
    assert disk.read_file(path) == encode_snapshot([ENTRY, entry(7)])
    disk.crash()  # a completed write is durable
    assert list_snapshots(disk, DIR) == [SnapshotFile(1000, path)]
    assert read_snapshot(disk, path) == [ENTRY, entry(7)]


def test_a_flipped_bit_on_disk_is_reported_with_the_file_name() -> None:
    disk = new_disk()
    path = write_snapshot(disk, DIR, 1000, [ENTRY])
    disk.flip_bit(path, HEADER_SIZE + 3, 1)
    with pytest.raises(CorruptLogError) as caught:
        read_snapshot(disk, path)
    assert caught.value.path == path


def count_mutations(old: bool) -> int:
    disk = new_disk()
    if old:
        write_snapshot(disk, DIR, 1000, [ENTRY])
    before = disk.operations
    write_snapshot(disk, DIR, 1000, [entry(1), entry(2)])
    return disk.operations - before


@pytest.mark.parametrize("seed", range(4))
def test_power_loss_during_a_rewrite_leaves_the_old_or_the_new_snapshot(seed: int) -> None:
    old, new = [ENTRY], [entry(1), entry(2)]
    steps = count_mutations(old=True)
    assert steps >= 4
    for step in range(steps):
        disk = new_disk(seed * 1000 + step)
        path = write_snapshot(disk, DIR, 1000, old)
        disk.schedule_power_loss(step)
        with pytest.raises(PowerLoss):
            write_snapshot(disk, DIR, 1000, new)
        assert [s.offset for s in list_snapshots(disk, DIR)] == [1000], f"step {step}"
        assert read_snapshot(disk, path) in (old, new), f"step {step}"
        # The next write works despite a leftover temporary file.
        write_snapshot(disk, DIR, 1000, new)
        assert read_snapshot(disk, path) == new


@pytest.mark.parametrize("seed", range(4))
def test_power_loss_during_a_first_write_leaves_no_snapshot_or_the_new_one(seed: int) -> None:
    steps = count_mutations(old=False)
    for step in range(steps):
        disk = new_disk(seed * 1000 + step)
        disk.schedule_power_loss(step)
        with pytest.raises(PowerLoss):
            write_snapshot(disk, DIR, 1000, [ENTRY])
        found = list_snapshots(disk, DIR)
        assert found in ([], [SnapshotFile(1000, join(DIR, snapshot_file_name(1000)))])
        if found:
            assert read_snapshot(disk, found[0].path) == [ENTRY], f"step {step}"
        loaded = load_latest_snapshot(disk, DIR, 10**9)
        assert loaded.corrupt == [] and loaded.offset in (None, 1000)


def test_deletes_keep_the_boundaries_kafka_keeps_and_survive_a_crash() -> None:
    disk = new_disk()
    for offset in (10, 20, 30, 40):
        write_snapshot(disk, DIR, offset, [])
    assert delete_snapshots_after(disk, DIR, 30) == [40]  # the one at 30 stays
    assert delete_snapshots_before(disk, DIR, 20) == [10]  # the one at 20 stays
    assert delete_snapshots_after(disk, DIR, 30) == []
    disk.crash()
    assert [s.offset for s in list_snapshots(disk, DIR)] == [20, 30]


def test_load_latest_takes_the_newest_at_or_below_the_log_end() -> None:
    disk = new_disk()
    write_snapshot(disk, DIR, 10, [entry(1)])
    write_snapshot(disk, DIR, 20, [entry(2)])
    write_snapshot(disk, DIR, 30, [entry(3)])
    loaded = load_latest_snapshot(disk, DIR, 29)
    assert (loaded.offset, loaded.entries, loaded.corrupt) == (20, [entry(2)], [])
    assert load_latest_snapshot(disk, DIR, 30).offset == 30
    assert load_latest_snapshot(disk, DIR, 9).offset is None
    # Snapshots above the log end are left for delete_snapshots_after.
    assert [s.offset for s in list_snapshots(disk, DIR)] == [10, 20, 30]


def test_load_latest_deletes_a_corrupt_snapshot_and_falls_back_to_an_older_one() -> None:
    disk = new_disk()
    write_snapshot(disk, DIR, 10, [entry(1)])
    newest = write_snapshot(disk, DIR, 20, [entry(2)])
    handle = disk.open(newest)
    handle.truncate(HEADER_SIZE + 5)  # a torn write, as Kafka's in-place writes can leave
    handle.fsync()
    handle.close()
    loaded = load_latest_snapshot(disk, DIR, 100)
    assert (loaded.offset, loaded.entries) == (10, [entry(1)])
    assert [e.path for e in loaded.corrupt] == [newest]
    assert not disk.exists(newest)
    disk.crash()
    assert not disk.exists(newest)


def test_load_latest_with_nothing_readable_starts_empty() -> None:
    disk = new_disk()
    path = write_snapshot(disk, DIR, 10, [entry(1)])
    disk.flip_bit(path, 0, 0)
    loaded = load_latest_snapshot(disk, DIR, 100)
    assert loaded.offset is None and loaded.entries == []
    assert len(loaded.corrupt) == 1


# With the producer state it persists ---------------------------------------------


def header(producer_id: int, epoch: int, sequence: int, count: int, offset: int) -> BatchHeader:
    return BatchHeader(
        0, offset, 0, 0, 2, 0, 0, count - 1, 50 + offset, 60 + offset, producer_id, epoch,
        sequence, count,
    )  # fmt: skip


def test_producer_state_round_trips_through_a_snapshot_file() -> None:
    # The broker passes entries across the layers unchanged: both sides take 8-tuples.
    state = ProducerStateManager()
    for h in [
        header(7, 0, 0, 2, 0),
        header(3, 1, 2**31 - 1, 3, 2),
        header(7, 0, 2, 1, 5),
        header(9, 4, 0, 1, 6),
    ]:
        state.replay(h)
    disk = new_disk()
    write_snapshot(disk, DIR, 7, state.snapshot())
    disk.crash()
    loaded = load_latest_snapshot(disk, DIR, 7)
    assert loaded.offset == 7
    restored = ProducerStateManager.from_snapshot(loaded.entries)
    assert restored.snapshot() == state.snapshot()
    assert [tuple(e) for e in loaded.entries] == [tuple(e) for e in state.snapshot()]
    assert restored.check(header(7, 0, 2, 1, 0)).is_duplicate
    assert restored.check(header(3, 1, 2, 1, 0)).append
