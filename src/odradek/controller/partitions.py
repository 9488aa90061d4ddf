"""The CreatePartitions command: grow a topic and return the PartitionRecords that do it.

This module owns the controller's rules for adding partitions to an existing topic
(Kafka's ``ReplicationControlManager.createPartitions``): the count may only go up; the
new partitions keep the replication factor of partition 0; replicas are either given,
one list per new partition, and checked, or placed by
:func:`~odradek.controller.placement.assign_replicas` continuing the topic's existing
pattern. Each new partition starts with leader epoch and partition epoch 0, its in-sync
replicas being its live replicas, led by the first of them.

Pure: the image and the live brokers go in; records or a Kafka error come out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from odradek.controller.image import MetadataImage
from odradek.controller.placement import assign_replicas
from odradek.controller.topics import EXCESSIVE_PARTITIONS, MAX_PARTITIONS_PER_BATCH
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.metadata import PartitionRecord

__all__ = ["PartitionsOutcome", "create_partitions"]


@dataclass(frozen=True, slots=True)
class PartitionsOutcome:
    error_code: int
    error_message: str | None = None
    records: list[PartitionRecord] = field(default_factory=list)


def _error(code: ErrorCode, message: str) -> PartitionsOutcome:
    return PartitionsOutcome(error_code=code, error_message=message)


def create_partitions(
    image: MetadataImage,
    name: str,
    count: int,
    assignments: Sequence[Sequence[int]] | None,
    live_brokers: Sequence[int],
) -> PartitionsOutcome:
    """Check one topic of a CreatePartitions request; return its records or its error.

    ``count`` is the total number of partitions wanted. ``assignments``, when given,
    holds the replicas of each new partition, in order. ``live_brokers`` are the brokers
    that may take new replicas (registered and not fenced).
    """
    topic = image.topics_by_name.get(name)
    if topic is None:
        return _error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    current = len(topic.partitions)
    if count == current:
        return _error(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
    if count < current:
        return _error(
            ErrorCode.INVALID_PARTITIONS,
            f"The topic {name} currently has {current} partition(s); {count} would not be "
            "an increase.",
        )
    additional = count - current
    if additional > MAX_PARTITIONS_PER_BATCH:
        # Kafka's bound on the records of one request (POLICY_VIOLATION there too); the
        # caller applies it to the whole request, this keeps placement from ever seeing
        # more.
        return _error(ErrorCode.POLICY_VIOLATION, EXCESSIVE_PARTITIONS)
    if assignments is not None and len(assignments) != additional:
        return _error(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Attempted to add {additional} additional partition(s), but only "
            f"{len(assignments)} assignment(s) were specified.",
        )
    # The image keeps partitions 0..n-1 (CreateTopics numbers them so and they are never
    # removed one by one); a gap would be a broken log, not a request error.
    existing = {index: list(p.replicas) for index, p in topic.partitions.items()}
    if sorted(existing) != list(range(current)) or not existing:
        return _error(
            ErrorCode.UNKNOWN_SERVER_ERROR,
            f"Invalid state: topic {name} has partitions {sorted(existing)}, not 0..{current - 1}.",
        )
    replication_factor = len(existing[0])
    live = sorted(set(live_brokers))
    if assignments is not None:
        placed: dict[int, list[int]] = {}
        for offset, replicas in enumerate(assignments):
            problem = _assignment_problem(image, list(replicas), replication_factor, live)
            if problem is not None:
                return _error(ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
            if not any(broker in live for broker in replicas):
                return _error(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    "All brokers specified in the manual partition assignment for partition "
                    f"{current + offset} are fenced or in controlled shutdown.",
                )
            placed[current + offset] = list(replicas)
    else:
        if not live:
            return _error(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication_factor} time(s): "
                "All brokers are currently fenced or in controlled shutdown.",
            )
        try:
            placed = assign_replicas(live, additional, replication_factor, existing=existing)
        except ValueError as e:
            return _error(ErrorCode.INVALID_REPLICATION_FACTOR, str(e))
    records = []
    for index in sorted(placed):
        replicas = placed[index]
        # A fenced replica cannot be in sync; the leader is the first replica that is.
        isr = [broker for broker in replicas if broker in live]
        records.append(
            PartitionRecord(
                partition_id=index,
                topic_id=topic.topic_id,
                replicas=list(replicas),
                isr=isr,
                leader=isr[0],
                leader_epoch=0,
                partition_epoch=0,
            )
        )
    return PartitionsOutcome(error_code=ErrorCode.NONE, records=records)


def _assignment_problem(
    image: MetadataImage, replicas: list[int], replication_factor: int, live: list[int]
) -> str | None:
    """Kafka's ``validateManualPartitionAssignment``: why ``replicas`` cannot be used."""
    if not replicas:
        return "The manual partition assignment includes an empty replica list."
    previous: int | None = None
    for broker in sorted(replicas):
        if broker not in image.brokers and broker not in live:
            return (
                f"The manual partition assignment includes broker {broker}, but no such "
                "broker is registered."
            )
        if broker == previous:
            return f"The manual partition assignment includes the broker {broker} more than once."
        previous = broker
    if len(replicas) != replication_factor:
        return (
            f"The manual partition assignment includes a partition with {len(replicas)} "
            "replica(s), but this is not consistent with previous partitions, which have "
            f"{replication_factor} replica(s)."
        )
    return None
