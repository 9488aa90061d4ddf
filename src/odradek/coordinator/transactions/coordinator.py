"""The transaction coordinator of the ``__transaction_state`` partitions this node leads.

:class:`TransactionCoordinatorCore` owns what Kafka's ``TransactionCoordinator`` and
``TransactionStateManager`` keep in memory: which partitions of ``__transaction_state``
it leads (and at which coordinator epoch, or that one is still loading), the metadata of
every transactional id in them, the one pending transition of each, and whose markers
are being written. It takes decoded request fields and the time, and returns the values
of :mod:`.outputs`; the request rules themselves are in :mod:`.rules`, the transitions
in :mod:`.state`, the bytes in :mod:`.records`.

Kafka behaviours kept here:

* a transactional id whose partition is loading answers COORDINATOR_LOAD_IN_PROGRESS,
  one whose partition this node does not lead NOT_COORDINATOR;
* an append that completes after its partition moved answers NOT_COORDINATOR and
  changes nothing; a failed append drops its pending transition (a failed fence keeps
  its epoch in memory), except the completion of a transaction, which is retried while
  the log is unavailable;
* once a PrepareCommit/PrepareAbort record is durable the client has its answer and the
  completion is prepared at once: the transactional id stays busy
  (CONCURRENT_TRANSACTIONS) until the markers are written and the completion is durable;
* loading replays the records (the last value per key wins, a tombstone removes) and
  sends again the markers of every transaction left in PrepareCommit or PrepareAbort;
* a transaction open longer than its ``transaction.timeout.ms`` is fenced and aborted;
  an Empty or completed transactional id not updated for
  ``transactional.id.expiration.ms`` becomes a tombstone.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from odradek.coordinator.transactions.config import TransactionConfig
from odradek.coordinator.transactions.outputs import (
    AppendCause,
    ListedTransaction,
    TransactionDescription,
    TransactionListing,
    TxnActions,
    TxnAppend,
    TxnMarkers,
    TxnResult,
    coordinator_error_for_append,
)
from odradek.coordinator.transactions.records import (
    Record,
    partition_for,
    record_for,
    replay,
    tombstone_for,
)
from odradek.coordinator.transactions.rules import (
    ProducerIdAllocator,
    ProducerIdAndEpoch,
    abort_with_epoch_fence,
    prepare_add_partitions_request,
    prepare_end_txn,
    prepare_init_producer_id,
    verify_partitions,
)
from odradek.coordinator.transactions.state import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TransactionVersion,
    Transition,
    cancel_transition,
    complete_transition,
    new_transaction_metadata,
    prepare_complete,
    prepare_dead,
)
from odradek.core.errors import InvariantError
from odradek.core.invariant import invariant
from odradek.protocol.error_codes import ErrorCode

__all__ = ["OFFSETS_TOPIC", "TransactionCoordinatorCore"]

OFFSETS_TOPIC = "__consumer_offsets"

_S = TransactionState
_PREPARE = (_S.PREPARE_COMMIT, _S.PREPARE_ABORT)
_COMPLETE = (_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)


@dataclass(slots=True)
class _Pending:
    transition: Transition
    append: TxnAppend | None
    """None while the markers of a completion are being written."""


@dataclass(slots=True)
class _TxnPartition:
    """One ``__transaction_state`` partition this node leads (or is loading)."""

    coordinator_epoch: int
    loading: bool
    metadata: dict[str, TransactionMetadata] = field(default_factory=dict)
    pending: dict[str, _Pending] = field(default_factory=dict)


class TransactionCoordinatorCore:
    """Transactional ids of the ``__transaction_state`` partitions this node leads.

    ``allocate_producer_id`` hands out fresh producer ids (None when the node waits for
    its next block). ``transaction_version_level`` is the cluster's finalized
    ``transaction.version``: it chooses the record version and how the coordinator's own
    aborts bump the epoch; the caller updates it when the feature changes.
    """

    def __init__(
        self,
        config: TransactionConfig,
        allocate_producer_id: ProducerIdAllocator,
        transaction_version_level: TransactionVersion = TransactionVersion.TV_2,
    ) -> None:
        self.config = config
        self.transaction_version_level = transaction_version_level
        self._allocate_producer_id = allocate_producer_id
        self._partitions: dict[int, _TxnPartition] = {}

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.transaction_state_log_num_partitions)

    # -----------------------------------------------------------------------------------
    # Leadership of __transaction_state partitions
    # -----------------------------------------------------------------------------------

    def begin_load(self, partition: int, coordinator_epoch: int) -> None:
        """Mark ``partition`` as loading: its transactional ids answer
        COORDINATOR_LOAD_IN_PROGRESS until :meth:`load` (for a caller that reads the
        partition in steps)."""
        self._check_epoch(partition, coordinator_epoch)
        self._partitions[partition] = _TxnPartition(coordinator_epoch, loading=True)

    def load(
        self, partition: int, coordinator_epoch: int, records: Iterable[Record], now_ms: int
    ) -> TxnActions:
        """Become the coordinator of ``partition`` from its records in log order.

        Returns the markers of every transaction left in PrepareCommit or PrepareAbort
        (and the completion of those that have no partitions): their completion is
        prepared now, as Kafka's loader does. A record that does not decode raises
        :class:`~odradek.core.errors.DecodeError` and loads nothing.
        """
        self._check_epoch(partition, coordinator_epoch)
        loaded = replay(records)
        p = _TxnPartition(coordinator_epoch, loading=False, metadata=loaded)
        self._partitions[partition] = p
        appends: list[TxnAppend] = []
        markers: list[TxnMarkers] = []
        for transactional_id in sorted(loaded):
            m = loaded[transactional_id]
            if m.state in _PREPARE:
                follow = self._begin_completion(p, prepare_complete(m, now_ms))
                if isinstance(follow, TxnMarkers):
                    markers.append(follow)
                else:
                    appends.append(follow)
        return TxnActions(tuple(appends), tuple(markers))

    def unload(self, partition: int) -> None:
        """Stop coordinating ``partition``: its metadata, pending transitions and markers
        are forgotten; appends still in flight come back NOT_COORDINATOR."""
        self._partitions.pop(partition, None)

    def _check_epoch(self, partition: int, coordinator_epoch: int) -> None:
        # Each leadership of the partition has a higher epoch: an append of the last one
        # that completes late must not be taken for one of this one.
        current = self._partitions.get(partition)
        invariant(
            current is None
            or coordinator_epoch > current.coordinator_epoch
            or (current.loading and coordinator_epoch == current.coordinator_epoch),
            f"__transaction_state-{partition}: coordinator epoch {coordinator_epoch} after "
            f"{current.coordinator_epoch if current else None}",
        )

    # -----------------------------------------------------------------------------------
    # Requests
    # -----------------------------------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        now_ms: int,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> TxnResult:
        """InitProducerId of a transactional producer (an idempotent one, with no
        transactional id, never reaches the coordinator's state).

        ``producer_id`` and ``producer_epoch`` are the request's (KIP-360): both -1 for a
        new producer, both set for one that recovers; one without the other is
        INVALID_REQUEST, as Kafka's ``KafkaApis`` answers.
        """
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return TxnResult(ErrorCode.INVALID_REQUEST)
        expected = (
            None
            if producer_id == NO_PRODUCER_ID
            else ProducerIdAndEpoch(producer_id, producer_epoch)
        )
        if not transactional_id:
            return TxnResult(ErrorCode.INVALID_REQUEST)
        if not 0 < transaction_timeout_ms <= self.config.transaction_max_timeout_ms:
            return TxnResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        found = self._find(transactional_id)
        if isinstance(found, ErrorCode):
            return TxnResult(found)
        p, m = found
        if m is None:
            new_producer_id = self._allocate_producer_id()
            if new_producer_id is None:
                return TxnResult(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            # Cached before it is written, as Kafka does: a second InitProducerId finds
            # the first one pending, and a failed append leaves an Empty id with epoch -1.
            m = new_transaction_metadata(
                transactional_id, new_producer_id, transaction_timeout_ms, now_ms
            )
            p.metadata[transactional_id] = m
        outcome = prepare_init_producer_id(
            m,
            transaction_timeout_ms,
            expected,
            now_ms,
            self._allocate_producer_id,
            self.transaction_version_level,
        )
        if isinstance(outcome, ErrorCode):
            return TxnResult(outcome)
        return TxnResult(append=self._begin(p, outcome, AppendCause.INIT_PRODUCER_ID))

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
        now_ms: int,
        client_transaction_version: TransactionVersion = TransactionVersion.TV_0,
    ) -> TxnResult:
        """AddPartitionsToTxn (one transaction of it): the one error applies to every
        partition of the request. A transaction version 2 producer's partitions come
        through this too, from the partition leader that receives its first batch."""
        found = self._existing(transactional_id)
        if isinstance(found, ErrorCode):
            return TxnResult(found)
        p, m = found
        outcome = prepare_add_partitions_request(
            m,
            producer_id,
            producer_epoch,
            (TopicPartition(topic, partition) for topic, partition in partitions),
            now_ms,
            client_transaction_version,
        )
        if isinstance(outcome, ErrorCode):
            return TxnResult(outcome)
        return TxnResult(append=self._begin(p, outcome, AppendCause.ADD_PARTITIONS))

    def add_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets_partition: int,
        now_ms: int,
    ) -> TxnResult:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the
        transaction, so that its offset commits get the transaction's marker. Kafka adds
        it as a transaction version 0 AddPartitionsToTxn (the request comes from the
        client in every version)."""
        return self.add_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            [(OFFSETS_TOPIC, offsets_partition)],
            now_ms,
            TransactionVersion.TV_0,
        )

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
    ) -> Mapping[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn with ``verify_only`` (KIP-890 part 1): a partition leader
        asks whether the producer's ongoing transaction includes these partitions before
        it appends a transactional batch. Writes nothing."""
        wanted = [TopicPartition(topic, partition) for topic, partition in partitions]
        if not transactional_id:
            return dict.fromkeys(wanted, ErrorCode.INVALID_REQUEST)
        found = self._find(transactional_id)
        if isinstance(found, ErrorCode):
            return dict.fromkeys(wanted, found)
        return verify_partitions(found[1], producer_id, producer_epoch, wanted)

    def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        now_ms: int,
        client_transaction_version: TransactionVersion = TransactionVersion.TV_0,
    ) -> TxnResult:
        """EndTxn. With transaction version 2 (EndTxn v5+) the answer carries the producer
        id and epoch the client continues with (the bumped epoch, or a new producer id
        at epoch 0); below, -1 and -1."""
        found = self._existing(transactional_id)
        if isinstance(found, ErrorCode):
            return TxnResult(found)
        p, m = found
        outcome = prepare_end_txn(
            m,
            producer_id,
            producer_epoch,
            committed,
            client_transaction_version,
            now_ms,
            self._allocate_producer_id,
        )
        if isinstance(outcome, ErrorCode):
            if outcome == ErrorCode.NONE and client_transaction_version.supports_epoch_bump:
                # A retry of an end that is done: the epoch the client should now have.
                return TxnResult(ErrorCode.NONE, m.producer_id, m.producer_epoch)
            return TxnResult(outcome)
        return TxnResult(append=self._begin(p, outcome, AppendCause.END_TXN))

    # -----------------------------------------------------------------------------------
    # Appends and markers
    # -----------------------------------------------------------------------------------

    def append_completed(self, append: TxnAppend, error: ErrorCode, now_ms: int) -> TxnResult:
        """``append`` is durable (``error`` NONE) or failed with the append's error.

        Returns the answer to the request that waited for it (when its cause
        :attr:`~AppendCause.client_waits`), and what follows: after a PrepareCommit or
        PrepareAbort, the markers to send (or, for a transaction without partitions,
        the append that completes it); after a failed completion that may be retried,
        the same append again.
        """
        p = self._partitions.get(append.partition)
        if p is None or p.loading or p.coordinator_epoch != append.coordinator_epoch:
            # The partition moved while the record was in flight (Kafka compares the
            # coordinator epoch after the append): the new leader owns what it says.
            return TxnResult(ErrorCode.NOT_COORDINATOR)
        tid = append.transactional_id
        pending = p.pending.get(tid)
        if pending is None or pending.append != append:
            raise InvariantError(
                f"{tid}: completion of an append that is not outstanding ({append.cause.name})"
            )
        transition = pending.transition
        invariant(
            p.metadata.get(tid) == transition.current,
            f"{tid}: the cached metadata changed while {transition.target.state.name} was pending",
        )
        reason = coordinator_error_for_append(error)
        if reason != ErrorCode.NONE:
            return self._append_failed(p, pending, reason)
        del p.pending[tid]
        if transition.target.state == _S.DEAD:
            del p.metadata[tid]
            return TxnResult()
        m = complete_transition(transition.current, transition.target)
        p.metadata[tid] = m
        if m.state == _S.EMPTY:
            return TxnResult(ErrorCode.NONE, m.producer_id, m.producer_epoch)
        if m.state not in _PREPARE:
            return TxnResult()
        completion = prepare_complete(m, now_ms)
        follow = self._begin_completion(p, completion)
        markers = follow if isinstance(follow, TxnMarkers) else None
        follow_append = follow if isinstance(follow, TxnAppend) else None
        if append.cause == AppendCause.INIT_PRODUCER_ID:
            # The fence and abort are under way; the producer retries and then gets its
            # epoch (Kafka answers CONCURRENT_TRANSACTIONS once the abort is durable).
            return TxnResult(
                ErrorCode.CONCURRENT_TRANSACTIONS, append=follow_append, markers=markers
            )
        if m.client_transaction_version.supports_epoch_bump:
            # The epoch (or producer id) the transaction completes with, which the client
            # continues with (KIP-890 part 2).
            target = completion.target
            return TxnResult(
                ErrorCode.NONE,
                target.producer_id,
                target.producer_epoch,
                append=follow_append,
                markers=markers,
            )
        return TxnResult(ErrorCode.NONE, append=follow_append, markers=markers)

    def markers_written(self, transactional_id: str, coordinator_epoch: int) -> TxnResult:
        """Every partition of the transaction has its marker: returns the append of
        CompleteCommit/CompleteAbort (answer it with :meth:`append_completed`).

        Markers of an earlier coordinator epoch are answered NOT_COORDINATOR: the
        partition moved, and its new leader sent the markers again.
        """
        found = self._find(transactional_id)
        if isinstance(found, ErrorCode):
            return TxnResult(found)
        p = found[0]
        if p.coordinator_epoch != coordinator_epoch:
            return TxnResult(ErrorCode.NOT_COORDINATOR)
        pending = p.pending.get(transactional_id)
        if (
            pending is None
            or pending.append is not None
            or pending.transition.target.state not in _COMPLETE
        ):
            raise InvariantError(f"{transactional_id}: markers written but none were outstanding")
        pending.append = self._append(
            p, transactional_id, pending.transition, AppendCause.COMPLETE_TRANSACTION
        )
        return TxnResult(append=pending.append)

    def _append_failed(self, p: _TxnPartition, pending: _Pending, error: ErrorCode) -> TxnResult:
        transition = pending.transition
        tid = transition.current.transactional_id
        if transition.target.state in _COMPLETE:
            # The markers are written; only the record is missing. Kafka retries it while
            # the log is unavailable, and leaves it to the next leader (which sends the
            # markers again) when the partition moved.
            if error == ErrorCode.COORDINATOR_NOT_AVAILABLE:
                return TxnResult(error, append=pending.append)
            invariant(
                error in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
                f"{tid}: unexpected {error.name} appending the completion of a transaction",
            )
            return TxnResult(error)
        del p.pending[tid]
        p.metadata[tid] = cancel_transition(transition)
        return TxnResult(error)

    def _begin(self, p: _TxnPartition, transition: Transition, cause: AppendCause) -> TxnAppend:
        """Cache ``transition.current`` (with its pending state) and make its record."""
        tid = transition.current.transactional_id
        invariant(tid not in p.pending, f"{tid}: a second transition while one is pending")
        append = self._append(p, tid, transition, cause)
        p.metadata[tid] = transition.current
        p.pending[tid] = _Pending(transition, append)
        return append

    def _begin_completion(self, p: _TxnPartition, completion: Transition) -> TxnMarkers | TxnAppend:
        """The completion of a prepared transaction waits for its markers; one without
        partitions has none to wait for, and its record is appended at once."""
        m = completion.current
        if not m.topic_partitions:
            return self._begin(p, completion, AppendCause.COMPLETE_TRANSACTION)
        tid = m.transactional_id
        invariant(tid not in p.pending, f"{tid}: a completion while a transition is pending")
        p.metadata[tid] = m
        p.pending[tid] = _Pending(completion, None)
        return TxnMarkers(
            transactional_id=tid,
            producer_id=m.producer_id,
            producer_epoch=m.producer_epoch,
            committed=m.state == _S.PREPARE_COMMIT,
            coordinator_epoch=p.coordinator_epoch,
            partitions=m.topic_partitions,
        )

    def _append(
        self, p: _TxnPartition, tid: str, transition: Transition, cause: AppendCause
    ) -> TxnAppend:
        target = transition.target
        key, value = (
            tombstone_for(tid)
            if target.state == _S.DEAD
            else record_for(target, self.transaction_version_level)
        )
        return TxnAppend(tid, self.partition_for(tid), p.coordinator_epoch, key, value, cause)

    # -----------------------------------------------------------------------------------
    # Timers
    # -----------------------------------------------------------------------------------

    def abort_timed_out_transactions(self, now_ms: int) -> TxnActions:
        """Fence and abort every ongoing transaction older than its timeout (Kafka runs
        this every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``)."""
        appends = []
        for p in self._loaded():
            for tid in sorted(p.metadata):
                m = p.metadata[tid]
                if (
                    m.state == _S.ONGOING
                    and not m.pending_transition_in_progress
                    and m.txn_start_timestamp_ms + m.txn_timeout_ms < now_ms
                ):
                    transition = abort_with_epoch_fence(m, self.transaction_version_level, now_ms)
                    appends.append(self._begin(p, transition, AppendCause.ABORT_TIMED_OUT))
        return TxnActions(tuple(appends))

    def expire_transactional_ids(self, now_ms: int) -> TxnActions:
        """Tombstones for transactional ids idle (Empty or completed, nothing pending)
        since ``transactional.id.expiration.ms`` (Kafka runs this every
        ``transaction.remove.expired.transaction.cleanup.interval.ms``)."""
        horizon = now_ms - self.config.transactional_id_expiration_ms
        appends = []
        for p in self._loaded():
            for tid in sorted(p.metadata):
                m = p.metadata[tid]
                if (
                    m.state.expiration_allowed
                    and not m.pending_transition_in_progress
                    and m.txn_last_update_timestamp_ms <= horizon
                ):
                    appends.append(
                        self._begin(p, prepare_dead(m), AppendCause.EXPIRE_TRANSACTIONAL_ID)
                    )
        return TxnActions(tuple(appends))

    # -----------------------------------------------------------------------------------
    # DescribeTransactions, ListTransactions
    # -----------------------------------------------------------------------------------

    def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        if not transactional_id:
            return TransactionDescription(transactional_id, ErrorCode.INVALID_REQUEST)
        found = self._find(transactional_id)
        if isinstance(found, ErrorCode):
            return TransactionDescription(transactional_id, found)
        m = found[1]
        if m is None:
            return TransactionDescription(transactional_id, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        topics: dict[str, list[int]] = {}
        for topic, partition in sorted(m.topic_partitions):
            topics.setdefault(topic, []).append(partition)
        return TransactionDescription(
            transactional_id,
            ErrorCode.NONE,
            state=m.state.kafka_name,
            producer_id=m.producer_id,
            producer_epoch=m.producer_epoch,
            transaction_timeout_ms=m.txn_timeout_ms,
            transaction_start_time_ms=m.txn_start_timestamp_ms,
            topics={topic: tuple(ids) for topic, ids in topics.items()},
        )

    def list_transactions(
        self,
        state_filters: Iterable[str],
        producer_id_filters: Iterable[int],
        duration_filter_ms: int,
        now_ms: int,
    ) -> TransactionListing:
        """ListTransactions of this coordinator: every filter that is given must match.
        ``duration_filter_ms`` (KIP-994; -1 for none) keeps the transactions that started
        more than that long ago. Unknown state names are reported, not matched."""
        if any(p.loading for p in self._partitions.values()):
            return TransactionListing(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        states: set[TransactionState] = set()
        unknown: list[str] = []
        for name in state_filters:
            state = TransactionState.from_kafka_name(name)
            if state is None:
                unknown.append(name)
            else:
                states.add(state)
        producer_ids = set(producer_id_filters)
        listed = []
        for p in self._loaded():
            for m in p.metadata.values():
                if producer_ids and m.producer_id not in producer_ids:
                    continue
                if states and m.state not in states:
                    continue
                if (
                    duration_filter_ms >= 0
                    and now_ms - m.txn_start_timestamp_ms <= duration_filter_ms
                ):
                    continue
                listed.append(
                    ListedTransaction(m.transactional_id, m.producer_id, m.state.kafka_name)
                )
        listed.sort(key=lambda t: t.transactional_id)
        return TransactionListing(ErrorCode.NONE, tuple(unknown), tuple(listed))

    # -----------------------------------------------------------------------------------
    # Lookups
    # -----------------------------------------------------------------------------------

    def metadata(self, transactional_id: str) -> TransactionMetadata | None:
        """The cached metadata of ``transactional_id`` (with its pending state), if this
        node has loaded its partition."""
        found = self._find(transactional_id)
        return None if isinstance(found, ErrorCode) else found[1]

    def transactional_ids(self) -> list[str]:
        """Every transactional id of the loaded partitions, sorted."""
        return sorted(tid for p in self._loaded() for tid in p.metadata)

    def _loaded(self) -> Iterator[_TxnPartition]:
        for partition in sorted(self._partitions):
            p = self._partitions[partition]
            if not p.loading:
                yield p

    def _existing(
        self, transactional_id: str
    ) -> tuple[_TxnPartition, TransactionMetadata] | ErrorCode:
        """:meth:`_find` for a request about a transactional id that must be known: an
        empty one is INVALID_REQUEST, one this coordinator does not know
        INVALID_PRODUCER_ID_MAPPING, as Kafka answers them."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        found = self._find(transactional_id)
        if isinstance(found, ErrorCode):
            return found
        p, m = found
        if m is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        return p, m

    def _find(
        self, transactional_id: str
    ) -> tuple[_TxnPartition, TransactionMetadata | None] | ErrorCode:
        """Kafka's ``getTransactionState``: the partition's errors, else the metadata."""
        p = self._partitions.get(self.partition_for(transactional_id))
        if p is None:
            return ErrorCode.NOT_COORDINATOR
        if p.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return p, p.metadata.get(transactional_id)
