"""Partition hosting: the local logs and partitions the metadata image assigns here.

:class:`Hosting` owns the log dir's side of the image: after every change of the image
it hosts exactly the partitions assigned to this node, with their current role (leader
or follower, through the replication service), creates the logs that are missing and
deletes those no longer assigned, a slice at a time, and loads each new partition's
producer state. It tells the group service when partitions it hosts changed, since a
``__consumer_offsets`` partition led here makes this node its groups' coordinator.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any, Protocol

from odradek.broker.partition import LocalPartition, load_producer_state, may_take_roles
from odradek.broker.record_validation import RecordPolicy
from odradek.broker.state import BrokerState
from odradek.controller.image import PartitionImage
from odradek.core.errors import LogOfflineError
from odradek.protocol.error_codes import ErrorCode
from odradek.replication.producer_state import ProducerStateManager
from odradek.shell.clock import monotonic_ms, now_ms
from odradek.shell.supervisor import Supervisor
from odradek.storage.log import LogConfig, PartitionLog
from odradek.storage.log_dir import LogDir

log = logging.getLogger("odradek.node")

HOSTING_SLICE_MS = 20
"""How long the event loop may be held at one go creating or deleting partition logs
(:meth:`Hosting.sync`); a slice ends after the log or batch that passes it."""
HOSTING_PAUSE_MS = 5
"""The pause between two such slices. A request takes several turns of the loop (read,
handle, write); yielding a single turn between slices would let each of those turns wait
for a whole slice, so the loop is left to itself for a while."""
DELETE_BATCH = 8
"""Partition logs deleted together, sharing one directory fsync and one checkpoint."""

PartitionKey = tuple[str, int]


class ReplicaRoles(Protocol):
    """The replication service, as hosting uses it: roles and their waiters."""

    def assign(self, partition: LocalPartition, p: PartitionImage) -> bool: ...

    def new_role(
        self, partition: LocalPartition, p: PartitionImage, high_watermark: int
    ) -> None: ...

    def fail_waiters(self, key: PartitionKey, error: int) -> None: ...


class TopicSettings(Protocol):
    """A topic's effective settings (:class:`~odradek.shell.metadata_apply.TopicConfigs`)."""

    def log_config_for(self, topic: str) -> LogConfig: ...

    def max_message_bytes_for(self, topic: str) -> int: ...

    def record_policy_for(self, topic: str) -> RecordPolicy: ...


class OffsetsPartitions(Protocol):
    """The group service, told that the hosted partitions changed."""

    def load_offsets_partitions(self) -> None: ...


class Registration(Protocol):
    """This broker's registration (:class:`~odradek.shell.broker_lifecycle.BrokerLifecycle`)."""

    @property
    def broker_epoch(self) -> int: ...


class Hosting:
    def __init__(
        self,
        state: BrokerState,
        log_dir: LogDir,
        topic_settings: TopicSettings,
        replication: ReplicaRoles,
        groups: OffsetsPartitions,
        io_lock: asyncio.Lock,
        supervisor: Supervisor,
        *,
        node_id: int,
        flush_before_ack: bool,
        producer_id_expiration_ms: int,
    ) -> None:
        """``io_lock`` is the flusher's: held while a flush may use the logs' files."""
        self._state = state
        self._log_dir = log_dir
        self._topic_settings = topic_settings
        self._replication = replication
        self._groups = groups
        self._io_lock = io_lock
        self._supervisor = supervisor
        self._node_id = node_id
        self._flush_before_ack = flush_before_ack
        self._producer_id_expiration_ms = producer_id_expiration_ms
        self.registration: Registration | None = None
        """Set once the broker registers: nothing is hosted before."""
        self._checkpointed_hw = dict(log_dir.high_watermarks())
        # Partition logs _sync_partitions left to create or delete (see there).
        self._logs_to_create: dict[PartitionKey, None] = {}
        self._logs_to_delete: dict[PartitionKey, PartitionLog] = {}
        # Old logs in the way of a topic created again under the same name: deleted first.
        self._logs_to_replace: dict[PartitionKey, PartitionLog] = {}
        self._hosting_task: asyncio.Task[Any] | None = None

    def sync(self) -> None:
        """The image changed: host what it assigns here, then let the group service
        take up the offsets partitions led here."""
        self._sync_partitions()
        self._groups.load_offsets_partitions()

    def _caught_up_to_registration(self) -> bool:
        """Whether the image holds this incarnation's registration (see
        :func:`~odradek.broker.partition.may_take_roles`)."""
        registration = self.registration
        return registration is not None and may_take_roles(
            self._state.image.offset, registration.broker_epoch
        )

    def _sync_partitions(self) -> None:
        """Host exactly the partitions the image assigns to this node, once the image
        holds this process's registration (nothing before).

        A partition whose log exists is hosted (or given its new role) at once. Creating
        or deleting a log costs several fsyncs (milliseconds each), so this does at most
        :data:`HOSTING_SLICE_MS` of that work; the rest is left in ``_logs_to_create``,
        ``_logs_to_delete`` and ``_logs_to_replace`` for a task that does one such slice
        at a time, pausing for :data:`HOSTING_PAUSE_MS` in between. A topic of 10,000
        partitions would otherwise hold the loop for tens of seconds: no request
        answered, no heartbeat sent. Until its log exists a partition is not in
        ``state.partitions``: not served (clients get NOT_LEADER_OR_FOLLOWER and retry),
        not fetched, not counted as hosted.
        """
        if not self._caught_up_to_registration() or self._log_dir.offline is not None:
            return  # a failed dir hosts nothing more; the node is stopping
        try:
            self._host_partitions()
        except LogOfflineError as e:
            log.error("%s", e)  # the dir failed while partitions were being hosted

    def _host_partitions(self) -> None:
        me = self._node_id
        wanted: dict[PartitionKey, Any] = {}
        for topic in self._state.image.topics_by_name.values():
            for index, p in topic.partitions.items():
                if me in p.replicas:
                    wanted[(topic.name, index)] = (topic, p)
        for key, hosted in list(self._state.partitions.items()):
            # A topic deleted and created again under the same name is another partition.
            if key not in wanted or hosted.topic_id != wanted[key][0].topic_id:
                self._replication.fail_waiters(key, ErrorCode.NOT_LEADER_OR_FOLLOWER)
                del self._state.partitions[key]
                if key in self._log_dir.logs:
                    self._logs_to_delete[key] = self._log_dir.logs[key]
        deadline = monotonic_ms() + HOSTING_SLICE_MS
        if not self._io_lock.locked():
            # Not while a flush runs on a worker thread: it may hold the logs' handles.
            self._delete_logs(deadline)
        self._logs_to_create = {}
        configs: dict[str, tuple[LogConfig, int, RecordPolicy]] = {}
        for key, (topic, p) in wanted.items():
            if not self._host(key, topic, p, configs, create=monotonic_ms() < deadline):
                self._logs_to_create[key] = None
        if self._hosting_backlog() and self._hosting_task is None:
            self._hosting_task = self._supervisor.start(
                "host-partitions", self._host_the_rest(), may_end=True
            )

    def _host(
        self,
        key: PartitionKey,
        topic: Any,
        p: Any,
        configs: dict[str, tuple[LogConfig, int, RecordPolicy]],
        *,
        create: bool,
    ) -> bool:
        """Host ``key`` (its image ``topic`` and partition ``p``) with its current role;
        False when that needs a log that does not exist yet and ``create`` is False, or
        the old log of a topic of the same name is still to be deleted."""
        partition_log = self._log_dir.logs.get(key)
        if partition_log is not None and partition_log.topic_id not in (None, topic.topic_id):
            # A topic deleted and created again under the same name: the old log goes
            # first (ahead of other deletions, which may be many), then a new one is made.
            self._logs_to_delete.pop(key, None)
            self._logs_to_replace[key] = partition_log
            return False
        if key[0] not in configs:
            # One resolution per topic: a topic's partitions share their configs.
            settings = self._topic_settings
            configs[key[0]] = (
                settings.log_config_for(key[0]),
                settings.max_message_bytes_for(key[0]),
                settings.record_policy_for(key[0]),
            )
        log_config, max_message_bytes, record_policy = configs[key[0]]
        if partition_log is None:
            if not create:
                return False
            partition_log = self._log_dir.create_log(
                key[0], key[1], log_config, now_ms(), topic.topic_id
            )
        # Topic config changes (AlterConfigs) apply to the running log at once.
        partition_log.config = log_config
        current = self._state.partitions.get(key)
        if current is not None:
            current.max_message_bytes = max_message_bytes
            current.record_policy = record_policy
        rebuild = current is None or current.leader_epoch != p.leader_epoch
        if not rebuild and current is not None:
            rebuild = self._replication.assign(current, p)
        if not rebuild:
            return True
        # A new leader epoch: this node's role may have changed with it.
        if current is not None:
            self._replication.fail_waiters(key, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        high_watermark = (
            current.high_watermark if current is not None else self._checkpointed_hw.get(key, 0)
        )
        leads = p.leader == self._node_id
        # Leaders and followers alike keep their producer state current.
        keep_producers = current is not None
        partition = LocalPartition(
            topic=key[0],
            index=key[1],
            topic_id=topic.topic_id,
            log=partition_log,
            leader_epoch=p.leader_epoch,
            flush_before_ack=self._flush_before_ack,
            producers=(
                current.producers
                if current is not None and keep_producers
                else self._load_producers(partition_log)
            ),
            max_message_bytes=max_message_bytes,
            record_policy=record_policy,
            is_leader=leads,
        )
        self._state.partitions[key] = partition
        self._replication.new_role(partition, p, high_watermark)
        return True

    def _load_producers(self, partition_log: PartitionLog) -> ProducerStateManager:
        """Producer state from the newest snapshot, then the batches after it."""
        return load_producer_state(partition_log, now_ms(), self._producer_id_expiration_ms)

    def _delete_logs(self, deadline: int) -> None:
        """Delete the local copies of partitions this node no longer hosts (a deleted
        topic, or a replica a reassignment moved away), those in the way of a new topic
        of the same name first, until ``deadline`` (monotonic ms). The caller makes sure
        that no flush runs meanwhile: a flush on its worker thread may hold the logs'
        handles."""
        while (self._logs_to_replace or self._logs_to_delete) and monotonic_ms() < deadline:
            queue = self._logs_to_replace or self._logs_to_delete
            batch: list[PartitionKey] = []
            for key, victim in list(itertools.islice(queue.items(), DELETE_BATCH)):
                del queue[key]
                # Hosted again meanwhile (a cancelled move): the copy is kept and reused.
                if self._log_dir.logs.get(key) is victim and key not in self._state.partitions:
                    batch.append(key)
            self._log_dir.delete_logs(batch)

    def _hosting_backlog(self) -> bool:
        return bool(self._logs_to_create or self._logs_to_delete or self._logs_to_replace)

    async def _host_the_rest(self) -> None:
        """Create and delete what :meth:`_sync_partitions` left, a slice at a time."""
        try:
            while self._hosting_backlog():
                await asyncio.sleep(HOSTING_PAUSE_MS / 1000)
                if self._log_dir.offline is not None:
                    return  # a failed dir hosts nothing more; the node is stopping
                try:
                    await self._host_slice()
                except LogOfflineError as e:
                    log.error("%s", e)  # the dir failed while partitions were being hosted
                    return
        finally:
            self._hosting_task = None

    async def _host_slice(self) -> None:
        """One slice of deletions, a pause, one slice of creations."""
        if self._logs_to_replace or self._logs_to_delete:
            async with self._io_lock:
                self._delete_logs(monotonic_ms() + HOSTING_SLICE_MS)
            await asyncio.sleep(HOSTING_PAUSE_MS / 1000)
        deadline = monotonic_ms() + HOSTING_SLICE_MS
        me = self._node_id
        configs: dict[str, tuple[LogConfig, int, RecordPolicy]] = {}
        hosted = False
        for key in list(self._logs_to_create):
            if monotonic_ms() >= deadline:
                break
            del self._logs_to_create[key]
            # The image may have moved on since: only what it still assigns here.
            topic = self._state.image.topics_by_name.get(key[0])
            p = topic.partitions.get(key[1]) if topic is not None else None
            if p is None or me not in p.replicas or key in self._state.partitions:
                continue
            if self._host(key, topic, p, configs, create=True):
                hosted = True
            else:
                self._logs_to_create[key] = None  # after its old log is deleted
        if hosted:
            self._groups.load_offsets_partitions()
