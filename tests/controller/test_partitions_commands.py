"""The CreatePartitions command: only increases, Kafka's messages, placement that continues
the topic's pattern, checked manual assignments, and records that replay cleanly."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.controller.image import MetadataImage
from odradek.controller.partitions import create_partitions
from odradek.controller.placement import assign_replicas
from odradek.controller.topics import EXCESSIVE_PARTITIONS, MAX_PARTITIONS_PER_BATCH
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.metadata import PartitionRecord, RegisterBrokerRecord, TopicRecord

TOPIC = "orders"
TOPIC_ID = uuid.UUID(int=0x70)


def image_with(assignment: dict[int, list[int]], brokers: list[int] | None = None) -> MetadataImage:
    image = MetadataImage()
    for broker in brokers or []:
        image.replay(
            RegisterBrokerRecord(broker_id=broker, broker_epoch=1, fenced=False),
            image.offset + 1,
        )
    image.replay(TopicRecord(name=TOPIC, topic_id=TOPIC_ID), image.offset + 1)
    for index, replicas in sorted(assignment.items()):
        image.replay(
            PartitionRecord(
                partition_id=index,
                topic_id=TOPIC_ID,
                replicas=replicas,
                isr=replicas,
                leader=replicas[0],
                leader_epoch=0,
                partition_epoch=0,
            ),
            image.offset + 1,
        )
    return image


def test_new_partitions_continue_the_placement_of_the_topic() -> None:
    brokers = [1, 2, 3, 4]
    whole = assign_replicas(brokers, 7, 3, start_index=2)
    image = image_with({p: whole[p] for p in range(3)}, brokers)
    outcome = create_partitions(image, TOPIC, 7, None, brokers)
    assert outcome.error_code == ErrorCode.NONE
    assert outcome.error_message is None
    # Exactly what creating the topic with 7 partitions would have placed.
    assert {r.partition_id: r.replicas for r in outcome.records} == {
        p: whole[p] for p in range(3, 7)
    }
    for record in outcome.records:
        assert record.topic_id == TOPIC_ID
        assert record.isr == record.replicas
        assert record.leader == record.replicas[0]
        assert (record.leader_epoch, record.partition_epoch) == (0, 0)
    for record in outcome.records:
        image.replay(record, image.offset + 1)
    assert sorted(image.topics_by_name[TOPIC].partitions) == list(range(7))


@given(
    brokers=st.integers(1, 6),
    before=st.integers(1, 12),
    added=st.integers(1, 12),
    rf=st.integers(1, 6),
    start=st.integers(0, 5),
)
def test_growing_equals_creating_with_the_larger_count(
    brokers: int, before: int, added: int, rf: int, start: int
) -> None:
    ids = list(range(10, 10 + brokers))
    rf = min(rf, brokers)
    whole = assign_replicas(ids, before + added, rf, start_index=start)
    image = image_with({p: whole[p] for p in range(before)}, ids)
    outcome = create_partitions(image, TOPIC, before + added, None, ids)
    assert outcome.error_code == ErrorCode.NONE
    assert [(r.partition_id, r.replicas) for r in outcome.records] == [
        (p, whole[p]) for p in range(before, before + added)
    ]


@pytest.mark.parametrize(
    ("count", "message"),
    [
        (3, "Topic already has 3 partition(s)."),
        (2, "The topic orders currently has 3 partition(s); 2 would not be an increase."),
        (0, "The topic orders currently has 3 partition(s); 0 would not be an increase."),
        (-1, "The topic orders currently has 3 partition(s); -1 would not be an increase."),
    ],
)
def test_the_count_may_only_go_up(count: int, message: str) -> None:
    image = image_with({0: [1], 1: [1], 2: [1]}, [1])
    outcome = create_partitions(image, TOPIC, count, None, [1])
    assert (outcome.error_code, outcome.error_message, outcome.records) == (
        ErrorCode.INVALID_PARTITIONS,
        message,
        [],
    )


def test_an_unknown_topic_is_refused() -> None:
    outcome = create_partitions(image_with({0: [1]}, [1]), "nope", 2, None, [1])
    assert outcome.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert outcome.error_message == "The topic 'nope' does not exist."


def test_too_many_new_partitions_in_one_request_are_refused() -> None:
    image = image_with({0: [1]}, [1])
    outcome = create_partitions(image, TOPIC, MAX_PARTITIONS_PER_BATCH + 2, None, [1])
    assert outcome.error_code == ErrorCode.POLICY_VIOLATION
    assert outcome.error_message == EXCESSIVE_PARTITIONS
    ok = create_partitions(image, TOPIC, MAX_PARTITIONS_PER_BATCH + 1, None, [1])
    assert ok.error_code == ErrorCode.NONE and len(ok.records) == MAX_PARTITIONS_PER_BATCH


def test_a_replication_factor_above_the_live_brokers_is_refused() -> None:
    image = image_with({0: [1, 2, 3]}, [1, 2, 3])
    outcome = create_partitions(image, TOPIC, 2, None, [1, 2])
    assert outcome.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert "larger than available brokers: 2" in (outcome.error_message or "")
    none_live = create_partitions(image, TOPIC, 2, None, [])
    assert none_live.error_code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_manual_assignments_are_used_as_given() -> None:
    image = image_with({0: [1, 2]}, [1, 2, 3])
    outcome = create_partitions(image, TOPIC, 3, [[3, 1], [2, 3]], [1, 2, 3])
    assert outcome.error_code == ErrorCode.NONE
    assert [(r.partition_id, r.replicas, r.leader, r.isr) for r in outcome.records] == [
        (1, [3, 1], 3, [3, 1]),
        (2, [2, 3], 2, [2, 3]),
    ]


def test_a_fenced_replica_is_kept_out_of_the_isr_and_the_leadership() -> None:
    # Broker 3 is registered but not live: it gets its replica, not the leadership.
    image = image_with({0: [1, 2]}, [1, 2, 3])
    outcome = create_partitions(image, TOPIC, 2, [[3, 1]], [1, 2])
    assert outcome.error_code == ErrorCode.NONE
    record = outcome.records[0]
    assert (record.replicas, record.isr, record.leader) == ([3, 1], [1], 1)
    all_fenced = create_partitions(image, TOPIC, 2, [[3, 2]], [1])
    assert all_fenced.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "partition 1 are fenced" in (all_fenced.error_message or "")


@pytest.mark.parametrize(
    ("assignments", "message"),
    [
        (
            [[1, 2]],
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
        ),
        ([[1, 2], []], "The manual partition assignment includes an empty replica list."),
        (
            [[1, 2], [1, 9]],
            "The manual partition assignment includes broker 9, but no such broker is registered.",
        ),
        (
            [[2, 2], [1, 2]],
            "The manual partition assignment includes the broker 2 more than once.",
        ),
        (
            [[1, 2], [1, 2, 3]],
            "The manual partition assignment includes a partition with 3 replica(s), but this "
            "is not consistent with previous partitions, which have 2 replica(s).",
        ),
    ],
)
def test_bad_manual_assignments_are_refused(assignments: list[list[int]], message: str) -> None:
    image = image_with({0: [1, 2]}, [1, 2, 3])
    outcome = create_partitions(image, TOPIC, 3, assignments, [1, 2, 3])
    assert (outcome.error_code, outcome.error_message, outcome.records) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        message,
        [],
    )
