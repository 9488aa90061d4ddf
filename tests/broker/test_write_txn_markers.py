"""WriteTxnMarkers on a partition leader: the marker closes the producer's transaction
and moves the last stable offset, an abort goes into the transaction index, older
producer and coordinator epochs are fenced, and the answer waits for the flush as
acks=all does."""

from __future__ import annotations

from typing import Any

from odradek.broker.authorization import Authorization
from odradek.broker.effects import AwaitFlush, Reply
from odradek.broker.txn_markers import handle_write_txn_markers
from odradek.protocol.control_batch import EndTxnMarker, read_end_txn_marker
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import WriteTxnMarkersRequest
from odradek.protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
)
from odradek.protocol.record_batch import validate_batch
from odradek.storage.txn_index import AbortedTxn
from tests.broker.harness import Harness, header, new_harness
from tests.broker.test_read_committed import A, B, data

Key = tuple[str, int]


def leader(*, flush_before_ack: bool = False) -> Harness:
    h = new_harness(flush_before_ack=flush_before_ack)
    h.add_topic("t", 2)
    return h


def transactional(h: Harness, producer_id: int, index: int = 0) -> int:
    """A transactional batch appended as the produce path will once transactions are
    taken (check, append, update); its offset."""
    partition = h.partition("t", index)
    batch = bytearray(data(producer_id, 0))
    h_ = validate_batch(batch)
    assert partition.producers.check(h_).append
    info = partition.log.append_as_leader(memoryview(batch), partition.leader_epoch, 0)
    partition.producers.update(h_, info.first_offset, info.last_offset, info.max_timestamp)
    return info.first_offset


def request(
    producer_id: int,
    committed: bool,
    partitions: tuple[int, ...] = (0,),
    *,
    epoch: int = 0,
    coordinator_epoch: int = 5,
) -> WriteTxnMarkersRequest:
    return WriteTxnMarkersRequest(markers=[
        WritableTxnMarker(
            producer_id=producer_id, producer_epoch=epoch, transaction_result=committed,
            topics=[WritableTxnMarkerTopic(name="t", partition_indexes=list(partitions))],
            coordinator_epoch=coordinator_epoch,
        )
    ])  # fmt: skip


def errors(response: Any) -> list[tuple[int, int, int]]:
    return [
        (m.producer_id, p.partition_index, p.error_code)
        for m in response.markers
        for t in m.topics
        for p in t.partitions
    ]


def write(h: Harness, req: WriteTxnMarkersRequest) -> Any:
    outcome = handle_write_txn_markers(h.state, header(27, 1), req)
    assert isinstance(outcome, Reply), outcome
    return outcome.response


def test_a_commit_marker_closes_the_transaction_on_every_partition_named() -> None:
    h = leader()
    for index in (0, 1):
        transactional(h, A, index)
    assert [h.partition("t", i).last_stable_offset for i in (0, 1)] == [0, 0]
    answered = write(h, request(A, True, (0, 1)))
    assert errors(answered) == [(A, 0, 0), (A, 1, 0)]
    for index in (0, 1):
        partition = h.partition("t", index)
        assert partition.producers.ongoing_transactions() == []
        assert partition.log.log_end_offset == 2 and partition.last_stable_offset == 2
        stored = partition.log.read(1, 1 << 20)
        assert stored is not None
        assert read_end_txn_marker(stored.read()) == EndTxnMarker(True, 5)
        assert partition.log.aborted_transactions(0, 2) == []


def test_an_abort_marker_goes_into_the_transaction_index() -> None:
    h = leader()
    transactional(h, A)
    transactional(h, B)  # B's transaction, opened later, is still open after A's abort
    assert errors(write(h, request(A, False))) == [(A, 0, 0)]
    partition = h.partition("t")
    assert partition.log.aborted_transactions(0, 3) == [AbortedTxn(A, 0, 2, 1)]
    assert partition.last_stable_offset == 1


def test_older_producer_and_coordinator_epochs_are_fenced() -> None:
    h = leader()
    transactional(h, A)
    assert errors(write(h, request(A, True, coordinator_epoch=5))) == [(A, 0, 0)]
    fenced = write(h, request(A, False, coordinator_epoch=4))
    assert errors(fenced) == [(A, 0, ErrorCode.TRANSACTION_COORDINATOR_FENCED)]
    old_epoch = write(h, request(A, False, epoch=-1, coordinator_epoch=5))
    assert errors(old_epoch) == [(A, 0, ErrorCode.INVALID_PRODUCER_EPOCH)]
    assert h.partition("t").log.log_end_offset == 2  # nothing appended for either


def test_partitions_this_node_does_not_have_and_a_caller_without_cluster_action() -> None:
    h = leader()
    unknown = WriteTxnMarkersRequest(markers=[
        WritableTxnMarker(producer_id=A, topics=[
            WritableTxnMarkerTopic(name="nope", partition_indexes=[0])
        ])
    ])  # fmt: skip
    assert errors(write(h, unknown)) == [(A, 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    h.state.authorization = Authorization(frozenset(), False)
    denied = write(h, request(A, True))
    assert errors(denied) == [(A, 0, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]
    assert h.partition("t").log.log_end_offset == 0


def test_the_answer_waits_for_the_flush_and_a_failed_one_is_never_acknowledged() -> None:
    h = leader(flush_before_ack=True)
    transactional(h, A, 0)
    transactional(h, A, 1)
    outcome = handle_write_txn_markers(h.state, header(27, 1), request(A, True, (0, 1)))
    assert isinstance(outcome, AwaitFlush)
    assert outcome.offsets == {("t", 0): 2, ("t", 1): 2}
    # Partition 1's log went offline before its flush: its marker is not acknowledged.
    done = outcome.then(frozenset({("t", 1)}))
    assert isinstance(done, Reply)
    assert errors(done.response) == [(A, 0, 0), (A, 1, ErrorCode.KAFKA_STORAGE_ERROR)]
