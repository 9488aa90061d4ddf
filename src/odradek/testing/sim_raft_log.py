"""``SimRaftLog``: a :class:`~odradek.raft.log.MemoryRaftLog` that a crash can cut back.

The Raft core writes its log and asks its driver (``Ready.flush``) to make it durable;
the simulator's driver completes that flush later, as a disk does, and only then tells
the core. This log keeps, next to the visible log, a *durable* copy (another
``MemoryRaftLog``) and the list of operations (single-entry appends and truncations)
done since the last flush. The model, kept small on purpose:

* ``flush()`` applies the pending operations to the durable copy.
* ``begin_flush()`` marks the operations done so far, and ``finish_flush(mark)`` later
  applies those (and only those) to the durable copy: operations done in between wait
  for a later flush, as writes issued after an fsync started do.
* A snapshot operation (``write_snapshot``, ``reset_to_snapshot``,
  ``delete_before_snapshot``) is durable at once; the pending operations before it are
  made durable first, as if the snapshot writer synced the directory.
* :meth:`SimRaftLog.crashed` returns the log a restarted process finds: the durable copy
  plus, when ``keep_unflushed`` allows it, a random prefix of the pending operations
  (some appends reached the disk, a truncation may or may not have).

``on_drop`` is called with the entries a truncation or a snapshot reset drops, before it
drops them, so that the simulator can check that no committed entry is ever dropped.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from odradek.core.invariant import invariant
from odradek.raft.log import Entry, MemoryRaftLog, SnapshotId

#: (kind, argument): ("append", Entry) or ("truncate", offset).
_Operation = tuple[str, Entry | int]

_ALL = 1 << 62


def copy_log(source: MemoryRaftLog, target: MemoryRaftLog) -> None:
    """Make the empty ``target`` hold what ``source`` holds (latest snapshot and entries)."""
    snapshot = source.latest_snapshot()
    if snapshot is not None:
        data = source.read_snapshot(snapshot)
        assert data is not None
        target.write_snapshot(snapshot, data)
    if source.start_offset() > 0:
        invariant(
            snapshot is not None and snapshot.end_offset == source.start_offset(),
            f"log starts at {source.start_offset()} without a snapshot ending there",
        )
        assert snapshot is not None
        target.reset_to_snapshot(snapshot)
    target.append(source.entries_from(source.start_offset(), _ALL))


class SimRaftLog(MemoryRaftLog):
    """The visible log of a running process, plus what survives its crash."""

    def __init__(self) -> None:
        super().__init__()
        self.durable = MemoryRaftLog()
        self._pending: list[_Operation] = []
        self._done = 0  # operations applied to the durable copy, over this log's life
        self.on_drop: Callable[[Sequence[Entry], str], None] | None = None

    # -- writes that wait for a flush

    def append(self, entries: Sequence[Entry]) -> None:
        super().append(entries)
        self._pending.extend(("append", e) for e in entries)

    def truncate_to(self, offset: int) -> None:
        if self.on_drop is not None and offset < self.end_offset():
            self.on_drop(self.entries_from(offset, _ALL), f"truncate to {offset}")
        super().truncate_to(offset)
        self._pending.append(("truncate", offset))

    def flush(self) -> None:
        self.finish_flush(self.begin_flush())

    def begin_flush(self) -> int:
        """A mark for :meth:`finish_flush`: every operation done so far."""
        return self._done + len(self._pending)

    def finish_flush(self, mark: int) -> None:
        """Make the operations done before ``mark`` was taken durable."""
        count = mark - self._done
        if count <= 0:
            return  # a later flush (a snapshot's) covered it already
        for operation in self._pending[:count]:
            _apply(self.durable, operation)
        del self._pending[:count]
        self._done += count

    # -- writes that are durable at once

    def write_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self.flush()
        super().write_snapshot(snapshot_id, data)
        self.durable.write_snapshot(snapshot_id, data)

    def reset_to_snapshot(self, snapshot_id: SnapshotId) -> None:
        if self.on_drop is not None:
            dropped = [
                e
                for e in self.entries_from(self.start_offset(), _ALL)
                if e.next_offset > snapshot_id.end_offset
            ]
            if dropped:
                self.on_drop(dropped, f"reset to snapshot {snapshot_id}")
        self.flush()
        super().reset_to_snapshot(snapshot_id)
        self.durable.reset_to_snapshot(snapshot_id)

    def delete_before_snapshot(self) -> None:
        self.flush()
        super().delete_before_snapshot()
        self.durable.delete_before_snapshot()

    # -- crashes

    @property
    def unflushed(self) -> int:
        return len(self._pending)

    def crashed(self, rng: random.Random, keep_unflushed: bool) -> SimRaftLog:
        """The log a process restarted after a crash finds on the disk."""
        recovered = type(self)()
        copy_log(self.durable, recovered)
        keep = rng.randint(0, len(self._pending)) if keep_unflushed else 0
        for operation in self._pending[:keep]:
            _apply(recovered, operation)
        SimRaftLog.finish_flush(recovered, recovered.begin_flush())  # on the disk: durable
        return recovered


class NoFlushRaftLog(SimRaftLog):
    """A broken disk for the checker's own test: ``flush`` makes nothing durable."""

    def finish_flush(self, mark: int) -> None:
        pass


def _apply(log: MemoryRaftLog, operation: _Operation) -> None:
    kind, argument = operation
    if kind == "append":
        assert isinstance(argument, Entry)
        log.append([argument])
    else:
        assert isinstance(argument, int)
        log.truncate_to(argument)
