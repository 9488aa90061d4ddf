"""What each transactional request does to one transactional id: an error, or a transition.

This module owns the decisions Kafka's ``TransactionCoordinator`` takes under the lock of
one ``TransactionMetadata``: which error code a request gets, or which transition
(:mod:`.state`) it prepares. Nothing here knows about partitions of
``__transaction_state``, appends or markers; :mod:`.coordinator` does.

* InitProducerId (KIP-98, KIP-360): a pending transition or a transaction being
  completed answers CONCURRENT_TRANSACTIONS; a producer id and epoch that are neither the
  current nor a retry of the last answer PRODUCER_FENCED; an idle id gets the next epoch,
  or a new producer id when the epoch is exhausted; an ongoing transaction is fenced and
  aborted first, and the client retries.
* AddPartitionsToTxn / AddOffsetsToTxn: the producer id and epoch must be current
  (INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED); partitions already in the ongoing
  transaction need no write.
* The KIP-890 verification a partition leader asks for before it appends a transactional
  batch: is this producer in an ongoing transaction that includes the partition.
* EndTxn, in its two shapes: transaction version 0/1 (the epoch must be current) and
  version 2 (KIP-890 part 2: every end bumps the epoch, a retry is recognised by
  ``epoch + 1`` or by the old producer id after a rotation), with Kafka's table of
  retries over Empty, CompleteCommit and CompleteAbort.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from odradek.coordinator.transactions.state import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    SHORT_MAX,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TransactionVersion,
    Transition,
    fence_producer_epoch,
    is_epoch_exhausted,
    prepare_abort_or_commit,
    prepare_add_partitions,
    prepare_increment_producer_epoch,
    prepare_producer_id_rotation,
)
from odradek.core.invariant import invariant
from odradek.protocol.error_codes import ErrorCode

__all__ = [
    "ProducerIdAllocator",
    "ProducerIdAndEpoch",
    "abort_with_epoch_fence",
    "prepare_add_partitions_request",
    "prepare_end_txn",
    "prepare_init_producer_id",
    "verify_partitions",
]

ProducerIdAllocator = Callable[[], int | None]
"""Hands out a fresh producer id, or None when none is available right now (the node is
waiting for its next block of ids); Kafka then answers COORDINATOR_LOAD_IN_PROGRESS."""

_S = TransactionState
_PREPARE = (_S.PREPARE_COMMIT, _S.PREPARE_ABORT)
_COMPLETE = (_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    producer_id: int
    epoch: int


def _check_stored(m: TransactionMetadata) -> None:
    # Dead and PrepareEpochFence are only ever pending states, never current ones.
    invariant(
        m.state not in (_S.DEAD, _S.PREPARE_EPOCH_FENCE),
        f"{m.transactional_id} is in state {m.state.name}, which is never stored",
    )


# ---------------------------------------------------------------------------------------
# InitProducerId
# ---------------------------------------------------------------------------------------


def prepare_init_producer_id(
    m: TransactionMetadata,
    txn_timeout_ms: int,
    expected: ProducerIdAndEpoch | None,
    now_ms: int,
    allocate_producer_id: ProducerIdAllocator,
    transaction_version_level: TransactionVersion,
) -> Transition | ErrorCode:
    """Kafka's ``prepareInitProducerIdTransit``.

    Returns a transition to Empty (the answer is its producer id and epoch once it is
    durable), a transition to PrepareAbort with ``epoch_fence`` set (an ongoing
    transaction is fenced and aborted; the client gets CONCURRENT_TRANSACTIONS and
    retries, and that retry bumps the epoch again, or rotates the producer id if the
    fence took the last epoch), or an error code.
    """
    _check_stored(m)
    if m.pending_transition_in_progress:
        return ErrorCode.CONCURRENT_TRANSACTIONS
    if expected is not None and not _is_valid_producer_id(m, expected):
        return ErrorCode.PRODUCER_FENCED
    if m.state in _PREPARE:
        # The markers of the last transaction are being written: back off and retry.
        return ErrorCode.CONCURRENT_TRANSACTIONS
    if m.state == _S.ONGOING:
        return abort_with_epoch_fence(m, transaction_version_level, now_ms)
    if m.is_producer_epoch_exhausted and (expected is None or expected.epoch == m.producer_epoch):
        new_producer_id = allocate_producer_id()
        if new_producer_id is None:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return prepare_producer_id_rotation(
            m, new_producer_id, txn_timeout_ms, now_ms, record_last_epoch=expected is not None
        )
    return prepare_increment_producer_epoch(
        m, txn_timeout_ms, None if expected is None else expected.epoch, now_ms
    )


def _is_valid_producer_id(m: TransactionMetadata, expected: ProducerIdAndEpoch) -> bool:
    # A producer that names its id and epoch (KIP-360) is accepted when the metadata was
    # just created (it recovers from UNKNOWN_PRODUCER_ID and may have the new id), when
    # it names the current id (its epoch is checked by the bump), or when it names the
    # id before a rotation with an exhausted epoch (a retry of the rotating call).
    return (
        m.producer_epoch == NO_PRODUCER_EPOCH
        or expected.producer_id == m.producer_id
        or (expected.producer_id == m.previous_producer_id and is_epoch_exhausted(expected.epoch))
    )


def abort_with_epoch_fence(
    m: TransactionMetadata, transaction_version_level: TransactionVersion, now_ms: int
) -> Transition:
    """Fence the producer of an ongoing transaction and prepare its abort: what Kafka does
    for InitProducerId on an ongoing transaction and for a transaction that timed out.

    Kafka ends it "not from the client", with the cluster's transaction version: at
    version 2 the abort bumps the fenced epoch once more (so that the fenced producer's
    EndTxn cannot pass for a retry), below it the abort is a version 0 one.
    """
    fenced = fence_producer_epoch(m)
    version = (
        TransactionVersion.TV_2
        if transaction_version_level.supports_epoch_bump
        else TransactionVersion.TV_0
    )
    return prepare_abort_or_commit(
        fenced, _S.PREPARE_ABORT, version, NO_PRODUCER_ID, now_ms, no_partition_added=False
    )


# ---------------------------------------------------------------------------------------
# AddPartitionsToTxn, AddOffsetsToTxn and the KIP-890 verification
# ---------------------------------------------------------------------------------------


def prepare_add_partitions_request(
    m: TransactionMetadata,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
    now_ms: int,
    client_transaction_version: TransactionVersion,
) -> Transition | ErrorCode:
    """Kafka's ``handleAddPartitionsToTransaction``: ErrorCode.NONE means the partitions
    are already in the ongoing transaction and nothing needs writing."""
    _check_stored(m)
    wanted = frozenset(partitions)
    if m.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if m.producer_epoch != producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    if m.pending_transition_in_progress or m.state in _PREPARE:
        return ErrorCode.CONCURRENT_TRANSACTIONS
    if m.state == _S.ONGOING and wanted <= m.topic_partitions:
        return ErrorCode.NONE
    return prepare_add_partitions(m, wanted, now_ms, client_transaction_version)


def verify_partitions(
    m: TransactionMetadata | None,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
) -> Mapping[TopicPartition, ErrorCode]:
    """Kafka's ``handleVerifyPartitionsInTransaction`` (AddPartitionsToTxn v4+ with
    ``verify_only``): NONE for each partition the producer's ongoing transaction holds,
    TRANSACTION_ABORTABLE for the others, or one error for all.

    The pending state is not looked at: partitions enter the metadata when their addition
    is durable and leave when the end of the transaction is.
    """
    wanted = frozenset(partitions)
    if m is None or m.producer_id != producer_id:
        return dict.fromkeys(wanted, ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    if m.producer_epoch != producer_epoch:
        return dict.fromkeys(wanted, ErrorCode.PRODUCER_FENCED)
    if m.state in _PREPARE:
        return dict.fromkeys(wanted, ErrorCode.CONCURRENT_TRANSACTIONS)
    return {
        tp: ErrorCode.NONE if tp in m.topic_partitions else ErrorCode.TRANSACTION_ABORTABLE
        for tp in wanted
    }


# ---------------------------------------------------------------------------------------
# EndTxn
# ---------------------------------------------------------------------------------------


def prepare_end_txn(
    m: TransactionMetadata,
    producer_id: int,
    producer_epoch: int,
    committed: bool,
    client_transaction_version: TransactionVersion,
    now_ms: int,
    allocate_producer_id: ProducerIdAllocator,
) -> Transition | ErrorCode:
    """Kafka's ``endTransaction`` (and ``endTransactionWithTV1``) for a client's EndTxn.

    Returns the transition to PrepareCommit or PrepareAbort, or an error code;
    ErrorCode.NONE means the transaction already ended that way (a retry) and nothing
    needs writing.
    """
    _check_stored(m)
    # Only the fence path (abort_with_epoch_fence) sees a pending PrepareEpochFence, and
    # it prepares the abort in the same call, so a client's request never does.
    if client_transaction_version.supports_epoch_bump:
        return _end_txn_v2(m, producer_id, producer_epoch, committed, now_ms, allocate_producer_id)
    return _end_txn_v1(m, producer_id, producer_epoch, committed, now_ms)


def _end_txn_v1(
    m: TransactionMetadata, producer_id: int, producer_epoch: int, committed: bool, now_ms: int
) -> Transition | ErrorCode:
    if m.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    # A client's request must carry the current epoch exactly: it never bumps it.
    if producer_epoch != m.producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    if m.pending_transition_in_progress:
        return ErrorCode.CONCURRENT_TRANSACTIONS
    state = m.state
    if state == _S.ONGOING:
        target = _S.PREPARE_COMMIT if committed else _S.PREPARE_ABORT
        return prepare_abort_or_commit(
            m, target, TransactionVersion.TV_0, NO_PRODUCER_ID, now_ms, no_partition_added=False
        )
    if state == _S.COMPLETE_COMMIT:
        return ErrorCode.NONE if committed else ErrorCode.INVALID_TXN_STATE
    if state == _S.COMPLETE_ABORT:
        return ErrorCode.INVALID_TXN_STATE if committed else ErrorCode.NONE
    if state == _S.PREPARE_COMMIT:
        return ErrorCode.CONCURRENT_TRANSACTIONS if committed else ErrorCode.INVALID_TXN_STATE
    if state == _S.PREPARE_ABORT:
        return ErrorCode.INVALID_TXN_STATE if committed else ErrorCode.CONCURRENT_TRANSACTIONS
    return ErrorCode.INVALID_TXN_STATE  # Empty: there is no transaction to end


def _end_txn_v2(
    m: TransactionMetadata,
    producer_id: int,
    producer_epoch: int,
    committed: bool,
    now_ms: int,
    allocate_producer_id: ProducerIdAllocator,
) -> Transition | ErrorCode:
    # Kafka's table for transaction version 2 (PF = PRODUCER_FENCED, ITS =
    # INVALID_TXN_STATE, NONE = a retry, EB = a new end with an epoch bump):
    #
    #                   Abort            Commit
    #                   Retry  Current   Retry  Current
    #   Empty           PF     EB        PF     ITS
    #   CompleteAbort   NONE   EB        ITS    ITS
    #   CompleteCommit  ITS    EB        NONE   ITS
    #
    # where Retry is epoch = stored epoch - 1 (the stored one is the bumped one), or the
    # old producer id at Short.MAX_VALUE - 1 after the bump rotated the producer id.
    retry_on_overflow = (
        m.previous_producer_id == producer_id
        and producer_epoch == SHORT_MAX - 1
        and m.producer_epoch == 0
    )
    retry_on_epoch_bump = m.producer_epoch == producer_epoch + 1
    state = m.state
    if state in _PREPARE:
        valid_epoch = retry_on_epoch_bump
    elif state in _COMPLETE:
        # Short.MAX_VALUE in a completed transaction comes from a fence (a client's own
        # end at that epoch rotates the producer id), so epoch MAX - 1 is the fenced
        # producer, not a retry; Kafka would take it for one and hand out the epoch it
        # keeps for fencing.
        retry_on_epoch_bump = retry_on_epoch_bump and m.producer_epoch < SHORT_MAX
        valid_epoch = retry_on_epoch_bump or retry_on_overflow or producer_epoch == m.producer_epoch
    else:
        valid_epoch = producer_epoch == m.producer_epoch
    is_retry = retry_on_epoch_bump or retry_on_overflow

    if m.producer_id != producer_id and not retry_on_overflow:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if not valid_epoch:
        return ErrorCode.PRODUCER_FENCED
    if m.pending_transition_in_progress:
        return ErrorCode.CONCURRENT_TRANSACTIONS

    def end(target: TransactionState, no_partition_added: bool) -> Transition | ErrorCode:
        # The bump takes the last epoch: the transaction completes under a new id.
        next_producer_id = NO_PRODUCER_ID
        if m.is_producer_epoch_exhausted:
            allocated = allocate_producer_id()
            if allocated is None:
                return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            next_producer_id = allocated
        return prepare_abort_or_commit(
            m, target, TransactionVersion.TV_2, next_producer_id, now_ms, no_partition_added
        )

    if state == _S.ONGOING:
        return end(_S.PREPARE_COMMIT if committed else _S.PREPARE_ABORT, False)
    if state == _S.COMPLETE_COMMIT:
        if committed:
            return ErrorCode.NONE if is_retry else ErrorCode.INVALID_TXN_STATE
        return ErrorCode.INVALID_TXN_STATE if is_retry else end(_S.PREPARE_ABORT, True)
    if state == _S.COMPLETE_ABORT:
        if committed:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE if is_retry else end(_S.PREPARE_ABORT, True)
    if state == _S.PREPARE_COMMIT:
        return ErrorCode.CONCURRENT_TRANSACTIONS if committed else ErrorCode.INVALID_TXN_STATE
    if state == _S.PREPARE_ABORT:
        return ErrorCode.INVALID_TXN_STATE if committed else ErrorCode.CONCURRENT_TRANSACTIONS
    # Empty: an abort is allowed (the client may not know whether anything was added).
    return ErrorCode.INVALID_TXN_STATE if committed else end(_S.PREPARE_ABORT, True)
