"""The partition log: offsets, segments, reads, retention, truncation, recovery, faults."""

from __future__ import annotations

import errno
import logging

import pytest

from odradek.core.errors import InvalidRecordBatchError, LogOfflineError, OffsetOutOfRangeError
from odradek.protocol.record_batch import (
    iter_batches,
    validate_batches,
)
from odradek.protocol.record_codec import (
    decode_records,
)
from odradek.storage import quarantine
from odradek.storage.checkpoint import LEADER_EPOCH_CHECKPOINT, read_leader_epoch_checkpoint
from odradek.storage.log import LogConfig, PartitionLog
from odradek.storage.segment import segment_name
from tests.storage.helpers import DIR, batch, new_disk, new_log, reopen


def read_all(log: PartitionLog, start: int | None = None) -> list[tuple[int, bytes]]:
    """(base offset, batch bytes) for every batch from ``start`` to the log end."""
    out: list[tuple[int, bytes]] = []
    offset = log.log_start_offset if start is None else start
    while offset < log.log_end_offset:
        found = log.read(offset, 1 << 20)
        assert found is not None
        data = found.read()
        for h in validate_batches(data):
            out.append((h.base_offset, bytes(data[h.position : h.end])))
            offset = h.next_offset
    return out


def test_leader_append_assigns_dense_offsets_and_epoch_in_place() -> None:
    log = new_log(new_disk())
    first = batch(3)
    info = log.append_as_leader(memoryview(first), leader_epoch=5, now_ms=1)
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 2, 3)
    info = log.append_as_leader(memoryview(batch(2)), leader_epoch=5, now_ms=2)
    assert (info.first_offset, info.last_offset) == (3, 4)
    assert log.log_end_offset == 5
    stored = read_all(log)
    assert [o for o, _ in stored] == [0, 3]
    headers = validate_batches(stored[1][1])  # CRC still valid after the patches
    assert headers[0].base_offset == 3 and headers[0].partition_leader_epoch == 5
    assert bytes(first) == stored[0][1]  # patched in place, not copied
    assert log.epochs.entries() == [(5, 0)]


def test_a_new_leader_epoch_starts_at_the_log_end_before_any_append() -> None:
    disk = new_disk()
    log = new_log(disk)
    log.append_as_leader(memoryview(batch(3)), leader_epoch=1, now_ms=1)
    log.assign_leader_epoch(4)
    # A follower asking about epoch 2 (unknown here) learns that epoch 1 ends at 3.
    assert log.end_offset_for_epoch(2) == (1, 3)
    assert log.end_offset_for_epoch(4) == (4, 3)
    log.flush(2)
    log.close()
    # Recovery rebuilds the cache from the batches: an epoch that wrote nothing is gone
    # after a restart, and a node that leads again assigns its new epoch again.
    assert reopen(disk, recovery_point=3).epochs.entries() == [(1, 0)]


def test_follower_append_keeps_offsets_and_learns_epochs() -> None:
    leader = new_log(new_disk(1))
    leader.append_as_leader(memoryview(batch(2)), 1, 0)
    leader.append_as_leader(memoryview(batch(2)), 3, 0)
    follower = new_log(new_disk(2))
    for _, data in read_all(leader):
        follower.append_as_follower(memoryview(bytearray(data)), 0)
    assert read_all(follower) == read_all(leader)
    assert follower.epochs.entries() == [(1, 0), (3, 2)]
    stale = bytearray(read_all(leader)[0][1])
    # Offset 0 again, not the log end: the leader broke the protocol, nothing is appended.
    with pytest.raises(InvalidRecordBatchError, match="UNEXPECTED_OFFSET"):
        follower.append_as_follower(memoryview(stale), 0)
    assert read_all(follower) == read_all(leader)


@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC])
def test_a_disk_error_in_a_follower_append_takes_the_log_offline(code: int) -> None:
    """A follower append is guarded like a leader's: the OSError becomes the log's
    offline state (LogOfflineError), never an OSError that ends the fetcher."""
    leader = new_log(new_disk(1))
    leader.append_as_leader(memoryview(batch(2)), 1, 0)
    disk = new_disk(2)
    follower = new_log(disk)
    disk.fail_next("append", code)
    with pytest.raises(LogOfflineError):
        follower.append_as_follower(memoryview(bytearray(read_all(leader)[0][1])), 0)
    assert follower.offline is not None and "append_as_follower" in follower.offline
    with pytest.raises(LogOfflineError):
        follower.read(0, 100)


def test_segments_roll_on_size_time_and_full_index() -> None:
    one = len(batch())
    by_size = new_log(new_disk(), LogConfig(segment_bytes=one * 3))
    for _ in range(7):
        by_size.append_as_leader(memoryview(batch()), 0, 0)
    assert [s.base_offset for s in by_size.segments] == [0, 9, 18]

    by_time = new_log(new_disk(), LogConfig(segment_ms=100))
    for now in (0, 50, 99, 100, 150, 250):
        by_time.append_as_leader(memoryview(batch()), 0, now)
    assert [s.base_offset for s in by_time.segments] == [0, 9, 15]

    # Room for three offset entries (8 bytes each) and two time entries (12 bytes each).
    by_index = new_log(new_disk(), LogConfig(index_interval_bytes=1, segment_index_bytes=24))
    for _ in range(5):
        by_index.append_as_leader(memoryview(batch()), 0, 0)
    assert [len(s.index) for s in by_index.segments] == [3, 2]


def test_sparse_index_every_interval_and_file_names() -> None:
    disk = new_disk()
    one = len(batch())
    log = new_log(disk, LogConfig(index_interval_bytes=one * 4))
    for _ in range(20):
        log.append_as_leader(memoryview(batch()), 0, 0)
    assert len(log.active.index) == 5
    assert disk.listdir(DIR) == [
        segment_name(0, ".index"),
        segment_name(0, ".log"),
        segment_name(0, ".timeindex"),
        "leader-epoch-checkpoint",
    ]
    assert segment_name(0, ".log") == "00000000000000000000.log"


def test_read_returns_whole_batches_within_max_bytes() -> None:
    log = new_log(new_disk(), LogConfig(index_interval_bytes=64))
    for i in range(10):
        log.append_as_leader(memoryview(batch(records=2, tag=i)), 0, 0)
    size = len(batch(records=2))
    found = log.read(5, size * 3 + size // 2)  # offset 5 is inside the batch at 4
    assert found is not None
    headers = list(iter_batches(found.read()))
    assert [h.base_offset for h in headers] == [4, 6, 8]
    # The first batch is returned whole even when larger than max_bytes.
    tiny = log.read(0, 1)
    assert tiny is not None and tiny.length == size
    # Nothing at or past max_offset (the high watermark for consumers).
    bounded = log.read(0, 1 << 20, max_offset=6)
    assert bounded is not None
    assert [h.base_offset for h in iter_batches(bounded.read())] == [0, 2, 4]
    assert log.read(20, 100) is None
    with pytest.raises(OffsetOutOfRangeError):
        log.read(21, 100)


def test_read_across_segments_and_by_timestamp() -> None:
    log = new_log(new_disk(), LogConfig(segment_bytes=len(batch()) * 2, index_interval_bytes=1))
    for i in range(6):
        log.append_as_leader(memoryview(batch(timestamp=1000 * (i + 1))), 0, 0)
    assert len(log.segments) == 3
    assert [o for o, _ in read_all(log)] == [0, 3, 6, 9, 12, 15]
    found = log.offset_for_timestamp(3001)
    assert found is not None and found.base_offset == 6
    values = decode_records(log.read(found.base_offset, 1).read())  # type: ignore[union-attr]
    assert [r.timestamp for r in values] == [3000, 3001, 3002]
    assert log.offset_for_timestamp(10**9) is None


def test_retention_by_time_and_size_never_passes_the_high_watermark() -> None:
    cfg = LogConfig(segment_bytes=len(batch()), retention_ms=1000)
    log = new_log(new_disk(), cfg)
    for i in range(4):
        log.append_as_leader(memoryview(batch(timestamp=i * 1000)), 0, 0)
    assert len(log.segments) == 4
    assert log.delete_old_segments(now_ms=10_000, high_watermark=3) == 1
    assert log.log_start_offset == 3
    assert log.delete_old_segments(now_ms=10_000, high_watermark=12) == 2  # active stays
    assert log.log_start_offset == 9 and len(log.segments) == 1
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)

    by_size = new_log(
        new_disk(), LogConfig(segment_bytes=len(batch()), retention_bytes=len(batch()) * 2)
    )
    for _ in range(5):
        by_size.append_as_leader(memoryview(batch()), 0, 0)
    by_size.delete_old_segments(now_ms=0, high_watermark=by_size.log_end_offset)
    assert by_size.size_in_bytes() == len(batch()) * 2


def test_delete_records_moves_the_start_offset() -> None:
    log = new_log(new_disk(), LogConfig(segment_bytes=len(batch())))
    for _ in range(3):
        log.append_as_leader(memoryview(batch()), 0, 0)
    assert log.delete_records_before(4) == 4
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 100)
    found = log.read(4, 100)
    assert found is not None and next(iter(iter_batches(found.read()))).base_offset == 3
    assert log.delete_old_segments(0, high_watermark=9) == 1
    assert [s.base_offset for s in log.segments] == [3, 6]
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(10)


def test_truncation_moves_records_to_quarantine_with_a_manifest() -> None:
    disk = new_disk()
    log = new_log(disk, LogConfig(segment_bytes=len(batch()) * 2))
    for epoch in (1, 1, 2, 2, 3):
        log.append_as_leader(memoryview(batch()), epoch, 0)
    before = read_all(log)
    moved = log.truncate_to(7, now_ms=42, reason="diverged from leader", leader_epoch=4)
    assert moved == 9  # offsets 6..14: the batch holding 7 goes whole
    assert log.log_end_offset == 6
    assert log.epochs.entries() == [(1, 0), (2, 6)][:1]  # epoch 2 began at 6: gone
    assert read_all(log) == before[:2]
    [entry] = quarantine.entries(disk, DIR)
    assert (entry.start_offset, entry.end_offset, entry.record_count) == (6, 15, 9)
    assert (entry.reason, entry.leader_epoch, entry.when_ms) == ("diverged from leader", 4, 42)
    kept = disk.read_file(quarantine.records_path(DIR, entry.name))
    assert kept == b"".join(data for _, data in before[2:])
    assert log.truncate_to(100, 0, "no-op") == 0


def test_truncate_fully_starts_empty_at_an_offset() -> None:
    disk = new_disk()
    log = new_log(disk)
    log.append_as_leader(memoryview(batch()), 1, 0)
    assert log.truncate_fully_and_start_at(50, 0, "too far behind") == 3
    assert (log.log_start_offset, log.log_end_offset) == (50, 50)
    assert log.epochs.entries() == []
    info = log.append_as_leader(memoryview(batch()), 2, 0)
    assert info.first_offset == 50
    assert len(quarantine.entries(disk, DIR)) == 1


def test_quarantine_is_bounded_with_an_alarm() -> None:
    size = len(batch())
    log = new_log(new_disk(), LogConfig(quarantine_max_bytes=size * 3))
    for i in range(3):
        log.append_as_leader(memoryview(batch()), 0, 0)
        log.truncate_to(log.log_end_offset - 3, i, "test")
        assert log.quarantine_alarm is None
    log.append_as_leader(memoryview(batch(records=9)), 0, 0)
    log.truncate_to(log.log_end_offset - 9, 9, "big")
    assert log.quarantine_alarm is not None and "quarantine.max.bytes" in log.quarantine_alarm


def test_flushed_data_survives_a_crash_and_unflushed_may_not() -> None:
    for seed in range(20):
        disk = new_disk(seed)
        log = new_log(disk)
        for i in range(3):
            log.append_as_leader(memoryview(batch(tag=i)), 0, 0)
        assert log.flush(0) == 9
        for i in range(3, 6):
            log.append_as_leader(memoryview(batch(tag=i)), 0, 0)
        expected = read_all(log)
        disk.crash()
        recovered = reopen(disk, recovery_point=9)
        got = read_all(recovered)
        assert got[:3] == expected[:3]
        assert got == expected[: len(got)]  # a prefix of what was written, never garbage
        assert recovered.recovery_point == recovered.log_end_offset


def test_torn_tail_is_cut_and_logged_with_file_position_and_bytes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    disk = new_disk()
    log = new_log(disk)
    for _ in range(2):
        log.append_as_leader(memoryview(batch()), 0, 0)
    log.flush(0)
    size = log.active.size
    log.active.log.append(batch()[:30])  # half a batch, as a crash mid-write leaves it
    log.active.log.fsync()
    log.close()
    with caplog.at_level(logging.WARNING, logger="odradek.storage"):
        recovered = reopen(disk, recovery_point=6)
    assert recovered.log_end_offset == 6 and recovered.active.size == size
    line = next(r.getMessage() for r in caplog.records if "recovery of" in r.getMessage())
    assert "00000000000000000000.log" in line and "30 bytes" in line and f"position {size}" in line
    assert disk.read_file(quarantine.records_path(DIR, quarantine.entries(disk, DIR)[0].name)) == (
        bytes(batch()[:30])
    )


def test_corrupt_batch_past_the_recovery_point_is_cut() -> None:
    disk = new_disk()
    log = new_log(disk)
    for _ in range(3):
        log.append_as_leader(memoryview(batch()), 0, 0)
    log.flush(0)
    log.close()
    one = len(batch())
    disk.flip_bit(f"{DIR}/{segment_name(0, '.log')}", one + 40, 3)  # inside batch 2's CRC range
    recovered = reopen(disk, recovery_point=3)
    assert recovered.offline is None
    assert recovered.log_end_offset == 3
    assert quarantine.entries(disk, DIR)[0].size_bytes == 2 * one


def test_corrupt_batch_below_the_recovery_point_takes_the_log_offline() -> None:
    disk = new_disk()
    log = new_log(disk, LogConfig(segment_bytes=len(batch())))
    for _ in range(3):
        log.append_as_leader(memoryview(batch()), 0, 0)
    log.flush(0)
    log.close()
    disk.flip_bit(f"{DIR}/{segment_name(0, '.log')}", 50, 0)
    recovered = reopen(disk, LogConfig(segment_bytes=len(batch())), recovery_point=9)
    assert recovered.offline is not None
    assert "00000000000000000000.log" in recovered.offline and "BAD_CRC" in recovered.offline
    with pytest.raises(LogOfflineError):
        recovered.read(0, 100)
    with pytest.raises(LogOfflineError):
        recovered.append_as_leader(memoryview(batch()), 0, 0)


def test_corrupt_batch_below_the_recovery_point_in_the_last_segment() -> None:
    # One segment only: the recovery point, not a later segment, marks what was durable.
    disk = new_disk()
    log = new_log(disk)
    for _ in range(3):
        log.append_as_leader(memoryview(batch()), 0, 0)
    log.flush(0)
    log.close()
    disk.flip_bit(f"{DIR}/{segment_name(0, '.log')}", len(batch()) + 40, 2)
    recovered = reopen(disk, recovery_point=9)
    assert recovered.offline is not None and "BAD_CRC" in recovered.offline
    assert quarantine.entries(disk, DIR) == []  # nothing was cut


def test_base_offset_corruption_is_caught_by_density() -> None:
    # The base offset lies outside the CRC: only the offset check can see this.
    disk = new_disk()
    log = new_log(disk)
    for _ in range(2):
        log.append_as_leader(memoryview(batch()), 0, 0)
    log.close()
    disk.flip_bit(f"{DIR}/{segment_name(0, '.log')}", len(batch()) + 7, 4)
    recovered = reopen(disk, recovery_point=0)
    assert recovered.log_end_offset == 3


@pytest.mark.parametrize("damage", ["missing", "garbage", "torn"])
def test_indexes_are_rebuilt(damage: str) -> None:
    disk = new_disk()
    cfg = LogConfig(index_interval_bytes=1)
    log = new_log(disk, cfg)
    for _ in range(10):
        log.append_as_leader(memoryview(batch()), 0, 0)
    log.flush(0)
    expected = read_all(log)
    log.close()
    path = f"{DIR}/{segment_name(0, '.index')}"
    good = disk.read_file(path)
    disk.remove(path)
    if damage != "missing":
        handle = disk.open(path, create=True)
        handle.append(b"\x7f" * 24 if damage == "garbage" else good[:-3])
        handle.fsync()
    recovered = reopen(disk, cfg, recovery_point=30)
    assert read_all(recovered) == expected
    assert disk.read_file(path) == good
    assert recovered.read(17, 1) is not None


@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC])
def test_io_errors_take_the_log_offline_and_lose_nothing_acknowledged(code: int) -> None:
    disk = new_disk()
    log = new_log(disk)
    log.append_as_leader(memoryview(batch(tag=1)), 0, 0)
    log.flush(0)
    acknowledged = read_all(log)
    disk.fail_next("append", code)
    with pytest.raises(LogOfflineError) as info:
        log.append_as_leader(memoryview(batch(tag=2)), 0, 0)
    assert errno.errorcode[code] in str(info.value) or "append" in str(info.value)
    assert log.offline is not None
    with pytest.raises(LogOfflineError):
        log.read(0, 100)
    log.close()
    disk.crash()
    recovered = reopen(disk, recovery_point=3)
    assert read_all(recovered) == acknowledged


def test_fsync_failure_takes_the_log_offline() -> None:
    disk = new_disk()
    log = new_log(disk)
    log.append_as_leader(memoryview(batch()), 0, 0)
    disk.fail_next("fsync", errno.EIO)
    with pytest.raises(LogOfflineError):
        log.flush(0)
    assert log.recovery_point == 0  # never reported as flushed


def test_becoming_leader_writes_no_file_and_the_next_flush_makes_the_epoch_durable() -> None:
    disk = new_disk()
    log = new_log(disk)
    log.append_as_leader(memoryview(batch(3)), leader_epoch=1, now_ms=1)
    log.flush(1)
    operations = disk.operations
    # Becoming leader of 1,000 partitions must not rename 1,000 files on the event loop.
    log.assign_leader_epoch(4)
    assert disk.operations == operations
    log.append_as_leader(memoryview(batch(2)), leader_epoch=4, now_ms=2)
    log.flush(2)
    disk.crash()  # whatever the flush did not sync is gone
    # Start-up trusts the file below the recovery point: the entry must be in it.
    path = f"{DIR}/{LEADER_EPOCH_CHECKPOINT}"
    assert read_leader_epoch_checkpoint(disk, path) == [(1, 0), (4, 3)]
    assert reopen(disk, recovery_point=5).epochs.entries() == [(1, 0), (4, 3)]


def test_epoch_cache_is_checkpointed_and_reloaded() -> None:
    disk = new_disk()
    log = new_log(disk)
    for epoch in (1, 2, 2, 4):
        log.append_as_leader(memoryview(batch()), epoch, 0)
    log.flush(0)
    log.close()
    recovered = reopen(disk, recovery_point=12)
    assert recovered.epochs.entries() == [(1, 0), (2, 3), (4, 9)]
    assert recovered.end_offset_for_epoch(2) == (2, 9)
    assert recovered.end_offset_for_epoch(3) == (2, 9)
    assert recovered.end_offset_for_epoch(4) == (4, 12)


def test_flush_policy_follows_flush_messages_and_flush_ms() -> None:
    by_count = new_log(new_disk(), LogConfig(flush_messages=5))
    by_count.append_as_leader(memoryview(batch(3)), 0, 0)
    assert not by_count.needs_flush(0)
    by_count.append_as_leader(memoryview(batch(3)), 0, 0)
    assert by_count.needs_flush(0)
    assert by_count.flush(0) == 6 and not by_count.needs_flush(0)

    by_time = new_log(new_disk(), LogConfig(flush_ms=1000), now_ms=0)
    by_time.append_as_leader(memoryview(batch()), 0, 10)
    assert not by_time.needs_flush(999)
    assert by_time.needs_flush(1000)
    by_time.flush(1000)
    assert not by_time.needs_flush(5000)  # nothing new to flush


def test_a_flush_covers_every_append_since_the_last_one() -> None:
    disk = new_disk()
    log = new_log(disk)
    log.append_as_leader(memoryview(batch()), 0, 0)  # a new epoch is checkpointed once
    before = disk.fsyncs
    for _ in range(50):
        log.append_as_leader(memoryview(batch()), 0, 0)
    assert disk.fsyncs == before  # appends alone never sync
    log.flush(0)
    assert disk.fsyncs - before <= 3  # one per file of the segment: group commit


def test_a_partition_dir_left_without_a_segment_opens_as_an_empty_log() -> None:
    """A crash between creating a partition's directory and its first segment (a node
    stopped while it hosted a topic's partitions) left a directory that stopped the
    node's next start with an IndexError."""
    disk = new_disk()
    disk.makedirs(DIR)
    disk.fsync_dir("data")
    opened = reopen(disk)
    assert (opened.log_start_offset, opened.log_end_offset) == (0, 0)
    opened.append_as_leader(memoryview(batch()), 0, 0)
    assert opened.log_end_offset == 3
