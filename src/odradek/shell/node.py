"""One Odradek node: the wiring of the shell's rooms, and their start and stop order.

It runs its replica of the metadata log (:mod:`odradek.shell.quorum`): a voter of the
controller quorum or an observer, whose committed records
:mod:`odradek.shell.metadata_apply` applies to the metadata image; a controller serves
the controller listener (:mod:`odradek.shell.controller_service`), a broker registers
and heartbeats (:mod:`odradek.shell.broker_lifecycle`) and serves clients once caught
up. The rooms, each reached through a small protocol naming what is asked of it:

* :mod:`odradek.shell.connections`: listeners, framing, answers in request order;
* :mod:`odradek.shell.effects`: carrying each handler's outcome through its effects
  (the handler table is :mod:`odradek.broker.handlers`);
* :mod:`odradek.shell.group_commit`: appends wait for one shared flush;
* :mod:`odradek.shell.hosting`: the partitions and logs the image assigns here;
* :mod:`odradek.shell.group_service`: the group coordinator on the event loop;
* :mod:`odradek.shell.housekeeping`: retention, checkpoints, producer expiry.
* :mod:`odradek.shell.log_cleaner`: compacted logs cleaned off the loop.
* :mod:`odradek.shell.clean_shutdown`: the broker epoch a clean stop leaves.

On SIGTERM it stops accepting, moves its leaderships away, flushes, writes checkpoints
and exits; a task that fails with nothing to handle it stops the node (status 1).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import logging
import random
import signal
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from odradek.broker.authorization import Authorization
from odradek.broker.cleaner_settings import cleaner_settings
from odradek.broker.cluster_rules import guard_routes
from odradek.broker.endpoints import SECURITY_PROTOCOL_IDS
from odradek.broker.fetch_session import FetchSessionCache
from odradek.broker.handlers import broker_routes, register
from odradek.broker.partition import LocalPartition
from odradek.broker.router import Router
from odradek.broker.server_config import ServerConfig
from odradek.broker.state import BrokerSettings, BrokerState
from odradek.controller.image import CONFIG_RESOURCE_BROKER, MetadataImage
from odradek.coordinator import GroupConfig, GroupCoordinator
from odradek.core.errors import ConfigError, LogOfflineError
from odradek.protocol.error_codes import ErrorCode
from odradek.raft.disk_log import DiskRaftLog, metadata_log_directory
from odradek.raft.quorum_file import QuorumStateFile
from odradek.security.principal import MappingRule
from odradek.security.sasl import sasl_listener
from odradek.security.sasl_keys import SaslListenerConfig
from odradek.security.scram import ScramCredential, ScramMechanism
from odradek.security.ssl_keys import dynamic_ssl_key, effective_ssl_config
from odradek.shell import controller_service
from odradek.shell.broker_lifecycle import BrokerLifecycle
from odradek.shell.clean_shutdown import CleanShutdownFile
from odradek.shell.clock import monotonic_ms, now_ms, steady_ms
from odradek.shell.connection_limits import broker_listener_name
from odradek.shell.connections import Connections, ServingSecurity
from odradek.shell.controller_service import ControllerService
from odradek.shell.dir_lock import DirLock
from odradek.shell.effects import Effects, Forwarder, LongPolls
from odradek.shell.format import read_bootstrap_records
from odradek.shell.group_commit import GroupCommit
from odradek.shell.group_service import GroupService
from odradek.shell.hosting import Hosting
from odradek.shell.housekeeping import Housekeeping
from odradek.shell.jwks import jwks_source
from odradek.shell.limits import log_partition_capacity, raise_open_files_limit
from odradek.shell.log_cleaner import LogCleaner
from odradek.shell.metadata_apply import (
    METADATA_TOPIC,
    MetadataApplier,
    TopicConfigs,
    metadata_recovery_point,
)
from odradek.shell.peer_client import PLAINTEXT, ClientSecurity, PeerPool, bind_outgoing_connections
from odradek.shell.quorum import QuorumConfig, QuorumDriver
from odradek.shell.real_fs import RealFileSystem
from odradek.shell.record_check import RecordCheckThread
from odradek.shell.replication import NodeControllerChannel, NodeStorage, ReplicationService
from odradek.shell.scrub import Scrubber
from odradek.shell.supervisor import Supervisor
from odradek.shell.tls import ReloadableServerContext, server_context
from odradek.storage.fs import FileSystem
from odradek.storage.log import LogConfig
from odradek.storage.log_dir import LogDir

log = logging.getLogger("odradek.node")

CONTROLLED_SHUTDOWN_TIMEOUT_S = 10.0
# How long a broker whose log dir failed waits for the controller to hear of it.
LOG_DIR_FAILURE_REPORT_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """A listener's security protocol (``listener.security.protocol.map``): what it is
    served with, and what nodes connect to it with.

    ``server_tls``: the TLS context it serves (None on PLAINTEXT and SASL_PLAINTEXT, and
    for the controller listener on a broker-only node); ``principal_rules``: how an SSL
    client's certificate names its principal; ``sasl``: its SASL mechanisms (SASL_*
    only); ``client``: the TLS and SASL login this node connects to the listener with
    (followers to leaders on the broker listener; Raft, registration, heartbeats,
    forwards and ISR changes on the controller listener)."""

    listener: str
    protocol: str
    server_tls: ssl.SSLContext | None = None
    client: ClientSecurity = PLAINTEXT
    principal_rules: tuple[MappingRule, ...] = ()
    sasl: SaslListenerConfig | None = None


@dataclass(frozen=True, slots=True)
class BrokerListener:
    """One broker listener a node serves (``listeners`` less the controller's): where it
    binds, what it registers for clients (``advertised.listeners``; port 0: the one
    bound), and its security (None: PLAINTEXT)."""

    name: str
    listen_host: str
    listen_port: int
    advertised_host: str
    advertised_port: int
    security: ListenerSecurity | None = None


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
    broker_security: ListenerSecurity | None = None
    """The inter-broker listener's (``inter.broker.listener.name``): what followers fetch
    from leaders with. None: PLAINTEXT."""
    broker_listeners: tuple[BrokerListener, ...] = ()
    """Every broker listener served, the first at ``listen_host``:``listen_port``; empty:
    that one alone, with ``broker_security``."""
    controller_security: ListenerSecurity | None = None
    """None: the controller listener is PLAINTEXT."""
    authorization: Authorization | None = None
    """The authorizer (``authorizer.class.name``); None: every client may do anything."""


class Node:
    def __init__(self, config: NodeConfig, fs: FileSystem | None = None) -> None:
        self.config = config
        self.fs: FileSystem = fs or RealFileSystem()
        settings = config.settings
        server = config.server
        self.state = BrokerState(
            settings=settings,
            image=MetadataImage(),
            rng=random.Random(),
            fetch_sessions=FetchSessionCache(settings.fetch_session_cache_slots),
            authorization=config.authorization,
        )
        self.state.validate_topic_configs = config.validate_topic_configs
        self.log_dir: LogDir | None = None
        self.raft_log: DiskRaftLog | None = None
        self.quorum: QuorumDriver | None = None
        self.controller: ControllerService | None = None
        self.lifecycle: BrokerLifecycle | None = None
        self.replication: ReplicationService | None = None
        self.hosting: Hosting | None = None
        self.housekeeping: Housekeeping | None = None
        self.log_cleaner: LogCleaner | None = None
        self.clean_shutdown: CleanShutdownFile | None = None
        self._servers: list[asyncio.Server] = []
        self._controller_server: asyncio.Server | None = None
        self._lifecycle_task: asyncio.Task[None] | None = None
        self.controller_port = config.controller_listen_port
        self.port = config.listen_port
        # Every long-lived task runs under it: a failure is handled or stops the node.
        self.supervisor = Supervisor(self._fatal)
        self.failed = asyncio.Event()
        self._locks: list[DirLock] = []
        self.stop_reason: str | None = None
        """Why the node stopped itself (then it exits with status 1), or None."""
        self.topic_configs = TopicConfigs(
            server,
            self.state,
            node_id=settings.node_id,
            log_config=config.log_config,
            message_max_bytes=settings.message_max_bytes,
        )
        self.metadata = MetadataApplier(self.state, server, config.metadata_log_dir, self)
        self.group_commit = GroupCommit(
            lambda: self.state.partitions.values(), self.state.partitions.get, self._on_flushed
        )
        self.long_polls = LongPolls(self.group_commit, flush_before_ack=settings.flush_before_ack)
        group_config = GroupConfig.from_values(server.values)
        self.groups = GroupService(
            self.state,
            GroupCoordinator(
                group_config, rng=random.Random(), owned_partitions=[], now_ms=steady_ms()
            ),
            self.group_commit,
            self.long_polls,
            self.supervisor,
            offsets_commit_timeout_ms=server.offsets_commit_timeout_ms,
        )
        self.router = register(
            Router(),
            guard_routes(
                self.state,
                broker_routes(
                    self.state,
                    server,
                    offsets_topic_num_partitions=group_config.offsets_topic_num_partitions,
                    offsets_topic_replication_factor=server.offsets_topic_replication_factor,
                    describe_quorum=self._describe_quorum,
                ),
            ),
        )
        self.controller_router = Router()
        for api_key, versions in controller_service.CONTROLLER_APIS.items():
            self.controller_router.register(api_key, versions, controller_service.route)
        # Checks the records of very large produce requests off the loop; no batch's
        # records may decompress to more than a request could carry.
        self.record_check = RecordCheckThread(config.max_frame_bytes)
        self.effects = Effects(
            self.state,
            self.router,
            self.metadata,
            self.group_commit,
            self.long_polls,
            self.record_check,
            self.groups,
            node_id=settings.node_id,
        )
        # Each TLS listener's stores (the broker listeners', and the controller listener's),
        # and the dynamic configs they were loaded with.
        self._listener_tls: dict[str, ReloadableServerContext] = {}
        self._listener_tls_dynamic: dict[str, dict[str, str]] = {}
        self._forward_peers = PeerPool(
            f"forward-{settings.node_id}", _client_of(config.controller_security)
        )
        self.connections = Connections(
            self.effects,
            server,
            self._peer_hosts,
            max_frame_bytes=config.max_frame_bytes,
            connections_max_idle_ms=config.connections_max_idle_ms,
        )

    def _describe_quorum(self) -> Any:
        assert self.quorum is not None
        return self.quorum.describe()

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
            recovery_point=metadata_recovery_point(self.fs, cfg.metadata_log_dir),
            clock=now_ms,
        )
        self.metadata.raft_log = self.raft_log
        snapshot = self.raft_log.latest_snapshot()
        if snapshot is not None:
            self.metadata.apply_snapshot(snapshot)
        caught_up_at = self.raft_log.end_offset()
        self.quorum = QuorumDriver(
            cfg.quorum,
            self.raft_log,
            QuorumStateFile(self.fs, metadata_dir),
            self.metadata.apply_committed,
            self.metadata.apply_snapshot,
            self.supervisor,
        )
        self.metadata.quorum = self.quorum
        self.effects.forwarder = Forwarder(self.quorum, self._forward_peers)
        # Until a log dir adopts it (when it lives in the broker's log dir), an I/O error
        # of the metadata log is the metadata log's failure alone.
        self.raft_log.partition.on_io_error = lambda _, reason: self._metadata_log_failed(reason)
        self.quorum.on_halt = self._metadata_log_failed
        self.quorum.start()
        self.supervisor.start("quorum-watch", self._quorum_watch())
        self.supervisor.start("metadata-snapshotter", self.metadata.snapshotter())
        if cfg.is_controller:
            self.controller = ControllerService(
                self.quorum,
                lambda: self.state.image,
                cfg.settings.cluster_id,
                cfg.broker_session_timeout_ms,
                self.effects.run_forwarded,
                connection_loss_ms=cfg.broker_session_connection_loss_ms,
                authorization=cfg.authorization,
                bootstrap_records=read_bootstrap_records(self.fs, cfg.metadata_log_dir),
            )
            self.effects.controller = self.controller
            host = cfg.controller_listen_host or "0.0.0.0"
            controller_security = cfg.controller_security
            controller_tls = None
            if controller_security is not None and controller_security.server_tls is not None:
                # Its stores follow this node's dynamic configs too (on a combined node,
                # whose broker takes the AlterConfigs).
                controller_tls = ReloadableServerContext(controller_security.server_tls)
                self._listener_tls[cfg.quorum.controller_listener] = controller_tls
            self._controller_server = await asyncio.start_server(
                self.connections.serving(
                    self.controller_router,
                    cfg.quorum.controller_listener,
                    self.controller,
                    security=self._serving_security(controller_security),
                ),
                host,
                cfg.controller_listen_port,
                ssl=controller_tls.serving if controller_tls is not None else None,
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
        if cfg.authorization is not None:
            # KIP-801: until now only super users were admitted (the ACLs were not read).
            cfg.authorization.loaded = True
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
        assert self.clean_shutdown is not None
        clean = self.clean_shutdown.take_epoch()
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
        assert self.clean_shutdown is not None
        self.clean_shutdown.write(self.lifecycle.broker_epoch)

    def _controller_address(self) -> tuple[str, int] | None:
        if self.quorum is None or self.quorum.raft.leader is None:
            return None
        return self.quorum.address_of(self.quorum.raft.leader)

    def _wake_readers(self, key: tuple[str, int]) -> None:
        """New records or a new high watermark: long-polling fetches of ``key`` retry."""
        self.long_polls.wake(key)

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
        self.clean_shutdown = CleanShutdownFile(self.fs, cfg.log_dir)
        clean = self.clean_shutdown.exists()
        opening = now_ms()
        self.log_dir = LogDir.open(
            self.fs,
            cfg.log_dir,
            cluster_id=cfg.settings.cluster_id,
            node_id=cfg.settings.node_id,
            config_for=self.topic_configs.log_config_for,
            now_ms=now,
            skip=(f"{METADATA_TOPIC}-0",),
            # Kafka's clean shutdown file, removed below once every log is open.
            clean_shutdown=clean,
        )
        self.log_dir.on_failure = self._log_dir_failed
        self.housekeeping = Housekeeping(
            self.state,
            self.log_dir,
            self.fs,
            self.group_commit,
            retention_check_interval_ms=cfg.retention_check_interval_ms,
            checkpoint_interval_ms=cfg.checkpoint_interval_ms,
            high_watermark_checkpoint_interval_ms=cfg.high_watermark_checkpoint_interval_ms,
            producer_id_expiration_ms=cfg.producer_id_expiration_ms,
            producer_id_expiration_check_interval_ms=cfg.producer_id_expiration_check_interval_ms,
        )
        server_keys, node_id = cfg.server, cfg.settings.node_id
        self.log_cleaner = LogCleaner(
            self.state,
            self.log_dir,
            self.fs,
            self.group_commit,
            lambda: cleaner_settings(server_keys, self.state.image.configs, node_id),
            processes=isinstance(self.fs, RealFileSystem),
        )
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
            fetch_security=_client_of(cfg.broker_security),
            controller_security=_client_of(cfg.controller_security),
        )
        self.effects.replication = self.replication
        self.groups.replication = self.replication
        # From here on the partitions hosted follow every change of the image.
        self.hosting = Hosting(
            self.state,
            self.log_dir,
            self.topic_configs,
            self.replication,
            self.groups,
            self.group_commit.io_lock,
            self.supervisor,
            node_id=cfg.settings.node_id,
            flush_before_ack=cfg.settings.flush_before_ack,
            producer_id_expiration_ms=cfg.producer_id_expiration_ms,
        )
        self.metadata.hosting = self.hosting
        self.state.records_appended = self._records_appended
        self.hosting.sync()
        listeners = cfg.broker_listeners or (
            BrokerListener(
                broker_listener_name(cfg.server),
                cfg.listen_host,
                cfg.listen_port,
                cfg.settings.host,
                cfg.settings.port,
                cfg.broker_security,
            ),
        )
        for listener in listeners:
            if listener.security is not None and listener.security.server_tls is not None:
                self._listener_tls[listener.name] = ReloadableServerContext(
                    listener.security.server_tls
                )
        if self._listener_tls:
            # The listeners' stores follow this broker's dynamic configs (AlterConfigs).
            self.state.validate_listener_tls = self._validate_listener_tls
            self.metadata.on_change.append(self._reload_listener_tls)
            self._reload_listener_tls()
        registered: list[tuple[str, str, int, int]] = []
        for listener in listeners:
            tls = self._listener_tls.get(listener.name)
            server = await asyncio.start_server(
                self.connections.serving(
                    self.router, listener.name, security=self._serving_security(listener.security)
                ),
                listener.listen_host,
                listener.listen_port,
                ssl=tls.serving if tls is not None else None,
            )
            self._servers.append(server)
            bound = server.sockets[0].getsockname()[1]
            protocol = listener.security.protocol if listener.security is not None else "PLAINTEXT"
            # Listening on an ephemeral port: advertise the one we got.
            port = listener.advertised_port or bound
            registered.append(
                (listener.name, listener.advertised_host, port, SECURITY_PROTOCOL_IDS[protocol])
            )
        self.port = self._servers[0].sockets[0].getsockname()[1]
        self.state.settings = dataclasses.replace(
            cfg.settings,
            host=registered[0][1],
            port=registered[0][2],
            listeners=tuple((name, host, port) for name, host, port, _ in registered),
        )
        settings = self.state.settings
        self.lifecycle = BrokerLifecycle(
            broker_id=settings.node_id,
            cluster_id=settings.cluster_id,
            listeners=registered,
            rack=settings.rack,
            log_dirs=[self.log_dir.directory_id],
            quorum=self.quorum,
            metadata_offset=lambda: self.state.image.offset,
            heartbeat_interval_ms=cfg.broker_heartbeat_interval_ms,
            request_timeout_ms=cfg.quorum.request_timeout_ms,
            previous_broker_epoch=previous_broker_epoch,
            security=_client_of(cfg.controller_security),
        )
        self.hosting.registration = self.lifecycle
        self._lifecycle_task = self.supervisor.start("broker-lifecycle", self.lifecycle.run())
        self.supervisor.start("isr-ticker", self.replication.isr_ticker())
        self.supervisor.start("group-commit", self.group_commit.run())
        self.supervisor.start("housekeeping", self.housekeeping.run())
        if self.log_cleaner is not None and self.config.server.log_cleaner_enable:
            # log.cleaner.enable=false: compacted logs are not cleaned. Otherwise its
            # dynamic keys follow AlterConfigs (log.cleaner.threads=0 stops the workers).
            self.metadata.on_change.append(self.log_cleaner.reconfigure)
            self.supervisor.start("log cleaner", self.log_cleaner.run())
        self.supervisor.start("group-ticker", self.groups.ticker())
        log_dir = self.log_dir
        scrubber = Scrubber(
            lambda: log_dir.logs.values(), self.group_commit.io_lock, cfg.scrub_bytes_per_second
        )
        self.supervisor.start("log-scrubber", scrubber.run(), may_end=True)
        # Clients only see a broker the controller has unfenced (registered, caught up).
        await self.lifecycle.unfenced.wait()
        # The image may have caught up to the registration before its answer came.
        self.hosting.sync()
        log.info("node %d serving clients on %s:%d", settings.node_id, cfg.listen_host, self.port)

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
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
        await self.connections.close_all()
        await self.supervisor.stop()
        if self.lifecycle is not None:
            await self.lifecycle.close()
        if self.replication is not None:
            await self.replication.close()
        await self._forward_peers.close()
        self.record_check.stop()
        self.group_commit.flush_all()
        if self.housekeeping is not None:
            self.housekeeping.snapshot_producers()
        if self.log_dir is not None:
            try:
                self.log_dir.checkpoint()
                if self.housekeeping is not None:
                    self.housekeeping.checkpoint_high_watermarks()
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

    # --- The metadata quorum and the controller ---------------------------------------

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
                await self.controller.unclean_elections(self.topic_configs.unclean_election_enabled)
                self.controller.check_offline()
                await self.controller.complete_reassignments(self.topic_configs.min_insync_replicas)
            if (
                server.auto_leader_rebalance_enable
                and monotonic_ms() - last_rebalance >= interval_ms
            ):
                last_rebalance = monotonic_ms()
                await self.controller.rebalance_leaders(
                    server.leader_imbalance_per_broker_percentage
                )

    def _serving_security(self, security: ListenerSecurity | None) -> ServingSecurity | None:
        """What a listener's clients must prove; SCRAM logins are checked against the
        image of the moment, so a credential altered in the metadata log counts at once."""
        if security is None:
            return None
        if security.protocol == "SSL":
            return ServingSecurity(principal_rules=security.principal_rules)
        sasl = security.sasl
        if sasl is None:
            return None
        return ServingSecurity(
            sasl=sasl_listener(
                sasl, self._scram_credential, key_source=jwks_source, clock=time.time
            ),
            failed_authentication_delay_ms=sasl.failed_authentication_delay_ms,
            max_receive_size=sasl.max_receive_size,
        )

    def _listener_dynamic(self, name: str) -> dict[str, str]:
        """This broker's dynamic configs of listener ``name``'s reloadable TLS keys."""
        listener = name.lower()
        configs = self.state.image.configs.get(
            (CONFIG_RESOURCE_BROKER, str(self.config.settings.node_id)), {}
        )
        return {
            k: v
            for k, v in configs.items()
            if (found := dynamic_ssl_key(k)) is not None and found[0] == listener
        }

    def _validate_listener_tls(self, listener: str, dynamic: dict[str, str]) -> str | None:
        """``listener`` is lower case, as Kafka's ``listener.name.<l>.`` prefixes are."""
        name = next((n for n in self._listener_tls if n.lower() == listener), None)
        if name is None:
            return f"listener {listener} does not serve TLS on this broker"
        try:
            server_context(effective_ssl_config(self.config.server.originals, name, dynamic), name)
        except ConfigError as e:
            return str(e)
        return None

    def _reload_listener_tls(self) -> None:
        """Serve new connections with the stores the image now names for each of this
        node's TLS listeners (a dynamic AlterConfigs); a store that cannot be loaded
        keeps the old one and says so."""
        for name, reloadable in self._listener_tls.items():
            dynamic = self._listener_dynamic(name)
            if dynamic == self._listener_tls_dynamic.get(name):
                continue
            try:
                context = server_context(
                    effective_ssl_config(self.config.server.originals, name, dynamic), name
                )
            except ConfigError as e:
                log.error("listener %s: keeping its TLS stores, the new ones fail: %s", name, e)
                continue
            if name in self._listener_tls_dynamic:
                log.info(
                    "listener %s: TLS key and trust stores reloaded (%s)", name, sorted(dynamic)
                )
            self._listener_tls_dynamic[name] = dynamic
            reloadable.replace(context)

    def _scram_credential(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        return self.state.image.scram_credentials.get((mechanism.kafka_type, user))

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


def _client_of(security: ListenerSecurity | None) -> ClientSecurity:
    return security.client if security is not None else PLAINTEXT


def _log_tasks() -> None:
    for task in asyncio.all_tasks():
        stream = io.StringIO()
        task.print_stack(file=stream)
        log.warning("task %s:\n%s", task.get_name(), stream.getvalue())
