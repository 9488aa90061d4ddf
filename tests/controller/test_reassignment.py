"""Partition reassignment on the controller: start, complete, cancel, replay, unregister."""

from __future__ import annotations

from typing import Any

from odradek.broker.reassignments import (
    ALTER_VERSIONS,
    LIST_VERSIONS,
    UNREGISTER_VERSIONS,
    handle_alter_partition_reassignments,
    handle_list_partition_reassignments,
    handle_unregister_broker,
)
from odradek.controller.image import MetadataImage
from odradek.controller.image_records import image_records
from odradek.controller.reassignment import (
    alter_reassignments,
    complete_reassignments,
    list_reassignments,
    unregister_broker,
)
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
    UnregisterBrokerRequest,
)
from odradek.protocol.messages import alter_partition_reassignments_request as apr
from odradek.protocol.metadata import PartitionChangeRecord
from tests.broker.harness import Harness, new_harness


def majority(topic: str, replication_factor: int) -> int:
    return replication_factor // 2 + 1


def cluster(brokers: tuple[int, ...] = (1, 2, 3, 4)) -> Harness:
    h = new_harness(node_id=100)
    for broker in brokers:
        h.register_broker(broker)
    h.add_topic("t", [[1, 2, 3], [2, 3, 1]])
    return h


def part(h: Harness, index: int = 0) -> Any:
    return h.image.topics_by_name["t"].partitions[index]


def isr(h: Harness, index: int, members: list[int]) -> None:
    """What AlterPartition from the leader would record: a new ISR."""
    topic_id = h.image.topics_by_name["t"].topic_id
    h.replay([PartitionChangeRecord(partition_id=index, topic_id=topic_id, isr=members)])


def complete(h: Harness, min_isr: Any = majority) -> list[PartitionChangeRecord]:
    records = complete_reassignments(h.image, min_isr)
    h.replay(records)
    return records


def test_start_adds_the_new_replicas_and_marks_adding_and_removing() -> None:
    h = cluster()
    records, results = alter_reassignments(h.image, [("t", 0, [4, 2, 3])])
    assert [r.error_code for r in results] == [ErrorCode.NONE]
    h.replay(records)
    p = part(h)
    assert p.replicas == [4, 2, 3, 1]
    assert p.adding_replicas == [4]
    assert p.removing_replicas == [1]
    # Nothing moves out of the ISR, and the leader stays (no new leader epoch).
    assert p.isr == [1, 2, 3]
    assert p.leader == 1
    assert p.leader_epoch == 0
    assert list_reassignments(h.image, None)[0].adding_replicas == (4,)


def test_completion_waits_for_every_adding_replica_in_the_isr() -> None:
    h = cluster()
    h.replay(alter_reassignments(h.image, [("t", 0, [4, 2, 3])])[0])
    assert complete(h) == []  # broker 4 is still catching up
    isr(h, 0, [1, 2, 3, 4])
    [record] = complete(h)
    p = part(h)
    assert p.replicas == [4, 2, 3]
    assert p.isr == [2, 3, 4]
    assert p.adding_replicas == [] and p.removing_replicas == []
    # The removed broker led: leadership moved to the first in-sync target replica.
    assert p.leader == 4
    assert record.leader == 4
    assert list_reassignments(h.image, None) == []


def test_completion_keeps_the_leader_when_it_stays() -> None:
    h = cluster()
    h.replay(alter_reassignments(h.image, [("t", 0, [1, 2, 4])])[0])
    isr(h, 0, [1, 2, 3, 4])
    [record] = complete(h)
    assert record.leader == -2
    assert part(h).leader == 1 and part(h).leader_epoch == 0
    assert part(h).isr == [1, 2, 4]


def test_completion_never_shrinks_the_isr_below_min_insync_replicas() -> None:
    h = cluster()
    # Move [1, 2, 3] to [1, 4, 2]... while 2 has fallen out of the ISR.
    h.replay(alter_reassignments(h.image, [("t", 0, [1, 2, 4])])[0])
    isr(h, 0, [1, 3, 4])
    # Completing would leave ISR [1, 4]: fine with min.insync.replicas 2, not with 3.
    assert complete(h, lambda topic, rf: 3) == []
    assert part(h).adding_replicas == [4]
    [_] = complete(h, lambda topic, rf: 2)
    assert part(h).isr == [1, 4]


def test_cancel_reverts_to_the_original_replicas() -> None:
    h = cluster()
    h.replay(alter_reassignments(h.image, [("t", 0, [4, 2, 3])])[0])
    isr(h, 0, [1, 2, 3, 4])  # 4 caught up already: cancelling drops it anyway
    records, results = alter_reassignments(h.image, [("t", 0, None)])
    assert results[0].error_code == ErrorCode.NONE
    h.replay(records)
    p = part(h)
    # The original brokers, in the order of the reassigning list (Kafka's too: the
    # list during a move is target + removed, which does not remember the old order).
    assert p.replicas == [2, 3, 1]
    assert p.isr == [1, 2, 3]
    assert p.adding_replicas == [] and p.removing_replicas == []
    assert p.leader == 1


def test_cancel_moves_leadership_off_an_adding_replica() -> None:
    h = cluster()
    h.replay(alter_reassignments(h.image, [("t", 0, [4, 2, 3])])[0])
    topic_id = h.image.topics_by_name["t"].topic_id
    isr(h, 0, [1, 2, 3, 4])
    h.replay([PartitionChangeRecord(partition_id=0, topic_id=topic_id, leader=4)])
    h.replay(alter_reassignments(h.image, [("t", 0, None)])[0])
    # The first in-sync original replica in list order ([2, 3, 1]) takes over.
    assert part(h).leader == 2
    assert 4 not in part(h).replicas


def test_errors_use_kafkas_codes() -> None:
    h = cluster()
    _, results = alter_reassignments(
        h.image,
        [
            ("t", 0, None),  # nothing to cancel
            ("t", 7, [1, 2, 3]),
            ("nope", 0, [1]),
            ("t", 0, [1, 1, 2]),
            ("t", 0, [1, 2, 9]),  # 9 is not registered
            ("t", 0, []),
        ],
    )
    assert [r.error_code for r in results] == [
        ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
    ]


def test_a_target_that_keeps_no_in_sync_replica_is_refused() -> None:
    h = cluster()
    isr(h, 0, [1])
    # Only broker 1 holds everything acknowledged; the target drops it. In Kafka's
    # semantics 1 stays a replica (removing) until the targets catch up, so this works:
    records, results = alter_reassignments(h.image, [("t", 0, [2, 3, 4])])
    assert results[0].error_code == ErrorCode.NONE
    h.replay(records)
    assert part(h).isr == [1]
    assert complete(h) == []  # 2, 3 and 4 are not in sync: 1 must stay


def test_a_reordering_completes_at_once() -> None:
    h = cluster()
    records, _ = alter_reassignments(h.image, [("t", 0, [3, 1, 2])])
    h.replay(records)
    assert part(h).replicas == [3, 1, 2]
    assert list_reassignments(h.image, None) == []


def test_a_new_target_replaces_the_running_one_against_the_original() -> None:
    h = cluster((1, 2, 3, 4, 5))
    h.replay(alter_reassignments(h.image, [("t", 0, [4, 2, 3])])[0])
    isr(h, 0, [1, 2, 3, 4])
    h.replay(alter_reassignments(h.image, [("t", 0, [4, 5, 3])])[0])
    p = part(h)
    assert p.replicas == [4, 5, 3, 2, 1]
    assert p.adding_replicas == [4, 5]
    assert p.removing_replicas == [2, 1]
    assert p.isr == [1, 2, 3, 4]  # 4 keeps its place in the ISR


def test_reassignment_state_survives_a_controller_failover() -> None:
    """A new active controller rebuilds its image from the log (or a snapshot of it)
    and completes the reassignment the old one started."""
    h = cluster()
    h.replay(alter_reassignments(h.image, [("t", 0, [4, 2, 3])])[0])
    isr(h, 0, [1, 2, 3, 4])
    # The new controller's image: the old one's records replayed (from a snapshot).
    replayed = MetadataImage()
    for position, record in enumerate(image_records(h.image)):
        replayed.replay(record, position)
    p = replayed.topics_by_name["t"].partitions[0]
    assert p.adding_replicas == [4] and p.removing_replicas == [1]
    [record] = complete_reassignments(replayed, majority)
    assert record.replicas == [4, 2, 3]


def test_unregister_is_refused_while_the_broker_holds_replicas() -> None:
    h = cluster()
    records, error, message = unregister_broker(h.image, 1)
    assert (records, error) == ([], ErrorCode.INVALID_REQUEST)
    assert message is not None and "t-0" in message
    records, error, _ = unregister_broker(h.image, 4)
    assert error == ErrorCode.NONE
    h.replay(records)
    assert 4 not in h.image.brokers
    assert unregister_broker(h.image, 4)[1] == ErrorCode.BROKER_ID_NOT_REGISTERED


def test_the_broker_handlers_round_trip_through_the_wire() -> None:
    h = cluster()
    request = AlterPartitionReassignmentsRequest(
        topics=[
            apr.ReassignableTopic(
                name="t",
                partitions=[
                    apr.ReassignablePartition(partition_index=0, replicas=[4, 2, 3]),
                    apr.ReassignablePartition(partition_index=1, replicas=None),
                ],
            )
        ]
    )
    response = h.through_router(
        AlterPartitionReassignmentsRequest.API_KEY,
        ALTER_VERSIONS,
        lambda hd, b: handle_alter_partition_reassignments(h.state, hd, b),
        request,
        0,
    )
    assert [(p.partition_index, p.error_code) for p in response.responses[0].partitions] == [
        (0, ErrorCode.NONE),
        (1, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS),
    ]
    listed = h.through_router(
        ListPartitionReassignmentsRequest.API_KEY,
        LIST_VERSIONS,
        lambda hd, b: handle_list_partition_reassignments(h.state, hd, b),
        ListPartitionReassignmentsRequest(topics=None),
        0,
    )
    [topic] = listed.topics
    [ongoing] = topic.partitions
    assert (ongoing.replicas, ongoing.adding_replicas, ongoing.removing_replicas) == (
        [4, 2, 3, 1],
        [4],
        [1],
    )
    answer = h.through_router(
        UnregisterBrokerRequest.API_KEY,
        UNREGISTER_VERSIONS,
        lambda hd, b: handle_unregister_broker(h.state, hd, b),
        UnregisterBrokerRequest(broker_id=4),
        0,
    )
    # Broker 4 is now an adding replica of t-0: it may not leave.
    assert answer.error_code == ErrorCode.INVALID_REQUEST
