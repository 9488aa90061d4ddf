"""DiskRaftLog: the same log as MemoryRaftLog, kept on a (simulated) disk across crashes."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.core.errors import CorruptLogError, InvariantError
from odradek.protocol.record_batch import (
    ControlType,
)
from odradek.raft.disk_log import DiskRaftLog, metadata_log_directory
from odradek.raft.log import UNDEFINED, Entry, MemoryRaftLog, RaftLog, SnapshotId
from odradek.raft.snapshot import decode_snapshot, encode_snapshot, snapshot_file_name
from odradek.testing.sim_disk import PowerLoss, SimDisk

DIR = metadata_log_directory("meta")


def new_disk(seed: int = 0) -> SimDisk:
    disk = SimDisk(random.Random(seed))
    disk.makedirs("meta")
    disk.fsync_dir("")
    return disk


def open_disk_log(disk: SimDisk) -> DiskRaftLog:
    return DiskRaftLog.open(disk, DIR, now_ms=1_000)


def snapshot_bytes(snapshot_id: SnapshotId) -> bytes:
    return encode_snapshot(snapshot_id, [b"state-%d" % snapshot_id.end_offset], None, 7)


def entry(offset: int, epoch: int, count: int = 1, control: int | None = None) -> Entry:
    return Entry(offset, epoch, tuple(b"r%d" % (offset + i) for i in range(count)), control)


def entries(log: RaftLog) -> list[Entry]:
    return log.entries_from(log.start_offset(), 10**9)


def make_memory() -> RaftLog:
    return MemoryRaftLog()


def make_disk() -> RaftLog:
    return open_disk_log(new_disk())


BOTH: list[Callable[[], RaftLog]] = [make_memory, make_disk]


# --- Identical behaviour --------------------------------------------------------------


def observe(log: RaftLog) -> dict[str, object]:
    """Everything the core can learn from a log."""
    start, end = log.start_offset(), log.end_offset()
    held = entries(log)
    max_epoch = max([e.epoch for e in held] + [log.last_epoch()])
    latest = log.latest_snapshot()
    return {
        "start": start,
        "end": end,
        "last_epoch": log.last_epoch(),
        "entries": held,
        "windows": [log.entries_from(e.offset, 2) for e in held],
        "past_end": log.entries_from(end, 5),
        "entry_at": [log.entry_at(o) for o in range(max(start - 1, 0), end + 2)],
        "end_for_epoch": [log.end_offset_for_epoch(e) for e in range(-1, max_epoch + 3)],
        "latest_snapshot": latest,
        "snapshot_bytes": None if latest is None else log.read_snapshot(latest),
        "unknown_snapshot": log.read_snapshot(SnapshotId(end + 99, 1)),
    }


def boundaries(log: RaftLog) -> list[int]:
    held = entries(log)
    return [e.offset for e in held] + [log.end_offset()]


@st.composite
def operations(draw: st.DrawFn) -> list[tuple[str, int, int]]:
    names = ["append", "append", "append", "truncate", "snapshot", "delete", "reset", "flush"]
    return draw(
        st.lists(
            st.tuples(st.sampled_from(names), st.integers(0, 10**6), st.integers(0, 10**6)),
            max_size=25,
        )
    )


def apply(log: RaftLog, op: tuple[str, int, int]) -> None:
    """Apply one operation, turned into a valid call for the log's current state.

    The two logs hold the same state, so the same (name, a, b) becomes the same call.
    """
    name, a, b = op
    end, last = log.end_offset(), log.last_epoch()
    if name == "append":
        batch = []
        epoch = max(1, last)
        for i in range(a % 3 + 1):
            epoch += (b >> i) % 3 // 2
            control = ControlType.LEADER_CHANGE if (b >> (i + 4)) % 5 == 0 else None
            batch.append(entry(end, epoch, (a >> (i + 2)) % 3 + 1, control))
            end = batch[-1].next_offset
        log.append(batch)
    elif name == "truncate":
        # The core never truncates below its high watermark, which no snapshot passes.
        latest = log.latest_snapshot()
        floor = 0 if latest is None else latest.end_offset
        points = [p for p in boundaries(log) if p >= floor] or [log.end_offset()]
        log.truncate_to(points[a % len(points)])
    elif name == "snapshot":
        points = boundaries(log)
        offset = points[a % len(points)]
        below = log.entry_at(offset - 1)
        if b % 4 == 0 or below is None:
            # A lagging follower installs the leader's snapshot, past its own end.
            snapshot = SnapshotId(end + b % 7 + 1, last + b % 2)
            log.write_snapshot(snapshot, snapshot_bytes(snapshot))
            log.reset_to_snapshot(snapshot)
        else:
            snapshot = SnapshotId(offset, below.epoch)
            log.write_snapshot(snapshot, snapshot_bytes(snapshot))
    elif name == "delete":
        log.delete_before_snapshot()
    elif name == "reset":
        latest = log.latest_snapshot()
        if latest is not None:
            log.reset_to_snapshot(latest)
    elif name == "flush":
        log.flush()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations())
def test_disk_log_behaves_exactly_as_the_memory_log(ops: list[tuple[str, int, int]]) -> None:
    memory = MemoryRaftLog()
    disk = open_disk_log(new_disk())
    assert observe(disk) == observe(memory)
    for op in ops:
        apply(memory, op)
        apply(disk, op)
        assert observe(disk) == observe(memory), op


@pytest.mark.parametrize("make", BOTH)
def test_both_logs_refuse_what_the_core_must_never_do(make: Callable[[], RaftLog]) -> None:
    log = make()
    log.append([entry(0, 2, 3), entry(3, 2, 2)])
    with pytest.raises(InvariantError):
        log.append([entry(6, 2)])  # a gap
    with pytest.raises(InvariantError):
        log.append([entry(5, 1)])  # an older epoch
    with pytest.raises(InvariantError):
        log.truncate_to(1)  # inside a batch
    with pytest.raises(InvariantError):
        log.entries_from(1, 5)  # inside a batch
    with pytest.raises(InvariantError):
        log.reset_to_snapshot(SnapshotId(3, 2))  # not held
    assert entries(log) == [entry(0, 2, 3), entry(3, 2, 2)]


@pytest.mark.parametrize("make", BOTH)
def test_end_offset_for_epoch_with_only_a_snapshot(make: Callable[[], RaftLog]) -> None:
    log = make()
    log.append([entry(0, 1, 2), entry(2, 3, 2)])
    log.write_snapshot(SnapshotId(4, 3), snapshot_bytes(SnapshotId(4, 3)))
    log.delete_before_snapshot()
    assert (log.start_offset(), log.end_offset(), log.last_epoch()) == (4, 4, 3)
    assert log.end_offset_for_epoch(3) == (3, 4)
    assert log.end_offset_for_epoch(5) == (3, 4)
    assert log.end_offset_for_epoch(2) == (UNDEFINED, UNDEFINED)
    with pytest.raises(InvariantError):
        log.append([entry(4, 2)])  # below the snapshot's epoch


def test_control_entries_are_kafka_control_batches() -> None:
    disk = new_disk()
    log = open_disk_log(disk)
    log.append([entry(0, 1, 1, ControlType.LEADER_CHANGE), entry(1, 1, 2)])
    log.flush()
    segment = disk.read_file(f"{DIR}/{0:020d}.log")
    # Bit 5 of the first batch's attributes (int16 at byte 21) is the control flag.
    assert segment[21 + 1] & 0x20
    assert log.entry_at(0) == entry(0, 1, 1, ControlType.LEADER_CHANGE)
    assert log.entry_at(2) == entry(1, 1, 2)


# --- Durability -----------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(20))
def test_flushed_entries_survive_a_crash_and_the_rest_is_a_valid_prefix(seed: int) -> None:
    disk = new_disk(seed)
    log = open_disk_log(disk)
    written = [entry(0, 1, 2), entry(2, 1, 1), entry(3, 2, 3)]
    log.append(written)
    log.flush()
    more = [entry(6, 2, 2), entry(8, 3, 1), entry(9, 3, 4)]
    log.append(more)
    disk.crash()
    recovered = entries(open_disk_log(disk))
    assert recovered[: len(written)] == written
    assert recovered == (written + more)[: len(recovered)]


@pytest.mark.parametrize("seed", range(5))
def test_a_truncation_is_durable_when_it_returns(seed: int) -> None:
    disk = new_disk(seed)
    log = open_disk_log(disk)
    log.append([entry(0, 1, 2), entry(2, 1, 2), entry(4, 1, 2)])
    log.flush()
    log.truncate_to(2)
    disk.crash()
    reopened = open_disk_log(disk)
    assert entries(reopened) == [entry(0, 1, 2)]
    assert reopened.end_offset_for_epoch(1) == (1, 2)


@pytest.mark.parametrize("seed", range(10))
def test_a_flush_ticket_covers_what_was_appended_before_it_was_taken(seed: int) -> None:
    """A ticket may run on another thread while appends go on: it makes durable what was
    appended before it was taken, and the recovery point says exactly that."""
    disk = new_disk(seed)
    log = open_disk_log(disk)
    written = [entry(0, 1, 2), entry(2, 1, 1)]
    log.append(written)
    ticket = log.begin_flush()
    more = [entry(3, 2, 3)]
    log.append(more)  # after the ticket was taken: not covered
    ticket.run()
    log.finish_flush(ticket)
    assert log.recovery_point() == 3
    disk.crash()
    recovered = entries(open_disk_log(disk))
    assert recovered[: len(written)] == written
    assert recovered == (written + more)[: len(recovered)]


class RecordingLock:
    """A lock that counts how often it was taken."""

    def __init__(self) -> None:
        self.taken = 0

    def __enter__(self) -> None:
        self.taken += 1

    def __exit__(self, *exc: object) -> None:
        pass


def test_whatever_closes_files_takes_the_io_lock() -> None:
    """A driver running a ticket on another thread holds ``io_lock``; truncation,
    snapshot reset, segment deletion and close must wait for it."""
    log = open_disk_log(new_disk())
    lock = RecordingLock()
    log.io_lock = lock
    log.append([entry(0, 1, 2), entry(2, 1, 2), entry(4, 1, 2)])
    log.truncate_to(4)
    assert lock.taken == 1
    snapshot = SnapshotId(2, 1)
    log.write_snapshot(snapshot, snapshot_bytes(snapshot))
    log.delete_before_snapshot()
    assert lock.taken == 2
    later = SnapshotId(4, 1)
    log.write_snapshot(later, snapshot_bytes(later))
    log.reset_to_snapshot(later)
    assert lock.taken == 3
    log.close()
    assert lock.taken == 4


def test_a_snapshot_write_interrupted_anywhere_leaves_all_or_nothing() -> None:
    snapshot = SnapshotId(4, 1)
    data = snapshot_bytes(snapshot)

    def run(disk: SimDisk) -> DiskRaftLog:
        log = open_disk_log(disk)
        log.append([entry(0, 1, 2), entry(2, 1, 2), entry(4, 1, 1)])
        log.flush()
        log.write_snapshot(snapshot, data)
        return log

    probe = new_disk()
    open_disk_log(probe)
    before = probe.operations
    run(probe)
    steps = probe.operations - before + 1
    outcomes = set()
    for crash_at in range(steps):
        disk = new_disk(crash_at)
        open_disk_log(disk).close()
        disk.schedule_power_loss(crash_at)
        try:
            run(disk)
            disk.crash()
        except PowerLoss:
            pass
        reopened = open_disk_log(disk)
        assert not [n for n in disk.listdir(DIR) if n.endswith(".part")]
        latest = reopened.latest_snapshot()
        outcomes.add(latest)
        if latest is not None:
            assert latest == snapshot
            assert reopened.read_snapshot(snapshot) == data
            assert decode_snapshot(data).records == [b"state-4"]
            # The log starts at the snapshot; what is above it is still served.
            assert reopened.start_offset() == 4
    assert outcomes == {None, snapshot}


# --- Opening --------------------------------------------------------------------------


def test_open_starts_the_log_at_the_latest_snapshot_and_drops_older_ones() -> None:
    disk = new_disk()
    log = open_disk_log(disk)
    log.append([entry(0, 1, 2), entry(2, 2, 2), entry(4, 2, 2)])
    log.flush()
    log.write_snapshot(SnapshotId(2, 1), snapshot_bytes(SnapshotId(2, 1)))
    log.write_snapshot(SnapshotId(4, 2), snapshot_bytes(SnapshotId(4, 2)))
    log.close()
    reopened = open_disk_log(disk)
    assert reopened.start_offset() == 4
    assert entries(reopened) == [entry(4, 2, 2)]
    assert reopened.entry_at(2) is None
    assert reopened.read_snapshot(SnapshotId(2, 1)) is None
    assert snapshot_file_name(SnapshotId(2, 1)) not in disk.listdir(DIR)
    assert reopened.end_offset_for_epoch(2) == (2, 6)


def test_a_log_behind_its_snapshot_restarts_at_the_snapshot() -> None:
    disk = new_disk()
    log = open_disk_log(disk)
    log.append([entry(0, 1, 2)])
    log.flush()
    # A follower got the leader's snapshot and crashed before resetting its log.
    log.write_snapshot(SnapshotId(10, 3), snapshot_bytes(SnapshotId(10, 3)))
    log.close()
    reopened = open_disk_log(disk)
    assert (reopened.start_offset(), reopened.end_offset(), reopened.last_epoch()) == (10, 10, 3)
    reopened.append([entry(10, 3)])
    assert entries(reopened) == [entry(10, 3)]


def test_a_log_that_diverges_from_its_snapshot_restarts_at_the_snapshot() -> None:
    disk = new_disk()
    log = open_disk_log(disk)
    log.append([entry(0, 1, 2), entry(2, 1, 3)])
    log.flush()
    # The snapshot says offset 4 was written in epoch 2; this log has epoch 1 there.
    log.write_snapshot(SnapshotId(5, 2), snapshot_bytes(SnapshotId(5, 2)))
    log.close()
    reopened = open_disk_log(disk)
    assert (reopened.start_offset(), reopened.end_offset()) == (5, 5)
    assert entries(reopened) == []


def test_the_bootstrap_checkpoint_alone_opens_as_an_empty_log() -> None:
    disk = new_disk()
    disk.makedirs(DIR)
    bootstrap = SnapshotId(0, 0)
    handle = disk.open(f"{DIR}/{snapshot_file_name(bootstrap)}", create=True)
    handle.append(snapshot_bytes(bootstrap))
    handle.fsync()
    handle.close()
    log = open_disk_log(disk)
    assert (log.start_offset(), log.end_offset(), log.last_epoch()) == (0, 0, 0)
    assert log.latest_snapshot() == bootstrap
    log.append([entry(0, 1)])
    assert entries(log) == [entry(0, 1)]


def test_a_damaged_snapshot_stops_the_log_instead_of_being_ignored() -> None:
    disk = new_disk()
    log = open_disk_log(disk)
    log.append([entry(0, 1, 2)])
    log.write_snapshot(SnapshotId(2, 1), snapshot_bytes(SnapshotId(2, 1)))
    log.close()
    disk.flip_bit(f"{DIR}/{snapshot_file_name(SnapshotId(2, 1))}", 40, 3)
    with pytest.raises(CorruptLogError, match="checkpoint"):
        open_disk_log(disk)


def test_entries_from_reads_across_many_small_and_large_batches() -> None:
    log = open_disk_log(new_disk())
    big = Entry(0, 1, tuple(bytes(200_000) for _ in range(8)))
    small = [entry(8 + i, 1) for i in range(3000)]
    log.append([big, *small])
    assert log.entries_from(0, 2) == [big, small[0]]
    assert log.entries_from(8, 5000) == small
    assert log.entries_from(1500, 3) == small[1492:1495]
