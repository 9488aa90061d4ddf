"""The verify checker, the nemesis schedule and the packet-filter rules, without a cluster."""

from __future__ import annotations

import itertools

from odradek.testing.produce_history import Poll, availability, check_polls
from odradek.verify import nemesis
from odradek.verify.checker import judge
from odradek.verify.history import FAIL, INFO, INVOKE, OK, Op, dumps, loads
from odradek.verify.netrules import NetworkState, between, one_way, ruleset
from odradek.verify.report import anomalies_text, completions, fault_windows
from odradek.verify.topology import REPLICA_LAG_TIME_MAX_MS, Topology


def sends(*acked: tuple[str, int, int], failed: tuple[tuple[str, int], ...] = ()) -> list[Op]:
    ops: list[Op] = []
    t = 0.0
    for value, partition, offset in acked:
        ops.append(Op(t, "writer-0", INVOKE, "send", partition=partition, value=value))
        ops.append(
            Op(t + 0.01, "writer-0", OK, "send", partition=partition, value=value, offset=offset)
        )
        t += 1.0
    for value, partition in failed:
        ops.append(Op(t, "writer-0", INVOKE, "send", partition=partition, value=value))
        ops.append(Op(t + 5, "writer-0", INFO, "send", partition=partition, value=value))
        t += 1.0
    return ops


def final(read: dict[int, list[tuple[int, str]]]) -> Op:
    return Op(
        99.0, "final", OK, "read", value={str(p): [list(r) for r in v] for p, v in read.items()}
    )


def test_a_clean_history_is_valid_and_conclusive() -> None:
    ops = sends(("a", 0, 0), ("b", 1, 0), ("c", 0, 1))
    ops.append(Op(3.0, "consumer-0", OK, "poll", records=[[0, 0, "a"], [0, 1, "c"]], generation=1))
    verdict = judge([*ops, final({0: [(0, "a"), (1, "c")], 1: [(0, "b")]})], 0.0, 3.0)
    assert verdict.valid and verdict.conclusive
    assert verdict.acknowledged == 3
    assert verdict.unseen == ("b",)  # reported, yet not an anomaly
    assert verdict.to_json()["lost"] == 0


def test_an_acknowledged_value_missing_from_the_final_read_is_lost() -> None:
    ops = sends(("a", 0, 0), ("b", 0, 1))
    verdict = judge([*ops, final({0: [(0, "a"), (1, "x-new")]})], 0.0, 2.0)
    assert verdict.lost == ("b",)
    assert not verdict.valid
    result = verdict.to_json()
    assert result["lost"] == 1 and result["lost_share"] == 0.5 and result["valid"] is False
    assert result["examples"]["lost"] == ["b"]


def test_an_unanswered_send_may_be_present_or_absent() -> None:
    ops = sends(("a", 0, 0), failed=(("b", 0), ("c", 0)))
    verdict = judge([*ops, final({0: [(0, "a"), (1, "b")]})], 0.0, 3.0)
    assert verdict.valid
    assert verdict.availability.failed == 2 and verdict.availability.attempts == 3


def test_no_final_read_or_nothing_acknowledged_proves_nothing() -> None:
    ops = sends(("a", 0, 0))
    assert not judge(ops, 0.0, 1.0).valid
    nothing = sends(failed=(("a", 0),))
    verdict = judge([*nothing, final({0: []})], 0.0, 1.0)
    assert verdict.valid and not verdict.conclusive


def test_duplicates_and_inconsistent_offsets() -> None:
    ops = sends(("a", 0, 0), ("b", 0, 1))
    verdict = judge([*ops, final({0: [(0, "a"), (1, "a"), (2, "b")]})], 0.0, 2.0)
    assert verdict.duplicated == ("a",)
    assert verdict.inconsistent_offsets == (("b", 1, 2),)


def test_polls_going_back_or_skipping_within_one_assignment() -> None:
    read = {0: [(o, f"v{o}") for o in range(6)]}
    polls = [
        Poll("c0", 1, 0, 0, "v0"),
        Poll("c0", 1, 0, 1, "v1"),
        Poll("c0", 1, 0, 4, "v4"),  # skips 2 and 3, which the final read holds
        Poll("c0", 1, 0, 3, "v3"),  # goes back
        Poll("c0", 2, 0, 1, "v1"),  # a new assignment starts over: allowed
        Poll("c1", 1, 0, 9, "ghost"),  # read, then gone: an aborted read
    ]
    found = check_polls(["v0", "v5"], polls, read)
    assert found.skipped == (("c0", 0, 1, 4),)
    assert found.nonmonotonic == (("c0", 0, 4, 3),)
    assert found.aborted_reads == ("ghost",)
    assert found.unseen == ("v5",)


def test_availability_is_the_longest_window_without_an_acknowledgement() -> None:
    found = availability(10, 4, [1.0, 2.0, 7.5, 8.0], 0.0, 10.0)
    assert found.longest_gap_s == 5.5 and found.gap_start_s == 2.0
    assert found.failed_share == 0.4


def test_history_round_trips_through_json_lines() -> None:
    ops = [*sends(("a", 0, 0)), final({0: [(0, "a")]})]
    assert list(loads(dumps(ops).splitlines())) == ops


def test_latencies_and_fault_windows_for_the_timeline() -> None:
    ops = [
        *sends(("a", 0, 0), failed=(("b", 0),)),
        Op(2.0, "nemesis", INVOKE, "kill", value="#0 kill"),
        Op(4.0, "nemesis", OK, "kill", value="#0 kill"),
        Op(5.0, "nemesis", FAIL, "pause", value="#1 pause", error="no target"),
    ]
    done = completions(ops)
    assert [(c.type, round(c.latency, 2)) for c in done] == [("ok", 0.01), ("info", 5.0)]
    assert fault_windows(ops) == [(2.0, 4.0, "#0 kill")]


def test_seed_000_cuts_followers_first_then_everyone_long_enough_for_the_isr_to_shrink() -> None:
    topology = Topology.plan(3, 3)
    faults = nemesis.schedule("seed-000", 0, 30.0, topology, 3)
    first, second = faults
    assert first.kind == nemesis.ISOLATE_FROM_FOLLOWERS and first.target == "leader:0"
    assert second.kind == nemesis.ISOLATE and second.target == "same:0"
    assert second.start - first.start > 2 * REPLICA_LAG_TIME_MAX_MS / 1000
    assert first.end == second.end


def test_a_schedule_depends_on_the_seed_alone() -> None:
    topology = Topology.plan(3, 3)
    a = nemesis.schedule("mixed", 7, 60.0, topology, 3)
    assert a == nemesis.schedule("mixed", 7, 60.0, topology, 3)
    assert a != nemesis.schedule("mixed", 8, 60.0, topology, 3)
    assert all(
        f.start < f.end <= 59.0
        for seed in range(20)
        for f in nemesis.schedule("mixed", seed, 60.0, topology, 3)
    )
    assert all(earlier.end < later.start for earlier, later in itertools.pairwise(a))
    kinds = {
        f.kind for seed in range(20) for f in nemesis.schedule("mixed", seed, 60.0, topology, 3)
    }
    assert kinds == {
        nemesis.KILL, nemesis.ISOLATE, nemesis.SPLIT, nemesis.ONE_WAY, nemesis.LOSS,
        nemesis.PAUSE, nemesis.ISOLATE_FROM_FOLLOWERS, nemesis.REMOVE_VOTER,
        nemesis.DISK_FULL, nemesis.CLOCK_JUMP,
    }  # fmt: skip


def test_every_node_has_its_own_address_and_binds_there() -> None:
    topology = Topology.plan(3, 3)
    addresses = [n.address for n in topology.nodes]
    assert len(set(addresses)) == 6 and "127.0.0.1" not in addresses
    text = topology.server_properties(topology.brokers[0], "/d", unsafe=True)
    assert "listeners=PLAINTEXT://127.0.0.2:9092\n" in text
    assert "min.insync.replicas=1\n" in text and "unclean.leader.election.enable=true\n" in text
    safe = topology.server_properties(topology.brokers[0], "/d", unsafe=False)
    assert "min.insync.replicas" not in safe and "unclean" not in safe


def test_the_ruleset_drops_exactly_the_cut_links_and_heals_to_nothing() -> None:
    state = NetworkState()
    state.drops[0] = between(["127.0.0.2"], ["127.0.0.3"])
    state.losses[1] = (one_way("127.0.0.4", ["127.0.0.5"]), 40)
    text = state.ruleset()
    assert "ip saddr 127.0.0.2 ip daddr 127.0.0.3 drop" in text
    assert "ip saddr 127.0.0.3 ip daddr 127.0.0.2 drop" in text
    assert "ip saddr 127.0.0.4 ip daddr 127.0.0.5 numgen random mod 100 < 40 drop" in text
    assert "127.0.0.5 ip daddr 127.0.0.4" not in text
    state.heal(0)
    state.heal(1)
    assert " drop" not in state.ruleset()
    assert state.ruleset() == ruleset(())


def test_a_duplicate_from_non_idempotent_writers_is_reported_but_no_anomaly() -> None:
    # The client resent "a" (no answer to its first send) and the second copy was acked.
    ops = sends(("a", 0, 1), ("b", 0, 2))
    read = final({0: [(0, "a"), (1, "a"), (2, "b")]})
    config = Op(0.0, "writer-0", INFO, "config", value={"idempotent": False})
    verdict = judge([config, *ops, read], 0.0, 2.0)
    assert verdict.duplicated == ("a",) and verdict.valid
    assert verdict.to_json()["duplicated"] == 1
    strict = judge(
        [Op(0.0, "writer-0", INFO, "config", value={"idempotent": True}), *ops, read], 0.0, 2.0
    )
    assert not strict.valid


def test_an_acknowledgement_without_an_offset_must_still_be_read() -> None:
    # librdkafka acknowledges an idempotent batch implicitly, with no offset, when its
    # own answer was lost and a later batch was acknowledged.
    ops = [
        Op(0.0, "writer-0", INVOKE, "send", partition=0, value="a"),
        Op(0.1, "writer-0", OK, "send", partition=0, value="a"),
    ]
    assert judge([*ops, final({0: [(5, "a")]})], 0.0, 1.0).valid
    assert judge([*ops, final({0: [(5, "b")]})], 0.0, 1.0).lost == ("a",)


def test_the_anomaly_report_names_every_example_and_the_faults_carried_out() -> None:
    ops = sends(("a", 0, 0), ("b", 0, 1))
    verdict = judge([*ops, final({0: [(0, "a")]})], 0.0, 2.0)
    faults = nemesis.schedule("seed-000", 0, 30.0, Topology.plan(3, 3), 3)
    text = anomalies_text(verdict, faults, [(4.0, 20.0, "#0 isolate leader:0 -> node 2")])
    assert "# lost: 1" in text and "\nb\n" in text
    assert "4.00 20.00 #0 isolate leader:0 -> node 2" in text
    assert faults[0].describe() in text


def keyed_config(keys: int = 2) -> Op:
    return Op(0.0, "writer-0", INFO, "config", value={"idempotent": True, "keys": keys})


def test_keyed_a_superseded_value_may_be_gone_but_a_keys_last_value_may_not() -> None:
    # Values 0-0 and 0-2 are key k0, 0-1 and 0-3 key k1 (two keys).
    ops = [keyed_config(), *sends(("0-0", 0, 0), ("0-1", 0, 1), ("0-2", 0, 2), ("0-3", 0, 3))]
    ops.append(Op(4.0, "consumer-0", OK, "poll", records=[[0, 0, "0-0"]], generation=1))
    cleaned = judge([*ops, final({0: [(2, "0-2"), (3, "0-3")]})], 0.0, 4.0)
    assert cleaned.valid and cleaned.keyed
    assert cleaned.compacted == ("0-0", "0-1")
    assert cleaned.aborted_reads == ()  # polled, then removed by compaction: fine
    assert cleaned.to_json()["compacted"] == 2
    # k1's last acknowledged value is gone and only an older one of it is there: lost.
    older = judge([*ops, final({0: [(1, "0-1"), (2, "0-2")]})], 0.0, 4.0)
    assert older.lost == ("0-3",) and not older.valid
    # The same read of the unique workload (no keys): everything missing is lost.
    unique = judge([*ops[1:], final({0: [(2, "0-2"), (3, "0-3")]})], 0.0, 4.0)
    assert unique.lost == ("0-0", "0-1")


def test_keyed_a_value_read_by_a_consumer_and_gone_without_a_later_one_is_an_aborted_read() -> None:
    ops = [keyed_config(), *sends(("0-0", 0, 0))]
    ops.append(Op(2.0, "consumer-0", OK, "poll", records=[[0, 1, "0-1"]], generation=1))
    verdict = judge([*ops, final({0: [(0, "0-0")]})], 0.0, 2.0)
    assert verdict.aborted_reads == ("0-1",)
