"""A compacted log cleaned: every key's last value stays at its offset, the log stays
dense, the swap survives a power loss at every step, and a changed log abandons a pass."""

from __future__ import annotations

import pytest

from odradek.core.errors import CorruptLogError
from odradek.protocol.record_batch import validate_batches
from odradek.storage import quarantine
from odradek.storage.cleaner.cleaning import CleaningJob, run_pass
from odradek.storage.log import PartitionLog
from odradek.testing.sim_disk import PowerLoss, SimDisk
from tests.storage.cleaner.helpers import POLICY, SMALL, batches_of, clean, keyed, records_of
from tests.storage.helpers import DIR, new_disk

KEYS = [b"k%d" % i for i in range(5)]
Records = list[tuple[int, bytes | None, bytes | None]]


def filled(disk: SimDisk, rounds: int = 12) -> PartitionLog:
    """Five keys written ``rounds`` times over, two records a batch, many segments."""
    log = PartitionLog.create(disk, DIR, SMALL, 0)
    for r in range(rounds):
        for i in range(0, len(KEYS), 2):
            pairs = [(k, b"v%d-%s" % (r, k)) for k in KEYS[i : i + 2]]
            log.append_as_leader(memoryview(keyed(pairs)), leader_epoch=1 + r // 6, now_ms=r)
    log.flush(rounds)
    return log


def last_values(records: Records) -> dict[bytes, tuple[int, bytes | None]]:
    last: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, key, value in records:
        assert key is not None
        last[key] = (offset, value)
    return last


def test_cleaning_keeps_each_keys_last_value_at_its_offset_and_the_log_dense() -> None:
    disk = new_disk()
    log = filled(disk)
    before = records_of(log)
    segments_before, size_before = len(log.segments), log.size_in_bytes()
    result = clean(log, 100)
    assert result is not None and result.stats.records_removed > 0
    after = records_of(log)
    # Everything kept is a record that was written, at its own offset.
    assert set(after) <= set(before)
    # Every key's last value is there; what is in the active segment is untouched.
    assert last_values(after) == last_values(before)
    active = log.active.base_offset
    assert [r for r in after if r[0] >= active] == [r for r in before if r[0] >= active]
    # Only the last value of each key remains below the active segment's base.
    cleaned = [r for r in after if r[0] < active]
    assert len({r[1] for r in cleaned}) == len(cleaned)
    assert log.size_in_bytes() < size_before
    assert log.log_end_offset == before[-1][0] + 1
    log.check_consistency()
    # Grouped by their sizes before cleaning, as Kafka groups them: full segments stay
    # apart on the first pass, and the shrunk ones merge on the next.
    assert len(log.segments) == segments_before
    clean(log, 150)
    assert len(log.segments) < segments_before and records_of(log) == after
    # A start that validates every batch finds the cleaned log whole.
    log.close()
    reopened = PartitionLog.open(disk, DIR, SMALL, 200, recovery_point=0)
    assert reopened.offline is None and records_of(reopened) == after
    assert reopened.epochs.entries() == [(1, 0), (2, 30)]


def test_a_follower_appends_the_cleaned_log_and_holds_the_same_records() -> None:
    leader = filled(new_disk())
    clean(leader, 100)
    follower = PartitionLog.create(new_disk(1), DIR, SMALL, 0)
    for data in batches_of(leader):
        follower.append_as_follower(memoryview(bytearray(data)), now_ms=1)
    assert records_of(follower) == records_of(leader)
    assert follower.log_end_offset == leader.log_end_offset


def test_a_second_pass_only_needs_the_new_dirty_part_and_keeps_what_the_first_kept() -> None:
    disk = new_disk()
    log = filled(disk)
    first = clean(log, 100)
    assert first is not None
    for r in range(12, 18):
        log.append_as_leader(memoryview(keyed([(b"k0", b"late%d" % r)])), leader_epoch=3, now_ms=r)
    log.flush(50)
    expected = last_values(records_of(log))
    second = clean(log, 200, checkpoint=first.map_end)
    assert second is not None and second.job.first_dirty == first.map_end
    assert last_values(records_of(log)) == expected
    assert expected[b"k0"][1] == b"late17"


def test_tombstones_stay_for_delete_retention_after_the_first_pass_then_go() -> None:
    log = filled(new_disk(), rounds=6)
    log.append_as_leader(memoryview(keyed([(b"k1", None)])), leader_epoch=1, now_ms=7)
    for r in range(8):  # roll past the tombstone, so that it can be cleaned
        log.append_as_leader(memoryview(keyed([(b"k4", b"%d" % r)])), leader_epoch=1, now_ms=8)
    log.flush(20)
    tombstone = [r for r in records_of(log) if r[2] is None]
    assert len(tombstone) == 1
    clean(log, 10_000)  # horizon: 10_000 + delete.retention.ms (1_000)
    assert [r for r in records_of(log) if r[1] == b"k1"] == tombstone
    clean(log, 10_999)
    assert [r for r in records_of(log) if r[1] == b"k1"] == tombstone
    clean(log, 11_000)
    assert [r for r in records_of(log) if r[1] == b"k1"] == []


def test_an_emptied_producer_batch_stays_for_its_sequence() -> None:
    log = PartitionLog.create(new_disk(), DIR, SMALL, 0)
    log.append_as_leader(
        memoryview(keyed([(b"a", b"1")], producer_id=5, base_sequence=0)), leader_epoch=0, now_ms=0
    )
    for i in range(12):
        log.append_as_leader(memoryview(keyed([(b"a", b"%d" % i)])), leader_epoch=0, now_ms=0)
    log.flush(1)
    clean(log, 10, producers=frozenset({0}))
    first = validate_batches(batches_of(log)[0], compacted=True)[0]
    assert (first.base_offset, first.records_count, first.producer_id) == (0, 0, 5)


def test_cleaning_stops_below_the_high_watermark_and_the_recovery_point() -> None:
    log = filled(new_disk())
    before = records_of(log)
    high_watermark = log.segments[3].next_offset  # a segment boundary
    result = clean(log, 100, high_watermark=high_watermark)
    assert result is not None and result.job.first_uncleanable == high_watermark
    untouched = [r for r in before if r[0] >= high_watermark]
    assert [r for r in records_of(log) if r[0] >= high_watermark] == untouched
    # Records past the recovery point are not synced yet: their segments wait.
    durable = log.log_end_offset
    for r in range(12):
        log.append_as_leader(memoryview(keyed([(b"k0", b"new%d" % r)])), leader_epoch=3, now_ms=r)
    assert log.recovery_point == durable < log.active.base_offset
    unsynced = records_of(log)
    result = clean(log, 200)  # the high watermark at the log end
    assert result is not None and result.job.first_uncleanable <= durable
    assert [r for r in records_of(log) if r[0] >= durable] == [
        r for r in unsynced if r[0] >= durable
    ]


def test_a_truncation_during_the_pass_abandons_it() -> None:
    disk = new_disk()
    log = filled(disk)
    before = records_of(log)
    job = log.cleaning_job(
        policy=POLICY, checkpoint=None, high_watermark=log.log_end_offset, now_ms=100,
        last_batch_of_producers=(), map_capacity=1000,
    )  # fmt: skip
    assert job is not None
    result = run_pass(disk, job)
    log.truncate_to(log.segments[2].base_offset, 100, "test")
    assert log.commit_cleaning(result, 100) is False
    assert records_of(log) == [r for r in before if r[0] < log.log_end_offset]
    assert not [n for n in disk.listdir(DIR) if n.endswith((".cleaned", ".swap"))]


def test_a_full_map_cleans_what_it_covers_and_the_next_pass_goes_on() -> None:
    log = filled(new_disk())
    expected = last_values(records_of(log))
    first = clean(log, 100, capacity=6)
    assert first is not None and first.map_end < first.job.first_uncleanable
    second = clean(log, 100, checkpoint=first.map_end, capacity=6)
    assert second is not None
    assert last_values(records_of(log)) == expected


def run_with_power_loss(at: int) -> tuple[SimDisk, Records]:
    """A pass with the power lost in place of its ``at``-th mutating operation (or
    just after it, when it has fewer); the disk and the records before it."""
    disk = new_disk(at)
    log = filled(disk)
    before = records_of(log)
    disk.schedule_power_loss(at)
    try:
        clean(log, 100)
    except PowerLoss:
        return disk, before
    disk.crash()
    return disk, before


def test_a_power_loss_at_every_step_of_a_pass_leaves_the_old_log_or_the_new() -> None:
    # Learn how many mutating operations a pass takes, then crash in place of each.
    disk = new_disk()
    log = filled(disk)
    start = disk.operations
    clean(log, 100)
    steps = disk.operations - start
    assert steps > 10
    outcomes = set()
    for at in range(steps + 1):
        disk, before = run_with_power_loss(at)
        reopened = PartitionLog.open(disk, DIR, SMALL, 1_000, recovery_point=0)
        assert reopened.offline is None, at
        seen = records_of(reopened)
        reopened.check_consistency()
        leftovers = [n for n in disk.listdir(DIR) if n.endswith((".cleaned", ".swap"))]
        assert leftovers == [], (at, leftovers)
        if seen == before:
            outcomes.add("old")
        else:
            # Not the old log: then exactly what the pass made, every key's last value kept.
            assert last_values(seen) == last_values(before), at
            assert set(seen) <= set(before), at
            outcomes.add("new")
    assert outcomes == {"old", "new"}


def test_a_consumer_read_passes_over_segments_cleaning_left_without_records() -> None:
    log = filled(new_disk())
    clean(log, 100)
    first = log.segments[0]
    assert all(h.records_count == 0 for h in first.headers_from(0, first.size)), (
        "the first segment holds only superseded records, so cleaning leaves it record-less"
    )
    replica = log.read(0, 1 << 20)
    assert (
        replica is not None and validate_batches(replica.read(), compacted=True)[0].base_offset == 0
    )
    consumer = log.read(0, 1 << 20, skip_record_less=True)
    assert consumer is not None
    headers = validate_batches(consumer.read(), compacted=True)
    assert headers[0].base_offset > 0 and any(h.records_count for h in headers)


def cleaning_job_of(log: PartitionLog) -> CleaningJob:
    job = log.cleaning_job(
        policy=POLICY, checkpoint=None, high_watermark=log.log_end_offset, now_ms=100,
        last_batch_of_producers=(), map_capacity=1000,
    )  # fmt: skip
    assert job is not None
    return job


def test_an_io_error_in_a_pass_takes_the_log_offline_and_leaves_no_cleaned_files() -> None:
    disk = new_disk()
    log = filled(disk)
    job = cleaning_job_of(log)
    disk.fail_next("append", path=DIR)
    with pytest.raises(OSError) as raised:
        run_pass(disk, job)
    log.cleaning_failed(raised.value)
    assert log.offline is not None and "log cleaner" in log.offline
    assert not [n for n in disk.listdir(DIR) if n.endswith(".cleaned")]


def test_a_corrupt_batch_met_by_a_pass_takes_the_log_offline_and_is_not_rewritten() -> None:
    disk = new_disk()
    log = filled(disk)
    job = cleaning_job_of(log)
    disk.flip_bit(log.segments[1].log_path, 70, 3)  # inside the first batch's records
    with pytest.raises(CorruptLogError) as raised:
        run_pass(disk, job)
    log.cleaning_failed(raised.value)
    assert log.offline is not None and "BAD_CRC" in log.offline
    assert disk.exists(f"{DIR}/.odradek-corrupt")  # and it stays offline across restarts


def test_a_truncation_into_the_cleaned_part_moves_what_cleaning_kept_to_quarantine() -> None:
    log = filled(new_disk())
    clean(log, 100)
    kept_below = [r for r in records_of(log) if r[0] >= 20]
    moved = log.truncate_to(20, 200, "test: a diverged follower")
    assert moved == len(kept_below)
    entries = quarantine.entries(log.fs, log.directory)
    assert len(entries) == 1 and entries[0].start_offset == 20
    assert log.log_end_offset == 20
