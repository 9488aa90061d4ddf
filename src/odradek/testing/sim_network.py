"""``SimNetwork``: links that delay, drop, duplicate and reorder, and partitions of any shape.

The network does not hold messages itself: :meth:`SimNetwork.delays` says, for one
message sent now, after how many milliseconds each copy arrives (none when it is dropped,
two when it is duplicated); the scheduler queues the deliveries, and asks
:meth:`SimNetwork.connected` again when one is due, so that a partition also cuts the
messages already in flight.

Each directed link has its own base delay and jitter, drawn once from the seed. A
message's delay is the base plus a uniform jitter, and now and then (``reorder``) a long
extra delay, so that later messages overtake it. A partition is a set of cut directed
links: a node alone, two groups, a one-way cut, a bridge node that sees both sides.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Faults:
    """How bad the links are; the swarm picks these per seed."""

    drop: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0
    max_base_ms: int = 5
    max_jitter_ms: int = 10
    reorder_ms: int = 200


class SimNetwork:
    def __init__(self, rng: random.Random, node_ids: Iterable[int], faults: Faults) -> None:
        self._rng = rng
        self.node_ids = sorted(node_ids)
        self.faults = faults
        self.links: dict[tuple[int, int], tuple[int, int]] = {}
        for a in self.node_ids:
            for b in self.node_ids:
                if a != b:
                    base = rng.randint(1, faults.max_base_ms)
                    self.links[(a, b)] = (base, rng.randint(0, faults.max_jitter_ms))
        self.cut: frozenset[tuple[int, int]] = frozenset()
        self.description = "none"

    def connected(self, src: int, dst: int) -> bool:
        return (src, dst) not in self.cut

    def delays(self, src: int, dst: int) -> list[int]:
        """The delay of each copy of one message from ``src`` to ``dst`` sent now."""
        rng, faults = self._rng, self.faults
        if src == dst:
            return [1]  # loopback: a node that finds itself among the bootstrap servers
        if not self.connected(src, dst) or rng.random() < faults.drop:
            return []
        copies = 2 if rng.random() < faults.duplicate else 1
        base, jitter = self.links[(src, dst)]
        out = []
        for _ in range(copies):
            delay = base + rng.randint(0, jitter)
            if rng.random() < faults.reorder:
                delay += rng.randint(1, faults.reorder_ms)
            out.append(delay)
        return out

    # -- partitions

    def heal(self) -> None:
        self.cut = frozenset()
        self.description = "none"

    def split(self, *groups: Iterable[int], one_way: bool = False) -> None:
        """Cut every link between two groups (only from the first to the others when
        ``one_way``); a node in no group stays connected to everyone."""
        sets = [sorted(g) for g in groups]
        cut: set[tuple[int, int]] = set()
        for i, a_group in enumerate(sets):
            for j, b_group in enumerate(sets):
                if i == j or (one_way and i != 0):
                    continue
                cut.update((a, b) for a in a_group for b in b_group)
        self.cut = frozenset(cut)
        arrow = " -/-> " if one_way else " | "
        self.description = arrow.join(" ".join(map(str, g)) for g in sets)

    def isolate(self, node_id: int) -> None:
        self.split([node_id], [n for n in self.node_ids if n != node_id])

    def bridge(self, left: Iterable[int], bridge: int, right: Iterable[int]) -> None:
        """``left`` and ``right`` cannot talk; ``bridge`` talks to both."""
        self.split(left, right)
        self.description += f" (bridge {bridge})"
