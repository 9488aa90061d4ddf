"""Sparse segment indexes: ``.index`` (offset -> position) and ``.timeindex``.

Kafka's on-disk layouts: an offset index entry is ``relative offset int32, position
int32`` (8 bytes); a time index entry is ``timestamp int64, relative offset int32``
(12 bytes), both relative to the segment's base offset. Entries are appended every
``index.interval.bytes`` of log; an offset entry names the *last* offset of the batch
that starts at its position, so the floor entry of any offset points at or before the
batch holding it.

The entries also live in memory (two ``array``s per index, 12 to 20 bytes per 4 KiB
of log) so lookups are a bisect. An index is only a hint: if its file is missing,
torn, or disagrees with the log, it is rebuilt from the log. Since the start-up no
longer reads every segment (ADR 0016), a loaded index is also checked where it is
used: each lookup returns the entry it relied on, and the segment compares that entry
with the batch header it then reads (:meth:`OffsetIndex.floor`, :meth:`TimeIndex.floor`).

The file handle is optional: only the active segment (and a segment being rewritten)
keeps its index files open; an older segment's entries are read once into memory and
its files closed, so that a partition holds few file descriptors.
"""

from __future__ import annotations

import bisect
import itertools
import operator
import struct
import sys
from array import array

from odradek.core.invariant import invariant
from odradek.storage.fs import FileHandle

OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")


def _increasing(values: array[int]) -> bool:
    # map/all run in C: a 1 GiB segment's 262,144 entries are checked in milliseconds.
    return all(map(operator.lt, values, itertools.islice(values, 1, None)))


def _empty(handle: FileHandle) -> None:
    # An empty file is left alone: a start with 1,000 empty partitions would otherwise
    # pay 2,000 ftruncate calls (about 0.1 s) and sync indexes that never changed.
    if handle.size():
        handle.truncate(0)


class OffsetIndex:
    """Entries as two ``array("i")``: offsets relative to the base offset, positions.

    Both are int32 in the file too, so loading a file is one ``frombytes`` and two
    slices (milliseconds for the 262,144 entries of a 1 GiB segment), and memory is the
    file's 8 bytes per entry.
    """

    def __init__(self, handle: FileHandle | None, base_offset: int) -> None:
        self.handle = handle
        self.base_offset = base_offset
        self._relative = array("i")
        self._positions = array("i")

    @classmethod
    def load(
        cls, handle: FileHandle | None, base_offset: int, log_size: int, data: bytes | None = None
    ) -> OffsetIndex | None:
        """Read the entries (from ``data`` if given, else the file); None when they are
        not a valid index for a log of ``log_size`` bytes."""
        index = cls(handle, base_offset)
        if data is None:
            invariant(handle is not None, "an index load needs its file or its bytes")
            assert handle is not None  # for mypy: invariant() raised otherwise
            data = handle.read(0, handle.size())
        if len(data) % OFFSET_ENTRY.size:
            return None
        if not data:
            return index
        # Both fields are big-endian int32: one array of them, byte-swapped on a
        # little-endian machine, split into its even and odd items.
        raw = array("i")
        raw.frombytes(data)
        if sys.byteorder == "little":
            raw.byteswap()
        relative = raw[0::2]
        positions = raw[1::2]
        if (
            relative[0] < 0
            or positions[0] < 0
            or positions[-1] >= log_size
            or not _increasing(relative)
            or not _increasing(positions)
        ):
            return None
        index._relative = relative
        index._positions = positions
        return index

    @property
    def offsets(self) -> list[int]:
        """The last offset of each indexed batch (absolute)."""
        return [self.base_offset + r for r in self._relative]

    @property
    def positions(self) -> list[int]:
        return list(self._positions)

    def __len__(self) -> int:
        return len(self._relative)

    def size_in_bytes(self) -> int:
        return len(self._relative) * OFFSET_ENTRY.size

    def _writable(self) -> FileHandle:
        invariant(self.handle is not None, "an index without its file cannot change")
        assert self.handle is not None  # for mypy: invariant() raised otherwise
        return self.handle

    def append(self, last_offset: int, position: int) -> None:
        relative = last_offset - self.base_offset
        if self._relative and (relative <= self._relative[-1] or position <= self._positions[-1]):
            return
        self._writable().append(OFFSET_ENTRY.pack(relative, position))
        self._relative.append(relative)
        self._positions.append(position)

    def floor(self, offset: int) -> tuple[int, int]:
        """``(position, last offset)`` of the indexed batch to scan from for ``offset``:
        at or before the batch holding it; ``(0, -1)`` when no entry is below it.

        The caller checks that the batch at that position ends at that last offset
        before trusting the position (a stale file after a power loss can disagree).
        Even on entries out of order the entry returned is never above ``offset``:
        bisect only ever steps past entries it compared as smaller.
        """
        relative = offset - self.base_offset
        i = bisect.bisect_left(self._relative, relative)
        if i < len(self._relative) and self._relative[i] == relative:
            return self._positions[i], offset  # the indexed batch ends exactly at ``offset``
        # Entry i-1 names a batch whose last offset is below ``offset``; the next batch
        # starts after it, so scanning from its position is safe and short.
        if i == 0:
            return 0, -1
        return self._positions[i - 1], self.base_offset + self._relative[i - 1]

    def floor_position(self, offset: int) -> int:
        """A batch boundary at or before the batch holding ``offset`` (0 if none)."""
        return self.floor(offset)[0]

    def floor_by_position(self, position: int) -> tuple[int, int]:
        """``(position, last offset)`` of the greatest indexed batch position not above
        ``position``; ``(0, -1)`` if none."""
        i = bisect.bisect_right(self._positions, position)
        if i == 0:
            return 0, -1
        return self._positions[i - 1], self.base_offset + self._relative[i - 1]

    def floor_entry_by_position(self, position: int) -> int:
        """The greatest indexed batch position not above ``position`` (0 if none)."""
        return self.floor_by_position(position)[0]

    def entries_between(self, start: int, end: int) -> list[tuple[int, int]]:
        """``(last offset, position)`` of the entries at positions in ``[start, end)``."""
        low = bisect.bisect_left(self._positions, start)
        high = bisect.bisect_left(self._positions, end)
        return [
            (self.base_offset + r, p)
            for r, p in zip(self._relative[low:high], self._positions[low:high], strict=True)
        ]

    def reset(self) -> None:
        """Empty the index, file included (before a rebuild from the log)."""
        del self._relative[:]
        del self._positions[:]
        _empty(self._writable())

    def truncate_to_position(self, position: int) -> None:
        """Drop entries for batches at or after ``position``."""
        i = bisect.bisect_left(self._positions, position)
        if i == len(self._positions):
            return
        del self._relative[i:]
        del self._positions[i:]
        self._writable().truncate(i * OFFSET_ENTRY.size)


class TimeIndex:
    def __init__(self, handle: FileHandle | None, base_offset: int) -> None:
        self.handle = handle
        self.base_offset = base_offset
        self.timestamps = array("q")
        self.offsets = array("q")

    @classmethod
    def load(
        cls,
        handle: FileHandle | None,
        base_offset: int,
        next_offset: int,
        data: bytes | None = None,
    ) -> TimeIndex | None:
        index = cls(handle, base_offset)
        if data is None:
            invariant(handle is not None, "an index load needs its file or its bytes")
            assert handle is not None  # for mypy: invariant() raised otherwise
            data = handle.read(0, handle.size())
        if len(data) % TIME_ENTRY.size:
            return None
        last_ts = -(2**63)
        last_offset = -1
        for ts, rel in TIME_ENTRY.iter_unpack(data):
            offset = base_offset + rel
            if rel < 0 or ts <= last_ts or offset < last_offset or offset >= next_offset:
                return None
            index.timestamps.append(ts)
            index.offsets.append(offset)
            last_ts, last_offset = ts, offset
        return index

    def __len__(self) -> int:
        return len(self.offsets)

    def max_timestamp(self) -> int:
        return self.timestamps[-1] if self.timestamps else -1

    def last_entry(self) -> tuple[int, int]:
        """``(timestamp, offset)`` of the last entry; ``(-1, -1)`` when empty."""
        return (self.timestamps[-1], self.offsets[-1]) if self.timestamps else (-1, -1)

    def _writable(self) -> FileHandle:
        invariant(self.handle is not None, "an index without its file cannot change")
        assert self.handle is not None  # for mypy: invariant() raised otherwise
        return self.handle

    def append(self, timestamp: int, offset: int) -> bool:
        """Index ``offset`` as holding ``timestamp``; only rising timestamps are kept.
        Whether an entry was written."""
        if self.timestamps and (timestamp <= self.timestamps[-1] or offset < self.offsets[-1]):
            return False
        self._writable().append(TIME_ENTRY.pack(timestamp, offset - self.base_offset))
        self.timestamps.append(timestamp)
        self.offsets.append(offset)
        return True

    def floor(self, timestamp: int) -> tuple[int, int]:
        """``(offset, timestamp)`` of the entry to scan from for the first record with a
        timestamp >= ``timestamp``: ``(base offset, -1)`` when no entry is below it.

        An entry ``(t, o)`` says that the batch ending at ``o`` has the largest
        timestamp so far, ``t``; the caller checks that batch before trusting it.
        """
        i = bisect.bisect_left(self.timestamps, timestamp)
        return (self.offsets[i - 1], self.timestamps[i - 1]) if i > 0 else (self.base_offset, -1)

    def floor_offset(self, timestamp: int) -> int:
        """An offset at or before the first record with a timestamp >= ``timestamp``."""
        return self.floor(timestamp)[0]

    def entries_between(self, first_offset: int, last_offset: int) -> list[tuple[int, int]]:
        """``(timestamp, offset)`` of the entries with offsets in the inclusive range."""
        low = bisect.bisect_left(self.offsets, first_offset)
        high = bisect.bisect_right(self.offsets, last_offset)
        return list(zip(self.timestamps[low:high], self.offsets[low:high], strict=True))

    def reset(self) -> None:
        """Empty the index, file included (before a rebuild from the log)."""
        del self.timestamps[:]
        del self.offsets[:]
        _empty(self._writable())

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries for offsets at or after ``offset``."""
        i = bisect.bisect_left(self.offsets, offset)
        if i == len(self.offsets):
            return
        del self.timestamps[i:]
        del self.offsets[i:]
        self._writable().truncate(i * TIME_ENTRY.size)
