"""A transactional id's metadata and the transitions Kafka allows it, as pure functions.

This module owns what Kafka's ``TransactionState`` and ``TransactionMetadata`` own
(``org.apache.kafka.coordinator.transaction``): the eight states with the int8 ids the
``__transaction_state`` log writes, the states each may be entered from, the immutable
:class:`TransactionMetadata` of one transactional id, and the field updates of every
transition.

A transition is two steps, as in Kafka. ``prepare_*`` builds the target metadata (what
the log record will say) and marks the current one with a *pending state*; the caller
appends the record, and once it is durable :func:`complete_transition` makes the target
current (or :func:`cancel_transition` drops it when the append failed). Only one
transition may be pending at a time: preparing a second one is a bug (an
:class:`~odradek.core.errors.InvariantError`, Kafka's ``IllegalStateException``), and the
request rules (:mod:`.rules`) answer CONCURRENT_TRANSACTIONS before it can happen.

Rules kept here, each from Kafka's ``TransactionMetadata``:

* a target state must list the current one among its valid previous states;
* every prepared transition records the producer id it leaves as ``previous_producer_id``
  (Kafka's ``prepareTransitionTo`` does so for every transition, not only rotations);
* an epoch is exhausted at ``Short.MAX_VALUE - 1``: the coordinator keeps the last epoch
  for fencing and rotates to a new producer id instead (KIP-360, KIP-890);
* with transaction version 2 (KIP-890 part 2) every commit or abort bumps the epoch, and
  when that bump takes the last epoch the transaction completes under ``next_producer_id``
  with epoch 0;
* completing a transition re-checks the target against the current metadata (epoch, id,
  partitions, timestamps) exactly as Kafka's ``completeTransitionTo``; a mismatch is a bug.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import NamedTuple

from odradek.core.invariant import invariant
from odradek.protocol.error_codes import ErrorCode

__all__ = [
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "SHORT_MAX",
    "VALID_PREVIOUS_STATES",
    "TopicPartition",
    "TransactionMetadata",
    "TransactionState",
    "TransactionVersion",
    "Transition",
    "cancel_transition",
    "complete_transition",
    "fence_producer_epoch",
    "is_epoch_exhausted",
    "new_transaction_metadata",
    "prepare_abort_or_commit",
    "prepare_add_partitions",
    "prepare_complete",
    "prepare_dead",
    "prepare_increment_producer_epoch",
    "prepare_producer_id_rotation",
]

NO_PRODUCER_ID = -1
"""Kafka's ``RecordBatch.NO_PRODUCER_ID``."""
NO_PRODUCER_EPOCH = -1
"""Kafka's ``RecordBatch.NO_PRODUCER_EPOCH``."""
SHORT_MAX = (1 << 15) - 1
"""Java's ``Short.MAX_VALUE``: the producer epoch is an int16."""


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class TransactionVersion(enum.IntEnum):
    """The ``transaction.version`` feature levels (Kafka's ``TransactionVersion``).

    A client's version is what its request versions imply (EndTxn v5+ and
    AddPartitionsToTxn v4+ are version 2); the cluster's is the finalized feature level.
    """

    TV_0 = 0
    """The original protocol."""
    TV_1 = 1
    """Flexible ``__transaction_state`` values (TransactionLogValue v1)."""
    TV_2 = 2
    """An epoch bump at the end of every transaction (KIP-890 part 2)."""

    @property
    def supports_epoch_bump(self) -> bool:
        return self >= TransactionVersion.TV_2


class TransactionState(enum.IntEnum):
    """Kafka's states; the value is the int8 ``TransactionStatus`` of the log record."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use ("PrepareCommit", ...)."""
        return _NAMES[self]

    @property
    def expiration_allowed(self) -> bool:
        """Whether ``transactional.id.expiration.ms`` may remove an id in this state."""
        return self in _EXPIRATION_ALLOWED

    @classmethod
    def from_kafka_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)


_S = TransactionState
_NAMES = {
    _S.EMPTY: "Empty",
    _S.ONGOING: "Ongoing",
    _S.PREPARE_COMMIT: "PrepareCommit",
    _S.PREPARE_ABORT: "PrepareAbort",
    _S.COMPLETE_COMMIT: "CompleteCommit",
    _S.COMPLETE_ABORT: "CompleteAbort",
    _S.DEAD: "Dead",
    _S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}
_EXPIRATION_ALLOWED = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})
_COMPLETE = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})

VALID_PREVIOUS_STATES: Mapping[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: _COMPLETE,
    _S.ONGOING: frozenset({_S.ONGOING}) | _COMPLETE,
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    # With transaction version 2 a client unsure of the server's state may abort from
    # Empty or a completed transaction (KIP-890); the fence path aborts from Ongoing.
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}) | _COMPLETE,
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: _COMPLETE,
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}
"""Kafka's ``TransactionState.validPreviousStates``."""


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """Kafka's ``isEpochExhausted``: a client never gets ``Short.MAX_VALUE``, which the
    coordinator keeps so that it can always fence the last producer."""
    return producer_epoch >= SHORT_MAX - 1


@dataclass(frozen=True, slots=True)
class TransactionMetadata:
    """One transactional id's state, as Kafka's ``TransactionMetadata`` holds it.

    ``last_producer_epoch``, ``pending_state`` and ``has_failed_epoch_fence`` live in
    memory only: the log record has no field for them, so a coordinator that loads the
    record starts with -1, None and False (as Kafka's ``TransactionLog.read`` does).
    """

    transactional_id: str
    producer_id: int
    previous_producer_id: int
    """The producer id before the last transition (differs from ``producer_id`` right
    after a rotation, so that a retry with the old id is recognised)."""
    next_producer_id: int
    """The id a transaction version 2 commit or abort rotates to when its epoch bump
    exhausts the current one; -1 otherwise."""
    producer_epoch: int
    last_producer_epoch: int
    """The epoch before the last bump, for KIP-360 retries of InitProducerId and the
    epoch checks of transaction version 2; -1 after a fence."""
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp_ms: int
    """When the first partition was added; -1 while there is no transaction."""
    txn_last_update_timestamp_ms: int
    client_transaction_version: TransactionVersion
    pending_state: TransactionState | None = None
    """The target of a transition prepared but not yet in the log."""
    has_failed_epoch_fence: bool = False
    """A fence's bumped epoch may not be in the log (its append failed): the next fence
    reuses it rather than bumping again. Kafka's ``hasFailedEpochFence``."""

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)


@dataclass(frozen=True, slots=True)
class Transition:
    """A prepared transition: keep ``current`` in the cache until the record of
    ``target`` is durable, then :func:`complete_transition`."""

    current: TransactionMetadata
    """The metadata as it is now, marked with ``pending_state = target.state``."""
    target: TransactionMetadata
    """The metadata the log record says; its ``pending_state`` is None."""
    epoch_fence: bool = False
    """Whether ``current`` carries a fence's bumped epoch that is not yet in the log."""


def new_transaction_metadata(
    transactional_id: str, producer_id: int, txn_timeout_ms: int, now_ms: int
) -> TransactionMetadata:
    """What Kafka caches for a transactional id it has never seen: Empty, epoch -1."""
    return TransactionMetadata(
        transactional_id=transactional_id,
        producer_id=producer_id,
        previous_producer_id=NO_PRODUCER_ID,
        next_producer_id=NO_PRODUCER_ID,
        producer_epoch=NO_PRODUCER_EPOCH,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        txn_timeout_ms=txn_timeout_ms,
        state=_S.EMPTY,
        topic_partitions=frozenset(),
        txn_start_timestamp_ms=-1,
        txn_last_update_timestamp_ms=now_ms,
        client_transaction_version=TransactionVersion.TV_0,
    )


# ---------------------------------------------------------------------------------------
# Preparing transitions
# ---------------------------------------------------------------------------------------


def _prepare(
    m: TransactionMetadata,
    state: TransactionState,
    *,
    epoch_fence: bool = False,
    producer_id: int | None = None,
    next_producer_id: int | None = None,
    producer_epoch: int | None = None,
    last_producer_epoch: int | None = None,
    txn_timeout_ms: int | None = None,
    topic_partitions: frozenset[TopicPartition] | None = None,
    txn_start_timestamp_ms: int | None = None,
    txn_last_update_timestamp_ms: int | None = None,
    client_transaction_version: TransactionVersion | None = None,
) -> Transition:
    """Kafka's ``prepareTransitionTo``: every field not given keeps its current value."""
    invariant(
        m.pending_state is None,
        f"{m.transactional_id}: preparing {state.name} while {m.pending_state} is pending",
    )
    target = TransactionMetadata(
        transactional_id=m.transactional_id,
        producer_id=m.producer_id if producer_id is None else producer_id,
        # Every transition remembers the producer id it leaves (Kafka's prevProducerId).
        previous_producer_id=m.producer_id,
        next_producer_id=m.next_producer_id if next_producer_id is None else next_producer_id,
        producer_epoch=m.producer_epoch if producer_epoch is None else producer_epoch,
        last_producer_epoch=(
            m.last_producer_epoch if last_producer_epoch is None else last_producer_epoch
        ),
        txn_timeout_ms=m.txn_timeout_ms if txn_timeout_ms is None else txn_timeout_ms,
        state=state,
        topic_partitions=m.topic_partitions if topic_partitions is None else topic_partitions,
        txn_start_timestamp_ms=(
            m.txn_start_timestamp_ms if txn_start_timestamp_ms is None else txn_start_timestamp_ms
        ),
        txn_last_update_timestamp_ms=(
            m.txn_last_update_timestamp_ms
            if txn_last_update_timestamp_ms is None
            else txn_last_update_timestamp_ms
        ),
        client_transaction_version=(
            m.client_transaction_version
            if client_transaction_version is None
            else client_transaction_version
        ),
    )
    invariant(target.producer_id >= 0, f"{m.transactional_id}: producer id {target.producer_id}")
    # The epoch stays -1 from creation until the first InitProducerId completes, and an
    # id that never got that far may still expire.
    invariant(
        state == _S.DEAD or 0 <= target.producer_epoch <= SHORT_MAX,
        f"{m.transactional_id}: producer epoch {target.producer_epoch} for {state.name}",
    )
    invariant(
        m.state in VALID_PREVIOUS_STATES[state],
        f"{m.transactional_id}: {state.name} cannot follow {m.state.name}",
    )
    return Transition(replace(m, pending_state=state), target, epoch_fence)


def prepare_increment_producer_epoch(
    m: TransactionMetadata,
    new_txn_timeout_ms: int,
    expected_producer_epoch: int | None,
    now_ms: int,
) -> Transition | ErrorCode:
    """InitProducerId on an idle transactional id: the next epoch, or the same one for a
    retry (Kafka's ``prepareIncrementProducerEpoch``, KIP-360).

    * no expected epoch (a new producer): bump, and forget the last epoch (-1);
    * the expected epoch is the current one (or there is none yet): a producer
      recovering from an error; bump and remember the current one as the last;
    * the expected epoch is the last one: a retry of a bump whose response was lost;
      return the current epoch unchanged;
    * anything else: PRODUCER_FENCED.

    Kafka refuses up front (an ``IllegalStateException``) when the epoch is exhausted;
    the InitProducerId rule rotates the producer id before that, so that here only the
    retry (no bump) and the fenced answer are left for an exhausted epoch, and both are
    given without bumping.
    """
    bumped = m.producer_epoch + 1
    if expected_producer_epoch is None:
        epoch, last = bumped, NO_PRODUCER_EPOCH
    elif m.producer_epoch == NO_PRODUCER_EPOCH or expected_producer_epoch == m.producer_epoch:
        epoch, last = bumped, m.producer_epoch
    elif expected_producer_epoch == m.last_producer_epoch:
        epoch, last = m.producer_epoch, m.last_producer_epoch
    else:
        return ErrorCode.PRODUCER_FENCED
    invariant(
        epoch == m.producer_epoch or not m.is_producer_epoch_exhausted,
        f"{m.transactional_id}: no producer epoch left after {m.producer_epoch}",
    )
    return _prepare(
        m,
        _S.EMPTY,
        producer_epoch=epoch,
        last_producer_epoch=last,
        txn_timeout_ms=new_txn_timeout_ms,
        topic_partitions=frozenset(),
        txn_start_timestamp_ms=-1,
        txn_last_update_timestamp_ms=now_ms,
    )


def prepare_producer_id_rotation(
    m: TransactionMetadata,
    new_producer_id: int,
    new_txn_timeout_ms: int,
    now_ms: int,
    record_last_epoch: bool,
) -> Transition:
    """InitProducerId when the epoch is exhausted: a new producer id at epoch 0 (Kafka's
    ``prepareProducerIdRotation``). ``record_last_epoch`` keeps the old epoch as the last
    one when the producer named it, so that its retry is recognised."""
    invariant(
        m.state not in (_S.ONGOING, _S.PREPARE_ABORT, _S.PREPARE_COMMIT),
        f"{m.transactional_id}: rotating producer ids while a transaction is {m.state.name}",
    )
    return _prepare(
        m,
        _S.EMPTY,
        producer_id=new_producer_id,
        producer_epoch=0,
        last_producer_epoch=m.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
        txn_timeout_ms=new_txn_timeout_ms,
        topic_partitions=frozenset(),
        txn_start_timestamp_ms=-1,
        txn_last_update_timestamp_ms=now_ms,
    )


def fence_producer_epoch(m: TransactionMetadata) -> TransactionMetadata:
    """Bump the epoch of an ongoing transaction so that its producer is fenced, before the
    coordinator aborts it (Kafka's ``prepareFenceProducerEpoch`` together with what its
    ``endTransaction`` does with the result: install the bumped epoch, forget the last).

    The result is pending PREPARE_EPOCH_FENCE; :func:`prepare_abort_or_commit` with
    PREPARE_ABORT takes it from there. The bump is skipped after a fence whose append
    failed (its epoch was never returned to anyone) and at ``Short.MAX_VALUE``.
    """
    invariant(m.pending_state is None, f"{m.transactional_id}: fencing while {m.pending_state}")
    invariant(
        m.state in VALID_PREVIOUS_STATES[_S.PREPARE_EPOCH_FENCE],
        f"{m.transactional_id}: fencing in {m.state.name}",
    )
    keep = m.has_failed_epoch_fence or m.producer_epoch == SHORT_MAX
    return replace(
        m,
        producer_epoch=m.producer_epoch if keep else m.producer_epoch + 1,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        pending_state=_S.PREPARE_EPOCH_FENCE,
    )


def prepare_add_partitions(
    m: TransactionMetadata,
    partitions: Iterable[TopicPartition],
    now_ms: int,
    client_transaction_version: TransactionVersion,
) -> Transition:
    """Ongoing with more partitions; a new transaction starts now (Kafka's
    ``prepareAddPartitions``)."""
    starts = m.state in _COMPLETE
    return _prepare(
        m,
        _S.ONGOING,
        topic_partitions=m.topic_partitions | frozenset(partitions),
        txn_start_timestamp_ms=now_ms if starts else m.txn_start_timestamp_ms,
        txn_last_update_timestamp_ms=now_ms,
        client_transaction_version=client_transaction_version,
    )


def prepare_abort_or_commit(
    m: TransactionMetadata,
    new_state: TransactionState,
    client_transaction_version: TransactionVersion,
    next_producer_id: int,
    now_ms: int,
    no_partition_added: bool,
) -> Transition:
    """PrepareCommit or PrepareAbort (Kafka's ``prepareAbortOrCommit``).

    With transaction version 2 the epoch is bumped here and the current one becomes the
    last: the markers carry the bumped epoch, which fences the producer's old epoch on
    every partition of the transaction, and a retry of the EndTxn is recognised by
    ``epoch + 1`` (KIP-890 part 2). An abort at ``Short.MAX_VALUE`` (only a fence gets
    there) keeps that epoch rather than overflow. ``next_producer_id`` is the id to rotate
    to at completion when the bump takes the last epoch, else -1.

    A fenced transaction (``m`` pending PREPARE_EPOCH_FENCE, from
    :func:`fence_producer_epoch`) may only go to PrepareAbort.
    """
    invariant(
        new_state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT),
        f"{m.transactional_id}: {new_state.name} is not an end of a transaction",
    )
    fenced = m.pending_state == _S.PREPARE_EPOCH_FENCE
    if fenced:
        invariant(new_state == _S.PREPARE_ABORT, f"{m.transactional_id}: committing a fenced epoch")
        # Make way for the abort, as Kafka's endTransaction clears the pending fence.
        m = replace(m, pending_state=None)
    if client_transaction_version.supports_epoch_bump:
        at_max = m.producer_epoch == SHORT_MAX and new_state == _S.PREPARE_ABORT
        epoch = m.producer_epoch if at_max else m.producer_epoch + 1
        last = m.producer_epoch
    else:
        epoch, last = m.producer_epoch, m.last_producer_epoch
    return _prepare(
        m,
        new_state,
        epoch_fence=fenced,
        producer_epoch=epoch,
        last_producer_epoch=last,
        # Transaction version 2 may abort with no partition added: the start is then
        # unknown but required, so the abort's own time stands in for it.
        txn_start_timestamp_ms=now_ms if no_partition_added else m.txn_start_timestamp_ms,
        next_producer_id=next_producer_id,
        txn_last_update_timestamp_ms=now_ms,
        client_transaction_version=client_transaction_version,
    )


def prepare_complete(m: TransactionMetadata, now_ms: int) -> Transition:
    """CompleteCommit or CompleteAbort once the markers are written (Kafka's
    ``prepareComplete``). A transaction version 2 transaction whose bump exhausted the
    epoch completes under ``next_producer_id`` at epoch 0; ``last_producer_epoch`` keeps
    the last epoch the client saw."""
    invariant(
        m.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT),
        f"{m.transactional_id}: completing from {m.state.name}",
    )
    state = _S.COMPLETE_COMMIT if m.state == _S.PREPARE_COMMIT else _S.COMPLETE_ABORT
    # The prepare record is in the log, so the fence it carried is too.
    m = replace(m, has_failed_epoch_fence=False)
    rotate = m.client_transaction_version.supports_epoch_bump and (
        m.next_producer_id != NO_PRODUCER_ID
    )
    return _prepare(
        m,
        state,
        producer_id=m.next_producer_id if rotate else m.producer_id,
        producer_epoch=0 if rotate else m.producer_epoch,
        next_producer_id=NO_PRODUCER_ID,
        topic_partitions=frozenset(),
        txn_last_update_timestamp_ms=now_ms,
    )


def prepare_dead(m: TransactionMetadata) -> Transition:
    """Expiration of an idle transactional id: its record becomes a tombstone."""
    return _prepare(m, _S.DEAD, topic_partitions=frozenset())


# ---------------------------------------------------------------------------------------
# Completing and cancelling
# ---------------------------------------------------------------------------------------


def complete_transition(
    current: TransactionMetadata, target: TransactionMetadata
) -> TransactionMetadata:
    """The target made current once its record is durable (Kafka's ``completeTransitionTo``).

    Kafka re-checks the target against the current metadata; any mismatch means the
    coordinator prepared something it should not have, so it is an invariant here.
    """
    tid = current.transactional_id
    invariant(
        current.pending_state is not None and current.pending_state == target.state,
        f"{tid}: completing {target.state.name} while pending {current.pending_state}",
    )
    to = target.state
    ok: bool
    if to == _S.EMPTY:  # InitProducerId
        same_or_bumped = current.producer_epoch == target.producer_epoch or _valid_epoch_bump(
            current, target
        )
        ok = same_or_bumped and not target.topic_partitions and target.txn_start_timestamp_ms == -1
    elif to == _S.ONGOING:  # AddPartitions
        ok = (
            _valid_producer_epoch(current, target)
            and target.topic_partitions >= current.topic_partitions
            and target.txn_timeout_ms == current.txn_timeout_ms
        )
    elif to in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):  # EndTxn
        # Version 2 may abort from Empty or a completed transaction, with a new start.
        empty_abort = (
            to == _S.PREPARE_ABORT
            and target.client_transaction_version.supports_epoch_bump
            and current.state in _COMPLETE
        )
        ok = (
            _valid_producer_epoch(current, target)
            and target.topic_partitions == current.topic_partitions
            and target.txn_timeout_ms == current.txn_timeout_ms
            and (target.txn_start_timestamp_ms == current.txn_start_timestamp_ms or empty_abort)
        )
    elif to in (_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT):  # markers written
        ok = (
            _valid_producer_epoch(current, target)
            and target.txn_timeout_ms == current.txn_timeout_ms
            and target.txn_start_timestamp_ms != -1
        )
    else:
        # PrepareEpochFence is never written (the abort that follows is), and Dead ends in
        # the removal of the id rather than in a state.
        ok = False
    invariant(ok, f"{tid}: unexpected transition from {current} to {target}")
    return replace(target, has_failed_epoch_fence=current.has_failed_epoch_fence)


def cancel_transition(transition: Transition) -> TransactionMetadata:
    """The append of ``transition.target`` failed: the current metadata stays, with no
    pending state. A failed fence keeps its bumped epoch in memory and is remembered, so
    that the next fence does not bump again (Kafka's ``hasFailedEpochFence``)."""
    current = transition.current
    return replace(
        current,
        pending_state=None,
        has_failed_epoch_fence=current.has_failed_epoch_fence or transition.epoch_fence,
    )


def _valid_producer_epoch(current: TransactionMetadata, target: TransactionMetadata) -> bool:
    """Kafka's ``validProducerEpoch``."""
    v2 = target.client_transaction_version.supports_epoch_bump
    if (
        v2
        and target.state in (_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)
        and target.producer_epoch == 0
    ):
        # Completion under a new producer id: the last epoch is kept as is.
        return (
            target.last_producer_epoch == current.last_producer_epoch
            and target.previous_producer_id == current.producer_id
        )
    if v2 and target.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
        # The end of the transaction bumped the epoch: the current one became the last.
        return (
            target.last_producer_epoch == current.producer_epoch
            and target.producer_id == current.producer_id
        )
    return (
        target.producer_epoch == current.producer_epoch
        and target.producer_id == current.producer_id
    )


def _valid_epoch_bump(current: TransactionMetadata, target: TransactionMetadata) -> bool:
    return target.producer_epoch == current.producer_epoch + 1 or (
        target.producer_epoch == 0 and target.producer_id != current.producer_id
    )
