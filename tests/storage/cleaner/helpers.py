"""Builders for the cleaner's tests: keyed batches, a cleaned log, what it holds."""

from __future__ import annotations

from collections.abc import Sequence

from odradek.protocol.record_batch import validate_batches
from odradek.protocol.record_codec import Record, decode_records, encode_batch
from odradek.storage.cleaner.cleaning import CleaningResult, run_pass
from odradek.storage.cleaner.plan import CleaningPolicy
from odradek.storage.log import LogConfig, PartitionLog

SMALL = LogConfig(
    segment_bytes=400,
    index_interval_bytes=100,
    retention_ms=-1,
    retention_bytes=-1,
    quarantine_max_bytes=10**9,
)
POLICY = CleaningPolicy(min_cleanable_dirty_ratio=0.0, delete_retention_ms=1_000)


def keyed(
    pairs: Sequence[tuple[bytes | None, bytes | None]],
    *,
    timestamp: int = 1_000,
    producer_id: int = -1,
    base_sequence: int = -1,
    **kwargs: object,
) -> bytearray:
    """A client-style batch of ``(key, value)`` records (a None value is a tombstone)."""
    records = [
        Record(offset_delta=i, timestamp=timestamp + i, key=k, value=v)
        for i, (k, v) in enumerate(pairs)
    ]
    return bytearray(
        encode_batch(
            records,
            producer_id=producer_id,
            producer_epoch=0 if producer_id >= 0 else -1,
            base_sequence=base_sequence,
            **kwargs,  # type: ignore[arg-type]
        )
    )


def batches_of(log: PartitionLog) -> list[bytes]:
    """Every batch from the log start to the log end, checked as a follower would."""
    out: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        found = log.read(offset, 1 << 20)
        assert found is not None, f"nothing at {offset} below the log end"
        data = found.read()
        for h in validate_batches(data, compacted=True):
            assert h.base_offset == offset, (h.base_offset, offset)  # dense, batch by batch
            out.append(bytes(data[h.position : h.end]))
            offset = h.next_offset
    return out


def records_of(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """``(offset, key, value)`` of every record a consumer reading it all would see."""
    out = []
    for data in batches_of(log):
        header = validate_batches(data, compacted=True)[0]
        out += [(header.base_offset + r.offset_delta, r.key, r.value) for r in decode_records(data)]
    return out


def clean(
    log: PartitionLog,
    now_ms: int,
    *,
    policy: CleaningPolicy = POLICY,
    checkpoint: int | None = None,
    high_watermark: int | None = None,
    producers: frozenset[int] = frozenset(),
    capacity: int = 10_000,
) -> CleaningResult | None:
    """One whole pass, as the broker runs it: job, pass, commit. None: nothing due."""
    job = log.cleaning_job(
        policy=policy,
        checkpoint=checkpoint,
        high_watermark=log.log_end_offset if high_watermark is None else high_watermark,
        now_ms=now_ms,
        last_batch_of_producers=producers,
        map_capacity=capacity,
    )
    if job is None:
        return None
    result = run_pass(log.fs, job)
    assert log.commit_cleaning(result, now_ms)
    return result
