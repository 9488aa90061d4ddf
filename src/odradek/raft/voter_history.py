"""The voter set at every offset of the log (KIP-853), kept as the log changes.

The voter set in force is the last ``VotersRecord`` in the log, committed or not, else
the one in the latest snapshot, else the static ``controller.quorum.voters``. Since an
uncommitted VotersRecord may be truncated away, and a snapshot must record the voter set
in force at its own end offset, the history keeps every change after the base with its
offset, as Kafka's ``VoterSetHistory`` does: appending, truncating and snapshotting the
log each have a counterpart here (:meth:`VoterHistory.record`,
:meth:`~VoterHistory.truncate`, :meth:`~VoterHistory.compact`).

It is apart from :class:`~odradek.raft.core.RaftNode` because it is the one piece of
state that follows the log's contents rather than the quorum's messages: the node calls
it wherever it writes the log, and reads :attr:`VoterHistory.latest`.
"""

from __future__ import annotations

from collections.abc import Iterable

from odradek.core.invariant import invariant
from odradek.protocol.record_batch import (
    ControlType,
)
from odradek.raft.log import Entry, RaftLog
from odradek.raft.snapshot import decode_snapshot
from odradek.raft.voters import VoterSet


class VoterHistory:
    """The base voter set (from the snapshot or the static voters) and every voter
    change in the log after it, as (offset of its VotersRecord, the new set)."""

    __slots__ = ("base", "changes", "static")

    def __init__(self, static: VoterSet | None) -> None:
        self.static = static
        self.base = VoterSet(())
        self.changes: list[tuple[int, VoterSet]] = []

    @property
    def latest(self) -> VoterSet:
        """The voter set in force: the last one in the log (committed or not)."""
        return self.changes[-1][1] if self.changes else self.base

    def load(self, log: RaftLog) -> None:
        """Start again from the latest snapshot (or the static set), then every
        VotersRecord in the log after it."""
        base: VoterSet | None = None
        snapshot = log.latest_snapshot()
        if snapshot is not None:
            data = log.read_snapshot(snapshot)
            invariant(data is not None, f"snapshot {snapshot} listed but not readable")
            assert data is not None
            base = decode_snapshot(data).voters
        self.base = base or self.static or VoterSet(())
        self.changes = []
        offset = log.start_offset()
        while True:
            entries = log.entries_from(offset, 1024)
            if not entries:
                break
            self.record(entries)
            offset = entries[-1].next_offset

    def record(self, entries: Iterable[Entry]) -> None:
        """Entries appended to the log: keep the voter changes among them."""
        for entry in entries:
            if entry.control == ControlType.VOTERS:
                self.changes.append((entry.offset, VoterSet.decode(entry.records[0])))

    def truncate(self, offset: int) -> None:
        """The log was truncated to ``offset``: forget the changes at or past it."""
        while self.changes and self.changes[-1][0] >= offset:
            self.changes.pop()

    def at(self, offset: int) -> VoterSet:
        """The voter set in force for entries below ``offset``."""
        found = self.base
        for change_offset, voters in self.changes:
            if change_offset < offset:
                found = voters
        return found

    def compact(self, end_offset: int, base: VoterSet | None) -> None:
        """A snapshot ends at ``end_offset``: its voter set (None with static voters)
        becomes the base, and the changes below it are in the snapshot."""
        self.base = base if base is not None else self.base
        self.changes = [c for c in self.changes if c[0] >= end_offset]

    def change_pending(self, high_watermark: int) -> bool:
        """Whether the last voter change is not committed yet."""
        return bool(self.changes) and self.changes[-1][0] >= high_watermark
