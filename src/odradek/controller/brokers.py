"""Broker lifecycle on the active controller: registration, heartbeats, fencing, shutdown.

This module owns the rules of Kafka's ``ClusterControlManager.registerBroker``,
``BrokerHeartbeatManager`` and the broker half of ``ReplicationControlManager``
(``processBrokerHeartbeat``, ``handleBrokerFenced``, ``handleBrokerUnfenced``,
``handleBrokerInControlledShutdown``, ``maybeFenceOneStaleBroker``), and the subset of
``PartitionChangeBuilder`` those need to move leaderships and shrink ISRs.

Pure: every call takes the image and the time (``now_ms``) and returns metadata records;
nothing here reads a clock or does I/O. The records change nothing by themselves: the
image changes only when the caller replays them. The active controller must replay every
returned record into the image before it handles the next command (Kafka's controller
applies its records to its in-memory state at once, before they commit); otherwise two
heartbeats could both decide to unfence a broker or to elect the same leader.

The one piece of state outside the image is :class:`BrokerHeartbeats`: when each broker
was last heard from and which metadata offset it reported. As in Kafka it lives in
memory on the active controller only and is rebuilt empty when a controller becomes
active, which gives every registered broker a fresh session from that moment: a new
controller cannot know when a broker last spoke to the old one, and fencing a healthy
broker is worse than waiting one more session timeout.

Leader election here is the clean one only: a new leader comes from the ISR, preferring
the order of the replica list, and must be active (registered, unfenced, not in
controlled shutdown). Without a candidate the partition has leader -1. The ISR never
becomes empty: a broker that is the last ISR member stays in it when it is fenced, so
that it can lead again when it comes back (Kafka's rule before KIP-966). KIP-966's
eligible leader replicas (ELR) and unclean elections are not modelled yet.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace

from odradek.controller.elr import elr_after, min_insync_replicas
from odradek.controller.image import (
    NO_LEADER,
    BrokerImage,
    MetadataImage,
    PartitionImage,
    TopicImage,
)
from odradek.controller.offline_log_dirs import clear_record, offline_log_dirs, record_offline
from odradek.controller.partition_change import partition_change
from odradek.core.invariant import invariant
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from odradek.protocol.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from odradek.protocol.messages.broker_registration_request import BrokerRegistrationRequest
from odradek.protocol.messages.broker_registration_response import BrokerRegistrationResponse
from odradek.protocol.metadata import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
)
from odradek.protocol.metadata.register_broker_record import BrokerEndpoint, BrokerFeature

__all__ = [
    "DEFAULT_SESSION_TIMEOUT_MS",
    "BrokerControlState",
    "BrokerHeartbeats",
    "BrokerRecord",
    "HeartbeatOutcome",
    "RegistrationOutcome",
    "has_leaderships",
    "is_active",
    "leader_and_isr_updates",
    "register_broker",
]

DEFAULT_SESSION_TIMEOUT_MS = 9000
"""Kafka's default ``broker.session.timeout.ms``."""

METADATA_VERSION = "metadata.version"
MINIMUM_KRAFT_METADATA_VERSION = 1
"""The feature level of ``MetadataVersion.MINIMUM_KRAFT_VERSION`` (3.0-IV1): what Kafka
assumes a broker supports when it does not list ``metadata.version``, and the finalized
level it assumes when the image has none."""

_RESERVED_DIRECTORY_IDS = 100
"""Kafka's ``DirectoryId.reserved``: UUIDs below this (high bits zero) name states."""

# BrokerRegistrationChangeRecord's tri-state values (BrokerRegistrationFencingChange and
# BrokerRegistrationInControlledShutdownChange).
_NO_CHANGE = 0
_IN_CONTROLLED_SHUTDOWN = 1

BrokerRecord = (
    RegisterBrokerRecord
    | ConfigRecord
    | FenceBrokerRecord
    | UnfenceBrokerRecord
    | BrokerRegistrationChangeRecord
    | PartitionChangeRecord
)
"""The metadata records this module produces."""


def is_active(image: MetadataImage, broker_id: int) -> bool:
    """Whether ``broker_id`` may lead or join an ISR (``ClusterControlManager.isActive``):
    registered, unfenced and not in controlled shutdown."""
    broker = image.brokers.get(broker_id)
    return broker is not None and not broker.fenced and not broker.in_controlled_shutdown


# Leadership and ISR changes --------------------------------------------------------


def _partitions(
    image: MetadataImage, keep: Callable[[PartitionImage], bool]
) -> Iterator[tuple[TopicImage, int, PartitionImage]]:
    """The partitions ``keep`` selects, by topic name and index so that the records come
    out in the same order on every run (a simulation replays byte for byte)."""
    for name in sorted(image.topics_by_name):
        topic = image.topics_by_name[name]
        for partition_id in sorted(topic.partitions):
            partition = topic.partitions[partition_id]
            if keep(partition):
                yield topic, partition_id, partition


def _elect_leader(
    partition: PartitionImage, target_isr: list[int], acceptable: Callable[[int], bool]
) -> int:
    """``PartitionChangeBuilder.electAnyLeader`` without unclean election: keep a leader
    that is still valid, so that a change elsewhere never moves leadership needlessly;
    otherwise the first valid replica in replica order, which is the preferred leader
    whenever it can lead."""
    if partition.leader in target_isr and acceptable(partition.leader):
        return partition.leader
    for replica in partition.replicas:
        if replica in target_isr and acceptable(replica):
            return replica
    return NO_LEADER


def leader_and_isr_updates(
    image: MetadataImage,
    partitions: Iterable[tuple[TopicImage, int, PartitionImage]],
    *,
    broker_to_remove: int = NO_LEADER,
    broker_to_add: int = NO_LEADER,
    forget_broker: bool = False,
) -> list[PartitionChangeRecord]:
    """Kafka's ``ReplicationControlManager.generateLeaderAndIsrUpdates``, with KIP-966.

    ``broker_to_remove`` leaves every ISR and may lead nothing; ``broker_to_add`` counts
    as active even if the image still says otherwise (it is being unfenced by a record
    the caller has not replayed yet). Partitions that would not change get no record.

    The leader comes from the ISR; when no ISR member can lead, from the eligible
    leader replicas (:mod:`odradek.controller.elr`), which then leads with an ISR of
    itself. ``forget_broker`` (its log directory is new: the disk was wiped) also takes
    ``broker_to_remove`` out of the ELR and, if it was the last, out of the ISR: its log
    no longer holds what made it eligible.
    """

    def acceptable(replica: int) -> bool:
        return replica != broker_to_remove and (
            replica == broker_to_add or is_active(image, replica)
        )

    records = []
    for topic, partition_id, partition in partitions:
        target_isr = [replica for replica in partition.isr if replica != broker_to_remove]
        if not target_isr and not forget_broker:
            # The last member stays (Kafka before KIP-966 does the same): the one
            # replica known to hold every committed record, which leads again when it
            # comes back unless an eligible replica can lead first.
            target_isr = list(partition.isr)
        min_isr = min_insync_replicas(image.configs, topic.name, len(partition.replicas))
        elr = elr_after(partition, target_isr, min_isr)
        if forget_broker:
            elr = [replica for replica in elr if replica != broker_to_remove]
        leader = _elect_leader(partition, target_isr, acceptable)
        if leader == NO_LEADER:
            leader = _elect_leader(partition, elr, acceptable)
            if leader != NO_LEADER:
                # KIP-966: an eligible replica holds every committed record; it leads
                # alone, and the ISR members it replaces stay eligible (they were
                # complete too).
                elr = elr_after(replace(partition, eligible_leader_replicas=elr), [leader], min_isr)
                target_isr = [leader]
        if forget_broker:
            elr = [replica for replica in elr if replica != broker_to_remove]
        record = partition_change(
            partition,
            topic.topic_id,
            partition_id,
            min_isr=min_isr,
            isr=target_isr,
            leader=leader,
            elr=elr,
        )
        if record is not None:
            records.append(record)
    return records


def _in_isr_or_leading(broker_id: int) -> Callable[[PartitionImage], bool]:
    return lambda partition: partition.leader == broker_id or broker_id in partition.isr


def has_leaderships(image: MetadataImage, broker_id: int) -> bool:
    """Whether ``broker_id`` leads any partition (``BrokersToIsrs.hasLeaderships``)."""
    return any(True for _ in _partitions(image, lambda p: p.leader == broker_id))


def _fence(image: MetadataImage, broker: BrokerImage) -> list[BrokerRecord]:
    """``handleBrokerFenced``: the broker leaves every ISR and leadership, then is fenced.

    The partition changes come first so that no state in between has a fenced leader.
    """
    records: list[BrokerRecord] = []
    records.extend(
        leader_and_isr_updates(
            image,
            _partitions(image, _in_isr_or_leading(broker.broker_id)),
            broker_to_remove=broker.broker_id,
        )
    )
    if not broker.fenced:
        records.append(FenceBrokerRecord(id=broker.broker_id, epoch=broker.epoch))
    return records


def _unfence(image: MetadataImage, broker: BrokerImage) -> list[BrokerRecord]:
    """``handleBrokerUnfenced``: unfence, then give leaderless partitions a leader.

    Only partitions without a leader are looked at: one that has a leader keeps it
    (preferred-leader election is a separate, later operation in Kafka too).
    """
    records: list[BrokerRecord] = [UnfenceBrokerRecord(id=broker.broker_id, epoch=broker.epoch)]
    records.extend(
        leader_and_isr_updates(
            image,
            _partitions(image, lambda p: p.leader == NO_LEADER),
            broker_to_add=broker.broker_id,
        )
    )
    return records


def _enter_controlled_shutdown(image: MetadataImage, broker: BrokerImage) -> list[BrokerRecord]:
    """``handleBrokerInControlledShutdown``: mark the broker, then move its leaderships
    and take it out of every ISR while it still serves, so clients move on first."""
    records: list[BrokerRecord] = []
    if not broker.in_controlled_shutdown:
        records.append(
            BrokerRegistrationChangeRecord(
                broker_id=broker.broker_id,
                broker_epoch=broker.epoch,
                fenced=_NO_CHANGE,
                in_controlled_shutdown=_IN_CONTROLLED_SHUTDOWN,
            )
        )
    records.extend(
        leader_and_isr_updates(
            image,
            _partitions(image, _in_isr_or_leading(broker.broker_id)),
            broker_to_remove=broker.broker_id,
        )
    )
    return records


# Registration ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RegistrationOutcome:
    """The outcome of one BrokerRegistration: the broker epoch and the records to
    append, or a Kafka error (then no records). Answer only once the records commit."""

    error_code: ErrorCode
    error_message: str | None = None
    broker_epoch: int = -1
    records: list[BrokerRecord] = field(default_factory=list)

    def response(self) -> BrokerRegistrationResponse:
        return BrokerRegistrationResponse(
            error_code=self.error_code, broker_epoch=self.broker_epoch
        )


def _registration_error(code: ErrorCode, message: str) -> RegistrationOutcome:
    return RegistrationOutcome(error_code=code, error_message=message)


def _registration_features(
    image: MetadataImage, request: BrokerRegistrationRequest
) -> list[BrokerFeature] | str:
    """The features to record, or why the broker cannot join: Kafka's
    ``processRegistrationFeature`` for each feature the broker lists, plus
    ``metadata.version`` at the KRaft minimum when it lists none."""
    declared = [
        (f.name, f.min_supported_version, f.max_supported_version) for f in request.features
    ]
    if all(name != METADATA_VERSION for name, _, _ in declared):
        declared.append(
            (METADATA_VERSION, MINIMUM_KRAFT_METADATA_VERSION, MINIMUM_KRAFT_METADATA_VERSION)
        )
    features = []
    for name, low, high in declared:
        default = MINIMUM_KRAFT_METADATA_VERSION if name == METADATA_VERSION else 0
        finalized = image.features.get(name, default)
        if not low <= finalized <= high:
            return (
                f"Unable to register because the broker does not support version {finalized} "
                f"of {name}. It wants a version between {low} and {high}, inclusive."
            )
        features.append(
            BrokerFeature(name=name, min_supported_version=low, max_supported_version=high)
        )
    return features


def _log_dirs_problem(request: BrokerRegistrationRequest) -> str | None:
    for directory in request.log_dirs:
        if directory.int < _RESERVED_DIRECTORY_IDS:
            return f"Reserved directory ID in request: {directory}"
    if len(set(request.log_dirs)) != len(request.log_dirs):
        return "Duplicate directory ID in request"
    return None


def register_broker(
    image: MetadataImage,
    request: BrokerRegistrationRequest,
    next_offset: int,
    now_ms: int,
    *,
    cluster_id: str,
    heartbeats: BrokerHeartbeats,
) -> RegistrationOutcome:
    """Kafka's ``ClusterControlManager.registerBroker``.

    ``next_offset`` is the offset the first returned record will get; the broker epoch
    is the offset of the RegisterBrokerRecord itself, which makes every registration's
    epoch unique and ordered, and lets a heartbeat tell whether the broker has read its
    own registration (``is_caught_up``). The new registration is fenced: the broker is
    unfenced by a later heartbeat once it has caught up.

    Errors: INCONSISTENT_CLUSTER_ID; DUPLICATE_BROKER_REGISTRATION while another
    incarnation of the same id still has a valid session (unfenced and heard from within
    the session timeout), which keeps two processes from sharing an id;
    BROKER_ID_NOT_REGISTERED for a ZooKeeper-migration broker (no migration here);
    UNSUPPORTED_VERSION when it cannot run a finalized feature level;
    INVALID_REGISTRATION for reserved or repeated log directory ids.

    A registration repeating the current incarnation id is answered with the current
    epoch and no records, so a retry after a lost response is harmless. (Kafka writes a
    new registration in that case; the outcome for the broker is the same.)

    A new incarnation replacing an old one first takes the old one out of every ISR and
    leadership, as if it were fenced: the old process is gone, and the new one may have
    lost the tail of its log (KIP-966's unclean shutdown, without ELR). On success the
    broker's session starts now.
    """
    if request.cluster_id != cluster_id:
        return _registration_error(
            ErrorCode.INCONSISTENT_CLUSTER_ID,
            f"Expected cluster ID {cluster_id}, but got cluster ID {request.cluster_id}",
        )
    broker_id = request.broker_id
    existing = image.brokers.get(broker_id)
    if existing is not None:
        if existing.incarnation_id == request.incarnation_id:
            heartbeats.touch(broker_id, now_ms)
            return RegistrationOutcome(ErrorCode.NONE, broker_epoch=existing.epoch)
        # A broker that stopped cleanly names the epoch it had (KIP-1073's
        # previous_broker_epoch): that incarnation is gone, so its session does not block.
        restarted_cleanly = request.previous_broker_epoch == existing.epoch
        if heartbeats.has_valid_session(image, broker_id, now_ms) and not restarted_cleanly:
            return _registration_error(
                ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                "Another broker is registered with that broker id. If the broker was "
                "recently restarted this should self-resolve once the heartbeat manager "
                "expires the old broker session.",
            )
    if request.is_migrating_zk_broker:
        return _registration_error(
            ErrorCode.BROKER_ID_NOT_REGISTERED,
            "Controller does not support registering ZK brokers.",
        )
    features = _registration_features(image, request)
    if isinstance(features, str):
        return _registration_error(ErrorCode.UNSUPPORTED_VERSION, features)
    problem = _log_dirs_problem(request)
    if problem is not None:
        return _registration_error(ErrorCode.INVALID_REGISTRATION, problem)

    records: list[BrokerRecord] = []
    if existing is not None:
        # A new log directory id means a new, empty disk: whatever made the old
        # incarnation a safe leader (last ISR member, eligible replica) is gone with it.
        wiped = bool(existing.log_dirs) and set(existing.log_dirs) != set(request.log_dirs)
        records.extend(
            leader_and_isr_updates(
                image,
                _partitions(
                    image,
                    (lambda p: broker_id in p.eligible_leader_replicas or broker_id in p.isr)
                    if wiped
                    else _in_isr_or_leading(broker_id),
                ),
                broker_to_remove=broker_id,
                forget_broker=wiped,
            )
        )
    cleared = clear_record(image, broker_id)
    if cleared is not None:
        # A new process with its dirs back: the failure of the old one's is history.
        records.append(cleared)
    broker_epoch = next_offset + len(records)
    records.append(
        RegisterBrokerRecord(
            broker_id=broker_id,
            is_migrating_zk_broker=False,
            incarnation_id=request.incarnation_id,
            broker_epoch=broker_epoch,
            end_points=[
                BrokerEndpoint(
                    name=listener.name,
                    host=listener.host,
                    port=listener.port,
                    security_protocol=listener.security_protocol,
                )
                for listener in request.listeners
            ],
            features=features,
            rack=request.rack,
            fenced=True,
            in_controlled_shutdown=False,
            log_dirs=list(request.log_dirs),
        )
    )
    heartbeats.register(broker_id, now_ms)
    return RegistrationOutcome(ErrorCode.NONE, broker_epoch=broker_epoch, records=records)


# Heartbeats ------------------------------------------------------------------------


class BrokerControlState(enum.Enum):
    """Kafka's ``BrokerControlState``: where a heartbeat leaves a broker."""

    FENCED = "fenced"
    UNFENCED = "unfenced"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"
    SHUTDOWN_NOW = "shutdown_now"

    @property
    def fenced(self) -> bool:
        return self in (BrokerControlState.FENCED, BrokerControlState.SHUTDOWN_NOW)

    @property
    def should_shut_down(self) -> bool:
        return self is BrokerControlState.SHUTDOWN_NOW


@dataclass(frozen=True, slots=True)
class HeartbeatOutcome:
    """The answer to one BrokerHeartbeat and the records to append before sending it."""

    response: BrokerHeartbeatResponse
    records: list[BrokerRecord] = field(default_factory=list)
    state: BrokerControlState | None = None
    """Where the broker stands after this heartbeat; None after an error."""


class BrokerHeartbeats:
    """Kafka's ``BrokerHeartbeatManager``: broker sessions on the active controller.

    Create one when this controller becomes active (``activated_ms``): every broker
    then counts as heard from at that moment. Fenced, unfenced and in-controlled-shutdown
    come from the image; only what the log does not hold is kept here: the last contact,
    the metadata offset each broker last reported, and the offset each broker in
    controlled shutdown must see every active broker reach before it may stop.
    """

    def __init__(
        self,
        activated_ms: int,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        connection_loss_ms: int = -1,
    ) -> None:
        invariant(session_timeout_ms > 0, f"broker.session.timeout.ms {session_timeout_ms}")
        self.activated_ms = activated_ms
        self.session_timeout_ms = session_timeout_ms
        self.connection_loss_ms = connection_loss_ms
        self._last_contact_ms: dict[int, int] = {}
        # When the connection each broker last heartbeated on closed, until it is heard
        # from again: a dead process closes its sockets at once, so this is the fast
        # signal; the session timeout stays for failures that close nothing.
        self._lost_ms: dict[int, int] = {}
        self._metadata_offset: dict[int, int] = {}
        self._controlled_shutdown_offset: dict[int, int] = {}

    # Sessions ------------------------------------------------------------------

    def last_contact_ms(self, broker_id: int) -> int:
        return self._last_contact_ms.get(broker_id, self.activated_ms)

    def metadata_offset(self, broker_id: int) -> int:
        """The metadata offset ``broker_id`` last reported; -1 if it has not since this
        controller became active."""
        return self._metadata_offset.get(broker_id, -1)

    def touch(self, broker_id: int, now_ms: int) -> None:
        """Count ``broker_id`` as heard from at ``now_ms``."""
        self._last_contact_ms[broker_id] = max(now_ms, self._last_contact_ms.get(broker_id, now_ms))
        self._lost_ms.pop(broker_id, None)

    def connection_lost(self, broker_id: int, now_ms: int) -> None:
        """The connection ``broker_id`` heartbeated on closed at ``now_ms``: unless it
        is heard from again within ``broker.session.connection.loss.ms``, its session
        ends then (with -1, only the session timeout counts)."""
        if self.connection_loss_ms >= 0:
            self._lost_ms[broker_id] = now_ms

    def _session_end_ms(self, broker_id: int) -> int:
        """The last moment ``broker_id``'s session is still valid."""
        end = self.last_contact_ms(broker_id) + self.session_timeout_ms
        lost = self._lost_ms.get(broker_id)
        if lost is not None:
            end = min(end, lost + self.connection_loss_ms)
        return end

    def register(self, broker_id: int, now_ms: int) -> None:
        """A new incarnation of ``broker_id``: a fresh session, and nothing it reported
        before (it is a different process) counts any more."""
        self._last_contact_ms[broker_id] = now_ms
        self._lost_ms.pop(broker_id, None)
        self._metadata_offset.pop(broker_id, None)
        self._controlled_shutdown_offset.pop(broker_id, None)

    def has_valid_session(self, image: MetadataImage, broker_id: int, now_ms: int) -> bool:
        """Kafka's ``hasValidSession``: registered, unfenced, and heard from within
        ``broker.session.timeout.ms`` (the boundary itself still counts)."""
        broker = image.brokers.get(broker_id)
        if broker is None or broker.fenced:
            return False
        return self._session_end_ms(broker_id) >= now_ms

    def next_expiry_ms(self, image: MetadataImage) -> int | None:
        """When :meth:`expire` will next have a broker to fence, if nothing is heard
        before; None while no broker is unfenced. The shell sets its timer to this."""
        deadlines = [
            self._session_end_ms(broker_id) + 1
            for broker_id, broker in image.brokers.items()
            if not broker.fenced
        ]
        return min(deadlines, default=None)

    def expire(self, image: MetadataImage, now_ms: int) -> list[BrokerRecord]:
        """Fence every unfenced broker whose session timed out, and move its leaderships.

        Kafka fences one stale broker per controller event to bound the work; here all
        of them go in one batch, each decided on the image with the earlier ones already
        applied (a scratch copy; ``image`` itself is not changed), so that two stale
        brokers of one ISR never hand leadership to each other.
        """
        stale = [
            broker_id
            for broker_id, broker in sorted(image.brokers.items())
            if not broker.fenced and not self.has_valid_session(image, broker_id, now_ms)
        ]
        if not stale:
            return []
        scratch = image.copy()
        records: list[BrokerRecord] = []
        for broker_id in stale:
            fenced = _fence(scratch, scratch.brokers[broker_id])
            for record in fenced:
                scratch.replay(record, scratch.offset + 1)
            records.extend(fenced)
        return records

    # Heartbeat -------------------------------------------------------------------

    def _lowest_active_offset(self, image: MetadataImage) -> int:
        """Kafka's ``lowestActiveOffset``: the lowest metadata offset reported by an
        unfenced broker (brokers in controlled shutdown included)."""
        return min(
            (
                self.metadata_offset(broker_id)
                for broker_id, broker in image.brokers.items()
                if not broker.fenced
            ),
            default=2**63 - 1,
        )

    def _next_state(
        self, image: MetadataImage, broker: BrokerImage, request: BrokerHeartbeatRequest
    ) -> BrokerControlState:
        """Kafka's ``calculateNextBrokerState``."""
        caught_up = request.current_metadata_offset >= broker.epoch
        if broker.fenced:
            if request.want_shut_down:
                return BrokerControlState.SHUTDOWN_NOW
            if offline_log_dirs(image, broker.broker_id):
                # Its replicas went with the failed dir: only a new incarnation, which
                # registers its dirs again, may serve.
                return BrokerControlState.FENCED
            # A broker in controlled shutdown is on its way out: only a new incarnation
            # (a new registration) leaves that state, so it is never unfenced again.
            if not request.want_fence and caught_up and not broker.in_controlled_shutdown:
                return BrokerControlState.UNFENCED
            return BrokerControlState.FENCED
        if broker.in_controlled_shutdown:
            if has_leaderships(image, broker.broker_id):
                return BrokerControlState.CONTROLLED_SHUTDOWN
            # A controller that became active during the shutdown does not know the
            # offset of the leader moves; everything in its image is a safe bound.
            shutdown_offset = self._controlled_shutdown_offset.setdefault(
                broker.broker_id, image.offset
            )
            # Stop only once every active broker has seen the leadership moves, so that
            # clients are already being sent to the new leaders when this one goes.
            if shutdown_offset <= self._lowest_active_offset(image):
                return BrokerControlState.SHUTDOWN_NOW
            return BrokerControlState.CONTROLLED_SHUTDOWN
        if request.want_fence:
            return (
                BrokerControlState.SHUTDOWN_NOW
                if request.want_shut_down
                else BrokerControlState.FENCED
            )
        if request.want_shut_down:
            if has_leaderships(image, broker.broker_id):
                return BrokerControlState.CONTROLLED_SHUTDOWN
            return BrokerControlState.SHUTDOWN_NOW
        return BrokerControlState.UNFENCED

    def heartbeat(
        self,
        image: MetadataImage,
        request: BrokerHeartbeatRequest,
        now_ms: int,
        next_offset: int,
    ) -> HeartbeatOutcome:
        """Kafka's ``ReplicationControlManager.processBrokerHeartbeat``.

        ``next_offset`` is the offset the first returned record will get; it fixes the
        offset every active broker must reach before a broker in controlled shutdown is
        told to stop. STALE_BROKER_EPOCH when the broker is not registered with the
        request's epoch (a heartbeat from an old incarnation renews nothing).
        """
        broker = image.brokers.get(request.broker_id)
        if broker is None or broker.epoch != request.broker_epoch:
            # The response's defaults (fenced, not caught up) are what Kafka sends.
            return HeartbeatOutcome(
                BrokerHeartbeatResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
            )
        broker_id = broker.broker_id
        self.touch(broker_id, now_ms)
        # Kafka decides with the offset of the previous heartbeat; this one is fresher
        # and is what the broker has certainly read.
        self._metadata_offset[broker_id] = request.current_metadata_offset

        failed_dirs = [d for d in request.offline_log_dirs if d in broker.log_dirs]
        failure = record_offline(image, broker_id, failed_dirs)
        if failure is not None:
            # KIP-858, and sooner than Kafka: the broker's replicas are gone with the dir,
            # so it leaves every ISR and leadership now, as a fenced broker does, rather
            # than when its session times out.
            records: list[BrokerRecord] = [*_fence(image, broker), failure]
            state = (
                BrokerControlState.SHUTDOWN_NOW
                if request.want_shut_down
                else BrokerControlState.FENCED
            )
            return HeartbeatOutcome(
                BrokerHeartbeatResponse(
                    error_code=ErrorCode.NONE,
                    is_caught_up=request.current_metadata_offset >= broker.epoch,
                    is_fenced=True,
                    should_shut_down=state.should_shut_down,
                ),
                records,
                state,
            )
        current = self._current_state(broker)
        state = self._next_state(image, broker, request)
        records = []
        if state is not current:
            match state:
                case BrokerControlState.FENCED | BrokerControlState.SHUTDOWN_NOW:
                    records = _fence(image, broker)
                case BrokerControlState.UNFENCED:
                    records = _unfence(image, broker)
                case BrokerControlState.CONTROLLED_SHUTDOWN:
                    records = _enter_controlled_shutdown(image, broker)
                    # Kafka's processBatchEndOffset: the offset of the last record.
                    self._controlled_shutdown_offset[broker_id] = next_offset + len(records) - 1
        if state.should_shut_down:
            self._controlled_shutdown_offset.pop(broker_id, None)
        response = BrokerHeartbeatResponse(
            error_code=ErrorCode.NONE,
            is_caught_up=request.current_metadata_offset >= broker.epoch,
            is_fenced=state.fenced,
            should_shut_down=state.should_shut_down,
        )
        return HeartbeatOutcome(response, records, state)

    @staticmethod
    def _current_state(broker: BrokerImage) -> BrokerControlState:
        if broker.fenced:
            return BrokerControlState.FENCED
        if broker.in_controlled_shutdown:
            return BrokerControlState.CONTROLLED_SHUTDOWN
        return BrokerControlState.UNFENCED
