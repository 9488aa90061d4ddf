"""The scrub's steps on a partition log: what start-up left unread, validated later
(ADR 0016).

A log opened without validating every batch leaves the bytes below its recovery point
unread (:func:`~odradek.storage.recovery.open_log`). The scrub reads them in the
background, oldest first: :func:`next_task` cuts the next range, a
:class:`ScrubTask` reads it anywhere (a worker thread of the shell), and
:func:`finish` judges the result on the owner's thread: progress, a stale index
rebuilt, or corruption, which takes the log offline naming the file and position.

It is apart from the log because it is a second reader of the log's files with its
own state (a segment's ``scrubbed_to``, ``scrub_expected``, ``generation``) and its own
rules for believing what it read; no append, read or flush touches it. The log's
``scrub_pending_bytes``, ``next_scrub_task`` and ``finish_scrub`` are its entry points
(they take the log offline on an ``OSError``), and the shell's ``shell/scrub.py`` paces
them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.protocol.record_batch import (
    BatchHeader,
)
from odradek.storage.checkpoint import LEADER_EPOCH_CHECKPOINT
from odradek.storage.fs import FileHandle
from odradek.storage.segment import LogSegment
from odradek.storage.validation import RangeCheck, validate_range

if TYPE_CHECKING:
    from odradek.storage.log import PartitionLog


@dataclass(frozen=True, slots=True)
class ScrubResult:
    check: RangeCheck
    headers: list[BatchHeader]
    error: OSError | None = None
    """A read that failed: the disk is failing, the log goes offline."""


@dataclass(frozen=True, slots=True)
class ScrubTask:
    """One range of a segment for the scrub: whole batches from ``start`` (a batch
    boundary holding offset ``expected``) while they start before ``limit``.

    :meth:`run` reads only through its own reference to the handle, so it may run on a
    worker thread while the log goes on; the owner keeps retention and deletion of the
    segment from running at the same time (the node's I/O lock), and a truncation
    meanwhile changes the segment's generation, which drops the result.
    """

    segment: LogSegment
    handle: FileHandle
    generation: int
    start: int
    limit: int
    size: int
    expected: int

    def run(self) -> ScrubResult:
        headers: list[BatchHeader] = []
        try:
            check = validate_range(
                self.handle, self.start, self.limit, self.size, self.expected, headers.append
            )
        except OSError as e:
            return ScrubResult(RangeCheck(self.start, self.expected, None), [], e)
        return ScrubResult(check, headers)

    @property
    def length(self) -> int:
        return self.limit - self.start


def pending_bytes(partition_log: PartitionLog) -> int:
    """Bytes not validated at start that the scrub has still to read."""
    if partition_log.offline is not None:
        return 0
    return sum(s.unverified_end - s.scrubbed_to for s in partition_log.segments)


def next_task(partition_log: PartitionLog, max_bytes: int) -> ScrubTask | None:
    """The next range of at most ``max_bytes`` (whole batches, at least one) to
    validate, oldest first; None when nothing is left. Run it anywhere (a thread),
    then hand the result to :func:`finish` on the owner's thread."""
    for segment in partition_log.segments:
        if segment.scrubbed_to < segment.unverified_end:
            start = segment.scrubbed_to
            return ScrubTask(
                segment=segment,
                handle=segment.log,
                generation=segment.generation,
                start=start,
                limit=min(segment.unverified_end, start + max(max_bytes, 1)),
                size=segment.size,
                expected=segment.scrub_expected,
            )
    return None


def finish(partition_log: PartitionLog, task: ScrubTask, result: ScrubResult) -> None:
    """Record a scrub result: progress, or corruption (the log goes offline, with
    the file and position). A result read while the segment changed (truncated,
    deleted) is dropped; a problem is read again here before it is believed."""
    segment = task.segment
    if (
        segment.deleted
        or segment.generation != task.generation
        or partition_log._segment_index(segment.base_offset) >= len(partition_log.segments)
        or partition_log.segments[partition_log._segment_index(segment.base_offset)] is not segment
    ):
        return
    if result.error is not None:
        raise result.error
    if result.check.problem is not None:
        # On this thread nothing changes the file while it is read again.
        again = task.run()
        if again.error is not None:
            raise again.error
        if again.check.problem is not None:
            partition_log._corrupt(
                f"scrub: corrupt batch in {segment.log_path}: {again.check.problem}"
            )
            return
        result = again
    check = result.check
    end = check.position
    if end > segment.unverified_end or (
        end == segment.unverified_end and check.next_offset != segment.verified_from_offset
    ):
        partition_log._corrupt(
            f"scrub: {segment.log_path} at position {end}: the batches below the "
            f"recovery point end at offset {check.next_offset}, the next batch starts "
            f"at {segment.verified_from_offset}"
        )
        return
    for h in result.headers:
        if h.partition_leader_epoch < 0 or h.next_offset <= partition_log.log_start_offset:
            continue
        cached = partition_log.epochs.epoch_for_offset(
            max(h.base_offset, partition_log.log_start_offset)
        )
        if cached != h.partition_leader_epoch:
            partition_log._corrupt(
                f"scrub: the batch at position {h.position} of {segment.log_path} "
                f"(offset {h.base_offset}) has leader epoch {h.partition_leader_epoch}, "
                f"the leader-epoch checkpoint says {cached}; remove "
                f"{LEADER_EPOCH_CHECKPOINT} to rebuild it from the batches at the "
                "next start"
            )
            return
    _check_indexes(segment, task, result)
    segment.scrubbed_to = end
    segment.scrub_expected = check.next_offset
    if end == segment.unverified_end:
        whole = segment.unverified_end == segment.size
        segment.unverified_end = segment.scrubbed_to = 0
        running = segment.scrub_max_timestamp
        # Below the recovery point only part of the segment was unread: its largest
        # timestamp is then the larger of the two parts'.
        if whole or running > segment.max_timestamp:
            segment.max_timestamp = running


def _check_indexes(segment: LogSegment, task: ScrubTask, result: ScrubResult) -> None:
    """The index entries in the scrubbed range must name batch boundaries and, for
    the time index, the largest timestamp so far; a stale index is rebuilt."""
    running = segment.scrub_max_timestamp if task.start else -1
    largest_at: dict[int, int] = {}
    boundaries: dict[int, int] = {}
    for h in result.headers:
        running = max(running, h.max_timestamp)
        largest_at[h.last_offset] = running
        boundaries[h.position] = h.last_offset
    segment.scrub_max_timestamp = running
    if not result.headers:
        return
    stale = next(
        (
            f"offset index entry ({last}, {position})"
            for last, position in segment.index.entries_between(task.start, result.check.position)
            if boundaries.get(position) != last
        ),
        None,
    )
    if stale is None:
        first, last = result.headers[0].base_offset, result.headers[-1].last_offset
        stale = next(
            (
                f"time index entry ({timestamp}, {offset})"
                for timestamp, offset in segment.time_index.entries_between(first, last)
                if largest_at.get(offset) != timestamp
            ),
            None,
        )
    if stale is not None:
        segment.rebuild_indexes(f"the scrub found a stale {stale}")
