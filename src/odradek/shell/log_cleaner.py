"""The log cleaner: compacted logs cleaned off the loop, swapped in on the loop.

``log.cleaner.threads`` workers each take, every time they are free, the dirtiest
compacted log that is due (:mod:`odradek.storage.cleaner.plan`) and not being cleaned by
another, run its pass off the loop (the pass reads and writes only files it names, so
the loop goes on serving the log), and commit it on the loop under the flush lock, as
retention does. With nothing due a worker waits ``log.cleaner.backoff.ms``. On the real
filesystem each worker's passes run in a process of its own
(:mod:`odradek.shell.cleaner_process`: a pass on a thread held the interpreter lock
from the producers); on a simulated one, on the worker's thread. The workers' reads and
writes together are held to ``log.cleaner.io.max.bytes.per.second``. A pass that finds
corruption or meets an I/O error takes its log offline, with a log line naming the
partition (Kafka's "uncleanable partition"); the cleaner goes on with the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from odradek.broker.cleaner_settings import CleanerSettings
from odradek.broker.partition import LocalPartition
from odradek.broker.state import BrokerState
from odradek.core.errors import LogOfflineError
from odradek.shell.cleaner_process import CleanerProcess
from odradek.shell.cleaner_throttle import UNLIMITED, IoThrottle
from odradek.shell.clock import now_ms
from odradek.shell.housekeeping import Flusher
from odradek.shell.worker_thread import WorkerThread
from odradek.storage.checkpoint import TopicPartition
from odradek.storage.cleaner.cleaning import CleaningJob, remove_cleaned, run_pass
from odradek.storage.cleaner.offset_map import OffsetMap
from odradek.storage.fs import FileSystem
from odradek.storage.log_dir import LogDir

log = logging.getLogger("odradek.cleaner")


class LogCleaner:
    """``settings`` gives the cleaner's settings as they stand (dynamic configs
    included); :meth:`reconfigure` applies them to the running cleaner, as Kafka's
    LogCleaner does on an AlterConfigs: workers are added or told to end after their
    pass, and the dedupe buffer, the rate and the backoff hold from the next pass."""

    def __init__(
        self,
        state: BrokerState,
        log_dir: LogDir,
        fs: FileSystem,
        flusher: Flusher,
        settings: Callable[[], CleanerSettings],
        *,
        processes: bool = False,
    ) -> None:
        """``processes``: run the passes in worker processes (on the real filesystem
        only: the child opens the job's paths itself)."""
        self._state = state
        self._log_dir = log_dir
        self._fs = fs
        self._flusher = flusher
        self._settings_of = settings
        self.settings = settings()
        self._throttle = IoThrottle(self.settings.io_max_bytes_per_second)
        self._processes = processes
        self._busy: set[TopicPartition] = set()
        self._workers: dict[int, WorkerThread] = {}
        self._children: dict[int, CleanerProcess] = {}
        self._changed = asyncio.Event()
        self.passes = 0
        """Committed passes (tests and logs)."""
        self.uncleanable: set[TopicPartition] = set()
        """Partitions a pass failed on: not cleaned again until a restart."""

    def reconfigure(self) -> None:
        """Take up the settings as they now stand (called on every metadata change)."""
        settings = self._settings_of()
        if settings == self.settings:
            return
        log.info("log cleaner reconfigured: %s (was %s)", settings, self.settings)
        self.settings = settings
        self._throttle.rate = settings.io_max_bytes_per_second
        # Wake whoever waits on the settings (the workers' backoff, run's count of
        # workers), and let later waits wait for the next change.
        self._changed.set()
        self._changed = asyncio.Event()

    @property
    def rate_share(self) -> float:
        """Each worker process's share of ``log.cleaner.io.max.bytes.per.second``: an
        equal one, so that together they keep the rate."""
        rate = self.settings.io_max_bytes_per_second
        return rate if rate >= UNLIMITED else rate / max(self.settings.threads, 1)

    @property
    def map_capacity(self) -> int:
        """Keys a pass's offset map holds: its worker's part of the dedupe buffer."""
        settings = self.settings
        return OffsetMap.for_buffer(settings.dedupe_buffer_bytes, max(settings.threads, 1)).capacity

    async def run(self) -> None:
        """Keep ``log.cleaner.threads`` workers running until cancelled. A worker that
        fails (a bug: passes' own errors are handled) fails the cleaner, loudly."""
        tasks: dict[int, asyncio.Task[None]] = {}
        try:
            while True:
                for index in range(self.settings.threads):
                    if index not in tasks:
                        tasks[index] = asyncio.create_task(self._work(index))
                changed = asyncio.ensure_future(self._changed.wait())
                await asyncio.wait([changed, *tasks.values()], return_when="FIRST_COMPLETED")
                changed.cancel()
                for index, task in list(tasks.items()):
                    if task.done():
                        del tasks[index]
                        task.result()  # a worker that ended on a bug ends the cleaner
        finally:
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)

    def _next(self) -> tuple[TopicPartition, LocalPartition, CleaningJob] | None:
        """The dirtiest due compacted log no other worker is cleaning."""
        best: tuple[TopicPartition, LocalPartition, CleaningJob] | None = None
        now = now_ms()
        for key, partition in self._state.partitions.items():
            partition_log = partition.log
            if not partition_log.config.compact or key in self._busy or key in self.uncleanable:
                continue
            if partition_log.offline is not None:
                continue
            try:
                job = partition_log.cleaning_job(
                    policy=partition_log.config.cleaning,
                    checkpoint=partition_log.cleaner_checkpoint,
                    # Below the last stable offset only (Kafka's first uncleanable
                    # offset): an undecided transaction's records are not cleaned.
                    high_watermark=partition.last_stable_offset,
                    now_ms=now,
                    last_batch_of_producers=partition.producers.last_offsets(),
                    map_capacity=self.map_capacity,
                )
            except LogOfflineError:
                continue
            if job is not None and (best is None or job.dirty_ratio > best[2].dirty_ratio):
                best = (key, partition, job)
        return best

    async def _work(self, index: int) -> None:
        """One worker: passes one after another until ``log.cleaner.threads`` drops
        below its number, then its thread (and process) end."""
        thread = self._workers[index] = WorkerThread(f"log-cleaner-{index}")
        try:
            if self._processes:
                child = CleanerProcess(f"odradek-log-cleaner-{index}", self.rate_share)
                self._children[index] = child
                # Started on the worker's thread, whose end (or the node's) ends it.
                await thread.run(child.start)
            while index < self.settings.threads:
                found = self._next()
                if found is None:
                    # A reconfiguration wakes the worker (a shorter backoff, fewer threads).
                    # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a
                    # cancellation that races with the wake-up (see the group service).
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self.settings.backoff_ms / 1000):
                            await self._changed.wait()
                    continue
                key, partition, job = found
                self._busy.add(key)
                try:
                    await self._clean(index, key, partition, job)
                finally:
                    self._busy.discard(key)
                await asyncio.sleep(0)  # let the loop serve between passes
        finally:
            if (child_left := self._children.pop(index, None)) is not None:
                child_left.stop()
            del self._workers[index]
            thread.stop()

    async def _clean(
        self, index: int, key: TopicPartition, partition: LocalPartition, job: CleaningJob
    ) -> None:
        name = f"{key[0]}-{key[1]}"
        started = time.monotonic()
        child, share = self._children.get(index), self.rate_share
        work = (
            (lambda: run_pass(self._fs, job, self._throttle))
            if child is None
            else (lambda: child.run(job, share))
        )
        try:
            result = await self._workers[index].run(work)
        except Exception as e:
            # Corruption and I/O errors take the log offline; anything else (a bug) leaves
            # it serving but uncleaned until the node restarts, as Kafka marks it.
            log.error("uncleanable partition %s: %s", name, e, exc_info=not isinstance(e, OSError))
            partition.log.cleaning_failed(e)
            self.uncleanable.add(key)
            return
        if self._state.partitions.get(key) is not partition or partition.log.offline is not None:
            # The partition moved away or failed meanwhile: nothing to swap in.
            with contextlib.suppress(OSError):
                remove_cleaned(self._fs, job.directory, [s.base_offset for s in result.segments])
            return
        async with self._flusher.io_lock:
            try:
                committed = partition.log.commit_cleaning(result, now_ms())
            except LogOfflineError:
                return
        if not committed:
            return
        self.passes += 1
        stats = result.stats
        seconds = max(time.monotonic() - started, 1e-6)
        log.info(
            "cleaned %s up to offset %d (%s): %d bytes into %d, %d records removed "
            "(%d whole batches), %d kept, in %.0f ms (%.1f MB/s)",
            name,
            result.map_end,
            job.why,
            stats.bytes_read,
            stats.bytes_written,
            stats.records_removed,
            stats.batches_dropped,
            stats.records_kept,
            seconds * 1000,
            stats.bytes_read / seconds / 1e6,
        )
        with contextlib.suppress(LogOfflineError):
            self._log_dir.checkpoint_cleaner()
