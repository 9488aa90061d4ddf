"""A log dir: its identity, its partitions, and its checkpoint files.

``format`` writes ``meta.properties`` (cluster id, node id, directory id); ``open``
refuses a dir that was never formatted or belongs to another cluster or node, then
opens and recovers every partition folder with the recovery point and log start offset
from the dir's checkpoints: each log is validated from its recovery point on, the rest
left to the scrub (ADR 0016). Checkpoints are written by the owner on a schedule, on
clean shutdown and after a truncation lowered a recovery point; each write is atomic.
The logs of a dir share one :class:`~odradek.storage.segment.SegmentCache`, which
bounds the files their older segments hold open.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection

from odradek.core.errors import ConfigError, CorruptLogError, LogOfflineError
from odradek.storage.checkpoint import (
    CLEANER_CHECKPOINT,
    LOG_START_CHECKPOINT,
    META_PROPERTIES,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    MetaProperties,
    TopicPartition,
    read_meta_properties,
    read_offset_checkpoint,
    write_meta_properties,
    write_offset_checkpoint,
)
from odradek.storage.fs import MAX_NAME_BYTES, FileSystem, dirname, join
from odradek.storage.log import (
    LogConfig,
    PartitionLog,
    parse_partition_dir_name,
    partition_dir_name,
)
from odradek.storage.recovery import END_OF_LOG
from odradek.storage.segment import DEFAULT_OPEN_SEGMENTS, SegmentCache

log = logging.getLogger("odradek.storage")

DELETE_SUFFIX = "-delete"


def delete_dir_name(topic: str, partition: int, unique: int) -> str:
    """The name a partition's folder is renamed to while it is deleted.

    Kafka's form, ``<topic>-<partition>.<unique>-delete``, with the topic cut short as
    Kafka cuts it so that the name fits in a file name: a legal topic name has up to 249
    characters, and the whole name would exceed the 255 bytes a file name may have. Only
    the suffix matters to :meth:`LogDir.open`, which finishes any deletion it finds.
    """
    suffix = f"-{partition}.{unique}{DELETE_SUFFIX}"
    # Topic names are ASCII (letters, digits, '.', '_', '-'): a character is a byte.
    return topic[: MAX_NAME_BYTES - len(suffix)] + suffix


def format_log_dir(fs: FileSystem, path: str, meta: MetaProperties) -> bool:
    """Prepare ``path`` for this node; return False if it was already formatted the same.

    A dir formatted for another cluster, node or directory id is refused: reusing it
    would mix two logs' histories.
    """
    fs.makedirs(path)
    meta_path = join(path, META_PROPERTIES)
    if fs.exists(meta_path):
        existing = read_meta_properties(fs, meta_path)
        if existing.cluster_id != meta.cluster_id or existing.node_id != meta.node_id:
            raise ConfigError(
                f"{path} is already formatted for cluster {existing.cluster_id}, "
                f"node {existing.node_id}"
            )
        return False
    write_meta_properties(fs, meta_path, meta)
    parent = dirname(path)
    fs.fsync_dir(parent if parent else ".")
    return True


class LogDir:
    """One log dir and the partition logs in it.

    An I/O error in any of its logs, or in its own files (checkpoints, a partition
    created or deleted), takes the whole dir offline, as Kafka's log dir failure
    channel does: every log in it stops serving at once, and :attr:`on_failure` is told
    (once), so that the node can tell the controller and move leadership away. A disk
    that failed one write will fail others; serving some partitions from it would only
    hide the failure.
    """

    def __init__(
        self,
        fs: FileSystem,
        path: str,
        meta: MetaProperties,
        open_segments: int = DEFAULT_OPEN_SEGMENTS,
    ) -> None:
        self.fs = fs
        self.path = path
        self.meta = meta
        self.logs: dict[TopicPartition, PartitionLog] = {}
        self.cache = SegmentCache(open_segments)
        self._deletions = 0
        self.offline: str | None = None
        """Why this dir failed, or None while it works."""
        self.on_failure: Callable[[str], None] | None = None

    @property
    def directory_id(self) -> uuid.UUID:
        return self.meta.directory_id

    def adopt(self, key: TopicPartition, partition_log: PartitionLog) -> None:
        """Count a log opened elsewhere (the metadata log) as one of this dir's."""
        self.logs[key] = partition_log
        partition_log.on_io_error = self._log_failed

    def fail(self, reason: str) -> None:
        """Take the dir and every log in it offline; tell :attr:`on_failure` once."""
        if self.offline is not None:
            return
        self.offline = reason
        log.error(
            "log dir %s is offline: %s; its %d partitions stop serving on this node",
            self.path,
            reason,
            len(self.logs),
        )
        for partition_log in self.logs.values():
            partition_log.take_offline(f"log dir {self.path} is offline: {reason}")
        if self.on_failure is not None:
            self.on_failure(reason)

    def _log_failed(self, partition_log: PartitionLog, reason: str) -> None:
        self.fail(f"{partition_log.directory}: {reason}")

    def _guard(self, what: str, error: OSError) -> LogOfflineError:
        self.fail(f"{what} failed: {error}")
        return LogOfflineError(self.path, self.offline or "")

    @classmethod
    def open(
        cls,
        fs: FileSystem,
        path: str,
        *,
        cluster_id: str | None,
        node_id: int,
        config_for: Callable[[str], LogConfig],
        now_ms: int,
        skip: Collection[str] = (),
        clean_shutdown: bool = False,
        open_segments: int = DEFAULT_OPEN_SEGMENTS,
    ) -> LogDir:
        """Open every partition folder but those named in ``skip`` (the metadata log,
        which its owner opens itself).

        ``clean_shutdown`` (Kafka's clean shutdown file was there) means every file is
        as a clean stop left it: a log the recovery-point checkpoint does not name (a
        damaged checkpoint) is then durable to its end, where after a crash it would be
        validated from its start. ``open_segments`` bounds the older segments whose
        files are open at a time (:class:`~odradek.storage.segment.SegmentCache`)."""
        meta_path = join(path, META_PROPERTIES)
        if not fs.exists(meta_path):
            raise ConfigError(f"{path} is not formatted: run `odradek storage format` first")
        meta = read_meta_properties(fs, meta_path)
        if meta.node_id != node_id:
            raise ConfigError(f"{path} belongs to node {meta.node_id}, not node {node_id}")
        if cluster_id is not None and meta.cluster_id != cluster_id:
            raise ConfigError(f"{path} belongs to cluster {meta.cluster_id}, not {cluster_id}")
        result = cls(fs, path, meta, open_segments)
        recovery_points = _read_or_recover(fs, join(path, RECOVERY_POINT_CHECKPOINT))
        log_starts = _read_or_recover(fs, join(path, LOG_START_CHECKPOINT))
        cleaned = _read_or_recover(fs, join(path, CLEANER_CHECKPOINT))
        for name in fs.listdir(path):
            full = join(path, name)
            if name.endswith(DELETE_SUFFIX):
                # A topic deletion that a crash interrupted: finish it.
                fs.rmtree(full)
                continue
            parsed = parse_partition_dir_name(name)
            if parsed is None or name in skip or not fs.is_dir(full):
                continue
            opened = PartitionLog.open(
                fs,
                full,
                config_for(parsed[0]),
                now_ms,
                recovery_point=recovery_points.get(parsed, END_OF_LOG if clean_shutdown else 0),
                log_start_offset=log_starts.get(parsed, 0),
                validate_all=False,
                cache=result.cache,
            )
            opened.on_recovery_point_lowered = result.checkpoint
            opened.cleaner_checkpoint = cleaned.get(parsed)
            result.adopt(parsed, opened)
        fs.fsync_dir(path)
        return result

    def create_log(
        self,
        topic: str,
        partition: int,
        config: LogConfig,
        now_ms: int,
        topic_id: uuid.UUID | None = None,
    ) -> PartitionLog:
        key = (topic, partition)
        if key in self.logs:
            raise ValueError(f"{topic}-{partition} already exists in {self.path}")
        if self.offline is not None:
            raise LogOfflineError(self.path, self.offline)
        try:
            created = PartitionLog.create(
                self.fs,
                join(self.path, partition_dir_name(topic, partition)),
                config,
                now_ms,
                topic_id,
                cache=self.cache,
            )
        except OSError as e:
            raise self._guard(f"creating {topic}-{partition}", e) from e
        created.on_recovery_point_lowered = self.checkpoint
        self.adopt(key, created)
        return created

    def delete_log(self, topic: str, partition: int) -> None:
        """Remove a partition: :meth:`delete_logs` of that one."""
        self.delete_logs([(topic, partition)])

    def delete_logs(self, keys: Collection[TopicPartition]) -> None:
        """Remove partitions: rename each aside, make the renames durable, then delete
        the files.

        The checkpoints are rewritten at once, so that a partition created again with the
        same name never inherits the old one's offsets. If a crash comes between the
        rename and the removal, :meth:`open` finishes the deletion. Many partitions share
        one directory fsync and one checkpoint: a topic of thousands of partitions is
        deleted with a few fsyncs per batch rather than several per partition.
        """
        victims: list[tuple[PartitionLog, str, int]] = []
        for topic, partition in keys:
            victim = self.logs.pop((topic, partition))
            victim.on_recovery_point_lowered = None
            victim.close(sync=False)
            victims.append((victim, topic, partition))
        if not victims:
            return
        try:
            self._delete_files(victims)
        except OSError as e:
            names = ", ".join(f"{topic}-{partition}" for _, topic, partition in victims)
            raise self._guard(f"deleting {names}", e) from e

    def _delete_files(self, victims: list[tuple[PartitionLog, str, int]]) -> None:
        asides: list[str] = []
        for victim, topic, partition in victims:
            self._deletions += 1
            aside = join(self.path, delete_dir_name(topic, partition, self._deletions))
            self.fs.rename(victim.directory, aside)
            asides.append(aside)
        self.fs.fsync_dir(self.path)
        self.checkpoint()
        for aside in asides:
            self.fs.rmtree(aside)

    def high_watermarks(self) -> dict[TopicPartition, int]:
        return read_offset_checkpoint(self.fs, join(self.path, REPLICATION_CHECKPOINT))

    def checkpoint_high_watermarks(self, high_watermarks: dict[TopicPartition, int]) -> None:
        if self.offline is not None:
            return  # nothing more is written to a failed dir
        try:
            write_offset_checkpoint(
                self.fs, join(self.path, REPLICATION_CHECKPOINT), high_watermarks
            )
        except OSError as e:
            raise self._guard("writing the high watermark checkpoint", e) from e

    def checkpoint(self) -> None:
        if self.offline is not None:
            return  # nothing more is written to a failed dir
        try:
            self._write_checkpoints()
        except OSError as e:
            raise self._guard("writing the checkpoints", e) from e

    def _write_checkpoints(self) -> None:
        """Write the recovery points and log start offsets of every log.

        Offline logs are included with the values they last had, so that a restart does
        not forget a log start offset (and serve records DeleteRecords removed).
        """
        write_offset_checkpoint(
            self.fs,
            join(self.path, RECOVERY_POINT_CHECKPOINT),
            {k: v.recovery_point for k, v in self.logs.items()},
        )
        write_offset_checkpoint(
            self.fs,
            join(self.path, LOG_START_CHECKPOINT),
            {k: v.log_start_offset for k, v in self.logs.items()},
        )
        self._write_cleaner_checkpoint()

    def checkpoint_cleaner(self) -> None:
        """``cleaner-offset-checkpoint``: each compacted log's first dirty offset, so
        that a restarted cleaner does not clean again what it cleaned."""
        if self.offline is not None:
            return
        try:
            self._write_cleaner_checkpoint()
        except OSError as e:
            raise self._guard("writing the cleaner checkpoint", e) from e

    def _write_cleaner_checkpoint(self) -> None:
        cleaned = {
            k: v.cleaner_checkpoint
            for k, v in self.logs.items()
            if v.cleaner_checkpoint is not None
        }
        path = join(self.path, CLEANER_CHECKPOINT)
        if cleaned or self.fs.exists(path):
            write_offset_checkpoint(self.fs, path, cleaned)

    def offline_logs(self) -> dict[TopicPartition, str]:
        return {k: v.offline for k, v in self.logs.items() if v.offline is not None}

    def close(self) -> None:
        for partition_log in self.logs.values():
            partition_log.close()

    def scrub_pending_bytes(self) -> int:
        return sum(partition_log.scrub_pending_bytes() for partition_log in self.logs.values())


def _read_or_recover(fs: FileSystem, path: str) -> dict[TopicPartition, int]:
    """A damaged offset checkpoint means "recover every log from its start", not a refusal.

    Recovery validates every batch anyway; what is lost is only the knowledge of which
    prefix was durable (and, for the log start checkpoint, of DeleteRecords calls since
    the start of each log's first segment), which the warning says.
    """
    try:
        return read_offset_checkpoint(fs, path)
    except CorruptLogError as e:
        log.warning("ignoring damaged checkpoint, recovering from the start: %s", e)
        return {}
