"""The log cleaner: compacted logs cleaned on cleaner threads, swapped in on the loop.

``log.cleaner.threads`` workers each take, every time they are free, the dirtiest
compacted log that is due (:mod:`odradek.storage.cleaner.plan`) and not being cleaned by
another, run its pass on a thread of their own (the pass reads and writes only files it
names, so the loop goes on serving the log), and commit it on the loop under the flush
lock, as retention does. With nothing due a worker waits ``log.cleaner.backoff.ms``.
The threads' reads and writes together are held to
``log.cleaner.io.max.bytes.per.second``. A pass that finds corruption or meets an I/O
error takes its log offline, with a log line naming the partition (Kafka's
"uncleanable partition"); the cleaner goes on with the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable

from odradek.broker.partition import LocalPartition
from odradek.broker.state import BrokerState
from odradek.core.errors import LogOfflineError
from odradek.shell.clock import now_ms
from odradek.shell.housekeeping import Flusher
from odradek.shell.worker_thread import WorkerThread
from odradek.storage.checkpoint import TopicPartition
from odradek.storage.cleaner.cleaning import CleaningJob, remove_cleaned, run_pass
from odradek.storage.cleaner.offset_map import OffsetMap
from odradek.storage.fs import FileSystem
from odradek.storage.log_dir import LogDir

log = logging.getLogger("odradek.cleaner")

UNLIMITED = 1e300
"""Rates at or above this are Kafka's default (Double.MAX_VALUE): no throttle."""


class IoThrottle:
    """``log.cleaner.io.max.bytes.per.second`` shared by every cleaner thread: each
    thread sleeps once the bytes done run ahead of the rate; time spent idle is no
    credit for later.
    ``clock`` and ``sleep`` are the monotonic clock and ``time.sleep`` but in tests."""

    def __init__(
        self,
        bytes_per_second: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = bytes_per_second
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._start = clock()
        self._done = 0.0

    def __call__(self, n: int) -> None:
        if self.rate >= UNLIMITED:
            return
        with self._lock:
            now = self._clock()
            if self._done / self.rate < now - self._start:
                # Behind the rate (the cleaner was idle): no credit is banked, or a pass
                # after a quiet hour would run an hour's worth unthrottled.
                self._start, self._done = now, 0.0
            self._done += n
            ahead = self._done / self.rate - (now - self._start)
        if ahead > 0:
            self._sleep(ahead)


class LogCleaner:
    def __init__(
        self,
        state: BrokerState,
        log_dir: LogDir,
        fs: FileSystem,
        flusher: Flusher,
        *,
        threads: int,
        dedupe_buffer_bytes: int,
        io_max_bytes_per_second: float,
        backoff_ms: int,
    ) -> None:
        self._state = state
        self._log_dir = log_dir
        self._fs = fs
        self._flusher = flusher
        self._threads = max(threads, 0)
        self._capacity = OffsetMap.for_buffer(dedupe_buffer_bytes, max(threads, 1)).capacity
        self._throttle = IoThrottle(io_max_bytes_per_second)
        self._backoff_s = backoff_ms / 1000
        self._busy: set[TopicPartition] = set()
        self._workers: list[WorkerThread] = []
        self.passes = 0
        """Committed passes (tests and logs)."""
        self.uncleanable: set[TopicPartition] = set()
        """Partitions a pass failed on: not cleaned again until a restart."""

    @property
    def threads(self) -> int:
        return self._threads

    async def run(self) -> None:
        self._workers = [WorkerThread(f"log-cleaner-{i}") for i in range(self._threads)]
        try:
            await asyncio.gather(*(self._work(w) for w in self._workers))
        finally:
            for worker in self._workers:
                worker.stop()

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
                    high_watermark=partition.high_watermark,
                    now_ms=now,
                    last_batch_of_producers=partition.producers.last_offsets(),
                    map_capacity=self._capacity,
                )
            except LogOfflineError:
                continue
            if job is not None and (best is None or job.dirty_ratio > best[2].dirty_ratio):
                best = (key, partition, job)
        return best

    async def _work(self, thread: WorkerThread) -> None:
        while True:
            found = self._next()
            if found is None:
                await asyncio.sleep(self._backoff_s)
                continue
            key, partition, job = found
            self._busy.add(key)
            try:
                await self._clean(thread, key, partition, job)
            finally:
                self._busy.discard(key)
            await asyncio.sleep(0)  # let the loop serve between passes

    async def _clean(
        self, thread: WorkerThread, key: TopicPartition, partition: LocalPartition, job: CleaningJob
    ) -> None:
        name = f"{key[0]}-{key[1]}"
        started = time.monotonic()
        try:
            result = await thread.run(lambda: run_pass(self._fs, job, self._throttle))
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
