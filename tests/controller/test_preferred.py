"""Preferred leader election: leadership goes back to the first replica, safely."""

from __future__ import annotations

from odradek.broker.elect_leaders import RECOVER_FROM_TAG, handle_elect_leaders
from odradek.controller.preferred import imbalanced_partitions, preferred_election
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import ElectLeadersRequest
from odradek.protocol.messages.elect_leaders_request import TopicPartitions
from odradek.protocol.metadata import PartitionChangeRecord
from tests.broker.harness import Harness, header, new_harness


def cluster() -> Harness:
    """Brokers 1-3; topic t with partitions led away from their preferred replica."""
    h = new_harness()
    for broker in (1, 2, 3):
        h.register_broker(broker)
    h.add_topic("t", [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    topic_id = h.image.topics_by_name["t"].topic_id
    # Partition 0 failed over to 2; partition 1 to 3 (both still hold the whole ISR).
    h.replay(
        [
            PartitionChangeRecord(partition_id=0, topic_id=topic_id, leader=2),
            PartitionChangeRecord(partition_id=1, topic_id=topic_id, leader=3),
        ]
    )
    return h


def test_leadership_returns_to_an_active_in_sync_preferred_replica() -> None:
    h = cluster()
    records, results = preferred_election(h.image, [("t", 0), ("t", 2), ("t", 9), ("u", 0)])
    assert [(r.partition_id, r.leader) for r in records] == [(0, 1)]
    assert [(r.topic, r.partition, r.error) for r in results] == [
        ("t", 0, ErrorCode.NONE),
        ("t", 2, ErrorCode.ELECTION_NOT_NEEDED),
        ("t", 9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("u", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]


def test_a_preferred_replica_out_of_the_isr_or_fenced_is_not_elected() -> None:
    h = cluster()
    topic_id = h.image.topics_by_name["t"].topic_id
    # Broker 1 left partition 0's ISR: electing it could lose acknowledged records.
    h.replay([PartitionChangeRecord(partition_id=0, topic_id=topic_id, isr=[2, 3])])
    h.register_broker(2, fenced=True)  # and 2, preferred for partition 1, is fenced
    records, results = preferred_election(h.image, [("t", 0), ("t", 1)])
    assert records == []
    assert {r.error for r in results} == {ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}


def test_imbalance_over_the_threshold_names_the_partitions_to_move() -> None:
    h = cluster()
    # Broker 1 prefers 1 partition and leads none of it: 100% > 10%.
    assert imbalanced_partitions(h.image, 10) == [("t", 0), ("t", 1)]
    assert imbalanced_partitions(h.image, 100) == []


def test_elect_leaders_request_commits_the_moves() -> None:
    h = cluster()
    request = ElectLeadersRequest(
        election_type=0, topic_partitions=[TopicPartitions(topic="t", partitions=[0, 1])]
    )
    response = h.carry(
        handle_elect_leaders(h.state, header(ElectLeadersRequest.API_KEY, 2), request)
    )
    results = {
        p.partition_id: p.error_code
        for r in response.replica_election_results
        for p in r.partition_result
    }
    assert results == {0: ErrorCode.NONE, 1: ErrorCode.NONE}
    partitions = h.image.topics_by_name["t"].partitions
    assert [partitions[i].leader for i in range(3)] == [1, 2, 3]


def offline_cluster() -> Harness:
    """Topic t, partition 0 on [1, 2, 3] with ISR [1] and no leader; broker 1 fenced."""
    h = new_harness()
    h.register_broker(1, fenced=True)
    h.register_broker(2)
    h.register_broker(3)
    h.add_topic("t", [[1, 2, 3]])
    topic_id = h.image.topics_by_name["t"].topic_id
    h.replay([PartitionChangeRecord(partition_id=0, topic_id=topic_id, leader=-1, isr=[1])])
    return h


def elect_unclean(h: Harness, chosen: int | None = None) -> int:
    tags = [] if chosen is None else [(RECOVER_FROM_TAG, chosen.to_bytes(4, "big"))]
    request = ElectLeadersRequest(
        election_type=1,
        topic_partitions=[TopicPartitions(topic="t", partitions=[0])],
        unknown_tagged_fields=tags,
    )
    response = h.carry(
        handle_elect_leaders(h.state, header(ElectLeadersRequest.API_KEY, 2), request)
    )
    error: int = response.replica_election_results[0].partition_result[0].error_code
    return error


def test_unclean_election_by_request_elects_the_first_active_replica() -> None:
    h = offline_cluster()
    assert elect_unclean(h) == ErrorCode.NONE
    partition = h.image.topics_by_name["t"].partitions[0]
    assert (partition.leader, partition.isr, partition.leader_recovery_state) == (2, [2], 1)
    # Done once: the partition has a leader now.
    assert elect_unclean(h) == ErrorCode.ELECTION_NOT_NEEDED


def test_partitions_recover_elects_the_replica_it_names() -> None:
    h = offline_cluster()
    assert elect_unclean(h, chosen=3) == ErrorCode.NONE
    assert h.image.topics_by_name["t"].partitions[0].leader == 3


def test_a_named_replica_that_is_fenced_or_not_a_replica_is_refused() -> None:
    h = offline_cluster()
    assert elect_unclean(h, chosen=1) == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert elect_unclean(h, chosen=7) == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert h.image.topics_by_name["t"].partitions[0].leader == -1


def test_an_unclean_request_elects_an_in_sync_replica_when_one_is_active() -> None:
    h = offline_cluster()
    h.register_broker(1)  # the ISR member is back (the controller would elect it too)
    assert elect_unclean(h, chosen=3) == ErrorCode.NONE
    partition = h.image.topics_by_name["t"].partitions[0]
    assert (partition.leader, partition.leader_recovery_state) == (1, 0)
