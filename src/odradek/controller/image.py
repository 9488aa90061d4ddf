"""The metadata image: the cluster's metadata as a pure function of the metadata log.

This module owns :class:`MetadataImage` and the rules for replaying one metadata record
onto it. Nothing else changes an image, so every node (active controller, standby
controller, broker) that replays the same log reaches the same image, and a snapshot is
just an image written out at an offset.

The rules follow Kafka's image builders (``TopicsDelta``/``TopicDelta``,
``PartitionRegistration.merge``, ``ClusterDelta``, ``ConfigurationsDelta``,
``FeaturesDelta``, ``ProducerIdsDelta``, ``ScramDelta``, ``AclsDelta``,
``ClientQuotasDelta``):

* ``TopicRecord`` creates a topic with no partitions.
* ``PartitionRecord`` adds a partition or replaces it whole.
* ``PartitionChangeRecord`` changes only the fields it carries; see
  :meth:`PartitionImage.merge`.
* ``RemoveTopicRecord`` removes the topic and its topic configs.
* ``ConfigRecord`` sets one key of one resource; a null value deletes the key, and a
  resource left with no keys disappears from :attr:`MetadataImage.configs`.
* ``RegisterBrokerRecord`` replaces any earlier registration of that broker id;
  ``UnregisterBrokerRecord`` removes it; ``FenceBrokerRecord``, ``UnfenceBrokerRecord``
  and ``BrokerRegistrationChangeRecord`` change it when their broker epoch matches.
* ``FeatureLevelRecord`` sets a finalized feature level; level 0 removes the feature.
* ``ProducerIdsRecord`` moves :attr:`MetadataImage.next_producer_id` forward.
* ``UserScramCredentialRecord`` sets one user's credential for one mechanism, replacing
  any earlier one; ``RemoveUserScramCredentialRecord`` removes it (see
  :attr:`MetadataImage.scram_credentials`).
* ``AccessControlEntryRecord`` adds one ACL under its id (an id already present is
  replaced, as Kafka's controller and image do); ``RemoveAccessControlEntryRecord``
  removes it by id (see :attr:`MetadataImage.acls`).
* ``ClientQuotaRecord`` sets one quota key of one client-quota entity, or with
  ``remove`` removes it; an entity left with no keys disappears (see
  :attr:`MetadataImage.client_quotas`). Like Kafka's replay it takes any entity and
  key, and a removal of a key that is not there changes nothing.
* ``NoOpRecord`` only advances the offset.

Records the image does not model are applied as offset-only, without error:
``DelegationTokenRecord``, ``RemoveDelegationTokenRecord``, ``BeginTransactionRecord``,
``EndTransactionRecord``, ``AbortTransactionRecord``, ``ZkMigrationStateRecord`` and
``RegisterControllerRecord`` (controller registrations).

A record that contradicts the image (a change to a topic, partition or broker that does
not exist, a stale broker epoch, the removal of a SCRAM credential or an ACL that does
not exist, a field value Kafka cannot parse) means the log itself
is wrong. That is a bug, not an input error: replay raises
:class:`~odradek.core.errors.InvariantError` naming the record and offset, and leaves the
image exactly as it was, because every check runs before anything is changed.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple, TypeVar, cast

from odradek.core.invariant import invariant
from odradek.core.scram_credential import ScramCredential
from odradek.protocol.metadata import (
    AbortTransactionRecord,
    AccessControlEntryRecord,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    DelegationTokenRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    RemoveAccessControlEntryRecord,
    RemoveDelegationTokenRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
    ZkMigrationStateRecord,
)

T = TypeVar("T")

__all__ = [
    "CLIENT_QUOTA_ENTITY_TYPES",
    "CONFIG_RESOURCE_BROKER",
    "CONFIG_RESOURCE_TOPIC",
    "LEADER_RECOVERY_RECOVERED",
    "LEADER_RECOVERY_RECOVERING",
    "LOST_DIRECTORY",
    "MIGRATING_DIRECTORY",
    "NO_LEADER",
    "NO_LEADER_CHANGE",
    "UNASSIGNED_DIRECTORY",
    "UNMODELLED_RECORDS",
    "BrokerImage",
    "Endpoint",
    "MetadataImage",
    "PartitionImage",
    "QuotaEntity",
    "TopicImage",
    "quota_entity",
]

NO_LEADER = -1
"""``leader`` of a partition that has none."""
NO_LEADER_CHANGE = -2
"""``PartitionChangeRecord.leader`` when the record leaves the leader alone."""

LEADER_RECOVERY_RECOVERED = 0
LEADER_RECOVERY_RECOVERING = 1
_LEADER_RECOVERY_NO_CHANGE = -1
_LEADER_RECOVERY_STATES = (LEADER_RECOVERY_RECOVERED, LEADER_RECOVERY_RECOVERING)

# Kafka's reserved directory ids (DirectoryId): the first few UUIDs stand for states,
# not for real log directories.
MIGRATING_DIRECTORY = uuid.UUID(int=0)
"""A replica placed before directory assignment existed (metadata older than 3.7)."""
UNASSIGNED_DIRECTORY = uuid.UUID(int=1)
"""A replica not yet placed in any log directory."""
LOST_DIRECTORY = uuid.UUID(int=2)
"""A replica whose directory is offline."""

# Kafka's ConfigResource.Type ids for the resource types the brokers use.
CONFIG_RESOURCE_TOPIC = 2
CONFIG_RESOURCE_BROKER = 4

_METADATA_VERSION = "metadata.version"

QuotaEntity = tuple[tuple[str, str | None], ...]
"""A client-quota entity: its ``(entity type, name)`` pairs sorted by type, the name
None for the type's default entity (Kafka's ``ClientQuotaEntity``, ``<default>`` in
its tools). ``(("client-id", None), ("user", "alice"))`` is alice's default client."""

CLIENT_QUOTA_ENTITY_TYPES = ("user", "client-id", "ip")
"""The entity types Kafka's controller accepts in a client-quota entity."""

# BrokerRegistrationChangeRecord's tri-state bytes and what each one sets.
# fenced: 1 fence, 0 no change, -1 unfence (BrokerRegistrationFencingChange).
_FENCING_CHANGE: dict[int, bool | None] = {1: True, 0: None, -1: False}
# inControlledShutdown: 0 no change, 1 enter. There is deliberately no "leave" value:
# a broker leaves controlled shutdown only by registering a new incarnation.
_CONTROLLED_SHUTDOWN_CHANGE: dict[int, bool | None] = {0: None, 1: True}

UNMODELLED_RECORDS: tuple[type, ...] = (
    DelegationTokenRecord,
    RemoveDelegationTokenRecord,
    BeginTransactionRecord,
    EndTransactionRecord,
    AbortTransactionRecord,
    ZkMigrationStateRecord,
    RegisterControllerRecord,
)
"""Record types that replay accepts but applies as offset-only."""


class Endpoint(NamedTuple):
    """One listener a broker registered."""

    name: str
    host: str
    port: int
    security_protocol: int


@dataclass(frozen=True, slots=True)
class PartitionImage:
    """One partition's registration (Kafka's ``PartitionRegistration``).

    Frozen, and replay never mutates its lists: a change builds a new value. That is
    what lets :meth:`MetadataImage.copy` share partitions between copies.
    """

    replicas: list[int]
    isr: list[int]
    removing_replicas: list[int]
    adding_replicas: list[int]
    leader: int
    leader_recovery_state: int
    leader_epoch: int
    partition_epoch: int
    directories: list[uuid.UUID]
    eligible_leader_replicas: list[int]
    last_known_elr: list[int]

    @classmethod
    def from_record(cls, record: PartitionRecord) -> PartitionImage:
        """The registration a ``PartitionRecord`` describes; InvariantError if it cannot be."""
        return _partition_from_record(record, record.NAME)

    def merge(self, record: PartitionChangeRecord) -> PartitionImage:
        """This registration with ``record`` applied; InvariantError if it cannot be."""
        return _merge(self, record, record.NAME)


@dataclass(slots=True)
class TopicImage:
    """One topic: its name, id and partitions by index."""

    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionImage] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BrokerImage:
    """One broker's registration (Kafka's ``BrokerRegistration``, less the features).

    Frozen for the same reason as :class:`PartitionImage`.
    """

    broker_id: int
    incarnation_id: uuid.UUID
    epoch: int
    endpoints: list[Endpoint]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool
    log_dirs: list[uuid.UUID]


@dataclass
class MetadataImage:
    """The cluster metadata after replaying the log up to and including :attr:`offset`.

    Change it only with :meth:`replay`. Two images are equal when every part is equal,
    which is how the tests check that replay is deterministic.
    """

    offset: int = -1
    """The offset of the last record applied; -1 before the first."""
    topics_by_name: dict[str, TopicImage] = field(default_factory=dict)
    topics_by_id: dict[uuid.UUID, TopicImage] = field(default_factory=dict)
    """The same :class:`TopicImage` objects as :attr:`topics_by_name`, by id."""
    brokers: dict[int, BrokerImage] = field(default_factory=dict)
    configs: dict[tuple[int, str], dict[str, str]] = field(default_factory=dict)
    """``(resource type, resource name) -> {key: value}``; never holds an empty dict."""
    features: dict[str, int] = field(default_factory=dict)
    """Finalized feature levels, ``metadata.version`` included."""
    next_producer_id: int = -1
    """The first producer id of the next block to hand out; -1 before any was."""
    scram_credentials: dict[tuple[int, str], ScramCredential] = field(default_factory=dict)
    """``(mechanism type, user name) -> credential``: Kafka's ScramMechanism type (1
    SCRAM-SHA-256, 2 SCRAM-SHA-512) as the records carry it, and what the record holds
    (salt, stored key, server key, iterations; never a password)."""
    acls: Mapping[uuid.UUID, AccessControlEntryRecord] = field(default_factory=dict)
    """``ACL id -> the record that added it``: every ACL (Kafka's ``AclsImage``), with
    Kafka's ids for resource type, pattern type, operation and permission as the record
    carries them (:func:`odradek.security.acls.binding_from_record` makes a binding of
    one).

    Copy-on-write, unlike every other part but :attr:`client_quotas`: replay never
    changes this mapping, it puts a new one in its place when an ACL record is applied,
    and :meth:`copy` shares it. So its identity changes exactly when the ACLs do, and a
    reader may cache what it derives from it (the authorizer's index) on that identity;
    and copying an image costs nothing for its ACLs, however many there are. Never
    change it, or its records, in place."""
    client_quotas: Mapping[QuotaEntity, dict[str, float]] = field(default_factory=dict)
    """``entity -> {quota key: value}`` (Kafka's ``ClientQuotasImage``): every entity
    (see :data:`QuotaEntity`) with at least one quota, such as ``producer_byte_rate``,
    ``consumer_byte_rate``, ``request_percentage`` and ``controller_mutation_rate`` for
    users and client ids, or ``connection_creation_rate`` for an ip. Never holds an
    empty dict.

    Copy-on-write like :attr:`acls`, and copying shares it the same way: a
    ``ClientQuotaRecord`` puts a new mapping (and a new dict for the entity it changes)
    in place of the old. So a reader (the broker's quota manager) may rebuild what it
    derives from the quotas exactly when this mapping's identity changes. Never change
    it, or its dicts, in place."""

    def copy(self) -> MetadataImage:
        """An independent image: replaying onto either never changes the other.

        Partition and broker images are shared, because replay replaces them rather
        than changing them; every dict replay writes into is copied. :attr:`acls` and
        :attr:`client_quotas` are shared as they are, because replay never writes into
        them (copy-on-write).
        """
        topics_by_id = {
            topic_id: TopicImage(topic.name, topic.topic_id, dict(topic.partitions))
            for topic_id, topic in self.topics_by_id.items()
        }
        return MetadataImage(
            offset=self.offset,
            topics_by_name={topic.name: topic for topic in topics_by_id.values()},
            topics_by_id=topics_by_id,
            brokers=dict(self.brokers),
            configs={resource: dict(values) for resource, values in self.configs.items()},
            features=dict(self.features),
            next_producer_id=self.next_producer_id,
            # Credentials are frozen and replay replaces them: the dict alone is copied.
            scram_credentials=dict(self.scram_credentials),
            # Shared, not copied: replay replaces the mapping instead of changing it
            # (copy-on-write, see `acls`), so a copy's replay cannot reach the original,
            # and the identity of `acls` stays the same until an ACL changes.
            acls=self.acls,
            # Shared for the same reason (copy-on-write, see `client_quotas`).
            client_quotas=self.client_quotas,
        )

    def replay(self, record: object, offset: int) -> None:
        """Apply one metadata record read at ``offset``.

        Raises InvariantError, leaving the image unchanged, when ``offset`` does not
        follow :attr:`offset` or the record contradicts the image.
        """
        where = f"{type(record).__name__} at offset {offset}"
        invariant(
            offset > self.offset,
            f"{where}: offsets must increase, but offset {self.offset} was already applied",
        )
        match record:
            case TopicRecord():
                self._replay_topic(record, where)
            case PartitionRecord():
                self._replay_partition(record, where)
            case PartitionChangeRecord():
                self._replay_partition_change(record, where)
            case RemoveTopicRecord():
                self._replay_remove_topic(record, where)
            case ConfigRecord():
                self._replay_config(record)
            case RegisterBrokerRecord():
                self._replay_register_broker(record)
            case UnregisterBrokerRecord():
                broker = self._broker(record.broker_id, record.broker_epoch, where)
                del self.brokers[broker.broker_id]
            case FenceBrokerRecord():
                broker = self._broker(record.id, record.epoch, where)
                self.brokers[broker.broker_id] = dataclasses.replace(broker, fenced=True)
            case UnfenceBrokerRecord():
                broker = self._broker(record.id, record.epoch, where)
                self.brokers[broker.broker_id] = dataclasses.replace(broker, fenced=False)
            case BrokerRegistrationChangeRecord():
                self._replay_broker_change(record, where)
            case FeatureLevelRecord():
                self._replay_feature_level(record, where)
            case ProducerIdsRecord():
                invariant(
                    record.next_producer_id > self.next_producer_id,
                    f"{where}: next producer id {record.next_producer_id} is not above "
                    f"the current {self.next_producer_id}",
                )
                self.next_producer_id = record.next_producer_id
            case UserScramCredentialRecord():
                self.scram_credentials[record.mechanism, record.name] = ScramCredential(
                    salt=record.salt,
                    stored_key=record.stored_key,
                    server_key=record.server_key,
                    iterations=record.iterations,
                )
            case RemoveUserScramCredentialRecord():
                # Kafka's image (ScramDelta) would let this pass, but its controller
                # (ScramControlManager.replay) refuses it: the controller only writes a
                # removal for a credential it has, so one that is missing means the log
                # or the replay is wrong, as with a change to a topic that does not exist.
                key = (record.mechanism, record.name)
                invariant(
                    key in self.scram_credentials,
                    f"{where}: user {record.name!r} has no credential for SCRAM mechanism "
                    f"{record.mechanism}",
                )
                del self.scram_credentials[key]
            case AccessControlEntryRecord():
                # Kafka's controller (AclControlManager.replay) and image (AclsDelta) both
                # put the ACL under its id, replacing one already there: accepted alike.
                # Copy-on-write (see `acls`): a new mapping, never a change to the one
                # readers and copies hold, so its identity says when the ACLs changed.
                self.acls = {**self.acls, record.id: record}
            case RemoveAccessControlEntryRecord():
                # Kafka's controller and image both refuse the removal of an unknown id.
                invariant(record.id in self.acls, f"{where}: no ACL with id {record.id}")
                acls = dict(self.acls)  # a copy in C: far faster than a comprehension
                del acls[record.id]
                self.acls = acls
            case ClientQuotaRecord():
                self._replay_client_quota(record)
            case NoOpRecord():
                pass
            case _:
                invariant(isinstance(record, UNMODELLED_RECORDS), f"{where}: not a metadata record")
        self.offset = offset

    # Topics -------------------------------------------------------------------

    def _replay_topic(self, record: TopicRecord, where: str) -> None:
        # Kafka's image would silently replace a topic here; a second TopicRecord for a
        # live id or name can only come from a controller bug, so refuse it.
        existing = self.topics_by_id.get(record.topic_id)
        invariant(
            existing is None,
            f"{where}: topic id {record.topic_id} already exists"
            + (f" as {existing.name!r}" if existing is not None else ""),
        )
        invariant(
            record.name not in self.topics_by_name,
            f"{where}: topic {record.name!r} already exists",
        )
        topic = TopicImage(record.name, record.topic_id, {})
        self.topics_by_id[record.topic_id] = topic
        self.topics_by_name[record.name] = topic

    def _topic(self, topic_id: uuid.UUID, where: str) -> TopicImage:
        return _present(self.topics_by_id.get(topic_id), f"{where}: no topic with id {topic_id}")

    def _replay_partition(self, record: PartitionRecord, where: str) -> None:
        topic = self._topic(record.topic_id, where)
        topic.partitions[record.partition_id] = _partition_from_record(record, where)

    def _replay_partition_change(self, record: PartitionChangeRecord, where: str) -> None:
        topic = self._topic(record.topic_id, where)
        current = _present(
            topic.partitions.get(record.partition_id),
            f"{where}: topic {topic.name!r} has no partition {record.partition_id}",
        )
        topic.partitions[record.partition_id] = _merge(current, record, where)

    def _replay_remove_topic(self, record: RemoveTopicRecord, where: str) -> None:
        topic = self._topic(record.topic_id, where)
        del self.topics_by_id[topic.topic_id]
        del self.topics_by_name[topic.name]
        # The topic's configs die with it (ConfigurationsDelta.replay(RemoveTopicRecord)),
        # so a later topic of the same name starts from the defaults.
        self.configs.pop((CONFIG_RESOURCE_TOPIC, topic.name), None)

    # Configs ------------------------------------------------------------------

    def _replay_config(self, record: ConfigRecord) -> None:
        resource = (record.resource_type, record.resource_name)
        if record.value is not None:
            self.configs.setdefault(resource, {})[record.name] = record.value
            return
        values = self.configs.get(resource)
        if values is None:
            return
        values.pop(record.name, None)
        if not values:
            # Kafka's ConfigurationsDelta drops a resource that has no keys left.
            del self.configs[resource]

    # Client quotas ------------------------------------------------------------

    def _replay_client_quota(self, record: ClientQuotaRecord) -> None:
        # Kafka's replay (ClientQuotaControlManager, ClientQuotasDelta) takes the entity
        # as a map from type to name, so a type named twice keeps its last name; it
        # accepts any type and key, and a removal of a missing key changes nothing.
        entity = quota_entity((data.entity_type, data.entity_name) for data in record.entity)
        current = self.client_quotas.get(entity, {})
        if record.remove:
            if record.key not in current:
                return
            values = {key: value for key, value in current.items() if key != record.key}
        else:
            values = {**current, record.key: record.value}
        # Copy-on-write (see `client_quotas`): new mappings, never a change in place.
        quotas = dict(self.client_quotas)
        if values:
            quotas[entity] = values
        else:
            del quotas[entity]
        self.client_quotas = quotas

    # Brokers ------------------------------------------------------------------

    def _replay_register_broker(self, record: RegisterBrokerRecord) -> None:
        # Kafka keeps listeners in a map by name, so a repeated name keeps its last
        # endpoint; dict keeps the first position, which keeps the order deterministic.
        endpoints = {
            e.name: Endpoint(e.name, e.host, e.port, e.security_protocol) for e in record.end_points
        }
        self.brokers[record.broker_id] = BrokerImage(
            broker_id=record.broker_id,
            incarnation_id=record.incarnation_id,
            epoch=record.broker_epoch,
            endpoints=list(endpoints.values()),
            rack=record.rack,
            fenced=record.fenced,
            in_controlled_shutdown=record.in_controlled_shutdown,
            # BrokerRegistration sorts its directories (by unsigned value, as UUID does).
            log_dirs=sorted(record.log_dirs),
        )

    def _broker(self, broker_id: int, epoch: int, where: str) -> BrokerImage:
        broker = _present(
            self.brokers.get(broker_id), f"{where}: broker {broker_id} is not registered"
        )
        invariant(
            broker.epoch == epoch,
            f"{where}: broker {broker_id} has epoch {broker.epoch}, the record says {epoch}",
        )
        return broker

    def _replay_broker_change(self, record: BrokerRegistrationChangeRecord, where: str) -> None:
        broker = self._broker(record.broker_id, record.broker_epoch, where)
        invariant(
            record.fenced in _FENCING_CHANGE,
            f"{where}: unknown value {record.fenced} for fenced",
        )
        invariant(
            record.in_controlled_shutdown in _CONTROLLED_SHUTDOWN_CHANGE,
            f"{where}: unknown value {record.in_controlled_shutdown} for in_controlled_shutdown",
        )
        fenced = _FENCING_CHANGE[record.fenced]
        in_controlled_shutdown = _CONTROLLED_SHUTDOWN_CHANGE[record.in_controlled_shutdown]
        self.brokers[broker.broker_id] = dataclasses.replace(
            broker,
            fenced=broker.fenced if fenced is None else fenced,
            in_controlled_shutdown=(
                broker.in_controlled_shutdown
                if in_controlled_shutdown is None
                else in_controlled_shutdown
            ),
            # An empty list (and every version before 2) means "directories unchanged".
            log_dirs=sorted(record.log_dirs) if record.log_dirs else broker.log_dirs,
        )

    # Features -----------------------------------------------------------------

    def _replay_feature_level(self, record: FeatureLevelRecord, where: str) -> None:
        if record.feature_level == 0:
            # Kafka cannot map level 0 to a MetadataVersion: metadata.version is never
            # removed, only moved.
            invariant(record.name != _METADATA_VERSION, f"{where}: {_METADATA_VERSION} cannot be 0")
            self.features.pop(record.name, None)
        else:
            self.features[record.name] = record.feature_level


def quota_entity(pairs: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """The :data:`QuotaEntity` of ``(entity type, name)`` pairs: sorted by type, a type
    given twice keeping its last name (as Kafka's map from type to name does)."""
    return tuple(sorted(dict(pairs).items(), key=lambda pair: pair[0]))


def _present(value: T | None, message: str) -> T:
    """``value``, which the log promises exists; InvariantError if it does not."""
    invariant(value is not None, message)
    return cast(T, value)


def _partition_from_record(record: PartitionRecord, where: str) -> PartitionImage:
    """Kafka's ``new PartitionRegistration(PartitionRecord)``, with its checks."""
    directories = list(record.directories)
    invariant(
        not directories or len(directories) == len(record.replicas),
        f"{where}: {len(directories)} directories for {len(record.replicas)} replicas",
    )
    if not directories:
        # Records written before directory assignment (version 0, or an empty list)
        # place every replica in the "migrating" pseudo-directory.
        directories = [MIGRATING_DIRECTORY] * len(record.replicas)
    invariant(
        record.leader_recovery_state in _LEADER_RECOVERY_STATES,
        f"{where}: unknown leader recovery state {record.leader_recovery_state}",
    )
    return PartitionImage(
        replicas=list(record.replicas),
        isr=list(record.isr),
        removing_replicas=list(record.removing_replicas),
        adding_replicas=list(record.adding_replicas),
        leader=record.leader,
        leader_recovery_state=record.leader_recovery_state,
        leader_epoch=record.leader_epoch,
        partition_epoch=record.partition_epoch,
        directories=directories,
        # A record older than version 2 carries no ELR: both start empty.
        eligible_leader_replicas=list(record.eligible_leader_replicas or []),
        last_known_elr=list(record.last_known_elr or []),
    )


def _merge(current: PartitionImage, record: PartitionChangeRecord, where: str) -> PartitionImage:
    """Kafka's ``PartitionRegistration.merge(PartitionChangeRecord)``, with its checks.

    Every list field that is null in the record keeps its value; ``leader`` -2 and
    ``leader_recovery_state`` -1 mean "unchanged". The partition epoch always goes up
    by one. The leader epoch goes up by one whenever the record carries a leader, even
    the current one: the controller sets the same leader on purpose to fence a stale
    leader epoch (for example when the ISR shrinks during a reassignment).
    """
    replicas = current.replicas if record.replicas is None else list(record.replicas)

    if record.directories:
        invariant(
            record.replicas is None or len(record.directories) == len(record.replicas),
            f"{where}: {len(record.directories)} directories for {len(record.replicas or [])} "
            "replicas",
        )
        directories = list(record.directories)
    elif record.replicas is not None:
        # New replicas without directories: a replica that stays keeps its directory,
        # a new one is unassigned (DirectoryId.createDirectoriesFrom).
        invariant(
            len(set(current.replicas)) == len(current.replicas),
            f"{where}: current replicas {current.replicas} repeat a broker",
        )
        placed = dict(zip(current.replicas, current.directories, strict=True))
        directories = [placed.get(replica, UNASSIGNED_DIRECTORY) for replica in replicas]
    else:
        directories = current.directories
    if not directories:
        # Kafka fills an empty result with MIGRATING for the *previous* replica count;
        # the length check below then refuses it unless that count matches.
        directories = [MIGRATING_DIRECTORY] * len(current.replicas)
    invariant(
        not directories or len(directories) == len(replicas),
        f"{where}: {len(directories)} directories for {len(replicas)} replicas",
    )

    if record.leader == NO_LEADER_CHANGE:
        leader, leader_epoch = current.leader, current.leader_epoch
    else:
        leader, leader_epoch = record.leader, current.leader_epoch + 1

    if record.leader_recovery_state == _LEADER_RECOVERY_NO_CHANGE:
        leader_recovery_state = current.leader_recovery_state
    else:
        invariant(
            record.leader_recovery_state in _LEADER_RECOVERY_STATES,
            f"{where}: unknown leader recovery state {record.leader_recovery_state}",
        )
        leader_recovery_state = record.leader_recovery_state

    return PartitionImage(
        replicas=replicas,
        isr=current.isr if record.isr is None else list(record.isr),
        removing_replicas=(
            current.removing_replicas
            if record.removing_replicas is None
            else list(record.removing_replicas)
        ),
        adding_replicas=(
            current.adding_replicas
            if record.adding_replicas is None
            else list(record.adding_replicas)
        ),
        leader=leader,
        leader_recovery_state=leader_recovery_state,
        leader_epoch=leader_epoch,
        partition_epoch=current.partition_epoch + 1,
        directories=directories,
        eligible_leader_replicas=(
            current.eligible_leader_replicas
            if record.eligible_leader_replicas is None
            else list(record.eligible_leader_replicas)
        ),
        last_known_elr=(
            current.last_known_elr if record.last_known_elr is None else list(record.last_known_elr)
        ),
    )
