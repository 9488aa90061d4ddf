"""Housekeeping: what the broker does to its logs on intervals, and at a clean stop.

:class:`Housekeeping` owns the periodic work on the hosted partitions: the flush policy
(``log.flush.interval.*``), retention, the recovery-point and high-watermark checkpoints,
and forgetting idle idempotent producers (``producer.id.expiration.ms``); and, at a clean
stop, the producer snapshots that spare the next start a replay.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Protocol

from odradek.broker.partition import expire_producers
from odradek.broker.state import BrokerState
from odradek.core.errors import LogOfflineError
from odradek.shell.clock import monotonic_ms, now_ms
from odradek.storage.fs import FileSystem
from odradek.storage.log_dir import LogDir
from odradek.storage.producer_snapshot import list_snapshots

log = logging.getLogger("odradek.node")


class Flusher(Protocol):
    """Group commit, as housekeeping uses it (:class:`~odradek.shell.group_commit.GroupCommit`)."""

    io_lock: asyncio.Lock

    def request_flush(self) -> None: ...


class Housekeeping:
    def __init__(
        self,
        state: BrokerState,
        log_dir: LogDir,
        fs: FileSystem,
        flusher: Flusher,
        *,
        retention_check_interval_ms: int,
        checkpoint_interval_ms: int,
        high_watermark_checkpoint_interval_ms: int,
        producer_id_expiration_ms: int,
        producer_id_expiration_check_interval_ms: int,
    ) -> None:
        self._state = state
        self._log_dir = log_dir
        self._fs = fs
        self._flusher = flusher
        self._retention_check_interval_ms = retention_check_interval_ms
        self._checkpoint_interval_ms = checkpoint_interval_ms
        self._high_watermark_checkpoint_interval_ms = high_watermark_checkpoint_interval_ms
        self._producer_id_expiration_ms = producer_id_expiration_ms
        self._producer_id_expiration_check_interval_ms = producer_id_expiration_check_interval_ms

    async def run(self) -> None:
        """Retention, flush policy, checkpoints and producer expiry, on their intervals
        (counted on the monotonic clock; retention and expiry compare wall-clock
        timestamps, so they are given the wall clock)."""
        last_retention = last_checkpoint = last_high_watermarks = last_expiry = monotonic_ms()
        while True:
            await asyncio.sleep(0.5)
            now = now_ms()
            tick = monotonic_ms()
            if any(p.log.needs_flush(now) for p in self._state.partitions.values()):
                self._flusher.request_flush()
            if tick - last_retention >= self._retention_check_interval_ms:
                last_retention = tick
                async with self._flusher.io_lock:
                    for partition in self._state.partitions.values():
                        if partition.log.offline is None:
                            with contextlib.suppress(LogOfflineError):
                                partition.log.delete_old_segments(now, partition.high_watermark)
            if tick - last_expiry >= self._producer_id_expiration_check_interval_ms:
                last_expiry = tick
                self.expire_producers(now)
            if self._log_dir.offline is not None:
                continue  # nothing more is written to a failed dir
            # A failed write takes the dir offline: its failure handling takes over.
            with contextlib.suppress(LogOfflineError):
                if tick - last_checkpoint >= self._checkpoint_interval_ms:
                    last_checkpoint = tick
                    self._log_dir.checkpoint()
                if tick - last_high_watermarks >= self._high_watermark_checkpoint_interval_ms:
                    last_high_watermarks = tick
                    self.checkpoint_high_watermarks()

    def checkpoint_high_watermarks(self) -> None:
        """``replication-offset-checkpoint``: where each hosted partition's high watermark
        stood, so that a restarted replica starts from it rather than from zero
        (``replica.high.watermark.checkpoint.interval.ms``, and at a clean stop)."""
        self._log_dir.checkpoint_high_watermarks(
            {k: p.high_watermark for k, p in self._state.partitions.items()}
        )

    def expire_producers(self, now: int) -> None:
        """Forget idempotent producers idle for ``producer.id.expiration.ms``."""
        forgotten = expire_producers(
            self._state.partitions.values(), now, self._producer_id_expiration_ms
        )
        for (topic, index), ids in sorted(forgotten.items()):
            log.info(
                "%s-%d: forgot %d idle producers (producer.id.expiration.ms)",
                topic,
                index,
                len(ids),
            )

    def snapshot_producers(self) -> None:
        """At a clean stop: each partition's producer state as the snapshot at its log
        end, where the log moved since its latest one, so that the next start replays
        nothing. The log syncs the files when it closes."""
        for partition in self._state.partitions.values():
            partition_log = partition.log
            if partition_log.offline is not None:
                continue
            end = partition_log.log_end_offset
            try:
                snapshots = list_snapshots(self._fs, partition_log.directory)
                if not snapshots or snapshots[-1].offset != end:
                    partition_log.stage_producer_snapshot(end)
            except OSError as e:
                log.error("%s: cannot write producer snapshot: %s", partition_log.directory, e)
