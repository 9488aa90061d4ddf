"""The metadata quorum's writes run on its sync thread, never on the event loop
(:mod:`odradek.shell.quorum_sync`), and nothing that depends on them is acted on first.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path

from odradek.raft.core import State
from odradek.raft.disk_log import DiskRaftLog, metadata_log_directory
from odradek.raft.log import Entry, MemoryRaftLog
from odradek.raft.quorum_file import QuorumStateFile, StoredQuorumState
from odradek.raft.ready import LogFlush
from odradek.shell.quorum import QuorumConfig, QuorumDriver
from odradek.shell.quorum_sync import QuorumSync
from odradek.shell.real_fs import RealFileSystem

WAIT_S = 5.0


class GatedLog(MemoryRaftLog):
    """A log whose flush waits for ``gate`` and records the thread it ran on."""

    def __init__(self, gate: threading.Event) -> None:
        super().__init__()
        self.gate = gate
        self.flush_threads: list[int] = []

    def flush(self) -> None:
        self.flush_threads.append(threading.get_ident())
        self.gate.wait(WAIT_S)


class GatedStateFile(QuorumStateFile):
    """A quorum-state file whose writes wait for ``gate`` and record their thread."""

    def __init__(self, directory: Path, gate: threading.Event) -> None:
        super().__init__(RealFileSystem(), str(directory))
        self.gate = gate
        self.write_threads: list[int] = []

    def write(self, state: StoredQuorumState) -> None:
        self.write_threads.append(threading.get_ident())
        self.gate.wait(WAIT_S)
        super().write(state)


def single_voter(tmp_path: Path) -> QuorumConfig:
    return QuorumConfig(
        node_id=1,
        cluster_id="test-cluster",
        directory_id=uuid.UUID(int=1),
        static_voters={1: ("127.0.0.1", 1)},
        bootstrap_servers=[],
        controller_listener="CONTROLLER",
        own_endpoints=(),
    )


def test_one_fsync_covers_the_flushes_asked_while_one_runs(tmp_path: Path) -> None:
    async def scenario() -> None:
        gate = threading.Event()
        log = GatedLog(gate)
        sync = QuorumSync(log, QuorumStateFile(RealFileSystem(), str(tmp_path)))
        sync.flush(LogFlush(1, 0))
        sync.kick()
        # The loop runs while the fsync is stuck: appends go on, and ask for more.
        await asyncio.sleep(0.05)
        assert not sync.idle
        for end in (2, 3, 4):
            sync.flush(LogFlush(end, 0))
            sync.kick()  # one job at a time: these wait for the next
        gate.set()
        first = await asyncio.wait_for(sync.finished(), WAIT_S)
        assert first.flush == LogFlush(1, 0)
        sync.kick()
        second = await asyncio.wait_for(sync.finished(), WAIT_S)
        assert second.flush == LogFlush(4, 0)  # the newest ask covers the others
        assert sync.idle and sync.jobs == 2
        assert len(log.flush_threads) == 2
        assert threading.get_ident() not in log.flush_threads
        sync.stop()

    asyncio.run(scenario())


def test_a_ticket_flush_moves_the_disk_logs_recovery_point(tmp_path: Path) -> None:
    async def scenario() -> None:
        fs = RealFileSystem()
        directory = metadata_log_directory(str(tmp_path))
        log = DiskRaftLog.open(fs, directory, 0)
        sync = QuorumSync(log, QuorumStateFile(fs, directory))
        log.append([Entry(0, 1, (b"a",)), Entry(1, 1, (b"b",))])
        assert log.recovery_point() == 0
        sync.write_state(StoredQuorumState(1, 1, 1, None))
        sync.flush(LogFlush(2, 0))
        sync.kick()
        job = await asyncio.wait_for(sync.finished(), WAIT_S)
        assert job.error is None and job.flush == LogFlush(2, 0)
        assert log.recovery_point() == 2
        assert sync.state_durable == sync.state_asked == 1
        assert QuorumStateFile(fs, directory).read() == StoredQuorumState(1, 1, 1, None)
        sync.stop()
        log.close()

    asyncio.run(scenario())


def test_the_driver_acts_on_a_vote_only_once_it_is_durable(tmp_path: Path) -> None:
    """A single voter elects itself at its first tick. Until its quorum state is on the
    disk it accepts writes into its log but commits nothing and is not writable; the
    writes happen on the sync thread while the loop goes on."""

    async def scenario() -> None:
        gate = threading.Event()
        state_file = GatedStateFile(tmp_path, gate)
        log = GatedLog(threading.Event())
        log.gate.set()  # the log flushes at once; only the quorum-state file is slow
        committed: list[Entry] = []
        driver = QuorumDriver(
            single_voter(tmp_path), log, state_file, committed.extend, lambda _: None
        )
        driver.start()
        async with asyncio.timeout(WAIT_S):
            while driver.raft.state is not State.LEADER:
                await asyncio.sleep(0.005)
        proposal = asyncio.create_task(driver.propose([b"x"]))
        await asyncio.sleep(0.2)  # the loop keeps running meanwhile
        assert not driver.writable
        assert not proposal.done() and committed == []
        gate.set()
        offset = await asyncio.wait_for(proposal, WAIT_S)
        assert [e.offset for e in committed][-1] == offset
        assert driver.writable
        loop_thread = threading.get_ident()
        assert state_file.write_threads and loop_thread not in state_file.write_threads
        assert log.flush_threads and loop_thread not in log.flush_threads
        await driver.stop()

    asyncio.run(scenario())


class FailingLog(MemoryRaftLog):
    """A log whose fsync fails, as a dying disk's does."""

    def flush(self) -> None:
        raise OSError(5, "Input/output error")


def test_a_failed_fsync_on_the_sync_thread_halts_the_replica(tmp_path: Path) -> None:
    """The fsync fails on the thread, and the replica leaves the quorum at once: it can
    no longer persist a record, so it must not lead, vote or acknowledge anything."""

    async def scenario() -> None:
        halted: list[str] = []
        driver = QuorumDriver(
            single_voter(tmp_path),
            FailingLog(),
            QuorumStateFile(RealFileSystem(), str(tmp_path)),
            lambda _: None,
            lambda _: None,
        )
        driver.on_halt = halted.append
        driver.start()
        async with asyncio.timeout(WAIT_S):
            while driver.halted is None:
                await asyncio.sleep(0.005)
        assert halted and "Input/output error" in halted[0]
        assert not driver.is_leader and not driver.writable
        await driver.stop()

    asyncio.run(scenario())
