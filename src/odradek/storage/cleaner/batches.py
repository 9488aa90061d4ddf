"""One record batch cleaned: what the offset map supersedes removed, offsets kept.

Kafka's rules for v2 batches (``MemoryRecords.filterTo``): a record stays when it has a
key and no later offset of that key is in the map; a tombstone (a null value) stays
until its batch's delete horizon has passed. The first pass that keeps a tombstone
writes the horizon, now + ``delete.retention.ms``, into the batch (KIP-534: attribute
bit 6, the base timestamp holding it), so a tombstone is kept for that long after the
cleaner first saw it, whatever the record's own timestamp says. A rewritten batch keeps
its base offset, last offset delta, leader epoch, producer id, epoch and base sequence,
codec and timestamp type; a batch that loses every record is kept, empty, when it is
its producer's last (so the producer's sequence and epoch survive), and dropped
otherwise. The records of an aborted transaction all go; control batches (the
transactions' markers) stay as they are.

A batch dropped leaves its offsets to a *filler*: a batch with no records, no producer
and no timestamp whose offset range is the gap (:func:`filler_batch`). Kafka leaves the
gap itself; Odradek covers it so that every log stays dense batch by batch, and
start-up recovery, the scrub and a follower's append keep checking each batch's base
offset (which lies outside the CRC) against the end of the one before. Consumers skip a
batch without records to its end, as they do Kafka's own empty batches.

Pure: bytes in, bytes out. The caller has checked the batch's CRC (the pass reads
through the validating reader recovery uses); records that do not walk raise, and the
caller takes the log offline: the cleaner never rewrites damaged data under a new CRC.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from odradek.protocol.compression import compress
from odradek.protocol.record_batch import (
    NO_TIMESTAMP,
    BatchHeader,
    Buffer,
    Compression,
    TimestampType,
)
from odradek.protocol.record_codec import Record, decode_records, encode_batch, pack_batch
from odradek.storage.cleaner.offset_map import OffsetMap
from odradek.storage.cleaner.records import RawRecord, raw_records, records_section


@dataclass(frozen=True, slots=True)
class CleanedBatch:
    """What :func:`clean_batch` made of one batch."""

    data: Buffer | None
    """The batch to write (the original bytes when nothing changed), or None: dropped."""
    kept: int
    removed: int
    horizon_set: bool = False
    """This pass wrote the batch's delete horizon (it keeps tombstones)."""


def _keeps(record: RawRecord, offset: int, offsets: OffsetMap, tombstones_expired: bool) -> bool:
    if record.key is None:
        return False  # Kafka's cleaner drops keyless records of a compacted log.
    if offsets.get(record.key) > offset:
        return False
    return not record.tombstone or not tombstones_expired


def clean_batch(
    batch: Buffer,
    header: BatchHeader,
    offsets: OffsetMap,
    now_ms: int,
    delete_retention_ms: int,
    *,
    last_of_producer: bool,
    aborted: bool = False,
) -> CleanedBatch:
    """Clean the one whole batch ``batch`` (its ``header`` read at position 0, its CRC
    checked).

    ``last_of_producer``: the batch is its producer's last in the log, kept even when
    empty. ``aborted``: the batch belongs to an aborted transaction, and every record
    goes, as Kafka's cleaner discards them.
    """
    if header.is_control:
        return CleanedBatch(batch, header.records_count, 0)
    if aborted:
        if last_of_producer and header.producer_id >= 0:
            return CleanedBatch(_empty_like(header), 0, header.records_count)
        return CleanedBatch(None, 0, header.records_count)
    section = records_section(batch, header)
    records = raw_records(section, header.records_count)
    horizon = header.base_timestamp if header.has_delete_horizon_ms else None
    expired = horizon is not None and now_ms >= horizon
    kept = [r for r in records if _keeps(r, header.base_offset + r.offset_delta, offsets, expired)]
    removed = len(records) - len(kept)
    set_horizon = horizon is None and any(r.tombstone for r in kept)
    if not removed and not set_horizon:
        return CleanedBatch(batch, len(kept), 0)
    if not kept:
        if not (last_of_producer and header.producer_id >= 0):
            return CleanedBatch(None, 0, removed)
        return CleanedBatch(_empty_like(header), 0, removed)
    if set_horizon:
        # Every record's timestamp delta counts from the horizon now: re-encoded.
        horizon = now_ms + delete_retention_ms
        wanted = {r.offset_delta for r in kept}
        decoded = [r for r in decode_records(batch) if r.offset_delta in wanted]
        return CleanedBatch(_rewritten(header, decoded, horizon), len(kept), removed, True)
    return CleanedBatch(_copied(header, section, kept), len(kept), removed)


def _copied(header: BatchHeader, section: bytes | memoryview, kept: Sequence[RawRecord]) -> bytes:
    """The batch with only the ``kept`` records, each copied as its bytes were."""
    body = b"".join([section[r.start : r.end] for r in kept])
    if header.compression != Compression.NONE:
        body = compress(header.compression, body)
    log_append_time = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    max_timestamp = (
        header.max_timestamp
        if log_append_time
        else header.base_timestamp + max(r.timestamp_delta for r in kept)
    )
    return pack_batch(
        body,
        records_count=len(kept),
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        attributes=header.attributes,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=header.base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
    )


def _rewritten(header: BatchHeader, kept: Sequence[Record], horizon: int | None) -> bytes:
    log_append_time = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    return encode_batch(
        kept,
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        compression=Compression(header.compression),
        timestamp_type=header.timestamp_type,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        is_transactional=header.is_transactional,
        base_timestamp=header.base_timestamp if horizon is None else horizon,
        last_offset_delta=header.last_offset_delta,
        # A LOG_APPEND_TIME batch's time is the broker's, not its records'.
        max_timestamp=header.max_timestamp if log_append_time else None,
        delete_horizon=horizon is not None,
    )


def _empty_like(header: BatchHeader) -> bytes:
    """Kafka's ``writeEmptyHeader``: the producer's batch without records."""
    return encode_batch(
        [],
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        timestamp_type=header.timestamp_type,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        is_transactional=header.is_transactional,
        base_timestamp=NO_TIMESTAMP,
        last_offset_delta=header.last_offset_delta,
        max_timestamp=header.max_timestamp,
    )


def filler_batch(base_offset: int, next_offset: int, leader_epoch: int) -> bytes:
    """A batch with no records covering ``[base_offset, next_offset)``."""
    return encode_batch(
        [],
        base_offset=base_offset,
        partition_leader_epoch=leader_epoch,
        base_timestamp=NO_TIMESTAMP,
        last_offset_delta=next_offset - base_offset - 1,
        max_timestamp=NO_TIMESTAMP,
    )
