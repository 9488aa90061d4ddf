"""The scrub: reading, in the background, what start-up no longer reads (ADR 0016).

A log dir's partitions open with only the batches from their recovery point on
validated; the older bytes are served as they are and :class:`Scrubber` validates
them afterwards, oldest first, at most ``odradek.log.scrub.bytes.per.second``. Each
step takes one range of at most :data:`CHUNK_BYTES` from one partition, round robin, and
validates it on a worker thread, holding the node's I/O lock (as the flusher does) so
that retention and partition deletion never remove a segment while the thread reads it;
a truncation meanwhile is seen by the log, which drops that result. What the scrub finds
is judged on the event loop by :meth:`~odradek.storage.log.PartitionLog.finish_scrub`:
a corrupt batch takes only its partition offline, with a log line naming the file and
the position.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable

from odradek.core.errors import LogOfflineError
from odradek.storage.log import PartitionLog

log = logging.getLogger("odradek.node")

CHUNK_BYTES = 256 * 1024
"""Bytes per step: small enough that a flush waiting for the I/O lock waits little."""

IDLE_S = 1.0


class Scrubber:
    def __init__(
        self,
        logs: Callable[[], Iterable[PartitionLog]],
        io_lock: asyncio.Lock,
        bytes_per_second: int,
        chunk_bytes: int = CHUNK_BYTES,
    ) -> None:
        self._logs = logs
        self._io_lock = io_lock
        self._rate = max(bytes_per_second, 1)
        self._chunk = max(min(chunk_bytes, bytes_per_second), 1)
        self.bytes_read = 0

    def pending_bytes(self) -> int:
        return sum(partition_log.scrub_pending_bytes() for partition_log in self._logs())

    async def run(self) -> None:
        """Scrub until nothing is left, then end (the supervisor lets it)."""
        pending = self.pending_bytes()
        if pending == 0:
            return
        started = time.monotonic()
        log.info(
            "scrub: %d bytes below the recovery points were not validated at start; "
            "validating them at %d bytes/s (odradek.log.scrub.bytes.per.second)",
            pending,
            self._rate,
        )
        budget_start = time.monotonic()
        budget_bytes = 0
        while True:
            candidates = [p for p in self._logs() if p.scrub_pending_bytes() > 0]
            if not candidates:
                break
            progress = 0
            for partition_log in candidates:
                read = await self._step(partition_log)
                progress += read
                self.bytes_read += read
                budget_bytes += read
                # Sleep off whatever the rate did not allow yet.
                ahead = budget_bytes / self._rate - (time.monotonic() - budget_start)
                if ahead > 0:
                    await asyncio.sleep(ahead)
                if time.monotonic() - budget_start > 10:
                    budget_start, budget_bytes = time.monotonic(), 0
            if progress == 0:
                # Every log with work left failed to give a range (out of descriptors):
                # try again later rather than spin.
                await asyncio.sleep(IDLE_S)
        log.info(
            "scrub: done, %d bytes validated in %.1f s",
            self.bytes_read,
            time.monotonic() - started,
        )

    async def _step(self, partition_log: PartitionLog) -> int:
        """One range of one log; the bytes read (0 when nothing could be read)."""
        async with self._io_lock:
            try:
                task = partition_log.next_scrub_task(self._chunk)
            except LogOfflineError:
                return 0  # logged by the log; an offline log has nothing left to scrub
            if task is None:
                return 0
            result = await asyncio.to_thread(task.run)
            # A log that went offline for it (corruption, a read error) said so itself.
            with contextlib.suppress(LogOfflineError):
                partition_log.finish_scrub(task, result)
        # The range's last batch may end past its limit: it was read whole.
        return max(result.check.position - task.start, task.length)
