"""Tests for the Kafka error-code table in ``odradek.protocol.error_codes``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.protocol import error_codes
from odradek.protocol.error_codes import ErrorCode, error_name

# The highest code Kafka 4.0 defines.
HIGHEST_CODE = 129

# Every code whose Kafka exception subclasses RetriableException (as of Kafka 4.0).
RETRIABLE = frozenset(
    {
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.NOT_CONTROLLER,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        ErrorCode.LISTENER_NOT_FOUND,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
        ErrorCode.ELECTION_NOT_NEEDED,
        ErrorCode.UNSTABLE_OFFSET_COMMIT,
        ErrorCode.THROTTLING_QUOTA_EXCEEDED,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.INCONSISTENT_TOPIC_ID,
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
        ErrorCode.SHARE_SESSION_NOT_FOUND,
        ErrorCode.INVALID_SHARE_SESSION_EPOCH,
    }
)


@pytest.mark.parametrize(
    ("name", "number"),
    [
        ("UNKNOWN_SERVER_ERROR", -1),
        ("NONE", 0),
        ("OFFSET_OUT_OF_RANGE", 1),
        ("CORRUPT_MESSAGE", 2),
        ("UNKNOWN_TOPIC_OR_PARTITION", 3),
        ("LEADER_NOT_AVAILABLE", 5),
        ("NOT_LEADER_OR_FOLLOWER", 6),
        ("REQUEST_TIMED_OUT", 7),
        ("MESSAGE_TOO_LARGE", 10),
        ("NETWORK_EXCEPTION", 13),
        ("NOT_COORDINATOR", 16),
        ("NOT_ENOUGH_REPLICAS", 19),
        ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", 20),
        ("ILLEGAL_GENERATION", 22),
        ("UNKNOWN_MEMBER_ID", 25),
        ("REBALANCE_IN_PROGRESS", 27),
        ("TOPIC_AUTHORIZATION_FAILED", 29),
        ("UNSUPPORTED_VERSION", 35),
        ("TOPIC_ALREADY_EXISTS", 36),
        ("NOT_CONTROLLER", 41),
        ("INVALID_REQUEST", 42),
        ("OUT_OF_ORDER_SEQUENCE_NUMBER", 45),
        ("DUPLICATE_SEQUENCE_NUMBER", 46),
        ("INVALID_PRODUCER_EPOCH", 47),
        ("INVALID_TXN_STATE", 48),
        ("CONCURRENT_TRANSACTIONS", 51),
        ("KAFKA_STORAGE_ERROR", 56),
        ("UNKNOWN_PRODUCER_ID", 59),
        ("FENCED_LEADER_EPOCH", 74),
        ("UNKNOWN_LEADER_EPOCH", 75),
        ("OFFSET_NOT_AVAILABLE", 78),
        ("PRODUCER_FENCED", 90),
        ("UNKNOWN_TOPIC_ID", 100),
        ("TRANSACTION_ABORTABLE", 120),
        ("INVALID_RECORD_STATE", 121),
        ("SHARE_SESSION_NOT_FOUND", 122),
        ("INVALID_VOTER_KEY", 125),
        ("DUPLICATE_VOTER", 126),
        ("VOTER_NOT_FOUND", 127),
        ("INVALID_REGULAR_EXPRESSION", 128),
        ("REBOOTSTRAP_REQUIRED", 129),
    ],
)
def test_well_known_codes_have_kafkas_numbers(name: str, number: int) -> None:
    code = ErrorCode[name]
    assert int(code) == number
    assert code.value == number
    assert ErrorCode(number) is code
    assert code.name == name


def test_lookup_by_number_returns_the_member() -> None:
    assert ErrorCode(3) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert ErrorCode(-1) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert int(ErrorCode.NONE) == 0
    assert not ErrorCode.NONE  # usable as "no error" in a boolean test


def test_codes_are_contiguous_from_minus_one_to_highest() -> None:
    assert sorted(int(code) for code in ErrorCode) == list(range(-1, HIGHEST_CODE + 1))


def test_no_aliases() -> None:
    assert len(ErrorCode.__members__) == len(ErrorCode) == HIGHEST_CODE + 2


def test_codes_fit_in_int16() -> None:
    assert all(-(2**15) <= int(code) < 2**15 for code in ErrorCode)


def test_table_covers_exactly_the_members() -> None:
    assert set(error_codes._TABLE) == {int(code) for code in ErrorCode}


@pytest.mark.parametrize("code", sorted(RETRIABLE), ids=lambda c: c.name)
def test_retriable_codes(code: ErrorCode) -> None:
    assert code.retriable is True


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.UNKNOWN_SERVER_ERROR,
        ErrorCode.NONE,
        ErrorCode.OFFSET_OUT_OF_RANGE,
        ErrorCode.BROKER_NOT_AVAILABLE,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.STALE_CONTROLLER_EPOCH,
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ErrorCode.UNSUPPORTED_VERSION,
        ErrorCode.TOPIC_ALREADY_EXISTS,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.INVALID_TXN_STATE,
        ErrorCode.UNKNOWN_PRODUCER_ID,
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.TRANSACTION_ABORTABLE,
        ErrorCode.FENCED_STATE_EPOCH,
        ErrorCode.REBOOTSTRAP_REQUIRED,
    ],
    ids=lambda c: c.name,
)
def test_non_retriable_codes(code: ErrorCode) -> None:
    assert code.retriable is False


def test_retriable_set_is_exactly_kafkas() -> None:
    assert {code for code in ErrorCode if code.retriable} == RETRIABLE
    assert len(RETRIABLE) == 31


@pytest.mark.parametrize("code", list(ErrorCode), ids=lambda c: c.name)
def test_every_member_has_a_one_line_message(code: ErrorCode) -> None:
    assert isinstance(code.message, str)
    assert code.message.strip() == code.message
    assert code.message
    assert "\n" not in code.message


def test_messages_are_distinct() -> None:
    messages = [code.message for code in ErrorCode]
    assert len(set(messages)) == len(messages)


@pytest.mark.parametrize("code", list(ErrorCode), ids=lambda c: c.name)
def test_error_name_of_known_codes(code: ErrorCode) -> None:
    assert error_name(int(code)) == code.name
    assert error_name(code) == code.name


def test_error_name_samples() -> None:
    assert error_name(0) == "NONE"
    assert error_name(-1) == "UNKNOWN_SERVER_ERROR"
    assert error_name(6) == "NOT_LEADER_OR_FOLLOWER"


@pytest.mark.parametrize("number", [HIGHEST_CODE + 1, 1000, 32767, -2, -32768])
def test_error_name_of_unknown_codes(number: int) -> None:
    assert error_name(number) == f"UNKNOWN_ERROR_CODE({number})"
    with pytest.raises(ValueError):
        ErrorCode(number)


@given(st.integers(min_value=-(2**15), max_value=2**15 - 1))
def test_error_name_never_raises_for_any_int16(number: int) -> None:
    name = error_name(number)
    if -1 <= number <= HIGHEST_CODE:
        assert name == ErrorCode(number).name
    else:
        assert name == f"UNKNOWN_ERROR_CODE({number})"
