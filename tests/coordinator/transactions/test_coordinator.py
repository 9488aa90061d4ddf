"""The transaction coordinator core, request by request: the error codes Kafka's
``TransactionCoordinator`` answers and what a Kafka client does with each.

Each test's docstring names the Kafka rule it pins. Appends complete at once unless a
test holds one back (``Node.complete`` appends to the node's log and reports it).
"""

from __future__ import annotations

import pytest

from odradek.coordinator.transactions import (
    AppendCause,
    TransactionConfig,
    TransactionCoordinatorCore,
    TransactionState,
    TxnMarkers,
    TxnResult,
    coordinator_error_for_append,
    error_for_request_version,
)
from odradek.coordinator.transactions.records import (
    TxnRecord,
    decode_value,
    encode_key,
    read_record,
    record_for,
    tombstone_for,
)
from odradek.coordinator.transactions.state import (
    SHORT_MAX,
    TopicPartition,
    TransactionMetadata,
    TransactionVersion,
)
from odradek.core.errors import DecodeError, InvariantError
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
)

from .harness import COORDINATOR_EPOCH, NONE, TIMEOUT_MS, TV0, TV1, TV2, Node, node

S = TransactionState
E = ErrorCode
TP = TopicPartition("topic", 0)


def state_of(n: Node, tid: str = "t") -> TransactionMetadata:
    m = n.core.metadata(tid)
    assert m is not None
    return m


def stored(
    state: TransactionState,
    *,
    epoch: int,
    producer_id: int = 500,
    partitions: frozenset[TopicPartition] = frozenset(),
    tv: int = 0,
    start: int = 10,
) -> tuple[bytes, bytes | None]:
    """A record as an earlier coordinator wrote it."""
    m = TransactionMetadata(
        transactional_id="t",
        producer_id=producer_id,
        previous_producer_id=producer_id,
        next_producer_id=-1,
        producer_epoch=epoch,
        last_producer_epoch=-1,
        txn_timeout_ms=TIMEOUT_MS,
        state=state,
        topic_partitions=partitions,
        txn_start_timestamp_ms=-1 if state == S.EMPTY else start,
        txn_last_update_timestamp_ms=20,
        client_transaction_version=TransactionVersion(tv),
    )
    return record_for(m, 2)


# ---------------------------------------------------------------------------------------
# InitProducerId
# ---------------------------------------------------------------------------------------


def test_init_of_a_new_id_answers_after_its_record_is_durable() -> None:
    """A new transactional id gets a fresh producer id at epoch 0, and only once its
    Empty record is appended (TransactionStateManager.appendTransactionToLog)."""
    n = node()
    r = n.core.init_producer_id("t", TIMEOUT_MS, n.tick())
    assert r.append is not None and r.append.cause == AppendCause.INIT_PRODUCER_ID
    assert r.append.cause.client_waits
    assert (r.append.partition, r.append.coordinator_epoch) == (0, COORDINATOR_EPOCH)
    assert r.append.key == encode_key("t")
    assert r.append.value is not None
    value = decode_value(r.append.value)
    assert (value.producer_id, value.producer_epoch, value.transaction_status) == (1000, 0, 0)
    answer = n.complete(r)
    assert (answer.error, answer.producer_id, answer.producer_epoch) == (NONE, 1000, 0)
    assert state_of(n).state == S.EMPTY


def test_init_again_bumps_the_epoch_of_the_same_producer_id() -> None:
    """A new producer instance with the same transactional id fences the old one."""
    n = node()
    n.init()
    r = n.init()
    assert (r.error, r.producer_id, r.producer_epoch) == (NONE, 1000, 1)
    assert n.add("t", 1000, 0, [("topic", 0)]).error == E.PRODUCER_FENCED


@pytest.mark.parametrize(
    ("tid", "producer_id", "producer_epoch", "timeout_ms", "error"),
    [
        ("", -1, -1, TIMEOUT_MS, E.INVALID_REQUEST),
        ("t", 1000, -1, TIMEOUT_MS, E.INVALID_REQUEST),
        ("t", -1, 0, TIMEOUT_MS, E.INVALID_REQUEST),
        ("t", -1, -1, 900_001, E.INVALID_TRANSACTION_TIMEOUT),
        ("t", -1, -1, 0, E.INVALID_TRANSACTION_TIMEOUT),
    ],
)
def test_init_refuses_bad_requests(
    tid: str, producer_id: int, producer_epoch: int, timeout_ms: int, error: ErrorCode
) -> None:
    """An empty transactional id or a half-given producer id/epoch is INVALID_REQUEST
    (KafkaApis); a timeout above transaction.max.timeout.ms, or not positive, is
    INVALID_TRANSACTION_TIMEOUT, which the Java client reports as fatal."""
    n = node()
    r = n.core.init_producer_id(tid, timeout_ms, n.tick(), producer_id, producer_epoch)
    assert (r.error, r.append) == (error, None)
    assert n.core.metadata("t") is None


def test_requests_for_a_partition_not_led_or_loading() -> None:
    """NOT_COORDINATOR sends the client back to FindCoordinator; COORDINATOR_LOAD_IN_PROGRESS
    makes it retry the same coordinator."""
    core = TransactionCoordinatorCore(TransactionConfig(2), lambda: 1)
    led, other = "b", "a"  # hashCode 98 and 97
    assert core.partition_for(led) == 0 and core.partition_for(other) == 1
    core.begin_load(0, 1)
    assert core.init_producer_id(led, TIMEOUT_MS, 0).error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert core.end_txn(led, 1, 0, True, 0).error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert core.describe_transaction(led).error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert core.init_producer_id(other, TIMEOUT_MS, 0).error == E.NOT_COORDINATOR
    assert core.add_partitions(other, 1, 0, [("x", 0)], 0).error == E.NOT_COORDINATOR
    assert core.verify_partitions(other, 1, 0, [("x", 0)]) == {
        TopicPartition("x", 0): E.NOT_COORDINATOR
    }
    core.load(0, 1, [], 0)
    assert core.init_producer_id(led, TIMEOUT_MS, 0).append is not None


def test_init_while_its_record_is_pending_is_concurrent() -> None:
    """One transition at a time per transactional id: CONCURRENT_TRANSACTIONS, retriable."""
    n = node()
    first = n.core.init_producer_id("t", TIMEOUT_MS, n.tick())
    assert n.core.init_producer_id("t", TIMEOUT_MS, n.tick()).error == E.CONCURRENT_TRANSACTIONS
    assert n.complete(first).producer_epoch == 0
    assert n.init().producer_epoch == 1


def test_init_with_the_current_producer_id_and_epoch_bumps_it() -> None:
    """KIP-360: a producer that hit an abortable error re-initialises with its id/epoch."""
    n = node()
    n.init()
    r = n.init(producer_id=1000, producer_epoch=0)
    assert (r.error, r.producer_id, r.producer_epoch) == (NONE, 1000, 1)


def test_init_retry_with_the_last_epoch_gets_the_same_epoch() -> None:
    """KIP-360: the answer to a bump was lost; the retry names the epoch before it."""
    n = node()
    n.init()
    assert n.init(producer_id=1000, producer_epoch=0).producer_epoch == 1
    r = n.init(producer_id=1000, producer_epoch=0)
    assert (r.error, r.producer_id, r.producer_epoch) == (NONE, 1000, 1)


@pytest.mark.parametrize(("producer_id", "producer_epoch"), [(1000, 7), (999, 0)])
def test_init_with_a_stale_producer_is_fenced(producer_id: int, producer_epoch: int) -> None:
    """An epoch that is neither the current nor the last one, or another producer id, is
    PRODUCER_FENCED: another instance took over."""
    n = node()
    n.init()
    n.init()
    n.init(producer_id=1000, producer_epoch=1)
    r = n.init(producer_id=producer_id, producer_epoch=producer_epoch)
    assert (r.error, r.producer_id, r.producer_epoch) == (E.PRODUCER_FENCED, -1, -1)


def test_init_with_a_producer_id_for_a_fresh_id_is_accepted() -> None:
    """KIP-360: a producer whose transactional id expired re-initialises with its old id;
    the coordinator has just created the metadata (epoch -1) and accepts it."""
    n = node()
    r = n.init(producer_id=77, producer_epoch=12)
    assert (r.error, r.producer_id, r.producer_epoch) == (NONE, 1000, 0)


def test_init_on_an_ongoing_transaction_fences_and_aborts_it_first() -> None:
    """Kafka bumps the epoch (PrepareEpochFence), aborts with it, and answers
    CONCURRENT_TRANSACTIONS; the client's retry then bumps the epoch once more."""
    n = node(level=TV0)
    n.init()
    n.add("t", 1000, 0, [("topic", 0)])
    r = n.core.init_producer_id("t", TIMEOUT_MS, n.tick())
    assert r.append is not None and r.append.value is not None
    value = decode_value(r.append.value)
    assert (value.transaction_status, value.producer_epoch) == (S.PREPARE_ABORT, 1)
    answer = n.complete(r)
    assert answer.error == E.CONCURRENT_TRANSACTIONS
    assert answer.markers == TxnMarkers("t", 1000, 1, False, COORDINATOR_EPOCH, frozenset({TP}))
    # The old producer is fenced everywhere, and the new one must wait for the markers.
    assert n.end("t", 1000, 0, True).error == E.PRODUCER_FENCED
    assert n.init().error == E.CONCURRENT_TRANSACTIONS
    n.finish("t", answer)
    assert state_of(n).state == S.COMPLETE_ABORT
    r = n.init()
    assert (r.error, r.producer_id, r.producer_epoch) == (NONE, 1000, 2)


def test_fence_abort_at_transaction_version_2_bumps_twice() -> None:
    """At transaction.version 2 Kafka's abort "not from the client" bumps the fenced epoch
    again, so that the fenced producer's EndTxn cannot pass for a retry (epoch + 1)."""
    n = node(level=TV2)
    n.init()
    n.add("t", 1000, 0, [("topic", 0)], TV2)
    answer = n.complete(n.core.init_producer_id("t", TIMEOUT_MS, n.tick()))
    assert answer.markers is not None and answer.markers.producer_epoch == 2
    n.finish("t", answer)
    assert n.end("t", 1000, 0, False, TV2).error == E.PRODUCER_FENCED
    assert n.init().producer_epoch == 3


def test_a_failed_fence_is_not_bumped_again() -> None:
    """hasFailedEpochFence: the append of the fence and abort failed; its epoch was never
    returned, so the next fence reuses it instead of bumping."""
    n = node(level=TV0)
    n.init()
    n.add("t", 1000, 0, [("topic", 0)])
    r = n.complete(n.core.init_producer_id("t", TIMEOUT_MS, n.tick()), E.NOT_ENOUGH_REPLICAS)
    assert r.error == E.COORDINATOR_NOT_AVAILABLE
    m = state_of(n)
    assert (m.state, m.producer_epoch, m.has_failed_epoch_fence) == (S.ONGOING, 1, True)
    r = n.core.init_producer_id("t", TIMEOUT_MS, n.tick())
    assert r.append is not None and r.append.value is not None
    assert decode_value(r.append.value).producer_epoch == 1


def test_init_while_markers_are_written_is_concurrent() -> None:
    n = node()
    n.init()
    n.add("t", 1000, 0, [("topic", 0)])
    answer = n.end("t", 1000, 0, True)
    assert n.init().error == E.CONCURRENT_TRANSACTIONS
    n.finish("t", answer)
    assert n.init().producer_epoch == 1


def test_exhausted_epoch_rotates_to_a_new_producer_id() -> None:
    """KIP-360: the last epoch (Short.MAX_VALUE - 1) is never bumped: a new producer id at
    epoch 0; a retry with the old id and epoch is recognised (previous producer id)."""
    n = node(records=[stored(S.COMPLETE_COMMIT, epoch=SHORT_MAX - 1)])
    r = n.init(producer_id=500, producer_epoch=SHORT_MAX - 1)
    assert (r.error, r.producer_id, r.producer_epoch) == (NONE, 1000, 0)
    m = state_of(n)
    assert (m.previous_producer_id, m.last_producer_epoch) == (500, SHORT_MAX - 1)
    retry = n.init(producer_id=500, producer_epoch=SHORT_MAX - 1)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (NONE, 1000, 0)


def test_exhausted_epoch_without_a_producer_id_rotates_too() -> None:
    n = node(records=[stored(S.EMPTY, epoch=SHORT_MAX - 1)])
    r = n.init()
    assert (r.producer_id, r.producer_epoch, state_of(n).last_producer_epoch) == (1000, 0, -1)


def test_no_producer_id_available_is_load_in_progress() -> None:
    """RPCProducerIdManager throws COORDINATOR_LOAD_IN_PROGRESS while it waits for a block;
    the client retries."""
    n = node(records=[stored(S.COMPLETE_ABORT, epoch=SHORT_MAX - 1)])
    n.ids.available = False
    assert n.init().error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert n.init("fresh").error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert n.core.metadata("fresh") is None
    n.ids.available = True
    assert n.init().producer_id == 1000


def test_failed_append_of_a_new_id_leaves_it_with_no_epoch() -> None:
    """The metadata is cached before its first append, as in Kafka; after a failure the
    retry starts from epoch -1 again and gets epoch 0."""
    n = node()
    r = n.complete(n.core.init_producer_id("t", TIMEOUT_MS, n.tick()), E.REQUEST_TIMED_OUT)
    assert (r.error, r.producer_id) == (E.COORDINATOR_NOT_AVAILABLE, -1)
    assert (state_of(n).producer_epoch, state_of(n).pending_state) == (-1, None)
    r = n.init()
    assert (r.error, r.producer_id, r.producer_epoch) == (NONE, 1000, 0)


# ---------------------------------------------------------------------------------------
# AddPartitionsToTxn, AddOffsetsToTxn, verification
# ---------------------------------------------------------------------------------------


def test_add_partitions_starts_a_transaction() -> None:
    n = node()
    n.init()
    r = n.core.add_partitions("t", 1000, 0, [("topic", 0), ("topic", 1)], n.tick())
    assert r.append is not None and r.append.cause == AppendCause.ADD_PARTITIONS
    start = n.now_ms
    assert n.complete(r).error == NONE
    m = state_of(n)
    assert (m.state, m.txn_start_timestamp_ms) == (S.ONGOING, start)
    assert m.topic_partitions == {TP, TopicPartition("topic", 1)}


def test_add_partitions_already_in_the_transaction_writes_nothing() -> None:
    """Kafka's optimisation: a subset of the ongoing transaction's partitions is NONE now."""
    n = node()
    n.init()
    n.add("t", 1000, 0, [("topic", 0), ("topic", 1)])
    written = len(n.log)
    r = n.core.add_partitions("t", 1000, 0, [("topic", 1)], n.tick())
    assert (r.error, r.append) == (NONE, None)
    assert len(n.log) == written


@pytest.mark.parametrize(
    ("tid", "producer_id", "producer_epoch", "error"),
    [
        ("", 1000, 0, E.INVALID_REQUEST),
        ("unknown", 1000, 0, E.INVALID_PRODUCER_ID_MAPPING),
        ("t", 999, 0, E.INVALID_PRODUCER_ID_MAPPING),
        ("t", 1000, 1, E.PRODUCER_FENCED),
    ],
)
def test_add_partitions_errors(
    tid: str, producer_id: int, producer_epoch: int, error: ErrorCode
) -> None:
    """INVALID_PRODUCER_ID_MAPPING when the coordinator does not know the producer
    (the client must re-initialise), PRODUCER_FENCED for another epoch (fatal)."""
    n = node()
    n.init()
    assert n.add(tid, producer_id, producer_epoch, [("topic", 0)]).error == error


def test_add_partitions_while_pending_or_completing_is_concurrent() -> None:
    n = node()
    n.init()
    pending = n.core.add_partitions("t", 1000, 0, [("topic", 0)], n.tick())
    assert n.add("t", 1000, 0, [("topic", 1)]).error == E.CONCURRENT_TRANSACTIONS
    n.complete(pending)
    answer = n.end("t", 1000, 0, True)
    assert n.add("t", 1000, 0, [("topic", 1)]).error == E.CONCURRENT_TRANSACTIONS
    n.finish("t", answer)
    assert n.add("t", 1000, 0, [("topic", 1)]).error == NONE


def test_add_offsets_adds_the_groups_offsets_partition() -> None:
    """AddOffsetsToTxn: the group's __consumer_offsets partition joins the transaction, so
    that the transaction's markers also commit or abort its offsets."""
    n = node()
    n.init()
    r = n.core.add_offsets("t", 1000, 0, 17, n.tick())
    assert r.append is not None and r.append.cause == AppendCause.ADD_PARTITIONS
    n.complete(r)
    assert state_of(n).topic_partitions == {TopicPartition("__consumer_offsets", 17)}
    answer = n.end("t", 1000, 0, True)
    assert answer.markers is not None
    assert answer.markers.partitions == {TopicPartition("__consumer_offsets", 17)}
    assert n.core.add_offsets("t", 1000, 5, 17, n.tick()).error == E.PRODUCER_FENCED


def test_verify_partitions_for_a_partition_leader() -> None:
    """KIP-890 part 1: before appending a transactional batch, the leader asks whether the
    producer's ongoing transaction holds the partition; TRANSACTION_ABORTABLE if not (the
    client aborts), and one error for all partitions otherwise. It writes nothing."""
    n = node()
    n.init()
    n.add("t", 1000, 0, [("topic", 0)])
    written = len(n.log)
    assert n.core.verify_partitions("t", 1000, 0, [("topic", 0), ("topic", 1)]) == {
        TP: NONE,
        TopicPartition("topic", 1): E.TRANSACTION_ABORTABLE,
    }
    assert n.core.verify_partitions("t", 1000, 1, [("topic", 0)]) == {TP: E.PRODUCER_FENCED}
    assert n.core.verify_partitions("t", 9, 0, [("topic", 0)]) == {
        TP: E.INVALID_PRODUCER_ID_MAPPING
    }
    assert n.core.verify_partitions("x", 1000, 0, [("topic", 0)]) == {
        TP: E.INVALID_PRODUCER_ID_MAPPING
    }
    assert n.core.verify_partitions("", 1000, 0, [("topic", 0)]) == {TP: E.INVALID_REQUEST}
    answer = n.end("t", 1000, 0, False)
    assert n.core.verify_partitions("t", 1000, 0, [("topic", 0)]) == {TP: E.CONCURRENT_TRANSACTIONS}
    n.finish("t", answer)
    assert n.core.verify_partitions("t", 1000, 0, [("topic", 0)]) == {TP: E.TRANSACTION_ABORTABLE}
    assert len(n.log) == written + 2


# ---------------------------------------------------------------------------------------
# EndTxn, transaction version 0/1
# ---------------------------------------------------------------------------------------


def test_commit_writes_prepare_then_markers_then_complete() -> None:
    """The answer comes once PrepareCommit is durable; the markers follow, with the
    coordinator epoch, and the transactional id stays busy until CompleteCommit is."""
    n = node(level=TV1)
    n.init()
    n.add("t", 1000, 0, [("topic", 0), ("other", 3)])
    r = n.core.end_txn("t", 1000, 0, True, n.tick())
    assert r.append is not None and r.append.cause == AppendCause.END_TXN
    answer = n.complete(r)
    assert (answer.error, answer.producer_id, answer.producer_epoch, answer.append) == (
        NONE,
        -1,
        -1,
        None,
    )
    partitions = frozenset({TP, TopicPartition("other", 3)})
    assert answer.markers == TxnMarkers("t", 1000, 0, True, COORDINATOR_EPOCH, partitions)
    m = state_of(n)
    assert (m.state, m.pending_state) == (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
    assert n.end("t", 1000, 0, True).error == E.CONCURRENT_TRANSACTIONS
    done = n.core.markers_written("t", COORDINATOR_EPOCH)
    assert done.append is not None and done.append.cause == AppendCause.COMPLETE_TRANSACTION
    assert not done.append.cause.client_waits
    assert n.complete(done).error == NONE
    m = state_of(n)
    assert (m.state, m.topic_partitions, m.producer_epoch) == (S.COMPLETE_COMMIT, frozenset(), 0)


@pytest.mark.parametrize(
    ("setup", "committed", "error"),
    [
        ("complete_commit", True, NONE),
        ("complete_commit", False, E.INVALID_TXN_STATE),
        ("complete_abort", False, NONE),
        ("complete_abort", True, E.INVALID_TXN_STATE),
        ("empty", True, E.INVALID_TXN_STATE),
        ("empty", False, E.INVALID_TXN_STATE),
        ("prepare_commit", True, E.CONCURRENT_TRANSACTIONS),
        ("prepare_commit", False, E.CONCURRENT_TRANSACTIONS),
    ],
)
def test_end_txn_v1_by_state(setup: str, committed: bool, error: ErrorCode) -> None:
    """endTransactionWithTV1: a retry of the same end is NONE, the other end
    INVALID_TXN_STATE, no transaction INVALID_TXN_STATE; while the markers are written,
    the pending completion answers CONCURRENT_TRANSACTIONS first."""
    n = node(level=TV0)
    n.init()
    if setup != "empty":
        n.add("t", 1000, 0, [("topic", 0)])
        answer = n.end("t", 1000, 0, setup != "complete_abort")
        if setup != "prepare_commit":
            n.finish("t", answer)
    r = n.end("t", 1000, 0, committed)
    assert (r.error, r.append, r.producer_id) == (error, None, -1)


@pytest.mark.parametrize(
    ("tid", "producer_id", "producer_epoch", "error"),
    [
        ("", 1000, 0, E.INVALID_REQUEST),
        ("unknown", 1000, 0, E.INVALID_PRODUCER_ID_MAPPING),
        ("t", 1001, 0, E.INVALID_PRODUCER_ID_MAPPING),
        ("t", 1000, 1, E.PRODUCER_FENCED),
    ],
)
def test_end_txn_producer_errors(
    tid: str, producer_id: int, producer_epoch: int, error: ErrorCode
) -> None:
    n = node()
    n.init()
    n.add("t", 1000, 0, [("topic", 0)])
    for tv in (TV0, TV2):
        assert n.end(tid, producer_id, producer_epoch, True, tv).error == error


# ---------------------------------------------------------------------------------------
# EndTxn, transaction version 2 (KIP-890 part 2)
# ---------------------------------------------------------------------------------------


def test_v2_commit_bumps_the_epoch_and_answers_with_it() -> None:
    """The PrepareCommit record and the markers carry epoch + 1, which fences the
    producer's old epoch on every partition; EndTxn v5 answers with it."""
    n = node()
    n.init()
    n.add("t", 1000, 0, [("topic", 0)], TV2)
    answer = n.end("t", 1000, 0, True, TV2)
    assert (answer.error, answer.producer_id, answer.producer_epoch) == (NONE, 1000, 1)
    assert answer.markers is not None and answer.markers.producer_epoch == 1
    # A retry of the EndTxn (epoch 0) while the markers are written: back off.
    assert n.end("t", 1000, 0, True, TV2).error == E.CONCURRENT_TRANSACTIONS
    n.finish("t", answer)
    m = state_of(n)
    assert (m.state, m.producer_epoch, m.last_producer_epoch) == (S.COMPLETE_COMMIT, 1, 0)
    # The next transaction runs at epoch 1.
    assert n.transaction("t", 1000, 1, tv=TV2).producer_epoch == 2


def _v2_state(setup: str) -> tuple[Node, int]:
    """A transaction version 2 producer whose id is in ``setup``; returns its epoch."""
    n = node()
    n.init()
    if setup == "empty":
        return n, 0
    answer = n.transaction("t", 1000, 0, committed=setup == "complete_commit", tv=TV2)
    return n, answer.producer_epoch


@pytest.mark.parametrize(
    ("setup", "committed", "retry", "outcome"),
    [
        ("empty", False, True, "PF"),
        ("empty", False, False, "EB"),
        ("empty", True, True, "PF"),
        ("empty", True, False, "ITS"),
        ("complete_abort", False, True, "NONE"),
        ("complete_abort", False, False, "EB"),
        ("complete_abort", True, True, "ITS"),
        ("complete_abort", True, False, "ITS"),
        ("complete_commit", False, True, "ITS"),
        ("complete_commit", False, False, "EB"),
        ("complete_commit", True, True, "NONE"),
        ("complete_commit", True, False, "ITS"),
    ],
)
def test_v2_end_txn_table(setup: str, committed: bool, retry: bool, outcome: str) -> None:
    """Kafka's table for EndTxn v5 over Empty, CompleteAbort and CompleteCommit: Retry is
    the epoch before the stored (bumped) one, Current the stored one; PF =
    PRODUCER_FENCED, ITS = INVALID_TXN_STATE, NONE = a retry answered with the current
    epoch, EB = a new abort with an epoch bump (the client aborts when unsure)."""
    n, epoch = _v2_state(setup)
    asked = epoch - 1 if retry else epoch
    r = n.core.end_txn("t", 1000, asked, committed, n.tick(), TV2)
    if outcome == "EB":
        assert r.append is not None
        answer = n.complete(r)
        assert (answer.error, answer.producer_epoch) == (NONE, epoch + 1)
        assert answer.markers is None  # no partitions: the completion follows at once
        assert answer.append is not None
        n.complete(answer)
        assert state_of(n).state == S.COMPLETE_ABORT
        return
    assert r.append is None
    if outcome == "NONE":
        assert (r.error, r.producer_id, r.producer_epoch) == (NONE, 1000, epoch)
    else:
        expected = E.PRODUCER_FENCED if outcome == "PF" else E.INVALID_TXN_STATE
        assert (r.error, r.producer_id, r.producer_epoch) == (expected, -1, -1)


def test_v2_end_at_the_last_epoch_rotates_the_producer_id() -> None:
    """The bump from Short.MAX_VALUE - 1 takes the fencing epoch: the markers carry
    MAX_VALUE under the old id, the client continues with a new producer id at epoch 0,
    and a retry with the old id is recognised (retryOnOverflow)."""
    n = node(records=[stored(S.ONGOING, epoch=SHORT_MAX - 1, partitions=frozenset({TP}), tv=2)])
    answer = n.end("t", 500, SHORT_MAX - 1, True, TV2)
    assert (answer.error, answer.producer_id, answer.producer_epoch) == (NONE, 1000, 0)
    assert answer.markers is not None
    assert (answer.markers.producer_id, answer.markers.producer_epoch) == (500, SHORT_MAX)
    assert n.end("t", 500, SHORT_MAX - 1, True, TV2).error == E.CONCURRENT_TRANSACTIONS
    n.finish("t", answer)
    m = state_of(n)
    assert (m.producer_id, m.producer_epoch, m.previous_producer_id) == (1000, 0, 500)
    retry = n.end("t", 500, SHORT_MAX - 1, True, TV2)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (NONE, 1000, 0)
    assert n.transaction("t", 1000, 0, tv=TV2).producer_epoch == 1


def test_v2_rotation_without_a_producer_id_available() -> None:
    n = node(records=[stored(S.ONGOING, epoch=SHORT_MAX - 1, partitions=frozenset({TP}), tv=2)])
    n.ids.available = False
    assert n.end("t", 500, SHORT_MAX - 1, True, TV2).error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert state_of(n).pending_state is None


def test_v2_fenced_producer_at_the_last_epoch_stays_fenced() -> None:
    """A timeout fences an ongoing transaction at MAX_VALUE - 1 to MAX_VALUE (the abort
    cannot bump further). The fenced producer's EndTxn with MAX_VALUE - 1 looks like a
    retry (epoch + 1) to Kafka's rule; here it is PRODUCER_FENCED, since no client end
    leaves a completed transaction at MAX_VALUE (it would rotate)."""
    n = node(records=[stored(S.ONGOING, epoch=SHORT_MAX - 1, partitions=frozenset({TP}), tv=2)])
    actions = n.core.abort_timed_out_transactions(n.now_ms + TIMEOUT_MS + 100)
    answer = n.complete(actions.appends[0])
    n.finish("t", answer)
    assert state_of(n).producer_epoch == SHORT_MAX
    assert n.end("t", 500, SHORT_MAX - 1, False, TV2).error == E.PRODUCER_FENCED
    assert n.init().producer_id == 1000  # the next producer rotates


# ---------------------------------------------------------------------------------------
# Appends that fail or complete late, markers
# ---------------------------------------------------------------------------------------


def test_failed_append_answers_the_mapped_error_and_drops_the_transition() -> None:
    """appendTransactionToLog: NOT_ENOUGH_REPLICAS becomes COORDINATOR_NOT_AVAILABLE
    (retriable), NOT_LEADER_OR_FOLLOWER becomes NOT_COORDINATOR (find the coordinator
    again); the pending state is reset so that the retry can proceed."""
    n = node()
    n.init()
    before = state_of(n)
    adding = n.core.add_partitions("t", 1000, 0, [("topic", 0)], n.tick())
    assert n.complete(adding, E.NOT_ENOUGH_REPLICAS).error == E.COORDINATOR_NOT_AVAILABLE
    assert state_of(n) == before
    assert n.add("t", 1000, 0, [("topic", 0)]).error == NONE
    ongoing = state_of(n)
    ending = n.core.end_txn("t", 1000, 0, True, n.tick())
    assert n.complete(ending, E.NOT_LEADER_OR_FOLLOWER).error == E.NOT_COORDINATOR
    assert state_of(n) == ongoing
    assert n.end("t", 1000, 0, True).error == NONE


def test_append_completed_after_the_partition_moved_is_not_coordinator() -> None:
    """Kafka compares the coordinator epoch once the append returns: the new leader owns
    the transaction now, and nothing changes here."""
    n = node()
    r = n.core.init_producer_id("t", TIMEOUT_MS, n.tick())
    assert r.append is not None
    n.core.unload(0)
    assert n.complete(r).error == E.NOT_COORDINATOR
    n.core.load(0, COORDINATOR_EPOCH + 1, n.log, n.tick())
    assert n.core.append_completed(r.append, NONE, n.tick()).error == E.NOT_COORDINATOR
    assert state_of(n).producer_epoch == 0  # the record was durable: the new leader has it


def test_completion_append_is_retried_while_the_log_is_unavailable() -> None:
    """TransactionMarkerChannelManager retries the completion on COORDINATOR_NOT_AVAILABLE;
    on NOT_COORDINATOR it leaves it to the next leader, which sends the markers again."""
    n = node()
    n.init()
    n.add("t", 1000, 0, [("topic", 0)])
    answer = n.end("t", 1000, 0, True)
    done = n.core.markers_written("t", COORDINATOR_EPOCH)
    again = n.complete(done, E.REQUEST_TIMED_OUT)
    assert (again.error, again.append) == (E.COORDINATOR_NOT_AVAILABLE, done.append)
    assert state_of(n).pending_state == S.COMPLETE_COMMIT
    stop = n.complete(again, E.NOT_LEADER_OR_FOLLOWER)
    assert (stop.error, stop.append) == (E.NOT_COORDINATOR, None)
    n.core.unload(0)
    actions = n.core.load(0, COORDINATOR_EPOCH + 1, n.log, n.tick())
    assert [m.producer_epoch for m in actions.markers] == [0]
    assert answer.markers is not None
    assert n.core.markers_written("t", COORDINATOR_EPOCH).error == E.NOT_COORDINATOR
    n.complete(n.core.markers_written("t", COORDINATOR_EPOCH + 1))
    assert state_of(n).state == S.COMPLETE_COMMIT


def test_unexpected_append_errors_of_a_completion_are_a_bug() -> None:
    n = node()
    n.init()
    n.add("t", 1000, 0, [("topic", 0)])
    n.end("t", 1000, 0, True)
    done = n.core.markers_written("t", COORDINATOR_EPOCH)
    with pytest.raises(InvariantError):
        n.complete(done, E.CORRUPT_MESSAGE)


def test_markers_written_without_markers_is_a_bug() -> None:
    n = node()
    n.init()
    with pytest.raises(InvariantError):
        n.core.markers_written("t", COORDINATOR_EPOCH)
    r = n.core.init_producer_id("t", TIMEOUT_MS, n.tick())
    n.complete(r)
    with pytest.raises(InvariantError):
        n.complete(r)  # reported twice


# ---------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------


def test_load_replays_the_log_and_resends_markers_of_prepared_transactions() -> None:
    """loadTransactionsForTxnTopicPartition: the last value per key wins, a tombstone
    removes; PrepareCommit/PrepareAbort get their completion prepared and their markers
    sent again with the new coordinator epoch (a crash between the prepare and the
    completion loses no transaction)."""
    partitions = frozenset({TP, TopicPartition("b", 2)})
    records = [
        stored(S.ONGOING, epoch=3, partitions=partitions),
        stored(S.PREPARE_COMMIT, epoch=3, partitions=partitions),
        (encode_key("gone"), stored(S.EMPTY, epoch=0)[1]),
        tombstone_for("gone"),
    ]
    core = TransactionCoordinatorCore(TransactionConfig(1), lambda: 1)
    actions = core.load(0, 9, records, 100)
    assert actions.markers == (TxnMarkers("t", 500, 3, True, 9, partitions),)
    assert actions.appends == ()
    assert core.transactional_ids() == ["t"]
    assert core.end_txn("t", 500, 3, True, 101).error == E.CONCURRENT_TRANSACTIONS
    done = core.markers_written("t", 9)
    assert done.append is not None and done.append.value is not None
    assert decode_value(done.append.value).transaction_status == S.COMPLETE_COMMIT
    assert core.append_completed(done.append, NONE, 102).error == NONE
    assert core.end_txn("t", 500, 3, True, 103).error == NONE  # a retry, answered


def test_load_completes_a_prepared_abort_without_partitions_at_once() -> None:
    """A transaction version 2 abort from Empty has no markers to wait for."""
    core = TransactionCoordinatorCore(TransactionConfig(1), lambda: 1)
    actions = core.load(0, 9, [stored(S.PREPARE_ABORT, epoch=4, tv=2)], 100)
    assert actions.markers == ()
    assert [a.cause for a in actions.appends] == [AppendCause.COMPLETE_TRANSACTION]
    assert core.append_completed(actions.appends[0], NONE, 101) == TxnResult()
    m = core.metadata("t")
    assert m is not None and (m.state, m.producer_epoch) == (S.COMPLETE_ABORT, 4)


def test_a_malformed_record_loads_nothing() -> None:
    core = TransactionCoordinatorCore(TransactionConfig(1), lambda: 1)
    core.begin_load(0, 3)
    with pytest.raises(DecodeError):
        core.load(0, 3, [stored(S.EMPTY, epoch=0), (encode_key("x"), b"\x00\x07")], 0)
    assert core.init_producer_id("t", TIMEOUT_MS, 0).error == E.COORDINATOR_LOAD_IN_PROGRESS


def test_coordinator_epoch_only_goes_up() -> None:
    """Each leadership of a partition has a higher coordinator epoch; a load at the epoch
    of the current leadership would take its late appends for new ones."""
    core = TransactionCoordinatorCore(TransactionConfig(1), lambda: 1)
    core.begin_load(0, 5)
    core.load(0, 5, [], 0)
    with pytest.raises(InvariantError):
        core.load(0, 5, [], 0)
    with pytest.raises(InvariantError):
        core.begin_load(0, 4)
    core.load(0, 6, [], 0)


def test_loaded_metadata_has_no_last_epoch() -> None:
    """The record has no last epoch: after a coordinator change a KIP-360 retry of the
    InitProducerId that bumped the epoch is fenced (Kafka's documented rare case)."""
    n = node()
    n.init()
    n.init(producer_id=1000, producer_epoch=0)
    loaded = read_record(*n.log[-1])
    assert isinstance(loaded, TxnRecord) and loaded.metadata.last_producer_epoch == -1
    fresh = node(records=n.log)
    assert fresh.init(producer_id=1000, producer_epoch=0).error == E.PRODUCER_FENCED


# ---------------------------------------------------------------------------------------
# Timeouts and expiration
# ---------------------------------------------------------------------------------------


def test_transaction_open_longer_than_its_timeout_is_fenced_and_aborted() -> None:
    """abortTimedOutTransactions: an Ongoing transaction whose start + transaction.timeout.ms
    is past is fenced (epoch + 1) and aborted; its producer's next request is fenced, so a
    hung producer cannot commit what was aborted under it."""
    n = node(level=TV0)
    n.init()
    n.add("t", 1000, 0, [("topic", 0)])
    start = state_of(n).txn_start_timestamp_ms
    assert not n.core.abort_timed_out_transactions(start + TIMEOUT_MS)  # not yet: strictly after
    actions = n.core.abort_timed_out_transactions(start + TIMEOUT_MS + 1)
    assert [a.cause for a in actions.appends] == [AppendCause.ABORT_TIMED_OUT]
    assert not actions.appends[0].cause.client_waits
    # Already pending: not aborted twice.
    assert not n.core.abort_timed_out_transactions(start + TIMEOUT_MS + 2)
    follow = n.complete(actions.appends[0])
    assert follow.markers == TxnMarkers("t", 1000, 1, False, COORDINATOR_EPOCH, frozenset({TP}))
    assert n.end("t", 1000, 0, True).error == E.PRODUCER_FENCED
    n.finish("t", follow)
    assert state_of(n).state == S.COMPLETE_ABORT
    assert n.end("t", 1000, 0, True).error == E.PRODUCER_FENCED
    assert n.init().producer_epoch == 2


def test_idle_transactional_ids_expire_into_tombstones() -> None:
    """transactional.id.expiration.ms after the last update of an Empty or completed id,
    Kafka writes a tombstone and forgets the id; an ongoing transaction never expires."""
    n = node(transactional_id_expiration_ms=10_000)
    n.init("idle")
    n.init("busy")
    n.add("busy", 1001, 0, [("topic", 0)])
    last_update = state_of(n, "idle").txn_last_update_timestamp_ms
    assert not n.core.expire_transactional_ids(last_update + 9_999)
    actions = n.core.expire_transactional_ids(last_update + 10_000)
    assert [(a.transactional_id, a.value, a.cause) for a in actions.appends] == [
        ("idle", None, AppendCause.EXPIRE_TRANSACTIONAL_ID)
    ]
    assert n.init("idle").error == E.CONCURRENT_TRANSACTIONS  # the tombstone is pending
    assert n.complete(actions.appends[0]) == TxnResult()
    assert n.core.metadata("idle") is None
    assert n.core.describe_transaction("idle").error == E.TRANSACTIONAL_ID_NOT_FOUND
    assert n.add("idle", 1000, 0, [("topic", 0)]).error == E.INVALID_PRODUCER_ID_MAPPING
    assert n.init("idle").producer_id == 1002  # a new producer id from scratch
    assert n.core.metadata("busy") is not None


def test_failed_tombstone_keeps_the_id() -> None:
    n = node(transactional_id_expiration_ms=10)
    n.init()
    actions = n.core.expire_transactional_ids(n.now_ms + 10)
    failed = n.complete(actions.appends[0], E.NOT_ENOUGH_REPLICAS)
    assert failed.error == E.COORDINATOR_NOT_AVAILABLE
    m = state_of(n)
    assert (m.state, m.pending_state) == (S.EMPTY, None)
    assert n.init().producer_epoch == 1


# ---------------------------------------------------------------------------------------
# DescribeTransactions, ListTransactions
# ---------------------------------------------------------------------------------------


def test_describe_transaction() -> None:
    """DescribeTransactions shows Kafka's state name, the producer, the timeout, the start
    and the partitions by topic; an unknown id is TRANSACTIONAL_ID_NOT_FOUND."""
    n = node()
    n.init()
    n.add("t", 1000, 0, [("b", 2), ("a", 1), ("b", 0)])
    d = n.core.describe_transaction("t")
    assert d.error == NONE
    assert (d.state, d.producer_id, d.producer_epoch) == ("Ongoing", 1000, 0)
    assert d.transaction_timeout_ms == TIMEOUT_MS
    assert d.transaction_start_time_ms == state_of(n).txn_start_timestamp_ms
    assert d.topics == {"a": (1,), "b": (0, 2)}
    assert n.core.describe_transaction("nope").error == E.TRANSACTIONAL_ID_NOT_FOUND
    assert n.core.describe_transaction("").error == E.INVALID_REQUEST


def test_list_transactions_with_filters() -> None:
    """ListTransactions: every filter given must match; the duration filter (KIP-994) keeps
    transactions running longer than it; unknown state names are reported back."""
    n = node()
    n.init("a")
    n.init("b")
    n.init("c")
    n.add("a", 1000, 0, [("topic", 0)])
    started_a = state_of(n, "a").txn_start_timestamp_ms
    n.tick(5_000)
    n.add("b", 1001, 0, [("topic", 1)])
    now = n.tick(1_000)

    def listed(states: list[str], ids: list[int], duration: int) -> list[str]:
        listing = n.core.list_transactions(states, ids, duration, now)
        assert listing.error == NONE
        return [t.transactional_id for t in listing.transactions]

    assert listed([], [], -1) == ["a", "b", "c"]
    assert listed(["Ongoing"], [], -1) == ["a", "b"]
    assert listed(["Empty", "Ongoing"], [1000, 1002], -1) == ["a", "c"]
    assert listed(["Ongoing"], [], now - started_a - 1) == ["a"]
    assert listed(["Ongoing"], [], now - started_a) == []
    listing = n.core.list_transactions(["Bogus", "Empty"], [], -1, now)
    assert listing.unknown_state_filters == ("Bogus",)
    assert [(t.transactional_id, t.producer_id, t.state) for t in listing.transactions] == [
        ("c", 1002, "Empty")
    ]
    n.core.begin_load(0, COORDINATOR_EPOCH + 1)
    assert n.core.list_transactions([], [], -1, now).error == E.COORDINATOR_LOAD_IN_PROGRESS


# ---------------------------------------------------------------------------------------
# Error codes on the wire
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api_key", "old", "new"),
    [
        (InitProducerIdRequest.API_KEY, 3, 4),
        (AddPartitionsToTxnRequest.API_KEY, 1, 2),
        (AddOffsetsToTxnRequest.API_KEY, 1, 2),
        (EndTxnRequest.API_KEY, 1, 2),
    ],
)
def test_producer_fenced_for_old_clients_is_invalid_producer_epoch(
    api_key: int, old: int, new: int
) -> None:
    """KIP-588: clients of request versions before PRODUCER_FENCED existed get
    INVALID_PRODUCER_EPOCH, which they handle the same way (KafkaApis)."""
    assert error_for_request_version(api_key, old, E.PRODUCER_FENCED) == E.INVALID_PRODUCER_EPOCH
    assert error_for_request_version(api_key, new, E.PRODUCER_FENCED) == E.PRODUCER_FENCED
    assert error_for_request_version(api_key, 0, E.CONCURRENT_TRANSACTIONS) == (
        E.CONCURRENT_TRANSACTIONS
    )


@pytest.mark.parametrize(
    ("append_error", "client_error"),
    [
        (E.UNKNOWN_TOPIC_OR_PARTITION, E.COORDINATOR_NOT_AVAILABLE),
        (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
        (E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.COORDINATOR_NOT_AVAILABLE),
        (E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE),
        (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
        (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR),
        (E.MESSAGE_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
        (E.RECORD_LIST_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
        (E.NONE, E.NONE),
    ],
)
def test_append_errors_map_to_coordinator_errors(
    append_error: ErrorCode, client_error: ErrorCode
) -> None:
    """TransactionStateManager.appendTransactionToLog's mapping, which tells the client
    whether to retry (COORDINATOR_NOT_AVAILABLE) or look the coordinator up again."""
    assert coordinator_error_for_append(append_error) == client_error


def test_config_from_values_reads_kafkas_keys() -> None:
    config = TransactionConfig.from_values(
        {
            "transaction.state.log.num.partitions": 3,
            "transaction.max.timeout.ms": 5,
            "transactional.id.expiration.ms": 7,
            "unrelated": True,
        }
    )
    assert config == TransactionConfig(3, 5, 7)
    assert TransactionConfig.from_values({}) == TransactionConfig()
