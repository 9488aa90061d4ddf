"""Group commit: many appends, one flush, and every waiter told whether it is durable.

:class:`GroupCommit` owns the node's flusher. Appends ask for a flush
(:meth:`GroupCommit.request_flush`, or :meth:`GroupCommit.await_flush` to wait for one);
each wake-up of the flusher takes one :class:`~odradek.storage.log.FlushTicket` from
every log with unflushed records and runs their fsyncs on one long-lived thread
(:class:`SyncThread`) while the event loop goes on taking appends, which the next
flush covers.

A waiter learns the outcome for its own partition: durable, or not (the fsync failed,
the log went offline, or the records it waited for were truncated meanwhile). A failed
flush never completes a waiter as if it had worked: a follower would report an offset
that is not on its disk, and the high watermark and acks=all would move on it.

While the fsyncs run, nothing may close or cut a log's files (retention, truncation,
topic deletion): :attr:`GroupCommit.io_lock` is held, and those owners take it too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from functools import partial

from odradek.broker.partition import LocalPartition
from odradek.core.errors import LogOfflineError
from odradek.shell.clock import now_ms
from odradek.shell.worker_thread import WorkerThread
from odradek.storage.log import FlushTicket

log = logging.getLogger("odradek.node")

PartitionKey = tuple[str, int]
_Waiter = tuple[int, "asyncio.Future[bool]"]


class GroupCommit:
    def __init__(
        self,
        hosted: Callable[[], Iterable[LocalPartition]],
        lookup: Callable[[PartitionKey], LocalPartition | None],
        on_flushed: Callable[[LocalPartition], None],
    ) -> None:
        """``hosted`` lists the partitions to flush, ``lookup`` finds one by key, and
        ``on_flushed`` is told of each partition a flush covered (its high watermark may
        move, its long-polling readers wake)."""
        self._hosted = hosted
        self._lookup = lookup
        self._on_flushed = on_flushed
        self.io_lock = asyncio.Lock()
        self._sync_thread = SyncThread()
        self._wakeup = asyncio.Event()
        self._pending: dict[PartitionKey, list[_Waiter]] = {}
        self._covered: dict[PartitionKey, list[_Waiter]] = {}

    def request_flush(self) -> None:
        """Flush soon (every append does this, whatever its acks)."""
        self._wakeup.set()

    async def await_flush(self, offsets: dict[PartitionKey, int]) -> frozenset[PartitionKey]:
        """Wait until each partition is durable up to its offset; the partitions that
        did not get there (their log failed, or was cut below the offset)."""
        loop = asyncio.get_running_loop()
        futures: list[tuple[PartitionKey, asyncio.Future[bool]]] = []
        for key, offset in offsets.items():
            future: asyncio.Future[bool] = loop.create_future()
            self._pending.setdefault(key, []).append((offset, future))
            futures.append((key, future))
        self._wakeup.set()
        failed = []
        for key, future in futures:
            if not await future:
                failed.append(key)
        return frozenset(failed)

    async def run(self) -> None:
        """The flusher: one flush per wake-up covers every append since the last."""
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            # Let every request already read from the sockets append first.
            await asyncio.sleep(0)
            async with self.io_lock:
                tickets = self._begin()
                failures = await self._sync_thread.run(tickets)
                for partition, ticket in tickets:
                    error = failures.get(id(ticket))
                    if error is not None:
                        log.error("%s", partition.log.fail_flush(ticket, error))
                self._finish(tickets)

    def flush_all(self) -> None:
        """Flush on this thread (at stop, when nothing else runs)."""
        tickets = self._begin()
        for partition, ticket in tickets:
            try:
                ticket.run()
            except OSError as e:
                log.error("%s", partition.log.fail_flush(ticket, e))
        self._finish(tickets)
        self._sync_thread.stop()

    def _begin(self) -> list[tuple[LocalPartition, FlushTicket]]:
        tickets = []
        for partition in list(self._hosted()):
            partition_log = partition.log
            if partition_log.offline is not None:
                continue
            if partition_log.recovery_point < partition_log.log_end_offset:
                try:
                    tickets.append((partition, partition_log.begin_flush()))
                except LogOfflineError as e:
                    log.error("%s", e)
        # Waiters registered from here on need a later flush.
        self._covered, self._pending = self._pending, {}
        return tickets

    def _durable(self, key: PartitionKey, offset: int) -> bool | None:
        """Whether ``key`` is durable up to ``offset``: True, False (it never will be
        on this log: offline, gone, or cut below it), or None (not yet)."""
        partition = self._lookup(key)
        if partition is None or partition.log.offline is not None:
            return False
        partition_log = partition.log
        if partition_log.recovery_point >= offset:
            return True
        if partition_log.log_end_offset < offset:
            return False  # truncated below the offset meanwhile: those records are gone
        return None

    def _finish(self, tickets: list[tuple[LocalPartition, FlushTicket]]) -> None:
        now = now_ms()
        for partition, ticket in tickets:
            if partition.log.offline is None:
                try:
                    partition.log.finish_flush(ticket, now)
                except LogOfflineError as e:
                    log.error("%s", e)
        for key, waiters in self._covered.items():
            for offset, future in waiters:
                if not future.done():
                    # Covered by this flush: durable now unless the flush failed.
                    future.set_result(self._durable(key, offset) is True)
        self._covered = {}
        # A waiter that arrived during the fsyncs may already be settled (its partition
        # was flushed past its offset, or went offline): tell it now, not at the next flush.
        for key, waiters in list(self._pending.items()):
            remaining = []
            for offset, future in waiters:
                durable = self._durable(key, offset)
                if durable is None:
                    remaining.append((offset, future))
                elif not future.done():
                    future.set_result(durable)
            if remaining:
                self._pending[key] = remaining
            else:
                del self._pending[key]
        if self._pending:
            self._wakeup.set()
        for partition, _ in tickets:
            self._on_flushed(partition)


class SyncThread:
    """The thread that runs each group commit's fsyncs while the event loop goes on (a
    :class:`~odradek.shell.worker_thread.WorkerThread`): the failures come back by
    ticket, and a bug in a ticket is raised in the flusher."""

    def __init__(self) -> None:
        self._worker = WorkerThread("odradek-fsync")

    async def run(self, tickets: list[tuple[LocalPartition, FlushTicket]]) -> dict[int, OSError]:
        """Run the tickets' fsyncs on the thread; the failures by ticket id."""
        return await self._worker.run(partial(_run_tickets, tickets))

    def stop(self) -> None:
        """Let the thread end once the job it runs (if any) is done."""
        self._worker.stop()


def _run_tickets(tickets: list[tuple[LocalPartition, FlushTicket]]) -> dict[int, OSError]:
    """On a worker thread: run each ticket's fsyncs; collect failures by ticket."""
    failures: dict[int, OSError] = {}
    for _, ticket in tickets:
        try:
            ticket.run()
        except OSError as e:
            failures[id(ticket)] = e
    return failures
