"""CreateTopics, CreatePartitions and Metadata against hostile input: names no topic can
have, requests for more partitions than one request may create, and configs not applied.

What a user relies on: a name Kafka refuses is refused here too, and Metadata says so
(INVALID_TOPIC_EXCEPTION), so that a producer fails its messages at once; a request for
more than 10,000 partitions is refused whole (POLICY_VIOLATION, every topic), before any
placement, so that it cannot stall the node; below the bound everything works as before;
``cleanup.policy=compact``, which this build would echo and not apply, is refused.
"""

from __future__ import annotations

import dataclasses

import pytest

from odradek.broker.partitions_admin import handle_create_partitions
from odradek.broker.topics import handle_create_topics, handle_metadata
from odradek.controller.image import CONFIG_RESOURCE_TOPIC
from odradek.controller.topics import EXCESSIVE_PARTITIONS, MAX_PARTITIONS_PER_BATCH
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    MetadataRequest,
    MetadataResponse,
)
from odradek.protocol.messages.create_partitions_request import CreatePartitionsTopic
from odradek.protocol.messages.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
)
from odradek.protocol.messages.metadata_request import MetadataRequestTopic
from tests.broker.harness import Harness, header, new_harness, roundtrip

CREATE_TOPICS = CreateTopicsRequest.API_KEY
CREATE_PARTITIONS = CreatePartitionsRequest.API_KEY
METADATA = MetadataRequest.API_KEY

# Names Kafka's Topic.validate refuses: a newline (also at the end, where a regular
# expression's "$" would still match), other characters, too long, "." and "..".
INVALID_NAMES = ["bad\n", "bad\nname", "\n", "with space", "slash/", "é", "x" * 250, ".", ".."]


def create(
    h: Harness, *topics: CreatableTopic, validate_only: bool = False
) -> list[tuple[str, int, str | None]]:
    request = CreateTopicsRequest(
        topics=list(topics), timeout_ms=30_000, validate_only=validate_only
    )
    response: CreateTopicsResponse = h.carry(
        handle_create_topics(h.state, header(CREATE_TOPICS, 7), request)
    )
    response = roundtrip(response, 7)
    return [(t.name, t.error_code, t.error_message) for t in response.topics]


def topic(name: str, partitions: int = 1, replication_factor: int = 1) -> CreatableTopic:
    return CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication_factor
    )


def metadata(h: Harness, names: list[str], auto_create: bool = True) -> MetadataResponse:
    request = MetadataRequest(
        topics=[MetadataRequestTopic(name=n) for n in names],
        allow_auto_topic_creation=auto_create,
    )
    response: MetadataResponse = h.carry(handle_metadata(h.state, header(METADATA, 12), request))
    return roundtrip(response, 12)


# --- names ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", INVALID_NAMES)
def test_create_topics_refuses_a_name_kafka_refuses(name: str) -> None:
    h = new_harness()
    [(_, error, message)] = create(h, topic(name))
    assert error == ErrorCode.INVALID_TOPIC_EXCEPTION, message
    assert name not in h.image.topics_by_name
    assert h.committed == []


def test_the_longest_legal_name_is_accepted() -> None:
    h = new_harness()
    name = "a" * 249
    assert create(h, topic(name)) == [(name, ErrorCode.NONE, None)]
    assert name in h.image.topics_by_name


@pytest.mark.parametrize("auto_create", [True, False])
@pytest.mark.parametrize("name", INVALID_NAMES)
def test_metadata_answers_invalid_topic_for_a_name_no_topic_can_have(
    name: str, auto_create: bool
) -> None:
    h = new_harness()
    response = metadata(h, [name, "fine"], auto_create=auto_create)
    errors = {t.name: t.error_code for t in response.topics}
    assert errors[name] == ErrorCode.INVALID_TOPIC_EXCEPTION
    # The valid name beside it is created (or reported unknown) as before.
    assert errors["fine"] == (
        ErrorCode.NONE if auto_create else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert name not in h.image.topics_by_name


# --- cleanup.policy=compact -------------------------------------------------------------


@pytest.mark.parametrize("policy", ["compact", "compact,delete"])
def test_create_topics_takes_a_compacted_topic(policy: str) -> None:
    h = new_harness()
    compacted = topic("connect-offsets")
    compacted.configs = [CreatableTopicConfig(name="cleanup.policy", value=policy)]
    [(_, error, message)] = create(h, compacted)
    assert (error, message) == (ErrorCode.NONE, None)
    assert "connect-offsets" in h.image.topics_by_name
    assert h.image.configs[(CONFIG_RESOURCE_TOPIC, "connect-offsets")]["cleanup.policy"] == policy


# --- the bound on partitions per request ------------------------------------------------


def test_create_topics_of_more_than_10000_partitions_is_refused_whole() -> None:
    h = new_harness()
    results = create(h, topic("huge", 100_000), topic("small", 1), topic("bad name", 1))
    assert results == [
        ("huge", ErrorCode.POLICY_VIOLATION, EXCESSIVE_PARTITIONS),
        ("small", ErrorCode.POLICY_VIOLATION, EXCESSIVE_PARTITIONS),
        ("bad name", ErrorCode.POLICY_VIOLATION, EXCESSIVE_PARTITIONS),
    ]
    assert h.committed == [] and h.image.topics_by_name == {}


@pytest.mark.parametrize("validate_only", [False, True])
def test_the_bound_counts_every_topic_of_the_request(validate_only: bool) -> None:
    h = new_harness()
    half = MAX_PARTITIONS_PER_BATCH // 2
    results = create(h, topic("a", half), topic("b", half + 1), validate_only=validate_only)
    assert [error for _, error, _ in results] == [ErrorCode.POLICY_VIOLATION] * 2
    assert h.committed == []


def test_the_bound_counts_assignments_and_the_default_partition_count() -> None:
    h = new_harness()
    h.state.settings = dataclasses.replace(h.state.settings, num_partitions=5_000)
    by_default = CreatableTopic(name="defaulted", num_partitions=-1, replication_factor=1)
    assigned = CreatableTopic(
        name="assigned",
        assignments=[
            CreatableReplicaAssignment(partition_index=i, broker_ids=[h.node_id])
            for i in range(5_001)
        ],
    )
    results = create(h, by_default, assigned)
    assert [error for _, error, _ in results] == [ErrorCode.POLICY_VIOLATION] * 2


def test_exactly_10000_partitions_are_created() -> None:
    h = new_harness()
    assert create(h, topic("big", MAX_PARTITIONS_PER_BATCH)) == [("big", ErrorCode.NONE, None)]
    assert len(h.image.topics_by_name["big"].partitions) == MAX_PARTITIONS_PER_BATCH


def test_metadata_does_not_auto_create_more_than_10000_partitions() -> None:
    h = new_harness()
    h.state.settings = dataclasses.replace(h.state.settings, num_partitions=4_000)
    response = metadata(h, ["one", "two", "three"])
    assert [t.error_code for t in response.topics] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 3
    assert h.committed == []
    # Two of them fit under the bound and are created.
    response = metadata(h, ["one", "two"])
    assert [t.error_code for t in response.topics] == [ErrorCode.NONE] * 2
    assert len(h.image.topics_by_name["two"].partitions) == 4_000


def grow(h: Harness, *topics: tuple[str, int]) -> list[tuple[str, int, str | None]]:
    request = CreatePartitionsRequest(
        topics=[CreatePartitionsTopic(name=name, count=count) for name, count in topics],
        timeout_ms=30_000,
    )
    response: CreatePartitionsResponse = h.carry(
        handle_create_partitions(h.state, header(CREATE_PARTITIONS, 3), request)
    )
    response = roundtrip(response, 3)
    return [(r.name, r.error_code, r.error_message) for r in response.results]


def test_create_partitions_of_more_than_10000_new_partitions_is_refused_whole() -> None:
    h = new_harness()
    h.add_topic("a", 2)
    h.add_topic("b", 1)
    half = MAX_PARTITIONS_PER_BATCH // 2
    # 2 + 5,000 and 1 + 5,001 partitions: 10,001 new ones in all.
    assert grow(h, ("a", half + 2), ("b", half + 2)) == [
        ("a", ErrorCode.POLICY_VIOLATION, EXCESSIVE_PARTITIONS),
        ("b", ErrorCode.POLICY_VIOLATION, EXCESSIVE_PARTITIONS),
    ]
    assert len(h.image.topics_by_name["a"].partitions) == 2
    # One partition fewer fits.
    assert grow(h, ("a", half + 2), ("b", half + 1)) == [
        ("a", ErrorCode.NONE, None),
        ("b", ErrorCode.NONE, None),
    ]
    assert len(h.image.topics_by_name["a"].partitions) == half + 2
