"""Deadlines keyed by what they are for, in one heap: the coordinator's only clock.

The coordinator never reads a clock. It sets a deadline for each thing that can time out
(a rebalance, a member's session, a pending sync, the retention check) under a key, and
:meth:`Timers.pop_due` hands back the keys whose deadlines have passed, earliest first and,
for equal deadlines, in the order they were last set, so that a run is deterministic.

Setting a key again replaces its deadline and cancelling forgets it; the heap keeps the
replaced entries and skips them lazily, which makes a heartbeat (a moved deadline)
O(log n), and is rebuilt when they would outnumber the live ones.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable

__all__ = ["Timers"]


class Timers:
    def __init__(self) -> None:
        # key -> (deadline, sequence number of the set that made it): a heap entry is live
        # only if it carries both, so each key has exactly one live entry.
        self._live: dict[Hashable, tuple[int, int]] = {}
        self._heap: list[tuple[int, int, Hashable]] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._live)

    def set(self, key: Hashable, deadline_ms: int) -> None:
        self._seq += 1
        self._live[key] = (deadline_ms, self._seq)
        heapq.heappush(self._heap, (deadline_ms, self._seq, key))
        if len(self._heap) > 64 and len(self._heap) > 4 * len(self._live):
            self._heap = [e for e in self._heap if self._is_live(e)]
            heapq.heapify(self._heap)

    def cancel(self, key: Hashable) -> None:
        self._live.pop(key, None)

    def get(self, key: Hashable) -> int | None:
        live = self._live.get(key)
        return None if live is None else live[0]

    def next_deadline_ms(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> Hashable | None:
        """The key of the earliest deadline at or before ``now_ms``, now forgotten; or None."""
        self._drop_stale()
        if not self._heap or self._heap[0][0] > now_ms:
            return None
        _deadline, _seq, key = heapq.heappop(self._heap)
        del self._live[key]
        return key

    def _is_live(self, entry: tuple[int, int, Hashable]) -> bool:
        deadline, seq, key = entry
        return self._live.get(key) == (deadline, seq)

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap and not self._is_live(heap[0]):
            heapq.heappop(heap)
