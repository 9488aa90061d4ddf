"""Replica placement speed: ``assign_replicas`` for large topics, with and without racks.

Placement runs on the controller when a topic is created or grows, once per request, so
it only has to stay far below a request timeout even for the largest topics. This prints
partitions placed per second for a few cluster shapes and asserts nothing about time.

Run: .venv/bin/python bench/bench_placement.py
"""

from __future__ import annotations

import time

from odradek.controller.placement import assign_replicas, leadership_after_failure

SHAPES = ((3, 1_000, 3), (12, 10_000, 3), (100, 100_000, 3), (100, 100_000, 5))
RACKS = 5


def measure(
    label: str, brokers: list[int] | dict[int, str | None], partitions: int, rf: int
) -> None:
    began = time.perf_counter()
    assignment = assign_replicas(brokers, partitions, rf, start_index=1)
    placed = time.perf_counter() - began
    began = time.perf_counter()
    leadership_after_failure(assignment, min(brokers))
    failover = time.perf_counter() - began
    print(
        f"{label:<10} {len(brokers):>4} brokers {partitions:>8} partitions rf {rf}: "
        f"{placed * 1e3:8.1f} ms ({partitions / placed:>10,.0f} partitions/s), "
        f"failover count {failover * 1e3:6.1f} ms"
    )


def main() -> None:
    for count, partitions, rf in SHAPES:
        brokers = list(range(count))
        measure("no racks", brokers, partitions, rf)
        racks: dict[int, str | None] = {b: f"rack-{b % RACKS}" for b in brokers}
        measure("racks", racks, partitions, rf)


if __name__ == "__main__":
    main()
