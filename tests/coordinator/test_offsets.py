"""OffsetCommit and OffsetFetch: member and generation checks, simple (generation -1)
commits, durability before the answer, metadata and leader epochs, retention."""

from __future__ import annotations

from odradek.coordinator import GroupConfig, GroupState
from odradek.coordinator.records import OffsetCommitValue, decode_offset_commit_value
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages.offset_commit_response import OffsetCommitResponse
from tests.coordinator.harness import TEST_CONFIG, Driver, expect
from tests.coordinator.test_membership import stable_group


def test_member_commits_and_fetches_with_metadata_and_leader_epoch() -> None:
    d = stable_group("a", "b")
    d.commit("a", {("t", 0): 10, ("t", 1): 20}, metadata="m", leader_epoch=3)
    assert d.take() == expect(
        """
        t=6000 write#2 p3 offset g t-0=10; offset g t-1=20
        t=6000 write#2 NONE
        t=6000 a OffsetCommit t-0:NONE t-1:NONE
        """
    )
    response = d.fetch("g", [("t", 0), ("t", 1), ("t", 2), ("u", 0)], version=7)
    assert response.error_code == 0
    got = {
        (t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata)
        for t in response.topics
        for p in t.partitions
    }
    assert got == {
        ("t", 0): (10, 3, "m"),
        ("t", 1): (20, 3, "m"),
        ("t", 2): (-1, -1, ""),  # nothing committed: -1 and no error
        ("u", 0): (-1, -1, ""),
    }


def test_commit_records_carry_the_commit_time_and_kafka_value_version() -> None:
    d = stable_group("a")
    d.commit("a", {("t", 0): 10}, metadata=None, leader_epoch=3)
    (_key, value) = d.log[3][-1]
    assert value is not None
    assert value[:2] == b"\x00\x03"  # OffsetCommitValue v3, Kafka's default
    assert decode_offset_commit_value(value) == OffsetCommitValue(10, "", 6000, 3)


def test_fetch_all_topics_and_many_groups() -> None:
    d = stable_group("a")
    d.commit("a", {("t", 1): 5, ("s", 0): 1, ("t", 0): 4})
    d.commit("simple", {("x", 0): 9}, group_id="other")
    assert d.committed("g") == {("s", 0): 1, ("t", 0): 4, ("t", 1): 5}
    response = d.fetch("g", None, version=7)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in response.topics] == [
        ("s", [0]),
        ("t", [0, 1]),
    ]
    from odradek.protocol.messages.offset_fetch_request import (
        OffsetFetchRequest,
        OffsetFetchRequestGroup,
        OffsetFetchRequestTopics,
    )

    request = OffsetFetchRequest(
        groups=[
            OffsetFetchRequestGroup(group_id="g", topics=None),
            OffsetFetchRequestGroup(
                group_id="other",
                topics=[OffsetFetchRequestTopics(name="x", partition_indexes=[0, 1])],
            ),
            OffsetFetchRequestGroup(group_id="none", topics=None),
        ],
        require_stable=True,  # nothing is ever pending in a transaction here
    )
    response = d.admin(request, 9)
    assert [
        (
            g.group_id,
            g.error_code,
            [
                (t.name, [(p.partition_index, p.committed_offset) for p in t.partitions])
                for t in g.topics
            ],
        )
        for g in response.groups
    ] == [
        ("g", 0, [("s", [(0, 1)]), ("t", [(0, 4), (1, 5)])]),
        ("other", 0, [("x", [(0, 9), (1, -1)])]),
        ("none", 0, []),
    ]


def test_the_answer_waits_until_the_offsets_are_durable() -> None:
    d = stable_group("a")
    d.auto_write = False
    token = d.commit("a", {("t", 0): 10})
    assert d.response(token) is None
    assert d.committed() == {}  # not visible before it is durable
    d.complete_writes()
    response = d.response(token)
    assert isinstance(response, OffsetCommitResponse)
    assert response.topics[0].partitions[0].error_code == 0
    assert d.committed() == {("t", 0): 10}


def test_a_failed_write_fails_the_commit_and_keeps_the_old_offset() -> None:
    d = stable_group("a")
    d.commit("a", {("t", 0): 10})
    d.auto_write = False
    d.commit("a", {("t", 0): 11, ("t", 1): 1})
    d.complete_writes(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    d.commit("a", {("t", 0): 12})
    d.complete_writes(ErrorCode.NOT_ENOUGH_REPLICAS)
    d.commit("a", {("t", 0): 13})
    d.complete_writes(ErrorCode.MESSAGE_TOO_LARGE)
    lines = [line for line in d.take().splitlines() if "OffsetCommit" in line]
    assert lines == [
        "t=6000 a OffsetCommit t-0:NONE",
        "t=6000 a OffsetCommit t-0:NOT_COORDINATOR t-1:NOT_COORDINATOR",
        "t=6000 a OffsetCommit t-0:COORDINATOR_NOT_AVAILABLE",
        "t=6000 a OffsetCommit t-0:INVALID_COMMIT_OFFSET_SIZE",
    ]
    assert d.committed() == {("t", 0): 10}


def test_writes_completing_out_of_order_keep_the_latest_commit() -> None:
    d = stable_group("a")
    d.auto_write = False
    d.commit("a", {("t", 0): 1})
    d.commit("a", {("t", 0): 2})
    first, second = d.pending
    d.pending = [second, first]
    d.complete_writes()
    assert d.committed() == {("t", 0): 2}


def test_simple_commit_with_generation_minus_one_creates_an_empty_group() -> None:
    d = Driver()
    d.commit("tool", {("t", 0): 7})  # no client: generation -1, no member id
    assert d.take() == expect(
        """
        t=0 write#1 p3 offset g t-0=7
        t=0 write#1 NONE
        t=0 tool OffsetCommit t-0:NONE
        """
    )
    group = d.coordinator.group("g")
    assert group is not None and group.state is GroupState.EMPTY
    assert group.generation_id == 0 and group.protocol_type is None
    assert d.committed() == {("t", 0): 7}
    # ...and the empty group id works too, for old clients.
    d.commit("tool", {("t", 0): 8}, group_id="")
    assert d.committed("") == {("t", 0): 8}


def test_simple_commit_to_a_group_with_members_is_refused() -> None:
    d = stable_group("a")
    d.commit("tool", {("t", 0): 7})
    assert d.take() == "t=6000 tool OffsetCommit t-0:UNKNOWN_MEMBER_ID"


def test_simple_commit_to_a_group_that_became_empty_is_accepted() -> None:
    d = stable_group("a")
    d.leave("a")
    d.commit("tool", {("t", 0): 7})
    assert d.take().endswith("t=6000 tool OffsetCommit t-0:NONE")


def test_commit_with_a_generation_to_an_unknown_group_is_an_illegal_generation() -> None:
    d = Driver()
    d.commit("tool", {("t", 0): 7}, generation=3, member_id="m")
    assert d.take() == "t=0 tool OffsetCommit t-0:ILLEGAL_GENERATION"
    assert d.coordinator.group("g") is None


def test_commit_checks_member_generation_and_state() -> None:
    d = stable_group("a", "b")
    d.commit("a", {("t", 0): 1}, member_id="stranger")
    d.commit("a", {("t", 0): 1}, generation=0)
    d.join("a")  # PreparingRebalance: members may still commit
    d.commit("b", {("t", 0): 2})
    d.join("b")  # CompletingRebalance: generation 2 known, assignment not yet
    d.commit("b", {("t", 0): 3})
    d.sync("b")
    d.sync("a")
    d.commit("b", {("t", 0): 4})
    lines = [line for line in d.take().splitlines() if "OffsetCommit" in line]
    assert lines == [
        "t=6000 a OffsetCommit t-0:UNKNOWN_MEMBER_ID",
        "t=6000 a OffsetCommit t-0:ILLEGAL_GENERATION",
        "t=6000 b OffsetCommit t-0:NONE",
        "t=6000 b OffsetCommit t-0:REBALANCE_IN_PROGRESS",
        "t=6000 b OffsetCommit t-0:NONE",
    ]
    assert d.committed() == {("t", 0): 4}


def test_static_member_commit_with_a_fenced_member_id() -> None:
    d = Driver()
    d.client("a", instance_id="a")
    d = stable_group("a", driver=d)
    d.commit("a", {("t", 0): 1}, version=7, member_id="old-incarnation")
    assert d.take() == "t=6000 a OffsetCommit t-0:FENCED_INSTANCE_ID"


def test_commit_keeps_a_member_alive() -> None:
    d = stable_group("a")
    for _ in range(5):
        d.advance(9000)
        d.commit("a", {("t", 0): 1})
    group = d.coordinator.group("g")
    assert group is not None and group.state is GroupState.STABLE


def test_metadata_too_large_fails_only_that_partition() -> None:
    d = Driver(GroupConfig(offset_metadata_max_bytes=4, min_session_timeout_ms=1000))
    d.commit("tool", {("t", 0): 1}, metadata="12345")
    d.commit("tool", {("t", 1): 1}, metadata="\U0001f600\U0001f600")  # 4 UTF-16 units
    assert [line for line in d.take().splitlines() if "OffsetCommit" in line] == [
        "t=0 tool OffsetCommit t-0:OFFSET_METADATA_TOO_LARGE",
        "t=0 tool OffsetCommit t-1:NONE",
    ]


def test_unknown_partitions_are_refused_when_the_broker_says_so() -> None:
    d = Driver()
    from odradek.protocol.messages.offset_commit_request import (
        OffsetCommitRequest,
        OffsetCommitRequestPartition,
        OffsetCommitRequestTopic,
    )

    request = OffsetCommitRequest(
        group_id="g",
        topics=[
            OffsetCommitRequestTopic(
                name="t",
                partitions=[
                    OffsetCommitRequestPartition(partition_index=0, committed_offset=1),
                    OffsetCommitRequestPartition(partition_index=9, committed_offset=1),
                ],
            )
        ],
    )
    out = d.coordinator.offset_commit(
        1, request, 8, now_ms=0, partition_exists=lambda topic, partition: partition < 3
    )
    assert len(out.writes) == 1 and len(out.writes[0].records) == 1
    out = d.coordinator.write_completed(out.writes[0].write_id, now_ms=0)
    (completion,) = out.completions
    assert [p.error_code for p in completion.response.topics[0].partitions] == [
        0,
        int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]


def test_v1_commit_timestamp_and_v2_retention_time() -> None:
    d = Driver()
    from odradek.protocol.messages.offset_commit_request import (
        OffsetCommitRequest,
        OffsetCommitRequestPartition,
        OffsetCommitRequestTopic,
    )

    v1 = OffsetCommitRequest(
        group_id="g",
        topics=[
            OffsetCommitRequestTopic(
                name="t",
                partitions=[
                    OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=1, commit_timestamp=123
                    )
                ],
            )
        ],
    )
    d.admin(v1, 1)
    v2 = OffsetCommitRequest(
        group_id="g",
        retention_time_ms=60_000,
        topics=[
            OffsetCommitRequestTopic(
                name="t",
                partitions=[OffsetCommitRequestPartition(partition_index=1, committed_offset=2)],
            )
        ],
    )
    d.admin(v2, 2)
    values = [decode_offset_commit_value(v) for _, v in d.log[3] if v is not None]
    assert values == [
        OffsetCommitValue(1, "", 123, -1),
        OffsetCommitValue(2, "", 0, -1, expire_timestamp=60_000),  # written as v1
    ]
    # The v2 offset expires at its own expire time, at the next retention check.
    d.advance(TEST_CONFIG.offsets_retention_check_interval_ms)
    assert d.committed() == {("t", 0): 1}


def test_offsets_of_a_simple_group_expire_after_retention_since_their_commit() -> None:
    config = GroupConfig(
        min_session_timeout_ms=1000,
        offsets_retention_ms=100_000,
        offsets_retention_check_interval_ms=10_000,
        offsets_topic_num_partitions=4,
    )
    d = Driver(config)
    d.commit("tool", {("t", 0): 1})
    d.advance(50_000)
    d.commit("tool", {("t", 1): 2})
    d.take()
    d.advance(50_000)  # t-0 is 100 s old
    assert d.take() == expect(
        """
        t=100000 write#3 p3 -offset g t-0
        t=100000 write#3 NONE
        """
    )
    d.advance(50_000)  # t-1 too; the group has no offsets left and goes
    assert d.take() == expect(
        """
        t=150000 write#4 p3 -offset g t-1
        t=150000 write#4 NONE
        """
    )
    assert d.coordinator.group("g") is None


def test_offsets_of_an_empty_consumer_group_expire_after_retention_since_it_emptied() -> None:
    config = GroupConfig(
        min_session_timeout_ms=1000,
        offsets_retention_ms=100_000,
        offsets_retention_check_interval_ms=10_000,
        offsets_topic_num_partitions=4,
    )
    d = stable_group("a", driver=Driver(config))
    d.commit("a", {("t", 0): 1})
    for _ in range(20):  # a Stable group keeps its offsets however old
        d.advance(9000)
        d.heartbeat("a")
    assert d.committed() == {("t", 0): 1}
    d.leave("a")  # empty since 186000
    d.take()
    d.advance(99_999)
    assert d.committed() == {("t", 0): 1}
    d.advance(10_000)
    assert d.take().endswith(
        expect(
            """
            t=290000 write#4 p3 -offset g t-0; -group g
            t=290000 write#4 NONE
            """
        )
    )
    assert d.coordinator.group("g") is None


def test_stable_consumer_group_loses_offsets_of_topics_it_no_longer_subscribes() -> None:
    config = GroupConfig(
        min_session_timeout_ms=1000,
        offsets_retention_ms=100_000,
        offsets_retention_check_interval_ms=10_000,
        offsets_topic_num_partitions=4,
    )
    d = Driver(config)
    # ConsumerProtocolSubscription v0: version, topics ["t"], user data null.
    subscription = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"
    d.client("a", protocols=[("range", subscription)])
    d = stable_group("a", driver=d)
    group = d.coordinator.group("g")
    assert group is not None and group.subscribed_topics == frozenset({"t"})
    d.commit("a", {("t", 0): 1, ("old", 0): 2})
    for _ in range(12):
        d.advance(9000)
        d.heartbeat("a")
    assert d.committed() == {("t", 0): 1}


def test_fetch_errors_by_version() -> None:
    d = Driver(owned_partitions=[0])  # "g" lives in partition 3, not ours
    v1 = d.fetch("g", [("t", 0)], version=1)
    assert v1.topics[0].partitions[0].error_code == int(ErrorCode.NOT_COORDINATOR)
    v7 = d.fetch("g", [("t", 0)], version=7)
    assert v7.error_code == int(ErrorCode.NOT_COORDINATOR) and v7.topics == []
    v8 = d.fetch("g", [("t", 0)], version=8)
    assert v8.groups[0].error_code == int(ErrorCode.NOT_COORDINATOR)


def test_a_commit_written_before_its_group_was_deleted_does_not_bring_it_back() -> None:
    d = Driver()
    d.commit("tool", {("t", 0): 1})
    d.auto_write = False
    d.commit("tool", {("t", 0): 2})
    delete = d.delete("g")  # the group is Empty: gone at once, tombstones after the commit
    d.complete_writes()
    assert d.take().endswith(
        expect(
            """
            t=0 write#2 p3 offset g t-0=2
            t=0 write#3 p3 -offset g t-0
            t=0 write#2 NONE
            t=0 tool OffsetCommit t-0:NONE
            t=0 write#3 NONE
            t=0 admin DeleteGroups DeleteGroupsResponse
            """
        )
    )
    assert d.response(delete).results[0].error_code == 0
    # The log holds the commit, then the tombstone: the group stays deleted.
    assert d.coordinator.group("g") is None
    assert d.committed() == {}
