"""``__transaction_state`` records: Kafka's byte layout written out by hand, every version,
round trips, replay and partitioning.

The expected bytes follow Kafka's ``TransactionLogKey.json`` and
``TransactionLogValue.json``: a layout error (a field out of order, a classic length
where a compact one belongs, a tagged field written at its default) fails here.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.coordinator.records import java_string_hash
from odradek.coordinator.transactions.records import (
    PartitionsSchema,
    TransactionLogKey,
    TransactionLogValue,
    TxnRecord,
    TxnTombstone,
    UnknownKey,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    metadata_from_value,
    partition_for,
    read_record,
    record_for,
    replay,
    tombstone_for,
    value_from_metadata,
    value_version_for,
)
from odradek.coordinator.transactions.state import (
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TransactionVersion,
)
from odradek.core.errors import DecodeError, EncodeError, InvariantError
from tests.coordinator.record_bytes import cs, i8, i16, i32, i64, s

ONGOING_VALUE = TransactionLogValue(
    producer_id=4000,
    producer_epoch=3,
    transaction_timeout_ms=60_000,
    transaction_status=TransactionState.ONGOING,
    transaction_partitions=(
        PartitionsSchema("orders", (0, 2)),
        PartitionsSchema("payments", (1,)),
    ),
    transaction_last_update_timestamp_ms=1_700_000_000_500,
    transaction_start_timestamp_ms=1_700_000_000_000,
)

# Version 0: int16 version, then classic fields; arrays are int32 counts.
ONGOING_V0 = (
    i16(0)
    + i64(4000)
    + i16(3)
    + i32(60_000)
    + i8(1)
    + i32(2)
    + s("orders")
    + i32(2)
    + i32(0)
    + i32(2)
    + s("payments")
    + i32(1)
    + i32(1)
    + i64(1_700_000_000_500)
    + i64(1_700_000_000_000)
)

# Version 1: compact arrays (count + 1) and strings, a tagged-field section closing each
# partitions struct and the value; here every tagged field is at its default.
ONGOING_V1 = (
    i16(1)
    + i64(4000)
    + i16(3)
    + i32(60_000)
    + i8(1)
    + b"\x03"
    + cs("orders")
    + b"\x03"
    + i32(0)
    + i32(2)
    + b"\x00"
    + cs("payments")
    + b"\x02"
    + i32(1)
    + b"\x00"
    + i64(1_700_000_000_500)
    + i64(1_700_000_000_000)
    + b"\x00"
)


def test_key_layout() -> None:
    """TransactionLogKey v0: int16 version 0 (the coordinator record type) + string."""
    assert encode_key("my-txn") == i16(0) + s("my-txn")
    assert decode_key(i16(0) + s("my-txn")) == TransactionLogKey("my-txn")


def test_key_of_another_version_is_reported_not_decoded() -> None:
    """Kafka skips a key version it does not know on load (an aborted upgrade's leftover)."""
    assert decode_key(i16(5) + b"whatever") == UnknownKey(5)
    assert read_record(i16(5) + b"whatever", None) == UnknownKey(5)


def test_key_with_trailing_bytes_is_malformed() -> None:
    with pytest.raises(DecodeError):
        decode_key(i16(0) + s("t") + b"\x00")


def test_value_v0_layout() -> None:
    assert encode_value(ONGOING_VALUE, 0) == ONGOING_V0
    assert decode_value(ONGOING_V0) == ONGOING_VALUE


def test_value_v1_layout_with_defaults() -> None:
    assert encode_value(ONGOING_VALUE, 1) == ONGOING_V1
    assert decode_value(ONGOING_V1) == ONGOING_VALUE


def test_value_v1_tagged_fields_in_tag_order_only_when_not_default() -> None:
    """PreviousProducerId is tag 0 (int64), NextProducerId tag 1 (int64, left out at its
    default -1 here), ClientTransactionVersion tag 2 (int16)."""
    value = TransactionLogValue(
        producer_id=7,
        producer_epoch=32767,
        transaction_timeout_ms=1000,
        transaction_status=TransactionState.PREPARE_COMMIT,
        transaction_partitions=(PartitionsSchema("t", (5,)),),
        transaction_last_update_timestamp_ms=20,
        transaction_start_timestamp_ms=10,
        previous_producer_id=6,
        client_transaction_version=2,
    )
    expected = (
        i16(1)
        + i64(7)
        + i16(32767)
        + i32(1000)
        + i8(2)
        + b"\x02"
        + cs("t")
        + b"\x02"
        + i32(5)
        + b"\x00"
        + i64(20)
        + i64(10)
        + b"\x02"  # two tagged fields
        + b"\x00\x08"
        + i64(6)
        + b"\x02\x02"
        + i16(2)
    )
    assert encode_value(value, 1) == expected
    assert decode_value(expected) == value


def test_value_v1_next_producer_id_and_next_producer_epoch() -> None:
    """NextProducerId (tag 1) and the newer NextProducerEpoch (tag 3, KIP-939) decode."""
    data = (
        i16(1)
        + i64(7)
        + i16(5)
        + i32(1000)
        + i8(3)
        + b"\x01"  # an empty (not null) partitions array
        + i64(20)
        + i64(10)
        + b"\x02"
        + b"\x01\x08"
        + i64(99)
        + b"\x03\x02"
        + i16(4)
    )
    value = decode_value(data)
    assert value.next_producer_id == 99
    assert value.next_producer_epoch == 4
    assert value.transaction_partitions == ()
    assert encode_value(value, 1) == data


def test_empty_value_has_a_null_partition_array() -> None:
    """Kafka writes a null TransactionPartitions for Empty: -1 in v0, 0 in v1."""
    m = metadata(TransactionState.EMPTY, partitions=frozenset(), start=-1)
    value = value_from_metadata(m)
    assert value.transaction_partitions is None
    assert encode_value(value, 0)[17:21] == i32(-1)
    assert encode_value(value, 1)[17:18] == b"\x00"


def test_unknown_tagged_fields_are_skipped() -> None:
    data = ONGOING_V1[:-1] + b"\x01" + b"\x09\x03abc"
    assert decode_value(data) == ONGOING_VALUE


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(i16(2) + ONGOING_V1[2:], id="unknown version"),
        pytest.param(i16(-1), id="negative version"),
        pytest.param(ONGOING_V0[:-3], id="truncated"),
        pytest.param(ONGOING_V0 + b"\x00", id="trailing bytes"),
        pytest.param(ONGOING_V1[:-1] + b"\x01\x00\x04" + i32(1), id="tag 0 of the wrong size"),
        pytest.param(
            i16(0) + ONGOING_V0[2:17] + i32(1) + s("t") + i32(-1) + i64(0) + i64(0),
            id="null partition ids",
        ),
        pytest.param(i16(0) + ONGOING_V0[2:17] + i32(1000) + s("t"), id="count beyond the data"),
    ],
)
def test_malformed_values_raise_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_value(data)


def test_value_version_cannot_be_encoded_beyond_1() -> None:
    with pytest.raises(EncodeError):
        encode_value(ONGOING_VALUE, 2)


def test_value_version_follows_the_cluster_transaction_version() -> None:
    """Kafka's TransactionVersion.transactionLogValueVersion: level 0 writes v0 (readable by
    every broker), levels 1 and 2 the flexible v1."""
    assert [value_version_for(level) for level in (0, 1, 2)] == [0, 1, 1]
    m = metadata(TransactionState.ONGOING)
    assert record_for(m, 0)[1] == encode_value(value_from_metadata(m), 0)
    assert record_for(m, 2)[1] == encode_value(value_from_metadata(m), 1)


def metadata(
    state: TransactionState,
    *,
    partitions: frozenset[TopicPartition] = frozenset({TopicPartition("orders", 1)}),
    start: int = 10,
) -> TransactionMetadata:
    return TransactionMetadata(
        transactional_id="txn",
        producer_id=42,
        previous_producer_id=41,
        next_producer_id=43,
        producer_epoch=5,
        last_producer_epoch=4,
        txn_timeout_ms=30_000,
        state=state,
        topic_partitions=partitions,
        txn_start_timestamp_ms=start,
        txn_last_update_timestamp_ms=20,
        client_transaction_version=TransactionVersion.TV_2,
    )


def test_metadata_round_trip_v1_loses_only_what_is_never_written() -> None:
    """The last epoch is not in the record (Kafka loads NO_PRODUCER_EPOCH)."""
    m = metadata(TransactionState.PREPARE_COMMIT)
    loaded = read_record(*record_for(m, 2))
    assert loaded == TxnRecord(
        TransactionMetadata(
            transactional_id="txn",
            producer_id=42,
            previous_producer_id=41,
            next_producer_id=43,
            producer_epoch=5,
            last_producer_epoch=-1,
            txn_timeout_ms=30_000,
            state=TransactionState.PREPARE_COMMIT,
            topic_partitions=frozenset({TopicPartition("orders", 1)}),
            txn_start_timestamp_ms=10,
            txn_last_update_timestamp_ms=20,
            client_transaction_version=TransactionVersion.TV_2,
        )
    )


def test_metadata_round_trip_v0_drops_the_tagged_fields() -> None:
    m = metadata(TransactionState.COMPLETE_ABORT, partitions=frozenset())
    loaded = read_record(*record_for(m, 0))
    assert isinstance(loaded, TxnRecord)
    assert loaded.metadata.previous_producer_id == -1
    assert loaded.metadata.next_producer_id == -1
    assert loaded.metadata.client_transaction_version == TransactionVersion.TV_0


def test_empty_record_partitions_are_ignored_on_load() -> None:
    """Kafka's read skips the partitions of an Empty record."""
    value = value_from_metadata(metadata(TransactionState.ONGOING))
    empty = replace(value, transaction_status=int(TransactionState.EMPTY))
    assert metadata_from_value("txn", empty).topic_partitions == frozenset()


@pytest.mark.parametrize("status", [6, 7, 8, -1])
def test_states_never_written_do_not_load(status: int) -> None:
    """Dead becomes a tombstone and PrepareEpochFence is never appended; 8 is no state."""
    value = value_from_metadata(metadata(TransactionState.ONGOING))
    bad = replace(value, transaction_status=status)
    with pytest.raises(DecodeError):
        read_record(encode_key("txn"), encode_value(bad, 1))


def test_unknown_client_transaction_version_does_not_load() -> None:
    value = value_from_metadata(metadata(TransactionState.ONGOING))
    bad = replace(value, client_transaction_version=9)
    with pytest.raises(DecodeError):
        metadata_from_value("txn", bad)


def test_states_never_written_are_never_encoded() -> None:
    with pytest.raises(InvariantError):
        value_from_metadata(metadata(TransactionState.DEAD))
    with pytest.raises(InvariantError):
        value_from_metadata(metadata(TransactionState.EMPTY))  # Empty with partitions


def test_tombstone_and_replay() -> None:
    """Replay in log order: the last value of a key wins, a tombstone removes the key."""
    a1 = record_for(metadata(TransactionState.ONGOING), 2)
    a2 = record_for(metadata(TransactionState.PREPARE_ABORT), 2)
    b = (encode_key("b"), a1[1])
    assert read_record(*tombstone_for("txn")) == TxnTombstone("txn")
    loaded = replay([a1, b, a2, tombstone_for("b"), (i16(3) + b"?", None)])
    assert set(loaded) == {"txn"}
    assert loaded["txn"].state == TransactionState.PREPARE_ABORT
    assert replay([a1, tombstone_for("txn")]) == {}


@pytest.mark.parametrize(
    ("transactional_id", "partitions"),
    [("", 50), ("my-txn", 50), ("polygenelubricants", 50), ("\U0001f600", 7), ("a", 1)],
)
def test_partition_for_is_kafkas_abs_hash_code_mod_partitions(
    transactional_id: str, partitions: int
) -> None:
    """Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions, where
    Utils.abs(Integer.MIN_VALUE) is 0 ("polygenelubricants" hashes to it)."""
    h = java_string_hash(transactional_id)
    expected = (0 if h == -(1 << 31) else abs(h)) % partitions
    assert partition_for(transactional_id, partitions) == expected


def test_partition_for_known_values() -> None:
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 22
    with pytest.raises(ValueError, match=r"transaction\.state\.log\.num\.partitions"):
        partition_for("t", 0)


int16s = st.integers(-(1 << 15), (1 << 15) - 1)
int32s = st.integers(-(1 << 31), (1 << 31) - 1)
int64s = st.integers(-(1 << 63), (1 << 63) - 1)
partitions_schemas = st.lists(
    st.builds(
        PartitionsSchema,
        st.text(max_size=20),
        st.lists(int32s, max_size=5).map(tuple),
    ),
    max_size=4,
).map(tuple)
values = st.builds(
    TransactionLogValue,
    producer_id=int64s,
    producer_epoch=int16s,
    transaction_timeout_ms=int32s,
    transaction_status=st.integers(-128, 127),
    transaction_partitions=st.none() | partitions_schemas,
    transaction_last_update_timestamp_ms=int64s,
    transaction_start_timestamp_ms=int64s,
    previous_producer_id=int64s,
    next_producer_id=int64s,
    client_transaction_version=int16s,
    next_producer_epoch=int16s,
)


@settings(max_examples=200)
@given(values)
def test_value_v1_round_trips(value: TransactionLogValue) -> None:
    assert decode_value(encode_value(value, 1)) == value


@settings(max_examples=200)
@given(values)
def test_value_v0_round_trips_without_tagged_fields(value: TransactionLogValue) -> None:
    decoded = decode_value(encode_value(value, 0))
    assert decoded == TransactionLogValue(
        value.producer_id,
        value.producer_epoch,
        value.transaction_timeout_ms,
        value.transaction_status,
        value.transaction_partitions,
        value.transaction_last_update_timestamp_ms,
        value.transaction_start_timestamp_ms,
    )


@settings(max_examples=200)
@given(st.binary(max_size=80))
def test_arbitrary_bytes_decode_or_raise_decode_error(data: bytes) -> None:
    for candidate in (data, i16(0) + data, i16(1) + data):
        with contextlib.suppress(DecodeError):
            decode_value(candidate)
