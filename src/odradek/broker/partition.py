"""A partition replica hosted on this node: its log plus what the broker needs around it.

A replica is the partition's leader (``leader_state``, a
:class:`~odradek.replication.leader.PartitionLeader`: the ISR, follower positions, the
high watermark) or a follower (``follower_state``, a
:class:`~odradek.replication.follower.PartitionFollower`). With ``flush_before_ack``
(our default) the leader counts only its fsynced records towards the high watermark, so
a consumer never reads a record that a power loss could still take back.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from odradek.controller.image import LEADER_RECOVERY_RECOVERING, PartitionImage
from odradek.protocol.error_codes import ErrorCode
from odradek.replication.follower import PartitionFollower
from odradek.replication.leader import PartitionLeader, PartitionRegistration
from odradek.replication.producer_state import ProducerStateManager
from odradek.storage.log import PartitionLog


def leader_epoch_error(current_leader_epoch: int, leader_epoch: int) -> ErrorCode:
    """KIP-320: a request's ``current_leader_epoch`` against the partition's (-1 skips
    the check). Older: FENCED_LEADER_EPOCH, the client must refresh its metadata; newer:
    UNKNOWN_LEADER_EPOCH, this broker has not seen that metadata yet."""
    if current_leader_epoch < 0 or current_leader_epoch == leader_epoch:
        return ErrorCode.NONE
    if current_leader_epoch < leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    return ErrorCode.UNKNOWN_LEADER_EPOCH


def may_take_roles(image_offset: int, broker_epoch: int) -> bool:
    """Whether a broker process may act on its image's partition roles: only once the
    image holds this process's registration (Kafka's broker initial catch-up; the broker
    epoch is the registration record's offset). A restarted broker's image, replayed
    from its local metadata log, may still name it leader in an epoch its previous
    process led, on a log that has since lost its unflushed tail; the controller ends
    that epoch in the batch that registers the new process. Acting before then leads one
    epoch from two different logs (found by ``odradek verify``; the replication
    simulator's ``roles_before_registration`` mode shows the loss)."""
    return broker_epoch >= 0 and image_offset >= broker_epoch


def registration_of(p: PartitionImage) -> PartitionRegistration:
    """The image's registration of a partition, as the replication cores take it."""
    return PartitionRegistration(
        tuple(p.replicas),
        tuple(p.isr),
        p.leader,
        p.leader_epoch,
        p.partition_epoch,
        recovering=p.leader_recovery_state == LEADER_RECOVERY_RECOVERING,
    )


class LogEpochs:
    """A partition log as the replication rules read it (their ``EpochLog``)."""

    __slots__ = ("log",)

    def __init__(self, log: PartitionLog) -> None:
        self.log = log

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def latest_epoch(self) -> int:
        return self.log.epochs.latest_epoch()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.log.end_offset_for_epoch(epoch)


@dataclass(slots=True)
class LocalPartition:
    topic: str
    index: int
    topic_id: uuid.UUID
    log: PartitionLog
    leader_epoch: int
    flush_before_ack: bool = True
    producers: ProducerStateManager = field(default_factory=ProducerStateManager)
    """Idempotent producers' sequence state, rebuilt from a snapshot and the log tail."""
    max_message_bytes: int | None = None
    """The topic's ``max.message.bytes``; None: the broker's ``message.max.bytes``."""
    is_leader: bool = True
    """Whether this node leads the partition (the image's leader); only the leader takes
    produce requests and serves consumers."""
    leader_state: PartitionLeader | None = None
    follower_state: PartitionFollower | None = None
    follower_broker_epochs: dict[int, int] = field(default_factory=dict)
    """On the leader: the broker epoch each follower last fetched with (KIP-903). A
    follower joins the ISR only with fetches from its current registration, never on
    positions it reported before a restart."""

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.index)

    @property
    def high_watermark(self) -> int:
        if self.leader_state is not None:
            return self.leader_state.high_watermark
        if self.follower_state is not None:
            return self.follower_state.high_watermark
        if self.flush_before_ack:
            return min(self.log.recovery_point, self.log.log_end_offset)
        return self.log.log_end_offset


def expire_producers(
    partitions: Iterable[LocalPartition], now_ms: int, producer_id_expiration_ms: int
) -> dict[tuple[str, int], list[int]]:
    """Forget, in every hosted partition, the idempotent producers idle for
    ``producer.id.expiration.ms`` (Kafka's ``removeExpiredProducers``); the ids forgotten
    by partition. A producer seen again afterwards starts over, as a new one."""
    forgotten: dict[tuple[str, int], list[int]] = {}
    for partition in partitions:
        expired = partition.producers.remove_expired(now_ms, producer_id_expiration_ms)
        if expired:
            forgotten[partition.key] = expired
    return forgotten
