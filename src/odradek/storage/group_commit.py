"""Group commit: many appends, one fsync, every waiter told when its data is durable.

Producers with ``acks=all`` must not be answered before their batch is on disk (our
default, safer than Kafka's). Syncing once per request would cap throughput at the
disk's fsync rate, so the shell collects the waiters of every append since the last
flush, runs one :meth:`PartitionLog.flush`, and completes each waiter whose offset is
now below the recovery point.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Generic, TypeVar

T = TypeVar("T")


class FlushWaiters(Generic[T]):
    """Waiters keyed by the offset that must be flushed before they complete."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, T]] = []
        self._sequence = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, end_offset: int, waiter: T) -> None:
        """``waiter`` completes once the recovery point reaches ``end_offset``."""
        heapq.heappush(self._heap, (end_offset, next(self._sequence), waiter))

    def complete(self, flushed_offset: int) -> list[T]:
        """Pop every waiter whose data is now durable, in the order they were added."""
        done: list[tuple[int, T]] = []
        while self._heap and self._heap[0][0] <= flushed_offset:
            _, seq, waiter = heapq.heappop(self._heap)
            done.append((seq, waiter))
        done.sort(key=lambda item: item[0])
        return [waiter for _, waiter in done]
