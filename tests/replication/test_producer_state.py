"""Idempotent producer state: Kafka's duplicate, sequence and epoch rules, pinned.

A retried produce request must never put a record in the log twice, and a real client
must get the error code Kafka would give it, or it takes the wrong recovery path (the
Java client and librdkafka treat OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH
and a duplicate's success differently). The cases follow Kafka's own tests
(``UnifiedLogTest.testDuplicateAppends``, ``ProducerStateManagerTest``), and a
Hypothesis test compares the state with a model written from the log's point of view.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from odradek.core.errors import InvariantError
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.record_batch import (
    BatchHeader,
    validate_batch,
)
from odradek.protocol.record_codec import (
    Record,
    encode_batch,
)
from odradek.replication.producer_state import (
    APPEND,
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    MAX_SEQUENCE,
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    Decision,
    ProducerStateManager,
    SnapshotEntry,
    decrement_sequence,
    increment_sequence,
    last_sequence,
)

OOO = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
FENCED = ErrorCode.INVALID_PRODUCER_EPOCH
PID = 1000


def header(
    producer_id: int = PID,
    epoch: int = 0,
    sequence: int = 0,
    count: int = 1,
    base_offset: int = 0,
    timestamp: int = 1_000,
    control: bool = False,
) -> BatchHeader:
    """A batch header as validate_batch returns it, without building the batch."""
    return BatchHeader(
        position=0,
        base_offset=base_offset,
        batch_length=0,
        partition_leader_epoch=0,
        magic=2,
        crc=0,
        attributes=0x20 if control else 0,
        last_offset_delta=count - 1,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        records_count=count,
    )


class Log:
    """A leader's produce path in miniature: check, append at the log end, update."""

    def __init__(self, state: ProducerStateManager | None = None, end: int = 0) -> None:
        self.state = state or ProducerStateManager()
        self.end = end

    def produce(self, h: BatchHeader) -> Decision:
        decision = self.state.check(h)
        if decision.append:
            first, last = self.end, self.end + h.last_offset_delta
            self.state.update(h, first, last, h.max_timestamp)
            self.end = last + 1
        return decision

    def ok(self, **kwargs: Any) -> int:
        """Produce a batch that must be appended; return its first offset."""
        first = self.end
        decision = self.produce(header(**kwargs))
        assert decision == APPEND, decision
        return first


# Sequence arithmetic -------------------------------------------------------------


def test_sequences_wrap_at_int32_max() -> None:
    assert increment_sequence(MAX_SEQUENCE, 1) == 0
    assert increment_sequence(MAX_SEQUENCE - 1, 3) == 1
    assert decrement_sequence(1, 3) == MAX_SEQUENCE - 1
    assert decrement_sequence(5, 5) == 0
    assert last_sequence(header(sequence=MAX_SEQUENCE - 1, count=3)) == 0  # MAX-1, MAX, 0
    # lastOffsetDelta, not recordsCount: a compacted batch keeps its sequence range.
    compacted = header(sequence=10, count=5)._replace(records_count=2)
    assert last_sequence(compacted) == 14


# Who is checked ----------------------------------------------------------------------


def test_batches_without_a_producer_id_are_never_checked_or_recorded() -> None:
    log = Log()
    for sequence in (-1, 0, 7):
        h = header(producer_id=-1, epoch=-1, sequence=sequence)
        assert log.produce(h) == APPEND
        assert log.produce(h) == APPEND  # the same batch again: still not a duplicate
    assert len(log.state) == 0
    assert log.state.snapshot() == []


@pytest.mark.parametrize("sequence", [0, 1, 42, MAX_SEQUENCE])
def test_an_unknown_producer_may_start_at_any_sequence(sequence: int) -> None:
    # KIP-360 (Kafka 2.5): no UNKNOWN_PRODUCER_ID any more, the state may have expired.
    log = Log()
    log.ok(sequence=sequence, epoch=3)
    assert log.state.producer_ids() == [PID]
    assert log.produce(header(sequence=increment_sequence(sequence, 1), epoch=3)) == APPEND


def test_a_negative_sequence_with_a_producer_id_is_an_invalid_record() -> None:
    log = Log()
    assert log.produce(header(sequence=-1)).error_code == ErrorCode.INVALID_RECORD
    log.ok(sequence=0)
    assert log.produce(header(sequence=-5)).error_code == ErrorCode.INVALID_RECORD
    assert log.end == 1


def test_control_batches_are_not_recorded() -> None:
    state = ProducerStateManager()
    state.replay(header(control=True))
    assert len(state) == 0


# The duplicate / out-of-order / fencing matrix --------------------------------------


def test_in_sequence_batches_are_appended() -> None:
    log = Log()
    assert log.ok(sequence=0, count=3) == 0
    assert log.ok(sequence=3, count=2) == 3
    assert log.ok(sequence=5) == 5
    entry = log.state.entry(PID)
    assert entry is not None
    assert entry.last_sequence == 5 and entry.last_offset == 5 and entry.producer_epoch == 0


def test_a_retry_of_the_last_batch_is_a_duplicate_answered_with_its_offsets() -> None:
    log = Log(end=100)
    log.ok(sequence=0)
    log.ok(sequence=1, count=3, timestamp=2_000)
    decision = log.produce(header(sequence=1, count=3, timestamp=9_999))
    assert decision.error_code == ErrorCode.NONE
    assert decision.is_duplicate and not decision.append
    assert decision.duplicate_of == BatchMetadata(1, 3, 101, 103, 2_000)
    assert log.end == 104, "a duplicate must not be appended"


@pytest.mark.parametrize(
    ("sequence", "count", "expected"),
    [
        (4, 1, APPEND.error_code),  # the next one
        (5, 1, OOO),  # a gap
        (6, 3, OOO),  # a larger gap
        (3, 2, OOO),  # overlaps the last batch, not equal to it
        (1, 1, OOO),  # inside the last batch
        (2, 2, OOO),  # inside the last batch, ending with it
        (0, 2, OOO),  # the first batch's first sequence, with the wrong last sequence
    ],
)
def test_sequence_errors(sequence: int, count: int, expected: ErrorCode) -> None:
    log = Log()
    log.ok(sequence=0, count=1)  # seq 0
    log.ok(sequence=1, count=3)  # seq 1..3
    decision = log.produce(header(sequence=sequence, count=count))
    assert decision.error_code == expected
    assert not decision.is_duplicate
    assert log.end == (5 if expected == ErrorCode.NONE else 4)


def test_an_older_epoch_is_fenced_even_for_a_retry_of_its_own_batch() -> None:
    log = Log()
    log.ok(epoch=0, sequence=0)
    log.ok(epoch=1, sequence=0)
    for sequence in (0, 1, 5):
        decision = log.produce(header(epoch=0, sequence=sequence))
        assert decision.error_code == FENCED, sequence
        assert not decision.is_duplicate


def test_a_new_epoch_must_start_at_sequence_zero() -> None:
    log = Log()
    log.ok(epoch=0, sequence=0, count=5)
    assert log.produce(header(epoch=1, sequence=5)).error_code == OOO
    assert log.produce(header(epoch=1, sequence=1)).error_code == OOO
    # Any higher epoch may start, not only the next one (the client bumps it itself).
    log.ok(epoch=7, sequence=0)
    assert log.state.entry(PID) is not None
    assert log.produce(header(epoch=7, sequence=1)) == APPEND


def test_a_new_epoch_forgets_the_old_epochs_batches() -> None:
    log = Log()
    log.ok(epoch=0, sequence=0)
    log.ok(epoch=1, sequence=0)
    entry = log.state.entry(PID)
    assert entry is not None and [b.first_offset for b in entry.batches] == [1]
    # The new epoch's seq 0 batch is the duplicate now, not the old one at offset 0.
    decision = log.produce(header(epoch=1, sequence=0))
    assert decision.duplicate_of is not None and decision.duplicate_of.first_offset == 1


def test_producers_are_independent() -> None:
    log = Log()
    log.ok(producer_id=1, sequence=0)
    log.ok(producer_id=2, sequence=50)
    log.ok(producer_id=1, sequence=1)
    assert log.produce(header(producer_id=2, sequence=1)).error_code == OOO
    assert log.produce(header(producer_id=2, sequence=50)).duplicate_of == BatchMetadata(
        50, 50, 1, 1, 1_000
    )


# The five-batch window --------------------------------------------------------------


def test_only_the_last_five_batches_are_recognised_as_duplicates() -> None:
    # Kafka's testDuplicateAppends: a retry of a batch older than the last five is
    # OUT_OF_ORDER_SEQUENCE_NUMBER; the broker never answers DUPLICATE_SEQUENCE_NUMBER.
    assert NUM_BATCHES_TO_RETAIN == 5
    log = Log()
    firsts = [log.ok(sequence=2 * i, count=2, timestamp=100 + i) for i in range(6)]
    for i in range(1, 6):
        decision = log.produce(header(sequence=2 * i, count=2))
        assert decision.duplicate_of == BatchMetadata(
            2 * i, 2 * i + 1, firsts[i], firsts[i] + 1, 100 + i
        )
    decision = log.produce(header(sequence=0, count=2))
    assert decision.error_code == OOO
    assert decision.error_code != ErrorCode.DUPLICATE_SEQUENCE_NUMBER
    assert log.end == 12


# Wrap-around ------------------------------------------------------------------------


def test_sequences_wrap_around_from_int32_max_to_zero() -> None:
    log = Log()
    log.ok(sequence=MAX_SEQUENCE - 2, count=2)  # MAX-2 .. MAX-1
    log.ok(sequence=MAX_SEQUENCE, count=3)  # MAX, 0, 1
    entry = log.state.entry(PID)
    assert entry is not None and entry.last_sequence == 1
    assert log.produce(header(sequence=0)).error_code == OOO
    assert log.produce(header(sequence=MAX_SEQUENCE)).error_code == OOO
    dup = log.produce(header(sequence=MAX_SEQUENCE, count=3))
    assert dup.duplicate_of == BatchMetadata(MAX_SEQUENCE, 1, 2, 4, 1_000)
    log.ok(sequence=2)
    log.ok(sequence=3)


def test_after_max_sequence_comes_zero() -> None:
    log = Log()
    log.ok(sequence=MAX_SEQUENCE)
    assert log.produce(header(sequence=1)).error_code == OOO
    log.ok(sequence=0)


# update / replay -------------------------------------------------------------------


def test_update_refuses_offsets_that_do_not_match_the_batch() -> None:
    state = ProducerStateManager()
    with pytest.raises(InvariantError):
        state.update(header(count=3), 10, 11, 0)


def test_replay_takes_offsets_and_timestamp_from_a_real_stored_batch() -> None:
    batch = encode_batch(
        [Record(offset_delta=i, timestamp=5_000 + i, key=None, value=b"v") for i in range(3)],
        base_offset=40,
        producer_id=77,
        producer_epoch=2,
        base_sequence=9,
    )
    state = ProducerStateManager()
    state.replay(validate_batch(batch))
    entry = state.entry(77)
    assert entry is not None
    assert entry.producer_epoch == 2
    assert list(entry.batches) == [BatchMetadata(9, 11, 40, 42, 5_002)]
    assert entry.last_timestamp == 5_002
    # The same bytes as a client sends them (base offset 0) are now a duplicate.
    client = encode_batch(
        [Record(offset_delta=i, timestamp=5_000 + i, key=None, value=b"v") for i in range(3)],
        producer_id=77,
        producer_epoch=2,
        base_sequence=9,
    )
    assert state.check(validate_batch(client)).duplicate_of == BatchMetadata(9, 11, 40, 42, 5_002)


def test_followers_record_duplicates_without_checking() -> None:
    # Kafka's testDuplicateAppendToFollower: replication is trusted, not validated.
    state = ProducerStateManager()
    state.replay(header(sequence=0, count=2, base_offset=0))
    state.replay(header(sequence=0, count=2, base_offset=2))
    state.replay(header(epoch=0, sequence=9, base_offset=4))
    entry = state.entry(PID)
    assert entry is not None and [b.first_offset for b in entry.batches] == [0, 2, 4]


# Truncation ---------------------------------------------------------------------


def test_truncation_drops_batches_at_or_after_the_offset() -> None:
    log = Log()
    log.ok(producer_id=1, sequence=0, timestamp=10)  # 0
    log.ok(producer_id=2, sequence=0, timestamp=11)  # 1
    log.ok(producer_id=1, sequence=1, count=3, timestamp=12)  # 2..4
    log.ok(producer_id=3, sequence=0, timestamp=13)  # 5
    # Offset 3 lies inside producer 1's batch 2..4: the whole batch goes.
    assert log.state.truncate_to(3) == [3]
    one = log.state.entry(1)
    assert one is not None
    assert [b.first_offset for b in one.batches] == [0]
    assert one.last_sequence == 0 and one.last_timestamp == 10
    assert log.state.producer_ids() == [1, 2]
    # Producer 1 goes on from sequence 1, and its retry of the cut batch is appended.
    log.end = 2
    assert log.produce(header(producer_id=1, sequence=2)).error_code == OOO
    log.ok(producer_id=1, sequence=1, count=3)
    # Producer 3 was forgotten: it may start anywhere, like an expired producer.
    log.ok(producer_id=3, sequence=17)


def test_truncation_at_or_past_the_end_changes_nothing() -> None:
    log = Log()
    log.ok(sequence=0, count=2)
    before = log.state.snapshot()
    assert log.state.truncate_to(2) == []
    assert log.state.truncate_to(100) == []
    assert log.state.snapshot() == before


def test_truncate_fully_forgets_everyone() -> None:
    log = Log()
    log.ok(producer_id=1)
    log.ok(producer_id=2)
    log.state.truncate_fully()
    assert len(log.state) == 0
    assert log.state.check(header(producer_id=1, sequence=33)) == APPEND


# Expiry ---------------------------------------------------------------------------


def test_producers_idle_for_the_expiration_time_are_forgotten() -> None:
    assert DEFAULT_PRODUCER_ID_EXPIRATION_MS == 86_400_000
    log = Log()
    log.ok(producer_id=1, timestamp=1_000)
    log.ok(producer_id=2, timestamp=1_500)
    assert log.state.remove_expired(1_000 + 499, 500) == []
    assert log.state.remove_expired(1_000 + 500, 500) == [1]  # Kafka: idle >= expiration
    assert log.state.producer_ids() == [2]
    assert log.state.remove_expired(1_500 + DEFAULT_PRODUCER_ID_EXPIRATION_MS) == [2]
    assert len(log.state) == 0


# Snapshots -----------------------------------------------------------------------


def test_snapshot_keeps_each_producers_last_batch_in_kafkas_fields() -> None:
    log = Log(end=10)
    log.ok(producer_id=5, epoch=2, sequence=0, count=2, timestamp=100)  # 10..11
    log.ok(producer_id=3, epoch=0, sequence=MAX_SEQUENCE, count=3, timestamp=200)  # 12..14
    log.ok(producer_id=5, epoch=2, sequence=2, count=4, timestamp=300)  # 15..18
    assert log.state.snapshot() == [
        SnapshotEntry(3, 0, 1, 14, 2, 200, -1, -1),
        SnapshotEntry(5, 2, 5, 18, 3, 300, -1, -1),
    ]
    restored = ProducerStateManager.from_snapshot(log.state.snapshot())
    assert restored.snapshot() == log.state.snapshot()
    three = restored.entry(3)
    assert three is not None
    assert list(three.batches) == [BatchMetadata(MAX_SEQUENCE, 1, 12, 14, 200)]
    # Only the last batch survives a snapshot: an older retry is out of order.
    restored_log = Log(restored, end=19)
    assert restored_log.produce(header(producer_id=5, epoch=2, sequence=2, count=4)).is_duplicate
    assert (
        restored_log.produce(header(producer_id=5, epoch=2, sequence=0, count=2)).error_code == OOO
    )
    restored_log.ok(producer_id=5, epoch=2, sequence=6)


def test_from_snapshot_accepts_plain_tuples_and_entries_without_a_batch() -> None:
    # Kafka writes last offset -1 for a producer known only by its epoch; the next
    # batch of that epoch must then start at 0.
    state = ProducerStateManager.from_snapshot([(9, 4, -1, -1, 0, 700, 3, -1)])
    entry = state.entry(9)
    assert entry is not None and not entry.batches and entry.producer_epoch == 4
    assert entry.coordinator_epoch == 3
    assert state.check(header(producer_id=9, epoch=4, sequence=1)).error_code == OOO
    assert state.check(header(producer_id=9, epoch=3, sequence=0)).error_code == FENCED
    assert state.check(header(producer_id=9, epoch=4, sequence=0)) == APPEND
    assert state.snapshot() == [SnapshotEntry(9, 4, -1, -1, 0, 700, 3, -1)]
    # Not cut by a truncation: it lost no batch.
    assert state.truncate_to(0) == []


def test_a_producer_without_an_epoch_may_continue_at_any_sequence() -> None:
    # ProducerAppendInfo.checkSequence: with no current epoch (NO_PRODUCER_EPOCH), any
    # sequence is accepted, even from a higher epoch.
    state = ProducerStateManager.from_snapshot([(9, -1, -1, -1, 0, 700, -1, -1)])
    assert state.check(header(producer_id=9, epoch=0, sequence=5)) == APPEND
    assert state.check(header(producer_id=9, epoch=-1, sequence=5)) == APPEND


def test_an_open_transaction_is_never_expired() -> None:
    state = ProducerStateManager.from_snapshot([(9, 0, 4, 50, 0, 1, -1, 50)])
    assert state.remove_expired(10**12, 1) == []


# A model, and Hypothesis ------------------------------------------------------------


@dataclass
class ModelBatch:
    producer_id: int
    epoch: int
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp: int
    evicted: bool = False
    """Out of the producer's window: five newer batches of its epoch came, its epoch
    ended, it expired, or a restart from a snapshot kept only a newer batch."""

    def metadata(self) -> BatchMetadata:
        return BatchMetadata(
            self.first_sequence,
            self.last_sequence,
            self.first_offset,
            self.last_offset,
            self.timestamp,
        )


@dataclass
class Model:
    """The rules stated over the log itself: the batches a producer is remembered by
    are its batches still in the log and not evicted; a producer is known while it has
    one. Truncation removes batches from the log; nothing ever un-evicts one."""

    log: list[ModelBatch] = field(default_factory=list)
    end: int = 0

    def window(self, producer_id: int) -> list[ModelBatch]:
        return [b for b in self.log if b.producer_id == producer_id and not b.evicted]

    def decide(self, h: BatchHeader) -> tuple[ErrorCode, BatchMetadata | None]:
        if h.base_sequence < 0:
            return ErrorCode.INVALID_RECORD, None
        window = self.window(h.producer_id)
        if not window:
            return ErrorCode.NONE, None
        first, last = h.base_sequence, (h.base_sequence + h.last_offset_delta) % 2**31
        current = window[-1].epoch
        if h.producer_epoch == current:
            for b in window:
                if (b.first_sequence, b.last_sequence) == (first, last):
                    return ErrorCode.NONE, b.metadata()
        if h.producer_epoch < current:
            return FENCED, None
        if h.producer_epoch > current:
            return (ErrorCode.NONE if first == 0 else OOO), None
        return (ErrorCode.NONE if first == (window[-1].last_sequence + 1) % 2**31 else OOO), None

    def append(self, h: BatchHeader) -> None:
        for b in self.window(h.producer_id):
            if b.epoch != h.producer_epoch:
                b.evicted = True
        last = self.end + h.last_offset_delta
        self.log.append(
            ModelBatch(
                h.producer_id,
                h.producer_epoch,
                h.base_sequence,
                (h.base_sequence + h.last_offset_delta) % 2**31,
                self.end,
                last,
                h.max_timestamp,
            )
        )
        self.end = last + 1
        window = self.window(h.producer_id)
        if len(window) > 5:
            window[0].evicted = True

    def truncate(self, offset: int) -> None:
        self.log = [b for b in self.log if b.last_offset < offset]
        self.end = offset

    def expire(self, now_ms: int, expiration_ms: int) -> None:
        for producer_id in self.known():
            window = self.window(producer_id)
            if now_ms - window[-1].timestamp >= expiration_ms:
                for b in window:
                    b.evicted = True

    def restart_from_snapshot(self) -> None:
        for producer_id in self.known():
            for b in self.window(producer_id)[:-1]:
                b.evicted = True

    def known(self) -> list[int]:
        return sorted({b.producer_id for b in self.log if not b.evicted})


PRODUCERS = 2
EXPIRATION_MS = 300


class Step(NamedTuple):
    """One step of a random history. ``roll`` picks what happens, with weights that
    keep most steps produce requests; the other fields are its parameters."""

    roll: int
    producer: int
    how: int
    records: int
    back: int
    epoch_change: int
    sequence: int
    elapsed_ms: int

    @property
    def kind(self) -> str:
        if self.roll < 85:
            return "produce"
        if self.roll < 93:
            return "truncate"
        return "expire" if self.roll < 97 else "restart"

    @property
    def produce_kind(self) -> str:
        # Hypothesis shrinks towards 0: towards plain in-order produce requests.
        if self.how < 50:
            return "next"
        if self.how < 85:
            return "retry"
        return "bump" if self.how < 90 else "random"


steps_strategy = st.lists(
    st.builds(
        Step,
        roll=st.integers(0, 99),
        producer=st.integers(0, PRODUCERS - 1),
        how=st.integers(0, 99),
        records=st.integers(1, 3),
        back=st.integers(0, 6),  # how far back a retry goes: 5 and 6 are out of the window
        epoch_change=st.integers(-1, 1),
        sequence=st.sampled_from([-1, 0, 1, 2, 3, 5, 8, MAX_SEQUENCE - 1, MAX_SEQUENCE]),
        elapsed_ms=st.integers(0, 40),
    ),
    min_size=20,
    max_size=100,
)


@dataclass
class Client:
    """What an idempotent producer knows: its epoch, next sequence and sent batches."""

    epoch: int = 0
    next_sequence: int = 0
    sent: list[tuple[int, int, int]] = field(default_factory=list)


def rebuild(model: Model) -> ProducerStateManager:
    """Kafka's exact answer after a truncation: replay the log that is left."""
    state = ProducerStateManager()
    for b in model.log:
        count = b.last_offset - b.first_offset + 1
        state.update(
            header(b.producer_id, b.epoch, b.first_sequence, count, b.first_offset, b.timestamp),
            b.first_offset,
            b.last_offset,
            b.timestamp,
        )
    return state


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([0, MAX_SEQUENCE - 3]), min_size=PRODUCERS, max_size=PRODUCERS),
    steps_strategy,
)
def test_the_state_agrees_with_the_model(starts: list[int], steps: list[Step]) -> None:
    state = ProducerStateManager()
    model = Model()
    clients = [Client(next_sequence=s) for s in starts]
    now = 0
    forgetful = False
    for step in steps:
        kind = step.kind
        if kind == "produce":
            now += step.elapsed_ms
            client = clients[step.producer]
            how = step.produce_kind
            if how == "retry" and not client.sent:
                how = "next"
            if how == "bump":
                client.epoch += 1
                client.next_sequence = 0
            count = step.records
            if how == "retry":
                epoch, sequence, count = client.sent[max(0, len(client.sent) - 1 - step.back)]
            elif how == "random":
                epoch, sequence = max(0, client.epoch + step.epoch_change), step.sequence
            else:
                epoch, sequence = client.epoch, client.next_sequence
            h = header(step.producer, epoch, sequence, count, timestamp=now)
            expected_code, expected_duplicate = model.decide(h)
            decision = state.check(h)
            event(
                f"{how}: {decision.error_code.name}{' duplicate' if decision.is_duplicate else ''}"
            )
            assert (decision.error_code, decision.duplicate_of) == (
                expected_code,
                expected_duplicate,
            ), (step, model.window(step.producer))
            if decision.append:
                state.update(h, model.end, model.end + count - 1, now)
                model.append(h)
                client.sent.append((epoch, sequence, count))
                if (epoch, sequence) == (client.epoch, client.next_sequence):
                    client.next_sequence = increment_sequence(sequence, count)
        elif kind == "truncate":
            offsets = sorted({b.first_offset for b in model.log} | {model.end})
            offset = offsets[(step.producer * 7919 + step.how) % len(offsets)]
            before = set(state.producer_ids())
            forgotten = state.truncate_to(offset)
            event(f"truncation forgot {len(forgotten)} producers")
            model.truncate(offset)
            forgetful = True
            assert set(forgotten) == before - set(state.producer_ids())
            exact = rebuild(model)
            for producer_id in state.producer_ids():
                kept, full = state.entry(producer_id), exact.entry(producer_id)
                assert kept is not None and full is not None
                assert kept.producer_epoch == full.producer_epoch
                assert kept.last_sequence == full.last_sequence
                assert kept.last_timestamp == full.last_timestamp
                cached = list(kept.batches)
                assert cached == list(full.batches)[len(full.batches) - len(cached) :]
        elif kind == "expire":
            now += step.elapsed_ms * 10
            state.remove_expired(now, EXPIRATION_MS)
            model.expire(now, EXPIRATION_MS)
            forgetful = True
        else:
            state = ProducerStateManager.from_snapshot(state.snapshot())
            model.restart_from_snapshot()
        assert state.producer_ids() == model.known()
        if not forgetful:
            # Without truncation or expiry, no batch is ever in the log twice.
            keys = [(b.producer_id, b.epoch, b.first_sequence, b.last_sequence) for b in model.log]
            assert len(keys) == len(set(keys))
