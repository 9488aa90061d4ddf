"""Applying the metadata log to the image, and snapshotting the image.

:class:`MetadataApplier` owns this node's metadata image and its generation: it replays
each committed record of the metadata log (or a snapshot) into
:class:`~odradek.controller.image.MetadataImage`, counts the changes (a decision made
on an older image is made again before its records are committed), has the broker's
partitions follow the image (:class:`~odradek.shell.hosting.Hosting`), and writes a
snapshot of the image once enough has been committed since the last. A record the image
refuses stops the node.

:class:`TopicConfigs` resolves a topic's effective settings from the image's configs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from odradek.broker.record_validation import RecordPolicy
from odradek.broker.server_config import ServerConfig
from odradek.broker.state import BrokerState
from odradek.broker.topic_config import (
    effective_log_config,
    effective_record_policy,
    effective_topic_value,
)
from odradek.controller.elr import min_insync_replicas
from odradek.controller.image_records import decode_image_records, encode_image_records
from odradek.core.errors import ConfigError, CorruptLogError, LogOfflineError
from odradek.protocol.metadata import NoOpRecord
from odradek.protocol.metadata_record import decode_metadata_record
from odradek.raft.disk_log import DiskRaftLog, metadata_log_directory
from odradek.raft.log import Entry, SnapshotId
from odradek.raft.snapshot import decode_snapshot
from odradek.shell.clock import monotonic_ms, now_ms
from odradek.shell.quorum import QuorumDriver
from odradek.storage.checkpoint import RECOVERY_POINT_CHECKPOINT, read_offset_checkpoint
from odradek.storage.fs import FileSystem, join
from odradek.storage.log import LogConfig

log = logging.getLogger("odradek.node")

METADATA_TOPIC = "__cluster_metadata"


class TopicConfigs:
    """A topic's effective settings: topic > broker > cluster default > file."""

    def __init__(
        self,
        server: ServerConfig,
        state: BrokerState,
        *,
        node_id: int,
        log_config: LogConfig,
        message_max_bytes: int,
    ) -> None:
        """``log_config`` and ``message_max_bytes`` are the server-wide settings, used
        when a topic's own are invalid."""
        self._server = server
        self._state = state
        self._node_id = node_id
        self._log_config = log_config
        self._message_max_bytes = message_max_bytes

    def log_config_for(self, topic: str) -> LogConfig:
        """The topic's effective log settings: topic > broker > cluster default > file."""
        try:
            return effective_log_config(
                self._server, self._state.image.configs, topic, self._node_id
            )
        except ConfigError as e:
            log.error("topic %s: %s; using the static configuration", topic, e)
            return self._log_config

    def max_message_bytes_for(self, topic: str) -> int:
        try:
            value = effective_topic_value(
                self._server,
                self._state.image.configs,
                topic,
                self._node_id,
                "max.message.bytes",
            )
        except ConfigError as e:
            log.error("topic %s: %s; using message.max.bytes", topic, e)
            value = None
        return value if isinstance(value, int) else self._message_max_bytes

    def record_policy_for(self, topic: str) -> RecordPolicy:
        try:
            return effective_record_policy(
                self._server, self._state.image.configs, topic, self._node_id
            )
        except ConfigError as e:
            log.error("topic %s: %s; checking its records with the defaults", topic, e)
            return RecordPolicy()

    def min_insync_replicas(self, topic: str, replication_factor: int) -> int:
        """The topic's ``min.insync.replicas`` from the metadata log alone: the value the
        leaders use too (:mod:`odradek.controller.elr`)."""
        return min_insync_replicas(self._state.image.configs, topic, replication_factor)

    def unclean_election_enabled(self, topic: str) -> bool:
        try:
            value = effective_topic_value(
                self._server,
                self._state.image.configs,
                topic,
                self._node_id,
                "unclean.leader.election.enable",
            )
        except ConfigError:
            return False
        return value is True


class PartitionsFollowing(Protocol):
    """What follows the image's changes on a broker (:class:`~odradek.shell.hosting.Hosting`)."""

    def sync(self) -> None: ...


class NodeStop(Protocol):
    """The node, as something that can be stopped for a reason."""

    def fail(self, reason: str) -> None: ...


class MetadataApplier:
    def __init__(
        self, state: BrokerState, server: ServerConfig, metadata_log_dir: str, node: NodeStop
    ) -> None:
        self._state = state
        self._server = server
        self._metadata_log_dir = metadata_log_dir
        self._node = node
        # Set as the node starts: the metadata log, its quorum, and on a broker the
        # hosting of partitions (which follows every change of the image).
        self.raft_log: DiskRaftLog | None = None
        self.quorum: QuorumDriver | None = None
        self.hosting: PartitionsFollowing | None = None
        # Called after every change of the image (a listener's TLS stores follow it).
        self.on_change: list[Callable[[], None]] = []
        # Counts image changes other than no-ops: a decision made on an older generation
        # is made again before its records are committed.
        self._generation = 0
        # Metadata bytes committed since the last snapshot, and when it was taken.
        self._snapshot_bytes = 0
        self._snapshot_taken_ms = monotonic_ms()

    @property
    def generation(self) -> int:
        return self._generation

    def apply_committed(self, entries: list[Entry]) -> None:
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
        self._node.fail(reason)

    def _replay_committed(self, entries: list[Entry]) -> None:
        changed = False
        for entry in entries:
            if entry.control is not None:
                continue  # leader changes and voter sets are the quorum's, not the image's
            for i, value in enumerate(entry.records):
                self._snapshot_bytes += len(value)
                body, _ = decode_metadata_record(value)
                self._state.image.replay(body, entry.offset + i)
                changed = changed or not isinstance(body, NoOpRecord)
        if changed:
            self._generation += 1
        if changed and self.hosting is not None:
            self.hosting.sync()
        if changed:
            for callback in self.on_change:
                callback()

    def apply_snapshot(self, snapshot_id: SnapshotId) -> None:
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
                metadata_log_directory(self._metadata_log_dir),
                f"snapshot {snapshot_id} is listed but cannot be read",
            )
        contents = decode_snapshot(data)
        self._state.image = decode_image_records(contents.records, snapshot_id.end_offset - 1)
        self._generation += 1
        if self.hosting is not None:
            self.hosting.sync()
        for callback in self.on_change:
            callback()

    async def snapshotter(self) -> None:
        """Write a metadata snapshot after enough committed bytes
        (``metadata.log.max.record.bytes.between.snapshots``) or time
        (``metadata.log.max.snapshot.interval.ms``); the log before it is dropped, and a
        replica that needs it fetches the snapshot instead."""
        server = self._server
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
        records = encode_image_records(self._state.image)
        snapshot = node.create_snapshot(end, records, now_ms())
        self._snapshot_bytes = 0
        self._snapshot_taken_ms = monotonic_ms()
        log.info("metadata snapshot %s written (%d records)", snapshot, len(records))


def metadata_recovery_point(fs: FileSystem, metadata_log_dir: str) -> int:
    """Where the metadata log's recovery stands, from its dir's checkpoint (0: all of it)."""
    path = join(metadata_log_dir, RECOVERY_POINT_CHECKPOINT)
    try:
        return read_offset_checkpoint(fs, path).get((METADATA_TOPIC, 0), 0)
    except CorruptLogError as e:
        log.warning("ignoring damaged checkpoint, recovering from the start: %s", e)
        return 0
