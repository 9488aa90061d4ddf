"""A partition replica hosted on this node: its log plus what the broker needs around it.

A replica is the partition's leader (``leader_state``, a
:class:`~odradek.replication.leader.PartitionLeader`: the ISR, follower positions, the
high watermark) or a follower (``follower_state``, a
:class:`~odradek.replication.follower.PartitionFollower`). With ``flush_before_ack``
(our default) the leader counts only its fsynced records towards the high watermark, so
a consumer never reads a record that a power loss could still take back.

Every replica keeps its producer state current, the leader as it appends and a
follower as it replicates (Kafka's followers do too): so the log can write a producer
snapshot at each segment roll (:meth:`LocalPartition.__post_init__` gives it the
state), and a restart or a new leader replays only the batches after the latest
snapshot (:func:`load_producer_state`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from odradek.broker.record_validation import RecordPolicy
from odradek.controller.image import LEADER_RECOVERY_RECOVERING, PartitionImage
from odradek.core.errors import LogOfflineError
from odradek.protocol.control_batch import EndTxnMarker, read_end_txn_marker
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.record_batch import (
    BatchHeader,
    Buffer,
    iter_batches,
)
from odradek.replication.follower import PartitionFollower
from odradek.replication.leader import PartitionLeader, PartitionRegistration
from odradek.replication.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ProducerStateManager,
)
from odradek.storage.log import PartitionLog
from odradek.storage.producer_snapshot import delete_snapshots_after, load_latest_snapshot
from odradek.storage.txn_index import AbortedTxn

log = logging.getLogger("odradek.broker")

# Headers read at a time while replaying producer state (about 60 bytes each in memory).
_REPLAY_HEADERS = 4096


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
    record_policy: RecordPolicy = field(default_factory=RecordPolicy)
    """What the topic's configs ask of produced records (timestamp type and bounds, keys
    on a compacted topic); the shell sets it from the topic's effective configuration."""
    is_leader: bool = True
    """Whether this node leads the partition (the image's leader); only the leader takes
    produce requests and serves consumers."""
    leader_state: PartitionLeader | None = None
    follower_state: PartitionFollower | None = None
    follower_broker_epochs: dict[int, int] = field(default_factory=dict)
    """On the leader: the broker epoch each follower last fetched with (KIP-903). A
    follower joins the ISR only with fetches from its current registration, never on
    positions it reported before a restart."""

    def __post_init__(self) -> None:
        # At each roll the log writes this replica's producer state as the snapshot for
        # the new segment's base offset; the state then covers exactly the batches
        # below it (the leader updates it after each append, a follower after each
        # replicated append).
        self.log.producer_snapshot = lambda: self.producers.snapshot()

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.index)

    def append_replicated(self, records: Buffer, now_ms: int) -> None:
        """A follower's append of batches fetched from the leader (whole batches,
        offsets as the leader gave them): the aborts among them go to the transaction
        index first, then the batches to the log, then the producer state follows, as
        Kafka's followers' does."""
        batches = with_markers(records)
        self.log.append_as_follower(memoryview(records), now_ms, aborts_in(self.producers, batches))
        self.on_replicated(batches)

    def on_replicated(self, batches: list[tuple[BatchHeader, EndTxnMarker | None]]) -> None:
        """The producer state after an append of ``batches`` (:func:`with_markers`)."""
        for header, marker in batches:
            replay(self.producers, header, marker)

    @property
    def last_stable_offset(self) -> int:
        """Where read_committed readers stop: the first offset of a transaction not yet
        decided (or decided with its marker not yet below the high watermark), never
        above the high watermark."""
        return self.producers.last_stable_offset(self.high_watermark)

    def on_truncated(self, now_ms: int) -> None:
        """The log was cut at its end offset: forget the batches that went, and when
        that forgot a producer entirely, rebuild the state exactly from the latest
        snapshot and the log (Kafka's ``truncateAndReload``)."""
        if self.producers.truncate_to(self.log.log_end_offset):
            self.producers = load_producer_state(self.log, now_ms)

    @property
    def high_watermark(self) -> int:
        if self.leader_state is not None:
            return self.leader_state.high_watermark
        if self.follower_state is not None:
            return self.follower_state.high_watermark
        if self.flush_before_ack:
            return min(self.log.recovery_point, self.log.log_end_offset)
        return self.log.log_end_offset


def with_markers(records: Buffer) -> list[tuple[BatchHeader, EndTxnMarker | None]]:
    """Each batch of ``records`` with its transaction marker when it is one."""
    return [
        (h, read_end_txn_marker(records, h.position) if h.is_control else None)
        for h in iter_batches(records)
    ]


def replay(
    producers: ProducerStateManager, header: BatchHeader, marker: EndTxnMarker | None
) -> None:
    """One stored or replicated batch into ``producers``: a marker closes its
    producer's transaction, any other batch is replayed."""
    if marker is None:
        producers.replay(header)
        return
    producers.complete(
        header.producer_id, header.producer_epoch, header.base_offset,
        committed=marker.committed, coordinator_epoch=marker.coordinator_epoch,
        timestamp=header.max_timestamp,
    )  # fmt: skip


def aborts_in(
    producers: ProducerStateManager, batches: list[tuple[BatchHeader, EndTxnMarker | None]]
) -> list[AbortedTxn]:
    """The transaction index entries of the aborts among ``batches`` (:func:`with_markers`),
    about to be appended: what the log writes before them."""
    if all(marker is None for _header, marker in batches):
        return []  # the common case on every replicated append: no marker at all
    return [
        AbortedTxn(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
        for t in producers.preview(batches)
        if t.is_aborted
    ]


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


def load_producer_state(
    partition_log: PartitionLog,
    now_ms: int,
    producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
) -> ProducerStateManager:
    """A replica's producer state: the latest snapshot at or below the log end, then the
    batch headers after it (Kafka's ``loadProducerState``). With a snapshot at every
    roll and at a clean stop, a restart replays at most the active segment."""
    if partition_log.offline is not None:
        return ProducerStateManager()
    end = partition_log.log_end_offset
    # A snapshot above the log end (left by a crash that lost the tail it described)
    # describes records that are gone; once the log grew past it again it would be wrong.
    delete_snapshots_after(partition_log.fs, partition_log.directory, end)
    loaded = load_latest_snapshot(partition_log.fs, partition_log.directory, end)
    for problem in loaded.corrupt:
        log.warning("ignoring producer snapshot: %s", problem)
    producers = ProducerStateManager.from_snapshot(loaded.entries)
    offset = max(loaded.offset or 0, partition_log.log_start_offset)
    while offset < end:
        try:
            headers = partition_log.read_headers(offset, _REPLAY_HEADERS)
        except LogOfflineError:
            # The replay met a corrupt batch (below the recovery point, not yet
            # scrubbed) or a disk error: the log is offline and serves nothing.
            return ProducerStateManager()
        if not headers:
            break
        for header in headers:
            marker = None
            if header.is_control:
                # The marker's record is needed, not only its header (the index entry of
                # an abort was written before the marker: it is there already).
                found = partition_log.read(header.base_offset, header.size_in_bytes)
                if found is not None:
                    marker = read_end_txn_marker(found.read(), 0)
            replay(producers, header, marker)
        offset = headers[-1].next_offset
    producers.remove_expired(now_ms, producer_id_expiration_ms)
    return producers
