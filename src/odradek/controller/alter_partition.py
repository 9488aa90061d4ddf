"""AlterPartition: a partition leader asks the controller to change its ISR.

This module owns the controller's side of AlterPartition (KIP-497, KIP-704, KIP-841,
KIP-903), Kafka's ``ReplicationControlManager.alterPartition`` and
``validateAlterPartitionData``. The leader proposes a new ISR for a partition at the
leader epoch and partition epoch it knows; the controller accepts it only if that state
is still current, so two changes decided on the same state can never both apply (the
partition epoch works as a compare-and-set version).

Checks, in Kafka's order, each answered with Kafka's error code for the partition:

* the broker's registration epoch: STALE_BROKER_EPOCH for the whole request;
* the topic (UNKNOWN_TOPIC_ID from version 2, by id; UNKNOWN_TOPIC_OR_PARTITION for the
  names of versions 0-1) and the partition (UNKNOWN_TOPIC_OR_PARTITION);
* epochs above the controller's: NOT_CONTROLLER, because a leader can only have seen
  them from a newer controller, so this one is likely no longer active;
* a lower leader epoch: FENCED_LEADER_EPOCH;
* a sender that is not the leader: INVALID_REQUEST;
* a lower partition epoch: INVALID_UPDATE_VERSION;
* an ISR with repeated brokers or brokers outside the replicas, or without the leader,
  or a recovery state that is impossible: INVALID_REQUEST;
* an ISR member that is not registered, fenced, in controlled shutdown, or (version 3)
  registered with another broker epoch than the leader saw: INELIGIBLE_REPLICA
  (OPERATION_NOT_ATTEMPTED before version 2). This keeps a broker that restarted with a
  shorter log from being counted in sync on the strength of its previous incarnation.

Success yields a PartitionChangeRecord with the new ISR (none when nothing changes, so a
retry is harmless) and the partition state after it: the partition epoch goes up by
one, the leader and its epoch stay (Kafka no longer bumps the leader epoch when the ISR
changes). Reassignments (adding/removing replicas), which can let AlterPartition move
leadership (NEW_LEADER_ELECTED), and KIP-966's ELR are not modelled yet.

Pure: the image goes in, records and the response come out.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from odradek.controller.elr import elr_after, min_insync_replicas
from odradek.controller.image import (
    LEADER_RECOVERY_RECOVERED,
    LEADER_RECOVERY_RECOVERING,
    MetadataImage,
    PartitionImage,
    TopicImage,
)
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages.alter_partition_request import (
    AlterPartitionRequest,
    BrokerState,
)
from odradek.protocol.messages.alter_partition_request import (
    PartitionData as RequestPartition,
)
from odradek.protocol.messages.alter_partition_response import (
    AlterPartitionResponse,
)
from odradek.protocol.messages.alter_partition_response import (
    PartitionData as ResponsePartition,
)
from odradek.protocol.messages.alter_partition_response import (
    TopicData as ResponseTopic,
)
from odradek.protocol.metadata import PartitionChangeRecord

__all__ = ["AlterPartitionOutcome", "alter_partition"]

_NO_EPOCH_CHECK = -1
"""A broker epoch of -1 in ``new_isr_with_epochs`` skips the epoch check (and every
ISR member of versions 0-2 carries it)."""


@dataclass(frozen=True, slots=True)
class AlterPartitionOutcome:
    """The records to append and the response to send once they commit."""

    response: AlterPartitionResponse
    records: list[PartitionChangeRecord] = field(default_factory=list)


def _new_isr(partition: RequestPartition, version: int) -> list[BrokerState]:
    if version >= 3:
        return list(partition.new_isr_with_epochs)
    # AlterPartitionRequest.newIsrToSimpleNewIsrWithBrokerEpochs: no epochs to check.
    return [
        BrokerState(broker_id=replica, broker_epoch=_NO_EPOCH_CHECK)
        for replica in partition.new_isr
    ]


def _valid_isr(replicas: list[int], isr: list[int]) -> bool:
    """Kafka's ``Replicas.validateIsr``: distinct, non-negative members of the replicas."""
    return len(set(isr)) == len(isr) and all(r >= 0 and r in replicas for r in isr)


def _ineligible(image: MetadataImage, isr: list[BrokerState]) -> list[str]:
    """Kafka's ``ineligibleReplicasForIsr``: each member that may not be in an ISR."""
    problems = []
    for member in isr:
        broker = image.brokers.get(member.broker_id)
        if broker is None:
            problems.append(f"{member.broker_id} (not registered)")
        elif broker.in_controlled_shutdown:
            problems.append(f"{member.broker_id} (shutting down)")
        elif broker.fenced:
            problems.append(f"{member.broker_id} (fenced)")
        elif member.broker_epoch != _NO_EPOCH_CHECK and member.broker_epoch != broker.epoch:
            problems.append(
                f"{member.broker_id} (broker epoch mismatch: requested={member.broker_epoch} "
                f"VS expected={broker.epoch})"
            )
    return problems


def _validate(
    image: MetadataImage,
    broker_id: int,
    partition: PartitionImage | None,
    data: RequestPartition,
    isr: list[BrokerState],
    version: int,
) -> ErrorCode:
    """Kafka's ``validateAlterPartitionData``, in its order."""
    if partition is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if (
        data.leader_epoch > partition.leader_epoch
        or data.partition_epoch > partition.partition_epoch
    ):
        return ErrorCode.NOT_CONTROLLER
    if data.leader_epoch < partition.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if broker_id != partition.leader:
        return ErrorCode.INVALID_REQUEST
    if data.partition_epoch < partition.partition_epoch:
        return ErrorCode.INVALID_UPDATE_VERSION
    members = [member.broker_id for member in isr]
    if not _valid_isr(partition.replicas, members):
        return ErrorCode.INVALID_REQUEST
    if partition.leader not in members:
        # The leader holds every committed record; an ISR without it means nothing.
        return ErrorCode.INVALID_REQUEST
    recovery = data.leader_recovery_state
    if recovery not in (LEADER_RECOVERY_RECOVERED, LEADER_RECOVERY_RECOVERING):
        return ErrorCode.INVALID_REQUEST
    if recovery == LEADER_RECOVERY_RECOVERING and len(members) > 1:
        # A leader elected uncleanly must recover alone before anyone follows it.
        return ErrorCode.INVALID_REQUEST
    if (
        partition.leader_recovery_state == LEADER_RECOVERY_RECOVERED
        and recovery == LEADER_RECOVERY_RECOVERING
    ):
        return ErrorCode.INVALID_REQUEST
    if _ineligible(image, isr):
        return ErrorCode.INELIGIBLE_REPLICA if version > 1 else ErrorCode.OPERATION_NOT_ATTEMPTED
    return ErrorCode.NONE


def alter_partition(
    image: MetadataImage, request: AlterPartitionRequest, version: int
) -> AlterPartitionOutcome:
    """Answer one AlterPartition request of ``version`` (0-3) against ``image``.

    Topics are found by id from version 2, by name before. A partition named twice in
    one request is checked the second time against the state the first entry produced,
    so the second entry of two made from the same state fails with
    INVALID_UPDATE_VERSION instead of silently applying on top of the first.
    """
    response = AlterPartitionResponse()
    broker = image.brokers.get(request.broker_id)
    if broker is None or broker.epoch != request.broker_epoch:
        # Kafka's checkBrokerEpoch fails the whole request.
        response.error_code = ErrorCode.STALE_BROKER_EPOCH
        return AlterPartitionOutcome(response)

    records: list[PartitionChangeRecord] = []
    # Partitions changed earlier in this request, by (topic id, partition).
    changed: dict[tuple[uuid.UUID, int], PartitionImage] = {}
    for topic_data in request.topics:
        response_topic = ResponseTopic(
            topic_name=topic_data.topic_name, topic_id=topic_data.topic_id
        )
        response.topics.append(response_topic)
        topic: TopicImage | None
        if version >= 2:
            topic = image.topics_by_id.get(topic_data.topic_id)
        else:
            topic = image.topics_by_name.get(topic_data.topic_name)
        if topic is None:
            unknown = (
                ErrorCode.UNKNOWN_TOPIC_ID if version >= 2 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            response_topic.partitions.extend(
                ResponsePartition(partition_index=data.partition_index, error_code=unknown)
                for data in topic_data.partitions
            )
            continue
        for data in topic_data.partitions:
            key = (topic.topic_id, data.partition_index)
            partition = changed.get(key, topic.partitions.get(data.partition_index))
            isr = _new_isr(data, version)
            error = _validate(image, request.broker_id, partition, data, isr, version)
            if error != ErrorCode.NONE or partition is None:
                response_topic.partitions.append(
                    ResponsePartition(partition_index=data.partition_index, error_code=error)
                )
                continue
            record = PartitionChangeRecord(
                partition_id=data.partition_index, topic_id=topic.topic_id
            )
            new_isr = [member.broker_id for member in isr]
            if new_isr != partition.isr:
                record.isr = new_isr
                # KIP-966: members leaving an ISR that ends below min.insync.replicas
                # stay eligible to lead (the leader has frozen its high watermark).
                min_isr = min_insync_replicas(image.configs, topic.name, len(partition.replicas))
                elr = elr_after(partition, new_isr, min_isr)
                if elr != partition.eligible_leader_replicas:
                    record.eligible_leader_replicas = elr
            if data.leader_recovery_state != partition.leader_recovery_state:
                record.leader_recovery_state = data.leader_recovery_state
            if record.isr is not None or record.leader_recovery_state != -1:
                records.append(record)
                # The leader stays: validation put it in the new ISR and made every
                # member active, so no election is needed.
                partition = partition.merge(record)
                changed[key] = partition
            response_topic.partitions.append(
                ResponsePartition(
                    partition_index=data.partition_index,
                    error_code=ErrorCode.NONE,
                    leader_id=partition.leader,
                    leader_epoch=partition.leader_epoch,
                    isr=list(partition.isr),
                    leader_recovery_state=partition.leader_recovery_state,
                    partition_epoch=partition.partition_epoch,
                )
            )
    return AlterPartitionOutcome(response, records)
