"""Transaction states and the transitions of one transactional id's metadata.

Each test names the rule of Kafka's ``TransactionState`` / ``TransactionMetadata`` it
pins; the transitions are pure, so every test checks both the target and that the
current metadata only gained a pending state.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from odradek.coordinator.transactions.state import (
    SHORT_MAX,
    VALID_PREVIOUS_STATES,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TransactionVersion,
    cancel_transition,
    complete_transition,
    fence_producer_epoch,
    is_epoch_exhausted,
    new_transaction_metadata,
    prepare_abort_or_commit,
    prepare_add_partitions,
    prepare_complete,
    prepare_dead,
    prepare_increment_producer_epoch,
    prepare_producer_id_rotation,
)
from odradek.core.errors import InvariantError
from odradek.protocol.error_codes import ErrorCode

S = TransactionState
TV0 = TransactionVersion.TV_0
TV2 = TransactionVersion.TV_2
TP = TopicPartition("orders", 0)


def meta(
    state: TransactionState = S.EMPTY,
    *,
    producer_id: int = 100,
    epoch: int = 5,
    last: int = 4,
    partitions: frozenset[TopicPartition] = frozenset(),
    start: int = -1,
    tv: TransactionVersion = TV0,
    next_producer_id: int = -1,
) -> TransactionMetadata:
    return TransactionMetadata(
        transactional_id="t",
        producer_id=producer_id,
        previous_producer_id=99,
        next_producer_id=next_producer_id,
        producer_epoch=epoch,
        last_producer_epoch=last,
        txn_timeout_ms=60_000,
        state=state,
        topic_partitions=partitions,
        txn_start_timestamp_ms=start,
        txn_last_update_timestamp_ms=1,
        client_transaction_version=tv,
    )


def ongoing(epoch: int = 5, tv: TransactionVersion = TV0) -> TransactionMetadata:
    return meta(S.ONGOING, epoch=epoch, partitions=frozenset({TP}), start=10, tv=tv)


def test_ids_and_names_are_kafkas() -> None:
    """The int8 TransactionStatus of the log and the names DescribeTransactions shows."""
    assert [(int(s), s.kafka_name) for s in S] == [
        (0, "Empty"),
        (1, "Ongoing"),
        (2, "PrepareCommit"),
        (3, "PrepareAbort"),
        (4, "CompleteCommit"),
        (5, "CompleteAbort"),
        (6, "Dead"),
        (7, "PrepareEpochFence"),
    ]
    assert S.from_kafka_name("PrepareAbort") == S.PREPARE_ABORT
    assert S.from_kafka_name("prepareabort") is None


def test_valid_previous_states_are_kafkas() -> None:
    """TransactionState.validPreviousStates (PrepareAbort from Empty/Complete* is KIP-890's
    transaction version 2 abort when the client is unsure)."""
    complete = {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert {k: set(v) for k, v in VALID_PREVIOUS_STATES.items()} == {
        S.EMPTY: complete,
        S.ONGOING: {S.ONGOING} | complete,
        S.PREPARE_COMMIT: {S.ONGOING},
        S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE} | complete,
        S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
        S.COMPLETE_ABORT: {S.PREPARE_ABORT},
        S.DEAD: complete,
        S.PREPARE_EPOCH_FENCE: {S.ONGOING},
    }
    assert {s for s in S if s.expiration_allowed} == complete


def test_epoch_is_exhausted_one_below_short_max() -> None:
    """Kafka keeps Short.MAX_VALUE for fencing: MAX - 1 is the last epoch a client gets."""
    assert not is_epoch_exhausted(SHORT_MAX - 2)
    assert is_epoch_exhausted(SHORT_MAX - 1)
    assert is_epoch_exhausted(SHORT_MAX)


def test_new_metadata_is_empty_with_no_epoch() -> None:
    m = new_transaction_metadata("t", 7, 1000, now_ms=50)
    assert (m.state, m.producer_id, m.producer_epoch, m.last_producer_epoch) == (S.EMPTY, 7, -1, -1)
    assert m.txn_last_update_timestamp_ms == 50
    assert m.client_transaction_version == TV0


def test_increment_for_a_new_producer_forgets_the_last_epoch() -> None:
    """No expected epoch: bump, and last = -1 (a new producer, not a retry)."""
    t = prepare_increment_producer_epoch(meta(S.COMPLETE_COMMIT), 30_000, None, 77)
    assert not isinstance(t, ErrorCode)
    assert (t.target.producer_epoch, t.target.last_producer_epoch) == (6, -1)
    assert (t.target.state, t.target.txn_timeout_ms) == (S.EMPTY, 30_000)
    assert (t.target.txn_start_timestamp_ms, t.target.txn_last_update_timestamp_ms) == (-1, 77)
    assert t.current == replace(meta(S.COMPLETE_COMMIT), pending_state=S.EMPTY)


def test_increment_with_the_current_epoch_remembers_it() -> None:
    """KIP-360: a producer recovering from an error names its current epoch."""
    t = prepare_increment_producer_epoch(meta(), 1000, 5, 0)
    assert not isinstance(t, ErrorCode)
    assert (t.target.producer_epoch, t.target.last_producer_epoch) == (6, 5)


def test_increment_with_the_last_epoch_is_a_retry() -> None:
    """KIP-360: the last epoch is a retry of a bump whose answer was lost: same epoch."""
    t = prepare_increment_producer_epoch(meta(epoch=6, last=5), 1000, 5, 0)
    assert not isinstance(t, ErrorCode)
    assert (t.target.producer_epoch, t.target.last_producer_epoch) == (6, 5)
    assert complete_transition(t.current, t.target).producer_epoch == 6


def test_increment_with_another_epoch_is_fenced() -> None:
    assert prepare_increment_producer_epoch(meta(), 1000, 3, 0) == ErrorCode.PRODUCER_FENCED


def test_increment_of_a_fresh_id_takes_epoch_zero_whatever_was_expected() -> None:
    """Epoch -1 (just created) accepts the producer's epoch: it recovers after the id
    expired (UNKNOWN_PRODUCER_ID)."""
    t = prepare_increment_producer_epoch(meta(epoch=-1, last=-1), 1000, 17, 0)
    assert not isinstance(t, ErrorCode)
    assert t.target.producer_epoch == 0


def test_rotation_starts_a_new_producer_id_at_epoch_zero() -> None:
    """prepareProducerIdRotation: the old id becomes the previous one, and the old epoch
    the last one when the producer named it (so that its retry is recognised)."""
    m = meta(S.COMPLETE_ABORT, epoch=SHORT_MAX - 1)
    t = prepare_producer_id_rotation(m, 555, 1000, 9, record_last_epoch=True)
    assert (t.target.producer_id, t.target.producer_epoch) == (555, 0)
    assert (t.target.previous_producer_id, t.target.last_producer_epoch) == (100, SHORT_MAX - 1)
    t = prepare_producer_id_rotation(m, 555, 1000, 9, record_last_epoch=False)
    assert t.target.last_producer_epoch == -1
    assert complete_transition(t.current, t.target).producer_id == 555
    with pytest.raises(InvariantError):
        prepare_producer_id_rotation(ongoing(), 555, 1000, 9, record_last_epoch=False)


def test_every_transition_remembers_the_producer_id_it_leaves() -> None:
    """Kafka's prepareTransitionTo sets prevProducerId to the current id every time."""
    t = prepare_add_partitions(meta(), [TP], 5, TV0)
    assert t.target.previous_producer_id == 100


def test_add_partitions_starts_a_transaction_from_empty_or_complete() -> None:
    for state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        t = prepare_add_partitions(meta(state), [TP], 50, TV2)
        assert (t.target.state, t.target.txn_start_timestamp_ms) == (S.ONGOING, 50)
        assert t.target.topic_partitions == {TP}
        assert t.target.client_transaction_version == TV2
    more = TopicPartition("orders", 1)
    t = prepare_add_partitions(ongoing(), [more], 90, TV0)
    assert t.target.txn_start_timestamp_ms == 10  # the transaction started earlier
    assert t.target.topic_partitions == {TP, more}
    assert t.target.txn_last_update_timestamp_ms == 90


def test_a_second_transition_while_one_is_pending_is_a_bug() -> None:
    """Kafka's IllegalStateException: only one transition may be pending."""
    t = prepare_add_partitions(meta(), [TP], 5, TV0)
    with pytest.raises(InvariantError, match="pending"):
        prepare_add_partitions(t.current, [TP], 6, TV0)


def test_a_transition_from_an_invalid_state_is_a_bug() -> None:
    with pytest.raises(InvariantError, match="cannot follow"):
        prepare_dead(ongoing())
    with pytest.raises(InvariantError):
        prepare_complete(ongoing(), 5)


def test_end_with_version_0_keeps_the_epoch() -> None:
    t = prepare_abort_or_commit(ongoing(), S.PREPARE_COMMIT, TV0, -1, 70, False)
    assert (t.target.producer_epoch, t.target.last_producer_epoch) == (5, 4)
    assert t.target.txn_start_timestamp_ms == 10
    assert t.target.topic_partitions == {TP}


def test_end_with_version_2_bumps_the_epoch() -> None:
    """KIP-890 part 2: the markers carry epoch + 1, which fences the old epoch."""
    t = prepare_abort_or_commit(ongoing(), S.PREPARE_ABORT, TV2, -1, 70, False)
    assert (t.target.producer_epoch, t.target.last_producer_epoch) == (6, 5)
    assert t.target.client_transaction_version == TV2
    assert complete_transition(t.current, t.target).state == S.PREPARE_ABORT


def test_version_2_abort_without_partitions_starts_now() -> None:
    """An abort from Empty has no start: its own time stands in for it."""
    t = prepare_abort_or_commit(meta(S.EMPTY), S.PREPARE_ABORT, TV2, -1, 70, True)
    assert t.target.txn_start_timestamp_ms == 70
    assert complete_transition(t.current, t.target).state == S.PREPARE_ABORT


def test_version_2_end_at_the_last_epoch_completes_under_the_next_producer_id() -> None:
    """The bump to Short.MAX_VALUE is visible in the markers only; the completion moves to
    next_producer_id at epoch 0 and keeps MAX - 1 as the last epoch the client saw."""
    m = ongoing(epoch=SHORT_MAX - 1, tv=TV2)
    t = prepare_abort_or_commit(m, S.PREPARE_COMMIT, TV2, 777, 70, False)
    assert (t.target.producer_epoch, t.target.next_producer_id) == (SHORT_MAX, 777)
    prepared = complete_transition(t.current, t.target)
    c = prepare_complete(prepared, 80)
    assert (c.target.producer_id, c.target.producer_epoch) == (777, 0)
    assert (c.target.previous_producer_id, c.target.next_producer_id) == (100, -1)
    assert c.target.last_producer_epoch == SHORT_MAX - 1
    assert c.target.topic_partitions == frozenset()
    done = complete_transition(c.current, c.target)
    assert (done.state, done.producer_id, done.producer_epoch) == (S.COMPLETE_COMMIT, 777, 0)


def test_version_2_abort_at_short_max_does_not_overflow() -> None:
    t = prepare_abort_or_commit(ongoing(epoch=SHORT_MAX), S.PREPARE_ABORT, TV2, -1, 7, False)
    assert t.target.producer_epoch == SHORT_MAX


def test_fence_bumps_the_epoch_and_forgets_the_last() -> None:
    """prepareFenceProducerEpoch, with the bumped epoch installed as endTransaction does."""
    fenced = fence_producer_epoch(ongoing())
    assert (fenced.producer_epoch, fenced.last_producer_epoch) == (6, -1)
    assert fenced.pending_state == S.PREPARE_EPOCH_FENCE
    t = prepare_abort_or_commit(fenced, S.PREPARE_ABORT, TV0, -1, 70, False)
    assert t.epoch_fence
    assert t.target.producer_epoch == 6
    assert t.current.pending_state == S.PREPARE_ABORT
    with pytest.raises(InvariantError, match="fenced"):
        prepare_abort_or_commit(fenced, S.PREPARE_COMMIT, TV0, -1, 70, False)


def test_a_failed_fence_is_not_bumped_again() -> None:
    """hasFailedEpochFence: the epoch of a fence whose append failed was never returned,
    so the next fence reuses it; the completion of a transaction clears the flag."""
    t = prepare_abort_or_commit(fence_producer_epoch(ongoing()), S.PREPARE_ABORT, TV0, -1, 7, False)
    failed = cancel_transition(t)
    assert failed.has_failed_epoch_fence
    assert (failed.pending_state, failed.producer_epoch, failed.state) == (None, 6, S.ONGOING)
    again = fence_producer_epoch(failed)
    assert again.producer_epoch == 6
    t = prepare_abort_or_commit(again, S.PREPARE_ABORT, TV0, -1, 8, False)
    prepared = complete_transition(t.current, t.target)
    assert prepared.has_failed_epoch_fence
    assert not prepare_complete(prepared, 9).current.has_failed_epoch_fence


def test_fence_at_short_max_keeps_it() -> None:
    assert fence_producer_epoch(ongoing(epoch=SHORT_MAX)).producer_epoch == SHORT_MAX


def test_cancel_of_another_transition_leaves_the_metadata_as_it_was() -> None:
    m = meta()
    t = prepare_add_partitions(m, [TP], 5, TV0)
    assert cancel_transition(t) == m


def test_complete_checks_the_target_against_the_current_metadata() -> None:
    """completeTransitionTo: a target that does not follow from the current metadata (an
    epoch that jumped, partitions that vanished, a pending state that differs) is a bug."""
    t = prepare_add_partitions(meta(), [TP], 5, TV0)
    with pytest.raises(InvariantError):
        complete_transition(t.current, replace(t.target, producer_epoch=9))
    with pytest.raises(InvariantError):
        complete_transition(meta(), t.target)  # nothing pending
    t = prepare_add_partitions(ongoing(), [TopicPartition("x", 1)], 5, TV0)
    with pytest.raises(InvariantError):
        complete_transition(t.current, replace(t.target, topic_partitions=frozenset()))
    bump = prepare_increment_producer_epoch(meta(), 1000, None, 5)
    assert not isinstance(bump, ErrorCode)
    with pytest.raises(InvariantError):
        complete_transition(bump.current, replace(bump.target, producer_epoch=8))
    t = prepare_dead(meta())
    with pytest.raises(InvariantError):
        complete_transition(t.current, t.target)  # Dead ends in removal, not in a state


def test_complete_keeps_the_failed_fence_flag_of_the_current_metadata() -> None:
    m = replace(meta(), has_failed_epoch_fence=True)
    t = prepare_add_partitions(m, [TP], 5, TV0)
    assert complete_transition(t.current, t.target).has_failed_epoch_fence


def test_dead_may_keep_epoch_minus_one() -> None:
    """An id created by an InitProducerId whose append failed still expires."""
    t = prepare_dead(meta(epoch=-1, last=-1))
    assert t.target.state == S.DEAD
