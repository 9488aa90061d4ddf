"""One cleaning pass over a log's files: the offset map, then the cleaned segments.

It runs on a cleaner thread while the log goes on serving: it touches only the files
named in its :class:`CleaningJob` (opened on their own handles, never the segments'
cached ones) and the ``.cleaned`` files it writes beside them, and the log's state not
at all. What it made is swapped in afterwards, on the log's own thread, by
:meth:`~odradek.storage.log.PartitionLog.commit_cleaning`, which first checks that
none of the source segments changed meanwhile. Every source batch is checked as start-up
recovery checks it (lengths, CRC, dense offsets:
:class:`~odradek.storage.validation.ValidBatches`) and its records as they are walked:
a bad one raises :class:`~odradek.core.errors.CorruptLogError` and
the owner takes the log offline; nothing damaged is rewritten under a new CRC.

``pace`` is told the bytes each step read or wrote, so that the owner can hold the pass
to ``log.cleaner.io.max.bytes.per.second`` (it may sleep: it runs on the cleaner thread).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from odradek.core.errors import CorruptLogError, DecodeError, InvalidRecordBatchError
from odradek.protocol.record_batch import BatchHeader, Buffer, validate_batch
from odradek.storage.cleaner.batches import clean_batch, filler_batch
from odradek.storage.cleaner.offset_map import OffsetMap
from odradek.storage.cleaner.records import raw_records, records_section
from odradek.storage.fs import FileHandle, FileSystem, join
from odradek.storage.index import OffsetIndex, TimeIndex
from odradek.storage.segment import segment_name
from odradek.storage.txn_index import TXN_INDEX_SUFFIX, AbortedTxn, encode_entries
from odradek.storage.validation import ValidBatches

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
SEGMENT_FILES = (".log", ".index", ".timeindex")


@dataclass(frozen=True, slots=True)
class SourceSegment:
    """A segment as the job found it; the commit checks it is still so."""

    base_offset: int
    next_offset: int
    size: int
    generation: int
    aborted: tuple[AbortedTxn, ...] = ()
    """Its transaction index: the cleaned segment carries every entry on (the markers
    stay), so read_committed readers of what is left still learn of each abort."""


@dataclass(frozen=True, slots=True)
class CleaningJob:
    directory: str
    groups: tuple[tuple[SourceSegment, ...], ...]
    """Every segment from the log's first up to the last dirty one, grouped into the
    cleaned segments they become."""
    first_dirty: int
    first_uncleanable: int
    last_batch_of_producers: frozenset[int]
    """The last offsets of each live producer's last batch: kept even when empty."""
    now_ms: int
    delete_retention_ms: int
    index_interval_bytes: int
    map_capacity: int
    aborted: tuple[AbortedTxn, ...] = ()
    """Every aborted transaction with records below ``first_uncleanable`` (its marker
    may lie above it): their records are dropped and never enter the offset map."""
    dirty_ratio: float = 0.0
    """The dirty part's share of the log's cleanable bytes (the dirtiest is cleaned first)."""
    why: str = ""
    """Why the pass is due (the dirty ratio, or ``max.compaction.lag.ms``), for its log line."""


@dataclass(slots=True)
class CleaningStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_kept: int = 0
    records_removed: int = 0
    batches_dropped: int = 0


@dataclass(frozen=True, slots=True)
class CleanedSegment:
    base_offset: int
    next_offset: int
    size: int
    sources: tuple[SourceSegment, ...]


@dataclass(frozen=True, slots=True)
class CleaningResult:
    job: CleaningJob
    segments: tuple[CleanedSegment, ...]
    map_end: int
    """The first offset the map did not cover: the log's next first dirty offset."""
    stats: CleaningStats = field(default_factory=CleaningStats)


class AbortedRanges:
    """Which batches belong to an aborted transaction: a transactional data batch of a
    producer at an offset from one of its aborted transactions' first offset to its
    marker."""

    def __init__(self, aborted: Sequence[AbortedTxn]) -> None:
        self._by_producer: dict[int, list[tuple[int, int]]] = {}
        for txn in aborted:
            self._by_producer.setdefault(txn.producer_id, []).append(
                (txn.first_offset, txn.last_offset)
            )
        for ranges in self._by_producer.values():
            ranges.sort()

    def holds(self, header: BatchHeader) -> bool:
        if not header.is_transactional or header.is_control:
            return False
        ranges = self._by_producer.get(header.producer_id)
        if not ranges:
            return False
        k = bisect.bisect_right(ranges, (header.base_offset, 2**63)) - 1
        return k >= 0 and ranges[k][0] <= header.base_offset <= ranges[k][1]


def cleaned_path(directory: str, base_offset: int, suffix: str) -> str:
    return join(directory, segment_name(base_offset, suffix) + CLEANED_SUFFIX)


def _batches(
    handle: FileHandle, source: SourceSegment, path: str, pace: Callable[[int], None]
) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Every batch of a source segment with its bytes, checked as recovery checks them
    (lengths, CRC, dense offsets from the segment's base); a problem is corruption."""
    batches = ValidBatches(handle, 0, source.size, source.size, source.base_offset, pace)
    for header in batches:
        yield header, batches.data(header)
    if batches.problem is not None:
        raise CorruptLogError(path, batches.position, batches.problem)


def _open(fs: FileSystem, directory: str, source: SourceSegment) -> tuple[FileHandle, str]:
    path = join(directory, segment_name(source.base_offset, ".log"))
    return fs.open(path), path


def build_offset_map(
    fs: FileSystem, job: CleaningJob, offsets: OffsetMap, pace: Callable[[int], None]
) -> int:
    """Map every key of the dirty part to its last offset; return the map's end (the
    first offset not mapped: the dirty part's end, or a batch boundary where the map
    filled)."""
    aborted = AbortedRanges(job.aborted)
    dirty = [
        s
        for group in job.groups
        for s in group
        if s.next_offset > job.first_dirty and s.base_offset < job.first_uncleanable
    ]
    for source in dirty:
        handle, path = _open(fs, job.directory, source)
        try:
            for header, data in _batches(handle, source, path, pace):
                if header.next_offset <= job.first_dirty or header.is_control:
                    continue
                if aborted.holds(header):
                    # An aborted value supersedes nothing: the committed one before it
                    # stays the key's last (Kafka's buildOffsetMap skips them too).
                    continue
                if not offsets.has_room_for(header.records_count) and len(offsets):
                    return header.base_offset
                for record in _records(data, path, header):
                    if record[0] is not None:
                        offsets.put(record[0], header.base_offset + record[1])
        finally:
            handle.close()
    return job.first_uncleanable


def _records(data: Buffer, path: str, header: BatchHeader) -> list[tuple[bytes | None, int]]:
    try:
        section = records_section(data, header)
        return [(r.key, r.offset_delta) for r in raw_records(section, header.records_count)]
    except DecodeError as e:
        raise CorruptLogError(path, header.position, f"records do not decode: {e}") from e


class _Writer:
    """The three ``.cleaned`` files of one cleaned segment, indexed as appended."""

    def __init__(
        self,
        fs: FileSystem,
        directory: str,
        base: int,
        interval: int,
        aborted: Sequence[AbortedTxn] = (),
    ) -> None:
        self.base = base
        self.interval = interval
        suffixes = SEGMENT_FILES + ((TXN_INDEX_SUFFIX,) if aborted else ())
        self.handles = [
            fs.open(cleaned_path(directory, base, suffix), create=True) for suffix in suffixes
        ]
        for h in self.handles:
            h.truncate(0)
        if aborted:
            self.handles[3].append(encode_entries(aborted))
        self.index = OffsetIndex(self.handles[1], base)
        self.time_index = TimeIndex(self.handles[2], base)
        self.size = 0
        self.since_index = 0
        self.max_timestamp = -1
        self.max_timestamp_offset = -1
        self.next_offset = base

    def append(self, data: Buffer) -> None:
        header = validate_batch(data, compacted=True)
        self.handles[0].append(data)
        position = self.size
        self.size += len(data)
        self.next_offset = header.next_offset
        # The segment's own indexing rule (LogSegment._index_batches).
        self.since_index += len(data)
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.max_timestamp_offset = header.last_offset
            if self.since_index >= self.interval:
                self.time_index.append(header.max_timestamp, header.last_offset)
        if self.since_index >= self.interval:
            self.index.append(header.last_offset, position)
            self.since_index = 0

    def finish(self) -> None:
        """The time index's last entry, as a segment gets when it stops being active,
        and every file synced: the swap makes them the log's."""
        try:
            if self.max_timestamp >= 0:
                self.time_index.append(self.max_timestamp, self.max_timestamp_offset)
            for h in self.handles:
                h.fsync()
        finally:
            for h in self.handles:
                h.close()

    def abandon(self) -> None:
        for h in self.handles:
            h.close()


def clean_group(
    fs: FileSystem,
    job: CleaningJob,
    group: Sequence[SourceSegment],
    offsets: OffsetMap,
    stats: CleaningStats,
    pace: Callable[[int], None],
) -> CleanedSegment:
    """Write the cleaned segment of ``group`` as ``.cleaned`` files, synced."""
    writer = _Writer(
        fs, job.directory, group[0].base_offset, job.index_interval_bytes,
        [t for source in group for t in source.aborted],
    )  # fmt: skip
    aborted = AbortedRanges(job.aborted)
    gap: tuple[int, int] | None = None  # (first offset, leader epoch) of a dropped run

    def close_gap(end: int) -> None:
        nonlocal gap
        if gap is not None and end > gap[0]:
            writer.append(filler_batch(gap[0], end, gap[1]))
        gap = None

    try:
        for source in group:
            handle, path = _open(fs, job.directory, source)
            try:
                for header, data in _batches(handle, source, path, pace):
                    try:
                        cleaned = clean_batch(
                            data,
                            header._replace(position=0),
                            offsets,
                            job.now_ms,
                            job.delete_retention_ms,
                            last_of_producer=header.last_offset in job.last_batch_of_producers,
                            aborted=aborted.holds(header),
                        )
                    except (DecodeError, InvalidRecordBatchError) as e:
                        raise CorruptLogError(path, header.position, str(e)) from e
                    stats.records_kept += cleaned.kept
                    stats.records_removed += cleaned.removed
                    if cleaned.data is None:
                        stats.batches_dropped += 1
                        if gap is not None and gap[1] != header.partition_leader_epoch:
                            close_gap(header.base_offset)
                        if gap is None:
                            gap = (header.base_offset, header.partition_leader_epoch)
                        continue
                    close_gap(header.base_offset)
                    writer.append(cleaned.data)
                    pace(len(cleaned.data))
            finally:
                handle.close()
        close_gap(group[-1].next_offset)
        if writer.next_offset != group[-1].next_offset:
            raise CorruptLogError(
                join(job.directory, segment_name(group[-1].base_offset, ".log")),
                group[-1].size,
                f"the segments end at offset {writer.next_offset}, not at {group[-1].next_offset}",
            )
        writer.finish()
    except BaseException:
        writer.abandon()
        raise
    stats.bytes_written += writer.size
    stats.bytes_read += sum(s.size for s in group)
    return CleanedSegment(writer.base, group[-1].next_offset, writer.size, tuple(group))


def run_pass(
    fs: FileSystem, job: CleaningJob, pace: Callable[[int], None] = lambda _n: None
) -> CleaningResult:
    """The whole pass: the map over the dirty part, then every group whose segments
    lie below the map's end cleaned into ``.cleaned`` files. On an error the files
    written so far are removed (a crash leaves them to start-up, which removes them)."""
    offsets = OffsetMap(job.map_capacity)
    map_end = build_offset_map(fs, job, offsets, pace)
    stats = CleaningStats()
    cleaned: list[CleanedSegment] = []
    attempted: list[int] = []
    try:
        for group in job.groups:
            if group[0].base_offset >= map_end:
                break
            attempted.append(group[0].base_offset)
            cleaned.append(clean_group(fs, job, group, offsets, stats, pace))
    except BaseException:
        remove_cleaned(fs, job.directory, attempted)
        raise
    return CleaningResult(job, tuple(cleaned), map_end, stats)


def remove_cleaned(fs: FileSystem, directory: str, bases: Sequence[int]) -> None:
    for base in bases:
        for suffix in (*SEGMENT_FILES, TXN_INDEX_SUFFIX):
            path = cleaned_path(directory, base, suffix)
            if fs.exists(path):
                fs.remove(path)
