"""A cleaner worker's process: its pass writes what the same pass on a thread writes,
what it raises reaches the node, and it never outlives the node or a pass cut short."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

from odradek.core.errors import CorruptLogError
from odradek.shell.cleaner_process import CleanerProcess, CleanerProcessDied
from odradek.shell.cleaner_throttle import UNLIMITED
from odradek.shell.real_fs import RealFileSystem
from odradek.storage.cleaner.cleaning import CleaningJob, CleaningResult, run_pass
from odradek.storage.log import PartitionLog
from tests.storage.cleaner.helpers import POLICY, SMALL, keyed, records_of

KEYS = [b"k%d" % i for i in range(5)]


def filled(directory: Path, rounds: int = 12) -> PartitionLog:
    """Five keys written ``rounds`` times over on the real filesystem, many segments."""
    log = PartitionLog.create(RealFileSystem(), str(directory), SMALL, 0)
    for r in range(rounds):
        for i in range(0, len(KEYS), 2):
            pairs = [(k, b"v%d-%s" % (r, k)) for k in KEYS[i : i + 2]]
            log.append_as_leader(memoryview(keyed(pairs)), leader_epoch=1, now_ms=r)
    log.flush(rounds)
    return log


def job_of(log: PartitionLog) -> CleaningJob:
    job = log.cleaning_job(
        policy=POLICY, checkpoint=None, high_watermark=log.log_end_offset, now_ms=100,
        last_batch_of_producers=frozenset(), map_capacity=1000,
    )  # fmt: skip
    assert job is not None
    return job


def cleaned_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.suffix == ".cleaned"}


def wait_for(condition: object, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.05)
    assert condition(), "not within the time allowed"  # type: ignore[operator]


def test_a_pass_in_the_process_writes_what_the_pass_on_a_thread_writes(tmp_path: Path) -> None:
    log = filled(tmp_path / "table-0")
    before = records_of(log)
    shutil.copytree(tmp_path / "table-0", tmp_path / "copy-0")
    job = job_of(log)
    child = CleanerProcess("test-cleaner", UNLIMITED)
    try:
        result = child.run(job)
        assert child.pid is not None and child.pid != os.getpid()
        # The same job on this interpreter, over the copy, writes the same bytes.
        here = run_pass(
            RealFileSystem(), dataclasses.replace(job, directory=str(tmp_path / "copy-0"))
        )
        assert (result.segments, result.map_end, result.stats) == (
            here.segments, here.map_end, here.stats,
        )  # fmt: skip
        assert cleaned_files(tmp_path / "table-0") == cleaned_files(tmp_path / "copy-0") != {}
        # And the node swaps it in: every key's last value kept, superseded ones gone.
        assert log.commit_cleaning(result, 100)
        after = records_of(log)
        assert {k: (o, v) for o, k, v in after} == {k: (o, v) for o, k, v in before}
        assert len(after) < len(before)
        # One process serves the worker's passes, one after another.
        first = child.pid
        for i in range(12):  # enough to roll the active segment
            later = keyed([(KEYS[0], b"later-%d" % i)])
            log.append_as_leader(memoryview(later), leader_epoch=1, now_ms=90)
        log.flush(91)
        again = log.cleaning_job(
            policy=POLICY, checkpoint=result.map_end, high_watermark=log.log_end_offset,
            now_ms=100, last_batch_of_producers=frozenset(), map_capacity=1000,
        )  # fmt: skip
        assert again is not None and log.commit_cleaning(child.run(again), 100)
        assert child.pid == first
    finally:
        child.stop()
        log.close()


def test_corruption_found_in_the_process_takes_the_log_offline(tmp_path: Path) -> None:
    log = filled(tmp_path / "table-0")
    job = job_of(log)
    path = log.segments[1].log_path
    with open(path, "r+b") as f:  # a bit flipped inside the first batch's records
        f.seek(70)
        byte = f.read(1)[0]
        f.seek(70)
        f.write(bytes([byte ^ 0x08]))
    child = CleanerProcess("test-cleaner", UNLIMITED)
    try:
        with pytest.raises(CorruptLogError) as raised:
            child.run(job)
        assert raised.value.path == path and "BAD_CRC" in raised.value.reason
        log.cleaning_failed(raised.value)
        assert log.offline is not None and "BAD_CRC" in log.offline
        assert cleaned_files(tmp_path / "table-0") == {}
    finally:
        child.stop()
        log.close()


def test_a_child_killed_during_a_pass_fails_that_pass_and_the_next_starts_another(
    tmp_path: Path,
) -> None:
    log = filled(tmp_path / "table-0")
    job = job_of(log)
    slow = CleanerProcess("test-cleaner", bytes_per_second=200)  # seconds for the pass
    outcome: list[BaseException] = []

    def clean() -> None:
        try:
            slow.run(job)
        except BaseException as e:
            outcome.append(e)

    thread = threading.Thread(target=clean)
    thread.start()
    wait_for(lambda: slow.pid is not None)
    killed = slow.pid
    assert killed is not None
    os.kill(killed, signal.SIGKILL)
    thread.join(20)
    assert len(outcome) == 1 and isinstance(outcome[0], CleanerProcessDied), outcome
    assert log.offline is None  # the pass failed, not the log
    # A worker whose process died (during a pass or idle) starts another for its next.
    fast = CleanerProcess("test-cleaner", UNLIMITED)
    try:
        fast.run(job)
        first = fast.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: not fast.alive)
        assert log.commit_cleaning(fast.run(job), 100)
        assert fast.pid not in (None, first, killed)
    finally:
        slow.stop()
        fast.stop()
        log.close()


def test_the_process_ends_with_the_thread_that_started_it(tmp_path: Path) -> None:
    """A node killed with SIGKILL takes its cleaner processes with it: none goes on
    writing ``.cleaned`` files under the node that restarts on the same log dir."""
    log = filled(tmp_path / "table-0")
    child = CleanerProcess("test-cleaner", UNLIMITED)
    results: list[CleaningResult] = []
    thread = threading.Thread(target=lambda: results.append(child.run(job_of(log))))
    thread.start()
    thread.join(30)
    # The child ran the pass (it answered), and dies once its thread has ended.
    assert len(results) == 1 and child.pid is not None
    wait_for(lambda: not child.alive)
    log.close()
