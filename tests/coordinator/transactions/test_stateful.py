"""Random sequences of transactional requests, appends, markers, timers and crashes.

A Hypothesis state machine drives one :class:`TransactionCoordinatorCore` that leads both
partitions of a two-partition ``__transaction_state``, the way a shell would: it appends
the records the core asks for (durably, or failing), writes the markers, moves the clock,
runs the timeout and expiration timers, and crashes: everything in flight is lost and a
fresh core loads the partitions from the records appended so far.

Clients are sloppy on purpose: they mix transaction versions, retry, and send stale
producer ids and epochs. After every step the machine checks what Kafka clients rely on:

* a producer id's epoch never goes down, and never below an epoch a client was given;
* a transaction ends (CompleteCommit/CompleteAbort) before the next one begins: the
  durable states of each transactional id follow Kafka's transitions;
* the live metadata agrees with the log, except while a transition is pending (and a
  fence whose append failed): so reloading gives the same metadata as the live core;
* a transaction in PrepareCommit/PrepareAbort always has its markers outstanding (or its
  completion being appended), before and after a crash;
* at most one append is outstanding per transactional id, and a partition leader's
  verification only passes partitions of the ongoing transaction.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from odradek.coordinator.transactions import (
    AppendCause,
    TransactionConfig,
    TransactionCoordinatorCore,
    TransactionMetadata,
    TransactionState,
    TransactionVersion,
    TxnActions,
    TxnAppend,
    TxnMarkers,
    TxnResult,
)
from odradek.coordinator.transactions.records import (
    Record,
    TxnRecord,
    TxnTombstone,
    read_record,
    record_for,
    replay,
    value_version_for,
)
from odradek.coordinator.transactions.state import SHORT_MAX
from odradek.protocol.error_codes import ErrorCode

from .harness import ProducerIds

S = TransactionState
TV = TransactionVersion
TIDS = ("a", "b", "c")  # "a" and "c" in partition 1, "b" in partition 0
TOPIC_PARTITIONS = [("t", 0), ("t", 1), ("u", 0)]
PARTITIONS = 2
EXPIRATION_MS = 200_000
FAILURES = [ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT]
# The durable state a record may follow, per state (None: no record, or a tombstone).
ALLOWED_AFTER: dict[TransactionState | None, set[TransactionState | None]] = {
    S.EMPTY: {None, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {None, S.EMPTY, S.ONGOING, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    None: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
}


def persisted(m: TransactionMetadata, level: TransactionVersion) -> TransactionMetadata:
    """What a record keeps of ``m``: never the last epoch or the pending state, and no
    tagged field in a version 0 value."""
    m = replace(m, last_producer_epoch=-1, pending_state=None, has_failed_epoch_fence=False)
    if value_version_for(level) == 0:
        m = replace(
            m,
            previous_producer_id=-1,
            next_producer_id=-1,
            client_transaction_version=TV.TV_0,
        )
    return m


class TransactionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now_ms = 1_000
        self.coordinator_epoch = 1
        self.level = TV.TV_2
        self.ids = ProducerIds()
        self.log: dict[int, list[Record]] = {p: [] for p in range(PARTITIONS)}
        self.core = self.fresh_core()
        self.outstanding: list[TxnAppend] = []
        self.markers: dict[str, TxnMarkers] = {}
        self.known: dict[str, tuple[int, int]] = {}
        self.handed_out: dict[tuple[str, int], int] = {}
        self.live_epochs: dict[tuple[str, int], int] = {}
        self.durable_epochs: dict[int, int] = {}
        self.durable_state: dict[str, TransactionState | None] = {}

    def fresh_core(self) -> TransactionCoordinatorCore:
        config = TransactionConfig(PARTITIONS, 900_000, EXPIRATION_MS)
        return TransactionCoordinatorCore(config, self.ids, self.level)

    # -- setup ---------------------------------------------------------------------------

    @initialize(
        level=st.sampled_from(list(TV)),
        start_epoch=st.sampled_from([None, SHORT_MAX - 3, SHORT_MAX - 1]),
    )
    def start(self, level: TransactionVersion, start_epoch: int | None) -> None:
        self.level = level
        if start_epoch is not None:
            # Ids whose epochs are nearly exhausted, as a long-lived producer's would be.
            for i, tid in enumerate(TIDS):
                m = TransactionMetadata(
                    transactional_id=tid,
                    producer_id=10 + i,
                    previous_producer_id=10 + i,
                    next_producer_id=-1,
                    producer_epoch=start_epoch,
                    last_producer_epoch=-1,
                    txn_timeout_ms=60_000,
                    state=S.COMPLETE_COMMIT,
                    topic_partitions=frozenset(),
                    txn_start_timestamp_ms=500,
                    txn_last_update_timestamp_ms=900,
                    client_transaction_version=TV.TV_2 if level >= TV.TV_2 else TV.TV_0,
                )
                self.log[self.core.partition_for(tid)].append(record_for(m, level))
                self.durable_state[tid] = m.state
                self.durable_epochs[m.producer_id] = m.producer_epoch
                self.known[tid] = (10 + i, start_epoch)
        self.reload()

    # -- helpers -------------------------------------------------------------------------

    def tick(self) -> int:
        self.now_ms += 1
        return self.now_ms

    def client_version(self, data: st.DataObject) -> TransactionVersion:
        if self.level < TV.TV_2:
            return TV.TV_0
        return data.draw(st.sampled_from([TV.TV_0, TV.TV_2]), label="client version")

    def producer(self, data: st.DataObject, tid: str) -> tuple[int, int]:
        """The client's producer id and epoch, or a stale or wrong one."""
        producer_id, epoch = self.known.get(tid, (1000, 0))
        how = data.draw(st.sampled_from(["known"] * 6 + ["stale", "other"]), label="producer")
        if how == "stale":
            return producer_id, max(epoch - 1, 0)
        if how == "other":
            return producer_id + 1, epoch
        return producer_id, epoch

    def record_durable(self, partition: int, record: Record) -> None:
        """A record reached the log: check it against the transactional id's history."""
        self.log[partition].append(record)
        result = read_record(*record)
        if isinstance(result, TxnTombstone):
            previous = self.durable_state.get(result.transactional_id)
            assert previous in ALLOWED_AFTER[None], (result, previous)
            self.durable_state[result.transactional_id] = None
            return
        assert isinstance(result, TxnRecord)
        m = result.metadata
        previous = self.durable_state.get(m.transactional_id)
        assert previous in ALLOWED_AFTER[m.state], (m, previous)
        self.durable_state[m.transactional_id] = m.state
        assert m.producer_epoch >= self.durable_epochs.get(m.producer_id, -1), m
        self.durable_epochs[m.producer_id] = m.producer_epoch

    def answered(self, tid: str, result: TxnResult) -> None:
        """A client got ``result``: remember the producer id and epoch it continues with."""
        if result.error == ErrorCode.NONE and result.producer_id != -1:
            m = self.core.metadata(tid)
            assert m is not None
            expected = (m.producer_id, m.producer_epoch)
            if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and m.next_producer_id != -1:
                # A version 2 end that took the last epoch: the client continues under the
                # producer id the completion rotates to.
                expected = (m.next_producer_id, 0)
            assert (result.producer_id, result.producer_epoch) == expected, (m, result)
            self.known[tid] = (result.producer_id, result.producer_epoch)
            key = (tid, result.producer_id)
            self.handed_out[key] = max(self.handed_out.get(key, -1), result.producer_epoch)

    def follow(self, tid: str, result: TxnResult, *, answer: bool) -> None:
        """Take in what a result asks for; ``answer`` when it answers a client now."""
        if result.append is not None:
            assert result.append.transactional_id == tid
            assert all(a.transactional_id != tid for a in self.outstanding), (
                "two appends outstanding for one transactional id"
            )
            self.outstanding.append(result.append)
        if result.markers is not None:
            assert tid not in self.markers
            self.markers[tid] = result.markers
        if answer:
            self.answered(tid, result)

    def request(self, tid: str, result: TxnResult) -> None:
        # A result with an append answers later, from append_completed.
        self.follow(tid, result, answer=result.append is None)

    def take(self, actions: TxnActions) -> None:
        for append in actions.appends:
            self.follow(append.transactional_id, TxnResult(append=append), answer=False)
        for markers in actions.markers:
            self.follow(markers.transactional_id, TxnResult(markers=markers), answer=False)

    def reload(self) -> None:
        self.coordinator_epoch += 1
        self.outstanding.clear()
        self.markers.clear()
        self.live_epochs.clear()
        self.core = self.fresh_core()
        for partition in range(PARTITIONS):
            self.take(
                self.core.load(partition, self.coordinator_epoch, self.log[partition], self.tick())
            )

    # -- requests ------------------------------------------------------------------------

    @rule(data=st.data(), tid=st.sampled_from(TIDS), recovering=st.booleans())
    def init_producer_id(self, data: st.DataObject, tid: str, recovering: bool) -> None:
        timeout_ms = data.draw(st.sampled_from([1_000, 60_000]))
        producer_id, epoch = self.producer(data, tid) if recovering else (-1, -1)
        result = self.core.init_producer_id(tid, timeout_ms, self.tick(), producer_id, epoch)
        self.request(tid, result)

    @rule(
        data=st.data(),
        tid=st.sampled_from(TIDS),
        partitions=st.lists(st.sampled_from(TOPIC_PARTITIONS), min_size=1, max_size=2),
    )
    def add_partitions(
        self, data: st.DataObject, tid: str, partitions: list[tuple[str, int]]
    ) -> None:
        producer_id, epoch = self.producer(data, tid)
        version = self.client_version(data)
        result = self.core.add_partitions(tid, producer_id, epoch, partitions, self.tick(), version)
        self.request(tid, result)

    @rule(data=st.data(), tid=st.sampled_from(TIDS), offsets_partition=st.integers(0, 2))
    def add_offsets(self, data: st.DataObject, tid: str, offsets_partition: int) -> None:
        producer_id, epoch = self.producer(data, tid)
        result = self.core.add_offsets(tid, producer_id, epoch, offsets_partition, self.tick())
        self.request(tid, result)

    @rule(data=st.data(), tid=st.sampled_from(TIDS), committed=st.booleans())
    def end_txn(self, data: st.DataObject, tid: str, committed: bool) -> None:
        producer_id, epoch = self.producer(data, tid)
        version = self.client_version(data)
        result = self.core.end_txn(tid, producer_id, epoch, committed, self.tick(), version)
        self.request(tid, result)

    @rule(data=st.data(), tid=st.sampled_from(TIDS))
    def verify_partitions(self, data: st.DataObject, tid: str) -> None:
        producer_id, epoch = self.producer(data, tid)
        answers = self.core.verify_partitions(tid, producer_id, epoch, TOPIC_PARTITIONS)
        m = self.core.metadata(tid)
        for tp, error in answers.items():
            if error == ErrorCode.NONE:
                assert m is not None and m.state == S.ONGOING and tp in m.topic_partitions
                assert (m.producer_id, m.producer_epoch) == (producer_id, epoch)

    # -- the shell's side ----------------------------------------------------------------

    def complete(self, append: TxnAppend, error: ErrorCode) -> None:
        self.outstanding.remove(append)
        if error == ErrorCode.NONE:
            self.record_durable(append.partition, (append.key, append.value))
        result = self.core.append_completed(append, error, self.tick())
        self.follow(append.transactional_id, result, answer=append.cause.client_waits)

    def markers_written(self, tid: str) -> None:
        markers = self.markers.pop(tid)
        result = self.core.markers_written(tid, markers.coordinator_epoch)
        assert result.append is not None
        assert result.append.cause == AppendCause.COMPLETE_TRANSACTION
        self.follow(tid, result, answer=False)

    @precondition(lambda self: bool(self.outstanding))
    @rule(data=st.data(), fails=st.integers(0, 5))
    def complete_append(self, data: st.DataObject, fails: int) -> None:
        append = data.draw(st.sampled_from(self.outstanding), label="append")
        error = data.draw(st.sampled_from(FAILURES)) if fails == 0 else ErrorCode.NONE
        self.complete(append, error)

    @precondition(lambda self: bool(self.markers))
    @rule(data=st.data())
    def write_markers(self, data: st.DataObject) -> None:
        self.markers_written(data.draw(st.sampled_from(sorted(self.markers)), label="markers"))

    @precondition(lambda self: bool(self.outstanding or self.markers))
    @rule()
    def catch_up(self) -> None:
        """The shell catches up: every append durable, every marker written."""
        while self.outstanding or self.markers:
            if self.outstanding:
                self.complete(self.outstanding[0], ErrorCode.NONE)
            else:
                self.markers_written(sorted(self.markers)[0])

    @rule(ms=st.sampled_from([1, 500, 30_000, 70_000, 250_000]))
    def advance_clock(self, ms: int) -> None:
        self.now_ms += ms

    @rule()
    def abort_timed_out_transactions(self) -> None:
        self.take(self.core.abort_timed_out_transactions(self.tick()))

    @rule()
    def expire_transactional_ids(self) -> None:
        self.take(self.core.expire_transactional_ids(self.tick()))

    @rule()
    def toggle_producer_ids(self) -> None:
        self.ids.available = not self.ids.available

    @rule()
    def crash_and_reload(self) -> None:
        # What the live core knows that the log must give back: every id with nothing in
        # flight (a pending transition, or a fence whose append failed, is lost).
        expected = {
            tid: persisted(m, self.level)
            for tid in self.core.transactional_ids()
            if (m := self.core.metadata(tid)) is not None
            and m.pending_state is None
            and not m.has_failed_epoch_fence
            and m.producer_epoch != -1
        }
        self.reload()
        for tid, m in expected.items():
            loaded = self.core.metadata(tid)
            assert loaded is not None and persisted(loaded, self.level) == m, (tid, loaded, m)

    # -- invariants ----------------------------------------------------------------------

    def is_fence_in_flight(self, tid: str) -> bool:
        for append in self.outstanding:
            if append.transactional_id != tid:
                continue
            if append.cause == AppendCause.ABORT_TIMED_OUT:
                return True
            if append.cause == AppendCause.INIT_PRODUCER_ID:
                result = read_record(append.key, append.value)
                return isinstance(result, TxnRecord) and result.metadata.state == S.PREPARE_ABORT
        return False

    @invariant()
    def epochs_never_go_down(self) -> None:
        for tid in self.core.transactional_ids():
            m = self.core.metadata(tid)
            assert m is not None
            key = (tid, m.producer_id)
            assert m.producer_epoch >= self.live_epochs.get(key, -1), (m, self.live_epochs)
            assert m.producer_epoch >= self.handed_out.get(key, -1), (m, self.handed_out)
            if m.producer_epoch != -1:
                assert m.producer_epoch >= self.durable_epochs.get(m.producer_id, -1), m
            self.live_epochs[key] = m.producer_epoch

    @invariant()
    def live_metadata_agrees_with_the_log(self) -> None:
        live = set(self.core.transactional_ids())
        for partition in range(PARTITIONS):
            durable = replay(self.log[partition])
            assert set(durable) <= live, (durable, live)
            for tid in sorted(live):
                if self.core.partition_for(tid) != partition:
                    continue
                m = self.core.metadata(tid)
                assert m is not None
                if m.has_failed_epoch_fence or self.is_fence_in_flight(tid):
                    continue
                if tid in durable:
                    assert persisted(m, self.level) == durable[tid], (m, durable[tid])
                else:
                    assert m.producer_epoch == -1, m  # created, never written

    @invariant()
    def prepared_transactions_have_markers_outstanding(self) -> None:
        for tid in self.core.transactional_ids():
            m = self.core.metadata(tid)
            assert m is not None
            if m.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                assert tid not in self.markers
                continue
            completes = S.COMPLETE_COMMIT if m.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
            assert m.pending_state == completes, m
            markers = self.markers.get(tid)
            if markers is None:
                assert any(
                    a.transactional_id == tid and a.cause == AppendCause.COMPLETE_TRANSACTION
                    for a in self.outstanding
                ), (m, self.outstanding)
                continue
            assert markers.producer_id == m.producer_id
            assert markers.producer_epoch == m.producer_epoch
            assert markers.committed == (m.state == S.PREPARE_COMMIT)
            assert markers.partitions == m.topic_partitions and markers.partitions
            assert markers.coordinator_epoch == self.coordinator_epoch


TransactionMachine.TestCase.settings = settings(
    max_examples=400,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_transaction_coordinator = TransactionMachine.TestCase
