"""A partition's side of transactions in its producer state: transactions opened by a
producer's first transactional batch and closed by its coordinator's marker, the last
stable offset read_committed readers stop at, and Kafka's fencing of markers and of
non-transactional writes inside a transaction."""

from __future__ import annotations

import pytest

from odradek.core.errors import DecodeError
from odradek.protocol.control_batch import (
    EndTxnMarker,
    encode_control_batch,
    encode_end_txn_marker,
    read_end_txn_marker,
)
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.record_batch import TRANSACTIONAL_FLAG_MASK, ControlType, validate_batch
from odradek.replication.producer_state import (
    APPEND,
    CompletedTxn,
    ProducerStateManager,
)
from tests.replication.test_producer_state import Log, header

A, B = 1000, 2000


class TxnLog(Log):
    """The produce path in miniature, with transactional batches and markers."""

    def txn(self, producer_id: int, sequence: int, count: int = 1, epoch: int = 0) -> int:
        """Append a transactional batch that must be accepted; its first offset."""
        first = self.end
        h = header(producer_id, epoch, sequence, count)._replace(attributes=TRANSACTIONAL_FLAG_MASK)
        assert self.produce(h) == APPEND
        return first

    def marker(
        self, producer_id: int, *, committed: bool, epoch: int = 0, coordinator_epoch: int = 0
    ) -> CompletedTxn:
        assert self.state.check_marker(producer_id, epoch, coordinator_epoch) == APPEND
        done = self.state.complete(
            producer_id, epoch, self.end, committed=committed,
            coordinator_epoch=coordinator_epoch, timestamp=5_000,
        )  # fmt: skip
        self.end += 1
        return done


def test_a_transaction_holds_the_last_stable_offset_until_its_marker_is_replicated() -> None:
    log = TxnLog()
    log.ok(producer_id=B, sequence=0)  # idempotent, not transactional: never unstable
    assert log.state.last_stable_offset(1) == 1
    first = log.txn(A, 0, count=3)
    log.txn(A, 3)
    assert log.state.ongoing_transactions() == [(first, A)]
    assert log.state.first_unstable_offset == first
    # The high watermark passing the data is not enough: the transaction is open.
    assert log.state.last_stable_offset(log.end) == first
    done = log.marker(A, committed=True)
    assert done == CompletedTxn(A, first, 5, is_aborted=False, last_stable_offset=6)
    assert log.state.ongoing_transactions() == []
    # Closed, but its marker is not below the high watermark yet.
    assert log.state.last_stable_offset(5) == first
    assert log.state.last_stable_offset(6) == 6
    assert log.state.first_unstable_offset is None
    # The last stable offset never passes the high watermark.
    assert log.state.last_stable_offset(3) == 3


def test_interleaved_transactions_and_the_index_entry_of_an_abort() -> None:
    log = TxnLog()
    a_first = log.txn(A, 0, count=2)
    b_first = log.txn(B, 0)
    log.txn(A, 2)
    aborted = log.marker(A, committed=False)
    # B's transaction, opened before A's marker, is still undecided: a read_committed
    # reader past A's abort still needs this entry until it passes B's first offset.
    assert aborted == CompletedTxn(A, a_first, 4, is_aborted=True, last_stable_offset=b_first)
    assert log.state.last_stable_offset(log.end) == b_first
    committed = log.marker(B, committed=True)
    assert committed.last_stable_offset == committed.last_offset + 1
    assert log.state.last_stable_offset(log.end) == log.end


def test_a_plain_write_inside_an_open_transaction_is_invalid_txn_state() -> None:
    log = TxnLog()
    log.txn(A, 0)
    decision = log.produce(header(A, 0, 1))
    assert decision.error_code == ErrorCode.INVALID_TXN_STATE
    assert "transactional" in decision.message
    log.marker(A, committed=True)
    # Once the transaction is closed the producer may write outside one again.
    assert log.produce(header(A, 0, 1)) == APPEND


def test_markers_from_an_older_producer_or_coordinator_epoch_are_fenced() -> None:
    log = TxnLog()
    log.txn(A, 0, epoch=3)
    assert log.state.check_marker(A, 2, 0).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    log.marker(A, committed=False, epoch=3, coordinator_epoch=7)
    entry = log.state.entry(A)
    assert entry is not None and entry.coordinator_epoch == 7
    fenced = log.state.check_marker(A, 3, 6)
    assert fenced.error_code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert log.state.check_marker(A, 3, 7) == APPEND
    # A producer the partition never saw: nothing to fence it with.
    assert log.state.check_marker(B, 0, 0) == APPEND


def test_a_marker_without_an_open_transaction_closes_an_empty_one_at_itself() -> None:
    log = TxnLog()
    done = log.marker(A, committed=False, epoch=1)
    assert done == CompletedTxn(A, 0, 0, is_aborted=True, last_stable_offset=1)
    entry = log.state.entry(A)
    assert entry is not None and entry.producer_epoch == 1 and entry.last_offset == -1


def test_truncation_reopens_a_transaction_whose_marker_it_removed() -> None:
    log = TxnLog()
    a_first = log.txn(A, 0)
    log.txn(A, 1)
    marker = log.marker(A, committed=True).last_offset
    b_first = log.txn(B, 0)
    # The log loses B's batch and A's marker (never below the high watermark).
    log.state.truncate_to(marker)
    assert log.state.ongoing_transactions() == [(a_first, A)]
    assert log.state.last_stable_offset(marker) == a_first
    entry = log.state.entry(A)
    assert entry is not None and entry.current_txn_first_offset == a_first
    assert log.state.entry(B) is None and b_first > marker
    # And a truncation into the transaction's own batches removes what opened it.
    log.state.truncate_to(a_first)
    assert log.state.ongoing_transactions() == [] and log.state.first_unstable_offset is None


def test_an_open_transaction_survives_a_snapshot_and_is_never_expired() -> None:
    log = TxnLog()
    log.ok(producer_id=B, sequence=0)
    first = log.txn(A, 0, count=2)
    entries = log.state.snapshot()
    assert [e.current_txn_first_offset for e in entries] == [first, -1]
    restored = ProducerStateManager.from_snapshot(entries)
    assert restored.ongoing_transactions() == [(first, A)]
    assert restored.last_stable_offset(10) == first
    assert restored.remove_expired(10**12, 1) == [B]
    # The restored producer is still in its transaction: a plain write is refused.
    assert restored.check(header(A, 0, 2)).error_code == ErrorCode.INVALID_TXN_STATE


def test_markers_encode_and_read_back_as_kafkas_end_txn_marker() -> None:
    for committed in (True, False):
        batch = encode_end_txn_marker(
            EndTxnMarker(committed, coordinator_epoch=42), producer_id=A, producer_epoch=3,
            base_offset=17, timestamp=9,
        )  # fmt: skip
        h = validate_batch(batch)
        assert h.is_control and h.is_transactional and h.base_offset == 17
        assert (h.producer_id, h.producer_epoch, h.records_count) == (A, 3, 1)
        assert read_end_txn_marker(batch) == EndTxnMarker(committed, 42)
    # The KRaft log's control records are no transaction markers.
    assert read_end_txn_marker(encode_control_batch(ControlType.LEADER_CHANGE, b"")) is None
    short = encode_control_batch(ControlType.COMMIT, b"\x00\x00")
    with pytest.raises(DecodeError, match="not an EndTxnMarker"):
        read_end_txn_marker(short)
