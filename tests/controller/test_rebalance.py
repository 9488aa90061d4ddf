"""The rebalance planner: balance reached with exactly the minimum number of moves."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.controller.placement import assign_replicas
from odradek.controller.rebalance import minimum_moves, plan_rebalance

Assignment = dict[tuple[str, int], list[int]]


def _placed(brokers: list[int], partitions: int, rf: int, topics: int, start: int) -> Assignment:
    """Topics placed the way CreateTopics places them (a start index per topic)."""
    current: Assignment = {}
    for t in range(topics):
        placed = assign_replicas(brokers, partitions, rf, start_index=start + 7 * t)
        for index, replicas in placed.items():
            current[(f"t{t}", index)] = list(replicas)
    return current


def _random(rng: random.Random, brokers: list[int], partitions: int, rf: int) -> Assignment:
    """An arbitrary, possibly very lopsided, assignment."""
    weights = [rng.random() ** 3 + 0.01 for _ in brokers]
    current: Assignment = {}
    for index in range(partitions):
        replicas: list[int] = []
        while len(replicas) < rf:
            broker = rng.choices(brokers, weights)[0]
            if broker not in replicas:
                replicas.append(broker)
        current[("r", index)] = replicas
    return current


def _check(current: Assignment, brokers: list[int], sizes: dict[tuple[str, int], int]) -> int:
    """Check the plan's promises; its number of detours."""
    plan = plan_rebalance(current, brokers, sizes)
    final = {key: plan.assignments.get(key, list(replicas)) for key, replicas in current.items()}
    # Every partition keeps its replication factor, on distinct target brokers.
    for key, replicas in final.items():
        assert len(replicas) == len(current[key])
        assert len(set(replicas)) == len(replicas)
        assert set(replicas) <= set(brokers)
    # Replicas within one of the mean on every target broker.
    counts = {b: 0 for b in brokers}
    leaders = {b: 0 for b in brokers}
    for replicas in final.values():
        for b in replicas:
            counts[b] += 1
        leaders[replicas[0]] += 1
    assert max(counts.values()) - min(counts.values()) <= 1, counts
    # Preferred leaders within one of the mean.
    assert max(leaders.values()) - min(leaders.values()) <= 1, leaders
    # The moves are the replicas a broker gains, and exactly the lower bound.
    gained = sum(len(set(final[k]) - set(current[k])) for k in current)
    assert gained == plan.moved_replicas
    assert plan.minimum_moves == minimum_moves(current, brokers)
    assert plan.moved_replicas == plan.minimum_moves + plan.detours
    assert plan.bytes_to_move == sum(sizes.get(k, 0) for k, _, _ in plan.moves)
    # Moving again from the result moves nothing.
    again = plan_rebalance(final, brokers, sizes)
    assert again.moved_replicas == 0
    return plan.detours


@settings(max_examples=200, deadline=None)
@given(
    old=st.integers(1, 8),
    added=st.integers(1, 4),
    partitions=st.integers(1, 60),
    rf=st.integers(1, 4),
    topics=st.integers(1, 3),
    start=st.integers(0, 20),
)
def test_add_brokers_balances_with_minimum_moves(
    old: int, added: int, partitions: int, rf: int, topics: int, start: int
) -> None:
    rf = min(rf, old)
    brokers = list(range(1, old + 1))
    current = _placed(brokers, partitions, rf, topics, start)
    sizes = {key: (hash(key) % 1000) + 1 for key in current}
    # Only brokers that stay give up replicas: the bound is always reached.
    assert _check(current, brokers + list(range(old + 1, old + added + 1)), sizes) == 0


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(2, 9),
    removed=st.integers(1, 3),
    partitions=st.integers(1, 60),
    rf=st.integers(1, 4),
    topics=st.integers(1, 3),
    start=st.integers(0, 20),
)
def test_remove_brokers_balances_with_minimum_moves(
    n: int, removed: int, partitions: int, rf: int, topics: int, start: int
) -> None:
    removed = min(removed, n - 1)
    rf = min(rf, n - removed)
    brokers = list(range(1, n + 1))
    current = _placed(brokers, partitions, rf, topics, start)
    _check(current, brokers[removed:], {})


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    n=st.integers(1, 8),
    partitions=st.integers(1, 80),
    rf=st.integers(1, 3),
)
def test_any_assignment_balances(seed: int, n: int, partitions: int, rf: int) -> None:
    rng = random.Random(seed)
    rf = min(rf, n)
    brokers = list(range(n))
    current = _random(rng, brokers, partitions, rf)
    targets = brokers[: max(rf, rng.randint(1, n))]
    if rng.random() < 0.5:
        targets = [*targets, 100, 101]
    _check(current, targets, {})


def test_three_to_five_brokers_moves_the_bound() -> None:
    """The integration test's case: 30 partitions, RF 2 on 3 brokers, 2 brokers join:
    60 replicas, 12 per broker after; each old broker gives up 8."""
    current = _placed([1, 2, 3], 30, 2, 1, 0)
    plan = plan_rebalance(current, [1, 2, 3, 4, 5])
    assert plan.minimum_moves == 24
    assert plan.moved_replicas == 24
    assert plan.replica_counts == {1: 12, 2: 12, 3: 12, 4: 12, 5: 12}
    assert plan.leader_counts == {1: 6, 2: 6, 3: 6, 4: 6, 5: 6}


def test_followers_move_before_leaders_and_small_before_large() -> None:
    current = {("a", 0): [1, 2], ("a", 1): [2, 1], ("a", 2): [1, 2]}
    sizes = {("a", 0): 500, ("a", 1): 10, ("a", 2): 100}
    plan = plan_rebalance(current, [1, 2, 3], sizes)
    assert plan.moved_replicas == 2
    # Broker 1 gives up its follower replica of a-1 (the smallest), not a preferred one.
    assert (("a", 1), 1, 3) in plan.moves or (("a", 1), 2, 3) in plan.moves


def test_too_few_brokers_is_refused() -> None:
    with pytest.raises(ValueError, match="only 1 broker"):
        plan_rebalance({("a", 0): [1, 2]}, [1])
