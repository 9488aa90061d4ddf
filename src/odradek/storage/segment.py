"""One log segment: ``<base offset>.log`` with its ``.index`` and ``.timeindex``.

A segment holds whole record batches, offsets dense and increasing from its base
offset. It never decodes records: appends take validated batches, reads return a file
range on batch boundaries, and recovery checks each batch's header, CRC and offset.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from odradek.core.errors import InvalidRecordBatchError
from odradek.protocol.record_batch import (
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    header_at,
    validate_batch,
)
from odradek.storage.fs import FileHandle, FileSystem, join
from odradek.storage.index import OffsetIndex, TimeIndex

# Big enough for the batches between two index entries (index.interval.bytes is 4 KiB
# by default), small enough that a lookup that needs one header reads little.
SCAN_WINDOW = 8 * 1024
RECOVERY_CHUNK = 1024 * 1024


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


class LogSegment:
    def __init__(
        self,
        fs: FileSystem,
        directory: str,
        base_offset: int,
        log: FileHandle,
        index: OffsetIndex,
        time_index: TimeIndex,
        created_ms: int,
    ) -> None:
        self.fs = fs
        self.directory = directory
        self.base_offset = base_offset
        self.log = log
        self.index = index
        self.time_index = time_index
        self.created_ms = created_ms
        self.size = log.size()
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.bytes_since_last_index = 0
        self.unflushed = False

    # --- Opening --------------------------------------------------------------------

    @classmethod
    def create(cls, fs: FileSystem, directory: str, base_offset: int, now_ms: int) -> LogSegment:
        handles = [
            fs.open(join(directory, segment_name(base_offset, s)), create=True)
            for s in (".log", ".index", ".timeindex")
        ]
        for h in handles:
            h.truncate(0)
        segment = cls(
            fs,
            directory,
            base_offset,
            handles[0],
            OffsetIndex(handles[1], base_offset),
            TimeIndex(handles[2], base_offset),
            now_ms,
        )
        segment.unflushed = True
        return segment

    @classmethod
    def open_existing(
        cls, fs: FileSystem, directory: str, base_offset: int, now_ms: int
    ) -> LogSegment:
        """Open files as they are; call :meth:`recover` or :meth:`load_indexes` next."""
        log = fs.open(join(directory, segment_name(base_offset, ".log")))
        index = fs.open(join(directory, segment_name(base_offset, ".index")), create=True)
        times = fs.open(join(directory, segment_name(base_offset, ".timeindex")), create=True)
        return cls(
            fs,
            directory,
            base_offset,
            log,
            OffsetIndex(index, base_offset),
            TimeIndex(times, base_offset),
            now_ms,
        )

    @property
    def log_path(self) -> str:
        return join(self.directory, segment_name(self.base_offset, ".log"))

    def paths(self) -> list[str]:
        return [
            join(self.directory, segment_name(self.base_offset, s))
            for s in (".log", ".index", ".timeindex")
        ]

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
        # Only the log is synced: recovery rebuilds both indexes from the log on every
        # start, so syncing them would double the journal commits for no durability.
        if self.unflushed:
            self.log.fsync()
            self.unflushed = False

    # --- Reading --------------------------------------------------------------------

    def headers_from(self, position: int, end: int) -> Iterator[BatchHeader]:
        """Batch headers from ``position`` (a batch boundary) while they start before ``end``.

        Reads windows of the file rather than one header per call, so a scan over many
        small batches costs few reads.
        """
        while position < end:
            window = self.log.read(position, min(SCAN_WINDOW, end - position))
            pos = 0
            while pos + RECORD_BATCH_OVERHEAD <= len(window):
                h = header_at(window, pos)
                yield h._replace(position=position + pos)
                pos += h.batch_length + LOG_OVERHEAD
            if pos == 0:
                return  # not even one header left: a torn tail
            position += pos

    def _batch_at_or_after(self, offset: int) -> BatchHeader | None:
        """The header of the batch holding ``offset`` (or the first after it)."""
        for h in self.headers_from(self.index.floor_position(offset), self.size):
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
        first = self._batch_at_or_after(offset)
        if first is None or first.base_offset >= max_offset:
            return None
        end = self.position_of(max_offset) if max_offset < self.next_offset else self.size
        limit = first.position + max(max_bytes, first.size_in_bytes)
        if end > limit:
            # Find the last batch boundary at or below the limit, scanning from the
            # nearest indexed position (at most index.interval.bytes of headers).
            boundary = max(self.index.floor_entry_by_position(limit), first.position)
            for h in self.headers_from(boundary, end):
                if h.end > limit:
                    break
                boundary = h.end
            end = max(boundary, first.end)
        return FileRange(self.log, first.position, end - first.position)

    def first_offset_with_timestamp(self, timestamp: int) -> BatchHeader | None:
        """The first batch whose max timestamp is at or above ``timestamp``."""
        start = self.time_index.floor_offset(timestamp)
        h = self._batch_at_or_after(start)
        if h is None:
            return None
        for header in self.headers_from(h.position, self.size):
            if header.max_timestamp >= timestamp:
                return header
        return None

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
        self.log.truncate(position)
        self.index.truncate_to_position(position)
        self.time_index.truncate_to_offset(first.base_offset)
        self.size = position
        self.next_offset = first.base_offset
        self.bytes_since_last_index = 0
        self.max_timestamp = self.time_index.max_timestamp()
        self.unflushed = True
        return removed

    def recover(self, index_interval_bytes: int) -> RecoveryResult:
        """Validate every batch (CRC, lengths, dense offsets); rebuild both indexes.

        Stops at the first invalid batch and returns how many bytes were valid; the
        caller decides what to do with the rest (quarantine, or take the partition
        offline if that part was already known to be durable).
        """
        self.index.reset()
        self.time_index.reset()
        self.max_timestamp = -1
        self.bytes_since_last_index = 0
        size = self.log.size()
        expected = self.base_offset
        position = 0
        problem: str | None = None
        epochs: list[tuple[int, int]] = []
        while position < size and problem is None:
            length = _batch_length_at(self.log, position)
            if length is None or position + length > size:
                problem = f"TRUNCATED at position {position}: a batch runs past the file end"
                break
            # Read many batches at once, but always at least the whole first one.
            chunk = self.log.read(position, max(length, min(RECOVERY_CHUNK, size - position)))
            pos = 0
            while pos < len(chunk):
                try:
                    h = validate_batch(chunk, pos)
                except InvalidRecordBatchError as e:
                    if e.problem != "TRUNCATED" or pos == 0:
                        problem = f"{e.problem} at position {position + pos}: {e.detail}"
                    break  # a batch straddling the chunk is read whole on the next turn
                if h.base_offset != expected:
                    # The base offset lies outside the CRC; density is what checks it.
                    problem = (
                        f"offset {h.base_offset} at position {position + pos}, expected {expected}"
                    )
                    break
                self._index_batches([h._replace(position=position + pos)], index_interval_bytes)
                if h.partition_leader_epoch >= 0 and (
                    not epochs or epochs[-1][0] != h.partition_leader_epoch
                ):
                    epochs.append((h.partition_leader_epoch, h.base_offset))
                expected = h.next_offset
                pos = h.end
            position += pos
        self.size = size
        self.next_offset = expected
        return RecoveryResult(position, expected, problem, epochs)

    def _index_batches(self, headers: list[BatchHeader], index_interval_bytes: int) -> None:
        for h in headers:
            self.bytes_since_last_index += h.size_in_bytes
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp = h.max_timestamp
                if self.bytes_since_last_index >= index_interval_bytes:
                    self.time_index.append(h.max_timestamp, h.last_offset)
            if self.bytes_since_last_index >= index_interval_bytes:
                self.index.append(h.last_offset, h.position)
                self.bytes_since_last_index = 0

    def cut_to(self, position: int) -> None:
        """Cut the log file at a recovered position (indexes were rebuilt up to it)."""
        self.log.truncate(position)
        self.size = position
        self.unflushed = True

    def close(self) -> None:
        for h in (self.log, self.index.handle, self.time_index.handle):
            h.close()

    def delete(self) -> None:
        """Close and remove the segment's three files (the caller fsyncs the directory)."""
        self.close()
        for path in self.paths():
            self.fs.remove(path)


def _batch_length_at(handle: FileHandle, position: int) -> int | None:
    head = handle.read(position, LOG_OVERHEAD)
    if len(head) < LOG_OVERHEAD:
        return None
    length = int.from_bytes(head[8:12], "big", signed=True)
    return None if length < 0 else length + LOG_OVERHEAD
