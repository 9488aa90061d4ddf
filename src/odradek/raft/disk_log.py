"""The Raft log on disk: the metadata partition ``__cluster_metadata-0`` plus its snapshots.

:class:`DiskRaftLog` behaves exactly as :class:`~odradek.raft.log.MemoryRaftLog` (a test
runs both through the same operations); this module only decides how that state is laid
out, as Kafka lays it out:

* entries are record batches in a :class:`~odradek.storage.log.PartitionLog`, one batch
  per entry, its partition leader epoch the entry's epoch. A control entry is a control
  batch whose records carry Kafka's control key (version 0, control type). The storage
  engine brings segment files, the offset index used by reads, recovery of a torn tail,
  truncation into quarantine and the leader-epoch cache;
* snapshots are files ``{end_offset:020d}-{epoch:010d}.checkpoint`` in the same
  directory, written as ``.checkpoint.part`` and renamed into place, so a crash leaves
  either the whole snapshot or none.

Flushing: :meth:`DiskRaftLog.flush` fsyncs on the caller's thread; a driver that keeps
the fsync off its event loop uses :meth:`~DiskRaftLog.begin_flush` (on the loop), runs
the ticket elsewhere, then :meth:`~DiskRaftLog.finish_flush` (on the loop again). While
a ticket runs, nothing may close the files it syncs: the driver sets ``io_lock`` to a
lock it holds around the ticket, and truncation, snapshot resets and segment deletion
take it.

The log start is not stored: on open it is the latest snapshot's end offset. Entries
below a snapshot are redundant with it (the core only snapshots committed state), so
serving the snapshot instead is always correct, and a crash between writing a snapshot
and moving the log start cannot bring back entries the core was told were deleted.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from odradek.core.errors import (
    CorruptLogError,
    DecodeError,
    LogOfflineError,
)
from odradek.core.invariant import invariant
from odradek.protocol.record_batch import (
    iter_batches,
)
from odradek.raft.batches import decode_entry, encode_entry
from odradek.raft.log import UNDEFINED, Entry, SnapshotId
from odradek.raft.snapshot import decode_snapshot, parse_snapshot_file_name, snapshot_file_name
from odradek.storage.fs import FileSystem, join
from odradek.storage.log import FlushTicket, LogConfig, PartitionLog

log = logging.getLogger("odradek.raft")

METADATA_PARTITION_DIR = "__cluster_metadata-0"
PARTIAL_SUFFIX = ".part"
DELETED_SUFFIX = ".deleted"

#: Retention of the metadata log is driven by snapshots, never by time or size.
METADATA_LOG_CONFIG = LogConfig(retention_ms=-1, retention_bytes=-1)

# Reads ask the storage engine for this many bytes at a time: whole batches from the
# offset index's nearest entry, so entries_from never rescans the log.
_READ_BYTES = 1024 * 1024


def metadata_log_directory(metadata_log_dir: str) -> str:
    """``<metadata.log.dir>/__cluster_metadata-0``, where the metadata log lives."""
    return join(metadata_log_dir, METADATA_PARTITION_DIR)


class DiskRaftLog:
    """A :class:`~odradek.raft.log.RaftLog` on the storage engine and snapshot files."""

    def __init__(
        self,
        fs: FileSystem,
        directory: str,
        partition: PartitionLog,
        snapshots: list[SnapshotId],
        clock: Callable[[], int],
    ) -> None:
        self.fs = fs
        self.directory = directory
        self.partition = partition
        self._snapshots = sorted(snapshots)
        self._clock = clock
        # Held while a flush ticket runs on another thread (see the module docstring);
        # nothing to guard while flushes run on the caller's thread.
        self.io_lock: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()

    # --- Opening and closing ---------------------------------------------------------

    @classmethod
    def open(
        cls,
        fs: FileSystem,
        directory: str,
        now_ms: int,
        *,
        recovery_point: int = 0,
        config: LogConfig = METADATA_LOG_CONFIG,
        clock: Callable[[], int] | None = None,
    ) -> DiskRaftLog:
        """Open (or create) the log in ``directory`` and recover it.

        ``recovery_point`` is the offset below which the log was known durable (the owner
        keeps it in the log dir's recovery-point checkpoint, as for any partition): a bad
        batch below it is corruption and takes the log offline instead of being cut.
        ``clock`` gives the time stamped on appended batches (``now_ms`` if not given).
        """
        # `storage format` leaves the directory with only the bootstrap checkpoint in it,
        # and PartitionLog.open needs at least one segment: create the log then.
        if fs.exists(directory) and any(n.endswith(".log") for n in fs.listdir(directory)):
            partition = PartitionLog.open(
                fs, directory, config, now_ms, recovery_point=recovery_point
            )
        else:
            partition = PartitionLog.create(fs, directory, config, now_ms)
        if partition.offline is not None:
            partition.close()
            raise LogOfflineError(directory, partition.offline)
        snapshots = _recover_snapshot_files(fs, directory)
        result = cls(fs, directory, partition, snapshots, clock or (lambda: now_ms))
        result._start_at_latest_snapshot()
        return result

    def _start_at_latest_snapshot(self) -> None:
        snapshot = self.latest_snapshot()
        if snapshot is None:
            return
        if self._diverges_from(snapshot):
            log.warning(
                "%s: the log (end %d, epoch %d) is behind or off its latest snapshot %s; "
                "starting the log at the snapshot",
                self.directory,
                self.end_offset(),
                self.last_epoch(),
                snapshot,
            )
            self.reset_to_snapshot(snapshot)
        else:
            self.delete_before_snapshot()

    def _diverges_from(self, snapshot: SnapshotId) -> bool:
        """Whether the entries cannot continue ``snapshot`` (Kafka resets the log then)."""
        end = snapshot.end_offset
        if end > self.end_offset():
            return True
        if end <= self.start_offset():
            return False
        below = self.entry_at(end - 1)
        # The snapshot must end on a batch boundary written in the snapshot's epoch.
        return below is None or below.next_offset != end or below.epoch != snapshot.epoch

    def close(self) -> None:
        with self.io_lock:
            self.partition.close()

    # --- Offsets ---------------------------------------------------------------------

    def start_offset(self) -> int:
        return self.partition.log_start_offset

    def end_offset(self) -> int:
        return self.partition.log_end_offset

    def recovery_point(self) -> int:
        """Everything below this offset is durable (for the owner's checkpoint)."""
        return self.partition.recovery_point

    def _has_entries(self) -> bool:
        return self.end_offset() > self.start_offset()

    def last_epoch(self) -> int:
        if self._has_entries():
            return self.partition.epochs.latest_epoch()
        snapshot = self.latest_snapshot()
        return snapshot.epoch if snapshot is not None else 0

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        if epoch == UNDEFINED:
            return (UNDEFINED, UNDEFINED)
        if not self._has_entries():
            snapshot = self.latest_snapshot()
            if snapshot is not None and snapshot.epoch <= epoch:
                return (snapshot.epoch, snapshot.end_offset)
            return (UNDEFINED, UNDEFINED)
        return self.partition.end_offset_for_epoch(epoch)

    # --- Appending and truncating ----------------------------------------------------

    def append(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        # Every entry is checked before any byte is written, so a refused append leaves
        # the log as it was.
        end, last_epoch = self.end_offset(), self.last_epoch()
        for entry in entries:
            invariant(entry.offset == end, f"append at {entry.offset} but the log ends at {end}")
            invariant(
                entry.epoch >= max(1, last_epoch),
                f"entry epoch {entry.epoch} below the last epoch {last_epoch}",
            )
            end, last_epoch = entry.next_offset, entry.epoch
        now = self._clock()
        batches = bytearray(b"".join(encode_entry(entry, now) for entry in entries))
        self.partition.append_as_follower(memoryview(batches), now)

    def truncate_to(self, offset: int) -> None:
        invariant(offset >= self.start_offset(), f"truncate to {offset} below the log start")
        if offset >= self.end_offset():
            return
        entry = self.entry_at(offset)
        invariant(
            entry is not None and entry.offset == offset, f"truncate to {offset}, inside a batch"
        )
        with self.io_lock:
            self.partition.truncate_to(offset, self._clock(), "raft: truncated to the leader's log")

    def flush(self) -> None:
        self.partition.flush(self._clock())

    def begin_flush(self) -> FlushTicket:
        """The fsyncs that make every entry appended so far durable, to run on any
        thread; :meth:`finish_flush` records them done."""
        return self.partition.begin_flush()

    def finish_flush(self, ticket: FlushTicket) -> None:
        self.partition.finish_flush(ticket, self._clock())

    def fail_flush(self, ticket: FlushTicket, error: OSError) -> LogOfflineError:
        """The ticket's fsync failed: the log goes offline (an fsync is never retried)."""
        return self.partition.fail_flush(ticket, error)

    # --- Reading ---------------------------------------------------------------------

    def entries_from(self, offset: int, max_entries: int) -> list[Entry]:
        if offset >= self.end_offset() or not self._has_entries():
            return []
        invariant(offset >= self.start_offset(), f"read from {offset}, inside a batch")
        found = self._read_entries(offset)
        invariant(found[0].offset == offset, f"read from {offset}, inside a batch")
        del found[max(max_entries, 0) :]
        while 0 < len(found) < max_entries and found[-1].next_offset < self.end_offset():
            found += self._read_entries(found[-1].next_offset)[: max_entries - len(found)]
        return found

    def entry_at(self, offset: int) -> Entry | None:
        if offset < self.start_offset() or offset >= self.end_offset():
            return None
        return self._read_entries(offset, max_bytes=1)[0]

    def _read_entries(self, offset: int, max_bytes: int = _READ_BYTES) -> list[Entry]:
        """Entries of the whole batches from the one holding ``offset`` (at least one)."""
        found = self.partition.read(offset, max_bytes)
        invariant(found is not None, f"{self.directory}: nothing to read at {offset}")
        assert found is not None  # for mypy: invariant() raised otherwise
        data = found.read()
        entries: list[Entry] = []
        for header in iter_batches(data):
            where = found.position + header.position
            entries.append(_decode_entry(data, header.position, found.handle.path, where))
        invariant(bool(entries), f"{self.directory}: no whole batch at {offset}")
        return entries

    # --- Snapshots -------------------------------------------------------------------

    def latest_snapshot(self) -> SnapshotId | None:
        return self._snapshots[-1] if self._snapshots else None

    def read_snapshot(self, snapshot_id: SnapshotId) -> bytes | None:
        if snapshot_id not in self._snapshots:
            return None
        return self.fs.read_file(self._snapshot_path(snapshot_id))

    def write_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        path = self._snapshot_path(snapshot_id)
        partial = path + PARTIAL_SUFFIX
        if self.fs.exists(partial):
            self.fs.remove(partial)
        handle = self.fs.open(partial, create=True)
        try:
            handle.append(data)
            handle.fsync()
        finally:
            handle.close()
        self.fs.rename(partial, path)
        self.fs.fsync_dir(self.directory)
        if snapshot_id not in self._snapshots:
            self._snapshots.append(snapshot_id)
            self._snapshots.sort()

    def reset_to_snapshot(self, snapshot_id: SnapshotId) -> None:
        invariant(snapshot_id in self._snapshots, f"reset to unknown snapshot {snapshot_id}")
        with self.io_lock:
            self.partition.truncate_fully_and_start_at(
                snapshot_id.end_offset, self._clock(), f"raft: reset to snapshot {snapshot_id}"
            )
        self._delete_snapshots_before(snapshot_id)

    def delete_before_snapshot(self) -> None:
        snapshot = self.latest_snapshot()
        if snapshot is None or snapshot.end_offset <= self.start_offset():
            return
        end = snapshot.end_offset
        if end > self.end_offset():
            self.reset_to_snapshot(snapshot)
            return
        if end < self.end_offset():
            entry = self.entry_at(end)
            invariant(
                entry is not None and entry.offset == end,
                f"snapshot {snapshot} ends inside a batch",
            )
        # Committed entries the snapshot holds are deleted, not quarantined: nothing is
        # lost (a snapshot ending exactly at the log end leaves an empty log there).
        self.partition.delete_records_before(end)
        # Whole segments below the new start go now; the rest of the first segment stays
        # on disk below the log start, unread, until its segment can go too.
        with self.io_lock:
            self.partition.delete_old_segments(self._clock(), high_watermark=end)
        self._delete_snapshots_before(snapshot)

    def _snapshot_path(self, snapshot_id: SnapshotId) -> str:
        return join(self.directory, snapshot_file_name(snapshot_id))

    def _delete_snapshots_before(self, snapshot_id: SnapshotId) -> None:
        older = [s for s in self._snapshots if s < snapshot_id]
        if not older:
            return
        for old in older:
            self.fs.remove(self._snapshot_path(old))
        self.fs.fsync_dir(self.directory)
        self._snapshots = [s for s in self._snapshots if s >= snapshot_id]


# --- Batches <-> entries ----------------------------------------------------------------


def _decode_entry(data: bytes, position: int, path: str, file_position: int) -> Entry:
    """The entry of the batch at ``position`` of ``data`` (``file_position`` in ``path``)."""
    try:
        return decode_entry(data, position)
    except DecodeError as e:
        raise CorruptLogError(path, file_position, str(e)) from None


# --- Snapshot files on open -------------------------------------------------------------


def _recover_snapshot_files(fs: FileSystem, directory: str) -> list[SnapshotId]:
    """The snapshots in ``directory``, after removing what an interrupted write left.

    A ``.part`` file is a snapshot whose write never reached its rename, a ``.deleted``
    one a deletion that never finished: neither is a snapshot. A complete file that does
    not decode is corruption of durable data, which stops the log loudly.
    """
    found: list[SnapshotId] = []
    removed = False
    for name in fs.listdir(directory):
        path = join(directory, name)
        if name.endswith((PARTIAL_SUFFIX, DELETED_SUFFIX)) and ".checkpoint" in name:
            fs.remove(path)
            removed = True
            continue
        snapshot_id = parse_snapshot_file_name(name)
        if snapshot_id is None:
            continue
        try:
            decode_snapshot(fs.read_file(path))
        except DecodeError as e:
            raise CorruptLogError(path, 0, f"snapshot: {e}") from None
        found.append(snapshot_id)
    if removed:
        fs.fsync_dir(directory)
    return found
