"""The leader's record checks as pure functions: verdicts, error codes, timestamp changes."""

from __future__ import annotations

import pytest

from odradek.broker.record_validation import (
    INLINE_MAX_RECORDS,
    RecordPolicy,
    RecordVerdict,
    check_records,
    needs_record_check_thread,
    problem_error_code,
    set_timestamps,
)
from odradek.protocol.compression import (
    DecompressBuffer,
)
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.record_batch import (
    BAD_CRC,
    BAD_OFFSET_DELTA,
    BAD_RECORD_COUNT,
    BAD_RECORDS,
    DECOMPRESSED_TOO_LARGE,
    TRUNCATED,
    BatchHeader,
    Compression,
    TimestampType,
    validate_batches,
)
from odradek.protocol.record_codec import (
    Record,
    encode_batch,
)

NOW = 1_700_000_000_000


def check(records: bytes, policy: RecordPolicy | None = None) -> RecordVerdict:
    view = memoryview(bytearray(records))
    return check_records(
        view,
        validate_batches(view),
        policy or RecordPolicy(),
        NOW,
        DecompressBuffer(1 << 20),
        "t-0",
    )


@pytest.mark.parametrize(
    ("problem", "code"),
    [
        (TRUNCATED, ErrorCode.CORRUPT_MESSAGE),
        (BAD_CRC, ErrorCode.CORRUPT_MESSAGE),
        (BAD_RECORD_COUNT, ErrorCode.INVALID_RECORD),
        (BAD_OFFSET_DELTA, ErrorCode.INVALID_RECORD),
        (BAD_RECORDS, ErrorCode.INVALID_RECORD),
        (DECOMPRESSED_TOO_LARGE, ErrorCode.MESSAGE_TOO_LARGE),
    ],
)
def test_problems_map_to_kafka_errors(problem: str, code: ErrorCode) -> None:
    assert problem_error_code(problem) == code


def test_a_true_batch_passes_with_its_max_timestamp() -> None:
    records = [Record(offset_delta=i, timestamp=NOW - i, key=b"k") for i in range(3)]
    verdict = check(encode_batch(records) + encode_batch(records, compression=Compression.LZ4))
    assert verdict == RecordVerdict(max_timestamps=(NOW, NOW))


def test_more_than_three_record_errors_are_all_returned_and_three_shown() -> None:
    records = [Record(offset_delta=i, timestamp=NOW, key=None) for i in range(5)]
    verdict = check(encode_batch(records), RecordPolicy(keys_required=True))
    assert verdict.error_code == ErrorCode.INVALID_RECORD
    assert [index for index, _ in verdict.record_errors] == [0, 1, 2, 3, 4]
    assert verdict.error_message is not None
    assert "due to 5 record errors in total" in verdict.error_message
    assert verdict.error_message.count("RecordError(") == 3


def test_a_key_error_and_a_timestamp_error_make_invalid_timestamp() -> None:
    records = [
        Record(offset_delta=0, timestamp=NOW, key=None),
        Record(offset_delta=1, timestamp=NOW + 3_600_001, key=b"k"),
    ]
    verdict = check(encode_batch(records), RecordPolicy(keys_required=True))
    assert verdict.error_code == ErrorCode.INVALID_TIMESTAMP
    assert [index for index, _ in verdict.record_errors] == [0, 1]


def test_a_log_append_time_topic_does_not_bound_the_producer_timestamps() -> None:
    records = [Record(offset_delta=0, timestamp=NOW + 10 * 3_600_000)]
    policy = RecordPolicy(timestamp_type=TimestampType.LOG_APPEND_TIME)
    assert check(encode_batch(records), policy).error_code == ErrorCode.NONE


def test_set_timestamps_touches_only_what_must_change() -> None:
    right = encode_batch([Record(offset_delta=0, timestamp=5)])
    view = memoryview(bytearray(right))
    headers = validate_batches(view)
    verdict = RecordVerdict(max_timestamps=(5,))
    assert set_timestamps(view, headers, verdict, RecordPolicy(), NOW) == -1
    assert bytes(view) == right
    policy = RecordPolicy(timestamp_type=TimestampType.LOG_APPEND_TIME)
    assert set_timestamps(view, headers, verdict, policy, NOW) == NOW
    (header,) = validate_batches(view)
    assert (header.timestamp_type, header.max_timestamp) == (TimestampType.LOG_APPEND_TIME, NOW)


def test_which_requests_go_to_the_record_check_thread() -> None:
    def headers(count: int, compression: Compression = Compression.NONE) -> list[BatchHeader]:
        records = [Record(offset_delta=i, timestamp=0) for i in range(count)]
        return validate_batches(encode_batch(records, compression=compression))

    assert not needs_record_check_thread(headers(INLINE_MAX_RECORDS))
    assert needs_record_check_thread(headers(INLINE_MAX_RECORDS + 1))
    # A compressed batch is checked on the loop too (its count bounds the walk as well).
    assert not needs_record_check_thread(headers(INLINE_MAX_RECORDS, Compression.SNAPPY))
    assert needs_record_check_thread(headers(INLINE_MAX_RECORDS + 1, Compression.ZSTD))
    # The count is the whole request's, across partitions and batches.
    half = headers(INLINE_MAX_RECORDS // 2 + 1)
    assert needs_record_check_thread(half + half)
