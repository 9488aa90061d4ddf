"""The metadata quorum's sync thread: quorum-state writes and log fsyncs, off the loop.

:class:`~odradek.shell.quorum.QuorumDriver` hands every write the Raft core asks for
(``Ready.persist``, the quorum state; ``Ready.flush``, the log up to an offset) to
:class:`QuorumSync`, and learns from :meth:`QuorumSync.finished` when each is durable.
The event loop never waits for a disk: it goes on taking requests and appending (to the
page cache) while an fsync runs, and the next fsync covers all of it (group commit).
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from functools import partial

from odradek.raft.disk_log import DiskRaftLog
from odradek.raft.log import RaftLog
from odradek.raft.quorum_file import QuorumStateFile, StoredQuorumState
from odradek.raft.ready import LogFlush
from odradek.shell.worker_thread import WorkerThread
from odradek.storage.log import FlushTicket


@dataclass(slots=True)
class SyncJob:
    """One turn of the sync thread: the latest quorum state asked for (numbered
    ``state_seq``) and the latest log flush, with the fsyncs that do it."""

    state: StoredQuorumState | None
    state_seq: int
    flush: LogFlush | None
    ticket: FlushTicket | None
    error: OSError | None = None  # the write or the fsync failed: the log is unusable
    bug: BaseException | None = None  # anything else: raised on the loop


class QuorumSync:
    """The metadata quorum's sync thread: quorum-state writes and log flushes.

    The loop asks (:meth:`write_state`, :meth:`flush`) and kicks; one job runs
    at a time and what was asked meanwhile goes into the next, so a job writes only the
    newest quorum state (it supersedes the older ones: the epoch never goes back) and one
    fsync covers every append before it. The fsync's ticket is taken on the loop (it
    reads and resets the log's record of unflushed writes) and run on the thread.
    ``io_lock`` is held from taking the ticket until it has run, and the log's
    truncation, snapshot reset, segment deletion and close take it too: none may close a
    file under the fsync, nor record a flush of its own as done while this one's fsyncs
    have not run. Finished jobs come back through :meth:`finished`, in order.
    """

    def __init__(self, raft_log: RaftLog, state_file: QuorumStateFile) -> None:
        self._log = raft_log
        self._state_file = state_file
        self.io_lock = threading.Lock()
        if isinstance(raft_log, DiskRaftLog):
            raft_log.io_lock = self.io_lock
        self._worker = WorkerThread("odradek-raft-fsync")
        self._done: asyncio.Queue[SyncJob] = asyncio.Queue()
        self._running = False
        self._state: StoredQuorumState | None = None
        self._flush: LogFlush | None = None
        self.state_asked = 0  # the number of the newest quorum state asked for
        self.state_durable = 0  # the number of the newest one known durable
        self.jobs = 0  # jobs run, for tests and measurements
        self._closed = False

    @property
    def idle(self) -> bool:
        return not self._running and self._state is None and self._flush is None

    def write_state(self, state: StoredQuorumState) -> int:
        """Ask for ``state`` to be written; its number (see ``state_durable``)."""
        self._state = state
        self.state_asked += 1
        return self.state_asked

    def flush(self, flush: LogFlush) -> None:
        """Ask for the log to be made durable up to ``flush`` (the newest ask wins: it
        covers the older ones, or a truncation made them moot)."""
        self._flush = flush

    def kick(self) -> None:
        """Start a job for what was asked, unless one runs (its end starts the next)."""
        if self._closed or self._running or (self._state is None and self._flush is None):
            return
        flush, self._flush = self._flush, None
        state, self._state = self._state, None
        # Free: no job runs, and the loop takes it only inside a synchronous call. The
        # thread releases it once the job's writes are done.
        self.io_lock.acquire()
        try:
            ticket = (
                self._log.begin_flush()
                if flush is not None and isinstance(self._log, DiskRaftLog)
                else None
            )
        except BaseException:
            self.io_lock.release()
            raise
        job = SyncJob(state, self.state_asked if state is not None else 0, flush, ticket)
        self._running = True
        self.jobs += 1
        self._worker.submit(partial(self._run, job), partial(self._ran, job))

    async def finished(self) -> SyncJob:
        """The next job done (in the order they ran). The caller then kicks again."""
        job = await self._done.get()
        self._running = False
        if job.bug is not None:
            raise job.bug
        if job.error is None:
            if job.ticket is not None:
                assert isinstance(self._log, DiskRaftLog)
                self._log.finish_flush(job.ticket)
            if job.state is not None:
                self.state_durable = max(self.state_durable, job.state_seq)
        return job

    def stop(self) -> None:
        """Nothing more is started; the thread ends after the job it runs, if any."""
        self._closed = True
        self._worker.stop()

    def _run(self, job: SyncJob) -> None:
        """On the thread: the job's writes; an OSError makes the log unusable."""
        try:
            if job.state is not None:
                self._state_file.write(job.state)
            if job.ticket is not None:
                job.ticket.run()
            elif job.flush is not None:
                self._log.flush()
        except OSError as e:
            job.error = e
        finally:
            self.io_lock.release()

    def _ran(self, job: SyncJob, outcome: object, failed: bool) -> None:
        """On the loop: the job is done; anything but an OSError is a bug, raised by
        :meth:`finished`."""
        if failed:
            assert isinstance(outcome, BaseException)
            job.bug = outcome
        self._done.put_nowait(job)
