"""The idempotent producers of one partition: Kafka's ``ProducerStateManager``, pure.

This module owns the rules that make a retried produce request harmless (KIP-98
idempotence, without transactions): for every producer id that wrote to the partition it
remembers the producer epoch and the last five batches (sequence range, offsets,
timestamp), and from that decides, before an append, whether a batch is new, a
duplicate of one already in the log, or out of order. It holds no bytes, does no I/O
and reads no clock: the broker passes in batch headers, offsets and times.

How the broker uses it, per partition (one instance per partition replica):

* Leader, before appending a produced batch: ``decision = state.check(header)``.

  - ``decision.append``: append the batch, then at once (before waiting for acks or
    an fsync, as Kafka does) ``state.update(header, first_offset, last_offset,
    max_timestamp)`` with the offsets the log gave the batch.
  - ``decision.is_duplicate``: do not append; answer with no error and base offset
    ``decision.duplicate_of.first_offset`` (Kafka also reports the cached
    ``timestamp`` as the log append time). With acks=all the answer still waits for
    the high watermark to pass ``decision.duplicate_of.last_offset``.
  - otherwise: answer the partition with ``decision.error_code``, append nothing.

* Follower appends and replay of the log tail: ``state.replay(header)`` for each stored
  batch, no check. Kafka does not validate replicated batches either: the leader did.
* Log truncation (a follower diverging from its leader): ``state.truncate_to(offset)``
  with the new log end offset; :meth:`ProducerStateManager.truncate_to` says what it
  keeps and when a rebuild from a snapshot is the exact answer.
  ``truncate_fully()`` when the whole log goes.
* A timer (Kafka's ``producer.id.expiration.check.interval.ms``, 10 minutes):
  ``state.remove_expired(now_ms, producer_id_expiration_ms)``.
* Persistence: ``state.snapshot()`` gives Kafka's snapshot entries, which
  ``odradek.storage.producer_snapshot.write_snapshot`` takes as they are (Kafka writes
  one at each segment roll and at a clean shutdown, named for the log end). On restart:
  delete the snapshots above the log end (they describe a history that was truncated
  away), ``ProducerStateManager.from_snapshot(entries)`` with the latest one at or
  below it, ``replay`` every batch from its offset (or the log start) to the log end,
  then ``remove_expired(now_ms, ...)``, as Kafka's loading does.

Kafka behaviours kept here, as of Kafka 3.x/4.x (``ProducerAppendInfo``,
``ProducerStateEntry``, ``UnifiedLog.analyzeAndValidateProducerState``):

* Batches without a producer id (``producerId == -1``) are never checked or recorded.
* A batch whose epoch and first and last sequence equal one of the producer's last five
  batches is a duplicate, answered with the original's offsets. A retry of an older
  batch is no longer recognised and gets OUT_OF_ORDER_SEQUENCE_NUMBER, never
  DUPLICATE_SEQUENCE_NUMBER (what Kafka's own ``testDuplicateAppends`` expects).
* An epoch below the producer's current one: INVALID_PRODUCER_EPOCH (Kafka 2.7 replaced
  PRODUCER_FENCED with it on the produce path).
* A higher epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER.
* In the same epoch the first sequence must follow the last one, wrapping from
  ``2**31 - 1`` to 0; anything else (a gap, a partial overlap, an old batch) is
  OUT_OF_ORDER_SEQUENCE_NUMBER.
* A producer the partition has no state for may start at any sequence. Older brokers
  answered UNKNOWN_PRODUCER_ID (or OUT_OF_ORDER_SEQUENCE_NUMBER) for a non-zero one;
  since KIP-360 (Kafka 2.5) ``checkSequence`` accepts it, because retention or expiry
  legitimately forgets producers that are still alive. (Only a transactions-v2
  producer being verified must start at 0; transactions are not supported here.)
* A negative base sequence with a producer id is INVALID_RECORD (``LogValidator``);
  checked here so that the produce path cannot forget it.
* A snapshot entry keeps only the producer's last batch, as Kafka's file format does,
  so after a restart only that batch (plus those replayed from the log tail) is
  recognised as a duplicate.

Transactions (KIP-98), the partition's side: a producer's first transactional batch
opens its transaction at that batch's first offset, and the COMMIT or ABORT marker its
coordinator has the leader write closes it (:meth:`ProducerStateManager.complete`, which
also takes markers replayed from the log or fetched from the leader). From the open
transactions, and the closed ones whose marker is not yet below the high watermark,
comes the first unstable offset, and from it the last stable offset (LSO) that
read_committed consumers read up to (:meth:`ProducerStateManager.last_stable_offset`).
An aborted transaction's :class:`CompletedTxn` carries what the partition's transaction
index stores for it (Kafka's ``AbortedTxn``). Kafka's rules kept here
(``ProducerAppendInfo``, ``ProducerStateManager``):

* A non-transactional batch from a producer with a transaction open is
  INVALID_TXN_STATE.
* A marker with an epoch below the producer's is INVALID_PRODUCER_EPOCH; one from a
  coordinator epoch below the last marker's is TRANSACTION_COORDINATOR_FENCED
  (:meth:`ProducerStateManager.check_marker`; markers replayed or replicated are not
  checked). A marker sets the producer's epoch and coordinator epoch.
* A marker for a producer with no transaction open closes an empty one at the marker's
  own offset (an abort of it still goes into the transaction index).
* A producer with a transaction open is never expired, and its transaction's first
  offset is kept in snapshots (``current_txn_first_offset``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import NamedTuple

from odradek.core.invariant import invariant
from odradek.protocol.control_batch import EndTxnMarker
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.record_batch import (
    BatchHeader,
)

__all__ = [
    "APPEND",
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "MAX_SEQUENCE",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NUM_BATCHES_TO_RETAIN",
    "BatchMetadata",
    "CompletedTxn",
    "Decision",
    "ProducerStateEntry",
    "ProducerStateManager",
    "SnapshotEntry",
    "SnapshotFields",
    "decrement_sequence",
    "increment_sequence",
    "last_sequence",
]

NUM_BATCHES_TO_RETAIN = 5
"""Batches remembered per producer: the Java client's max.in.flight.requests.per.connection
limit for idempotence, so any batch a client can still be retrying is among them."""

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
MAX_SEQUENCE = 2**31 - 1
"""Sequence numbers are non-negative int32 values; the one after this is 0."""

DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
"""Kafka's ``producer.id.expiration.ms`` default: one day."""

_SEQUENCE_SPACE = MAX_SEQUENCE + 1
UNBOUNDED = 2**63
"""Above every offset."""


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment``, wrapping past :data:`MAX_SEQUENCE` to 0 (Kafka's
    ``DefaultRecordBatch.incrementSequence``)."""
    return (sequence + increment) % _SEQUENCE_SPACE


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement``, wrapping below 0 to :data:`MAX_SEQUENCE`."""
    return (sequence - decrement) % _SEQUENCE_SPACE


def last_sequence(header: BatchHeader) -> int:
    """The sequence number of the batch's last record.

    Kafka derives it from lastOffsetDelta, not from recordsCount, so a compacted batch
    keeps the sequence range it was produced with.
    """
    return increment_sequence(header.base_sequence, header.last_offset_delta)


class BatchMetadata(NamedTuple):
    """One appended batch of a producer, as far as duplicate detection needs it."""

    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp: int
    """The batch's max timestamp as stored (the append time on LogAppendTime topics)."""


class Decision(NamedTuple):
    """What :meth:`ProducerStateManager.check` says about a batch before it is appended.

    Exactly one of three shapes:

    * append: ``error_code`` NONE, ``duplicate_of`` None (see :data:`APPEND`);
    * duplicate: ``error_code`` NONE, ``duplicate_of`` the batch already in the log;
    * refusal: ``error_code`` a Kafka error, ``message`` saying why (for the
      ProduceResponse's error message and the log).
    """

    error_code: ErrorCode
    duplicate_of: BatchMetadata | None = None
    message: str = ""

    @property
    def append(self) -> bool:
        return self.error_code == ErrorCode.NONE and self.duplicate_of is None

    @property
    def is_duplicate(self) -> bool:
        return self.duplicate_of is not None


APPEND = Decision(ErrorCode.NONE)


class SnapshotEntry(NamedTuple):
    """One producer in Kafka's snapshot layout, fields in the file's order.

    ``odradek.storage.producer_snapshot`` has a tuple of the same shape; both sides take
    any tuple of these eight ints, so the broker passes entries across unchanged.
    """

    producer_id: int
    producer_epoch: int
    last_sequence: int
    """NO_SEQUENCE (-1) when the producer has no batch."""
    last_offset: int
    """-1 when the producer has no batch."""
    offset_delta: int
    """last_offset - first_offset of the last batch; 0 when there is none."""
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int
    """-1: no transaction open."""


SnapshotFields = tuple[int, int, int, int, int, int, int, int]
"""A :class:`SnapshotEntry` or any tuple of the same eight ints."""


class CompletedTxn(NamedTuple):
    """A transaction a marker closed on this partition (Kafka's ``CompletedTxn``)."""

    producer_id: int
    first_offset: int
    """Its first batch's first offset (the marker's own offset when it had none here)."""
    last_offset: int
    """The marker's offset."""
    is_aborted: bool
    last_stable_offset: int
    """For the transaction index: the first offset of another producer's transaction
    still open when this one closed, else ``last_offset + 1`` (Kafka's
    ``lastStableOffset(completedTxn)``): a read_committed reader that has passed it
    needs this entry no more."""


def _close(
    ongoing: dict[int, int], producer_id: int, first: int | None, offset: int, committed: bool
) -> CompletedTxn:
    """Close ``producer_id``'s transaction, open at ``first`` in ``ongoing`` (None: none
    open), with its marker at ``offset``. A producer has one transaction open at most, so
    what stays in ``ongoing`` is other producers': the earliest of them is the index
    entry's last stable offset."""
    if first is None:
        first = offset
    else:
        del ongoing[first]
    return CompletedTxn(producer_id, first, offset, not committed, min(ongoing, default=offset + 1))


class ProducerStateEntry:
    """The state of one producer id on this partition (Kafka's ``ProducerStateEntry``).

    ``batches`` holds at most :data:`NUM_BATCHES_TO_RETAIN` batches of the current
    epoch, oldest first; an epoch change forgets the older epoch's batches.
    """

    __slots__ = (
        "batches",
        "coordinator_epoch",
        "current_txn_first_offset",
        "last_timestamp",
        "producer_epoch",
        "producer_id",
    )

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        last_timestamp: int = -1,
        coordinator_epoch: int = -1,
        current_txn_first_offset: int = -1,
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
        self.last_timestamp = last_timestamp
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = current_txn_first_offset

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(producer_id={self.producer_id}, "
            f"producer_epoch={self.producer_epoch}, batches={list(self.batches)}, "
            f"last_timestamp={self.last_timestamp})"
        )


class ProducerStateManager:
    """Every idempotent producer's state on one partition replica; see the module doc."""

    __slots__ = ("_ongoing", "_producers", "_unreplicated")

    def __init__(self) -> None:
        self._producers: dict[int, ProducerStateEntry] = {}
        self._ongoing: dict[int, int] = {}
        """Open transactions: first offset -> producer id."""
        self._unreplicated: dict[int, CompletedTxn] = {}
        """Closed transactions whose marker is not yet below the high watermark, by
        first offset: until it is, they hold the last stable offset back."""

    # Reading ---------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._producers)

    def __contains__(self, producer_id: object) -> bool:
        return producer_id in self._producers

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        """The producer's state, or None. Read it; change it only through this class."""
        return self._producers.get(producer_id)

    def last_offsets(self) -> list[int]:
        """The last offset of each producer's last batch: the batches the log cleaner
        keeps even when it empties them (Kafka's ``lastRecordsOfActiveProducers``)."""
        return [e.last_offset for e in self._producers.values() if e.last_offset >= 0]

    def producer_ids(self) -> list[int]:
        return sorted(self._producers)

    # Transactions ----------------------------------------------------------------------

    def ongoing_transactions(self) -> list[tuple[int, int]]:
        """``(first offset, producer id)`` of every open transaction, by first offset."""
        return sorted(self._ongoing.items())

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest transaction that is open, or closed with its
        marker not yet below the high watermark; None when there is none."""
        if not self._ongoing and not self._unreplicated:
            return None
        return min(
            min(self._ongoing, default=UNBOUNDED), min(self._unreplicated, default=UNBOUNDED)
        )

    def last_stable_offset(self, high_watermark: int) -> int:
        """The offset read_committed readers read up to: the first unstable offset, but
        never above the high watermark. Closed transactions whose marker is below
        ``high_watermark`` stop counting here (a replica's high watermark only grows,
        but for a truncation, which :meth:`truncate_to` handles), so no caller has to
        report every move of it."""
        if self._unreplicated:
            for opened, txn in list(self._unreplicated.items()):
                if txn.last_offset < high_watermark:
                    del self._unreplicated[opened]
        first = self.first_unstable_offset
        return high_watermark if first is None else min(first, high_watermark)

    def check_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int
    ) -> Decision:
        """Whether the leader may write a COMMIT or ABORT marker that a transaction
        coordinator asks for (WriteTxnMarkers). Changes nothing."""
        entry = self._producers.get(producer_id)
        if entry is None:
            return APPEND
        if producer_epoch < entry.producer_epoch:
            return Decision(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                message=f"marker epoch {producer_epoch} of producer {producer_id} is older "
                f"than {entry.producer_epoch}",
            )
        if coordinator_epoch < entry.coordinator_epoch:
            return Decision(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                message=f"marker for producer {producer_id} from coordinator epoch "
                f"{coordinator_epoch}, older than {entry.coordinator_epoch}",
            )
        return APPEND

    def preview(
        self, batches: Iterable[tuple[BatchHeader, EndTxnMarker | None]]
    ) -> list[CompletedTxn]:
        """The transactions that these batches (in log order, offsets assigned; each
        with its marker when it is one) would close, exactly as :meth:`update` and
        :meth:`complete` will give them once the batches are appended. Changes nothing:
        the log writes an abort's index entry before its marker (see
        :meth:`odradek.storage.segment.LogSegment.append_aborted`)."""
        ongoing = dict(self._ongoing)
        open_at = {producer_id: first for first, producer_id in ongoing.items()}
        out: list[CompletedTxn] = []
        for header, marker in batches:
            producer_id = header.producer_id
            if producer_id <= NO_PRODUCER_ID:
                continue
            if marker is not None:
                first = open_at.pop(producer_id, None)
                out.append(
                    _close(ongoing, producer_id, first, header.base_offset, marker.committed)
                )
            elif header.is_transactional and not header.is_control and producer_id not in open_at:
                open_at[producer_id] = header.base_offset
                ongoing[header.base_offset] = producer_id
        return out

    def complete(
        self,
        producer_id: int,
        producer_epoch: int,
        offset: int,
        *,
        committed: bool,
        coordinator_epoch: int,
        timestamp: int,
    ) -> CompletedTxn:
        """A marker is now in the log at ``offset``: close the producer's transaction.
        No check is made (see :meth:`check_marker`); replayed and replicated markers
        come here too."""
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerStateEntry(producer_id)
        if producer_epoch != entry.producer_epoch:
            entry.batches.clear()
            entry.producer_epoch = producer_epoch
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        first = entry.current_txn_first_offset
        entry.current_txn_first_offset = -1
        txn = _close(self._ongoing, producer_id, first if first >= 0 else None, offset, committed)
        self._unreplicated[txn.first_offset] = txn
        return txn

    # The produce path --------------------------------------------------------------

    def check(self, header: BatchHeader) -> Decision:
        """Decide whether the leader may append the batch; see :class:`Decision`.

        Changes nothing: only :meth:`update` after a successful append does. Produce
        v3 and later carry exactly one batch per partition, so one check per append
        is enough.
        """
        producer_id = header.producer_id
        if producer_id <= NO_PRODUCER_ID:
            return APPEND
        first = header.base_sequence
        if first < 0:
            return Decision(
                ErrorCode.INVALID_RECORD,
                message=f"invalid sequence number {first} in a batch of producer {producer_id}",
            )
        entry = self._producers.get(producer_id)
        if entry is None:
            # No state: new, expired, or lost to retention. KIP-360 accepts any sequence.
            return APPEND
        epoch = header.producer_epoch
        current = entry.producer_epoch
        if epoch == current:
            last = last_sequence(header)
            for batch in entry.batches:
                if batch.first_sequence == first and batch.last_sequence == last:
                    return Decision(ErrorCode.NONE, batch)
        if epoch < current:
            return Decision(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                message=f"epoch {epoch} of producer {producer_id} is older than {current}",
            )
        if entry.current_txn_first_offset >= 0 and not header.is_transactional:
            return Decision(
                ErrorCode.INVALID_TXN_STATE,
                message=f"expected a transactional write from producer {producer_id}, "
                f"whose transaction opened at offset {entry.current_txn_first_offset}",
            )
        if current == NO_PRODUCER_EPOCH:
            # Known but without an epoch (only a snapshot can say so): Kafka accepts
            # any sequence, as for a producer it has no state for.
            return APPEND
        if epoch != current:
            if first != 0:
                return Decision(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    message=f"producer {producer_id} starts epoch {epoch} at sequence "
                    f"{first}, not 0",
                )
            return APPEND
        # An entry with no batch (from a snapshot) expects 0: increment of -1.
        expected = increment_sequence(entry.last_sequence, 1)
        if first != expected:
            return Decision(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                message=f"producer {producer_id} epoch {epoch} sent sequence {first}, "
                f"expected {expected}",
            )
        return APPEND

    def update(
        self, header: BatchHeader, first_offset: int, last_offset: int, timestamp: int
    ) -> None:
        """Record a batch that is now in the log at ``first_offset..last_offset``.

        ``timestamp`` is the batch's max timestamp as stored, so that a replay of the
        log after a restart records the same value. Batches without a producer id and
        control batches are ignored. No check is made: the leader called :meth:`check`
        before, and a follower trusts its leader, as Kafka's do.
        """
        producer_id = header.producer_id
        if producer_id <= NO_PRODUCER_ID or header.is_control:
            return
        invariant(
            last_offset - first_offset == header.last_offset_delta,
            f"batch of producer {producer_id} at {first_offset}..{last_offset} has "
            f"lastOffsetDelta {header.last_offset_delta}",
        )
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerStateEntry(producer_id)
        if header.producer_epoch != entry.producer_epoch:
            # Sequences restart with each epoch, so the old epoch's batches can never
            # match again; Kafka forgets them too (maybeUpdateProducerEpoch).
            entry.batches.clear()
            entry.producer_epoch = header.producer_epoch
        # The deque's maxlen drops the oldest batch once five are kept.
        entry.batches.append(
            BatchMetadata(
                header.base_sequence,
                last_sequence(header),
                first_offset,
                last_offset,
                timestamp,
            )
        )
        entry.last_timestamp = timestamp
        if header.is_transactional and entry.current_txn_first_offset < 0:
            # The producer's first batch of a transaction opens it here.
            entry.current_txn_first_offset = first_offset
            self._ongoing[first_offset] = producer_id

    def replay(self, header: BatchHeader) -> None:
        """:meth:`update` for a batch read from the log or fetched from the leader,
        whose header already holds its offsets and its stored max timestamp."""
        self.update(header, header.base_offset, header.last_offset, header.max_timestamp)

    # Keeping up with the log ---------------------------------------------------------

    def truncate_to(self, offset: int) -> list[int]:
        """Forget every batch at or after ``offset``, the log's new end offset.

        A batch holding ``offset`` goes whole, as the log truncates whole batches.
        Returns the producer ids that lost all their remembered batches and are
        therefore forgotten.

        What stays is exact where it is kept: a producer with a batch left has the epoch
        and last sequence a replay of the truncated log gives, and every duplicate it
        can report is a batch still in the log. It may remember fewer than five batches
        (older ones that had left the window do not come back), so a retry of one of
        those gets OUT_OF_ORDER_SEQUENCE_NUMBER instead of a duplicate answer: a client
        error, never a duplicated record. A forgotten producer is treated like an
        expired one: its next batch is accepted at any sequence. When that matters (the
        returned list is not empty and this replica may lead), rebuild exactly as Kafka
        does (``truncateAndReload``): :meth:`truncate_fully`, load the latest snapshot
        at or below ``offset`` with :meth:`from_snapshot`, and :meth:`replay` the log
        from the snapshot's offset to ``offset``.
        """
        self._truncate_transactions(offset)
        forgotten: list[int] = []
        for producer_id, entry in list(self._producers.items()):
            batches = entry.batches
            lost = False
            # Batches are in offset order, so the ones to drop are at the end.
            while batches and batches[-1].last_offset >= offset:
                batches.pop()
                lost = True
            if not lost:
                continue
            if batches:
                entry.last_timestamp = batches[-1].timestamp
            else:
                del self._producers[producer_id]
                forgotten.append(producer_id)
        return sorted(forgotten)

    def _truncate_transactions(self, offset: int) -> None:
        """Transactions as a log ending at ``offset`` has them: one that opened at or
        after it is gone; one whose marker is gone is open again (the epochs the marker
        set stay: a rebuild from a snapshot is exact where that matters)."""
        for first, producer_id in list(self._ongoing.items()):
            if first >= offset:
                del self._ongoing[first]
                entry = self._producers.get(producer_id)
                if entry is not None:
                    entry.current_txn_first_offset = -1
        for first, txn in list(self._unreplicated.items()):
            if txn.last_offset < offset:
                continue
            del self._unreplicated[first]
            entry = self._producers.get(txn.producer_id)
            if first < offset and entry is not None:
                entry.current_txn_first_offset = first
                self._ongoing[first] = txn.producer_id

    def truncate_fully(self) -> None:
        """Forget every producer: the log was emptied (or restarts at a new offset)."""
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()

    def remove_expired(
        self, now_ms: int, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
    ) -> list[int]:
        """Forget producers idle for ``producer_id_expiration_ms`` or more; return their ids.

        Idle is measured from the producer's last batch timestamp, as Kafka does, so on
        a CreateTime topic a producer's own clock counts. A producer with a transaction
        open is never expired.
        """
        expired = [
            producer_id
            for producer_id, entry in self._producers.items()
            if entry.current_txn_first_offset < 0
            and now_ms - entry.last_timestamp >= producer_id_expiration_ms
        ]
        for producer_id in expired:
            del self._producers[producer_id]
        return sorted(expired)

    # Persistence ---------------------------------------------------------------------

    def snapshot(self) -> list[SnapshotEntry]:
        """Kafka's snapshot entries, one per producer by id: only the last batch of
        each is kept, which is all Kafka's format has room for."""
        out: list[SnapshotEntry] = []
        for producer_id in sorted(self._producers):
            entry = self._producers[producer_id]
            if entry.batches:
                last = entry.batches[-1]
                last_seq, last_offset = last.last_sequence, last.last_offset
                offset_delta = last.last_offset - last.first_offset
            else:
                last_seq, last_offset, offset_delta = NO_SEQUENCE, -1, 0
            out.append(
                SnapshotEntry(
                    producer_id=producer_id,
                    producer_epoch=entry.producer_epoch,
                    last_sequence=last_seq,
                    last_offset=last_offset,
                    offset_delta=offset_delta,
                    timestamp=entry.last_timestamp,
                    coordinator_epoch=entry.coordinator_epoch,
                    current_txn_first_offset=entry.current_txn_first_offset,
                )
            )
        return out

    @classmethod
    def from_snapshot(cls, entries: Iterable[SnapshotFields]) -> ProducerStateManager:
        """The state a snapshot describes; a later entry for the same id wins, as in
        Kafka's ``loadProducerEntry``. Expired producers are not filtered here: call
        :meth:`remove_expired` after loading, as Kafka does while loading."""
        state = cls()
        for fields in entries:
            e = SnapshotEntry._make(fields)
            invariant(e.producer_id >= 0, f"snapshot entry with producer id {e.producer_id}")
            entry = ProducerStateEntry(
                e.producer_id,
                e.producer_epoch,
                e.timestamp,
                e.coordinator_epoch,
                e.current_txn_first_offset,
            )
            if e.last_offset >= 0:
                invariant(
                    0 <= e.offset_delta <= e.last_offset,
                    f"snapshot entry of producer {e.producer_id}: offset delta "
                    f"{e.offset_delta} with last offset {e.last_offset}",
                )
                entry.batches.append(
                    BatchMetadata(
                        decrement_sequence(e.last_sequence, e.offset_delta),
                        e.last_sequence,
                        e.last_offset - e.offset_delta,
                        e.last_offset,
                        e.timestamp,
                    )
                )
            state._producers[e.producer_id] = entry
            if e.current_txn_first_offset >= 0:
                state._ongoing[e.current_txn_first_offset] = e.producer_id
        return state
