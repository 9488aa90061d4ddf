"""A restarted coordinator rebuilds its groups and offsets from ``__consumer_offsets``."""

from __future__ import annotations

import random

from odradek.coordinator import GroupCoordinator, GroupState
from odradek.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
)
from odradek.protocol.error_codes import ErrorCode
from tests.coordinator.harness import TEST_CONFIG, Driver, expect
from tests.coordinator.test_membership import stable_group


def restart(d: Driver) -> Driver:
    """A new coordinator that loads every partition of the old one's log, at the same
    time; the clients keep what they knew."""
    new = Driver(owned_partitions=[], now_ms=d.now)
    new.clients = d.clients
    new._aliases = d._aliases
    new.log = {p: list(records) for p, records in d.log.items()}
    for partition in range(TEST_CONFIG.offsets_topic_num_partitions):
        new._apply(new.coordinator.load(partition, new.log.get(partition, []), now_ms=d.now))
    return new


def snapshot(c: GroupCoordinator) -> dict[str, object]:
    return {
        g.group_id: (
            g.state,
            g.generation_id,
            g.protocol_type,
            g.protocol_name,
            g.leader_id,
            [
                (m.member_id, m.group_instance_id, m.client_id, m.assignment)
                for m in g.members.values()
            ],
            dict(g.offsets),
        )
        for g in c.groups()
    }


def test_offsets_and_generations_survive_a_restart() -> None:
    d = Driver()
    d.client("b", instance_id="b-static")
    d = stable_group("a", "b", driver=d)
    d.commit("a", {("t", 0): 10, ("t", 1): 11}, metadata="x", leader_epoch=4)
    d.commit("a", {("t", 0): 12})
    d.commit("tool", {("u", 0): 5}, group_id="simple")
    d.join("e", group_id="emptied")
    d.join("e")
    d.advance(3000)
    d.sync("e")
    d.commit("e", {("v", 0): 1})
    d.leave("e")
    d.heartbeat("a")
    d.heartbeat("b")
    before = snapshot(d.coordinator)
    after = restart(d)
    assert snapshot(after.coordinator) == before
    after.coordinator.check_invariants()
    g = after.coordinator.group("g")
    assert g is not None and g.state is GroupState.STABLE and g.generation_id == 1
    assert after.committed("g") == {("t", 0): 12, ("t", 1): 11}
    response = after.fetch("g", [("t", 1)])
    assert (
        response.topics[0].partitions[0].metadata,
        response.topics[0].partitions[0].committed_leader_epoch,
    ) == ("x", 4)
    emptied = after.coordinator.group("emptied")
    assert emptied is not None and emptied.state is GroupState.EMPTY and emptied.generation_id == 2


def test_members_carry_on_after_a_restart_and_dead_ones_expire() -> None:
    d = stable_group("a", "b")
    d = restart(d)
    # The members keep their ids and generation: heartbeats and commits just work.
    d.heartbeat("a")
    d.commit("a", {("t", 0): 1})
    d.heartbeat("b")
    d.sync("b")  # a member that missed its assignment gets it from the record
    assert d.take() == expect(
        """
        t=6000 a Heartbeat NONE
        t=6000 write#1 p3 offset g t-0=1
        t=6000 write#1 NONE
        t=6000 a OffsetCommit t-0:NONE
        t=6000 b Heartbeat NONE
        t=6000 b SyncGroup NONE assignment=@b#1
        """
    )
    # b does not heartbeat any more: its session (started at the load) expires.
    d.advance(5000)
    d.heartbeat("a")
    d.advance(5000)
    d.heartbeat("a")
    assert d.take() == expect(
        """
        t=11000 a Heartbeat NONE
        t=16000 a Heartbeat REBALANCE_IN_PROGRESS
        """
    )


def test_load_keeps_the_last_value_of_each_key_and_honours_tombstones() -> None:
    def offset(group: str, partition: int, value: int | None) -> tuple[bytes, bytes | None]:
        key = encode_key(OffsetCommitKey(group, "t", partition))
        if value is None:
            return key, None
        return key, encode_offset_commit_value(OffsetCommitValue(value, "", 1000))

    def metadata(group: str, generation: int | None) -> tuple[bytes, bytes | None]:
        key = encode_key(GroupMetadataKey(group))
        if generation is None:
            return key, None
        member = MemberMetadata("m-1", None, "c", "/h", 30_000, 10_000, b"sub", b"asg")
        value = GroupMetadataValue("consumer", generation, "range", "m-1", 500, (member,))
        return key, encode_group_metadata_value(value)

    records = [
        offset("g", 0, 1),
        metadata("g", 1),
        offset("g", 0, 2),
        offset("g", 1, 7),
        metadata("g", 2),
        offset("g", 1, None),  # deleted
        metadata("gone", 1),
        offset("gone", 0, 1),
        metadata("gone", None),
        offset("gone", 0, None),
        (b"\x00\x03\x00\x01g", b"a KIP-848 record"),  # not ours: skipped
    ]
    c = GroupCoordinator(TEST_CONFIG, rng=random.Random(0))
    c.load(3, records, now_ms=0)
    assert [g.group_id for g in c.groups()] == ["g"]
    g = c.group("g")
    assert g is not None
    assert (g.state, g.generation_id, g.leader_id, list(g.members)) == (
        GroupState.STABLE,
        2,
        "m-1",
        ["m-1"],
    )
    assert g.members["m-1"].protocols == [("range", b"sub")]
    assert g.members["m-1"].assignment == b"asg"
    assert {tp: o.offset for tp, o in g.offsets.items()} == {("t", 0): 2}
    c.check_invariants()


def test_a_loaded_group_over_the_size_limit_rebalances() -> None:
    d = stable_group("a", "b", "c")
    records = d.log[3]
    from odradek.coordinator import GroupConfig

    c = GroupCoordinator(
        GroupConfig(max_size=2, offsets_topic_num_partitions=4), rng=random.Random(0)
    )
    c.load(3, records, now_ms=0)
    g = c.group("g")
    assert g is not None and g.state is GroupState.PREPARING_REBALANCE


def test_a_rejoin_after_a_restart_rebalances_as_in_kafka() -> None:
    # The record keeps each member's metadata for the chosen protocol only, so a member
    # rejoining with its full list no longer "matches" and causes a rebalance (Kafka
    # behaves the same after a coordinator moves).
    d = restart(stable_group("a", "b"))
    d.join("b")
    d.heartbeat("a")
    d.join("a")
    assert d.take() == expect(
        """
        t=6000 a Heartbeat REBALANCE_IN_PROGRESS
        t=6000 a JoinGroup NONE member=a#1 gen=2 leader=a#1 protocol=range members=[a#1,b#1]
        t=6000 b JoinGroup NONE member=b#1 gen=2 leader=a#1 protocol=range
        """
    )


def test_loading_replaces_what_a_node_held_for_that_partition() -> None:
    d = stable_group("a", "b")
    d.join("a")  # waiting in a rebalance, for b
    d._apply(d.coordinator.load(3, [], now_ms=d.now))
    assert d.take() == "t=6000 a JoinGroup NOT_COORDINATOR member=a#1"
    assert d.coordinator.group("g") is None
    assert d.error(max(d.responses)) == ErrorCode.NOT_COORDINATOR.name
