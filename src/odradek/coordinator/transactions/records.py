"""The bytes and layout of the ``__transaction_state`` topic.

This module owns what the transaction coordinator persists and where, as Kafka's
``TransactionLog`` does:

* :func:`partition_for`: the partition of ``__transaction_state`` that holds a
  transactional id, by Kafka's rule ``Utils.abs(transactionalId.hashCode) %
  transaction.state.log.num.partitions`` (the group coordinator's rule, whose
  :func:`~odradek.coordinator.records.partition_for` this reuses);
* the record key, hand-written from Kafka's ``TransactionLogKey``: an int16 version (0,
  which is also the coordinator record type of the topic) and the transactional id;
* the record value, hand-written from ``TransactionLogValue``: an int16 version and the
  fields of that version. Version 0 is classic; version 1 is flexible (compact strings and
  arrays, a tagged-field section after each struct) and carries three tagged fields:
  ``PreviousProducerId`` (tag 0, default -1), ``NextProducerId`` (tag 1, default -1) and
  ``ClientTransactionVersion`` (tag 2, default 0). Newer Kafka (KIP-939's two-phase
  commit, after 4.1) adds ``NextProducerEpoch`` as tag 3 with default -1: it is decoded
  here into :attr:`TransactionLogValue.next_producer_epoch` and written only when set, but
  the coordinator does not implement KIP-939 and never sets it;
* a tombstone (no value): a transactional id that expired.

Which value version is written follows Kafka 4.x's ``TransactionLog.valueToBytes``: the
*cluster's* finalized ``transaction.version`` decides, not the record's contents. Level 0
writes version 0 (readable by every Kafka); levels 1 and 2 write version 1 (the level
that allows a transaction version 2 client also guarantees that every broker reads
flexible values). A version 0 record drops the tagged fields, as Kafka's does: at level 0
no client uses transaction version 2, so only ``previous_producer_id`` is lost, which
costs a KIP-360 retry after a producer id rotation that spans a coordinator change.

Every version decodes; unknown tagged fields are skipped. A key of another version is
reported as :class:`UnknownKey` (Kafka skips it on load: a leftover of an aborted
upgrade); a value of an unknown version, or bytes that do not parse, raise
:class:`~odradek.core.errors.DecodeError`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from odradek.coordinator.records import partition_for as _offsets_partition_for
from odradek.coordinator.transactions.state import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TransactionVersion,
)
from odradek.core.errors import DecodeError, EncodeError
from odradek.core.invariant import invariant
from odradek.protocol.primitives import Reader, Writer

__all__ = [
    "KEY_VERSION",
    "TRANSACTION_STATE_TOPIC",
    "PartitionsSchema",
    "Record",
    "TransactionLogKey",
    "TransactionLogValue",
    "TxnRecord",
    "TxnTombstone",
    "UnknownKey",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "metadata_from_value",
    "partition_for",
    "read_record",
    "record_for",
    "replay",
    "tombstone_for",
    "value_from_metadata",
    "value_version_for",
]

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
"""The only key version: Kafka's ``CoordinatorRecordType.TRANSACTION_LOG``."""

Record = tuple[bytes, bytes | None]
"""A ``__transaction_state`` record: key bytes and value bytes, None for a tombstone."""

_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1
_TAG_CLIENT_TRANSACTION_VERSION = 2
_TAG_NEXT_PRODUCER_EPOCH = 3


def partition_for(transactional_id: str, transaction_state_partitions: int) -> int:
    """The ``__transaction_state`` partition that holds ``transactional_id``."""
    if transaction_state_partitions <= 0:
        raise ValueError(
            "transaction.state.log.num.partitions must be positive, "
            f"not {transaction_state_partitions}"
        )
    return _offsets_partition_for(transactional_id, transaction_state_partitions)


# ---------------------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TransactionLogKey:
    transactional_id: str


@dataclass(frozen=True, slots=True)
class UnknownKey:
    """A key of a version this coordinator does not know."""

    version: int


def encode_key(transactional_id: str) -> bytes:
    w = Writer()
    w.int16(KEY_VERSION)
    w.string(transactional_id)
    return w.getvalue()


def decode_key(data: bytes | bytearray | memoryview) -> TransactionLogKey | UnknownKey:
    r = Reader(data)
    version = r.int16()
    if version != KEY_VERSION:
        return UnknownKey(version)
    key = TransactionLogKey(r.string())
    r.expect_end()
    return key


# ---------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionsSchema:
    """One topic of a transaction and its partitions (Kafka's ``PartitionsSchema``)."""

    topic: str
    partition_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    """``TransactionLogValue``'s fields, under Kafka's names."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    """A :class:`TransactionState` id, as the int8 of the record."""
    transaction_partitions: tuple[PartitionsSchema, ...] | None
    """None (a null array) is what Kafka writes for Empty."""
    transaction_last_update_timestamp_ms: int
    transaction_start_timestamp_ms: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0
    next_producer_epoch: int = NO_PRODUCER_EPOCH
    """KIP-939 (newer than 4.1); version 1 only, decoded but never set by Odradek."""


def value_version_for(transaction_version_level: int) -> int:
    """The value version Kafka writes at a finalized ``transaction.version`` level."""
    return 1 if transaction_version_level >= TransactionVersion.TV_1 else 0


def encode_value(value: TransactionLogValue, version: int) -> bytes:
    """Encode in ``version`` (0 or 1). Version 0 has no tagged fields and drops them."""
    if version not in (0, 1):
        raise EncodeError(f"TransactionLogValue has no version {version}")
    flexible = version == 1
    w = Writer()
    w.int16(version)
    w.int64(value.producer_id)
    w.int16(value.producer_epoch)
    w.int32(value.transaction_timeout_ms)
    w.int8(value.transaction_status)
    partitions = value.transaction_partitions
    if flexible:
        w.unsigned_varint(0 if partitions is None else len(partitions) + 1)
    else:
        w.int32(-1 if partitions is None else len(partitions))
    for p in partitions or ():
        if flexible:
            w.compact_string(p.topic)
            w.unsigned_varint(len(p.partition_ids) + 1)
        else:
            w.string(p.topic)
            w.int32(len(p.partition_ids))
        for partition_id in p.partition_ids:
            w.int32(partition_id)
        if flexible:
            w.unsigned_varint(0)  # the struct's tagged fields: none
    w.int64(value.transaction_last_update_timestamp_ms)
    w.int64(value.transaction_start_timestamp_ms)
    if flexible:
        w.tagged_fields(_tagged_fields(value))
    return w.getvalue()


def _tagged_fields(value: TransactionLogValue) -> list[tuple[int, bytes]]:
    # Kafka's generated code writes a tagged field only when it differs from its default.
    fields: list[tuple[int, bytes]] = []
    for tag, number, default, width in (
        (_TAG_PREVIOUS_PRODUCER_ID, value.previous_producer_id, NO_PRODUCER_ID, 8),
        (_TAG_NEXT_PRODUCER_ID, value.next_producer_id, NO_PRODUCER_ID, 8),
        (_TAG_CLIENT_TRANSACTION_VERSION, value.client_transaction_version, 0, 2),
        (_TAG_NEXT_PRODUCER_EPOCH, value.next_producer_epoch, NO_PRODUCER_EPOCH, 2),
    ):
        if number != default:
            w = Writer()
            if width == 8:
                w.int64(number)
            else:
                w.int16(number)
            fields.append((tag, w.getvalue()))
    return fields


def decode_value(data: bytes | bytearray | memoryview) -> TransactionLogValue:
    r = Reader(data)
    version = r.int16()
    if version not in (0, 1):
        raise DecodeError(f"TransactionLogValue has no version {version}")
    flexible = version == 1
    producer_id = r.int64()
    producer_epoch = r.int16()
    timeout_ms = r.int32()
    status = r.int8()
    count = r.compact_array_length() if flexible else r.array_length()
    partitions: tuple[PartitionsSchema, ...] | None = None
    if count is not None:
        entries = []
        for _ in range(count):
            topic = r.compact_string() if flexible else r.string()
            n = r.compact_array_length() if flexible else r.array_length()
            if n is None:
                raise DecodeError(f"null partition ids for topic {topic!r} in a transaction")
            entries.append(PartitionsSchema(topic, tuple(r.int32() for _ in range(n))))
            if flexible:
                _skip_tagged_fields(r)
        partitions = tuple(entries)
    last_update_ms = r.int64()
    start_ms = r.int64()
    tagged = {
        _TAG_PREVIOUS_PRODUCER_ID: NO_PRODUCER_ID,
        _TAG_NEXT_PRODUCER_ID: NO_PRODUCER_ID,
        _TAG_CLIENT_TRANSACTION_VERSION: 0,
        _TAG_NEXT_PRODUCER_EPOCH: NO_PRODUCER_EPOCH,
    }
    if flexible:
        for _ in range(r.tagged_field_count()):
            tag, field = r.tagged_field()
            if tag in (_TAG_PREVIOUS_PRODUCER_ID, _TAG_NEXT_PRODUCER_ID):
                tagged[tag] = field.int64()
            elif tag in (_TAG_CLIENT_TRANSACTION_VERSION, _TAG_NEXT_PRODUCER_EPOCH):
                tagged[tag] = field.int16()
            else:
                continue  # a tag newer than this code: ignorable by definition
            field.expect_end()
    r.expect_end()
    return TransactionLogValue(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transaction_timeout_ms=timeout_ms,
        transaction_status=status,
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=last_update_ms,
        transaction_start_timestamp_ms=start_ms,
        previous_producer_id=tagged[_TAG_PREVIOUS_PRODUCER_ID],
        next_producer_id=tagged[_TAG_NEXT_PRODUCER_ID],
        client_transaction_version=tagged[_TAG_CLIENT_TRANSACTION_VERSION],
        next_producer_epoch=tagged[_TAG_NEXT_PRODUCER_EPOCH],
    )


def _skip_tagged_fields(r: Reader) -> None:
    for _ in range(r.tagged_field_count()):
        r.tagged_field()


# ---------------------------------------------------------------------------------------
# Metadata <-> records
# ---------------------------------------------------------------------------------------


def value_from_metadata(m: TransactionMetadata) -> TransactionLogValue:
    """What Kafka's ``valueToBytes`` writes for ``m``: Empty has a null partition array."""
    invariant(
        m.state != TransactionState.EMPTY or not m.topic_partitions,
        f"{m.transactional_id} is Empty with partitions {sorted(m.topic_partitions)}",
    )
    invariant(
        m.state not in (TransactionState.DEAD, TransactionState.PREPARE_EPOCH_FENCE),
        f"{m.transactional_id}: {m.state.name} is never written",
    )
    partitions: tuple[PartitionsSchema, ...] | None = None
    if m.state != TransactionState.EMPTY:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in m.topic_partitions:
            by_topic.setdefault(topic, []).append(partition)
        # Sorted, so that one metadata always gives the same bytes.
        partitions = tuple(
            PartitionsSchema(topic, tuple(sorted(ids))) for topic, ids in sorted(by_topic.items())
        )
    return TransactionLogValue(
        producer_id=m.producer_id,
        producer_epoch=m.producer_epoch,
        transaction_timeout_ms=m.txn_timeout_ms,
        transaction_status=int(m.state),
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=m.txn_last_update_timestamp_ms,
        transaction_start_timestamp_ms=m.txn_start_timestamp_ms,
        previous_producer_id=m.previous_producer_id,
        next_producer_id=m.next_producer_id,
        client_transaction_version=int(m.client_transaction_version),
    )


def metadata_from_value(transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
    """The metadata a coordinator loads from a record (Kafka's ``TransactionLog.read``):
    no last epoch, no pending state; an Empty record's partitions are ignored."""
    try:
        state = TransactionState(value.transaction_status)
    except ValueError:
        raise DecodeError(
            f"{transactional_id}: unknown transaction status {value.transaction_status}"
        ) from None
    if state in (TransactionState.DEAD, TransactionState.PREPARE_EPOCH_FENCE):
        # A coordinator writes a tombstone for Dead and never writes the fence itself.
        raise DecodeError(f"{transactional_id}: status {state.name} is never written")
    try:
        client_version = TransactionVersion(value.client_transaction_version)
    except ValueError:
        raise DecodeError(
            f"{transactional_id}: unknown client transaction version "
            f"{value.client_transaction_version}"
        ) from None
    partitions: frozenset[TopicPartition] = frozenset()
    if state != TransactionState.EMPTY:
        partitions = frozenset(
            TopicPartition(p.topic, partition_id)
            for p in value.transaction_partitions or ()
            for partition_id in p.partition_ids
        )
    return TransactionMetadata(
        transactional_id=transactional_id,
        producer_id=value.producer_id,
        previous_producer_id=value.previous_producer_id,
        next_producer_id=value.next_producer_id,
        producer_epoch=value.producer_epoch,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        txn_timeout_ms=value.transaction_timeout_ms,
        state=state,
        topic_partitions=partitions,
        txn_start_timestamp_ms=value.transaction_start_timestamp_ms,
        txn_last_update_timestamp_ms=value.transaction_last_update_timestamp_ms,
        client_transaction_version=client_version,
    )


def record_for(m: TransactionMetadata, transaction_version_level: int) -> Record:
    """The record of ``m`` in the value version the cluster's level calls for."""
    value = value_from_metadata(m)
    return encode_key(m.transactional_id), encode_value(
        value, value_version_for(transaction_version_level)
    )


def tombstone_for(transactional_id: str) -> Record:
    return encode_key(transactional_id), None


@dataclass(frozen=True, slots=True)
class TxnRecord:
    metadata: TransactionMetadata


@dataclass(frozen=True, slots=True)
class TxnTombstone:
    transactional_id: str


def read_record(
    key: bytes | bytearray | memoryview, value: bytes | bytearray | memoryview | None
) -> TxnRecord | TxnTombstone | UnknownKey:
    """One record of the topic, as a loader replays it (Kafka's ``TransactionLog.read``)."""
    decoded = decode_key(key)
    if isinstance(decoded, UnknownKey):
        return decoded
    if value is None:
        return TxnTombstone(decoded.transactional_id)
    return TxnRecord(metadata_from_value(decoded.transactional_id, decode_value(value)))


def replay(records: Iterable[Record]) -> dict[str, TransactionMetadata]:
    """Replay records in log order: the last value of a key wins, a tombstone removes it.

    Every record is decoded before anything is returned, so a malformed one
    (:class:`~odradek.core.errors.DecodeError`) leaves the caller with nothing half-loaded.
    """
    loaded: dict[str, TransactionMetadata] = {}
    for key, value in records:
        result = read_record(key, value)
        if isinstance(result, TxnRecord):
            loaded[result.metadata.transactional_id] = result.metadata
        elif isinstance(result, TxnTombstone):
            loaded.pop(result.transactional_id, None)
    return loaded
