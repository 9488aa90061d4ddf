"""Sparse segment indexes: ``.index`` (offset -> position) and ``.timeindex``.

Kafka's on-disk layouts: an offset index entry is ``relative offset int32, position
int32`` (8 bytes); a time index entry is ``timestamp int64, relative offset int32``
(12 bytes), both relative to the segment's base offset. Entries are appended every
``index.interval.bytes`` of log; an offset entry names the *last* offset of the batch
that starts at its position, so the floor entry of any offset points at or before the
batch holding it.

The entries also live in memory (two ``array``s per index, 12 to 20 bytes per 4 KiB
of log) so lookups are a bisect. An index is only a hint: if its file is missing,
torn, or disagrees with the log, recovery rebuilds it from the log.
"""

from __future__ import annotations

import bisect
import struct
from array import array

from odradek.storage.fs import FileHandle

OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")


class OffsetIndex:
    def __init__(self, handle: FileHandle, base_offset: int) -> None:
        self.handle = handle
        self.base_offset = base_offset
        self.offsets = array("q")
        self.positions = array("q")

    @classmethod
    def load(cls, handle: FileHandle, base_offset: int, log_size: int) -> OffsetIndex | None:
        """Read the entries; None when the file is not a valid index for this log."""
        index = cls(handle, base_offset)
        data = handle.read(0, handle.size())
        if len(data) % OFFSET_ENTRY.size:
            return None
        last_offset = -1
        last_position = -1
        for rel, pos in OFFSET_ENTRY.iter_unpack(data):
            offset = base_offset + rel
            if rel < 0 or offset <= last_offset or pos <= last_position or pos >= log_size:
                return None
            index.offsets.append(offset)
            index.positions.append(pos)
            last_offset, last_position = offset, pos
        return index

    def __len__(self) -> int:
        return len(self.offsets)

    def size_in_bytes(self) -> int:
        return len(self.offsets) * OFFSET_ENTRY.size

    def append(self, last_offset: int, position: int) -> None:
        if self.offsets and (last_offset <= self.offsets[-1] or position <= self.positions[-1]):
            return
        self.handle.append(OFFSET_ENTRY.pack(last_offset - self.base_offset, position))
        self.offsets.append(last_offset)
        self.positions.append(position)

    def floor_position(self, offset: int) -> int:
        """A batch boundary at or before the batch holding ``offset`` (0 if none)."""
        i = bisect.bisect_left(self.offsets, offset)
        if i < len(self.offsets) and self.offsets[i] == offset:
            return self.positions[i]  # the indexed batch ends exactly at ``offset``
        # Entry i-1 names a batch whose last offset is below ``offset``; the next batch
        # starts after it, so scanning from its position is safe and short.
        return self.positions[i - 1] if i > 0 else 0

    def floor_entry_by_position(self, position: int) -> int:
        """The greatest indexed batch position not above ``position`` (0 if none)."""
        i = bisect.bisect_right(self.positions, position)
        return self.positions[i - 1] if i > 0 else 0

    def reset(self) -> None:
        """Empty the index, file included (before a rebuild from the log)."""
        del self.offsets[:]
        del self.positions[:]
        self.handle.truncate(0)

    def truncate_to_position(self, position: int) -> None:
        """Drop entries for batches at or after ``position``."""
        i = bisect.bisect_left(self.positions, position)
        if i == len(self.positions):
            return
        del self.offsets[i:]
        del self.positions[i:]
        self.handle.truncate(i * OFFSET_ENTRY.size)


class TimeIndex:
    def __init__(self, handle: FileHandle, base_offset: int) -> None:
        self.handle = handle
        self.base_offset = base_offset
        self.timestamps = array("q")
        self.offsets = array("q")

    @classmethod
    def load(cls, handle: FileHandle, base_offset: int, next_offset: int) -> TimeIndex | None:
        index = cls(handle, base_offset)
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

    def append(self, timestamp: int, offset: int) -> None:
        """Index ``offset`` as holding ``timestamp``; only rising timestamps are kept."""
        if self.timestamps and (timestamp <= self.timestamps[-1] or offset < self.offsets[-1]):
            return
        self.handle.append(TIME_ENTRY.pack(timestamp, offset - self.base_offset))
        self.timestamps.append(timestamp)
        self.offsets.append(offset)

    def floor_offset(self, timestamp: int) -> int:
        """An offset at or before the first record with a timestamp >= ``timestamp``."""
        i = bisect.bisect_left(self.timestamps, timestamp)
        return self.offsets[i - 1] if i > 0 else self.base_offset

    def reset(self) -> None:
        """Empty the index, file included (before a rebuild from the log)."""
        del self.timestamps[:]
        del self.offsets[:]
        self.handle.truncate(0)

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries for offsets at or after ``offset``."""
        i = bisect.bisect_left(self.offsets, offset)
        if i == len(self.offsets):
            return
        del self.timestamps[i:]
        del self.offsets[i:]
        self.handle.truncate(i * TIME_ENTRY.size)
