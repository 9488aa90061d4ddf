"""The log the Raft core reads and writes: batches of records, plus snapshots.

An :class:`Entry` is one record batch as Kafka's metadata log stores it: the records at
offsets ``[offset, next_offset)``, the leader epoch that wrote them, and, for KRaft's own
control batches (leader change, voters, snapshot markers), the control type. A batch is
the unit of replication and truncation, so the records a controller writes for one command
(a topic and its partitions) commit or vanish together.

A snapshot holds the state below its ``end_offset``; its bytes are the snapshot file
(:mod:`odradek.raft.snapshot`). Once a snapshot exists the log may start at its end
offset: entries below the log start are gone, and a follower that needs them gets the
snapshot instead.

:class:`MemoryRaftLog` is the reference implementation used by the simulator and the unit
tests; :mod:`odradek.raft.disk_log` stores the same thing on the storage engine.
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
    """One batch: ``records`` (record values) at offsets ``offset`` .. ``next_offset - 1``.

    ``control`` is the control record type (``ControlType``) of a KRaft control batch, or
    None for a batch of metadata records. ``headers`` are Kafka record headers carried by
    every record of the batch; the state machine ignores them (the recovery tool's audit
    record is a NoOpRecord whose headers say what was done, see
    :mod:`odradek.raft.recovery`).
    """

    offset: int
    epoch: int
    records: tuple[bytes, ...]
    control: int | None = None
    headers: tuple[tuple[str, bytes], ...] = ()

    def __post_init__(self) -> None:
        invariant(len(self.records) > 0, f"empty batch at offset {self.offset}")

    @property
    def next_offset(self) -> int:
        return self.offset + len(self.records)


@dataclass(frozen=True, slots=True, order=True)
class SnapshotId:
    """A snapshot of everything below ``end_offset``; ``epoch`` is the epoch of the entry
    just below it (0 for the bootstrap snapshot at offset 0)."""

    end_offset: int
    epoch: int


class RaftLog(Protocol):
    """What the Raft core needs from a log. Epochs of entries are >= 1."""

    def start_offset(self) -> int:
        """The first offset the log holds (the latest snapshot's end offset, or 0)."""
        ...

    def end_offset(self) -> int:
        """The offset the next appended entry gets (Kafka's log end offset)."""
        ...

    def last_epoch(self) -> int:
        """The epoch of the last entry; with no entry, the latest snapshot's epoch or 0."""
        ...

    def append(self, entries: Sequence[Entry]) -> None:
        """Append entries that start exactly at :meth:`end_offset` with non-decreasing epochs."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Drop every entry at or above ``offset`` (an entry boundary, >= the log start)."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """Kafka's ``LeaderEpochFileCache.endOffsetFor``; see :class:`MemoryRaftLog`."""
        ...

    def entries_from(self, offset: int, max_entries: int) -> list[Entry]:
        """Up to ``max_entries`` entries starting at ``offset`` (an entry boundary)."""
        ...

    def entry_at(self, offset: int) -> Entry | None:
        """The entry holding ``offset``, or None when the log does not hold it."""
        ...

    def flush(self) -> None:
        """Make every appended entry durable. The core never calls it: it asks its driver
        (``Ready.flush``), which flushes when it can and says so (``RaftNode.flushed``)."""
        ...

    def latest_snapshot(self) -> SnapshotId | None: ...

    def read_snapshot(self, snapshot_id: SnapshotId) -> bytes | None:
        """The snapshot file's bytes, or None when that snapshot is not held."""
        ...

    def write_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Store a snapshot (durably). It must not end past the high watermark."""
        ...

    def reset_to_snapshot(self, snapshot_id: SnapshotId) -> None:
        """Drop every entry and start the log at a held snapshot's end offset."""
        ...

    def delete_before_snapshot(self) -> None:
        """Drop entries below the latest snapshot's end offset (log start moves up)."""
        ...


class MemoryRaftLog:
    """A list of entries plus the start offset of every epoch (the leader-epoch cache)."""

    def __init__(self) -> None:
        self._entries: list[Entry] = []
        self._starts: list[int] = []  # _starts[i] == _entries[i].offset, for bisect
        self._start_offset = 0
        # Parallel sorted lists: epoch_starts[i] is the first offset of epochs[i].
        self._epochs: list[int] = []
        self._epoch_starts: list[int] = []
        self._snapshots: dict[SnapshotId, bytes] = {}

    def start_offset(self) -> int:
        return self._start_offset

    def end_offset(self) -> int:
        return self._entries[-1].next_offset if self._entries else self._start_offset

    def last_epoch(self) -> int:
        if self._entries:
            return self._entries[-1].epoch
        snapshot = self.latest_snapshot()
        return snapshot.epoch if snapshot is not None else 0

    def append(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            invariant(
                entry.offset == self.end_offset(),
                f"append at {entry.offset} but the log ends at {self.end_offset()}",
            )
            invariant(
                entry.epoch >= max(1, self.last_epoch()),
                f"entry epoch {entry.epoch} below the last epoch {self.last_epoch()}",
            )
            if not self._epochs or entry.epoch != self._epochs[-1]:
                self._epochs.append(entry.epoch)
                self._epoch_starts.append(entry.offset)
            self._entries.append(entry)
            self._starts.append(entry.offset)

    def truncate_to(self, offset: int) -> None:
        invariant(offset >= self._start_offset, f"truncate to {offset} below the log start")
        index = bisect.bisect_left(self._starts, offset)
        invariant(
            index == len(self._starts)
            or self._starts[index] == offset
            or offset >= self.end_offset(),
            f"truncate to {offset}, inside a batch",
        )
        del self._entries[index:]
        del self._starts[index:]
        while self._epoch_starts and self._epoch_starts[-1] >= offset:
            self._epochs.pop()
            self._epoch_starts.pop()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """The largest epoch <= ``epoch`` held here and the offset where it ends.

        Kafka's semantics: the latest epoch ends at the log end offset; an older epoch ends
        where the next higher epoch starts; an epoch below the first one held answers
        ``(epoch, start of the first epoch)``; an epoch above the latest (or an empty log)
        answers ``(UNDEFINED, UNDEFINED)``. With no entries, the latest snapshot counts as
        an epoch ending at its end offset.
        """
        if epoch == UNDEFINED:
            return (UNDEFINED, UNDEFINED)
        if not self._epochs:
            snapshot = self.latest_snapshot()
            if snapshot is not None and snapshot.epoch <= epoch:
                return (snapshot.epoch, snapshot.end_offset)
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
        index = bisect.bisect_left(self._starts, offset)
        if index == len(self._starts):
            return []
        invariant(self._starts[index] == offset, f"read from {offset}, inside a batch")
        return self._entries[index : index + max_entries]

    def entry_at(self, offset: int) -> Entry | None:
        index = bisect.bisect_right(self._starts, offset) - 1
        if index < 0:
            return None
        entry = self._entries[index]
        return entry if offset < entry.next_offset else None

    def flush(self) -> None:
        pass  # memory is "durable" for the simulator's purposes; SimDisk models loss

    def latest_snapshot(self) -> SnapshotId | None:
        return max(self._snapshots) if self._snapshots else None

    def read_snapshot(self, snapshot_id: SnapshotId) -> bytes | None:
        return self._snapshots.get(snapshot_id)

    def write_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self._snapshots[snapshot_id] = data

    def reset_to_snapshot(self, snapshot_id: SnapshotId) -> None:
        invariant(snapshot_id in self._snapshots, f"reset to unknown snapshot {snapshot_id}")
        self._entries.clear()
        self._starts.clear()
        self._epochs.clear()
        self._epoch_starts.clear()
        self._start_offset = snapshot_id.end_offset
        for older in [s for s in self._snapshots if s < snapshot_id]:
            del self._snapshots[older]

    def delete_before_snapshot(self) -> None:
        snapshot = self.latest_snapshot()
        if snapshot is None or snapshot.end_offset <= self._start_offset:
            return
        index = bisect.bisect_left(self._starts, snapshot.end_offset)
        invariant(
            (index < len(self._starts) and self._starts[index] == snapshot.end_offset)
            or snapshot.end_offset >= self.end_offset(),
            f"snapshot {snapshot} ends inside a batch",
        )
        if snapshot.end_offset >= self.end_offset():
            self.reset_to_snapshot(snapshot)
            return
        del self._entries[:index]
        del self._starts[:index]
        self._start_offset = snapshot.end_offset
        # Keep the epoch of the first remaining entry; forget epochs wholly below it.
        while len(self._epoch_starts) > 1 and self._epoch_starts[1] <= snapshot.end_offset:
            self._epochs.pop(0)
            self._epoch_starts.pop(0)
        if self._epoch_starts:
            self._epoch_starts[0] = max(self._epoch_starts[0], snapshot.end_offset)
        for older in [s for s in self._snapshots if s < snapshot]:
            del self._snapshots[older]
