"""What the transaction coordinator hands back: answers, records to append, markers to send.

The coordinator never waits. A request method returns a :class:`TxnResult`:

* with no ``append``, the result is the answer: send ``error`` (and, for InitProducerId
  and EndTxn v5+, ``producer_id`` and ``producer_epoch``) now;
* with an ``append`` whose cause :attr:`~AppendCause.client_waits`, the answer waits:
  append ``append.key``/``append.value`` to partition ``append.partition`` of
  ``__transaction_state`` (acks=all, uncompressed: Kafka's ``TransactionLog`` enforces
  both), then report the outcome with ``append_completed(append, error, now_ms)``. The
  :class:`TxnResult` that returns is the answer to the request that waited.

The result of ``append_completed`` may itself carry work that nobody waits for: an
``append`` of the record that completes a transaction (when it had no partitions) and
``markers`` to send. The caller sends the markers as WriteTxnMarkers requests to the
leaders of their partitions and, once every partition has its marker, calls
``markers_written``, which returns the completing append.

Timers and loading return :class:`TxnActions`: several appends and markers at once.

At most one append is outstanding per transactional id (its transition is pending until
``append_completed``), so a caller can key whatever waits on the append itself.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.coordinator.transactions.state import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
)
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
)

__all__ = [
    "AppendCause",
    "ListedTransaction",
    "TransactionDescription",
    "TransactionListing",
    "TxnActions",
    "TxnAppend",
    "TxnMarkers",
    "TxnResult",
    "coordinator_error_for_append",
    "error_for_request_version",
]


class AppendCause(enum.Enum):
    """Why a record is appended, and so whether a client waits for it."""

    INIT_PRODUCER_ID = "InitProducerId"
    """A new epoch, or the fence and abort of an ongoing transaction (its answer is then
    CONCURRENT_TRANSACTIONS, and the client retries)."""
    ADD_PARTITIONS = "AddPartitionsToTxn"
    """AddPartitionsToTxn or AddOffsetsToTxn (Kafka handles both alike)."""
    END_TXN = "EndTxn"
    COMPLETE_TRANSACTION = "CompleteTransaction"
    """The markers are written: CompleteCommit or CompleteAbort."""
    ABORT_TIMED_OUT = "AbortTimedOut"
    """The fence and abort of a transaction open longer than its timeout."""
    EXPIRE_TRANSACTIONAL_ID = "ExpireTransactionalId"
    """The tombstone of a transactional id idle for ``transactional.id.expiration.ms``."""

    @property
    def client_waits(self) -> bool:
        return self in (
            AppendCause.INIT_PRODUCER_ID,
            AppendCause.ADD_PARTITIONS,
            AppendCause.END_TXN,
        )


@dataclass(frozen=True, slots=True)
class TxnAppend:
    """One record to append to ``__transaction_state``."""

    transactional_id: str
    partition: int
    coordinator_epoch: int
    """The leader epoch of the partition when the record was made: an append that
    completes after the partition moved is answered NOT_COORDINATOR."""
    key: bytes
    value: bytes | None
    cause: AppendCause


@dataclass(frozen=True, slots=True)
class TxnMarkers:
    """The end of one transaction, to write as a WriteTxnMarkers entry to the leader of
    each partition (Kafka's ``TxnMarkerEntry``)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    """The epoch of the PrepareCommit/PrepareAbort record: with transaction version 2,
    the bumped one, which fences the producer's old epoch on every partition."""
    committed: bool
    coordinator_epoch: int
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class TxnResult:
    """An answer (``error``, producer id and epoch), or an append that the answer waits for;
    and the work that follows an append."""

    error: ErrorCode = ErrorCode.NONE
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    append: TxnAppend | None = None
    markers: TxnMarkers | None = None


@dataclass(frozen=True, slots=True)
class TxnActions:
    """Appends and markers from a timer or a load; nobody waits for them."""

    appends: tuple[TxnAppend, ...] = ()
    markers: tuple[TxnMarkers, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.appends or self.markers)


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """One entry of a DescribeTransactions response."""

    transactional_id: str
    error: ErrorCode
    state: str = ""
    """Kafka's name of the state ("Ongoing", ...)."""
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = -1
    topics: Mapping[str, tuple[int, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TransactionListing:
    """A ListTransactions response of this coordinator."""

    error: ErrorCode
    unknown_state_filters: tuple[str, ...] = ()
    transactions: tuple[ListedTransaction, ...] = ()


def coordinator_error_for_append(error: ErrorCode) -> ErrorCode:
    """The error a client gets when the append of its transition failed with ``error``
    (Kafka's ``TransactionStateManager.appendTransactionToLog``): replication trouble is
    COORDINATOR_NOT_AVAILABLE (the client retries), a lost leadership NOT_COORDINATOR
    (the client looks the coordinator up again), a record too large a server error."""
    if error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


# The first version of each request whose clients know PRODUCER_FENCED (KIP-588).
_PRODUCER_FENCED_SINCE = {
    InitProducerIdRequest.API_KEY: 4,
    AddPartitionsToTxnRequest.API_KEY: 2,
    AddOffsetsToTxnRequest.API_KEY: 2,
    EndTxnRequest.API_KEY: 2,
}


def error_for_request_version(api_key: int, api_version: int, error: ErrorCode) -> ErrorCode:
    """The error to put on the wire for a request of ``api_version``: a client older than
    KIP-588 does not know PRODUCER_FENCED and gets INVALID_PRODUCER_EPOCH instead, which
    it handles the same way (as Kafka's ``KafkaApis`` does)."""
    since = _PRODUCER_FENCED_SINCE.get(api_key)
    if error == ErrorCode.PRODUCER_FENCED and since is not None and api_version < since:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error
