"""Opening a partition log from its files, and start-up recovery (ADR 0003, ADR 0016).

What a :class:`~odradek.storage.log.PartitionLog` does once, before it serves anything:
list the segment files and remove leftovers, find where validation must start (every
batch, or from the recovery point with the leader-epoch checkpoint trusted below it
once it agrees with the batches), validate from there, move a torn tail and whatever
follows an offset gap to quarantine, or take the log offline when the damage lies
below the recovery point, and rebuild the leader-epoch cache from the batches read.

It is apart from the log because none of it runs again once the log is open: the
log's own module keeps what every append, read, flush and truncation needs. These
functions take the log they recover and use its own steps (going offline, moving
bytes to quarantine, flushing), so a recovery fails exactly as the log would.
"""

from __future__ import annotations

import bisect
import itertools
import logging
from typing import TYPE_CHECKING

from odradek.core.errors import CorruptLogError, InvariantError
from odradek.storage.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    PARTITION_METADATA,
    read_leader_epoch_checkpoint,
    read_partition_metadata,
)
from odradek.storage.cleaner import swap
from odradek.storage.fs import FileSystem, join
from odradek.storage.leader_epoch import LeaderEpochCache
from odradek.storage.segment import LogSegment, SegmentCache
from odradek.storage.txn_index import TXN_INDEX_SUFFIX

if TYPE_CHECKING:
    from odradek.storage.log import LogConfig, PartitionLog

log = logging.getLogger("odradek.storage")

CORRUPT_MARKER = ".odradek-corrupt"
"""Written in a partition dir when corruption takes the log offline, and read at the
next start: such a log is validated whole again (and stays offline while the damage is
there), so that a restart never serves a corruption already found."""

END_OF_LOG = 2**63 - 1
"""A recovery point meaning "everything": after a clean stop, for a log that the
recovery-point checkpoint does not name (a damaged checkpoint)."""


def open_log(
    cls: type[PartitionLog],
    fs: FileSystem,
    directory: str,
    config: LogConfig,
    now_ms: int,
    recovery_point: int,
    log_start_offset: int,
    validate_all: bool,
    cache: SegmentCache | None,
) -> PartitionLog:
    """:meth:`PartitionLog.open <odradek.storage.log.PartitionLog.open>`, which says
    what is validated and what a bad batch does."""
    cache = cache if cache is not None else SegmentCache()
    if fs.is_dir(directory):
        for line in swap.finish_interrupted_swaps(fs, directory):
            log.warning("%s: %s", directory, line)
    topic_id = None
    metadata = join(directory, PARTITION_METADATA)
    if fs.exists(metadata):
        topic_id = read_partition_metadata(fs, metadata)
    # One listing serves the segments, the leftovers and the transaction indexes.
    names = fs.listdir(directory)
    bases = sorted(
        int(name[:-4]) for name in names if name.endswith(".log") and name[:-4].isdigit()
    )
    for name in names:
        # Index files without their log, and checkpoint temporaries, are leftovers.
        if name.endswith(
            (".index", ".timeindex", TXN_INDEX_SUFFIX, ".tmp")
        ) and not name.startswith("."):
            stem = name.split(".")[0]
            if name.endswith(".tmp") or not stem.isdigit() or int(stem) not in bases:
                fs.remove(join(directory, name))
    marker = join(directory, CORRUPT_MARKER)
    found_corrupt = fs.exists(marker)
    if found_corrupt and not validate_all:
        log.warning(
            "%s was found corrupt before (%s): validating every batch",
            directory,
            fs.read_file(marker).decode("utf-8", "replace").strip(),
        )
        validate_all = True
    segments = [LogSegment.open_existing(fs, directory, b, now_ms, cache) for b in bases]
    for segment, after in itertools.pairwise(segments):
        # Claimed by the next file's name; validation or the scrub checks it.
        segment.next_offset = after.base_offset
    for segment in segments:
        segment.index_interval_bytes = config.index_interval_bytes
    result = cls(
        fs, directory, config, segments, log_start_offset, LeaderEpochCache(), topic_id, cache
    )
    recover(result, recovery_point, now_ms, validate_all)
    _load_txn_indexes(result, names)
    if found_corrupt and result.offline is None:
        log.warning(
            "%s: every batch is valid again; the corruption found before is gone", directory
        )
        fs.remove(marker)
        fs.fsync_dir(directory)
    return result


def _load_txn_indexes(partition_log: PartitionLog, names: list[str]) -> None:
    """Every segment's aborted transactions, cut to what recovery left of the segment
    (an entry is written before its marker: a crash may leave one whose marker is not
    there). An index damaged otherwise than by a torn last entry takes the log offline:
    without it read_committed readers would see aborted records."""
    if partition_log.offline is not None:
        return
    by_base = {s.base_offset: s for s in partition_log.segments}
    for name in names:
        stem = name[: -len(TXN_INDEX_SUFFIX)]
        if not name.endswith(TXN_INDEX_SUFFIX) or not stem.isdigit():
            continue
        segment = by_base.get(int(stem))
        if segment is None:
            continue
        problem = segment.load_txn_index()
        if problem is not None:
            partition_log._corrupt(f"{join(partition_log.directory, name)}: {problem}")
            return
        segment.truncate_txn_index(segment.next_offset)


def _recovery_start(partition_log: PartitionLog, recovery_point: int) -> tuple[int, int, int]:
    """Where start-up validation begins: ``(segment index, position, offset)``.

    The segment holding the recovery point, from its indexed batch at or before it
    (whose header must match the entry; otherwise from the segment's start).
    """
    k = max(bisect.bisect_right(partition_log._bases, recovery_point) - 1, 0)
    segment = partition_log.segments[k]
    if recovery_point <= segment.base_offset:
        return k, 0, segment.base_offset
    index = segment.try_index()
    if index is None:
        return k, 0, segment.base_offset
    position, last_offset = index.floor(recovery_point)
    if last_offset < 0:
        return k, 0, segment.base_offset
    try:
        header = next(iter(segment.headers_from(position, segment.size)), None)
    except CorruptLogError:
        header = None  # the entry points at no batch: validate the whole segment
    if (
        header is None
        or header.last_offset != last_offset
        or header.end > segment.size
        or header.base_offset < segment.base_offset
    ):
        return k, 0, segment.base_offset
    return k, position, header.base_offset


def _checkpointed_epochs(
    partition_log: PartitionLog, start_offset: int
) -> list[tuple[int, int]] | None:
    """The leader-epoch checkpoint's entries below ``start_offset``, if they agree
    with the batches where each epoch begins; None otherwise (validate everything).
    """
    path = join(partition_log.directory, LEADER_EPOCH_CHECKPOINT)
    if not partition_log.fs.exists(path):
        return None
    try:
        stored = read_leader_epoch_checkpoint(partition_log.fs, path)
    except CorruptLogError as e:
        log.warning("%s: %s", partition_log.directory, e)
        return None
    entries = [(epoch, start) for epoch, start in stored if start < start_offset]
    cache = LeaderEpochCache()
    try:
        for epoch, start in entries:
            cache.assign(epoch, start)
    except InvariantError:
        return None
    first = max(partition_log.log_start_offset, partition_log.segments[0].base_offset)
    checks = [(first, cache.epoch_for_offset(first), False)]
    checks += [(start, epoch, True) for epoch, start in cache.entries() if start > first]
    for offset, epoch, starts_there in checks:
        if offset >= start_offset:
            continue
        header = partition_log.segments[partition_log._segment_index(offset)]._batch_at_or_after(
            offset
        )
        if header is None or header.base_offset > offset:
            return None
        batch_epoch = header.partition_leader_epoch
        if batch_epoch >= 0 and batch_epoch != epoch:
            return None
        if starts_there and header.base_offset != offset:
            return None
    return cache.entries()


def recover(
    partition_log: PartitionLog, recovery_point: int, now_ms: int, validate_all: bool = True
) -> None:
    if not partition_log.segments:
        partition_log._add_segment(max(partition_log.log_start_offset, 0), now_ms)
    k, start_position, start_offset = 0, 0, partition_log.segments[0].base_offset
    seed: list[tuple[int, int]] = []
    if not validate_all:
        try:
            k, start_position, start_offset = _recovery_start(partition_log, recovery_point)
            checkpointed = (
                _checkpointed_epochs(partition_log, start_offset) if k or start_position else []
            )
        except CorruptLogError as e:
            log.warning("%s: %s; validating every batch", partition_log.directory, e)
            checkpointed = None
        if checkpointed is None:
            log.warning(
                "%s: the leader-epoch checkpoint does not match the batches below the "
                "recovery point; validating every batch to rebuild it",
                partition_log.directory,
            )
            k, start_position, start_offset = 0, 0, partition_log.segments[0].base_offset
        else:
            seed = checkpointed
    for segment in partition_log.segments[:k]:
        segment.unverified_end = segment.size
        segment.verified_from_offset = segment.next_offset
    opened = len(partition_log.segments)
    kept: list[LogSegment] = list(partition_log.segments[:k])
    transitions: list[tuple[int, int]] = []
    validated = 0
    for i in range(k, len(partition_log.segments)):
        segment = partition_log.segments[i]
        if kept and segment.base_offset != kept[-1].next_offset:
            _quarantine_segments(
                partition_log, partition_log.segments[i:], now_ms, "recovery: offset gap"
            )
            break
        if i == k and start_position > 0:
            segment.unverified_end = start_position
            segment.verified_from_offset = start_offset
            result = segment.recover(
                partition_log.config.index_interval_bytes, start_position, start_offset
            )
        else:
            result = segment.recover(partition_log.config.index_interval_bytes)
        validated += result.valid_bytes - (start_position if i == k else 0)
        transitions += result.epochs
        kept.append(segment)
        if result.problem is None:
            continue
        # result.next_offset is the offset the bad batch should have started at: all
        # below the recovery point was known durable, so damage there is corruption.
        if result.next_offset < recovery_point:
            point = "the log end" if recovery_point == END_OF_LOG else str(recovery_point)
            partition_log.recovery_point = recovery_point  # kept for the next checkpoint
            partition_log._corrupt(
                f"corrupt batch below the recovery point {point} in "
                f"{segment.log_path}: {result.problem}"
            )
            break
        dropped = segment.size - result.valid_bytes
        log.warning(
            "recovery of %s: %s; moving %d bytes from position %d to quarantine",
            segment.log_path,
            result.problem,
            dropped,
            result.valid_bytes,
        )
        tail = segment.log.read(result.valid_bytes, dropped)
        partition_log._quarantine_bytes(
            [tail], result.next_offset, None, now_ms, f"recovery: {result.problem}"
        )
        segment.cut_to(result.valid_bytes)
        _quarantine_segments(
            partition_log, partition_log.segments[i + 1 :], now_ms, "recovery: after a bad batch"
        )
        break
    partition_log.validated_bytes_at_open = validated
    recovered = kept[k:]
    partition_log.segments = kept
    partition_log._bases = [s.base_offset for s in kept]
    partition_log.log_start_offset = max(partition_log.log_start_offset, kept[0].base_offset)
    _rebuild_epochs(partition_log, transitions, seed)
    if partition_log.offline is not None:
        return
    partition_log.recovery_point = min(partition_log.recovery_point, partition_log.log_end_offset)
    partition_log.active.activate()
    # What survived the crash past the recovery point is valid; make it durable
    # before serving it. Below the recovery point it was durable already, so a
    # clean start syncs nothing (a partition's fsyncs are most of its start).
    for segment in recovered:
        # (A segment cut at a torn tail is unflushed already: the cut must last.)
        segment.unflushed = segment.unflushed or segment.next_offset > recovery_point
    # Segments moved to quarantine must stay gone: new batches reuse their offsets.
    if len(kept) < opened or any(segment.unflushed for segment in partition_log.segments):
        partition_log._flush_all()
    else:
        # Nothing past the recovery point: the log is durable to its end. A
        # rewritten epoch checkpoint (an epoch that wrote nothing, dropped) waits
        # for the next flush, as every checkpoint write does.
        partition_log.recovery_point = partition_log.log_end_offset
    partition_log.last_flush_ms = now_ms


def _rebuild_epochs(
    partition_log: PartitionLog,
    transitions: list[tuple[int, int]],
    seed: list[tuple[int, int]] | None = None,
) -> None:
    partition_log.epochs = LeaderEpochCache(seed)
    end = partition_log.log_end_offset
    for epoch, start in transitions:
        if start >= end:
            break
        if epoch < partition_log.epochs.latest_epoch():
            log.warning(
                "%s: batch at offset %d has epoch %d after epoch %d; ignored",
                partition_log.directory,
                start,
                epoch,
                partition_log.epochs.latest_epoch(),
            )
            continue
        partition_log.epochs.assign(epoch, start)
    partition_log.epochs.truncate_from_end(end)
    partition_log.epochs.truncate_from_start(partition_log.log_start_offset)
    path = join(partition_log.directory, LEADER_EPOCH_CHECKPOINT)
    try:
        on_disk = read_leader_epoch_checkpoint(partition_log.fs, path)
    except CorruptLogError:
        on_disk = None
    # Entries at the log end (an epoch that wrote nothing) are dropped at every load,
    # so a file that differs only by them is not rewritten: one rename a partition
    # is a good part of a clean start.
    if on_disk is None or [e for e in on_disk if e[1] < end] != partition_log.epochs.entries():
        partition_log._write_epochs()


def _quarantine_segments(
    partition_log: PartitionLog, segments: list[LogSegment], now_ms: int, why: str
) -> None:
    if not segments:
        return
    chunks = [s.log.read(0, s.log.size()) for s in segments]
    partition_log._quarantine_bytes(chunks, segments[0].base_offset, None, now_ms, why)
    for s in segments:
        s.delete()
    partition_log._dir_dirty = True
