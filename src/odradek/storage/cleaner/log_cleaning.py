"""A partition log's side of cleaning: the job taken from its segments, and the commit.

Both run on the log's own thread (the event loop), around a pass that runs on a
cleaner thread (:func:`~odradek.storage.cleaner.cleaning.run_pass`). The job is a
snapshot of the segments it reads, with each one's generation; the commit swaps the
cleaned segments in only if every source is still the same segment with the same
bytes, and abandons the pass otherwise (a truncation, retention or a deleted topic got
there first). Like :mod:`odradek.storage.recovery`, these functions take the log and
change its segment list; the log calls them from its guarded methods, so an I/O error
takes the log offline as any other would.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import TYPE_CHECKING

from odradek.core.invariant import invariant
from odradek.storage.cleaner import swap
from odradek.storage.cleaner.cleaning import (
    CleaningJob,
    CleaningResult,
    SourceSegment,
    remove_cleaned,
)
from odradek.storage.cleaner.offset_map import OffsetMap
from odradek.storage.cleaner.plan import (
    Cleanable,
    CleaningPolicy,
    SegmentSummary,
    cleanable,
    group_segments,
)
from odradek.storage.segment import LogSegment
from odradek.storage.txn_index import AbortedTxn

if TYPE_CHECKING:
    from odradek.storage.log import PartitionLog

log = logging.getLogger("odradek.storage")


def _first_timestamp(segment: LogSegment) -> int:
    first = next(iter(segment.headers_from(0, segment.size)), None)
    return -1 if first is None else first.max_timestamp


def summaries(partition_log: PartitionLog, *, with_first_timestamps: bool) -> list[SegmentSummary]:
    """The log's segments as the planner sees them. First timestamps cost a read of
    each older segment's first header, so only ``max.compaction.lag.ms`` asks for them."""
    return [
        SegmentSummary(
            s.base_offset,
            s.next_offset,
            s.size,
            s.max_timestamp,
            _first_timestamp(s) if with_first_timestamps and not s.is_active else -1,
        )
        for s in partition_log.segments
    ]


def find_cleanable(
    partition_log: PartitionLog,
    *,
    policy: CleaningPolicy,
    checkpoint: int | None,
    high_watermark: int,
    now_ms: int,
) -> Cleanable:
    return cleanable(
        summaries(partition_log, with_first_timestamps=policy.max_compaction_lag_ms < 2**63 - 1),
        log_start_offset=partition_log.log_start_offset,
        checkpoint=checkpoint,
        high_watermark=high_watermark,
        recovery_point=partition_log.recovery_point,
        policy=policy,
        now_ms=now_ms,
    )


def job_for(
    partition_log: PartitionLog,
    found: Cleanable,
    *,
    policy: CleaningPolicy,
    now_ms: int,
    last_batch_of_producers: Collection[int],
    map_capacity: int,
) -> CleaningJob:
    """The job that cleans every segment below ``found.first_uncleanable``."""
    taken = [s for s in partition_log.segments[:-1] if s.next_offset <= found.first_uncleanable]
    by_base = {s.base_offset: s for s in taken}
    groups = group_segments(
        [SegmentSummary(s.base_offset, s.next_offset, s.size, -1, -1) for s in taken],
        partition_log.config.segment_bytes,
    )
    return CleaningJob(
        directory=partition_log.directory,
        groups=tuple(
            tuple(
                SourceSegment(
                    g.base_offset,
                    g.next_offset,
                    g.size,
                    by_base[g.base_offset].generation,
                    _entries(by_base[g.base_offset]),
                )
                for g in group
            )
            for group in groups
        ),
        first_dirty=found.first_dirty,
        first_uncleanable=found.first_uncleanable,
        last_batch_of_producers=frozenset(last_batch_of_producers),
        now_ms=now_ms,
        delete_retention_ms=policy.delete_retention_ms,
        index_interval_bytes=partition_log.config.index_interval_bytes,
        map_capacity=map_capacity,
        aborted=tuple(
            partition_log.aborted_transactions(
                partition_log.log_start_offset, found.first_uncleanable
            )
        ),
        dirty_ratio=found.dirty_ratio,
        why=found.why,
    )


def _entries(segment: LogSegment) -> tuple[AbortedTxn, ...]:
    index = segment.txn_index
    return () if index is None else tuple(index.entries)


def map_capacity(buffer_bytes: int, threads: int) -> int:
    return OffsetMap.for_buffer(buffer_bytes, threads).capacity


def _unchanged(partition_log: PartitionLog, result: CleaningResult) -> str | None:
    """Why the pass cannot be committed, or None."""
    if partition_log.log_end_offset < result.map_end:
        return "the log was truncated below the cleaned part"
    by_base = {s.base_offset: s for s in partition_log.segments[:-1]}
    for cleaned in result.segments:
        for source in cleaned.sources:
            segment = by_base.get(source.base_offset)
            if (
                segment is None
                or segment.deleted
                or segment.generation != source.generation
                or segment.size != source.size
                or segment.next_offset != source.next_offset
            ):
                return f"segment {source.base_offset} changed while it was cleaned"
    return None


def commit(partition_log: PartitionLog, result: CleaningResult, now_ms: int) -> bool:
    """Swap the cleaned segments in; False (the ``.cleaned`` files removed) when a
    source segment changed meanwhile."""
    fs, directory = partition_log.fs, partition_log.directory
    problem = _unchanged(partition_log, result)
    if problem is not None:
        log.info("%s: cleaning pass abandoned: %s", directory, problem)
        remove_cleaned(fs, directory, [c.base_offset for c in result.segments])
        return False
    for cleaned in result.segments:
        swap.mark_swap(fs, directory, cleaned)
        first = partition_log._segment_index(cleaned.base_offset)
        last = first + len(cleaned.sources)
        old = partition_log.segments[first:last]
        for segment in old:
            segment.close(sync_indexes=False)
            segment.deleted = True
            segment.generation += 1
        swap.replace_sources(fs, directory, cleaned)
        new = LogSegment.open_existing(
            fs, directory, cleaned.base_offset, old[0].created_ms, partition_log.cache
        )
        new.next_offset = cleaned.next_offset
        new.index_interval_bytes = partition_log.config.index_interval_bytes
        if any(source.aborted for source in cleaned.sources):
            problem = new.load_txn_index()
            invariant(problem is None, f"{directory}: the cleaned transaction index: {problem}")
        partition_log.segments[first:last] = [new]
        partition_log._bases[first:last] = [new.base_offset]
    return True
