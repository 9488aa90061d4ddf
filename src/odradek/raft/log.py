"""The log the Raft core reads and writes: entries with an offset, an epoch and a payload.

Only an in-memory implementation lives here; a storage-backed one (segment files, the
leader-epoch checkpoint) will implement the same :class:`RaftLog` protocol later.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from odradek.core.invariant import invariant

#: Kafka's ``UNDEFINED_EPOCH`` / ``UNDEFINED_EPOCH_OFFSET``.
UNDEFINED = -1


@dataclass(frozen=True, slots=True)
class Entry:
    """One log entry. ``control`` marks entries the core writes itself (leader change)."""

    offset: int
    epoch: int
    payload: bytes
    control: bool = False


class RaftLog(Protocol):
    """What the Raft core needs from a log. Offsets start at 0; epochs of entries are >= 1."""

    def end_offset(self) -> int:
        """The offset the next appended entry gets (Kafka's log end offset)."""
        ...

    def last_epoch(self) -> int:
        """The epoch of the last entry, 0 for an empty log."""
        ...

    def append(self, entries: Sequence[Entry]) -> None:
        """Append entries that start exactly at :meth:`end_offset` with non-decreasing epochs."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Drop every entry at or above ``offset``."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """Kafka's ``LeaderEpochFileCache.endOffsetFor``; see :class:`MemoryRaftLog`."""
        ...

    def entries_from(self, offset: int, max_entries: int) -> list[Entry]:
        """Up to ``max_entries`` entries starting at ``offset`` (empty at or past the end)."""
        ...

    def entry_at(self, offset: int) -> Entry | None:
        """The entry at ``offset``, or None when the log does not hold it."""
        ...


class MemoryRaftLog:
    """A list of entries plus the start offset of every epoch (the leader-epoch cache)."""

    def __init__(self) -> None:
        self._entries: list[Entry] = []
        # Parallel sorted lists: epoch_starts[i] is the first offset of epochs[i].
        self._epochs: list[int] = []
        self._epoch_starts: list[int] = []

    def end_offset(self) -> int:
        return len(self._entries)

    def last_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else 0

    def append(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            invariant(
                entry.offset == len(self._entries),
                f"append at {entry.offset} but the log ends at {len(self._entries)}",
            )
            invariant(
                entry.epoch >= max(1, self.last_epoch()),
                f"entry epoch {entry.epoch} below the last epoch {self.last_epoch()}",
            )
            if entry.epoch != self.last_epoch() or not self._entries:
                self._epochs.append(entry.epoch)
                self._epoch_starts.append(entry.offset)
            self._entries.append(entry)

    def truncate_to(self, offset: int) -> None:
        invariant(offset >= 0, f"truncate to negative offset {offset}")
        del self._entries[offset:]
        while self._epoch_starts and self._epoch_starts[-1] >= offset:
            self._epochs.pop()
            self._epoch_starts.pop()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """The largest epoch <= ``epoch`` held here and the offset where it ends.

        Kafka's semantics: the latest epoch ends at the log end offset; an older epoch ends
        where the next higher epoch starts; an epoch below the first one held answers
        ``(epoch, start of the first epoch)``; an epoch above the latest (or an empty log)
        answers ``(UNDEFINED, UNDEFINED)``.
        """
        if not self._epochs or epoch == UNDEFINED:
            return (UNDEFINED, UNDEFINED)
        if epoch == self._epochs[-1]:
            return (epoch, self.end_offset())
        higher = bisect.bisect_right(self._epochs, epoch)
        if higher == len(self._epochs):
            return (UNDEFINED, UNDEFINED)
        if higher == 0:
            return (epoch, self._epoch_starts[0])
        return (self._epochs[higher - 1], self._epoch_starts[higher])

    def entries_from(self, offset: int, max_entries: int) -> list[Entry]:
        if offset < 0:
            return []
        return self._entries[offset : offset + max_entries]

    def entry_at(self, offset: int) -> Entry | None:
        if 0 <= offset < len(self._entries):
            return self._entries[offset]
        return None
