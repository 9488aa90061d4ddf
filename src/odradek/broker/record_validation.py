"""The leader's checks of a produced batch's records, and the timestamps it sets: Kafka's
LogValidator rules, as pure functions of the request's bytes, a topic's policy and the
time.

This module owns:

* :class:`RecordPolicy`, what a topic's configs ask of its records
  (``message.timestamp.type``, ``message.timestamp.before.max.ms``,
  ``message.timestamp.after.max.ms``, keys on a ``compact`` topic);
* :func:`check_records`, run on the batches of one partition of a Produce request after
  their headers and CRCs passed: the record scan (count, offset deltas, framing; see
  :func:`~odradek.protocol.record_scan.scan_records`), then the policy, record by
  record, with KIP-467's per-record errors;
* :func:`set_timestamps`, the in-place change made just before the append: on a
  LogAppendTime topic the batch's timestamp type and maxTimestamp become the append
  time; on a CreateTime topic maxTimestamp becomes the records' largest timestamp where
  the producer wrote another (Kafka's ``setMaxTimestamp``, which rewrites the CRC);
* :func:`needs_record_check_thread` and :data:`INLINE_DECOMPRESSED_BYTES`: which requests
  are checked off the event loop.

What differs from Kafka, on purpose: a client batch whose offset deltas are not 0..n-1
is refused (INVALID_RECORD) where Kafka recompresses it with new offsets, because the
broker never re-encodes a batch; a client batch that claims LogAppendTime is refused
(INVALID_TIMESTAMP) on every topic, where Kafka refuses it only on LogAppendTime topics
and rewrites the flag elsewhere; and records that decompress to more than
``socket.request.max.bytes`` are refused (MESSAGE_TOO_LARGE), a bound Kafka, which
decompresses in a stream, does not need. The follower does not run these checks, as
Kafka's does not: it stores what the leader stored, CRC-checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from odradek.core.errors import InvalidRecordBatchError, InvariantError
from odradek.protocol.compression import (
    DecompressBuffer,
)
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.record_batch import (
    BAD_CRC,
    BAD_LENGTH,
    DECOMPRESSED_TOO_LARGE,
    NO_TIMESTAMP,
    RECORDS_OFFSET,
    TRUNCATED,
    BatchHeader,
    Compression,
    TimestampType,
    set_max_timestamp,
)
from odradek.protocol.record_scan import (
    RecordsScan,
    record_timestamps,
    scan_records,
)

__all__ = [
    "DEFAULT_TIMESTAMP_AFTER_MAX_MS",
    "INLINE_DECOMPRESSED_BYTES",
    "INLINE_MAX_RECORDS",
    "LONG_MAX",
    "RecordPolicy",
    "RecordVerdict",
    "check_records",
    "needs_record_check_thread",
    "problem_error_code",
    "set_timestamps",
]

LONG_MAX = 2**63 - 1
DEFAULT_TIMESTAMP_AFTER_MAX_MS = 3_600_000
"""Kafka 4's default for ``log.message.timestamp.after.max.ms``: one hour ahead."""

INLINE_MAX_RECORDS = 8192
"""The most records a request may carry and still be checked on the event loop: at
0.6-0.9 us a record, at most some 7 ms, about the GIL's switch interval (5 ms), the
longest any other thread holds the loop up anyway. Larger requests go to the
record-check thread (see :func:`needs_record_check_thread`)."""

INLINE_DECOMPRESSED_BYTES = 4 * 1024 * 1024
"""The most a batch's records may decompress to on the event loop (the limit of the
state's :class:`DecompressBuffer`): some 4-6 ms of decompression here, and four times
what a default librdkafka batch (``batch.size`` 1,000,000 before compression) holds. A
batch that needs more is checked again on the record-check thread, whose buffer goes to
``socket.request.max.bytes``: the only batches decompressed twice."""

_CORRUPT = frozenset({TRUNCATED, BAD_LENGTH, BAD_CRC})


def problem_error_code(problem: str) -> ErrorCode:
    """Kafka's error for a batch that failed a check: CORRUPT_MESSAGE when its bytes are
    damaged (CRC, length), MESSAGE_TOO_LARGE when its records would not fit, and
    INVALID_RECORD when it is well formed but says something false about its records."""
    if problem in _CORRUPT:
        return ErrorCode.CORRUPT_MESSAGE
    if problem == DECOMPRESSED_TOO_LARGE:
        return ErrorCode.MESSAGE_TOO_LARGE
    return ErrorCode.INVALID_RECORD


@dataclass(frozen=True, slots=True)
class RecordPolicy:
    """What a topic's configuration asks of the records produced to it."""

    timestamp_type: TimestampType = TimestampType.CREATE_TIME
    """``message.timestamp.type``: CreateTime keeps the producer's timestamps (checked
    against the bounds below); LogAppendTime gives every batch the broker's time."""
    timestamp_before_max_ms: int = LONG_MAX
    """``message.timestamp.before.max.ms``: how far in the past a CreateTime record may be."""
    timestamp_after_max_ms: int = DEFAULT_TIMESTAMP_AFTER_MAX_MS
    """``message.timestamp.after.max.ms``: how far in the future a CreateTime record may be."""
    keys_required: bool = False
    """``cleanup.policy`` includes ``compact``: a record without a key is refused."""


@dataclass(frozen=True, slots=True)
class RecordVerdict:
    """The result of :func:`check_records` for one partition's batches."""

    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    record_errors: tuple[tuple[int, str], ...] = ()
    """(index of the record in its batch, why), Produce v8+'s ``record_errors``."""
    max_timestamps: tuple[int, ...] = ()
    """Per batch, the records' largest timestamp (what a CreateTime maxTimestamp must be)."""
    problem: str | None = None
    """The failed check (one of the record batch ``PROBLEMS``), if a check failed."""

    @property
    def needs_larger_buffer(self) -> bool:
        """The records decompress to more than the buffer used could hold."""
        return self.problem == DECOMPRESSED_TOO_LARGE


def needs_record_check_thread(headers: Sequence[BatchHeader]) -> bool:
    """Whether a request's batches are checked on the record-check thread from the start:
    when they carry more than :data:`INLINE_MAX_RECORDS` records in all (the count of a
    compressed batch may lie, but the walk stops at it, so it bounds the walk either way).

    Every other request is checked on the event loop, compressed batches included: on the
    thread, the walk holds the GIL like the loop does, and each hand-over waits for the
    GIL at both ends, so under load a thread cost more CPU per byte and gave less
    throughput than the loop (see the README's performance section)."""
    return sum(h.records_count for h in headers) > INLINE_MAX_RECORDS


def check_records(
    records: memoryview,
    headers: Sequence[BatchHeader],
    policy: RecordPolicy,
    now_ms: int,
    buffer: DecompressBuffer | None,
    partition_name: str,
) -> RecordVerdict:
    """Check every record of ``headers``' batches (validated headers in ``records``).

    The first batch that fails decides the verdict. ``buffer`` decompresses compressed
    batches (each once) and may be None when there are none. Nothing is changed here:
    :func:`set_timestamps` makes the changes once the batches are to be appended.
    """
    max_timestamps: list[int] = []
    for h in headers:
        try:
            if h.compression == Compression.NONE:
                data = records[h.position + RECORDS_OFFSET : h.end]
            else:
                if buffer is None:
                    raise InvariantError("a compressed batch needs a DecompressBuffer")
                data = buffer.records(records, h)
            try:
                scan = scan_records(data, h)
                refused = _apply_policy(data, h, scan, policy, now_ms, partition_name)
            finally:
                data.release()
                if buffer is not None:
                    buffer.release()
        except InvalidRecordBatchError as e:
            return RecordVerdict(problem_error_code(e.problem), str(e), problem=e.problem)
        if refused is not None:
            return refused
        max_timestamps.append(scan.max_timestamp)
    return RecordVerdict(max_timestamps=tuple(max_timestamps))


def set_timestamps(
    records: memoryview,
    headers: Sequence[BatchHeader],
    verdict: RecordVerdict,
    policy: RecordPolicy,
    now_ms: int,
) -> int:
    """Set each batch's timestamp type and maxTimestamp in place, as Kafka's LogValidator
    does before an append; return the log append time for the Produce response (-1 on a
    CreateTime topic). A batch already right is not touched (no CRC pass)."""
    if policy.timestamp_type == TimestampType.LOG_APPEND_TIME:
        for h in headers:
            set_max_timestamp(records, h.position, TimestampType.LOG_APPEND_TIME, now_ms)
        return now_ms
    for h, max_timestamp in zip(headers, verdict.max_timestamps, strict=True):
        set_max_timestamp(records, h.position, TimestampType.CREATE_TIME, max_timestamp)
    return NO_TIMESTAMP


def _apply_policy(
    data: memoryview,
    h: BatchHeader,
    scan: RecordsScan,
    policy: RecordPolicy,
    now_ms: int,
    partition_name: str,
) -> RecordVerdict | None:
    claims_append_time = h.timestamp_type == TimestampType.LOG_APPEND_TIME
    create_time = policy.timestamp_type == TimestampType.CREATE_TIME
    before = policy.timestamp_before_max_ms
    after = policy.timestamp_after_max_ms
    # The scan's smallest and largest timestamps settle the common case; only a batch
    # that might break a rule is walked again record by record, to name the records.
    out_of_bounds = create_time and (
        now_ms - scan.min_timestamp > before or scan.max_timestamp - now_ms > after
    )
    keyless = policy.keys_required and scan.keyless > 0
    if not (claims_append_time or out_of_bounds or keyless):
        return None
    errors: list[tuple[int, str]] = []
    invalid_timestamp = False
    for index, (timestamp, has_key) in enumerate(record_timestamps(data, h)):
        # Kafka's order for one record: the key first, then the timestamp.
        if policy.keys_required and not has_key:
            errors.append(
                (
                    index,
                    "Compacted topic cannot accept message without key in topic partition "
                    f"{partition_name}.",
                )
            )
        elif claims_append_time:
            errors.append((index, "Producer should not set timestamp type to LogAppendTime."))
            invalid_timestamp = True
        elif (
            create_time
            and timestamp != NO_TIMESTAMP
            and (now_ms - timestamp > before or timestamp - now_ms > after)
        ):
            errors.append(
                (
                    index,
                    f"Timestamp {timestamp} of message with offset {index} is out of "
                    f"range. The timestamp should be within [{now_ms - before}, "
                    f"{now_ms + after}]",
                )
            )
            invalid_timestamp = True
    if not errors:
        return None  # the only records outside the bounds carry no timestamp (-1)
    if invalid_timestamp:
        return RecordVerdict(
            ErrorCode.INVALID_TIMESTAMP,
            "One or more records have been rejected due to invalid timestamp",
            tuple(errors),
        )
    shown = ", ".join(
        f"RecordError(batchIndex={index}, message='{why}')" for index, why in errors[:3]
    )
    return RecordVerdict(
        ErrorCode.INVALID_RECORD,
        f"One or more records have been rejected due to {len(errors)} record errors in "
        f"total, and only showing the first three errors at most: [{shown}]",
        tuple(errors),
    )
