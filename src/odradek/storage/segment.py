"""One log segment: ``<base offset>.log`` with its ``.index`` and ``.timeindex``.

A segment holds whole record batches, offsets dense and increasing from its base
offset. It never decodes records: appends take validated batches, reads return a file
range on batch boundaries, and recovery and the scrub check each batch's header, CRC
and offset (:func:`~odradek.storage.validation.validate_range`, a module of its own as
it may run on a worker thread and holds no segment state).

Open files. The active (last) segment of a log keeps its three files open, since every
append writes to them. An older segment opens its ``.log`` only when it is read, and
reads its indexes into memory only when a lookup needs them (their files are closed
again at once); a :class:`SegmentCache`, an LRU shared by the logs of a log dir, bounds
how many older segments hold an open ``.log`` and their indexes at a time. A
:class:`FileRange` keeps its own reference to the handle it reads: the cache only lets
go of the handle, and its descriptor closes when the last range holding it is gone
(``RealFileHandle`` closes on collection), so a running ``sendfile`` never sees its
descriptor closed, or reused by the OS for another file.

Checked where used. Start-up no longer validates every batch (ADR 0016): an index
file loaded from disk is trusted only entry by entry, as each lookup reads the batch
header at the entry's position anyway and compares it with the entry. An entry that
disagrees (a stale file after a power loss) makes the segment rebuild both indexes from
its batch headers, with a log line; a header that cannot be a batch's is corruption
(:class:`~odradek.core.errors.CorruptLogError` naming file and position).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from odradek.core.errors import CorruptLogError
from odradek.protocol.record_batch import (
    LOG_OVERHEAD,
    MAGIC,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    header_at,
)
from odradek.storage.fs import FileHandle, FileSystem, join
from odradek.storage.index import TIME_ENTRY, OffsetIndex, TimeIndex
from odradek.storage.txn_index import TXN_INDEX_SUFFIX, AbortedTxn, TxnIndex
from odradek.storage.validation import validate_range

log = logging.getLogger("odradek.storage")

_T = TypeVar("_T")

# Big enough for the batches between two index entries (index.interval.bytes is 4 KiB
# by default), small enough that a lookup that needs one header reads little.
SCAN_WINDOW = 8 * 1024
# The shortest batchLength a v2 batch can have (its header after the length field).
MIN_BATCH_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD

DEFAULT_OPEN_SEGMENTS = 128
"""Older segments with an open ``.log`` and their indexes in memory, per log dir."""

DESCRIPTORS_PER_PARTITION = 3
"""What a partition holds open for its life: its active segment's three files."""


def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass(frozen=True, slots=True)
class FileRange:
    """Bytes of a segment file to send as they are (with sendfile where possible)."""

    handle: FileHandle
    position: int
    length: int

    def __len__(self) -> int:
        return self.length

    def read(self) -> bytes:
        return self.handle.read(self.position, self.length)


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    valid_bytes: int
    next_offset: int
    problem: str | None
    """Why the tail was cut, or None when the whole file was valid."""
    epochs: list[tuple[int, int]]
    """``(leader epoch, base offset)`` wherever the batches' epoch changes."""


class _StaleIndex(Exception):
    """An index entry disagrees with the batch at its position (internal)."""


class SegmentCache:
    """The older segments whose ``.log`` handle and indexes are in memory: an LRU.

    Active segments are never in it (they keep their files open). Letting go of a
    segment drops its handle and its in-memory indexes; the next read opens and loads
    them again. A segment whose index files wait for their fsync is passed over.
    """

    def __init__(self, capacity: int = DEFAULT_OPEN_SEGMENTS) -> None:
        self.capacity = max(capacity, 1)
        self._open: OrderedDict[int, LogSegment] = OrderedDict()

    def __len__(self) -> int:
        return len(self._open)

    def touch(self, segment: LogSegment) -> None:
        key = id(segment)
        if key in self._open:
            self._open.move_to_end(key)
            return
        self._open[key] = segment
        passed_over = 0
        while len(self._open) > self.capacity and passed_over < len(self._open):
            _, oldest = self._open.popitem(last=False)
            if oldest is segment or not oldest.evictable:
                self._open[id(oldest)] = oldest  # in use, or its index files wait for a sync
                passed_over += 1
                continue
            oldest.let_go()

    def forget(self, segment: LogSegment) -> None:
        self._open.pop(id(segment), None)


class LogSegment:
    def __init__(
        self,
        fs: FileSystem,
        directory: str,
        base_offset: int,
        created_ms: int,
        cache: SegmentCache,
        size: int,
    ) -> None:
        self.fs = fs
        self.directory = directory
        self.base_offset = base_offset
        self.created_ms = created_ms
        self.cache = cache
        self.size = size
        self.next_offset = base_offset
        self._log: FileHandle | None = None
        self._index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self.is_active = False
        self._max_timestamp: int | None = -1
        """None while unknown: an older segment reads its time index's last entry."""
        self.max_timestamp_offset = -1
        """The last offset of the batch with the largest timestamp (Kafka's
        ``shallowOffsetOfMaxTimestamp``), for the time index's last entry."""
        self.bytes_since_last_index = 0
        self.index_interval_bytes = 4096
        """The log's ``index.interval.bytes``, for a rebuild outside recovery."""
        self.unflushed = False
        self.indexes_unsynced = False
        """The index files changed since their last fsync and this segment is no longer
        active: the next flush syncs them (and closes them)."""
        # The scrub (ADR 0016): bytes [0, unverified_end) were not validated at start.
        self.unverified_end = 0
        self.scrubbed_to = 0
        self.scrub_expected = base_offset
        self.scrub_max_timestamp = -1
        self.verified_from_offset = base_offset
        """The offset of the batch at ``unverified_end``, which the scrub must reach."""
        self.generation = 0
        """Changes whenever bytes of the file change or go (truncation, deletion), so
        that a scrub result read before the change is dropped."""
        self.deleted = False
        self.txn_index: TxnIndex | None = None
        """The aborted transactions whose marker is in this segment (``.txnindex``,
        made at the first one; see :meth:`append_aborted`)."""

    # --- Opening --------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        fs: FileSystem,
        directory: str,
        base_offset: int,
        now_ms: int,
        cache: SegmentCache | None = None,
    ) -> LogSegment:
        handles = [
            fs.open(join(directory, segment_name(base_offset, s)), create=True)
            for s in (".log", ".index", ".timeindex")
        ]
        for h in handles:
            h.truncate(0)
        segment = cls(
            fs, directory, base_offset, now_ms, cache if cache is not None else SegmentCache(), 0
        )
        segment._log = handles[0]
        segment._index = OffsetIndex(handles[1], base_offset)
        segment._time_index = TimeIndex(handles[2], base_offset)
        segment.is_active = True
        segment.unflushed = True
        return segment

    @classmethod
    def open_existing(
        cls,
        fs: FileSystem,
        directory: str,
        base_offset: int,
        now_ms: int,
        cache: SegmentCache | None = None,
    ) -> LogSegment:
        """An existing segment as an older one: its ``.log`` not opened until read (a
        ``stat`` gives its size), its indexes not read yet; :meth:`recover` or
        :meth:`activate` may follow.

        A stat instead of an open, an fstat and (once the cache is full) a close: about
        a third of the cost, which is most of a clean start's cost per segment."""
        size = fs.file_size(join(directory, segment_name(base_offset, ".log")))
        segment = cls(
            fs, directory, base_offset, now_ms, cache if cache is not None else SegmentCache(), size
        )
        segment._max_timestamp = None
        return segment

    @property
    def log_path(self) -> str:
        return join(self.directory, segment_name(self.base_offset, ".log"))

    def _path(self, suffix: str) -> str:
        return join(self.directory, segment_name(self.base_offset, suffix))

    def paths(self) -> list[str]:
        """The segment's files (the transaction index is made only by an abort)."""
        return [self._path(s) for s in (".log", ".index", ".timeindex", TXN_INDEX_SUFFIX)]

    # --- Aborted transactions -------------------------------------------------------

    def load_txn_index(self) -> str | None:
        """Read the ``.txnindex`` file an earlier run left; what is wrong with it, or
        None. A torn last entry (a crash during its append, before the marker it
        announces was appended) is cut; any other damage is the caller's to judge."""
        handle = self.fs.open(self._path(TXN_INDEX_SUFFIX))
        self.txn_index = index = TxnIndex(handle)
        if index.torn:
            index.replace(index.entries)
            handle.fsync()
        return index.problem

    def append_aborted(self, txns: list[AbortedTxn]) -> None:
        """Write aborted transactions to the index, synced, *before* their markers are
        appended: a crash may then leave an entry without its marker (cut at the next
        start, with the log's end), never a marker without its entry, which would let
        read_committed readers see aborted records."""
        index = self.txn_index
        if index is None:
            path = self._path(TXN_INDEX_SUFFIX)
            index = self.txn_index = TxnIndex(self.fs.open(path, create=True))
            self.fs.fsync_dir(self.directory)
        for txn in txns:
            index.append(txn)
        index.handle.fsync()

    def truncate_txn_index(self, offset: int) -> None:
        """Drop the entries whose marker is at or after ``offset``."""
        index = self.txn_index
        if index is not None and index.entries and index.entries[-1].last_offset >= offset:
            index.truncate_to(offset)
            index.handle.fsync()

    @property
    def log(self) -> FileHandle:
        """The ``.log`` handle, opened if this older segment had let go of it."""
        handle = self._log
        if handle is None:
            handle = self._log = self.fs.open(self.log_path)
        if not self.is_active:
            self.cache.touch(self)
        return handle

    @property
    def index(self) -> OffsetIndex:
        index = self._index
        if index is None:
            index = self.try_index()
            if index is None:
                self.rebuild_indexes("its offset index file is missing or not a valid index")
                assert self._index is not None  # rebuild_indexes sets both
                index = self._index
            self._index = index
        if not self.is_active:
            self.cache.touch(self)
        return index

    @property
    def time_index(self) -> TimeIndex:
        time_index = self._time_index
        if time_index is None:
            path = self._path(".timeindex")
            if self.fs.exists(path):
                time_index = TimeIndex.load(
                    None, self.base_offset, self.next_offset, self.fs.read_file(path)
                )
            if time_index is None:
                self.rebuild_indexes("its time index file is missing or not a valid index")
                assert self._time_index is not None  # rebuild_indexes sets both
                time_index = self._time_index
            self._time_index = time_index
        if not self.is_active:
            self.cache.touch(self)
        return time_index

    def try_index(self) -> OffsetIndex | None:
        """The offset index as its file holds it, or None when the file is missing or
        not a valid index (nothing is rebuilt: recovery decides what to do)."""
        if self._index is not None:
            return self._index
        path = self._path(".index")
        if not self.fs.exists(path):
            return None
        return OffsetIndex.load(None, self.base_offset, self.size, self.fs.read_file(path))

    def _try_time_index(self) -> TimeIndex | None:
        path = self._path(".timeindex")
        if not self.fs.exists(path):
            return None
        # Entries past the claimed end are checked by whoever trusts them.
        return TimeIndex.load(None, self.base_offset, 2**63 - 1, self.fs.read_file(path))

    def _open_index_files(self) -> None:
        """Attach writable handles to both indexes (loading them first if needed)."""
        if self._index is None:
            _ = self.index
        if self._time_index is None:
            _ = self.time_index  # may rebuild both: read the attributes only after
        assert self._index is not None and self._time_index is not None
        if self._index.handle is None:
            self._index.handle = self.fs.open(self._path(".index"), create=True)
        if self._time_index.handle is None:
            self._time_index.handle = self.fs.open(self._path(".timeindex"), create=True)

    def activate(self) -> None:
        """Become the log's active segment: the three files stay open for appends."""
        if self.is_active:
            return
        self.cache.forget(self)
        self.is_active = True
        _ = self.log
        self._open_index_files()
        if self._max_timestamp is None:
            self._max_timestamp, self.max_timestamp_offset = self.time_index.last_entry()

    def deactivate(self) -> None:
        """A roll: no more appends. The time index gets its last entry (the largest
        timestamp, as Kafka writes it when a segment becomes inactive), and the next
        flush syncs and closes the index files."""
        if not self.is_active:
            return
        if self._max_timestamp is not None and self._max_timestamp >= 0:
            self.time_index.append(self._max_timestamp, self.max_timestamp_offset)
        self.is_active = False
        self.indexes_unsynced = True
        self.cache.touch(self)

    def take_index_handles(self) -> list[FileHandle]:
        """For a flush: the index handles of an older segment whose files changed. The
        flush syncs and closes them; the entries stay in memory."""
        if self.is_active or not self.indexes_unsynced:
            return []
        self.indexes_unsynced = False
        taken: list[FileHandle] = []
        for index in (self._index, self._time_index):
            if index is not None and index.handle is not None:
                taken.append(index.handle)
                index.handle = None
        return taken

    @property
    def evictable(self) -> bool:
        """Whether the cache may let go of it: an older segment whose index files are
        neither being written (recovery, a rebuild) nor waiting for their sync."""
        return not (
            self.is_active
            or self.indexes_unsynced
            or (self._index is not None and self._index.handle is not None)
            or (self._time_index is not None and self._time_index.handle is not None)
        )

    def let_go(self) -> None:
        """Drop the handle and the indexes of an older segment (the cache is full).

        The handle is not closed here: a file range being sent may still hold it, and
        its descriptor closes when the last holder is gone.
        """
        if not self.evictable:
            return
        self._log = None
        self._index = None
        self._time_index = None

    # --- Timestamps -----------------------------------------------------------------

    @property
    def max_timestamp(self) -> int:
        """The largest batch timestamp in the segment (-1 if none).

        An older segment not read since start takes its time index's last entry, which
        Kafka (and this engine, since ADR 0016) writes with the largest timestamp when
        a segment stops being active; the scrub replaces it with the exact value.
        """
        if self._max_timestamp is None:
            self._max_timestamp, self.max_timestamp_offset = self._last_time_entry()
        return self._max_timestamp

    @max_timestamp.setter
    def max_timestamp(self, value: int) -> None:
        self._max_timestamp = value

    def _last_time_entry(self) -> tuple[int, int]:
        if self._time_index is not None:
            return self._time_index.last_entry()
        path = self._path(".timeindex")
        if not self.fs.exists(path):
            return -1, -1
        handle = self.fs.open(path)
        try:
            size = handle.size()
            if size < TIME_ENTRY.size or size % TIME_ENTRY.size:
                return -1, -1
            timestamp, relative = TIME_ENTRY.unpack(handle.read(size - TIME_ENTRY.size, 12))
        finally:
            handle.close()
        offset = self.base_offset + relative
        if not self.base_offset <= offset < max(self.next_offset, self.base_offset + 1):
            return -1, -1
        return timestamp, offset

    # --- Appending ------------------------------------------------------------------

    def append(
        self, buf: memoryview, headers: list[BatchHeader], index_interval_bytes: int
    ) -> None:
        """Append whole batches (already validated, offsets assigned) in one write."""
        position = self.size
        self.log.append(buf)
        shift = position - headers[0].position
        self._index_batches(
            [h._replace(position=h.position + shift) for h in headers], index_interval_bytes
        )
        self.size = position + len(buf)
        self.next_offset = headers[-1].next_offset
        self.unflushed = True

    def flush(self) -> None:
        # Only the log is synced: an active segment's indexes are synced when it rolls
        # or the log closes cleanly, and checked where used, so syncing them on every
        # flush would double the journal commits for no durability.
        if self.unflushed:
            self.log.fsync()
            self.unflushed = False

    # --- Reading --------------------------------------------------------------------

    def headers_from(
        self, position: int, end: int, entry_last_offset: int = -1
    ) -> Iterator[BatchHeader]:
        """Batch headers from ``position`` (a batch boundary) while they start before ``end``.

        Reads windows of the file rather than one header per call, so a scan over many
        small batches costs few reads. With ``entry_last_offset``, ``position`` comes
        from an index entry naming that last offset, and the first header is checked
        against it (``_StaleIndex`` if it disagrees). A header that cannot be a batch's
        is corruption: CorruptLogError.
        """
        expect = entry_last_offset
        handle = self.log
        while position < end:
            window = handle.read(position, min(SCAN_WINDOW, end - position))
            pos = 0
            while pos + RECORD_BATCH_OVERHEAD <= len(window):
                h = header_at(window, pos)
                sane = h.magic == MAGIC and h.batch_length >= MIN_BATCH_LENGTH
                if expect >= 0:
                    if not sane or h.last_offset != expect:
                        raise _StaleIndex(
                            f"the entry for offset {expect} at position {position + pos} "
                            "does not match the batch there"
                        )
                    expect = -1
                if not sane:
                    raise CorruptLogError(
                        self.log_path,
                        position + pos,
                        f"not a batch header (magic {h.magic}, batchLength {h.batch_length})",
                    )
                yield h._replace(position=position + pos)
                pos += h.batch_length + LOG_OVERHEAD
            if pos == 0:
                return  # not even one header left: a torn tail
            position += pos

    def _checked(self, operation: Callable[[], _T]) -> _T:
        """Run a lookup; when an index entry it relied on was stale, rebuild the
        indexes from the batches and run it again."""
        try:
            return operation()
        except _StaleIndex as e:
            self.rebuild_indexes(str(e))
        try:
            return operation()
        except _StaleIndex as e:
            raise CorruptLogError(self.log_path, 0, f"rebuilt index still disagrees: {e}") from e

    def _batch_at_or_after(self, offset: int) -> BatchHeader | None:
        """The header of the batch holding ``offset`` (or the first after it)."""
        return self._checked(lambda: self._find_batch(offset))

    def _find_batch(self, offset: int) -> BatchHeader | None:
        position, entry = self.index.floor(offset)
        for h in self.headers_from(position, self.size, entry):
            if h.base_offset + h.last_offset_delta >= offset:
                return h
        return None

    def position_of(self, offset: int) -> int:
        """Start of the batch holding ``offset``; the segment's size past its end."""
        if offset >= self.next_offset:
            return self.size
        h = self._batch_at_or_after(offset)
        return self.size if h is None else h.position

    def read(self, offset: int, max_bytes: int, max_offset: int) -> FileRange | None:
        """Whole batches from the one holding ``offset``, below ``max_offset``.

        At most ``max_bytes``, except that the first batch is returned whole even when
        larger (Kafka's rule, so a consumer with a small limit still makes progress).
        """
        if offset >= self.next_offset or offset >= max_offset:
            return None
        return self._checked(lambda: self._read(offset, max_bytes, max_offset))

    def _read(self, offset: int, max_bytes: int, max_offset: int) -> FileRange | None:
        first = self._find_batch(offset)
        if first is None or first.base_offset >= max_offset:
            return None
        end = (
            self._position_of_unchecked(max_offset) if max_offset < self.next_offset else self.size
        )
        limit = first.position + max(max_bytes, first.size_in_bytes)
        if end > limit:
            # Find the last batch boundary at or below the limit, scanning from the
            # nearest indexed position (at most index.interval.bytes of headers).
            boundary, entry = self.index.floor_by_position(limit)
            if boundary <= first.position:
                boundary, entry = first.position, -1
            for h in self.headers_from(boundary, end, entry):
                if h.end > limit:
                    break
                boundary = h.end
            end = max(boundary, first.end)
        return FileRange(self.log, first.position, end - first.position)

    def _position_of_unchecked(self, offset: int) -> int:
        h = self._find_batch(offset)
        return self.size if h is None else h.position

    def first_offset_with_timestamp(self, timestamp: int) -> BatchHeader | None:
        """The first batch whose max timestamp is at or above ``timestamp``."""
        return self._checked(lambda: self._first_with_timestamp(timestamp))

    def _first_with_timestamp(self, timestamp: int) -> BatchHeader | None:
        start, entry_timestamp = self.time_index.floor(timestamp)
        h = self._find_batch(start)
        if entry_timestamp >= 0 and (
            h is None or h.last_offset != start or h.max_timestamp != entry_timestamp
        ):
            raise _StaleIndex(
                f"the time index entry ({entry_timestamp}, {start}) does not match the "
                "batch at that offset"
            )
        if h is None:
            return None
        for header in self.headers_from(h.position, self.size):
            if header.max_timestamp >= timestamp:
                return header
        return None

    def rebuild_indexes(self, reason: str) -> None:
        """Rebuild both indexes from the batch headers (no CRC: the batches were
        validated at start, or are scrubbed in the background), with a log line."""
        log.warning("%s: rebuilding its indexes from the batches: %s", self.log_path, reason)
        # Keep the handles an active segment has: a second handle on the same file
        # would not see the first one's size.
        old_index, old_time_index = self._index, self._time_index
        self._index = OffsetIndex(old_index.handle if old_index else None, self.base_offset)
        self._time_index = TimeIndex(
            old_time_index.handle if old_time_index else None, self.base_offset
        )
        self._open_index_files()
        self._index.reset()
        self._time_index.reset()
        self._max_timestamp = -1
        self.max_timestamp_offset = -1
        self.bytes_since_last_index = 0
        for h in self.headers_from(0, self.size):
            self._index_batches([h], self.index_interval_bytes)
        if not self.is_active:
            if self._max_timestamp >= 0:
                self._time_index.append(self._max_timestamp, self.max_timestamp_offset)
            # Synced and closed at once: no flush may come soon to an idle partition,
            # and a rebuild is rare (after a power loss left a stale file).
            for rebuilt in (self._index, self._time_index):
                if rebuilt.handle is not None:
                    handle, rebuilt.handle = rebuilt.handle, None
                    try:
                        handle.fsync()
                    finally:
                        handle.close()

    # --- Truncation and recovery ----------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove the batch holding ``offset`` and all after it; return the bytes removed.

        Truncation works on whole batches, as Kafka's does: the segment then ends at the
        base offset of the first batch removed.
        """
        first = self._batch_at_or_after(offset) if offset < self.next_offset else None
        if first is None:
            return 0
        position = first.position
        removed = self.size - position
        self._open_index_files()
        self.log.truncate(position)
        self.index.truncate_to_position(position)
        self.time_index.truncate_to_offset(first.base_offset)
        self.size = position
        self.next_offset = first.base_offset
        self.bytes_since_last_index = 0
        self._max_timestamp, self.max_timestamp_offset = self.time_index.last_entry()
        self.unflushed = True
        self._cut_unverified(position)
        self.truncate_txn_index(self.next_offset)
        return removed

    def _cut_unverified(self, position: int) -> None:
        self.generation += 1
        if self.unverified_end > position:
            # What the scrub had left to read below the cut is still unread; the part
            # past it is gone. The scrub now ends where the log does.
            self.unverified_end = position
            self.verified_from_offset = self.next_offset
        self.scrubbed_to = min(self.scrubbed_to, self.unverified_end)
        if self.scrubbed_to == self.unverified_end:
            self.unverified_end = self.scrubbed_to = 0

    def recover(
        self, index_interval_bytes: int, start_position: int = 0, start_offset: int | None = None
    ) -> RecoveryResult:
        """Validate every batch from ``start_position`` (CRC, lengths, dense offsets);
        rebuild both indexes from there. ``start_offset`` is the base offset of the
        batch at ``start_position`` (the segment's base offset when it is 0).

        Stops at the first invalid batch and returns how many bytes were valid; the
        caller decides what to do with the rest (quarantine, or take the partition
        offline if that part was already known to be durable).
        """
        # The indexes are set up here, not loaded through ``index``: a file that does
        # not load is rewritten, never rebuilt by a scan of batches not validated yet.
        old_index, old_time_index = self._index, self._time_index
        if start_position == 0:
            expected = self.base_offset
            self._index = OffsetIndex(old_index.handle if old_index else None, self.base_offset)
            self._time_index = TimeIndex(
                old_time_index.handle if old_time_index else None, self.base_offset
            )
            self._open_index_files()
            self._index.reset()
            self._time_index.reset()
            self._max_timestamp = self.max_timestamp_offset = -1
        else:
            expected = self.base_offset if start_offset is None else start_offset
            loaded_index = old_index or self.try_index()
            loaded_time_index = old_time_index or self._try_time_index()
            self._index = loaded_index or OffsetIndex(None, self.base_offset)
            self._time_index = loaded_time_index or TimeIndex(None, self.base_offset)
            self._open_index_files()
            if loaded_index is None:
                self._index.reset()
            if loaded_time_index is None:
                self._time_index.reset()
            # Entries below the start stay (the batch at the start keeps its own).
            self._index.truncate_to_position(start_position + 1)
            self._time_index.truncate_to_offset(expected)
            self._max_timestamp, self.max_timestamp_offset = self._time_index.last_entry()
        self.bytes_since_last_index = 0
        size = self.log.size()
        epochs: list[tuple[int, int]] = []

        def on_batch(h: BatchHeader) -> None:
            self._index_batches([h], index_interval_bytes)
            if h.partition_leader_epoch >= 0 and (
                not epochs or epochs[-1][0] != h.partition_leader_epoch
            ):
                epochs.append((h.partition_leader_epoch, h.base_offset))

        check = validate_range(self.log, start_position, size, size, expected, on_batch)
        self.size = size
        self.next_offset = check.next_offset
        if not self.is_active:
            self.indexes_unsynced = True
        return RecoveryResult(check.position, check.next_offset, check.problem, epochs)

    def _index_batches(self, headers: list[BatchHeader], index_interval_bytes: int) -> None:
        index = self.index
        time_index = self.time_index
        for h in headers:
            self.bytes_since_last_index += h.size_in_bytes
            max_timestamp = self._max_timestamp
            if max_timestamp is None or h.max_timestamp > max_timestamp:
                self._max_timestamp = h.max_timestamp
                self.max_timestamp_offset = h.last_offset
                if self.bytes_since_last_index >= index_interval_bytes:
                    time_index.append(h.max_timestamp, h.last_offset)
            if self.bytes_since_last_index >= index_interval_bytes:
                index.append(h.last_offset, h.position)
                self.bytes_since_last_index = 0

    def cut_to(self, position: int) -> None:
        """Cut the log file at a recovered position (indexes were rebuilt up to it)."""
        self.log.truncate(position)
        self.size = position
        self.unflushed = True
        self._cut_unverified(position)

    def close(self, *, sync_indexes: bool = True) -> None:
        """Let go of every file. With ``sync_indexes`` (a clean stop), the index files
        first get the time index's last entry and an fsync where they changed, so that
        the next start can trust them.

        The ``.log`` handle is dropped rather than closed: a file range being sent may
        still hold it.
        """
        self.cache.forget(self)
        indexes = [i for i in (self._index, self._time_index) if i is not None]
        try:
            if sync_indexes and (self.is_active or self.indexes_unsynced):
                if self.is_active and self._time_index is not None:
                    max_timestamp = self._max_timestamp
                    if max_timestamp is not None and max_timestamp >= 0:
                        self._time_index.append(max_timestamp, self.max_timestamp_offset)
                for index in indexes:
                    if index.handle is not None:
                        index.handle.fsync()
        except OSError as e:
            log.error("%s: cannot sync its index files: %s", self.log_path, e)
        finally:
            for index in indexes:
                if index.handle is not None:
                    index.handle.close()
                    index.handle = None
            if self.txn_index is not None:
                self.txn_index.handle.close()
                self.txn_index = None
            self.indexes_unsynced = False
            self.is_active = False
            self._log = None
            self._index = None
            self._time_index = None

    def delete(self) -> None:
        """Let go of and remove the segment's three files (the caller fsyncs the
        directory). A reader still holding the ``.log`` handle keeps reading it: the OS
        frees the bytes once the last descriptor is closed."""
        self.close(sync_indexes=False)
        self.deleted = True
        self.generation += 1
        for path in self.paths():
            if self.fs.exists(path):
                self.fs.remove(path)
