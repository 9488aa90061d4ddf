"""The leader-epoch cache: at which offset each leader epoch began (KIP-101, KIP-279).

A follower that becomes a replica of a new leader asks, with OffsetForLeaderEpoch,
where its last epoch ended on the leader, and truncates exactly there. This cache is
what answers that question, and it must be kept in step with every truncation of the
log it describes.
"""

from __future__ import annotations

import bisect

from odradek.core.invariant import invariant

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    """Entries sorted by epoch, with start offsets non-decreasing."""

    def __init__(self, entries: list[tuple[int, int]] | None = None) -> None:
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for epoch, start in entries or []:
            self.assign(epoch, start)

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts, strict=True))

    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def earliest_epoch(self) -> int:
        return self._epochs[0] if self._epochs else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` began at ``start_offset``; return True if anything changed.

        An epoch equal to the latest is a no-op (its batches keep arriving). A new
        epoch whose start offset is not after the previous epoch's start replaces the
        entries it conflicts with, as Kafka does: the log itself was truncated first.
        """
        invariant(epoch >= 0 and start_offset >= 0, f"bad epoch entry {epoch}@{start_offset}")
        if self._epochs and epoch == self._epochs[-1]:
            return False
        if self._epochs and epoch < self._epochs[-1]:
            # Only a truncation may make an older epoch the latest again.
            invariant(False, f"epoch {epoch} is older than the latest {self._epochs[-1]}")
        while self._starts and self._starts[-1] >= start_offset:
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return True

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch in which ``offset`` was written (UNDEFINED when before the first entry)."""
        i = bisect.bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def end_offset_for_epoch(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch's answer: ``(epoch, end offset)``.

        The end offset of an epoch is the start offset of the first later epoch (or the
        log end for the latest epoch). The epoch returned is the largest one not above
        ``requested``, so a follower learns where our histories diverge.
        """
        if requested == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested == self._epochs[-1]:
            return requested, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = higher - 1
        if floor < 0:
            return requested, self._starts[higher]
        return self._epochs[floor], self._starts[higher]

    def truncate_from_end(self, end_offset: int) -> bool:
        """Forget epochs that began at or after ``end_offset`` (the log was cut there)."""
        changed = False
        while self._starts and self._starts[-1] >= end_offset:
            self._epochs.pop()
            self._starts.pop()
            changed = True
        return changed

    def truncate_from_start(self, start_offset: int) -> bool:
        """The log now starts at ``start_offset``: drop epochs wholly before it."""
        i = bisect.bisect_right(self._starts, start_offset) - 1
        if i < 0:
            return False
        changed = i > 0 or self._starts[i] != start_offset
        del self._epochs[:i]
        del self._starts[:i]
        self._starts[0] = start_offset
        return changed

    def clear(self) -> None:
        self._epochs.clear()
        self._starts.clear()
