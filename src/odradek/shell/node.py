"""One Odradek node: the asyncio shell around the pure broker, controller and storage cores.

It owns every effect: sockets, the real filesystem, the wall clock, timers. It

* runs its replica of the metadata log (:mod:`odradek.shell.quorum`): a voter of the
  controller quorum or an observer, and applies every committed record to the metadata
  image; a controller serves the controller listener
  (:mod:`odradek.shell.controller_service`), a broker registers and heartbeats
  (:mod:`odradek.shell.broker_lifecycle`) and serves clients once caught up;
* opens the log dir and recovers every partition;
* serves requests one at a time per connection, in order, carrying each handler's
  outcome through its effects (commit records, await a flush, await data);
* runs group commit: appends wait for one shared flush, which then completes every
  waiter it covers and wakes long-polling fetches;
* runs retention and checkpoints in the background, and on SIGTERM stops accepting,
  flushes, writes checkpoints and exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import io
import itertools
import json
import logging
import os
import random
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from odradek.broker import (
    cluster,
    configs,
    elect_leaders,
    fetch,
    groups,
    list_offsets,
    offset_for_leader_epoch,
    partitions_admin,
    produce,
    reassignments,
    topics,
)
from odradek.broker import producer_ids as init_producer_id
from odradek.broker.config import ServerConfig
from odradek.broker.effects import (
    AwaitData,
    AwaitFlush,
    AwaitRecordCheck,
    AwaitReplication,
    CommitRecords,
    ControllerCall,
    GroupCall,
    NoReply,
    Outcome,
    Reply,
)
from odradek.broker.fetch_session import FetchSessionCache
from odradek.broker.partition import (
    LocalPartition,
    expire_producers,
    load_producer_state,
    may_take_roles,
)
from odradek.broker.producer_ids import ProducerIds
from odradek.broker.record_validation import RecordPolicy
from odradek.broker.router import Close, Dispatch, Respond, Router
from odradek.broker.state import BrokerSettings, BrokerState
from odradek.broker.topic_config import (
    effective_log_config,
    effective_record_policy,
    effective_topic_value,
)
from odradek.controller.elr import min_insync_replicas
from odradek.controller.image import MetadataImage
from odradek.controller.image_records import decode_image_records, encode_image_records
from odradek.coordinator import API_VERSIONS as GROUP_API_VERSIONS
from odradek.coordinator import GroupConfig, GroupCoordinator, Output, Write
from odradek.core.errors import ConfigError, CorruptLogError, LogOfflineError, RemoteProtocolError
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.framing import FrameDecoder, size_prefix
from odradek.protocol.messages import (
    AlterConfigsRequest,
    AlterPartitionReassignmentsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeLogDirsRequest,
    DescribeQuorumRequest,
    ElectLeadersRequest,
    EnvelopeRequest,
    FetchRequest,
    FindCoordinatorRequest,
    IncrementalAlterConfigsRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    ListPartitionReassignmentsRequest,
    MetadataRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
    UnregisterBrokerRequest,
)
from odradek.protocol.metadata import NoOpRecord
from odradek.protocol.metadata_record import decode_metadata_record
from odradek.protocol.primitives import Records
from odradek.protocol.record_batch import Record, decode_records, encode_batch, iter_batches
from odradek.raft.disk_log import DiskRaftLog, metadata_log_directory
from odradek.raft.log import Entry, SnapshotId
from odradek.raft.quorum_file import QuorumStateFile
from odradek.raft.snapshot import decode_snapshot
from odradek.replication.producer_state import ProducerStateManager
from odradek.shell import controller_service
from odradek.shell.broker_lifecycle import BrokerLifecycle
from odradek.shell.clock import monotonic_ms, now_ms, steady_ms
from odradek.shell.connection_limits import (
    MAX_IN_FLIGHT_PER_CONNECTION,
    ConnectionBudget,
    ListenerGuard,
    ListenerLimits,
    PartialFrameWatch,
    broker_listener_name,
    ensure_open_files,
)
from odradek.shell.controller_service import ControllerService
from odradek.shell.dir_lock import DirLock
from odradek.shell.group_commit import GroupCommit
from odradek.shell.limits import log_partition_capacity, raise_open_files_limit
from odradek.shell.peer_client import PeerPool, PeerUnavailable, bind_outgoing_connections
from odradek.shell.quorum import NotController, QuorumConfig, QuorumDriver
from odradek.shell.real_fs import RealFileSystem
from odradek.shell.record_check import RecordCheckThread
from odradek.shell.replication import NodeControllerChannel, NodeStorage, ReplicationService
from odradek.shell.scrub import Scrubber
from odradek.shell.supervisor import Supervisor
from odradek.storage.checkpoint import RECOVERY_POINT_CHECKPOINT, read_offset_checkpoint
from odradek.storage.fs import FileSystem, join, write_file_atomically
from odradek.storage.log import LogConfig, PartitionLog
from odradek.storage.log_dir import LogDir
from odradek.storage.producer_snapshot import list_snapshots
from odradek.storage.segment import FileRange

log = logging.getLogger("odradek.node")

METADATA_TOPIC = "__cluster_metadata"
# Forwarding a metadata write to the active controller: how long to keep trying, across
# leader changes, and the pause between tries while the leader stays the same.
FORWARD_BACKOFF_S = 0.1
FORWARD_TIMEOUT_S = 30.0
CONTROLLED_SHUTDOWN_TIMEOUT_S = 10.0
# How long a broker whose log dir failed waits for the controller to hear of it.
LOG_DIR_FAILURE_REPORT_TIMEOUT_S = 10.0
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """What a node runs with; ``odradek.shell.boot.node_config`` derives it."""

    server: ServerConfig
    settings: BrokerSettings
    log_dir: str
    metadata_log_dir: str
    listen_host: str
    listen_port: int
    log_config: LogConfig
    """The server-wide log settings, used when a topic's effective settings are invalid."""
    validate_topic_configs: Callable[[dict[str, str]], dict[str, str]]
    quorum: QuorumConfig
    max_frame_bytes: int = 104_857_600
    retention_check_interval_ms: int = 300_000
    checkpoint_interval_ms: int = 60_000
    """``log.flush.offset.checkpoint.interval.ms``: how often the recovery points (and
    log start offsets) are checkpointed, which bounds what a crash makes start-up read."""
    high_watermark_checkpoint_interval_ms: int = 5000
    producer_id_expiration_ms: int = 86_400_000
    producer_id_expiration_check_interval_ms: int = 600_000
    scrub_bytes_per_second: int = 64 * 1024 * 1024
    connections_max_idle_ms: int = 600_000
    is_broker: bool = True
    is_controller: bool = True
    controller_listen_host: str | None = None
    controller_listen_port: int = 0
    broker_session_timeout_ms: int = 9000
    broker_session_connection_loss_ms: int = 500
    broker_heartbeat_interval_ms: int = 2000


HOSTING_SLICE_MS = 20
"""How long the event loop may be held at one go creating or deleting partition logs
(:meth:`Node._sync_partitions`); a slice ends after the log or batch that passes it."""
HOSTING_PAUSE_MS = 5
"""The pause between two such slices. A request takes several turns of the loop (read,
handle, write); yielding a single turn between slices would let each of those turns wait
for a whole slice, so the loop is left to itself for a while."""
DELETE_BATCH = 8
"""Partition logs deleted together, sharing one directory fsync and one checkpoint."""


class Node:
    def __init__(self, config: NodeConfig, fs: FileSystem | None = None) -> None:
        self.config = config
        self.fs: FileSystem = fs or RealFileSystem()
        self.state = BrokerState(
            settings=config.settings,
            image=MetadataImage(),
            rng=random.Random(),
            fetch_sessions=FetchSessionCache(config.settings.fetch_session_cache_slots),
        )
        self.state.validate_topic_configs = config.validate_topic_configs
        self.router = Router()
        self._register()
        self.controller_router = Router()
        for api_key, versions in controller_service.CONTROLLER_APIS.items():
            self.controller_router.register(api_key, versions, controller_service.route)
        self.log_dir: LogDir | None = None
        self.raft_log: DiskRaftLog | None = None
        self.quorum: QuorumDriver | None = None
        self.controller: ControllerService | None = None
        self.lifecycle: BrokerLifecycle | None = None
        self._server: asyncio.Server | None = None
        self._controller_server: asyncio.Server | None = None
        self.controller_port = config.controller_listen_port
        # Counts image changes other than no-ops: a decision made on an older generation
        # is made again before its records are committed.
        self._image_generation = 0
        self._forward_peers = PeerPool(f"forward-{config.settings.node_id}")
        self._lifecycle_task: asyncio.Task[None] | None = None
        self.replication: ReplicationService | None = None
        self._checkpointed_hw: dict[tuple[str, int], int] = {}
        # Metadata bytes committed since the last snapshot, and when it was taken.
        self._snapshot_bytes = 0
        self._snapshot_taken_ms = monotonic_ms()
        self.group_commit = GroupCommit(
            lambda: self.state.partitions.values(), self.state.partitions.get, self._on_flushed
        )
        self._data_waiters: dict[tuple[str, int], set[asyncio.Future[None]]] = {}
        # Checks the records of very large produce requests off the loop; no batch's
        # records may decompress to more than a request could carry.
        self.record_check = RecordCheckThread(config.max_frame_bytes)
        # Every long-lived task runs under it: a failure is handled or stops the node.
        self.supervisor = Supervisor(self._fatal)
        self.failed = asyncio.Event()
        self._locks: list[DirLock] = []
        self.stop_reason: str | None = None
        """Why the node stopped itself (then it exits with status 1), or None."""
        server = config.server
        self.group_config = GroupConfig.from_values(server.values)
        self.offsets_topic_replication_factor = server.offsets_topic_replication_factor
        self.groups = GroupCoordinator(
            self.group_config, rng=random.Random(), owned_partitions=[], now_ms=steady_ms()
        )
        self._group_waiters: dict[object, asyncio.Future[Any]] = {}
        self._group_timer_wakeup = asyncio.Event()
        self._loaded_offsets_partitions: set[int] = set()
        # Partition logs _sync_partitions left to create or delete (see there).
        self._logs_to_create: dict[tuple[str, int], None] = {}
        self._logs_to_delete: dict[tuple[str, int], PartitionLog] = {}
        # Old logs in the way of a topic created again under the same name: deleted first.
        self._logs_to_replace: dict[tuple[str, int], PartitionLog] = {}
        self._hosting_task: asyncio.Task[Any] | None = None
        self._connections: set[asyncio.Future[Any]] = set()
        self._listener_guards: dict[str, ListenerGuard] = {}
        self.port = config.listen_port

    def _register(self) -> None:
        s = self.state
        server = self.config.server
        producer_ids = ProducerIds()
        handlers: list[tuple[int, tuple[int, int], Callable[[Any, Any], Outcome]]] = [
            (
                MetadataRequest.API_KEY,
                topics.METADATA_VERSIONS,
                lambda h, b: topics.handle_metadata(s, h, b),
            ),
            (
                CreateTopicsRequest.API_KEY,
                topics.CREATE_TOPICS_VERSIONS,
                lambda h, b: topics.handle_create_topics(s, h, b),
            ),
            (
                DeleteTopicsRequest.API_KEY,
                topics.DELETE_TOPICS_VERSIONS,
                lambda h, b: topics.handle_delete_topics(s, h, b),
            ),
            (
                ProduceRequest.API_KEY,
                produce.VERSIONS,
                lambda h, b: produce.handle_produce(s, h, b),
            ),
            (FetchRequest.API_KEY, fetch.VERSIONS, lambda h, b: fetch.handle_fetch(s, h, b)),
            (
                ListOffsetsRequest.API_KEY,
                list_offsets.VERSIONS,
                lambda h, b: list_offsets.handle_list_offsets(s, h, b),
            ),
            (
                DescribeClusterRequest.API_KEY,
                cluster.DESCRIBE_CLUSTER_VERSIONS,
                lambda h, b: cluster.handle_describe_cluster(s, h, b),
            ),
            (
                CreatePartitionsRequest.API_KEY,
                partitions_admin.CREATE_PARTITIONS_VERSIONS,
                lambda h, b: partitions_admin.handle_create_partitions(s, h, b),
            ),
            (
                DeleteRecordsRequest.API_KEY,
                partitions_admin.DELETE_RECORDS_VERSIONS,
                lambda h, b: partitions_admin.handle_delete_records(s, server, h, b),
            ),
            (
                DescribeConfigsRequest.API_KEY,
                configs.DESCRIBE_CONFIGS_VERSIONS,
                lambda h, b: configs.handle_describe_configs(s, server, h, b),
            ),
            (
                AlterConfigsRequest.API_KEY,
                configs.ALTER_CONFIGS_VERSIONS,
                lambda h, b: configs.handle_alter_configs(s, server, h, b),
            ),
            (
                IncrementalAlterConfigsRequest.API_KEY,
                configs.INCREMENTAL_ALTER_CONFIGS_VERSIONS,
                lambda h, b: configs.handle_incremental_alter_configs(s, server, h, b),
            ),
            (
                FindCoordinatorRequest.API_KEY,
                groups.FIND_COORDINATOR_VERSIONS,
                lambda h, b: groups.handle_find_coordinator(
                    s,
                    h,
                    b,
                    offsets_topic_num_partitions=self.group_config.offsets_topic_num_partitions,
                    offsets_topic_replication_factor=self.offsets_topic_replication_factor,
                ),
            ),
            (
                OffsetForLeaderEpochRequest.API_KEY,
                offset_for_leader_epoch.VERSIONS,
                lambda h, b: offset_for_leader_epoch.handle_offset_for_leader_epoch(s, h, b),
            ),
            (
                ElectLeadersRequest.API_KEY,
                elect_leaders.VERSIONS,
                lambda h, b: elect_leaders.handle_elect_leaders(s, h, b),
            ),
            (
                InitProducerIdRequest.API_KEY,
                init_producer_id.VERSIONS,
                lambda h, b: init_producer_id.handle_init_producer_id(s, producer_ids, h, b),
            ),
        ]
        handlers += [
            (
                AlterPartitionReassignmentsRequest.API_KEY,
                reassignments.ALTER_VERSIONS,
                lambda h, b: reassignments.handle_alter_partition_reassignments(s, h, b),
            ),
            (
                ListPartitionReassignmentsRequest.API_KEY,
                reassignments.LIST_VERSIONS,
                lambda h, b: reassignments.handle_list_partition_reassignments(s, h, b),
            ),
            (
                UnregisterBrokerRequest.API_KEY,
                reassignments.UNREGISTER_VERSIONS,
                lambda h, b: reassignments.handle_unregister_broker(s, h, b),
            ),
            (
                DescribeLogDirsRequest.API_KEY,
                reassignments.DESCRIBE_LOG_DIRS_VERSIONS,
                lambda h, b: reassignments.handle_describe_log_dirs(s, h, b),
            ),
        ]
        handlers += [
            (api_key, versions, groups.handle_group_request)
            for api_key, versions in GROUP_API_VERSIONS.items()
        ]
        # DescribeQuorum on the broker listener answers with this node's own view of
        # the metadata quorum (leader, high watermark, the stall alarm) for health checks.
        handlers.append((DescribeQuorumRequest.API_KEY, (0, 2), self._describe_quorum))
        for api_key, versions, handler in handlers:
            self.router.register(api_key, versions, handler)

    def _fatal(self, name: str, error: BaseException) -> None:
        """A long-lived task failed and nothing handles it: stop, with a non-zero exit."""
        self.fail(f"task {name} failed ({error!r}); its work cannot go on unseen")

    def fail(self, reason: str) -> None:
        """Stop the node for ``reason``: ``run_node`` stops it and exits with status 1."""
        if self.stop_reason is None:
            self.stop_reason = reason
            log.critical("node %d stops: %s", self.config.settings.node_id, reason)
        self.failed.set()

    # --- A failed log dir ------------------------------------------------------------

    def _metadata_log_failed(self, reason: str) -> None:
        """The metadata log (or its quorum-state file) cannot be written: this replica
        can persist neither a vote nor a record, so it leaves the quorum at once and the
        node stops (ADR 0013). When the metadata log shares the broker's log dir, that
        dir has failed too: one disk."""
        if self.quorum is not None:
            self.quorum.halt(reason)  # once; its on_halt calls back here
        if self.log_dir is not None and self.config.metadata_log_dir == self.config.log_dir:
            self.log_dir.fail(f"the metadata log failed: {reason}")  # reports, then stops
        elif self.log_dir is None or self.log_dir.offline is None:
            # Its own dir, or a controller only: nothing of a broker's to report. The
            # controller fences this broker once its connections close.
            self.fail(f"the metadata log failed: {reason}")

    def _log_dir_failed(self, reason: str) -> None:
        """The log dir failed (every partition in it is offline already): fail what
        waits on its partitions, tell the controller, then stop (no healthy dir is left)."""
        assert self.log_dir is not None
        for key in list(self.state.partitions):
            if self.replication is not None:
                self.replication.fail_waiters(key, ErrorCode.KAFKA_STORAGE_ERROR)
            self._wake_readers(key)
        if self.quorum is not None and self.config.metadata_log_dir == self.config.log_dir:
            self.quorum.halt(f"its log dir failed: {reason}")
        self.supervisor.start("log-dir-failure", self._report_log_dir_failure(reason), may_end=True)

    async def _report_log_dir_failure(self, reason: str) -> None:
        """Tell the active controller (BrokerHeartbeat's OfflineLogDirs, KIP-858): it
        takes this broker out of every ISR and leadership before it answers, so
        leadership moves now rather than when the session times out. Then stop: this
        broker has no healthy log dir left."""
        assert self.log_dir is not None
        if self.lifecycle is not None:
            told = self.lifecycle.report_offline_log_dirs([self.log_dir.directory_id])
            try:
                async with asyncio.timeout(LOG_DIR_FAILURE_REPORT_TIMEOUT_S):
                    await told.wait()
                log.warning(
                    "log dir %s failed: the controller has moved this broker's leaderships",
                    self.log_dir.path,
                )
            except TimeoutError:
                log.error(
                    "log dir %s failed and no controller answered within %.0f s; stopping "
                    "anyway (the controller fences this broker when its connection closes)",
                    self.log_dir.path,
                    LOG_DIR_FAILURE_REPORT_TIMEOUT_S,
                )
        self.fail(f"log dir {self.log_dir.path} failed ({reason}); no healthy log dir is left")

    def _describe_quorum(self, header: Any, body: Any) -> Outcome:
        assert self.quorum is not None
        return Reply(self.quorum.describe())

    # --- Start and stop -------------------------------------------------------------

    async def start(self) -> None:
        cfg = self.config
        now = now_ms()
        # One process per dir; holding the locks also proves every earlier process on
        # these dirs is gone (see _previous_broker_epoch).
        for directory in dict.fromkeys(
            [cfg.metadata_log_dir, *([cfg.log_dir] if cfg.is_broker else [])]
        ):
            lock = DirLock(directory)
            lock.acquire()
            self._locks.append(lock)
        # The metadata first: each topic's log settings come from its configs there.
        metadata_dir = metadata_log_directory(cfg.metadata_log_dir)
        self.raft_log = DiskRaftLog.open(
            self.fs,
            metadata_dir,
            now,
            recovery_point=self._metadata_recovery_point(),
            clock=now_ms,
        )
        snapshot = self.raft_log.latest_snapshot()
        if snapshot is not None:
            self._apply_snapshot(snapshot)
        caught_up_at = self.raft_log.end_offset()
        self.quorum = QuorumDriver(
            cfg.quorum,
            self.raft_log,
            QuorumStateFile(self.fs, metadata_dir),
            self._apply_committed,
            self._apply_snapshot,
            self.supervisor,
        )
        # Until a log dir adopts it (when it lives in the broker's log dir), an I/O error
        # of the metadata log is the metadata log's failure alone.
        self.raft_log.partition.on_io_error = lambda _, reason: self._metadata_log_failed(reason)
        self.quorum.on_halt = self._metadata_log_failed
        self.quorum.start()
        self.supervisor.start("quorum-watch", self._quorum_watch())
        self.supervisor.start("metadata-snapshotter", self._snapshotter())
        if cfg.is_controller:
            self.controller = ControllerService(
                self.quorum,
                lambda: self.state.image,
                cfg.settings.cluster_id,
                cfg.broker_session_timeout_ms,
                self._run_forwarded,
                connection_loss_ms=cfg.broker_session_connection_loss_ms,
            )
            host = cfg.controller_listen_host or "0.0.0.0"
            self._controller_server = await asyncio.start_server(
                functools.partial(
                    self._serve, self.controller_router, self._guard(cfg.quorum.controller_listener)
                ),
                host,
                cfg.controller_listen_port,
            )
            self.controller_port = self._controller_server.sockets[0].getsockname()[1]
            local = "127.0.0.1" if host in ("0.0.0.0", "") else host
            self.quorum.local_address = (local, self.controller_port)
            self.supervisor.start("controller-ticker", self._controller_ticker())
            log.info(
                "node %d serves the controller listener on %s:%d",
                cfg.settings.node_id,
                host,
                self.controller_port,
            )
        log.info("node %d: catching up with the metadata log", cfg.settings.node_id)
        await self.quorum.wait_caught_up(caught_up_at)
        log.info(
            "node %d: metadata caught up at offset %d",
            cfg.settings.node_id,
            self.quorum.raft.high_watermark,
        )
        if cfg.is_broker:
            await self._start_broker(now)
        log.info(
            "node %d started (cluster %s, %s)",
            cfg.settings.node_id,
            cfg.settings.cluster_id,
            ",".join(
                r for r, on in (("broker", cfg.is_broker), ("controller", cfg.is_controller)) if on
            ),
        )

    def _take_clean_shutdown_epoch(self) -> int:
        """The broker epoch a clean stop left in the log dir (Kafka's clean shutdown
        file), removed now so that a crash later does not claim a clean stop."""
        path = join(self.config.log_dir, CLEAN_SHUTDOWN_FILE)
        if not self.fs.exists(path):
            return -1
        try:
            epoch = int(json.loads(self.fs.read_file(path))["brokerEpoch"])
        except (ValueError, KeyError, TypeError):
            epoch = -1
        self.fs.remove(path)
        self.fs.fsync_dir(self.config.log_dir)
        return epoch

    def _previous_broker_epoch(self) -> int:
        """The broker epoch of this broker's previous process, which the controller then
        lets this one replace at once (BrokerRegistration's previous_broker_epoch).

        After a clean stop it is in the clean shutdown file. After a crash it is the
        registration the metadata names for this id, if that registration claimed this
        very log dir (directory ids are unique): this process holds the dir's lock, so
        that process is gone, whatever its session on the controller still says.
        (Another process under the same id on another dir is not claimed: its session
        keeps DUPLICATE_BROKER_REGISTRATION protecting it.)
        """
        clean = self._take_clean_shutdown_epoch()
        if clean >= 0:
            return clean
        assert self.log_dir is not None
        broker = self.state.image.brokers.get(self.config.settings.node_id)
        if broker is not None and self.log_dir.directory_id in broker.log_dirs:
            return broker.epoch
        return -1

    def _write_clean_shutdown_epoch(self) -> None:
        if self.lifecycle is None or self.lifecycle.broker_epoch < 0:
            return
        document = {"version": 0, "brokerEpoch": self.lifecycle.broker_epoch}
        write_file_atomically(
            self.fs,
            join(self.config.log_dir, CLEAN_SHUTDOWN_FILE),
            json.dumps(document).encode(),
        )

    def _controller_address(self) -> tuple[str, int] | None:
        if self.quorum is None or self.quorum.raft.leader is None:
            return None
        return self.quorum.address_of(self.quorum.raft.leader)

    def _wake_readers(self, key: tuple[str, int]) -> None:
        """New records or a new high watermark: long-polling fetches of ``key`` retry."""
        for future in self._data_waiters.pop(key, set()):
            if not future.done():
                future.set_result(None)

    def _on_flushed(self, partition: LocalPartition) -> None:
        """A flush covered ``partition``: its high watermark may move; readers retry."""
        if self.replication is not None:
            self.replication.on_flushed(partition)
        self._wake_readers(partition.key)

    def _records_appended(self, key: tuple[str, int]) -> None:
        """A leader appended to ``key``: flush it soon, and wake its long polls.

        Every append leads to a group-commit flush, whatever its ``acks``: with
        flush-before-ack the high watermark passes only fsynced records, so an acks=0
        or acks=1 append that nobody waits on would otherwise stay invisible to consumers
        until some later acks=all produce forced a flush.
        """
        self.group_commit.request_flush()
        self._wake_readers(key)

    def _lifecycle_task_cancel(self) -> None:
        if self._lifecycle_task is not None:
            self._lifecycle_task.cancel()

    async def _start_broker(self, now: int) -> None:
        cfg = self.config
        assert self.raft_log is not None and self.quorum is not None
        files_limit = raise_open_files_limit()
        clean = self.fs.exists(join(cfg.log_dir, CLEAN_SHUTDOWN_FILE))
        opening = now_ms()
        self.log_dir = LogDir.open(
            self.fs,
            cfg.log_dir,
            cluster_id=cfg.settings.cluster_id,
            node_id=cfg.settings.node_id,
            config_for=self._log_config_for,
            now_ms=now,
            skip=(f"{METADATA_TOPIC}-0",),
            # Kafka's clean shutdown file, removed below once every log is open.
            clean_shutdown=clean,
        )
        self.log_dir.on_failure = self._log_dir_failed
        logs = self.log_dir.logs.values()
        log.info(
            "log dir %s opened after a %s in %d ms: %d partitions, %d segments, %d bytes "
            "validated, %d bytes left to the scrub",
            cfg.log_dir,
            "clean stop" if clean else "crash",
            now_ms() - opening,
            len(self.log_dir.logs),
            sum(len(p.segments) for p in logs),
            sum(p.validated_bytes_at_open for p in logs),
            self.log_dir.scrub_pending_bytes(),
        )
        previous_broker_epoch = self._previous_broker_epoch()
        log_partition_capacity(files_limit, self.log_dir.cache.capacity, len(self.log_dir.logs))
        if cfg.metadata_log_dir == cfg.log_dir:
            # Checkpointed with the partitions (its recovery point matters at start), and
            # it fails with them: one disk.
            self.log_dir.adopt((METADATA_TOPIC, 0), self.raft_log.partition)
        self._checkpointed_hw = dict(self.log_dir.high_watermarks())
        self.replication = ReplicationService(
            self.state,
            cfg.server,
            NodeStorage(self.group_commit.await_flush, self._wake_readers),
            NodeControllerChannel(
                lambda: self.lifecycle.broker_epoch if self.lifecycle is not None else -1,
                self._controller_address,
                lambda report: self.lifecycle.report_loss(report) if self.lifecycle else None,
            ),
            self.supervisor,
        )
        self.state.records_appended = self._records_appended
        self._sync_partitions()
        self._load_offsets_partitions()
        self._server = await asyncio.start_server(
            functools.partial(
                self._serve, self.router, self._guard(broker_listener_name(cfg.server))
            ),
            cfg.listen_host,
            cfg.listen_port,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        if cfg.settings.port == 0:
            # Listening on an ephemeral port: advertise the one we got.
            self.state.settings = dataclasses.replace(cfg.settings, port=self.port)
        settings = self.state.settings
        self.lifecycle = BrokerLifecycle(
            broker_id=settings.node_id,
            cluster_id=settings.cluster_id,
            listeners=[("PLAINTEXT", settings.host, settings.port)],
            rack=settings.rack,
            log_dirs=[self.log_dir.directory_id],
            quorum=self.quorum,
            metadata_offset=lambda: self.state.image.offset,
            heartbeat_interval_ms=cfg.broker_heartbeat_interval_ms,
            request_timeout_ms=cfg.quorum.request_timeout_ms,
            previous_broker_epoch=previous_broker_epoch,
        )
        self._lifecycle_task = self.supervisor.start("broker-lifecycle", self.lifecycle.run())
        self.supervisor.start("isr-ticker", self.replication.isr_ticker())
        self.supervisor.start("group-commit", self.group_commit.run())
        self.supervisor.start("housekeeping", self._housekeeping())
        self.supervisor.start("group-ticker", self._group_ticker())
        log_dir = self.log_dir
        scrubber = Scrubber(
            lambda: log_dir.logs.values(), self.group_commit.io_lock, cfg.scrub_bytes_per_second
        )
        self.supervisor.start("log-scrubber", scrubber.run(), may_end=True)
        # Clients only see a broker the controller has unfenced (registered, caught up).
        await self.lifecycle.unfenced.wait()
        # The image may have caught up to the registration before its answer came.
        self._sync_partitions()
        self._load_offsets_partitions()
        log.info("node %d serving clients on %s:%d", settings.node_id, cfg.listen_host, self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        halted = self.quorum is not None and self.quorum.halted is not None
        if self.lifecycle is not None:
            self._lifecycle_task_cancel()
            if not halted:
                # Controlled shutdown: leadership moves to other in-sync replicas first,
                # while the controller listener (perhaps the active controller here) still
                # serves. (A halted replica knows no controller: its connections closing
                # is what tells the controller.)
                await self.lifecycle.controlled_shutdown(CONTROLLED_SHUTDOWN_TIMEOUT_S)
        if self._controller_server is not None:
            self._controller_server.close()
        if self.quorum is not None:
            # Resign first, while the connections still work: the others elect at once.
            await self.quorum.stop()
        connections = list(self._connections)  # they leave the set as they end
        for task in connections:
            task.cancel()
        for task in connections:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.supervisor.stop()
        if self.lifecycle is not None:
            await self.lifecycle.close()
        if self.replication is not None:
            await self.replication.close()
        await self._forward_peers.close()
        self.record_check.stop()
        self.group_commit.flush_all()
        self._snapshot_producers()
        if self.log_dir is not None:
            try:
                self.log_dir.checkpoint()
                self._checkpoint_high_watermarks()
            except LogOfflineError as e:
                log.error("%s", e)
            self.log_dir.close()
            if self.log_dir.offline is None and self.stop_reason is None:
                # Only a clean stop says so: a node that stopped itself did not.
                self._write_clean_shutdown_epoch()
        if self.raft_log is not None:
            self.raft_log.close()
        for lock in self._locks:
            lock.release()
        log.info("node %d stopped", self.config.settings.node_id)

    # --- Metadata -------------------------------------------------------------------

    def _log_config_for(self, topic: str) -> LogConfig:
        """The topic's effective log settings: topic > broker > cluster default > file."""
        try:
            return effective_log_config(
                self.config.server, self.state.image.configs, topic, self.config.settings.node_id
            )
        except ConfigError as e:
            log.error("topic %s: %s; using the static configuration", topic, e)
            return self.config.log_config

    def _max_message_bytes_for(self, topic: str) -> int:
        try:
            value = effective_topic_value(
                self.config.server,
                self.state.image.configs,
                topic,
                self.config.settings.node_id,
                "max.message.bytes",
            )
        except ConfigError as e:
            log.error("topic %s: %s; using message.max.bytes", topic, e)
            value = None
        return value if isinstance(value, int) else self.config.settings.message_max_bytes

    def _record_policy_for(self, topic: str) -> RecordPolicy:
        try:
            return effective_record_policy(
                self.config.server, self.state.image.configs, topic, self.config.settings.node_id
            )
        except ConfigError as e:
            log.error("topic %s: %s; checking its records with the defaults", topic, e)
            return RecordPolicy()

    def _apply_committed(self, entries: list[Entry]) -> None:
        """Replay committed metadata into the image; host what it now assigns here.

        A record the image refuses (a broken invariant) means the log or this node is
        wrong: the node must not go on serving a half-applied image, so it stops, its
        replica of the metadata log halted first (no more votes or acknowledgements)."""
        try:
            self._replay_committed(entries)
        except Exception as e:
            self._metadata_broken(f"applying committed metadata failed: {e!r}")
            raise

    def _metadata_broken(self, reason: str) -> None:
        log.critical("%s", reason, exc_info=True)
        if self.quorum is not None:
            self.quorum.halt(reason)
        self.fail(reason)

    def _replay_committed(self, entries: list[Entry]) -> None:
        changed = False
        for entry in entries:
            if entry.control is not None:
                continue  # leader changes and voter sets are the quorum's, not the image's
            for i, value in enumerate(entry.records):
                self._snapshot_bytes += len(value)
                body, _ = decode_metadata_record(value)
                self.state.image.replay(body, entry.offset + i)
                changed = changed or not isinstance(body, NoOpRecord)
        if changed:
            self._image_generation += 1
        if changed and self.log_dir is not None:
            self._sync_partitions()
            self._load_offsets_partitions()

    def _apply_snapshot(self, snapshot_id: SnapshotId) -> None:
        """Start the image over from a snapshot (at start, or installed from the leader)."""
        try:
            self._load_snapshot(snapshot_id)
        except Exception as e:
            self._metadata_broken(f"applying metadata snapshot {snapshot_id} failed: {e!r}")
            raise

    def _load_snapshot(self, snapshot_id: SnapshotId) -> None:
        assert self.raft_log is not None
        data = self.raft_log.read_snapshot(snapshot_id)
        if data is None:
            raise LogOfflineError(
                metadata_log_directory(self.config.metadata_log_dir),
                f"snapshot {snapshot_id} is listed but cannot be read",
            )
        contents = decode_snapshot(data)
        self.state.image = decode_image_records(contents.records, snapshot_id.end_offset - 1)
        self._image_generation += 1
        if self.log_dir is not None:
            self._sync_partitions()
            self._load_offsets_partitions()

    def _metadata_recovery_point(self) -> int:
        path = join(self.config.metadata_log_dir, RECOVERY_POINT_CHECKPOINT)
        try:
            return read_offset_checkpoint(self.fs, path).get((METADATA_TOPIC, 0), 0)
        except CorruptLogError as e:
            log.warning("ignoring damaged checkpoint, recovering from the start: %s", e)
            return 0

    async def _commit_records(self, records: list[Any]) -> None:
        """Commit records to the metadata log (only the active controller can)."""
        if self.controller is None:
            # A broker-only node forwards metadata writes to the active controller
            # (the Forward effect); one that reaches this point is answered NOT_CONTROLLER,
            # which every client retries.
            raise NotController(
                f"node {self.config.settings.node_id} is not a controller: a metadata write "
                "must be forwarded to the active controller"
            )
        await self.controller.commit(records)

    async def _quorum_watch(self) -> None:
        """Log the leader as it changes (the quorum driver does the work)."""
        assert self.quorum is not None
        leader: int | None = None
        while True:
            event = self.quorum.leader_changed
            await event.wait()
            node = self.quorum.raft
            if node.leader != leader:
                leader = node.leader
                log.info("metadata quorum leader is now %s (epoch %d)", leader, node.epoch)

    async def _snapshotter(self) -> None:
        """Write a metadata snapshot after enough committed bytes
        (``metadata.log.max.record.bytes.between.snapshots``) or time
        (``metadata.log.max.snapshot.interval.ms``); the log before it is dropped, and a
        replica that needs it fetches the snapshot instead."""
        server = self.config.server
        while True:
            await asyncio.sleep(1)
            interval = server.metadata_log_max_snapshot_interval_ms
            due = self._snapshot_bytes >= server.metadata_log_max_record_bytes_between_snapshots
            due = due or (
                interval > 0
                and self._snapshot_bytes > 0
                and monotonic_ms() - self._snapshot_taken_ms >= interval
            )
            if due:
                self._take_snapshot()

    def _take_snapshot(self) -> None:
        assert self.quorum is not None and self.raft_log is not None
        node = self.quorum.raft
        end = node.high_watermark
        latest = self.raft_log.latest_snapshot()
        if end <= self.raft_log.start_offset() or (latest and latest.end_offset >= end):
            return
        # The image holds exactly the records below the high watermark: commits are
        # applied as the high watermark moves, in the same step.
        records = encode_image_records(self.state.image)
        snapshot = node.create_snapshot(end, records, now_ms())
        self._snapshot_bytes = 0
        self._snapshot_taken_ms = monotonic_ms()
        log.info("metadata snapshot %s written (%d records)", snapshot, len(records))

    async def _controller_ticker(self) -> None:
        """On the active controller: fence brokers whose session expired; move leadership
        back to preferred replicas every ``leader.imbalance.check.interval.seconds``."""
        assert self.controller is not None
        server = self.config.server
        interval_ms = server.leader_imbalance_check_interval_seconds * 1000
        last_rebalance = monotonic_ms()
        while True:
            await asyncio.sleep(0.1)
            await self.controller.adopt_static_min_isr(server.min_insync_replicas)
            await self.controller.expire_sessions()
            if self.quorum is not None and self.quorum.is_leader:
                await self.controller.unclean_elections(self._unclean_election_enabled)
                self.controller.check_offline()
                await self.controller.complete_reassignments(self._min_insync_replicas)
            if (
                server.auto_leader_rebalance_enable
                and monotonic_ms() - last_rebalance >= interval_ms
            ):
                last_rebalance = monotonic_ms()
                await self.controller.rebalance_leaders(
                    server.leader_imbalance_per_broker_percentage
                )

    def _min_insync_replicas(self, topic: str, replication_factor: int) -> int:
        """The topic's ``min.insync.replicas`` from the metadata log alone: the value the
        leaders use too (:mod:`odradek.controller.elr`)."""
        return min_insync_replicas(self.state.image.configs, topic, replication_factor)

    def _unclean_election_enabled(self, topic: str) -> bool:
        try:
            value = effective_topic_value(
                self.config.server,
                self.state.image.configs,
                topic,
                self.config.settings.node_id,
                "unclean.leader.election.enable",
            )
        except ConfigError:
            return False
        return value is True

    def _caught_up_to_registration(self) -> bool:
        """Whether the image holds this incarnation's registration (see
        :func:`~odradek.broker.partition.may_take_roles`)."""
        lifecycle = self.lifecycle
        return lifecycle is not None and may_take_roles(
            self.state.image.offset, lifecycle.broker_epoch
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
        assert self.log_dir is not None
        if not self._caught_up_to_registration() or self.log_dir.offline is not None:
            return  # a failed dir hosts nothing more; the node is stopping
        try:
            self._host_partitions()
        except LogOfflineError as e:
            log.error("%s", e)  # the dir failed while partitions were being hosted

    def _host_partitions(self) -> None:
        assert self.log_dir is not None
        me = self.config.settings.node_id
        wanted: dict[tuple[str, int], Any] = {}
        for topic in self.state.image.topics_by_name.values():
            for index, p in topic.partitions.items():
                if me in p.replicas:
                    wanted[(topic.name, index)] = (topic, p)
        for key, hosted in list(self.state.partitions.items()):
            # A topic deleted and created again under the same name is another partition.
            if key not in wanted or hosted.topic_id != wanted[key][0].topic_id:
                if self.replication is not None:
                    self.replication.fail_waiters(key, ErrorCode.NOT_LEADER_OR_FOLLOWER)
                del self.state.partitions[key]
                if key in self.log_dir.logs:
                    self._logs_to_delete[key] = self.log_dir.logs[key]
        deadline = monotonic_ms() + HOSTING_SLICE_MS
        if not self.group_commit.io_lock.locked():
            # Not while a flush runs on a worker thread: it may hold the logs' handles.
            self._delete_logs(deadline)
        self._logs_to_create = {}
        configs: dict[str, tuple[LogConfig, int, RecordPolicy]] = {}
        for key, (topic, p) in wanted.items():
            if not self._host(key, topic, p, configs, create=monotonic_ms() < deadline):
                self._logs_to_create[key] = None
        if self._hosting_backlog() and self._hosting_task is None:
            self._hosting_task = self.supervisor.start(
                "host-partitions", self._host_the_rest(), may_end=True
            )

    def _host(
        self,
        key: tuple[str, int],
        topic: Any,
        p: Any,
        configs: dict[str, tuple[LogConfig, int, RecordPolicy]],
        *,
        create: bool,
    ) -> bool:
        """Host ``key`` (its image ``topic`` and partition ``p``) with its current role;
        False when that needs a log that does not exist yet and ``create`` is False, or
        the old log of a topic of the same name is still to be deleted."""
        assert self.log_dir is not None
        partition_log = self.log_dir.logs.get(key)
        if partition_log is not None and partition_log.topic_id not in (None, topic.topic_id):
            # A topic deleted and created again under the same name: the old log goes
            # first (ahead of other deletions, which may be many), then a new one is made.
            self._logs_to_delete.pop(key, None)
            self._logs_to_replace[key] = partition_log
            return False
        if key[0] not in configs:
            # One resolution per topic: a topic's partitions share their configs.
            configs[key[0]] = (
                self._log_config_for(key[0]),
                self._max_message_bytes_for(key[0]),
                self._record_policy_for(key[0]),
            )
        log_config, max_message_bytes, record_policy = configs[key[0]]
        if partition_log is None:
            if not create:
                return False
            partition_log = self.log_dir.create_log(
                key[0], key[1], log_config, now_ms(), topic.topic_id
            )
        # Topic config changes (AlterConfigs) apply to the running log at once.
        partition_log.config = log_config
        current = self.state.partitions.get(key)
        if current is not None:
            current.max_message_bytes = max_message_bytes
            current.record_policy = record_policy
        rebuild = current is None or current.leader_epoch != p.leader_epoch
        if not rebuild and current is not None and self.replication is not None:
            rebuild = self.replication.assign(current, p)
        if not rebuild:
            return True
        # A new leader epoch: this node's role may have changed with it.
        if current is not None and self.replication is not None:
            self.replication.fail_waiters(key, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        high_watermark = (
            current.high_watermark if current is not None else self._checkpointed_hw.get(key, 0)
        )
        leads = p.leader == self.config.settings.node_id
        # Leaders and followers alike keep their producer state current.
        keep_producers = current is not None
        partition = LocalPartition(
            topic=key[0],
            index=key[1],
            topic_id=topic.topic_id,
            log=partition_log,
            leader_epoch=p.leader_epoch,
            flush_before_ack=self.config.settings.flush_before_ack,
            producers=(
                current.producers
                if current is not None and keep_producers
                else self._load_producers(partition_log)
            ),
            max_message_bytes=max_message_bytes,
            record_policy=record_policy,
            is_leader=leads,
        )
        self.state.partitions[key] = partition
        if self.replication is not None:
            self.replication.new_role(partition, p, high_watermark)
        return True

    def _delete_logs(self, deadline: int) -> None:
        """Delete the local copies of partitions this node no longer hosts (a deleted
        topic, or a replica a reassignment moved away), those in the way of a new topic
        of the same name first, until ``deadline`` (monotonic ms). The caller makes sure
        that no flush runs meanwhile: a flush on its worker thread may hold the logs'
        handles."""
        assert self.log_dir is not None
        while (self._logs_to_replace or self._logs_to_delete) and monotonic_ms() < deadline:
            queue = self._logs_to_replace or self._logs_to_delete
            batch: list[tuple[str, int]] = []
            for key, victim in list(itertools.islice(queue.items(), DELETE_BATCH)):
                del queue[key]
                # Hosted again meanwhile (a cancelled move): the copy is kept and reused.
                if self.log_dir.logs.get(key) is victim and key not in self.state.partitions:
                    batch.append(key)
            self.log_dir.delete_logs(batch)

    def _hosting_backlog(self) -> bool:
        return bool(self._logs_to_create or self._logs_to_delete or self._logs_to_replace)

    async def _host_the_rest(self) -> None:
        """Create and delete what :meth:`_sync_partitions` left, a slice at a time."""
        try:
            while self._hosting_backlog():
                await asyncio.sleep(HOSTING_PAUSE_MS / 1000)
                assert self.log_dir is not None
                if self.log_dir.offline is not None:
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
        assert self.log_dir is not None
        if self._logs_to_replace or self._logs_to_delete:
            async with self.group_commit.io_lock:
                self._delete_logs(monotonic_ms() + HOSTING_SLICE_MS)
            await asyncio.sleep(HOSTING_PAUSE_MS / 1000)
        deadline = monotonic_ms() + HOSTING_SLICE_MS
        me = self.config.settings.node_id
        configs: dict[str, tuple[LogConfig, int, RecordPolicy]] = {}
        hosted = False
        for key in list(self._logs_to_create):
            if monotonic_ms() >= deadline:
                break
            del self._logs_to_create[key]
            # The image may have moved on since: only what it still assigns here.
            topic = self.state.image.topics_by_name.get(key[0])
            p = topic.partitions.get(key[1]) if topic is not None else None
            if p is None or me not in p.replicas or key in self.state.partitions:
                continue
            if self._host(key, topic, p, configs, create=True):
                hosted = True
            else:
                self._logs_to_create[key] = None  # after its old log is deleted
        if hosted:
            self._load_offsets_partitions()

    # --- Idempotent producers -------------------------------------------------------

    def _load_producers(self, partition_log: PartitionLog) -> ProducerStateManager:
        """Producer state from the newest snapshot, then the batches after it."""
        return load_producer_state(partition_log, now_ms(), self.config.producer_id_expiration_ms)

    def _snapshot_producers(self) -> None:
        """At a clean stop: each partition's producer state as the snapshot at its log
        end, where the log moved since its latest one, so that the next start replays
        nothing. The log syncs the files when it closes."""
        for partition in self.state.partitions.values():
            partition_log = partition.log
            if partition_log.offline is not None:
                continue
            end = partition_log.log_end_offset
            try:
                snapshots = list_snapshots(self.fs, partition_log.directory)
                if not snapshots or snapshots[-1].offset != end:
                    partition_log.stage_producer_snapshot(end)
            except OSError as e:
                log.error("%s: cannot write producer snapshot: %s", partition_log.directory, e)

    # --- Consumer groups ------------------------------------------------------------

    def _load_offsets_partitions(self) -> None:
        """Become the coordinator of every ``__consumer_offsets`` partition led here,
        rebuilding its groups from the partition's records."""
        for index in sorted(self._loaded_offsets_partitions):
            hosted = self.state.partitions.get((groups.OFFSETS_TOPIC, index))
            if hosted is None or not hosted.is_leader:
                # Another broker leads it now and coordinates its groups.
                self._loaded_offsets_partitions.discard(index)
                self._apply_group_output(self.groups.unload(index, now_ms=steady_ms()))
        for (topic, index), partition in self.state.partitions.items():
            if topic != groups.OFFSETS_TOPIC or index in self._loaded_offsets_partitions:
                continue
            if not partition.is_leader:
                continue  # a follower replicates the partition; its leader coordinates
            records: list[tuple[bytes, bytes | None]] = []
            for batch in _batches(partition.log):
                for record in decode_records(batch):
                    if record.key is not None:
                        records.append((record.key, record.value))
            self._loaded_offsets_partitions.add(index)
            self._apply_group_output(self.groups.load(index, records, now_ms=steady_ms()))

    async def _group_call(self, call: GroupCall, peer: str) -> Any:
        loop = asyncio.get_running_loop()
        token = object()
        future: asyncio.Future[Any] = loop.create_future()
        self._group_waiters[token] = future
        output = self.groups.handle(
            token,
            call.request,
            call.version,
            now_ms=steady_ms(),
            client_id=call.client_id,
            client_host="/" + peer.rsplit(":", 1)[0],
            # The cluster's partitions (the image): the coordinator need not host them.
            partition_exists=self.state.knows_partition,
        )
        self._apply_group_output(output)
        try:
            return await future
        finally:
            self._group_waiters.pop(token, None)

    def _apply_group_output(self, output: Output) -> None:
        for completion in output.completions:
            future = self._group_waiters.pop(completion.token, None)
            if future is not None and not future.done():
                future.set_result(completion.response)
        for write in output.writes:
            self._write_group_records(write)
        self._group_timer_wakeup.set()

    def _write_group_records(self, write: Write) -> None:
        """Append a write to its ``__consumer_offsets`` partition; report it once durable."""
        partition = self.state.led_partition((groups.OFFSETS_TOPIC, write.partition))
        now = now_ms()
        refused = ErrorCode.NOT_LEADER_OR_FOLLOWER if partition is None else ErrorCode.NONE
        if partition is not None and partition.leader_state is not None:
            # Group state is written like an acks=all produce: only with enough replicas.
            refused = partition.leader_state.check_produce(-1)
        if partition is None or refused != ErrorCode.NONE:
            output = self.groups.write_completed(write.write_id, now_ms=steady_ms(), error=refused)
            self._apply_group_output(output)
            return
        batch = bytearray(
            encode_batch(
                [
                    Record(offset_delta=i, timestamp=now, key=key, value=value)
                    for i, (key, value) in enumerate(write.records)
                ]
            )
        )
        try:
            info = partition.log.append_as_leader(memoryview(batch), partition.leader_epoch, now)
        except LogOfflineError:
            self._apply_group_output(
                self.groups.write_completed(
                    write.write_id, now_ms=steady_ms(), error=ErrorCode.KAFKA_STORAGE_ERROR
                )
            )
            return
        if partition.leader_state is not None:
            partition.leader_state.on_append(partition.log.log_end_offset)
            self._wake_readers(partition.key)

        def failed(error: BaseException) -> None:
            # The coordinator must hear of every write, or its group waits forever.
            self._apply_group_output(
                self.groups.write_completed(
                    write.write_id, now_ms=steady_ms(), error=ErrorCode.UNKNOWN_SERVER_ERROR
                )
            )

        self.supervisor.start(
            f"group-write-{write.partition}",
            self._complete_group_write(write, partition, info.last_offset + 1),
            on_failure=failed,
            may_end=True,
        )

    async def _complete_group_write(
        self, write: Write, partition: LocalPartition, end_offset: int
    ) -> None:
        failed = await self.group_commit.await_flush({partition.key: end_offset})
        error: int = ErrorCode.KAFKA_STORAGE_ERROR if failed else ErrorCode.NONE
        if error == ErrorCode.NONE and self.replication is not None:
            # Durable here is not enough: the in-sync replicas must hold it too.
            errors = await self.replication.await_replication(
                {partition.key: end_offset}, self.config.server.offsets_commit_timeout_ms
            )
            error = errors.get(partition.key, ErrorCode.NONE)
        self._apply_group_output(
            self.groups.write_completed(write.write_id, now_ms=steady_ms(), error=error)
        )

    async def _group_ticker(self) -> None:
        """Fire the coordinator's timers: rebalance and session timeouts, retention."""
        while True:
            deadline = self.groups.next_deadline_ms()
            delay = 1.0 if deadline is None else max(deadline - steady_ms(), 0) / 1000
            self._group_timer_wakeup.clear()
            # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a
            # cancellation that races with the wake-up, and the node then never stops.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(delay, 1.0)):
                    await self._group_timer_wakeup.wait()
            self._apply_group_output(self.groups.tick(steady_ms()))
            # tick() may set the wake-up itself; avoid spinning on it.
            self._group_timer_wakeup.clear()

    # --- Requests -------------------------------------------------------------------

    def _guard(self, listener: str) -> ListenerGuard:
        """The connection and request limits of ``listener`` (one set per listener)."""
        guard = self._listener_guards.get(listener)
        if guard is None:
            limits = ListenerLimits.from_server(self.config.server, listener)
            guard = self._listener_guards[listener] = ListenerGuard(limits, self._peer_hosts)
            ensure_open_files(g.limits for g in self._listener_guards.values())
        return guard

    def _peer_hosts(self) -> set[str]:
        """Where the cluster's own nodes connect from: the voters' and the registered
        brokers' hosts (a node's outgoing connections leave from its listener address)."""
        hosts = {self.config.listen_host, self.config.controller_listen_host or ""}
        quorum = self.quorum
        if quorum is not None:
            hosts.update(host for host, _ in quorum.config.bootstrap_servers)
            hosts.update(host for host, _ in (quorum.config.static_voters or {}).values())
            for voter in quorum.raft.voters:
                hosts.update(endpoint.host for endpoint in voter.endpoints)
        for broker in self.state.image.brokers.values():
            hosts.update(endpoint.host for endpoint in broker.endpoints)
        hosts.discard("0.0.0.0")
        hosts.discard("::")
        return hosts

    async def _serve(
        self,
        router: Router,
        guard: ListenerGuard,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        """Admit the connection, read requests, start each at once, send the answers in
        request order.

        Handlers run in arrival order (so appends keep the order of the requests); what
        they wait for (a flush, data, a rebalance) overlaps, so several produce requests
        in flight on one connection share one fsync. A bounded queue of answers in order,
        and the listener's request budget (:mod:`odradek.shell.connection_limits`), stop
        reading when a client has too much outstanding.
        """
        peername = writer.get_extra_info("peername")
        address = str(peername[0]) if peername else "?"
        slot = await guard.admit(address)
        if slot is None:
            # Over a connection limit: closed before anything is read.
            writer.transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = f"{peername[0]}:{peername[1]}" if peername else "?"
        answers: asyncio.Queue[asyncio.Future[list[Records] | None] | None] = asyncio.Queue(
            MAX_IN_FLIGHT_PER_CONNECTION
        )
        budget = guard.budget.connection()
        sender = asyncio.create_task(self._send_in_order(writer, answers, peer))
        stopping = False
        try:
            await self._read_requests(router, guard, budget, reader, writer, answers, peer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            stopping = True  # the node is stopping; the connection closes below
        finally:
            budget.closed()
            try:
                if not stopping:
                    # Send what was already asked for (answers before a bad frame, say).
                    with contextlib.suppress(Exception):
                        async with asyncio.timeout(30):
                            await answers.put(None)
                            await sender
                sender.cancel()
                self._connections.discard(task)
                if not stopping and router is self.controller_router and self.controller:
                    self.controller.connection_closed(peer)
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
            finally:
                # Counted until the socket is closed: it holds a descriptor until then.
                guard.release(slot)

    async def _read_requests(
        self,
        router: Router,
        guard: ListenerGuard,
        budget: ConnectionBudget,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        answers: asyncio.Queue[asyncio.Future[list[Records] | None] | None],
        peer: str,
    ) -> None:
        decoder = FrameDecoder(self.config.max_frame_bytes)
        loop = asyncio.get_running_loop()

        def close_idle() -> None:
            log.info("closing idle connection from %s", peer)
            writer.close()  # the read below sees the end of the stream

        def close_partial() -> None:
            log.warning(
                "closing connection from %s: a request has been arriving for more than "
                "odradek.connections.partial.request.timeout.ms (%d) without completing",
                peer,
                guard.limits.partial_request_timeout_ms,
            )
            writer.transport.abort()  # the read below sees the end of the stream

        idle = IdleWatch(loop, self.config.connections_max_idle_ms / 1000, close_idle)
        partial = PartialFrameWatch(loop, guard.partial_request_timeout_s, close_partial)
        try:
            await self._read_frames(router, budget, reader, answers, peer, decoder, idle, partial)
        finally:
            idle.cancel()
            partial.cancel()

    async def _read_frames(
        self,
        router: Router,
        budget: ConnectionBudget,
        reader: asyncio.StreamReader,
        answers: asyncio.Queue[asyncio.Future[list[Records] | None] | None],
        peer: str,
        decoder: FrameDecoder,
        idle: IdleWatch,
        partial: PartialFrameWatch,
    ) -> None:
        loop = asyncio.get_running_loop()

        async def queue(answer: asyncio.Future[list[Records] | None], size: int) -> None:
            # The request's bytes are counted until its answer is ready; the answer waits
            # its turn in the queue (a full queue stops reading, as a spent budget does).
            if answer.done():
                budget.finished(size)
            else:
                answer.add_done_callback(lambda _: budget.finished(size))
            if answers.full():
                partial.pause()
                await answers.put(answer)
                partial.resume()
                idle.touch()
            else:
                answers.put_nowait(answer)

        while True:
            if not budget.ready():
                # The listener holds all it may of requests: read on once some are
                # answered. Waiting on us is no fault of the client's.
                partial.pause()
                await budget.wait_until_ready()
                partial.resume()
                idle.touch()
            data = await reader.read(budget.read_bytes())
            if not data:
                return
            idle.touch()
            try:
                frames = decoder.feed(data)
            except RemoteProtocolError as e:
                log.warning("closing connection from client %s: %s", peer, e)
                return
            partial.received(bool(frames), decoder.pending_bytes() > 0)
            for payload in frames:
                size = len(payload) + 4
                budget.started(size)
                self._stamp()  # the handler decides on the time it was read
                try:
                    routed = router.handle(payload, peer)
                except BaseException:
                    budget.finished(size)  # the listener's budget outlives this connection
                    raise
                if isinstance(routed, Close):
                    budget.finished(size)
                    log.warning("closing connection: %s", routed.reason)
                    return
                if isinstance(routed, Respond):
                    done: asyncio.Future[list[Records] | None] = loop.create_future()
                    done.set_result(routed.chunks)
                    await queue(done, size)
                    continue
                if isinstance(routed.outcome, AwaitRecordCheck):
                    # Before the next request of this connection is handled, so that its
                    # appends keep the order of the requests.
                    try:
                        checked = await self._check_records(routed.outcome)
                    except BaseException:
                        budget.finished(size)
                        raise
                    routed = dataclasses.replace(routed, outcome=checked)
                if isinstance(routed.outcome, Reply):
                    # Answered at once (a fetch with data, acks=1, metadata): no task, and
                    # the answer is ready for the sender on its next turn.
                    ready: asyncio.Future[list[Records] | None] = loop.create_future()
                    try:
                        ready.set_result(
                            Router.encode(
                                routed.header, routed.outcome.response, routed.response_version
                            )
                        )
                    except Exception as e:  # the sender logs it and closes, as for a task
                        ready.set_exception(e)
                    await queue(ready, size)
                    continue
                # The image this handler decided on: a commit applied before its task
                # first runs must make it decide again, never commit what it decided.
                answer = asyncio.ensure_future(
                    self._answer(routed, payload, self._image_generation)
                )
                self._connections.add(answer)
                answer.add_done_callback(self._connections.discard)
                await queue(answer, size)
            budget.arriving(decoder.pending_frame_bytes())

    async def _answer(
        self, dispatch: Dispatch, payload: bytearray, decided_on: int
    ) -> list[Records] | None:
        try:
            response = await self._carry(dispatch, payload, decided_on)
        except NotController:
            # A metadata write on a node that is not the active controller: forward the
            # whole request there (Envelope, KIP-590) and relay its response.
            return [await self._forward(bytes(payload))]
        if response is None:
            return None
        return Router.encode(dispatch.header, response, dispatch.response_version)

    async def _forward(self, payload: bytes) -> bytes:
        """Send a client's request to the active controller; its encoded response.

        Tries for ``FORWARD_TIMEOUT_S`` in all, across controller failovers: each time
        the leader this node knows changes (or after a short backoff) it asks again.
        Before, it gave up after 20 quick tries, about 2 s, less than a failover can
        take, and the client saw its connection closed.
        """
        assert self.quorum is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FORWARD_TIMEOUT_S
        while (remaining := deadline - loop.time()) > 0:
            changed = self.quorum.leader_changed
            leader = self.quorum.raft.leader
            address = None if leader is None else self.quorum.address_of(leader)
            if address is not None:
                peer = self._forward_peers.get(address)
                try:
                    answer = await peer.request(
                        EnvelopeRequest(
                            request_data=payload,
                            request_principal=b"",
                            client_host_address=b"\x7f\x00\x00\x01",
                        ),
                        0,
                        remaining,
                    )
                except (PeerUnavailable, TimeoutError):
                    answer = None
                if answer is not None and answer.error_code == ErrorCode.NONE:
                    return bytes(answer.response_data or b"")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(FORWARD_BACKOFF_S):
                    await changed.wait()
        raise NotController("no active controller answered the forwarded request")

    async def _run_forwarded(self, payload: bytes) -> bytes:
        """On the active controller: run a forwarded request through the broker handlers."""
        self._stamp()
        routed = self.router.handle(bytearray(payload), "forwarded")
        decided_on = self._image_generation
        if isinstance(routed, Close):
            raise NotController(f"forwarded request refused: {routed.reason}")
        if isinstance(routed, Respond):
            return _joined(routed.chunks)
        response = await self._carry(routed, bytearray(payload), decided_on)
        if response is None:
            return b""
        return _joined(Router.encode(routed.header, response, routed.response_version))

    async def _send_in_order(
        self,
        writer: asyncio.StreamWriter,
        answers: asyncio.Queue[asyncio.Future[list[Records] | None] | None],
        peer: str,
    ) -> None:
        try:
            while True:
                item = await answers.get()
                if item is None:
                    return
                chunks = await item
                if chunks is not None:
                    await self._send(writer, chunks)
        except (ConnectionError, asyncio.CancelledError):
            pass
        except NotController as e:
            # No error code fits every admin API: close, and the client retries.
            log.warning("closing connection from %s: %s", peer, e)
            writer.close()
        except CloseConnection as e:
            log.info("closing connection from %s: %s", peer, e)
            writer.close()
        except Exception:
            # A bug in a handler or in encoding: say so loudly, drop this connection,
            # keep serving the others.
            log.exception("closing connection from %s after an internal error", peer)
            writer.close()

    async def _carry(self, dispatch: Dispatch, payload: bytearray, decided_on: int) -> Any:
        """Carry a handler's outcome through its effects. ``decided_on`` is the image
        generation the handler decided on (read when it ran, not when this task first
        runs: a commit applied in between would otherwise pass for seen, and two
        requests decided on one image would both commit, a topic created twice or one
        block of producer ids handed out twice, which breaks the image on every node).
        Records built on an older image are decided again rather than committed."""
        outcome: Outcome = dispatch.outcome
        seen = decided_on
        while True:
            if isinstance(outcome, Reply):
                return outcome.response
            if isinstance(outcome, NoReply):
                if outcome.close_reason is not None:
                    raise CloseConnection(outcome.close_reason)
                return None
            self._stamp()
            if isinstance(outcome, CommitRecords):
                if self.controller is None:
                    await self._commit_records(outcome.records)  # raises NotController
                    return None
                async with self.controller.write_lock:
                    stale = self._image_generation != seen
                    if not stale:
                        await self._commit_records(outcome.records)
                        seen = self._image_generation
                if stale:
                    self._stamp()
                    again = self.router.handle(payload, dispatch.peer)
                    if not isinstance(again, Dispatch):
                        return None
                    seen = self._image_generation
                    outcome = again.outcome
                    continue
                outcome = outcome.then()
            elif isinstance(outcome, ControllerCall):
                assert self.controller is not None
                return await self.controller.handle(outcome, dispatch.peer)
            elif isinstance(outcome, AwaitFlush):
                failed = await self.group_commit.await_flush(outcome.offsets)
                outcome = outcome.then(failed)
            elif isinstance(outcome, AwaitReplication):
                assert self.replication is not None
                errors = await self.replication.await_replication(
                    outcome.offsets, outcome.timeout_ms
                )
                self._stamp()
                outcome = outcome.then(errors)
            elif isinstance(outcome, AwaitData):
                timed_out = await self._await_data(outcome.partitions, outcome.deadline_ms)
                self._stamp()
                outcome = outcome.then(timed_out)
            elif isinstance(outcome, GroupCall):
                return await self._group_call(outcome, dispatch.peer)
            elif isinstance(outcome, AwaitRecordCheck):
                outcome = await self._check_records(outcome)

    async def _check_records(self, effect: AwaitRecordCheck) -> Outcome:
        """A produce's record checks on the record-check thread; then its next step."""
        verdicts = await self.record_check.run(effect.check)
        self._stamp()
        return effect.then(verdicts)

    def _stamp(self) -> None:
        """Set the clocks the handlers read: before each request, and again before a
        continuation (a flush or a wait may have taken a while). Before, only
        continuations set it, and a request answered at once read the time of the last
        continuation on any connection, however long ago that was."""
        self.state.now_ms = now_ms()
        self.state.monotonic_ms = monotonic_ms()

    async def _send(self, writer: asyncio.StreamWriter, chunks: list[Records]) -> None:
        await send_frame(writer, chunks)

    # --- Long polls ------------------------------------------------------------------

    async def _await_data(self, partitions: frozenset[tuple[str, int]], deadline_ms: int) -> bool:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        for key in partitions:
            self._data_waiters.setdefault(key, set()).add(future)
        if not self.config.settings.flush_before_ack:
            self.group_commit.request_flush()
        try:
            async with asyncio.timeout(max(deadline_ms - monotonic_ms(), 0) / 1000):
                await future
            return False
        except TimeoutError:
            return True
        finally:
            for key in partitions:
                self._data_waiters.get(key, set()).discard(future)

    async def _housekeeping(self) -> None:
        """Retention, flush policy, checkpoints and producer expiry, on their intervals
        (counted on the monotonic clock; retention and expiry compare wall-clock
        timestamps, so they are given the wall clock)."""
        cfg = self.config
        last_retention = last_checkpoint = last_high_watermarks = last_expiry = monotonic_ms()
        while True:
            await asyncio.sleep(0.5)
            now = now_ms()
            tick = monotonic_ms()
            if any(p.log.needs_flush(now) for p in self.state.partitions.values()):
                self.group_commit.request_flush()
            if tick - last_retention >= cfg.retention_check_interval_ms:
                last_retention = tick
                async with self.group_commit.io_lock:
                    for partition in self.state.partitions.values():
                        if partition.log.offline is None:
                            with contextlib.suppress(LogOfflineError):
                                partition.log.delete_old_segments(now, partition.high_watermark)
            if tick - last_expiry >= cfg.producer_id_expiration_check_interval_ms:
                last_expiry = tick
                self._expire_producers(now)
            if self.log_dir is None or self.log_dir.offline is not None:
                continue  # nothing more is written to a failed dir
            # A failed write takes the dir offline: its failure handling takes over.
            with contextlib.suppress(LogOfflineError):
                if tick - last_checkpoint >= cfg.checkpoint_interval_ms:
                    last_checkpoint = tick
                    self.log_dir.checkpoint()
                if tick - last_high_watermarks >= cfg.high_watermark_checkpoint_interval_ms:
                    last_high_watermarks = tick
                    self._checkpoint_high_watermarks()

    def _checkpoint_high_watermarks(self) -> None:
        """``replication-offset-checkpoint``: where each hosted partition's high watermark
        stood, so that a restarted replica starts from it rather than from zero
        (``replica.high.watermark.checkpoint.interval.ms``, and at a clean stop)."""
        assert self.log_dir is not None
        self.log_dir.checkpoint_high_watermarks(
            {k: p.high_watermark for k, p in self.state.partitions.items()}
        )

    def _expire_producers(self, now: int) -> None:
        """Forget idempotent producers idle for ``producer.id.expiration.ms``."""
        forgotten = expire_producers(
            self.state.partitions.values(), now, self.config.producer_id_expiration_ms
        )
        for (topic, index), ids in sorted(forgotten.items()):
            log.info(
                "%s-%d: forgot %d idle producers (producer.id.expiration.ms)",
                topic,
                index,
                len(ids),
            )


async def run_node(config: NodeConfig, ready: asyncio.Event | None = None) -> int:
    """Run until SIGINT or SIGTERM, then stop cleanly; the exit status (0, or 1 when a
    task failed and nothing could handle it: the node stopped itself)."""
    # Outgoing node-to-node connections leave from this node's own listener address.
    own = config.listen_host if config.is_broker else config.controller_listen_host
    bind_outgoing_connections(own or "")
    node = Node(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    # SIGUSR1 logs every task's stack: what a stuck node is waiting for.
    loop.add_signal_handler(signal.SIGUSR1, _log_tasks)
    starting = asyncio.ensure_future(node.start())
    ending = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(node.failed.wait())]
    try:
        # A task can fail while the node starts (it may wait long to be unfenced).
        done, _ = await asyncio.wait([starting, *ending], return_when=asyncio.FIRST_COMPLETED)
        if starting in done:
            starting.result()  # a failed start raises here, as before
            print(f"bootstrap.servers={node.state.settings.host}:{node.port}", flush=True)
            if ready is not None:
                ready.set()
            await asyncio.wait(ending, return_when=asyncio.FIRST_COMPLETED)
        else:
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await starting
    finally:
        for waiter in ending:
            waiter.cancel()
    await node.stop()
    if node.stop_reason is not None:
        log.critical("node %d stopped: %s", config.settings.node_id, node.stop_reason)
        return 1
    return 0


class CloseConnection(Exception):
    """An answer that is no answer: close the connection after the answers before it
    (an acks=0 produce that failed, see :class:`NoReply`)."""


class IdleWatch:
    """Calls ``on_idle`` once nothing was read for ``idle_s`` (``connections.max.idle.ms``).

    One timer per connection, re-armed only when it fires early: a timeout around each
    read would create and cancel a timer for every request.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, idle_s: float, on_idle: Callable[[], None]
    ) -> None:
        self._loop = loop
        self._idle_s = idle_s
        self._on_idle = on_idle
        self._last = loop.time()
        self._handle: asyncio.TimerHandle | None = loop.call_at(self._last + idle_s, self._check)

    def touch(self) -> None:
        self._last = self._loop.time()

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _check(self) -> None:
        due = self._last + self._idle_s
        if self._loop.time() >= due:
            self._handle = None
            self._on_idle()
        else:
            self._handle = self._loop.call_at(due, self._check)


async def send_frame(writer: asyncio.StreamWriter, chunks: list[Records]) -> None:
    """Send one response: its size, then its chunks in order; the records of a segment
    file go with sendfile (zero copy), the rest as bytes."""
    size = sum(len(c) for c in chunks)
    pending: list[bytes | bytearray | memoryview] = [size_prefix(size)]
    loop = asyncio.get_running_loop()
    for chunk in chunks:
        if isinstance(chunk, bytes | bytearray | memoryview):
            pending.append(chunk)
            continue
        fd = chunk.handle.fileno() if isinstance(chunk, FileRange) else None
        if fd is None or not isinstance(chunk, FileRange):
            pending.append(chunk.read())
            continue
        writer.writelines(pending)
        pending = []
        await writer.drain()
        position, length = chunk.position, chunk.length
        transport = writer.transport
        if transport.get_write_buffer_size() == 0 and not transport.is_closing():
            # The socket usually takes a fetch's records at once: one sendfile call
            # instead of asyncio's (fstat, lseek, writer registration each time).
            sent = _sendfile_now(transport.get_extra_info("socket"), fd, position, length)
            position += sent
            length -= sent
        if length > 0:
            with open(fd, "rb", buffering=0, closefd=False) as file:
                await loop.sendfile(transport, file, position, length)
    writer.writelines(pending)
    await writer.drain()


def _sendfile_now(sock: Any, fd: int, position: int, length: int) -> int:
    """Send what the (non-blocking) socket takes now of ``length`` bytes of ``fd`` from
    ``position``; the bytes sent (the caller sends the rest the patient way)."""
    if sock is None:
        return 0
    out = sock.fileno()
    sent = 0
    while sent < length:
        try:
            n = os.sendfile(out, fd, position + sent, length - sent)
        except (BlockingIOError, InterruptedError):
            break
        if n == 0:
            break  # the file is shorter than asked: asyncio's path raises for it
        sent += n
    return sent


def _batches(partition_log: PartitionLog, start: int | None = None) -> Iterator[bytes]:
    """Every batch of a log from ``start`` (default: the log start), in order, read a
    megabyte at a time."""
    offset = partition_log.log_start_offset if start is None else start
    while offset < partition_log.log_end_offset:
        found = partition_log.read(offset, 1 << 20)
        if found is None:
            break
        data = found.read()
        before = offset
        for header in iter_batches(data):
            yield data[header.position : header.end]
            offset = header.next_offset
        if offset == before:
            break  # reads return whole batches; no progress means nothing more to read


def _joined(chunks: list[Records]) -> bytes:
    return b"".join(
        bytes(c) if isinstance(c, bytes | bytearray | memoryview) else c.read() for c in chunks
    )


def _log_tasks() -> None:
    for task in asyncio.all_tasks():
        stream = io.StringIO()
        task.print_stack(file=stream)
        log.warning("task %s:\n%s", task.get_name(), stream.getvalue())
