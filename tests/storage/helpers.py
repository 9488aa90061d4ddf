"""Shared builders for storage tests."""

from __future__ import annotations

import random

from odradek.protocol.record_codec import (
    Record,
    encode_batch,
)
from odradek.storage.log import LogConfig, PartitionLog
from odradek.testing.sim_disk import SimDisk

DIR = "data/topic-0"


def batch(
    records: int = 3, value_size: int = 20, timestamp: int = 1_000, tag: int = 0
) -> bytearray:
    """A client-style batch (base offset 0) with recognisable values."""
    return bytearray(
        encode_batch(
            [
                Record(
                    offset_delta=i,
                    timestamp=timestamp + i,
                    key=b"k%d" % i,
                    value=(b"%d-%d-" % (tag, i)).ljust(value_size, b"."),
                )
                for i in range(records)
            ]
        )
    )


def new_disk(seed: int = 0) -> SimDisk:
    disk = SimDisk(random.Random(seed))
    disk.makedirs("data")
    disk.fsync_dir("")
    return disk


def new_log(disk: SimDisk, config: LogConfig | None = None, now_ms: int = 0) -> PartitionLog:
    return PartitionLog.create(disk, DIR, config or LogConfig(), now_ms)


def reopen(disk: SimDisk, config: LogConfig | None = None, recovery_point: int = 0) -> PartitionLog:
    return PartitionLog.open(disk, DIR, config or LogConfig(), 10**6, recovery_point=recovery_point)


def scrub(log: PartitionLog, chunk_bytes: int = 1 << 16) -> int:
    """Run the background scrub to its end, as the node's scrubber does; the bytes read."""
    read = 0
    while log.offline is None:
        task = log.next_scrub_task(chunk_bytes)
        if task is None:
            break
        read += task.length
        log.finish_scrub(task, task.run())
    return read
