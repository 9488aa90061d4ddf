"""The reassignment throttle: catch-up fetches stay at or below the configured rate."""

from __future__ import annotations

from odradek.replication.throttle import UNLIMITED, ReplicationThrottle


def test_unlimited_by_default() -> None:
    throttle = ReplicationThrottle(0)
    assert not throttle.limited
    throttle.charge(10**12, 0)
    assert throttle.allows(0)
    assert throttle.max_bytes(1 << 20) == 1 << 20


def test_fetching_flat_out_averages_at_most_the_rate() -> None:
    """A fetcher that fetches whenever allowed, each response a full fetch size, moves
    no more than rate x time + one fetch over any run."""
    rate = 100_000
    throttle = ReplicationThrottle(0)
    throttle.set_rate(rate, 0)
    moved = 0
    for now in range(0, 10_000, 5):  # every 5 ms for 10 s
        if throttle.allows(now):
            size = throttle.max_bytes(1 << 20)
            assert size <= rate
            throttle.charge(size, now)
            moved += size
    assert moved <= rate * 10 + rate
    # And it is a throttle, not a stop: most of the budget is used.
    assert moved >= rate * 9


def test_a_budget_in_debt_recovers_with_time() -> None:
    throttle = ReplicationThrottle(0)
    throttle.set_rate(1_000, 0)
    throttle.charge(3_000, 0)
    assert not throttle.allows(2_000)
    assert throttle.allows(3_100)
    throttle.set_rate(UNLIMITED, 3_100)
    assert throttle.allows(3_100)
