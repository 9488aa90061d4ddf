"""The coordinator's deadlines: order, moves, cancels, and compaction that changes nothing."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.coordinator import GroupConfig
from odradek.coordinator.timers import Timers


def drain(timers: Timers, now: int) -> list[object]:
    fired = []
    while (key := timers.pop_due(now)) is not None:
        fired.append(key)
    return fired


def test_due_keys_come_out_earliest_first_then_in_the_order_last_set() -> None:
    t = Timers()
    t.set("b", 20)
    t.set("a", 10)
    t.set("c", 20)
    t.set("d", 20)
    t.set("b", 20)  # set again: now after c and d
    assert t.next_deadline_ms() == 10
    assert drain(t, 15) == ["a"]
    assert drain(t, 100) == ["c", "d", "b"]
    assert t.next_deadline_ms() is None and len(t) == 0


def test_moving_and_cancelling() -> None:
    t = Timers()
    t.set("x", 10)
    t.set("x", 30)  # moved: the old deadline is forgotten
    t.set("y", 20)
    t.cancel("y")
    t.cancel("never-set")
    assert t.get("x") == 30 and t.get("y") is None
    assert t.next_deadline_ms() == 30
    assert drain(t, 29) == []
    assert drain(t, 30) == ["x"]


operations = st.lists(
    st.tuples(
        # Mostly moves, so that replaced entries pile up and the heap gets rebuilt.
        st.sampled_from(["set"] * 8 + ["cancel", "pop"]),
        st.integers(0, 5),
        st.integers(0, 50),
    ),
    min_size=100,
    max_size=400,
)


@settings(max_examples=40, deadline=None)
@given(operations)
def test_timers_behave_like_a_sorted_list(ops: list[tuple[str, int, int]]) -> None:
    """Against a model that scans everything: set puts a deadline ``value`` ms ahead, pop
    lets ``value // 10`` ms pass and takes every key that is due."""
    t = Timers()
    model: dict[int, tuple[int, int]] = {}  # key -> (deadline, when it was last set)
    clock = 0
    for n, (op, key, value) in enumerate(ops):
        if op == "set":
            t.set(key, clock + value)
            model[key] = (clock + value, n)
        elif op == "cancel":
            t.cancel(key)
            model.pop(key, None)
        else:
            clock += value // 10
            expected = sorted((d, s, k) for k, (d, s) in model.items() if d <= clock)
            assert drain(t, clock) == [k for _, _, k in expected]
            for _, _, k in expected:
                del model[k]
        assert t.next_deadline_ms() == min((d for d, _ in model.values()), default=None)
        assert len(t) == len(model)


def test_heartbeats_do_not_grow_the_heap_without_bound() -> None:
    t = Timers()
    for n in range(10_000):  # a member heartbeating: its deadline moves every time
        t.set(("member", "m"), 1000 + n)
        t.set(("other", n % 3), 500_000 - n)
    assert len(t._heap) < 100
    # Last deadlines: member 10999; other 0: 490001, other 2: 490002, other 1: 490003.
    assert drain(t, 10**9) == [("member", "m"), ("other", 0), ("other", 2), ("other", 1)]


def test_group_config_reads_kafkas_keys() -> None:
    config = GroupConfig.from_values(
        {
            "group.min.session.timeout.ms": 100,
            "group.max.session.timeout.ms": 200,
            "group.initial.rebalance.delay.ms": 0,
            "group.max.size": 5,
            "offsets.topic.num.partitions": 3,
            "offsets.retention.minutes": 2,
            "offsets.retention.check.interval.ms": 1000,
            "offset.metadata.max.bytes": 10,
            "unrelated.key": "x",
        }
    )
    assert config == GroupConfig(
        min_session_timeout_ms=100,
        max_session_timeout_ms=200,
        initial_rebalance_delay_ms=0,
        max_size=5,
        offsets_topic_num_partitions=3,
        offsets_retention_ms=120_000,
        offsets_retention_check_interval_ms=1000,
        offset_metadata_max_bytes=10,
    )
    assert GroupConfig.from_values({}) == GroupConfig()
