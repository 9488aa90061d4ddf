"""Which part of a compacted log a cleaning pass may take, and whether it is due.

Kafka's ``LogCleanerManager.cleanableOffsets``, over whole segments. The *clean* part
of a log is below its first dirty offset (the ``cleaner-offset-checkpoint`` entry, or
the log start); the *dirty* part runs from there to the first uncleanable offset, the
base of the first segment that is the active one, holds an offset at or past the high
watermark, holds one past the recovery point (a cleaned segment replaces only what is
durable, so a crash can lose nothing the swap took), or has a record newer than
``min.compaction.lag.ms``. A log is due when its dirty bytes are at least
``min.cleanable.dirty.ratio`` of its clean and dirty bytes, or when a dirty segment's
first record is older than ``max.compaction.lag.ms`` (KIP-354).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MAX_SEGMENT_SPAN = 2**31 - 1
"""Offsets a segment may span: its indexes hold offsets relative to its base as int32."""


@dataclass(frozen=True, slots=True)
class SegmentSummary:
    base_offset: int
    next_offset: int
    size: int
    max_timestamp: int
    """The largest record timestamp in the segment (-1 if none)."""
    first_timestamp: int
    """The first batch's timestamp, for ``max.compaction.lag.ms`` (-1 if unknown)."""


@dataclass(frozen=True, slots=True)
class CleaningPolicy:
    """A compacted log's cleaning settings, named after Kafka's topic configs."""

    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = 2**63 - 1
    delete_retention_ms: int = 86_400_000


@dataclass(frozen=True, slots=True)
class Cleanable:
    """A log's clean and dirty parts as :func:`cleanable` found them."""

    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    dirty_bytes: int
    due: bool
    why: str

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def cleanable(
    segments: Sequence[SegmentSummary],
    *,
    log_start_offset: int,
    checkpoint: int | None,
    high_watermark: int,
    recovery_point: int,
    policy: CleaningPolicy,
    now_ms: int,
) -> Cleanable:
    """The parts of a log with ``segments`` (oldest first, the last one active)."""
    end = segments[-1].next_offset if segments else log_start_offset
    first_dirty = log_start_offset
    if checkpoint is not None and log_start_offset <= checkpoint <= end:
        first_dirty = checkpoint
    bound = min(high_watermark, recovery_point)
    first_uncleanable = segments[-1].base_offset if segments else end
    clean_bytes = dirty_bytes = 0
    overdue = False
    for segment in segments[:-1]:
        if segment.next_offset <= first_dirty:
            clean_bytes += segment.size
            continue
        young = (
            policy.min_compaction_lag_ms > 0
            and segment.max_timestamp > now_ms - policy.min_compaction_lag_ms
        )
        if segment.next_offset > bound or young:
            first_uncleanable = segment.base_offset
            break
        dirty_bytes += segment.size
        overdue = overdue or (
            segment.first_timestamp >= 0
            and policy.max_compaction_lag_ms < 2**63 - 1
            and now_ms - segment.first_timestamp > policy.max_compaction_lag_ms
        )
    result = Cleanable(first_dirty, first_uncleanable, clean_bytes, dirty_bytes, False, "")
    if first_uncleanable <= first_dirty or dirty_bytes == 0:
        return result
    ratio = result.dirty_ratio
    if ratio >= policy.min_cleanable_dirty_ratio:
        why = f"dirty ratio {ratio:.2f} >= min.cleanable.dirty.ratio"
    elif overdue:
        why = "a dirty record is older than max.compaction.lag.ms"
    else:
        return result
    return Cleanable(first_dirty, first_uncleanable, clean_bytes, dirty_bytes, True, why)


def group_segments(
    segments: Sequence[SegmentSummary], max_bytes: int
) -> list[list[SegmentSummary]]:
    """Consecutive segments grouped into cleaned segments of at most ``max_bytes``
    (``segment.bytes``) of source and at most :data:`MAX_SEGMENT_SPAN` offsets, as
    Kafka's ``groupSegmentsBySize`` does: cleaning shrinks segments, so small ones merge."""
    groups: list[list[SegmentSummary]] = []
    for segment in segments:
        if groups:
            group = groups[-1]
            size = sum(s.size for s in group) + segment.size
            span = segment.next_offset - group[0].base_offset
            if size <= max_bytes and span <= MAX_SEGMENT_SPAN:
                group.append(segment)
                continue
        groups.append([segment])
    return groups
