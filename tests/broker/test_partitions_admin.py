"""CreatePartitions and DeleteRecords handlers: commits before answers, validate_only,
Kafka's per-topic and per-partition errors, the high watermark as the deletion limit, and
answers that encode at every supported version."""

from __future__ import annotations

import pytest

from odradek.broker.effects import CommitRecords, Reply
from odradek.broker.partitions_admin import (
    CREATE_PARTITIONS_VERSIONS,
    DELETE_RECORDS_VERSIONS,
    handle_create_partitions,
    handle_delete_records,
)
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
)
from odradek.protocol.messages.create_partitions_request import (
    CreatePartitionsAssignment,
    CreatePartitionsTopic,
)
from odradek.protocol.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsTopic,
)
from odradek.protocol.metadata import PartitionRecord
from tests.broker.harness import Harness, header, new_harness, roundtrip, versions

CREATE = CreatePartitionsRequest.API_KEY
DELETE = DeleteRecordsRequest.API_KEY


def grow(
    topics: list[tuple[str, int, list[list[int]] | None]], validate_only: bool = False
) -> CreatePartitionsRequest:
    return CreatePartitionsRequest(
        topics=[
            CreatePartitionsTopic(
                name=name,
                count=count,
                assignments=(
                    None
                    if assignments is None
                    else [CreatePartitionsAssignment(broker_ids=a) for a in assignments]
                ),
            )
            for name, count, assignments in topics
        ],
        timeout_ms=30_000,
        validate_only=validate_only,
    )


def results(response: CreatePartitionsResponse) -> list[tuple[str, int, str | None]]:
    return [(r.name, r.error_code, r.error_message) for r in response.results]


# --- CreatePartitions -----------------------------------------------------------------------


def test_new_partitions_exist_and_are_hosted_before_the_answer() -> None:
    h = new_harness()
    h.add_topic("orders", 2)
    outcome = handle_create_partitions(h.state, header(CREATE, 3), grow([("orders", 4, None)]))
    assert isinstance(outcome, CommitRecords)
    assert len(h.image.topics_by_name["orders"].partitions) == 2
    records = outcome.records
    assert all(isinstance(r, PartitionRecord) for r in records)
    assert [(r.partition_id, r.replicas, r.leader, r.isr) for r in records] == [
        (2, [1], 1, [1]),
        (3, [1], 1, [1]),
    ]
    response = h.carry(outcome)
    assert results(response) == [("orders", ErrorCode.NONE, None)]
    assert sorted(h.image.topics_by_name["orders"].partitions) == [0, 1, 2, 3]
    assert ("orders", 3) in h.state.partitions
    assert h.append("orders", 3) == 3


def test_validate_only_checks_without_committing() -> None:
    h = new_harness()
    h.add_topic("orders", 2)
    ok = handle_create_partitions(
        h.state, header(CREATE, 3), grow([("orders", 5, None), ("orders2", 3, None)], True)
    )
    assert isinstance(ok, Reply)
    assert results(ok.response) == [
        ("orders", ErrorCode.NONE, None),
        ("orders2", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'orders2' does not exist."),
    ]
    assert len(h.image.topics_by_name["orders"].partitions) == 2


def test_errors_are_per_topic_and_only_good_topics_change() -> None:
    h = new_harness()
    h.register_broker(2)
    h.register_broker(3, fenced=True)
    h.add_topic("a", 3)
    h.add_topic("b", [[1, 2]])
    h.add_topic("c", 1)
    h.add_topic("d", [[2, 1]])
    request = grow(
        [
            ("a", 2, None),
            ("b", 3, [[2, 1], [1, 2]]),
            ("c", 2, None),
            ("c", 3, None),
            ("a", 3, None),
            ("d", 2, [[3, 2]]),
            ("b", 9, None),
        ]
    )
    response = h.carry(handle_create_partitions(h.state, header(CREATE, 3), request))
    assert results(response) == [
        (
            "a",
            ErrorCode.INVALID_REQUEST,
            "Duplicate topic name.",
        ),
        ("b", ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
        ("c", ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
        ("d", ErrorCode.NONE, None),
    ]
    # Only d grew, with broker 3 (fenced) a replica but outside the ISR.
    assert len(h.committed) == 1
    [record] = h.committed[0]
    assert (record.replicas, record.isr, record.leader) == ([3, 2], [2], 2)
    assert ("d", 1) not in h.state.partitions  # node 1 holds no replica of it


@pytest.mark.parametrize(
    ("count", "assignments", "code", "message"),
    [
        (2, None, ErrorCode.INVALID_PARTITIONS, "Topic already has 2 partition(s)."),
        (
            1,
            None,
            ErrorCode.INVALID_PARTITIONS,
            "The topic orders currently has 2 partition(s); 1 would not be an increase.",
        ),
        (
            4,
            [[1]],
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
        ),
        (
            3,
            [[7]],
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes broker 7, but no such broker is registered.",
        ),
    ],
)
@pytest.mark.parametrize("version", versions(CREATE_PARTITIONS_VERSIONS))
def test_refusals_carry_kafkas_messages_at_every_version(
    count: int, assignments: list[list[int]] | None, code: ErrorCode, message: str, version: int
) -> None:
    h = new_harness()
    h.add_topic("orders", 2)
    response = h.through_router(
        CREATE,
        CREATE_PARTITIONS_VERSIONS,
        lambda hd, body: handle_create_partitions(h.state, hd, body),
        grow([("orders", count, assignments)]),
        version,
    )
    assert isinstance(response, CreatePartitionsResponse)
    assert results(response) == [("orders", code, message)]
    assert h.committed == []


@pytest.mark.parametrize("version", versions(CREATE_PARTITIONS_VERSIONS))
def test_a_successful_answer_encodes_at_every_version(version: int) -> None:
    h = new_harness()
    h.add_topic("orders", 1)
    response = h.through_router(
        CREATE,
        CREATE_PARTITIONS_VERSIONS,
        lambda hd, body: handle_create_partitions(h.state, hd, body),
        grow([("orders", 3, [[1], [1]])]),
        version,
    )
    assert results(response) == [("orders", ErrorCode.NONE, None)]
    assert len(h.image.topics_by_name["orders"].partitions) == 3


def test_an_empty_assignment_list_means_place_them() -> None:
    h = new_harness()
    h.add_topic("orders", 1)
    request = CreatePartitionsRequest(topics=[CreatePartitionsTopic(name="orders", count=2)])
    assert request.topics[0].assignments == []
    response = h.carry(handle_create_partitions(h.state, header(CREATE, 3), request))
    assert results(response) == [("orders", ErrorCode.NONE, None)]


# --- DeleteRecords ---------------------------------------------------------------------------


def delete(
    h: Harness, wanted: dict[str, list[tuple[int, int]]], version: int = 2
) -> DeleteRecordsResponse:
    request = DeleteRecordsRequest(
        topics=[
            DeleteRecordsTopic(
                name=name,
                partitions=[DeleteRecordsPartition(partition_index=i, offset=o) for i, o in parts],
            )
            for name, parts in wanted.items()
        ],
        timeout_ms=30_000,
    )
    outcome = handle_delete_records(h.state, h.server, header(DELETE, version), request)
    assert isinstance(outcome, Reply)
    response = roundtrip(outcome.response, version)
    assert isinstance(response, DeleteRecordsResponse)
    return response


def answers(response: DeleteRecordsResponse) -> dict[tuple[str, int], tuple[int, int]]:
    return {
        (t.name, p.partition_index): (p.error_code, p.low_watermark)
        for t in response.topics
        for p in t.partitions
    }


@pytest.fixture
def h() -> Harness:
    harness = new_harness()
    harness.add_topic("orders", 2)
    harness.append("orders", 0, batches=3)  # offsets 0..8
    harness.flush("orders", 0)
    return harness


@pytest.mark.parametrize("version", versions(DELETE_RECORDS_VERSIONS))
def test_delete_moves_the_log_start_and_answers_the_low_watermark(h: Harness, version: int) -> None:
    response = delete(h, {"orders": [(0, 4)]}, version)
    assert answers(response) == {("orders", 0): (ErrorCode.NONE, 4)}
    assert h.partition("orders").log.log_start_offset == 4
    # Deleting below the current start changes nothing and reports the start.
    assert answers(delete(h, {"orders": [(0, 2)]}, version)) == {("orders", 0): (ErrorCode.NONE, 4)}


def test_minus_one_means_the_high_watermark(h: Harness) -> None:
    h.append("orders", 0)  # offsets 9..11, not flushed: the high watermark stays at 9
    assert h.partition("orders").high_watermark == 9
    assert answers(delete(h, {"orders": [(0, -1)]})) == {("orders", 0): (ErrorCode.NONE, 9)}
    assert h.partition("orders").log.log_start_offset == 9


@pytest.mark.parametrize("offset", [10, 12, 13, -2])
def test_offsets_beyond_the_high_watermark_or_negative_are_out_of_range(
    h: Harness, offset: int
) -> None:
    h.append("orders", 0)  # log end 12, high watermark 9
    assert answers(delete(h, {"orders": [(0, offset)]})) == {
        ("orders", 0): (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
    }
    assert h.partition("orders").log.log_start_offset == 0


def test_an_empty_partition_accepts_zero_and_minus_one(h: Harness) -> None:
    assert answers(delete(h, {"orders": [(1, 0)]})) == {("orders", 1): (ErrorCode.NONE, 0)}
    assert answers(delete(h, {"orders": [(1, -1)]})) == {("orders", 1): (ErrorCode.NONE, 0)}


def test_unknown_topics_and_partitions_and_followers(h: Harness) -> None:
    h.register_broker(2)
    h.add_topic("elsewhere", [[2, 1], [2]])
    response = delete(
        h,
        {
            "orders": [(0, 3), (7, 0)],
            "missing": [(0, 0)],
            "elsewhere": [(0, 0), (1, 0)],
        },
    )
    assert answers(response) == {
        ("orders", 0): (ErrorCode.NONE, 3),
        ("orders", 7): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
        ("missing", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
        # Hosted here as a follower, and not hosted at all: either way not the leader.
        ("elsewhere", 0): (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1),
        ("elsewhere", 1): (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1),
    }
    assert ("elsewhere", 0) in h.state.partitions


@pytest.mark.parametrize(
    ("policy", "code"),
    [("compact", ErrorCode.POLICY_VIOLATION), ("compact,delete", ErrorCode.NONE)],
)
def test_a_compacted_only_topic_refuses_deletion(policy: str, code: ErrorCode) -> None:
    h = new_harness()
    h.add_topic("keyed", 1, {"cleanup.policy": policy})
    h.append("keyed")
    h.flush("keyed")
    expected_low = 2 if code == ErrorCode.NONE else -1
    assert answers(delete(h, {"keyed": [(0, 2)]})) == {("keyed", 0): (code, expected_low)}


def test_the_broker_cleanup_policy_applies_without_an_override() -> None:
    h = new_harness(properties={"log.cleanup.policy": "compact"})
    h.add_topic("keyed", 1)
    assert answers(delete(h, {"keyed": [(0, 0)]})) == {
        ("keyed", 0): (ErrorCode.POLICY_VIOLATION, -1)
    }


def test_an_offline_log_is_a_storage_error(h: Harness) -> None:
    h.partition("orders").log.offline = "disk gone"
    assert answers(delete(h, {"orders": [(0, 3)]})) == {
        ("orders", 0): (ErrorCode.KAFKA_STORAGE_ERROR, -1)
    }


@pytest.mark.parametrize("version", versions(DELETE_RECORDS_VERSIONS))
def test_delete_records_through_the_router(h: Harness, version: int) -> None:
    request = DeleteRecordsRequest(
        topics=[
            DeleteRecordsTopic(
                name="orders",
                partitions=[
                    DeleteRecordsPartition(partition_index=0, offset=-1),
                    DeleteRecordsPartition(partition_index=5, offset=0),
                ],
            )
        ],
        timeout_ms=1000,
    )
    response = h.through_router(
        DELETE,
        DELETE_RECORDS_VERSIONS,
        lambda hd, body: handle_delete_records(h.state, h.server, hd, body),
        request,
        version,
    )
    assert answers(response) == {
        ("orders", 0): (ErrorCode.NONE, 9),
        ("orders", 5): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
    }
