"""Replica placement: the guarantees of ``odradek.controller.placement``, and known answers.

Property tests run over 1..12 brokers with arbitrary ids, 1..200 partitions, replication
factors 1..min(5, brokers) and any start index. Each guarantee is stated as an exact bound
(see the module docstring of ``placement``), not as "roughly even".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from odradek.controller.placement import (
    assign_replicas,
    leadership_after_failure,
    rack_alternated_order,
)

PROPERTY = settings(max_examples=300, deadline=None)


@st.composite
def layouts(draw: st.DrawFn, min_brokers: int = 1) -> tuple[list[int], int, int, int]:
    """(brokers in a random order with arbitrary ids, partitions, replication factor, start)."""
    ids = draw(st.sets(st.integers(0, 5000), min_size=min_brokers, max_size=12))
    brokers = draw(st.permutations(sorted(ids)))
    partitions = draw(st.integers(1, 200))
    replication_factor = draw(st.integers(1, min(5, len(brokers))))
    start_index = draw(st.integers(-30, 30))
    return brokers, partitions, replication_factor, start_index


def replica_counts(assignment: Mapping[int, Sequence[int]], brokers: list[int]) -> Counter[int]:
    counts = Counter({broker: 0 for broker in brokers})
    counts.update(broker for replicas in assignment.values() for broker in replicas)
    return counts


# --- Guarantee 1: rf distinct replicas from the broker set -------------------------------


@PROPERTY
@given(layouts())
@example(([7], 1, 1, 0))
@example(([3, 1], 200, 2, 0))
@example((list(range(12)), 200, 5, 11))
def test_every_partition_has_rf_distinct_replicas_from_the_brokers(
    layout: tuple[list[int], int, int, int],
) -> None:
    brokers, partitions, replication_factor, start_index = layout
    assignment = assign_replicas(brokers, partitions, replication_factor, start_index=start_index)
    assert list(assignment) == list(range(partitions))
    for replicas in assignment.values():
        assert len(replicas) == replication_factor
        assert len(set(replicas)) == replication_factor
        assert set(replicas) <= set(brokers)


# --- Guarantee 2: preferred replicas round-robin over the sorted brokers -----------------


@PROPERTY
@given(layouts())
def test_preferred_replicas_go_round_robin_over_the_sorted_brokers(
    layout: tuple[list[int], int, int, int],
) -> None:
    brokers, partitions, replication_factor, start_index = layout
    n = len(brokers)
    assignment = assign_replicas(brokers, partitions, replication_factor, start_index=start_index)
    ordered = sorted(brokers)
    for partition, replicas in assignment.items():
        assert replicas[0] == ordered[(partition + start_index) % n]
    led = Counter({broker: 0 for broker in brokers})
    led.update(replicas[0] for replicas in assignment.values())
    assert set(led.values()) <= {partitions // n, -(-partitions // n)}


# --- Guarantee 3: replica counts per broker, exact bounds ---------------------------------


@PROPERTY
@given(layouts())
@example(([0, 1, 2, 3, 4, 5], 3, 3, 0))
def test_replica_counts_stay_within_the_stated_bounds(
    layout: tuple[list[int], int, int, int],
) -> None:
    brokers, partitions, replication_factor, start_index = layout
    n, rf = len(brokers), replication_factor
    assignment = assign_replicas(brokers, partitions, rf, start_index=start_index)
    counts = replica_counts(assignment, brokers)
    full_blocks, rest = divmod(partitions, n)
    low = rf * full_blocks + max(0, rest + rf - n)
    high = rf * full_blocks + min(rest, rf)
    assert all(low <= count <= high for count in counts.values()), (counts, low, high)
    spread = max(counts.values()) - min(counts.values())
    assert spread <= min(rest, rf, n - rest, n - rf)
    if rest == 0:
        assert spread == 0


def test_replica_count_bound_is_tight() -> None:
    # 3 partitions, rf 3, 6 brokers: min(r, rf, n - r, n - rf) = 3 is reached. Kafka's
    # scheme accepts this; it is why callers pass a different start index per topic.
    assignment = assign_replicas(range(6), 3, 3)
    counts = replica_counts(assignment, list(range(6)))
    assert [counts[b] for b in range(6)] == [1, 2, 3, 2, 1, 0]


# --- Guarantee 4: a dead broker's leadership spreads over all survivors -------------------


def assert_even_failover(assignment: Mapping[int, Sequence[int]], brokers: list[int]) -> None:
    n = len(brokers)
    for dead in brokers:
        led = sum(1 for replicas in assignment.values() if replicas[0] == dead)
        gained = leadership_after_failure(assignment, dead, brokers=brokers)
        assert sorted(gained) == sorted(b for b in brokers if b != dead)
        assert sum(gained.values()) == led
        assert set(gained.values()) <= {led // (n - 1), -(-led // (n - 1))}, (dead, gained)
        if led >= n - 1:
            assert max(gained.values()) - min(gained.values()) <= 1
            assert min(gained.values()) >= 1
        else:
            assert sorted(gained.values()) == [0] * (n - 1 - led) + [1] * led


@PROPERTY
@given(layouts(min_brokers=2).filter(lambda layout: layout[2] >= 2))
@example(([0, 1], 1, 2, 0))
@example((list(range(12)), 200, 2, 0))
@example((list(range(5)), 15, 3, 0))
def test_leadership_of_a_dead_broker_spreads_evenly_over_the_survivors(
    layout: tuple[list[int], int, int, int],
) -> None:
    brokers, partitions, replication_factor, start_index = layout
    assignment = assign_replicas(brokers, partitions, replication_factor, start_index=start_index)
    assert_even_failover(assignment, brokers)


@given(st.integers(1, 12), st.integers(1, 200))
def test_with_one_replica_a_dead_brokers_partitions_go_offline(
    broker_count: int, partitions: int
) -> None:
    brokers = list(range(broker_count))
    assignment = assign_replicas(brokers, partitions, 1)
    for dead in brokers:
        gained = leadership_after_failure(assignment, dead, brokers=brokers)
        assert gained == {b: 0 for b in brokers if b != dead}


def test_leadership_after_failure_reads_the_lists_as_given() -> None:
    assignment = {0: [5, 7, 9], 1: [5, 9, 7], 2: [7, 5, 9], 3: [5], 4: [9, 7]}
    # Partition 3 has no other replica and goes offline; partitions 2 and 4 are led by
    # live brokers and keep their leaders.
    assert leadership_after_failure(assignment, 5) == {7: 1, 9: 1}
    assert leadership_after_failure(assignment, 5, brokers=[5, 7, 9, 11]) == {7: 1, 9: 1, 11: 0}
    assert leadership_after_failure(assignment, 8) == {5: 0, 7: 0, 9: 0}


# --- CreatePartitions: new partitions continue the pattern --------------------------------


@PROPERTY
@given(layouts(), st.integers(1, 200))
def test_added_partitions_continue_the_pattern_exactly(
    layout: tuple[list[int], int, int, int], more: int
) -> None:
    brokers, partitions, replication_factor, start_index = layout
    whole = assign_replicas(brokers, partitions + more, replication_factor, start_index=start_index)
    before = assign_replicas(brokers, partitions, replication_factor, start_index=start_index)
    added = assign_replicas(brokers, more, replication_factor, existing=before)
    assert {**before, **added} == whole
    assert list(added) == list(range(partitions, partitions + more))
    by_id = assign_replicas(
        brokers, more, replication_factor, start_index=start_index, first_partition=partitions
    )
    assert by_id == added


def test_added_partitions_start_from_the_next_broker_when_partition_zeros_leader_left() -> None:
    existing = assign_replicas([1, 2, 3, 4], 4, 2, start_index=1)
    assert existing[0][0] == 2
    # Broker 2 left and broker 6 joined: Kafka continues from the next id above 2, broker 3,
    # which is position 1 of [1, 3, 4, 6].
    added = assign_replicas([1, 3, 4, 6], 4, 2, existing=existing)
    assert added == assign_replicas([1, 3, 4, 6], 4, 2, start_index=1, first_partition=4)
    assert [replicas[0] for replicas in added.values()] == [3, 4, 6, 1]
    gone = assign_replicas([1, 2, 3], 3, 1, start_index=2)
    assert gone[0] == [3]
    assert assign_replicas([0, 1, 2], 1, 1, existing=gone) == {3: [0]}


@pytest.mark.parametrize(
    ("existing", "kwargs", "problem"),
    [
        ({0: [0, 1], 2: [1, 2]}, {}, "not 0..1"),
        ({0: [0, 1, 2]}, {}, "replication factor 2 differs"),
        ({0: [0, 1], 1: [1, 2]}, {"first_partition": 5}, "first partition 5"),
        ({0: [1, 2], 1: [2, 0]}, {"start_index": 2}, "start index 2 disagrees"),
    ],
)
def test_an_existing_assignment_that_does_not_fit_is_refused(
    existing: dict[int, list[int]], kwargs: dict[str, int], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        assign_replicas([0, 1, 2], 1, 2, existing=existing, **kwargs)


def test_an_existing_assignment_may_repeat_the_values_it_implies() -> None:
    existing = {0: [1, 2], 1: [2, 0]}
    expected = assign_replicas([0, 1, 2], 2, 2, existing=existing)
    assert assign_replicas(
        [0, 1, 2], 2, 2, existing=existing, start_index=4, first_partition=2
    ) == (expected)
    assert expected == assign_replicas([0, 1, 2], 2, 2, start_index=1, first_partition=2)


# --- Errors -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("brokers", "partitions", "replication_factor", "problem"),
    [
        ([0, 1], 3, 3, r"Replication factor: 3 larger than available brokers: 2\."),
        ([], 1, 1, r"Replication factor: 1 larger than available brokers: 0\."),
        ([0, 1], 3, 0, r"Replication factor must be larger than 0\."),
        ([0, 1], 0, 1, r"Number of partitions must be larger than 0\."),
        ([0, 1, 1], 3, 1, "duplicate broker ids"),
        ([0, -1], 3, 1, "must not be negative"),
        ({0: "a", 1: None}, 3, 1, "Not all brokers have rack information"),
    ],
)
def test_impossible_requests_raise_value_error(
    brokers: Sequence[int] | Mapping[int, str | None],
    partitions: int,
    replication_factor: int,
    problem: str,
) -> None:
    with pytest.raises(ValueError, match=problem):
        assign_replicas(brokers, partitions, replication_factor)


def test_a_negative_first_partition_is_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        assign_replicas([0, 1], 1, 1, first_partition=-1)


# --- Determinism --------------------------------------------------------------------------


@PROPERTY
@given(layouts())
def test_placement_depends_only_on_the_sorted_order_of_the_brokers(
    layout: tuple[list[int], int, int, int],
) -> None:
    brokers, partitions, replication_factor, start_index = layout
    n = len(brokers)
    assignment = assign_replicas(brokers, partitions, replication_factor, start_index=start_index)
    # The same call again, the brokers in another order, or as a rack map with no racks.
    assert (
        assign_replicas(
            list(reversed(brokers)), partitions, replication_factor, start_index=start_index
        )
        == assignment
    )
    assert (
        assign_replicas(
            dict.fromkeys(brokers), partitions, replication_factor, start_index=start_index + n
        )
        == assignment
    )
    # Relabelling: the placement on 0..n-1, mapped to the sorted ids, is the same placement.
    ordered = sorted(brokers)
    on_positions = assign_replicas(
        range(n), partitions, replication_factor, start_index=start_index
    )
    relabelled = {p: [ordered[i] for i in replicas] for p, replicas in on_positions.items()}
    assert relabelled == assignment


# --- Known answers ------------------------------------------------------------------------

# The seed's example: partitions p0..p14 on broker-0..broker-4, here with replication factor
# 3 and start index 0. Rows are partitions; the first column is the preferred replica. The
# first ten rows are also the table in Kafka's AdminUtils documentation.
SEED_TABLE = {
    0: [0, 1, 2],
    1: [1, 2, 3],
    2: [2, 3, 4],
    3: [3, 4, 0],
    4: [4, 0, 1],
    5: [0, 2, 3],
    6: [1, 3, 4],
    7: [2, 4, 0],
    8: [3, 0, 1],
    9: [4, 1, 2],
    10: [0, 3, 4],
    11: [1, 4, 0],
    12: [2, 0, 1],
    13: [3, 1, 2],
    14: [4, 2, 3],
}


def test_seed_example_known_answer() -> None:
    assert assign_replicas([0, 1, 2, 3, 4], 15, 3) == SEED_TABLE


def test_seed_example_failover() -> None:
    # broker-0 prefers p0, p5 and p10; their second replicas are brokers 1, 2 and 3, so
    # three different survivors take one partition each.
    assert leadership_after_failure(SEED_TABLE, 0) == {1: 1, 2: 1, 3: 1, 4: 0}
    assert_even_failover(SEED_TABLE, [0, 1, 2, 3, 4])
    # With 20 partitions each broker prefers 4 = n - 1 and every survivor takes exactly one.
    twenty = assign_replicas(range(5), 20, 3)
    for dead in range(5):
        assert set(leadership_after_failure(twenty, dead).values()) == {1}


def test_seed_example_with_start_index_rotates_the_leaders() -> None:
    assignment = assign_replicas([0, 1, 2, 3, 4], 5, 2, start_index=2)
    # Start 2: partition 0 on broker 2; shift 2 puts each follower 1 + 2 % 4 = 3 further on.
    assert assignment == {0: [2, 0], 1: [3, 1], 2: [4, 2], 3: [0, 3], 4: [1, 4]}


# --- Racks --------------------------------------------------------------------------------

KAFKA_RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_alternated_order_known_answer() -> None:
    assert rack_alternated_order(KAFKA_RACKS) == [0, 3, 1, 5, 4, 2]
    uneven = {0: "a", 1: "a", 2: "a", 3: "b", 9: "c", 8: "c"}
    assert rack_alternated_order(uneven) == [0, 3, 8, 1, 9, 2]


def test_rack_aware_known_answer() -> None:
    # The example in Kafka's AdminUtils documentation: 7 partitions, rf 3, start 0.
    assert assign_replicas(KAFKA_RACKS, 7, 3) == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }


@st.composite
def rack_layouts(draw: st.DrawFn) -> tuple[dict[int, str], int, int, int]:
    ids = draw(st.sets(st.integers(0, 5000), min_size=1, max_size=12))
    racks = {broker: draw(st.sampled_from("abcde")) for broker in sorted(ids)}
    partitions = draw(st.integers(1, 200))
    replication_factor = draw(st.integers(1, min(5, len(ids))))
    start_index = draw(st.integers(0, 30))
    return racks, partitions, replication_factor, start_index


@PROPERTY
@given(rack_layouts())
@example(({0: "a", 1: "a", 2: "a", 3: "b"}, 40, 4, 0))
def test_rack_aware_placement_spreads_each_partition_over_racks(
    layout: tuple[dict[int, str], int, int, int],
) -> None:
    racks, partitions, replication_factor, start_index = layout
    n = len(racks)
    assignment = assign_replicas(racks, partitions, replication_factor, start_index=start_index)
    order = rack_alternated_order(racks)
    rack_count = len(set(racks.values()))
    assert list(assignment) == list(range(partitions))
    for partition, replicas in assignment.items():
        assert len(set(replicas)) == len(replicas) == replication_factor
        assert set(replicas) <= set(racks)
        assert replicas[0] == order[(partition + start_index) % n]
        # The first min(rf, racks) replicas are on distinct racks.
        spread = min(replication_factor, rack_count)
        assert len({racks[b] for b in replicas[:spread]}) == spread
    led = Counter({broker: 0 for broker in racks})
    led.update(replicas[0] for replicas in assignment.values())
    assert set(led.values()) <= {partitions // n, -(-partitions // n)}
    existing = assign_replicas(racks, 3, replication_factor, start_index=start_index)
    added = assign_replicas(racks, partitions, replication_factor, existing=existing)
    whole = assign_replicas(racks, partitions + 3, replication_factor, start_index=start_index)
    assert {**existing, **added} == whole
