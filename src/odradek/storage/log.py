"""A partition's log: ordered segments, offsets, durability, retention and truncation.

This is the one storage engine for every partition and for the metadata log. It owns:

* offsets: the log start offset, the log end offset (the next offset to assign) and
  the recovery point (everything below it is fsynced);
* appends as leader (offsets and leader epoch patched into the batches in place) and
  as follower (offsets kept, checked to continue the log);
* reads as file ranges on batch boundaries, for ``sendfile``;
* the leader-epoch cache and its checkpoint;
* retention, DeleteRecords and truncation (into quarantine, never plain deletion);
* the producer snapshot files of the log's directory as segments roll, are truncated
  and are deleted (their content comes from the owner's producer state).

What it does once or beside the data path is in modules of its own, which take the
log as an argument: opening and start-up recovery (:mod:`odradek.storage.recovery`:
every batch for the metadata log, or from the recovery point on for the partitions of
a log dir, ADR 0016), the throttled scrub of what start-up did not read
(:mod:`odradek.storage.scrub`), and the quarantine entries that truncation and
recovery write (:mod:`odradek.storage.quarantine`).

It never decodes a record on these paths. It takes the current time as an argument and
reaches files only through :class:`~odradek.storage.fs.FileSystem`. Any ``OSError``
takes the log offline on this node (:class:`~odradek.core.errors.LogOfflineError`):
in-memory state is left as it was before the failed call, and recovery on the next
start cuts whatever half-written tail the failure left.
"""

from __future__ import annotations

import bisect
import errno
import logging
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

from odradek.core.errors import (
    CorruptLogError,
    InvalidRecordBatchError,
    LogOfflineError,
    OffsetOutOfRangeError,
)
from odradek.core.invariant import invariant
from odradek.protocol.record_batch import (
    BatchHeader,
    set_base_offset,
    set_partition_leader_epoch,
    validate_batches,
)
from odradek.storage import quarantine, recovery, scrub
from odradek.storage.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    PARTITION_METADATA,
    write_leader_epoch_checkpoint,
    write_partition_metadata,
)
from odradek.storage.cleaner import log_cleaning
from odradek.storage.cleaner.cleaning import CleaningJob, CleaningResult
from odradek.storage.cleaner.plan import CleaningPolicy
from odradek.storage.fs import (
    FileHandle,
    FileSystem,
    basename,
    dirname,
    join,
    write_file_atomically,
)
from odradek.storage.index import OFFSET_ENTRY, TIME_ENTRY
from odradek.storage.leader_epoch import LeaderEpochCache
from odradek.storage.producer_snapshot import (
    SnapshotFields,
    delete_snapshots_after,
    delete_snapshots_of_deleted_segments,
    encode_snapshot,
    snapshot_file_name,
)
from odradek.storage.recovery import CORRUPT_MARKER
from odradek.storage.scrub import ScrubResult, ScrubTask
from odradek.storage.segment import FileRange, LogSegment, SegmentCache
from odradek.storage.txn_index import AbortedTxn, collect

log = logging.getLogger("odradek.storage")

P = ParamSpec("P")
R = TypeVar("R")

MAX_RELATIVE_OFFSET = 2**31 - 1

RECORD_LESS_SCAN_BYTES = 64 * 1024
"""The longest range a consumer read checks for holding no record (see ``read``)."""

_TOO_MANY_FILES = (errno.EMFILE, errno.ENFILE)


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Per-log settings, named after Kafka's topic configs (``segment.bytes`` ...)."""

    segment_bytes: int = 1_073_741_824
    segment_ms: int = 604_800_000
    segment_index_bytes: int = 10_485_760
    index_interval_bytes: int = 4096
    retention_ms: int = 604_800_000
    retention_bytes: int = -1
    flush_messages: int = 2**63 - 1
    flush_ms: int = 2**63 - 1
    quarantine_max_bytes: int = 1_073_741_824
    compact: bool = False
    """``cleanup.policy`` includes ``compact``: the log cleaner cleans this log."""
    cleaning: CleaningPolicy = field(default_factory=CleaningPolicy)
    """``min.cleanable.dirty.ratio``, the compaction lags and ``delete.retention.ms``."""


@dataclass(frozen=True, slots=True)
class FlushTicket:
    """The fsyncs one flush needs, separable from the log so a thread can run them.

    Between :meth:`PartitionLog.begin_flush` and :meth:`PartitionLog.finish_flush` the
    owner must not close or delete the log's files (no retention, truncation or topic
    deletion): a handle closed under a running fsync would fail it.
    """

    fs: FileSystem
    handles: list[FileHandle]
    directory: str | None
    end: int
    messages: int
    close_after: list[FileHandle] = field(default_factory=list)
    """Handles only this flush still needs (a rolled segment's index files, producer
    snapshots): closed once synced, or once the sync failed."""

    def run(self) -> None:
        try:
            for handle in self.handles:
                handle.fsync()
            if self.directory is not None:
                self.fs.fsync_dir(self.directory)
        finally:
            for handle in self.close_after:
                handle.close()


@dataclass(frozen=True, slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    max_timestamp: int
    batch_count: int
    record_count: int
    size_bytes: int


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    topic, sep, number = name.rpartition("-")
    if not sep or not topic or not number.isdigit():
        return None
    return topic, int(number)


def _guarded(method: Callable[P, R]) -> Callable[P, R]:
    """Refuse calls on an offline log and take it offline on any OSError."""

    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        self = args[0]
        assert isinstance(self, PartitionLog)
        if self.offline is not None:
            raise LogOfflineError(self.directory, self.offline)
        try:
            return method(*args, **kwargs)
        except OSError as e:
            if e.errno in _TOO_MANY_FILES:
                # The process is out of descriptors, not the disk out of order: this
                # call fails (in-memory state is as it was), the log stays online.
                log.error(
                    "%s: %s failed: %s (see the open-files limit logged at start)",
                    self.directory,
                    method.__name__,
                    e,
                )
                raise LogOfflineError(self.directory, f"too many open files: {e}") from e
            self._fail(f"{method.__name__} failed: {e}")
            raise LogOfflineError(self.directory, self.offline or "") from e
        except CorruptLogError as e:
            self._corrupt(f"{method.__name__}: {e}")
            raise LogOfflineError(self.directory, f"corrupt: {e}") from e

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


class PartitionLog:
    def __init__(
        self,
        fs: FileSystem,
        directory: str,
        config: LogConfig,
        segments: list[LogSegment],
        log_start_offset: int,
        epochs: LeaderEpochCache,
        topic_id: uuid.UUID | None,
        cache: SegmentCache | None = None,
    ) -> None:
        self.fs = fs
        self.directory = directory
        self.config = config
        self.cache = cache if cache is not None else SegmentCache()
        self.segments = segments
        self._bases = [s.base_offset for s in segments]
        self.log_start_offset = log_start_offset
        self.epochs = epochs
        self.topic_id = topic_id
        # No segment at all: a crash came between creating the partition's directory and
        # its first segment; recovery starts the log at its log start.
        self.recovery_point = self.log_end_offset if segments else log_start_offset
        self.offline: str | None = None
        self.on_io_error: Callable[[PartitionLog, str], None] | None = None
        """Told when an I/O error takes this log offline: its log dir's owner takes the
        whole dir offline, since one failed file says the disk may fail the others."""
        self.quarantine_alarm: str | None = None
        self.unflushed_messages = 0
        self.last_flush_ms = 0
        self._dir_dirty = False
        self._staged: list[FileHandle] = []
        """Producer snapshot files written but not yet synced (the next flush does)."""
        self._epochs_unsynced = False
        """The leader-epoch checkpoint was rewritten and waits for the next flush."""
        self._epochs_unwritten = False
        """An epoch began at the log end on becoming leader and is not in the file yet:
        the next flush (or a clean close) writes it, before any batch of it is durable."""
        self.producer_snapshot: Callable[[], Iterable[SnapshotFields]] | None = None
        """The owner's producer state as snapshot entries, asked for at each roll (Kafka
        writes a producer snapshot then); None writes no snapshot."""
        self.on_recovery_point_lowered: Callable[[], None] | None = None
        """Called after a truncation lowered the recovery point: the owner of the
        recovery-point checkpoint rewrites it at once, as Kafka's LogManager does, so
        that a later start never trusts bytes written over the cut as durable."""
        self.cleaner_checkpoint: int | None = None
        """The first offset the log cleaner has not cleaned (its ``cleaner-offset-checkpoint``
        entry); a truncation below it lowers it."""
        self.validated_bytes_at_open = 0
        """How many bytes the start-up validated (the rest waits for the scrub)."""
        name = parse_partition_dir_name(basename(directory))
        self.topic, self.partition = name if name else (basename(directory), 0)

    # --- Creating and opening -------------------------------------------------------

    @classmethod
    def create(
        cls,
        fs: FileSystem,
        directory: str,
        config: LogConfig,
        now_ms: int,
        topic_id: uuid.UUID | None = None,
        start_offset: int = 0,
        cache: SegmentCache | None = None,
    ) -> PartitionLog:
        fs.makedirs(directory)
        if topic_id is not None:
            write_partition_metadata(fs, join(directory, PARTITION_METADATA), topic_id)
        segment = LogSegment.create(fs, directory, start_offset, now_ms, cache)
        segment.index_interval_bytes = config.index_interval_bytes
        segment.flush()
        fs.fsync_dir(directory)
        fs.fsync_dir(dirname(directory))
        result = cls(
            fs, directory, config, [segment], start_offset, LeaderEpochCache(), topic_id, cache
        )
        segment.cache = result.cache
        result.last_flush_ms = now_ms
        return result

    @classmethod
    def open(
        cls,
        fs: FileSystem,
        directory: str,
        config: LogConfig,
        now_ms: int,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        *,
        validate_all: bool = True,
        cache: SegmentCache | None = None,
    ) -> PartitionLog:
        """Open and recover a log.

        Past the recovery point a bad batch is expected after a crash: the tail from
        it on is moved to quarantine and cut, with a log line. Below the recovery point
        the data was known durable, so a bad batch there is corruption: the log opens
        offline and serves nothing.

        With ``validate_all`` every batch is validated before anything is served.
        Without it (the partitions of a log dir, ADR 0016) only the batches from the
        recovery point on are: the segments below it are opened as they are (indexes
        read when first used, checked where used), the leader-epoch cache below it
        comes from its checkpoint (checked against the batches where each epoch
        begins), and the scrub (:meth:`next_scrub_task`) validates the rest later. A
        log found corrupt before (:data:`~odradek.storage.recovery.CORRUPT_MARKER`) is
        validated whole again. The steps are in :mod:`odradek.storage.recovery`.
        """
        return recovery.open_log(
            cls,
            fs,
            directory,
            config,
            now_ms,
            recovery_point,
            log_start_offset,
            validate_all,
            cache,
        )

    # --- Offsets --------------------------------------------------------------------

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # --- Appending ------------------------------------------------------------------

    @_guarded
    def append_as_leader(
        self,
        records: memoryview,
        leader_epoch: int,
        now_ms: int,
        aborted: Sequence[AbortedTxn] = (),
    ) -> AppendInfo:
        """Validate the batches, give them offsets and our epoch in place, append them.

        ``records`` must be writable (the patches do not touch the CRC range, so the
        client's CRC stays valid and no batch is copied). ``aborted``: the transactions
        the batches' ABORT markers close, written to the transaction index first
        (:meth:`~odradek.storage.segment.LogSegment.append_aborted` says why first).
        """
        headers = validate_batches(records)
        invariant(bool(headers), "append of an empty record set")
        first = offset = self.log_end_offset
        patched = []
        for h in headers:
            set_base_offset(records, h.position, offset)
            set_partition_leader_epoch(records, h.position, leader_epoch)
            patched.append(h._replace(base_offset=offset, partition_leader_epoch=leader_epoch))
            offset += h.last_offset_delta + 1
        if self.epochs.assign(leader_epoch, first):
            self._write_epochs()
        return self._append(records, patched, now_ms, aborted)

    @_guarded
    def assign_leader_epoch(self, leader_epoch: int) -> None:
        """Start ``leader_epoch`` at the log end (Kafka's ``maybeAssignEpochStartOffset``,
        done on becoming leader): the epoch then exists in the cache even before this
        leader appends, so followers are checked against it at once."""
        # The file is written by the next flush, not here: no batch has this epoch yet,
        # and an entry at the log end is dropped at every load anyway. A node that
        # becomes leader of 1,000 partitions at once then renames no 1,000 files on the
        # event loop (about 0.3-0.7 ms each on ext4).
        if self.epochs.assign(leader_epoch, self.log_end_offset):
            self._epochs_unwritten = True

    @_guarded
    def append_as_follower(
        self, records: memoryview, now_ms: int, aborted: Sequence[AbortedTxn] = ()
    ) -> AppendInfo:
        """Append batches fetched from the leader, keeping their offsets and epochs.

        Batches that fail validation or do not continue this log exactly come from a
        leader that broke the protocol (or a damaged read): InvalidRecordBatchError, and
        nothing is appended.
        """
        # The leader's log may be compacted: batches that lost records, or all.
        headers = validate_batches(records, compacted=True)
        invariant(bool(headers), "append of an empty record set")
        expected = self.log_end_offset
        for h in headers:
            if h.base_offset != expected:
                raise InvalidRecordBatchError(
                    "UNEXPECTED_OFFSET",
                    f"{self.directory}: batch from the leader at offset {h.base_offset}, "
                    f"the log ends at {expected}",
                )
            expected = h.next_offset
        for h in headers:
            if h.partition_leader_epoch >= 0 and self.epochs.assign(
                h.partition_leader_epoch, h.base_offset
            ):
                self._write_epochs()
        return self._append(records, headers, now_ms, aborted)

    def _append(
        self,
        records: memoryview,
        headers: list[BatchHeader],
        now_ms: int,
        aborted: Sequence[AbortedTxn] = (),
    ) -> AppendInfo:
        size = len(records)
        self._maybe_roll(size, headers[-1].last_offset, now_ms)
        if aborted:
            # Into the segment the markers go to, so that a read from any offset of it
            # finds them (the search starts at the fetch offset's segment).
            for txn in aborted:
                invariant(
                    headers[0].base_offset <= txn.last_offset <= headers[-1].last_offset,
                    f"{self.directory}: aborted transaction {txn} is not in the appended batches",
                )
            self.active.append_aborted(list(aborted))
        self.active.append(records, headers, self.config.index_interval_bytes)
        count = sum(h.records_count for h in headers)
        self.unflushed_messages += count
        return AppendInfo(
            first_offset=headers[0].base_offset,
            last_offset=headers[-1].last_offset,
            max_timestamp=max(h.max_timestamp for h in headers),
            batch_count=len(headers),
            record_count=count,
            size_bytes=size,
        )

    def _maybe_roll(self, size: int, last_offset: int, now_ms: int) -> None:
        seg = self.active
        if seg.size == 0:
            return
        cfg = self.config
        if (
            seg.size + size > cfg.segment_bytes
            or seg.index.size_in_bytes() + OFFSET_ENTRY.size > cfg.segment_index_bytes
            or len(seg.time_index) * TIME_ENTRY.size + TIME_ENTRY.size > cfg.segment_index_bytes
            or now_ms - seg.created_ms >= cfg.segment_ms
            or last_offset - seg.base_offset > MAX_RELATIVE_OFFSET
        ):
            end = self.log_end_offset
            self._add_segment(end, now_ms)
            self.stage_producer_snapshot(end)

    def _add_segment(self, base_offset: int, now_ms: int) -> None:
        # The new files first: if they cannot be made (no descriptor left), the log
        # keeps appending to the segment it has.
        segment = LogSegment.create(self.fs, self.directory, base_offset, now_ms, self.cache)
        segment.index_interval_bytes = self.config.index_interval_bytes
        if self.segments:
            self.active.deactivate()
        self.segments.append(segment)
        self._bases.append(base_offset)
        self._dir_dirty = True

    def stage_producer_snapshot(self, offset: int) -> None:
        """Write the owner's producer state as the snapshot for ``offset`` (the log end:
        a roll, a clean stop), synced by the next flush or at close.

        Not synced here, so that a roll costs no fsync on the caller's thread: a crash
        before the flush may leave the file torn or missing, and its CRC makes the
        loader take the older snapshot then (as Kafka flushes its snapshot later too).
        """
        if self.producer_snapshot is None:
            return
        data = encode_snapshot(self.producer_snapshot())
        path = join(self.directory, snapshot_file_name(offset))
        tmp = path + ".tmp"
        try:
            handle = self.fs.open(tmp, create=True)
        except OSError as e:
            if e.errno not in _TOO_MANY_FILES:
                raise
            log.warning("%s: producer snapshot at %d not written: %s", self.directory, offset, e)
            return
        try:
            handle.truncate(0)
            handle.append(data)
            self.fs.rename(tmp, path)
        except BaseException:
            handle.close()
            raise
        self._staged.append(handle)
        self._dir_dirty = True

    # --- Durability -----------------------------------------------------------------

    def needs_flush(self, now_ms: int) -> bool:
        """Whether ``flush.messages`` or ``flush.ms`` asks for a flush now."""
        if self.recovery_point == self.log_end_offset:
            return False
        return (
            self.unflushed_messages >= self.config.flush_messages
            or now_ms - self.last_flush_ms >= self.config.flush_ms
        )

    @_guarded
    def flush(self, now_ms: int) -> int:
        """fsync everything appended so far; return the new recovery point.

        One call covers every append since the last: this is the unit of group commit.
        """
        self._flush_all()
        self.last_flush_ms = now_ms
        return self.recovery_point

    def _flush_all(self) -> None:
        ticket = self.begin_flush()
        ticket.run()
        self._finish(ticket)

    @_guarded
    def begin_flush(self) -> FlushTicket:
        """Start a flush whose fsyncs may run on another thread (see :class:`FlushTicket`).

        Everything appended before this call is covered. Appends may continue while the
        ticket runs; they mark their segment unflushed again for the next flush.
        """
        handles = []
        closing: list[FileHandle] = []
        for segment in self.segments:
            if segment.unflushed:
                segment.unflushed = False
                handles.append(segment.log)
            closing += segment.take_index_handles()
        closing += self._staged
        self._staged = []
        if self._epochs_unwritten:
            self._write_epochs()
        if self._epochs_unsynced:
            self._epochs_unsynced = False
            closing.append(self.fs.open(join(self.directory, LEADER_EPOCH_CHECKPOINT)))
        handles += closing
        directory = self.directory if self._dir_dirty else None
        self._dir_dirty = False
        covered = self.unflushed_messages
        self.unflushed_messages = 0
        return FlushTicket(self.fs, handles, directory, self.log_end_offset, covered, closing)

    @_guarded
    def finish_flush(self, ticket: FlushTicket, now_ms: int) -> int:
        """Record a completed ticket: its end offset is now durable."""
        self._finish(ticket)
        self.last_flush_ms = now_ms
        return self.recovery_point

    def fail_flush(self, ticket: FlushTicket, error: OSError) -> LogOfflineError:
        """A ticket's fsync failed: the log goes offline (an fsync is never retried)."""
        self._fail(f"flush failed: {error}")
        return LogOfflineError(self.directory, self.offline or "")

    def _fail(self, reason: str) -> None:
        """An I/O error: offline here, and the log dir's owner is told."""
        if self.offline is not None:
            return
        self.offline = reason
        log.error("partition %s is offline: %s", self.directory, reason)
        if self.on_io_error is not None:
            self.on_io_error(self, reason)

    def _corrupt(self, problem: str) -> None:
        """Corruption found: the log goes offline, with a log line naming the file and
        position, and stays offline across restarts while the damage is there."""
        if self.offline is None:
            self.offline = problem
        log.error("partition %s is offline: %s", self.directory, problem)
        try:
            write_file_atomically(
                self.fs, join(self.directory, CORRUPT_MARKER), (problem + "\n").encode()
            )
        except OSError as e:
            log.error("%s: cannot record the corruption: %s", self.directory, e)

    def take_offline(self, reason: str) -> None:
        """Serve nothing more: the log dir this log lives in failed."""
        if self.offline is None:
            self.offline = reason

    def _finish(self, ticket: FlushTicket) -> None:
        # Never past the log end: a truncation (or a recovery) may have cut below it.
        self.recovery_point = min(max(self.recovery_point, ticket.end), self.log_end_offset)

    # --- Reading --------------------------------------------------------------------

    def _segment_index(self, offset: int) -> int:
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

    @_guarded
    def read(
        self,
        offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        *,
        skip_record_less: bool = False,
    ) -> FileRange | None:
        """Whole batches from the one holding ``offset``, below ``max_offset``.

        ``max_offset`` is the exclusive bound (the high watermark for consumers, the
        log end for followers). None means there is nothing to return yet.

        ``skip_record_less`` (consumers): a range that is the rest of an older segment
        and holds no record at all (cleaning left only fillers and empty producer
        batches there) is passed over for the next segment's, so a consumer sees the
        gap Kafka would leave. librdkafka treats an answer without a record as a
        message too large for its fetch size and, after ten, fails the partition.
        Followers read the fillers, which keep their log dense. The broker asks for it
        on compacted logs only (a log whose policy lost ``compact`` after cleaning keeps
        such segments until retention deletes them).
        """
        end = self.log_end_offset
        if offset < self.log_start_offset or offset > end:
            raise OffsetOutOfRangeError(offset, self.log_start_offset, end)
        bound = end if max_offset is None else min(max_offset, end)
        i = self._segment_index(offset)
        while i < len(self.segments) and offset < bound:
            segment = self.segments[i]
            found = segment.read(offset, max_bytes, bound)
            if found is not None:
                if not (skip_record_less and self._record_less(segment, found)):
                    return found
                offset = segment.next_offset
            i += 1
        return None

    def _record_less(self, segment: LogSegment, found: FileRange) -> bool:
        """Whether ``found`` is the rest of an older segment and holds no record."""
        if segment.is_active or found.position + found.length != segment.size:
            return False
        if found.length > RECORD_LESS_SCAN_BYTES:
            return False  # a cleaned segment of only fillers is far smaller
        end = found.position + found.length
        return all(h.records_count == 0 for h in segment.headers_from(found.position, end))

    @_guarded
    def offset_for_timestamp(self, timestamp: int) -> BatchHeader | None:
        """The first batch holding a record with a timestamp at or above ``timestamp``.

        ListOffsets then finds the exact record inside that one batch.
        """
        for segment in self.segments:
            if segment.max_timestamp >= timestamp or segment is self.active:
                found = segment.first_offset_with_timestamp(timestamp)
                if found is not None and found.next_offset > self.log_start_offset:
                    return found
        return None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.epochs.end_offset_for_epoch(epoch, self.log_end_offset)

    # --- Truncation -----------------------------------------------------------------

    @_guarded
    def truncate_to(self, offset: int, now_ms: int, reason: str, leader_epoch: int = -1) -> int:
        """Remove every record at or after ``offset`` into quarantine; return records moved.

        Used when a follower's log diverges from its new leader's. Truncation removes
        whole batches: an offset inside a batch removes that batch too. Offsets at or
        above the log end are a no-op.
        """
        if offset >= self.log_end_offset:
            # Kafka drops an epoch entry that no batch ever used (a leadership that
            # appended nothing), so a later, lower-numbered append stays consistent.
            if self.epochs.truncate_from_end(self.log_end_offset):
                self._write_epochs()
            return 0
        invariant(offset >= self.log_start_offset, f"truncate to {offset} below log start")
        i = self._segment_index(offset)
        segment = self.segments[i]
        position = segment.position_of(offset)
        headers = list(segment.headers_from(position, segment.size))
        if headers:
            # Whole batches only: the log ends where the batch holding ``offset`` began.
            offset = headers[0].base_offset
        for later in self.segments[i + 1 :]:
            headers += later.headers_from(0, later.size)
        chunks = [segment.log.read(position, segment.size - position)]
        chunks += [s.log.read(0, s.size) for s in self.segments[i + 1 :]]
        moved = sum(h.records_count for h in headers)
        self._quarantine_bytes(chunks, offset, leader_epoch, now_ms, reason, headers)
        for s in self.segments[i + 1 :]:
            s.delete()
        del self.segments[i + 1 :]
        del self._bases[i + 1 :]
        segment.truncate_to(offset)
        segment.activate()
        self._dir_dirty = True
        # A cut below the log start (possible when the start lies inside the batch that
        # goes) leaves an empty log that starts where it now ends, as Kafka does.
        self.log_start_offset = min(self.log_start_offset, offset)
        if self.epochs.truncate_from_end(offset):
            self._write_epochs()
        # Producer snapshots past the cut describe batches that are gone (Kafka's
        # truncateAndReload deletes them too).
        delete_snapshots_after(self.fs, self.directory, offset)
        lowered = offset < self.recovery_point
        self.recovery_point = min(self.recovery_point, offset)
        if self.cleaner_checkpoint is not None:
            self.cleaner_checkpoint = min(self.cleaner_checkpoint, offset)
        self._flush_all()
        if lowered and self.on_recovery_point_lowered is not None:
            self.on_recovery_point_lowered()
        return moved

    @_guarded
    def truncate_fully_and_start_at(self, offset: int, now_ms: int, reason: str) -> int:
        """Move everything into quarantine and start an empty log at ``offset``."""
        moved = 0
        if self.log_end_offset > self.log_start_offset:
            headers = [h for s in self.segments for h in s.headers_from(0, s.size)]
            moved = sum(h.records_count for h in headers)
            chunks = [s.log.read(0, s.size) for s in self.segments]
            self._quarantine_bytes(chunks, self.log_start_offset, -1, now_ms, reason, headers)
        for s in self.segments:
            s.delete()
        self.segments = []
        self._bases = []
        self._add_segment(offset, now_ms)
        self.log_start_offset = offset
        self.epochs.clear()
        self._write_epochs()
        delete_snapshots_after(self.fs, self.directory, -1)
        self.recovery_point = offset
        self.cleaner_checkpoint = None
        self._flush_all()
        if self.on_recovery_point_lowered is not None:
            self.on_recovery_point_lowered()
        return moved

    def _quarantine_bytes(
        self,
        chunks: list[bytes],
        start_offset: int,
        leader_epoch: int | None,
        now_ms: int,
        reason: str,
        headers: list[BatchHeader] | None = None,
    ) -> None:
        # The entry is written by the quarantine module; the alarm stays on the log,
        # where the broker reads it with the log's other state.
        alarm = quarantine.move_aside(
            self.fs,
            self.directory,
            chunks,
            start_offset,
            leader_epoch,
            now_ms,
            reason,
            headers,
            self.config.quarantine_max_bytes,
        )
        if alarm is not None:
            self.quarantine_alarm = alarm

    # --- Retention and DeleteRecords -----------------------------------------------

    @_guarded
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset``; return it."""
        if offset > self.log_end_offset:
            raise OffsetOutOfRangeError(offset, self.log_start_offset, self.log_end_offset)
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            if self.epochs.truncate_from_start(offset):
                self._write_epochs()
        return self.log_start_offset

    @_guarded
    def delete_old_segments(self, now_ms: int, high_watermark: int) -> int:
        """Delete whole segments past retention or below the log start; return how many.

        Only segments wholly below ``high_watermark`` go: a record no consumer could yet
        read is never deleted by retention. The active segment stays.
        """
        cfg = self.config
        total = self.size_in_bytes()
        deleted = 0
        while len(self.segments) > 1:
            seg = self.segments[0]
            if seg.next_offset > high_watermark:
                break
            newest = seg.max_timestamp if seg.max_timestamp >= 0 else seg.created_ms
            expired = cfg.retention_ms >= 0 and now_ms - newest > cfg.retention_ms
            too_big = cfg.retention_bytes >= 0 and total - seg.size >= cfg.retention_bytes
            below_start = seg.next_offset <= self.log_start_offset
            if not (expired or too_big or below_start):
                break
            seg.delete()
            total -= seg.size
            self.segments.pop(0)
            self._bases.pop(0)
            deleted += 1
        if deleted:
            self.fs.fsync_dir(self.directory)
            if self.segments[0].base_offset > self.log_start_offset:
                self.log_start_offset = self.segments[0].base_offset
            if self.epochs.truncate_from_start(self.log_start_offset):
                self._write_epochs()
            delete_snapshots_of_deleted_segments(
                self.fs, self.directory, self.segments[0].base_offset
            )
        return deleted

    # --- Housekeeping ---------------------------------------------------------------

    def _write_epochs(self) -> None:
        # Replaced at once but synced by the next flush, with the batches: a leadership
        # change of 1,000 partitions then costs no 3,000 fsyncs on the caller's thread.
        # The recovery point passes a batch only once a flush after its epoch's entry
        # has run, so below it the file is durable, which is where start-up trusts it
        # (ADR 0016); a crash before may leave it old or torn, which start-up detects.
        write_leader_epoch_checkpoint(
            self.fs,
            join(self.directory, LEADER_EPOCH_CHECKPOINT),
            self.epochs.entries(),
            sync=False,
        )
        self._epochs_unwritten = False
        self._epochs_unsynced = True
        self._dir_dirty = True

    def close(self, *, sync: bool = True) -> None:
        """Let go of every file. With ``sync`` (a clean stop) the files the next start
        trusts without reading them are synced first: the indexes that changed and the
        producer snapshots not yet flushed."""
        sync = sync and self.offline is None
        for segment in self.segments:
            segment.close(sync_indexes=sync)
        staged, self._staged = self._staged, []
        try:
            if sync and self._epochs_unwritten:
                self._write_epochs()
            if sync and self._epochs_unsynced:
                staged.append(self.fs.open(join(self.directory, LEADER_EPOCH_CHECKPOINT)))
            if sync and staged:
                for handle in staged:
                    handle.fsync()
                self.fs.fsync_dir(self.directory)
        except OSError as e:
            log.error("%s: cannot sync its snapshot and checkpoint files: %s", self.directory, e)
        finally:
            self._epochs_unsynced = False
            for handle in staged:
                handle.close()

    # --- The scrub (ADR 0016; its steps are in storage/scrub.py) ----------------------

    def scrub_pending_bytes(self) -> int:
        """Bytes not validated at start that the scrub has still to read."""
        return scrub.pending_bytes(self)

    @_guarded
    def next_scrub_task(self, max_bytes: int) -> ScrubTask | None:
        """The next range for the scrub: :func:`odradek.storage.scrub.next_task`."""
        return scrub.next_task(self, max_bytes)

    @_guarded
    def finish_scrub(self, task: ScrubTask, result: ScrubResult) -> None:
        """Record a scrub result: :func:`odradek.storage.scrub.finish`."""
        scrub.finish(self, task, result)

    # --- Compaction (ADR 0024; its steps are in storage/cleaner/) ----------------------

    @_guarded
    def cleaning_job(
        self,
        *,
        policy: CleaningPolicy,
        checkpoint: int | None,
        high_watermark: int,
        now_ms: int,
        last_batch_of_producers: Collection[int],
        map_capacity: int,
    ) -> CleaningJob | None:
        """The next cleaning pass, or None when none is due. The pass itself runs on a
        thread: :func:`odradek.storage.cleaner.cleaning.run_pass`."""
        found = log_cleaning.find_cleanable(
            self, policy=policy, checkpoint=checkpoint, high_watermark=high_watermark,
            now_ms=now_ms,
        )  # fmt: skip
        if not found.due:
            return None
        return log_cleaning.job_for(
            self, found, policy=policy, now_ms=now_ms,
            last_batch_of_producers=last_batch_of_producers, map_capacity=map_capacity,
        )  # fmt: skip

    def cleaning_failed(self, error: BaseException) -> None:
        """A pass failed on its thread: corruption or an I/O error takes the log offline
        as on any other path (Kafka's "uncleanable partition"), never a silent stop."""
        if isinstance(error, CorruptLogError):
            self._corrupt(f"log cleaner: {error}")
        elif isinstance(error, OSError):
            self._fail(f"log cleaner failed: {error}")

    @_guarded
    def commit_cleaning(self, result: CleaningResult, now_ms: int) -> bool:
        """Swap a finished pass's segments in (:mod:`odradek.storage.cleaner.log_cleaning`)."""
        committed = log_cleaning.commit(self, result, now_ms)
        if committed:
            self.cleaner_checkpoint = result.map_end
        return committed

    # --- Aborted transactions ---------------------------------------------------------

    @_guarded
    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions a read from ``fetch_offset`` up to ``upper_bound``
        (the offset after the last one read) overlaps: what a read_committed reader must
        drop (Kafka's ``collectAbortedTransactions``). Segments are searched from the
        one holding ``fetch_offset`` on, until an entry proves no later marker matters."""
        found: list[AbortedTxn] = []
        for segment in self.segments[self._segment_index(fetch_offset) :]:
            index = segment.txn_index
            if index is None:
                continue
            more, complete = collect(index.entries, fetch_offset, upper_bound)
            found += more
            if complete:
                break
        return found

    # --- Reading batch headers --------------------------------------------------------

    @_guarded
    def read_headers(self, offset: int, max_count: int) -> list[BatchHeader]:
        """Up to ``max_count`` batch headers from the batch holding ``offset``, in order
        (empty at the log end): what a producer-state replay needs, without the data."""
        found: list[BatchHeader] = []
        i = self._segment_index(offset)
        while i < len(self.segments) and len(found) < max_count:
            segment = self.segments[i]
            if offset < segment.next_offset:
                position = segment.position_of(max(offset, segment.base_offset))
                for h in segment.headers_from(position, segment.size):
                    found.append(h)
                    if len(found) >= max_count:
                        break
                if found:
                    offset = found[-1].next_offset
            i += 1
        return found

    def check_consistency(self) -> None:
        """Raise CorruptLogError if the in-memory view disagrees with itself (tests)."""
        for a, b in zip(self.segments, self.segments[1:], strict=False):
            if a.next_offset != b.base_offset:
                raise CorruptLogError(a.log_path, a.size, "segments are not contiguous")
