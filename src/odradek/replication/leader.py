"""The leader side of one partition: who is in sync, the high watermark, acks=all.

This module owns what a partition leader knows and decides, Kafka's ``Partition`` and
``Replica`` leader logic (``updateFollowerFetchState``, ``maybeIncrementLeaderHW``,
``maybeExpandIsr``, ``maybeShrinkIsr``, ``checkEnoughReplicasReachOffset``), with
KIP-497's pending ISR ("maximal ISR") and KIP-966's rule that the high watermark stands
still under ``min.insync.replicas``. It is pure: no clock (every call takes ``now_ms``),
no storage, no network. The shell reports what happened to the log and what followers
asked for; this object answers with values.

Why the rules are what they are (the Jepsen analysis of Kafka 0.8 in one sentence: an
ISR allowed to shrink to the leader alone acknowledges writes that a single further
failure destroys):

* ``acks=all`` is refused *before* the append (NOT_ENOUGH_REPLICAS) while the ISR is
  smaller than ``min.insync.replicas``, and the high watermark does not advance while
  it is (KIP-966), so an acknowledged record is always on ``min.insync.replicas``
  replicas, never on the leader alone unless the operator asked for exactly that
  (``min.insync.replicas=1``; the tests show that this configuration acknowledges
  records only the leader holds).
* While an AlterPartition is in flight the high watermark is computed over the
  *maximal* ISR (the committed ISR united with the proposed one): a member being
  removed still counts until the controller has committed its removal, and a member
  being added counts at once, because the controller may commit the addition before
  the leader hears of it, and a new ISR member must hold everything below the high
  watermark (it could be elected leader next).
* With flush-before-ack (``flush_before_ack=True``) the leader's own contribution is its
  *durable* end offset: a record that is only in the page cache is not counted, so a
  leader crash cannot lose a record the high watermark already passed on its side.

How the shell drives one ``PartitionLeader`` (see also each method):

1. Build it when the metadata image makes this broker the leader of a new leader epoch,
   after the local log has assigned that epoch at its end offset.
2. Produce: ``check_produce(acks)`` before appending; after the append
   ``on_append(log_end_offset)``; after every flush ``on_flush(durable_end_offset)``.
   An acks=all produce waits with ``required_offset`` = its last offset + 1; after
   every call whose :class:`LeaderChange` has ``recheck_acks`` set, the shell asks
   ``ack_outcome(required_offset)`` for its waiters (:meth:`PartitionLeader.completed`
   does that for a batch of them) and answers those that are done.
3. Fetch from a follower: ``check_leader_epoch(current_leader_epoch)``; then the fetch
   position is checked against the leader's log by :func:`diverging_epoch` (and the log
   start/end); only a position that passed both is reported with
   ``on_follower_fetch(replica_id, fetch_offset, now_ms)``. The fetch response carries
   ``high_watermark`` from the returned change.
4. ISR: after each follower fetch and on a timer (Kafka checks for shrinks every
   ``replica.lag.time.max.ms / 2``) call ``isr_change(now_ms)``; a returned proposal is
   sent as an AlterPartitionRequest (with the members' broker epochs from the image);
   its answer goes to ``on_alter_partition_result``. ``RETRY`` means send the same
   proposal again after a backoff.
5. Metadata: every new registration of the partition goes to ``on_registration``. When
   it answers ``OBSOLETE`` (a new leader epoch, or another leader) this object refuses
   everything from then on (``is_obsolete``): the shell completes its acks=all waiters
   with NOT_LEADER_OR_FOLLOWER and builds a new ``PartitionLeader`` (same broker, new
   epoch) or a ``PartitionFollower``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from odradek.core.invariant import invariant
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages.alter_partition_response import (
    PartitionData as AlterPartitionResponsePartition,
)

__all__ = [
    "NO_LEADER",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "UNKNOWN_OFFSET",
    "AckOutcome",
    "AlterPartitionAction",
    "AlterPartitionOutcome",
    "EpochLog",
    "FollowerState",
    "IsrProposal",
    "LeaderChange",
    "PartitionLeader",
    "PartitionRegistration",
    "RegistrationAction",
    "RegistrationOutcome",
    "diverging_epoch",
]

UNKNOWN_OFFSET = -1
"""A follower's end offset before its first fetch to this leader (Kafka's UnknownOffset)."""
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
NO_LEADER = -1
"""The leader id of a partition without a leader in a registration (Kafka's NO_LEADER)."""


class EpochLog(Protocol):
    """The little of a local log that the replication rules read.

    ``odradek.storage.log.PartitionLog`` has ``log_end_offset`` and
    ``end_offset_for_epoch`` with exactly these meanings; ``latest_epoch`` is its
    leader-epoch cache's. The shell passes an adapter, so this layer never imports
    storage.
    """

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record will get."""
        ...

    def latest_epoch(self) -> int:
        """The latest epoch in the leader-epoch cache, or ``UNDEFINED_EPOCH``."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch's answer: the largest known epoch not above ``epoch``
        and its end offset (the start of the next epoch, or the log end for the
        latest), or ``(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)``."""
        ...


def diverging_epoch(
    log: EpochLog, fetch_offset: int, last_fetched_epoch: int
) -> tuple[int, int] | None:
    """The leader's check of a follower's fetch position (KIP-320, Kafka's
    ``Partition.fetchRecords``): ``None`` when ``(fetch_offset, last_fetched_epoch)``
    lies on the leader's history, else the ``(epoch, end_offset)`` the fetch response
    carries as ``diverging_epoch`` so the follower truncates there.

    A follower that has no epoch yet (``last_fetched_epoch`` undefined, an empty log) is
    not checked, as in Kafka; its fetch offset is then checked against the log's range.
    """
    if last_fetched_epoch == UNDEFINED_EPOCH:
        return None
    epoch, end_offset = log.end_offset_for_epoch(last_fetched_epoch)
    if epoch < last_fetched_epoch or end_offset < fetch_offset:
        return epoch, end_offset
    return None


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """A partition's state in the metadata image (Kafka's ``PartitionRegistration``)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    recovering: bool = False
    """Elected uncleanly (KIP-704's RECOVERING): this leader's log is now the
    partition's history."""


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower (Kafka's ``ReplicaState``).

    ``last_caught_up_time_ms`` is the largest time ``t`` such that the follower had, at
    ``t``, fetched up to the leader's log end offset as of ``t`` (approximately: see
    :meth:`PartitionLeader.on_follower_fetch`).
    """

    replica_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0


@dataclass(frozen=True, slots=True)
class IsrProposal:
    """One AlterPartition the leader wants: its ISR, and the epochs it was decided on.

    The controller applies it only if both epochs are still current (the partition epoch
    works as a compare-and-set version), so two changes decided on the same state can
    never both apply.
    """

    new_isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int
    added: tuple[int, ...] = ()
    removed: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class LeaderChange:
    """What one input did. ``error`` is a Kafka outcome for the caller's request (NONE
    when it was accepted); ``recheck_acks`` says the shell must ask ``ack_outcome`` for
    its acks=all waiters again, because the high watermark or the ISR moved."""

    error: ErrorCode
    high_watermark: int
    high_watermark_moved: bool = False
    isr_changed: bool = False

    @property
    def recheck_acks(self) -> bool:
        return self.high_watermark_moved or self.isr_changed


@dataclass(frozen=True, slots=True)
class AckOutcome:
    """An acks=all produce: still waiting (``done`` false), or done with ``error``."""

    done: bool
    error: ErrorCode = ErrorCode.NONE


WAIT = AckOutcome(done=False)
DONE = AckOutcome(done=True)


class AlterPartitionAction(enum.Enum):
    """What the shell does after an AlterPartition answer."""

    APPLIED = "applied"
    """The controller committed the proposal; the new ISR is in effect."""
    IGNORED = "ignored"
    """An answer to a proposal that is no longer the pending one, or an older state."""
    WAIT_FOR_METADATA = "wait_for_metadata"
    """The proposal stays pending (the maximal ISR keeps counting it) until a newer
    registration arrives through ``on_registration``; nothing is resent."""
    RESET = "reset"
    """The controller refused and did not apply it: back to the committed ISR; the next
    ``isr_change`` may propose again."""
    RETRY = "retry"
    """The request may not have reached a controller: send the same proposal again after
    a backoff. It stays pending meanwhile."""


@dataclass(frozen=True, slots=True)
class AlterPartitionOutcome:
    action: AlterPartitionAction
    change: LeaderChange


class RegistrationAction(enum.Enum):
    APPLIED = "applied"
    """A newer partition epoch of this leader epoch: ISR and replicas updated."""
    UNCHANGED = "unchanged"
    """The state this leader already has."""
    STALE = "stale"
    """An older registration, ignored."""
    OBSOLETE = "obsolete"
    """A new leader epoch or another leader: this object is finished."""


@dataclass(frozen=True, slots=True)
class RegistrationOutcome:
    action: RegistrationAction
    change: LeaderChange


# AlterPartition errors after which the controller's state, not a resend, decides
# (Kafka's ``Partition.handleAlterPartitionError``): our epochs are behind, the
# partition or leadership moved. The pending state stays, so the high watermark keeps
# counting every member the controller might have committed.
_WAIT_FOR_METADATA_ERRORS = frozenset(
    {
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.INVALID_UPDATE_VERSION,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.NEW_LEADER_ELECTED,
    }
)
# Errors that say the controller looked at this proposal on the current partition epoch
# and refused it, so it was not applied and cannot be applied later: going back to the
# committed ISR is safe. (An earlier attempt that was applied would have moved the
# partition epoch, and this one would have got INVALID_UPDATE_VERSION instead.)
_RESET_ERRORS = frozenset(
    {
        ErrorCode.OPERATION_NOT_ATTEMPTED,
        ErrorCode.INELIGIBLE_REPLICA,
        ErrorCode.INVALID_REQUEST,
    }
)

_VALID_ACKS = (-1, 0, 1)

K = TypeVar("K")


class PartitionLeader:
    """The leader state of one partition for one leader epoch."""

    def __init__(
        self,
        *,
        replica_id: int,
        registration: PartitionRegistration,
        log_end_offset: int,
        durable_end_offset: int,
        high_watermark: int,
        min_insync_replicas: int,
        replica_lag_time_max_ms: int,
        now_ms: int,
        flush_before_ack: bool = True,
        leader_epoch_start_offset: int | None = None,
    ) -> None:
        """Become leader.

        ``high_watermark`` is the checkpointed (or follower-time) high watermark; it is
        clamped to the log end. It is not lowered to the durable end: the records below
        it were committed by the previous epoch's ISR. ``leader_epoch_start_offset`` is
        where this epoch begins in the log (Kafka's ``leaderEpochStartOffsetOpt``),
        by default the log end at election.
        """
        invariant(registration.leader == replica_id, "a leader built for another broker")
        invariant(min_insync_replicas >= 1, "min.insync.replicas must be at least 1")
        invariant(replica_lag_time_max_ms > 0, "replica.lag.time.max.ms must be positive")
        invariant(
            0 <= durable_end_offset <= log_end_offset,
            f"durable end {durable_end_offset} outside [0, log end {log_end_offset}]",
        )
        self.replica_id = replica_id
        self.leader_epoch = registration.leader_epoch
        self.partition_epoch = registration.partition_epoch
        self.min_insync_replicas = min_insync_replicas
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.flush_before_ack = flush_before_ack
        self._log_end_offset = log_end_offset
        self._durable_end_offset = durable_end_offset
        self._high_watermark = max(0, min(high_watermark, log_end_offset))
        if registration.recovering:
            # An unclean election (the operator's decision) makes this log the history:
            # what it holds durably is committed at once, as Kafka's unclean leader does,
            # rather than frozen below min.insync.replicas with nothing readable.
            self._high_watermark = max(self._high_watermark, durable_end_offset)
        self.leader_epoch_start_offset = (
            log_end_offset if leader_epoch_start_offset is None else leader_epoch_start_offset
        )
        self._replicas: tuple[int, ...] = ()
        self._isr: frozenset[int] = frozenset()
        self._followers: dict[int, FollowerState] = {}
        self._pending: IsrProposal | None = None
        self._obsolete = False
        self._set_assignment(registration.replicas, registration.isr)
        # Kafka's ``resetReplicaState`` for a new leader: every follower's position is
        # unknown until it fetches; an ISR member counts as caught up now (it gets a full
        # ``replica.lag.time.max.ms`` to show up), any other one never was.
        for follower in self._followers.values():
            follower.last_caught_up_time_ms = now_ms if follower.replica_id in self._isr else 0
        self._maybe_increment_high_watermark()

    # --- Reading -----------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def durable_end_offset(self) -> int:
        return self._durable_end_offset

    @property
    def replicas(self) -> tuple[int, ...]:
        return self._replicas

    @property
    def isr(self) -> frozenset[int]:
        """The ISR the controller committed (Kafka's ``partitionState.isr``)."""
        return self._isr

    @property
    def maximal_isr(self) -> frozenset[int]:
        """The committed ISR united with the pending proposal's (KIP-497)."""
        if self._pending is None:
            return self._isr
        return self._isr | frozenset(self._pending.new_isr)

    @property
    def pending_proposal(self) -> IsrProposal | None:
        return self._pending

    @property
    def is_obsolete(self) -> bool:
        return self._obsolete

    @property
    def effective_min_isr(self) -> int:
        """``min.insync.replicas`` capped at the replication factor, as Kafka's
        ``effectiveMinIsr`` does, so a topic with fewer replicas than the setting still
        takes acks=all writes once every replica has them."""
        return min(self.min_insync_replicas, len(self._replicas))

    @property
    def is_under_min_isr(self) -> bool:
        return len(self._isr) < self.effective_min_isr

    def follower_state(self, replica_id: int) -> FollowerState | None:
        state = self._followers.get(replica_id)
        if state is None:
            return None
        return FollowerState(
            state.replica_id,
            state.log_end_offset,
            state.last_fetch_leader_log_end_offset,
            state.last_fetch_time_ms,
            state.last_caught_up_time_ms,
        )

    # --- Produce -----------------------------------------------------------------

    def check_produce(self, acks: int) -> ErrorCode:
        """Whether a produce with ``acks`` may be appended (Kafka's check in
        ``appendRecordsToLeader``). acks=1 and acks=0 never depend on the ISR."""
        if self._obsolete:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if acks not in _VALID_ACKS:
            return ErrorCode.INVALID_REQUIRED_ACKS
        if acks == -1 and self.is_under_min_isr:
            return ErrorCode.NOT_ENOUGH_REPLICAS
        return ErrorCode.NONE

    def on_append(self, log_end_offset: int) -> LeaderChange:
        """The local log now ends at ``log_end_offset`` (records appended, not yet
        necessarily flushed). A leader never truncates its own log."""
        if self._obsolete:
            return self._refused()
        invariant(
            log_end_offset >= self._log_end_offset,
            f"leader log end went back from {self._log_end_offset} to {log_end_offset}",
        )
        self._log_end_offset = log_end_offset
        return self._after_change()

    def on_flush(self, durable_end_offset: int) -> LeaderChange:
        """Everything below ``durable_end_offset`` is on stable storage."""
        if self._obsolete:
            return self._refused()
        invariant(
            self._durable_end_offset <= durable_end_offset <= self._log_end_offset,
            f"durable end {durable_end_offset} outside "
            f"[{self._durable_end_offset}, log end {self._log_end_offset}]",
        )
        self._durable_end_offset = durable_end_offset
        return self._after_change()

    def ack_outcome(self, required_offset: int) -> AckOutcome:
        """An acks=all produce whose last record is ``required_offset - 1``.

        Done with NONE once the high watermark reached it: the high watermark only
        advances while the committed ISR has at least ``min.insync.replicas`` members
        and over every member of the maximal ISR, so that many replicas hold it. (Kafka
        checks the ISR size again at this point, because its high watermark could
        advance under min ISR before KIP-966; here it cannot, and a record below the
        high watermark is committed whatever the ISR became since.)

        Done with NOT_ENOUGH_REPLICAS_AFTER_APPEND when the high watermark is below it
        and even the maximal ISR is under ``min.insync.replicas``: the high watermark
        cannot move until the ISR grows back, so the producer is told now rather than
        at its timeout. The record stays in the log and may still be committed later;
        an idempotent producer's retry is then answered as a duplicate.
        """
        if self._obsolete:
            return AckOutcome(done=True, error=ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if self._high_watermark >= required_offset:
            return DONE
        if len(self.maximal_isr) < self.effective_min_isr:
            return AckOutcome(done=True, error=ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        return WAIT

    def completed(self, waiters: Iterable[tuple[K, int]]) -> list[tuple[K, ErrorCode]]:
        """The waiters, given as ``(key, required_offset)``, whose acks=all produce is
        done, with its outcome; the shell answers them and forgets them."""
        done: list[tuple[K, ErrorCode]] = []
        for key, required_offset in waiters:
            outcome = self.ack_outcome(required_offset)
            if outcome.done:
                done.append((key, outcome.error))
        return done

    # --- Fetch from followers --------------------------------------------------------

    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """A fetch's ``current_leader_epoch`` against ours (KIP-320): -1 skips the check;
        an older one is FENCED_LEADER_EPOCH (the fetcher must refresh its metadata), a
        newer one UNKNOWN_LEADER_EPOCH (we have not seen that metadata yet)."""
        if self._obsolete:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if current_leader_epoch == UNDEFINED_EPOCH or current_leader_epoch == self.leader_epoch:
            return ErrorCode.NONE
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.UNKNOWN_LEADER_EPOCH

    def on_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> LeaderChange:
        """A follower fetched from ``fetch_offset``: it holds every record below it.

        Contract: the caller has already checked the position against the leader's log
        (``check_leader_epoch``, then :func:`diverging_epoch` returned ``None`` and the
        offset is not below the log start). A fetch that diverged is answered with the
        diverging epoch and not reported here, because its offset is not on our history.
        An offset past our log end is refused with OFFSET_OUT_OF_RANGE and does not
        count; a broker that is not a follower of this partition gets
        NOT_LEADER_OR_FOLLOWER, as Kafka's ``followerReplicaOrThrow`` answers.

        Caught-up time follows Kafka's ``Replica.updateFetchStateOrThrow``: a fetch at or
        past the leader's log end offset *as of this fetch* makes the follower caught
        up now; else a fetch at or past the leader's log end *as of the previous fetch*
        makes it caught up as of the previous fetch's time (so a follower that always
        trails a busy leader by a few records, but reads everything up to where the
        leader was one fetch ago, stays in sync); else nothing changes. The leader's log
        end offset is the appended one, not the durable one: followers may read records
        the leader has not flushed yet.
        """
        if self._obsolete:
            return self._refused()
        follower = self._followers.get(replica_id)
        if follower is None:
            return LeaderChange(ErrorCode.NOT_LEADER_OR_FOLLOWER, self._high_watermark)
        if fetch_offset < 0 or fetch_offset > self._log_end_offset:
            return LeaderChange(ErrorCode.OFFSET_OUT_OF_RANGE, self._high_watermark)
        if fetch_offset >= self._log_end_offset:
            follower.last_caught_up_time_ms = max(follower.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= follower.last_fetch_leader_log_end_offset >= 0:
            follower.last_caught_up_time_ms = max(
                follower.last_caught_up_time_ms, follower.last_fetch_time_ms
            )
        moved = fetch_offset != follower.log_end_offset
        follower.log_end_offset = fetch_offset
        follower.last_fetch_leader_log_end_offset = self._log_end_offset
        follower.last_fetch_time_ms = now_ms
        if not moved:
            # The high watermark was last computed with this very end offset (every other
            # input recomputes it when it changes): it cannot move now. A follower in a
            # fetch session is counted for each of its partitions on every fetch, so this
            # is the common case.
            return self._unchanged()
        return self._after_change()

    # --- ISR changes -----------------------------------------------------------------

    def isr_change(
        self, now_ms: int, ineligible_replicas: Iterable[int] = ()
    ) -> IsrProposal | None:
        """The one AlterPartition to send now, or ``None``.

        Nothing while a proposal is pending (KIP-497: one change in flight, each decided
        on the last committed state). Shrinks come first, because a stuck follower holds
        back the high watermark and every acks=all produce: ISR followers that are not
        caught up (``isCaughtUp``: end offset equal to the leader's, or caught up within
        ``replica.lag.time.max.ms``) are removed together. Otherwise one follower outside
        the ISR (the lowest id, for determinism) is added if it is in sync by Kafka's
        ``isFollowerInSync``: its end offset is at least the high watermark and at least
        this leader epoch's start offset, so it holds every committed record and nothing
        from an older leader's divergent tail, and it is not out of sync by time (so a
        follower that stopped fetching is not added back only to be removed again).
        ``ineligible_replicas`` are brokers the image shows fenced or shutting down
        (Kafka's ``isReplicaIsrEligible``); they are not added.

        The leader itself is never removed, so the ISR is never empty.
        """
        if self._obsolete or self._pending is not None:
            return None
        out_of_sync = sorted(
            r for r in self._isr if r != self.replica_id and self._is_out_of_sync(r, now_ms)
        )
        if out_of_sync:
            new_isr = tuple(sorted(self._isr.difference(out_of_sync)))
            invariant(self.replica_id in new_isr, "a shrink removed the leader")
            self._pending = IsrProposal(
                new_isr, self.leader_epoch, self.partition_epoch, removed=tuple(out_of_sync)
            )
            return self._pending
        excluded = frozenset(ineligible_replicas)
        for replica in self._replicas:
            if replica in self._isr or replica in excluded or replica == self.replica_id:
                continue
            # Also caught up lately: a follower that stopped fetching at or past a high
            # watermark frozen under min.insync.replicas would otherwise be added back
            # and removed again on every check (the ISR flapping).
            if self._is_follower_in_sync(replica) and not self._is_out_of_sync(replica, now_ms):
                new_isr = tuple(sorted(self._isr | {replica}))
                self._pending = IsrProposal(
                    new_isr, self.leader_epoch, self.partition_epoch, added=(replica,)
                )
                return self._pending
        return None

    def on_alter_partition_result(
        self, proposal: IsrProposal, response: AlterPartitionResponsePartition
    ) -> AlterPartitionOutcome:
        """The controller's answer to ``proposal``.

        Give a top-level error of the AlterPartitionResponse (NOT_CONTROLLER,
        STALE_BROKER_EPOCH, ...) or a lost request as ``response.error_code`` (for
        example REQUEST_TIMED_OUT): those are RETRY.
        """
        if self._obsolete or proposal != self._pending:
            # Kafka: "Ignoring ... since we have already changed the state": a newer
            # registration or an earlier answer already resolved this proposal.
            return AlterPartitionOutcome(AlterPartitionAction.IGNORED, self._unchanged())
        error = _error_code(response.error_code)
        if error in _WAIT_FOR_METADATA_ERRORS:
            return AlterPartitionOutcome(AlterPartitionAction.WAIT_FOR_METADATA, self._unchanged())
        if error in _RESET_ERRORS:
            self._pending = None
            # The maximal ISR lost the proposed additions, which can only let the high
            # watermark move on; the waiters must be checked again.
            return AlterPartitionOutcome(AlterPartitionAction.RESET, self._after_change(True))
        if error != ErrorCode.NONE:
            return AlterPartitionOutcome(AlterPartitionAction.RETRY, self._unchanged())
        if response.leader_epoch != self.leader_epoch:
            # Kafka ignores a success for another leader epoch and keeps the pending
            # state; the registration that explains it will come through the metadata.
            return AlterPartitionOutcome(AlterPartitionAction.WAIT_FOR_METADATA, self._unchanged())
        if response.partition_epoch < self.partition_epoch:
            return AlterPartitionOutcome(AlterPartitionAction.IGNORED, self._unchanged())
        # A partition epoch equal to ours means the controller found nothing to change;
        # either way the pending state becomes the committed one.
        self._pending = None
        self.partition_epoch = response.partition_epoch
        self._set_assignment(self._replicas, tuple(response.isr))
        return AlterPartitionOutcome(AlterPartitionAction.APPLIED, self._after_change(True))

    # --- Metadata --------------------------------------------------------------------

    def on_registration(self, registration: PartitionRegistration) -> RegistrationOutcome:
        """A registration of this partition from the metadata image.

        Another leader, or a new leader epoch (even with this broker leading again),
        makes this object obsolete: Kafka starts a new epoch with fresh follower states
        and a new epoch start offset, so the shell builds a new ``PartitionLeader``.
        A newer partition epoch of this leader epoch replaces the ISR and replicas and
        drops the pending proposal: the controller moved the partition epoch, so it will
        refuse that proposal (INVALID_UPDATE_VERSION) if it has not applied it already,
        in which case the new ISR is it. An equal partition epoch changes nothing and,
        importantly, keeps the pending proposal (and with it the maximal ISR).
        """
        if self._obsolete:
            return RegistrationOutcome(RegistrationAction.OBSOLETE, self._refused())
        if registration.leader_epoch < self.leader_epoch:
            return RegistrationOutcome(RegistrationAction.STALE, self._unchanged())
        if registration.leader != self.replica_id or registration.leader_epoch > self.leader_epoch:
            self._obsolete = True
            return RegistrationOutcome(RegistrationAction.OBSOLETE, self._refused())
        if registration.partition_epoch < self.partition_epoch:
            return RegistrationOutcome(RegistrationAction.STALE, self._unchanged())
        if registration.partition_epoch == self.partition_epoch:
            return RegistrationOutcome(RegistrationAction.UNCHANGED, self._unchanged())
        self.partition_epoch = registration.partition_epoch
        self._pending = None
        self._set_assignment(registration.replicas, registration.isr)
        return RegistrationOutcome(RegistrationAction.APPLIED, self._after_change(True))

    # --- Internals -------------------------------------------------------------------

    def _set_assignment(self, replicas: Sequence[int], isr: Sequence[int]) -> None:
        invariant(self.replica_id in replicas, "the leader is not a replica")
        invariant(self.replica_id in isr, f"ISR {sorted(isr)} without the leader")
        invariant(set(isr) <= set(replicas), f"ISR {sorted(isr)} outside {sorted(replicas)}")
        self._replicas = tuple(replicas)
        self._isr = frozenset(isr)
        for replica in replicas:
            if replica != self.replica_id and replica not in self._followers:
                # A replica added by a reassignment starts unknown and not caught up.
                self._followers[replica] = FollowerState(replica)
        for replica in list(self._followers):
            if replica not in replicas:
                del self._followers[replica]

    def _leader_end_for_high_watermark(self) -> int:
        return self._durable_end_offset if self.flush_before_ack else self._log_end_offset

    def _maybe_increment_high_watermark(self) -> bool:
        if self.is_under_min_isr:
            # KIP-966: under min ISR nothing becomes committed, so a record is never
            # acknowledged while fewer than min.insync.replicas replicas hold it.
            return False
        candidate = self._leader_end_for_high_watermark()
        for replica in self.maximal_isr:
            if replica != self.replica_id:
                candidate = min(candidate, self._followers[replica].log_end_offset)
        if candidate > self._high_watermark:
            self._high_watermark = candidate
            return True
        return False

    def _is_out_of_sync(self, replica: int, now_ms: int) -> bool:
        follower = self._followers[replica]
        if follower.log_end_offset == self._log_end_offset:
            return False
        return now_ms - follower.last_caught_up_time_ms > self.replica_lag_time_max_ms

    def _is_follower_in_sync(self, replica: int) -> bool:
        end = self._followers[replica].log_end_offset
        return end >= self._high_watermark and end >= self.leader_epoch_start_offset

    def _after_change(self, isr_changed: bool = False) -> LeaderChange:
        moved = self._maybe_increment_high_watermark()
        return LeaderChange(ErrorCode.NONE, self._high_watermark, moved, isr_changed)

    def _unchanged(self) -> LeaderChange:
        return LeaderChange(ErrorCode.NONE, self._high_watermark)

    def _refused(self) -> LeaderChange:
        return LeaderChange(ErrorCode.NOT_LEADER_OR_FOLLOWER, self._high_watermark)


def _error_code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        # A code newer than our table: nothing says the proposal was refused, so resend.
        return ErrorCode.UNKNOWN_SERVER_ERROR
