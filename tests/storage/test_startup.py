"""Start-up of a log dir's partitions (ADR 0016): what is read at start, what waits for
the scrub, and the files a partition keeps open.

What a user relies on: a restart serves without reading the whole log, yet nothing
corrupt below the recovery point goes unnoticed (the scrub finds it and takes only
that partition offline, naming file and position); a torn tail past the recovery point
is still cut into quarantine; an index file that a power loss left stale never makes a
read return the wrong batches; a partition holds few file descriptors however many
segments it has, and a file range being sent keeps its descriptor.
"""

from __future__ import annotations

import errno
import logging
import os
import random
import struct
from pathlib import Path

import pytest

from odradek.core.errors import LogOfflineError
from odradek.protocol.record_batch import (
    validate_batches,
)
from odradek.shell.real_fs import RealFileSystem
from odradek.storage import quarantine
from odradek.storage.fs import FileSystem
from odradek.storage.index import OFFSET_ENTRY, TIME_ENTRY
from odradek.storage.log import LogConfig, PartitionLog
from odradek.storage.segment import SegmentCache, segment_name
from odradek.testing.sim_disk import SimDisk
from tests.storage.helpers import DIR, batch, new_disk, scrub

SMALL = LogConfig(segment_bytes=800, index_interval_bytes=200)


def filled(disk: FileSystem, directory: str = DIR, batches: int = 60) -> PartitionLog:
    log = PartitionLog.create(disk, directory, SMALL, 0)
    for i in range(batches):
        data = batch(3, value_size=40, timestamp=1_000 + 10 * i, tag=i)
        log.append_as_leader(memoryview(data), 1, i)
    log.flush(100)
    return log


def read_all(log: PartitionLog) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        found = log.read(offset, 1 << 20)
        assert found is not None
        data = found.read()
        for h in validate_batches(data):
            out.append((h.base_offset, bytes(data[h.position : h.end])))
            offset = h.next_offset
    return out


def trusting_open(
    disk: FileSystem, recovery_point: int, directory: str = DIR, **kwargs: object
) -> PartitionLog:
    return PartitionLog.open(
        disk,
        directory,
        SMALL,
        10**6,
        recovery_point=recovery_point,
        validate_all=False,
        **kwargs,  # type: ignore[arg-type]
    )


def test_a_restart_validates_only_from_the_recovery_point_and_the_scrub_reads_the_rest() -> None:
    disk = new_disk()
    log = filled(disk)
    expected = read_all(log)
    end, size = log.log_end_offset, log.size_in_bytes()
    assert len(log.segments) > 10
    log.close()
    reopened = trusting_open(disk, recovery_point=end)
    # Only the tail of the active segment from its last index entry was read.
    assert 0 < reopened.validated_bytes_at_open <= SMALL.index_interval_bytes + len(batch(3, 40))
    assert reopened.scrub_pending_bytes() == size - reopened.validated_bytes_at_open
    assert (reopened.log_end_offset, reopened.recovery_point) == (end, end)
    assert read_all(reopened) == expected  # served before the scrub
    assert scrub(reopened) == size - reopened.validated_bytes_at_open
    assert reopened.offline is None and reopened.scrub_pending_bytes() == 0
    assert read_all(reopened) == expected


def test_after_a_crash_the_bytes_past_the_recovery_point_are_validated_and_a_torn_tail_cut(
    caplog: pytest.LogCaptureFixture,
) -> None:
    disk = new_disk()
    log = filled(disk)
    durable = log.log_end_offset
    for i in range(5):
        log.append_as_leader(memoryview(batch(3, value_size=40, tag=100 + i)), 1, 200)
    tail_start = log.active.size
    log.active.log.append(batch(3, value_size=40)[:30])  # half a batch, as a crash leaves it
    log.active.log.fsync()
    del log  # a SIGKILL: nothing is closed, the page cache keeps what was written
    with caplog.at_level(logging.WARNING, logger="odradek.storage"):
        reopened = trusting_open(disk, recovery_point=durable)
    assert reopened.offline is None
    assert reopened.log_end_offset >= durable
    line = next(r.getMessage() for r in caplog.records if "recovery of" in r.getMessage())
    assert f"position {tail_start}" in line and "30 bytes" in line
    assert quarantine.entries(disk, DIR)[0].size_bytes == 30
    assert scrub(reopened) > 0 and reopened.offline is None


def test_corruption_below_the_recovery_point_is_served_until_the_scrub_finds_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    disk = new_disk()
    log = filled(disk)
    end = log.log_end_offset
    second = log.segments[1]
    log.close()
    path = f"{DIR}/{segment_name(second.base_offset, '.log')}"
    disk.flip_bit(path, 70, 1)  # inside the first batch's CRC range
    reopened = trusting_open(disk, recovery_point=end)
    assert reopened.offline is None  # what a user gives up until the scrub has run
    caplog.set_level(logging.ERROR, logger="odradek.storage")
    scrub(reopened)
    assert reopened.offline is not None
    assert path in reopened.offline and "BAD_CRC at position 0" in reopened.offline
    assert any(path in r.getMessage() and "offline" in r.getMessage() for r in caplog.records)
    with pytest.raises(LogOfflineError):
        reopened.read(0, 100)


def test_a_stale_index_file_is_caught_where_it_is_used_and_rebuilt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A power loss can leave an older segment's index from another history: entries
    # that parse but point into the middle of batches. Reads must still be right.
    disk = new_disk()
    log = filled(disk)
    expected = read_all(log)
    end = log.log_end_offset
    victim = log.segments[2]
    log.close()
    index_path = f"{DIR}/{segment_name(victim.base_offset, '.index')}"
    entries = list(struct.iter_unpack(">ii", disk.read_file(index_path)))
    assert entries
    shifted = b"".join(OFFSET_ENTRY.pack(rel, pos + 17) for rel, pos in entries)
    disk.remove(index_path)
    handle = disk.open(index_path, create=True)
    handle.append(shifted)
    handle.fsync()
    reopened = trusting_open(disk, recovery_point=end)
    caplog.set_level(logging.WARNING, logger="odradek.storage")
    for offset in range(reopened.log_start_offset, end):
        found = reopened.read(offset, 1)
        assert found is not None
        first = validate_batches(found.read())[0]
        assert first.base_offset <= offset <= first.last_offset
    assert read_all(reopened) == expected
    index_file = f"{DIR}/{segment_name(victim.base_offset, '.log')}"
    assert any(
        index_file in r.getMessage() and "rebuilding its indexes" in r.getMessage()
        for r in caplog.records
    )


def test_the_scrub_finds_a_stale_time_index_and_timestamps_stay_right() -> None:
    disk = new_disk()
    log = filled(disk)
    end = log.log_end_offset
    victim = log.segments[1]
    log.close()
    path = f"{DIR}/{segment_name(victim.base_offset, '.timeindex')}"
    entries = list(struct.iter_unpack(">qi", disk.read_file(path)))
    assert len(entries) > 1
    # Each timestamp claimed one batch later than it is: plausible, and wrong.
    wrong = b"".join(TIME_ENTRY.pack(ts + 1, rel) for ts, rel in entries)
    disk.remove(path)
    handle = disk.open(path, create=True)
    handle.append(wrong)
    handle.fsync()
    reopened = trusting_open(disk, recovery_point=end)
    scrub(reopened)
    assert reopened.offline is None
    for i in range(60):
        found = reopened.offset_for_timestamp(1_000 + 10 * i)
        assert found is not None and found.base_offset == 3 * i


def test_a_rolled_segment_keeps_its_largest_timestamp_in_its_time_index() -> None:
    # Kafka writes the time index's last entry when a segment stops being active, so a
    # restart knows the largest timestamp (retention, ListOffsets) without a scan.
    disk = new_disk()
    config = LogConfig(segment_bytes=10_000, index_interval_bytes=1_000)
    log = PartitionLog.create(disk, DIR, config, 0)
    for ts in (5_000, 9_000, 6_000):  # the largest comes too soon for an index entry
        log.append_as_leader(memoryview(batch(1, timestamp=ts)), 1, 0)
    log.active.size = config.segment_bytes  # the next append rolls
    log.append_as_leader(memoryview(batch(1, timestamp=1)), 1, 0)
    log.flush(0)
    data = disk.read_file(f"{DIR}/{segment_name(0, '.timeindex')}")
    assert TIME_ENTRY.unpack(data[-TIME_ENTRY.size :]) == (9_000, 1)


def test_a_damaged_leader_epoch_checkpoint_means_validating_every_batch() -> None:
    disk = new_disk()
    log = filled(disk)
    end = log.log_end_offset
    log.close()
    # A checkpoint that parses but lost the epoch the first batches were written in.
    handle = disk.open(f"{DIR}/leader-epoch-checkpoint", create=True)
    handle.truncate(0)
    handle.append(b"0\n0\n")
    handle.fsync()
    reopened = trusting_open(disk, recovery_point=end)
    assert reopened.scrub_pending_bytes() == 0  # everything was validated at open
    assert reopened.epochs.entries() == [(1, 0)]


@pytest.mark.parametrize("seed", range(30))
def test_the_scrub_after_power_losses_finds_only_what_is_there(seed: int) -> None:
    # Crashes at random points of appends, flushes and rolls; each restart trusts what
    # lies below its recovery point, and the scrub must agree with that trust.
    disk = SimDisk(random.Random(seed))
    disk.makedirs("data")
    disk.fsync_dir("")
    rng = random.Random(seed)
    log = PartitionLog.create(disk, DIR, SMALL, 0)
    durable = 0
    for step in range(8):
        for i in range(rng.randint(5, 20)):
            log.append_as_leader(memoryview(batch(2, value_size=30, tag=step * 100 + i)), 1, step)
            if rng.random() < 0.3:
                durable = log.flush(step)
        disk.crash()
        log = trusting_open(disk, recovery_point=durable)
        assert log.offline is None, log.offline
        assert log.log_end_offset >= durable
        durable = log.recovery_point
        read_all(log)
        if rng.random() < 0.5:
            scrub(log)
            assert log.offline is None, log.offline


def test_an_older_segment_holds_no_file_open_and_the_cache_bounds_them(tmp_path: Path) -> None:
    fs = RealFileSystem()
    directory = str(tmp_path / "t-0")
    log = filled(fs, directory, batches=90)
    segments = len(log.segments)
    log.close()
    before = len(os.listdir("/proc/self/fd"))
    cache = SegmentCache(capacity=4)
    reopened = trusting_open(fs, recovery_point=10**9, directory=directory, cache=cache)
    read_all(reopened)
    scrub(reopened)
    held = len(os.listdir("/proc/self/fd")) - before
    # The active segment's three files, and at most four older segments' logs.
    assert segments > 20 and held <= 3 + 4
    reopened.close()


def reopened_after_a_clean_stop(tmp_path: Path, cache: SegmentCache) -> PartitionLog:
    """A log of many segments on the real disk, closed, and opened again as a start
    after a clean stop opens it (its recovery point at the log end)."""
    fs = RealFileSystem()
    directory = str(tmp_path / "t-0")
    filled(fs, directory, batches=90).close()
    return trusting_open(fs, recovery_point=10**9, directory=directory, cache=cache)


def test_a_clean_open_opens_no_older_segment(tmp_path: Path) -> None:
    # A stat gives an older segment's size: a start with 9,000 segments pays no 9,000
    # open, fstat and close calls; a segment's file is opened when it is first read.
    cache = SegmentCache(capacity=100)
    reopened = reopened_after_a_clean_stop(tmp_path, cache)
    older = reopened.segments[:-1]
    # Only the log's first batch is read (it is checked against the leader-epoch file).
    assert len(older) > 20 and len(cache) <= 1
    assert sum(s._log is not None for s in older) <= 1
    assert [s.size for s in older] == [os.path.getsize(s.log_path) for s in older]
    read_all(reopened)
    assert len(cache) == len(older)
    reopened.close()


def test_a_file_range_keeps_its_descriptor_when_the_cache_lets_go_of_it(tmp_path: Path) -> None:
    reopened = reopened_after_a_clean_stop(tmp_path, SegmentCache(capacity=1))
    found = reopened.read(0, 1 << 20)
    assert found is not None
    expected = found.read()
    read_all(reopened)  # every other segment passes through the cache meanwhile
    assert reopened.segments[0]._log is None  # let go of by the cache
    fd = found.handle.fileno()
    assert fd is not None and fd >= 0
    # What send_frame does with a range: sendfile from its descriptor.
    reader, writer = os.pipe()
    try:
        sent = os.sendfile(writer, fd, found.position, found.length)
        assert os.read(reader, sent) == expected[:sent]
    finally:
        os.close(reader)
        os.close(writer)
    assert found.read() == expected
    path = os.readlink(f"/proc/self/fd/{fd}")
    assert path.endswith(segment_name(0, ".log"))
    del found
    assert not os.path.exists(f"/proc/self/fd/{fd}") or not os.readlink(
        f"/proc/self/fd/{fd}"
    ).endswith(segment_name(0, ".log"))
    reopened.close()


def test_too_many_open_files_fails_the_call_and_keeps_the_log_online() -> None:
    disk = new_disk()
    log = filled(disk)
    end = log.log_end_offset
    log.close()
    reopened = trusting_open(disk, recovery_point=end, cache=SegmentCache(capacity=1))
    read_all(reopened)  # leaves the first segment let go of by the cache
    disk.fail_next("open", errno.EMFILE)
    with pytest.raises(LogOfflineError, match="too many open files"):
        reopened.read(0, 100)
    assert reopened.offline is None
    assert reopened.read(0, 100) is not None


def test_a_truncation_below_the_recovery_point_is_checkpointed_at_once() -> None:
    disk = new_disk()
    log = filled(disk)
    calls: list[int] = []
    log.on_recovery_point_lowered = lambda: calls.append(log.recovery_point)
    log.truncate_to(30, 200, "test")
    assert calls == [30]
    log.truncate_to(100, 200, "test")  # past the end: nothing lowered
    assert calls == [30]
