"""Partition reassignment (KIP-455) and broker unregistration, on the controller.

This module owns the controller's rules for moving replicas between brokers, Kafka's
``ReplicationControlManager.alterPartitionReassignments``,
``listPartitionReassignments`` and the completion step of ``PartitionChangeBuilder``:

1. **Start** (:func:`alter_reassignments` with target replicas). The partition's
   replicas become the union ``target + (original - target)``, with
   ``adding_replicas = target - original`` and ``removing_replicas = original - target``,
   in one ``PartitionChangeRecord``. The adding brokers see themselves in the replicas,
   create the local log and follow the leader; the leader adds them to the ISR through
   the ordinary AlterPartition once they have caught up.
2. **Complete** (:func:`complete_reassignments`, run by the active controller after
   every change). Once every adding replica is in the ISR, one record sets
   ``replicas = target``, removes the removed brokers from the ISR, clears
   ``adding_replicas``/``removing_replicas`` and, when the leader itself was removed,
   elects the first in-sync target replica. The ISR is never shrunk below the topic's
   ``min.insync.replicas`` (capped at the target's size) by completing: a reassignment
   waits instead. A removed broker no longer sees itself in the replicas and deletes
   its copy.
3. **Cancel** (target ``None``): back to the original replicas (the current ones less
   the adding ones), the ISR limited to them, the leader moved if it was an adding
   replica. NO_REASSIGNMENT_IN_PROGRESS when there is nothing to cancel.

A new target while a reassignment runs is taken against the original replicas, as
Kafka does: adding replicas that the new target keeps go on catching up (and keep
their ISR membership), the others are dropped at once.

All state is in the partition's registration (the metadata log), so a reassignment
survives a controller failover or a broker restart: the next active controller replays
the log and completes or cancels what it finds there.

The leader epoch changes only when the leader does: replicas added to or removed from
a partition change its partition epoch, which the leader applies to its follower set
without a new epoch. Producers on the leader are therefore not interrupted by the
start or the completion of a move (Kafka bumps the leader epoch when replicas are
removed, to fence their fetches; here the leader stops counting a removed replica as
soon as it applies the new registration, and the removed broker stops fetching when it
applies the same record).

Pure: the image goes in, records and results come out.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from odradek.controller.brokers import is_active
from odradek.controller.elr import min_insync_replicas as topic_min_isr
from odradek.controller.image import NO_LEADER, MetadataImage, PartitionImage
from odradek.controller.partition_change import partition_change
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.metadata import PartitionChangeRecord, UnregisterBrokerRecord

__all__ = [
    "OngoingReassignment",
    "ReassignmentResult",
    "alter_reassignments",
    "complete_reassignments",
    "list_reassignments",
    "replicas_on",
    "unregister_broker",
]


@dataclass(frozen=True, slots=True)
class ReassignmentResult:
    """One partition's answer to AlterPartitionReassignments."""

    topic: str
    partition: int
    error_code: int
    message: str | None = None


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    """One partition being reassigned (ListPartitionReassignments)."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


def is_reassigning(partition: PartitionImage) -> bool:
    return bool(partition.adding_replicas or partition.removing_replicas)


def original_replicas(partition: PartitionImage) -> list[int]:
    """The replicas before the reassignment that is in progress (all when none is)."""
    adding = set(partition.adding_replicas)
    return [r for r in partition.replicas if r not in adding]


def target_replicas(partition: PartitionImage) -> list[int]:
    """The replicas the partition will have once the reassignment in progress is done."""
    removing = set(partition.removing_replicas)
    return [r for r in partition.replicas if r not in removing]


def _elect(
    image: MetadataImage, partition: PartitionImage, replicas: list[int], isr: list[int]
) -> int:
    """Keep the leader if it stays a replica; otherwise the first in-sync, active
    replica in replica order (never an out-of-sync one)."""
    if partition.leader in replicas and partition.leader != NO_LEADER:
        return partition.leader
    for replica in replicas:
        if replica in isr and is_active(image, replica):
            return replica
    return NO_LEADER


def _target_problem(image: MetadataImage, target: Sequence[int]) -> str | None:
    """Kafka's ``validateManualPartitionAssignment`` for a reassignment target."""
    if not target:
        return "The target replica list is empty."
    if len(set(target)) != len(target):
        return f"The target replicas {list(target)} name a broker more than once."
    for broker in target:
        if broker < 0:
            return f"The target replicas {list(target)} include the invalid broker id {broker}."
        if broker not in image.brokers:
            return f"The target replicas include broker {broker}, but no such broker is registered."
    return None


def _change(
    image: MetadataImage,
    topic_id: uuid.UUID,
    index: int,
    partition: PartitionImage,
    target: list[int] | None,
) -> tuple[PartitionChangeRecord | None, ErrorCode, str | None]:
    original = original_replicas(partition)
    if target is None:
        if not is_reassigning(partition):
            return None, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None
        target = original
    else:
        problem = _target_problem(image, target)
        if problem is not None:
            return None, ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem
    adding = [r for r in target if r not in original]
    removing = [r for r in original if r not in target]
    # With nothing to add or remove (a reordering, or the original set again, which
    # cancels) this is the target itself, and the change is done at once.
    replicas = list(target) + removing
    isr = [r for r in partition.isr if r in replicas]
    if not isr:
        return (
            None,
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"The replicas {replicas} would keep none of the in-sync replicas "
            f"{partition.isr}; nothing acknowledged would be left to copy.",
        )
    leader = _elect(image, partition, replicas, isr)
    if leader == NO_LEADER and partition.leader != NO_LEADER:
        return (
            None,
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"No in-sync replica of {replicas} can lead now (in-sync: {isr}).",
        )
    min_isr = topic_min_isr(image.configs, image.topics_by_id[topic_id].name, len(original))
    record = partition_change(
        partition,
        topic_id,
        index,
        min_isr=min_isr,
        replicas=replicas,
        isr=isr,
        leader=leader,
        adding=adding,
        removing=removing,
    )
    return record, ErrorCode.NONE, None


def alter_reassignments(
    image: MetadataImage, requested: Iterable[tuple[str, int, Sequence[int] | None]]
) -> tuple[list[PartitionChangeRecord], list[ReassignmentResult]]:
    """AlterPartitionReassignments: for each ``(topic, partition, target or None)``, the
    record that starts (or cancels, for None) its reassignment, and its result.

    A partition named twice is decided the second time on the state the first entry
    produced, as if the two had come in two requests.
    """
    records: list[PartitionChangeRecord] = []
    results: list[ReassignmentResult] = []
    changed: dict[tuple[str, int], PartitionImage] = {}
    for name, index, target in requested:
        topic = image.topics_by_name.get(name)
        partition = (
            None if topic is None else changed.get((name, index), topic.partitions.get(index))
        )
        if topic is None or partition is None:
            results.append(ReassignmentResult(name, index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        record, error, message = _change(
            image, topic.topic_id, index, partition, None if target is None else list(target)
        )
        if record is not None:
            records.append(record)
            changed[(name, index)] = partition.merge(record)
        results.append(ReassignmentResult(name, index, error, message))
    return records, results


def list_reassignments(
    image: MetadataImage, wanted: Iterable[tuple[str, int]] | None
) -> list[OngoingReassignment]:
    """ListPartitionReassignments: the partitions of ``wanted`` (every partition when
    None) that are being reassigned; unknown or idle partitions are left out, as Kafka
    does."""
    if wanted is None:
        wanted = [
            (name, index)
            for name in sorted(image.topics_by_name)
            for index in sorted(image.topics_by_name[name].partitions)
        ]
    found = []
    for name, index in wanted:
        topic = image.topics_by_name.get(name)
        partition = None if topic is None else topic.partitions.get(index)
        if partition is None or not is_reassigning(partition):
            continue
        found.append(
            OngoingReassignment(
                name,
                index,
                tuple(partition.replicas),
                tuple(partition.adding_replicas),
                tuple(partition.removing_replicas),
            )
        )
    return found


def completion(
    image: MetadataImage,
    topic_id: uuid.UUID,
    index: int,
    partition: PartitionImage,
    min_insync_replicas: int,
) -> PartitionChangeRecord | None:
    """The record that completes ``partition``'s reassignment, or None while it cannot.

    It can once every adding replica is in the ISR, the ISR keeps at least
    ``min.insync.replicas`` (capped at the target's size) members (or completing
    removes none of them), and some in-sync target replica can lead.
    """
    if not is_reassigning(partition):
        return None
    if any(r not in partition.isr for r in partition.adding_replicas):
        return None
    target = target_replicas(partition)
    isr = [r for r in partition.isr if r in target]
    if not isr:
        return None
    if len(isr) < min(min_insync_replicas, len(target)) and isr != partition.isr:
        return None
    leader = _elect(image, partition, target, isr)
    if leader == NO_LEADER and partition.leader != NO_LEADER:
        return None
    return partition_change(
        partition,
        topic_id,
        index,
        min_isr=min_insync_replicas,
        replicas=target,
        isr=isr,
        leader=leader,
        adding=[],
        removing=[],
    )


def complete_reassignments(
    image: MetadataImage, min_insync_replicas: Callable[[str, int], int]
) -> list[PartitionChangeRecord]:
    """The completion record of every reassignment that can complete now, in topic
    name and partition order. ``min_insync_replicas(topic, replication_factor)`` is the
    topic's effective setting."""
    records = []
    for name in sorted(image.topics_by_name):
        topic = image.topics_by_name[name]
        for index in sorted(topic.partitions):
            partition = topic.partitions[index]
            if not is_reassigning(partition):
                continue
            target = target_replicas(partition)
            record = completion(
                image, topic.topic_id, index, partition, min_insync_replicas(name, len(target))
            )
            if record is not None:
                records.append(record)
    return records


def replicas_on(image: MetadataImage, broker_id: int) -> list[tuple[str, int]]:
    """The partitions that have ``broker_id`` among their replicas."""
    return [
        (name, index)
        for name in sorted(image.topics_by_name)
        for index, partition in sorted(image.topics_by_name[name].partitions.items())
        if broker_id in partition.replicas
    ]


def unregister_broker(
    image: MetadataImage, broker_id: int
) -> tuple[list[UnregisterBrokerRecord], ErrorCode, str | None]:
    """UnregisterBroker: remove the broker's registration, refused (INVALID_REQUEST)
    while any partition still has it as a replica, so that no partition is left with a
    replica on a broker that is gone for good."""
    broker = image.brokers.get(broker_id)
    if broker is None:
        return [], ErrorCode.BROKER_ID_NOT_REGISTERED, f"Broker {broker_id} is not registered."
    held = replicas_on(image, broker_id)
    if held:
        shown = ", ".join(f"{t}-{p}" for t, p in held[:5]) + (" ..." if len(held) > 5 else "")
        return (
            [],
            ErrorCode.INVALID_REQUEST,
            f"Broker {broker_id} still holds {len(held)} replica(s) ({shown}); move them "
            "first (odradek cluster remove-brokers).",
        )
    return (
        [UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=broker.epoch)],
        ErrorCode.NONE,
        None,
    )
