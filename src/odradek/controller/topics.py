"""Topic commands: validate a CreateTopics / DeleteTopics entry against the image and
turn it into the metadata records that, once committed and replayed, make it so.

Pure: the image, the live brokers and an rng go in; records or a Kafka error come out.
Topic ids come from the injected rng so that a simulation replays exactly.
"""

from __future__ import annotations

import random
import re
import uuid
from dataclasses import dataclass, field

from odradek.controller.image import MetadataImage
from odradek.controller.placement import assign_replicas
from odradek.core.kafka_uuid import to_kafka_str
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.metadata import ConfigRecord, PartitionRecord, RemoveTopicRecord, TopicRecord

TOPIC_RESOURCE = 2
MAX_TOPIC_NAME_LENGTH = 249
MAX_PARTITIONS_PER_BATCH = 10_000
"""Most partitions one request may create, over all its topics (Kafka's bound of the same
name): CreateTopics, CreatePartitions and the topics a Metadata request creates. Placing
the replicas, committing the records and creating the logs of more would hold the
controller and the brokers for long; a client needing more sends several requests."""
EXCESSIVE_PARTITIONS = "Excessively large number of partitions per request."
# Matched whole (fullmatch): with re.match, "$" also matches before a final newline, and a
# name with a newline would break every checkpoint file that lists partitions by name.
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
METADATA_TOPIC_ID = uuid.UUID(int=1)
ZERO_UUID = uuid.UUID(int=0)

MetadataRecord = TopicRecord | PartitionRecord | ConfigRecord | RemoveTopicRecord


def topic_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a topic name (Kafka's rules), or None."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if _LEGAL.fullmatch(name) is None:
        return f"topic name {name!r} has characters other than ASCII letters, digits, '.', '_', '-'"
    return None


def requested_partitions(num_partitions: int, assignments: int, default_partitions: int) -> int:
    """How many partitions a CreateTopics entry asks for, as Kafka counts them against
    :data:`MAX_PARTITIONS_PER_BATCH`: its replica assignments if it has any, else its
    partition count (the broker's default for -1; nothing for an invalid count)."""
    if assignments:
        return assignments
    if num_partitions == -1:
        return default_partitions
    return max(num_partitions, 0)


def _collision_key(name: str) -> str:
    # Metric names replace '.' with '_', so Kafka refuses names equal but for those.
    return name.replace(".", "_")


def new_topic_id(rng: random.Random) -> uuid.UUID:
    """A random topic id that Kafka's clients accept: never zero or the metadata topic's
    id, and never one whose text form starts with '-' (it would look like an option)."""
    while True:
        candidate = uuid.UUID(int=rng.getrandbits(128))
        if candidate in (ZERO_UUID, METADATA_TOPIC_ID):
            continue
        if to_kafka_str(candidate).startswith("-"):
            continue
        return candidate


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: dict[int, list[int]] | None = None
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicOutcome:
    error_code: int
    error_message: str | None = None
    topic_id: uuid.UUID = ZERO_UUID
    num_partitions: int = -1
    replication_factor: int = -1
    records: list[MetadataRecord] = field(default_factory=list)


def _error(code: ErrorCode, message: str) -> TopicOutcome:
    return TopicOutcome(error_code=code, error_message=message)


def create_topic(
    image: MetadataImage,
    topic: NewTopic,
    live_brokers: list[int],
    *,
    default_partitions: int,
    default_replication_factor: int,
    rng: random.Random,
    pending: set[str] | None = None,
) -> TopicOutcome:
    """Check one topic of a CreateTopics request; return its records or its error.

    ``pending`` holds names created earlier in the same request, which count as
    existing. Configs must already be validated by the caller (the broker owns the
    table of topic configs).
    """
    problem = topic_name_problem(topic.name)
    if problem is not None:
        return _error(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
    taken = set(image.topics_by_name) | (pending or set())
    if topic.name in taken:
        return _error(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic.name!r} already exists")
    collisions = [t for t in taken if _collision_key(t) == _collision_key(topic.name)]
    if collisions:
        return _error(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic {topic.name!r} collides with existing topic {collisions[0]!r} "
            "('.' and '_' are the same in metric names)",
        )
    wanted = requested_partitions(
        topic.num_partitions, len(topic.assignments or {}), default_partitions
    )
    if wanted > MAX_PARTITIONS_PER_BATCH:
        # Before placement: placing 100,000 partitions is itself long work.
        return _error(ErrorCode.POLICY_VIOLATION, EXCESSIVE_PARTITIONS)
    brokers = sorted(live_brokers)
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            return _error(
                ErrorCode.INVALID_REQUEST,
                "give either replica assignments or partitions and replication factor",
            )
        assignment = dict(topic.assignments)
        if sorted(assignment) != list(range(len(assignment))):
            return _error(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions must be numbered 0 to n-1"
            )
        sizes = {len(r) for r in assignment.values()}
        for replicas in assignment.values():
            if not replicas or len(set(replicas)) != len(replicas):
                return _error(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"bad replica list {replicas}")
            unknown = [b for b in replicas if b not in image.brokers and b not in brokers]
            if unknown:
                return _error(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"unknown brokers {unknown}")
        if len(sizes) != 1:
            return _error(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT, "all partitions need the same replica count"
            )
        replication_factor = sizes.pop()
    else:
        partitions = default_partitions if topic.num_partitions == -1 else topic.num_partitions
        replication_factor = (
            default_replication_factor
            if topic.replication_factor == -1
            else topic.replication_factor
        )
        if partitions <= 0:
            return _error(ErrorCode.INVALID_PARTITIONS, "number of partitions must be above 0")
        if replication_factor <= 0:
            return _error(
                ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor must be above 0"
            )
        if replication_factor > len(brokers):
            return _error(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication factor {replication_factor} is larger than the "
                f"{len(brokers)} available brokers",
            )
        assignment = assign_replicas(
            brokers, partitions, replication_factor, start_index=rng.randrange(len(brokers))
        )
    topic_id = new_topic_id(rng)
    records: list[MetadataRecord] = [TopicRecord(name=topic.name, topic_id=topic_id)]
    for key, value in sorted(topic.configs.items()):
        records.append(
            ConfigRecord(
                resource_type=TOPIC_RESOURCE, resource_name=topic.name, name=key, value=value
            )
        )
    for index in sorted(assignment):
        replicas = assignment[index]
        records.append(
            PartitionRecord(
                partition_id=index,
                topic_id=topic_id,
                replicas=list(replicas),
                isr=list(replicas),
                leader=replicas[0],
                leader_epoch=0,
                partition_epoch=0,
            )
        )
    return TopicOutcome(
        error_code=ErrorCode.NONE,
        topic_id=topic_id,
        num_partitions=len(assignment),
        replication_factor=replication_factor,
        records=records,
    )


def delete_topic(
    image: MetadataImage, name: str | None, topic_id: uuid.UUID | None
) -> TopicOutcome:
    """Check one topic of a DeleteTopics request (by name or by id)."""
    found = None
    if topic_id is not None and topic_id != ZERO_UUID:
        found = image.topics_by_id.get(topic_id)
        if found is None:
            return _error(ErrorCode.UNKNOWN_TOPIC_ID, f"no topic with id {to_kafka_str(topic_id)}")
    elif name is not None:
        found = image.topics_by_name.get(name)
        if found is None:
            return _error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
    else:
        return _error(ErrorCode.INVALID_REQUEST, "neither a topic name nor a topic id")
    return TopicOutcome(
        error_code=ErrorCode.NONE,
        topic_id=found.topic_id,
        num_partitions=len(found.partitions),
        records=[RemoveTopicRecord(topic_id=found.topic_id)],
    )
