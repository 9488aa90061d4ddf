"""The follower side of one partition: what to fetch, and what a fetch response means.

This module owns the rules of Kafka's follower fetcher (``AbstractFetcherThread``,
``ReplicaFetcherThread``) for one partition, pure: the next fetch position, truncation
on a diverging epoch (KIP-320 / KIP-595), the follower's high watermark, and what each
fetch error asks for. It reads the local log only through :class:`EpochLog` (log end,
latest epoch, end offset of an epoch) and never changes it: it tells the shell what to
do with the log, and the shell does it before asking for the next fetch.

Truncation follows the leader's epoch information and never the follower's own high
watermark. Kafka 0.8 to 0.10 truncated a restarting follower to its high watermark, and
two quick leader changes could then lose acknowledged records or make replicas diverge
(KIP-101); epochs say exactly where this log and the leader's part. A truncation that
goes below our high watermark can only follow an unclean history (an out-of-sync
replica was elected); it is done, because the leader's log is the partition's now, but
it is flagged (``below_high_watermark``) so that the shell reports which acknowledged
records this replica drops (the storage layer moves them into quarantine).

How the shell drives one ``PartitionFollower``:

1. ``next_fetch(now_ms)``: a :class:`FollowerFetch` to send to ``leader_id`` (fetch
   offset, last fetched epoch, current leader epoch), or ``None`` (one is in flight,
   backing off, waiting for metadata or for the leader's offsets).
2. Its answer: ``on_fetch_response(fetch, partition, now_ms)`` with the same ``fetch``
   value and the response's partition data; an incremental answer that leaves the
   partition out (nothing new, see :mod:`odradek.replication.fetch_session`):
   ``on_fetch_unchanged(fetch)``; a timeout or a broken connection:
   ``on_fetch_failed(fetch, now_ms)``. Then do what the :class:`FollowerDecision` says:

   * ``APPEND``: append the response's records as follower (they start at the fetch
     offset), then ``update_high_watermark(partition.high_watermark)``;
   * ``TRUNCATE``: truncate the log (and its leader-epoch cache) to
     ``decision.offset``; ``TRUNCATE_FULLY``: empty the log and start it at
     ``decision.offset``; then fetch again;
   * ``LIST_LEADER_OFFSETS``: ask the leader for its log start and end offsets
     (ListOffsets earliest and latest, with the current leader epoch) and give them to
     ``on_leader_offsets`` (no answer: ``on_leader_offsets_failed``);
   * ``FETCH``: nothing to change, fetch again; ``BACKOFF``: ``next_fetch`` answers
     ``None`` until ``decision.retry_at_ms``; ``WAIT_FOR_METADATA``: no fetch until
     ``on_registration`` brings a newer leader epoch; ``IGNORE``: a stale answer.
3. Metadata: every registration of the partition goes to ``on_registration``; on
   ``OBSOLETE`` (this broker leads now, or is no longer a replica) the shell drops this
   object and builds a ``PartitionLeader`` or stops the replica.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from odradek.core.invariant import invariant
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages.fetch_response import (
    PartitionData as FetchResponsePartition,
)
from odradek.replication.leader import (
    NO_LEADER,
    UNDEFINED_EPOCH,
    EpochLog,
    PartitionRegistration,
)

__all__ = [
    "DEFAULT_REPLICA_FETCH_BACKOFF_MS",
    "EpochLog",
    "FollowerAction",
    "FollowerDecision",
    "FollowerFetch",
    "FollowerRegistrationAction",
    "PartitionFollower",
    "truncation_offset",
]

DEFAULT_REPLICA_FETCH_BACKOFF_MS = 1000
"""Kafka's ``replica.fetch.backoff.ms``."""


@dataclass(frozen=True, slots=True)
class FollowerFetch:
    """One fetch of this partition from its leader (the partition part of a Fetch)."""

    leader_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int


class FollowerAction(enum.Enum):
    APPEND = "append"
    TRUNCATE = "truncate"
    TRUNCATE_FULLY = "truncate_fully"
    LIST_LEADER_OFFSETS = "list_leader_offsets"
    FETCH = "fetch"
    BACKOFF = "backoff"
    WAIT_FOR_METADATA = "wait_for_metadata"
    IGNORE = "ignore"


@dataclass(frozen=True, slots=True)
class FollowerDecision:
    """What the shell does with the log after a response. ``offset`` is the truncation
    target (TRUNCATE) or the new log start (TRUNCATE_FULLY); ``high_watermark`` is this
    replica's after the decision; ``reason`` is for the log line."""

    action: FollowerAction
    high_watermark: int
    offset: int = -1
    below_high_watermark: bool = False
    retry_at_ms: int = 0
    reason: str = ""


class FollowerRegistrationAction(enum.Enum):
    APPLIED = "applied"
    """A newer leader epoch (maybe a new leader): fetching starts over from it."""
    UNCHANGED = "unchanged"
    STALE = "stale"
    OBSOLETE = "obsolete"
    """This broker is the leader now, or no longer a replica."""


def truncation_offset(log: EpochLog, leader_epoch: int, leader_end_offset: int) -> int:
    """Where to truncate when the leader answered ``diverging_epoch`` =
    ``(leader_epoch, leader_end_offset)``: Kafka's ``getOffsetTruncationState``.

    * We know ``leader_epoch``: truncate to the smaller of the leader's and our end
      offsets for it; above that the two histories differ.
    * We only know smaller epochs: truncate to the end of the largest of them. Whatever
      follows was written in epochs the leader does not have; the next fetch carries our
      new last epoch and the leader answers again if that still diverges.
    * We know no epoch at all: the leader's end offset (Kafka's rule for a log without a
      leader-epoch cache).

    Never past our log end.
    """
    log_end_offset = log.log_end_offset
    local_epoch, local_end_offset = log.end_offset_for_epoch(leader_epoch)
    if local_epoch == UNDEFINED_EPOCH:
        target = leader_end_offset
    elif local_epoch == leader_epoch:
        target = min(local_end_offset, leader_end_offset)
    else:
        target = local_end_offset
    return max(0, min(target, log_end_offset))


class PartitionFollower:
    """The follower state of one partition on this broker."""

    def __init__(
        self,
        *,
        replica_id: int,
        registration: PartitionRegistration,
        log: EpochLog,
        high_watermark: int,
        replica_fetch_backoff_ms: int = DEFAULT_REPLICA_FETCH_BACKOFF_MS,
    ) -> None:
        """Follow the registration's leader. ``high_watermark`` is the checkpointed one,
        clamped to the log end (records past a crash's recovery point are gone)."""
        invariant(registration.leader != replica_id, "a follower built for the leader")
        invariant(replica_id in registration.replicas, "a follower that is not a replica")
        self.replica_id = replica_id
        self.leader_id = registration.leader
        self.leader_epoch = registration.leader_epoch
        self.replica_fetch_backoff_ms = replica_fetch_backoff_ms
        self._log = log
        self._high_watermark = max(0, min(high_watermark, log.log_end_offset))
        self._in_flight: FollowerFetch | None = None
        self._awaiting_offsets = False
        self._fenced = False
        self._retry_at_ms = 0

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def is_fenced(self) -> bool:
        """The leader told us our leader epoch is old; only metadata can help."""
        return self._fenced

    # --- Fetching --------------------------------------------------------------------

    def next_fetch(self, now_ms: int) -> FollowerFetch | None:
        """The fetch to send now, or ``None``.

        The fetch offset is the local log end and the last fetched epoch the latest in
        the local leader-epoch cache: together they name a point of our history that
        the leader checks against its own (the diverging-epoch check).
        """
        if (
            self.leader_id == NO_LEADER
            or self._fenced
            or self._awaiting_offsets
            or self._in_flight is not None
            or now_ms < self._retry_at_ms
        ):
            return None
        self._in_flight = FollowerFetch(
            self.leader_id,
            self.leader_epoch,
            self._log.log_end_offset,
            self._log.latest_epoch(),
        )
        return self._in_flight

    def on_fetch_failed(self, fetch: FollowerFetch, now_ms: int) -> FollowerDecision:
        """The fetch got no answer (timeout, broken connection): back off."""
        if fetch != self._in_flight:
            return self._decision(FollowerAction.IGNORE, reason="not the fetch in flight")
        self._in_flight = None
        return self._backoff(now_ms, "fetch failed")

    def on_fetch_unchanged(self, fetch: FollowerFetch) -> FollowerDecision:
        """An incremental answer left this partition out: the leader has no records past
        our fetch offset and nothing we have not heard (high watermark, log start, an
        error or a diverging epoch). Fetch again, without a pause."""
        if fetch != self._in_flight:
            return self._decision(FollowerAction.IGNORE, reason="not the fetch in flight")
        self._in_flight = None
        return self._decision(FollowerAction.FETCH)

    def on_leader_offsets_failed(self, now_ms: int) -> FollowerDecision:
        """The ListOffsets asked for by LIST_LEADER_OFFSETS got no answer: back off, then
        fetch again (which asks again if the offset is still out of range)."""
        self._awaiting_offsets = False
        return self._backoff(now_ms, "leader offsets unavailable")

    def on_fetch_response(
        self, fetch: FollowerFetch, partition: FetchResponsePartition, now_ms: int
    ) -> FollowerDecision:
        """The leader's answer for this partition to ``fetch``.

        Errors, as Kafka's fetcher treats them: FENCED_LEADER_EPOCH means our leader
        epoch is older than the leader's, so wait for the metadata that says so;
        UNKNOWN_LEADER_EPOCH (the leader has not seen our epoch yet) and
        NOT_LEADER_OR_FOLLOWER (the request raced a leader change) back off and retry,
        because the next registration resets this follower if leadership moved;
        OFFSET_OUT_OF_RANGE means our log end is outside the leader's log, which the
        leader's log start and end decide (see :meth:`on_leader_offsets`).
        """
        if fetch != self._in_flight:
            # An answer to a fetch from an older epoch, or from before a truncation.
            return self._decision(FollowerAction.IGNORE, reason="not the fetch in flight")
        self._in_flight = None
        if fetch.fetch_offset != self._log.log_end_offset:
            return self._decision(FollowerAction.IGNORE, reason="the log changed meanwhile")
        error = _error_code(partition.error_code)
        if error == ErrorCode.FENCED_LEADER_EPOCH:
            self._fenced = True
            return self._decision(
                FollowerAction.WAIT_FOR_METADATA,
                reason=f"leader epoch {self.leader_epoch} is fenced by the leader",
            )
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            if partition.log_start_offset >= 0:
                # Kafka's leader sends -1 here; our own leader may fill in its log start
                # and save the ListOffsets round trip. Its log end is not in a fetch
                # response, so only the "starts after our end" case is decided here.
                return self.on_leader_offsets(partition.log_start_offset, -1, now_ms)
            self._awaiting_offsets = True
            return self._decision(
                FollowerAction.LIST_LEADER_OFFSETS,
                reason=f"fetch offset {fetch.fetch_offset} out of range on the leader",
            )
        if error != ErrorCode.NONE:
            return self._backoff(now_ms, f"fetch error {error.name}")
        diverging = partition.diverging_epoch
        if diverging.epoch >= 0 and diverging.end_offset >= 0:
            return self._truncate_on_divergence(diverging.epoch, diverging.end_offset, now_ms)
        if diverging.epoch >= 0 or diverging.end_offset >= 0:
            # Half a diverging epoch says nothing we can truncate by; do not guess.
            return self._backoff(now_ms, "leader sent an incomplete diverging epoch")
        return self._decision(FollowerAction.APPEND)

    def update_high_watermark(self, leader_high_watermark: int) -> int:
        """After appending a response's records: our high watermark becomes the leader's,
        capped at our log end (we cannot vouch for records we do not hold).

        It never goes back here. A new leader may report a high watermark below ours
        until it has counted its followers, but every record below ours was committed
        and is on the new leader (a clean leader was in the ISR), so lowering it would
        only make committed records invisible again. Only a truncation lowers it.
        """
        candidate = min(leader_high_watermark, self._log.log_end_offset)
        if candidate > self._high_watermark:
            self._high_watermark = candidate
        return self._high_watermark

    def on_leader_offsets(
        self, leader_log_start_offset: int, leader_log_end_offset: int, now_ms: int
    ) -> FollowerDecision:
        """The leader's log start and end after OFFSET_OUT_OF_RANGE (Kafka's
        ``fetchOffsetAndTruncate``); ``leader_log_end_offset`` -1 when unknown.

        * The leader's log starts after our log end (we were away while it deleted old
          segments): empty our log and start it at the leader's log start.
        * The leader's log ends before ours: only possible without epoch information
          (an epoch-checked fetch offset is never past the leader's log end), after an
          unclean election; truncate to its end, flagged when below our high watermark.
        * Otherwise the error raced a change on the leader: fetch again.
        """
        self._awaiting_offsets = False
        self._in_flight = None
        log_end_offset = self._log.log_end_offset
        if leader_log_start_offset > log_end_offset:
            self._high_watermark = leader_log_start_offset
            return self._decision(
                FollowerAction.TRUNCATE_FULLY,
                offset=leader_log_start_offset,
                reason=f"leader log starts at {leader_log_start_offset}, after our end "
                f"{log_end_offset}",
            )
        if 0 <= leader_log_end_offset < log_end_offset:
            return self._truncate_to(
                leader_log_end_offset,
                f"leader log ends at {leader_log_end_offset}, before ours at {log_end_offset}",
            )
        return self._decision(FollowerAction.FETCH, reason="offset out of range raced")

    # --- Metadata --------------------------------------------------------------------

    def on_registration(self, registration: PartitionRegistration) -> FollowerRegistrationAction:
        """A registration of this partition from the metadata image.

        A newer leader epoch starts fetching over: from the new leader (or the same one,
        which may now have a different history), without the backoff or fence of the
        old epoch; an answer to a fetch of the old epoch is ignored. ISR-only changes
        (a newer partition epoch) do not concern a follower.
        """
        if registration.leader_epoch < self.leader_epoch:
            return FollowerRegistrationAction.STALE
        if self.replica_id not in registration.replicas or registration.leader == self.replica_id:
            return FollowerRegistrationAction.OBSOLETE
        if registration.leader_epoch == self.leader_epoch:
            return FollowerRegistrationAction.UNCHANGED
        self.leader_id = registration.leader
        self.leader_epoch = registration.leader_epoch
        self._in_flight = None
        self._awaiting_offsets = False
        self._fenced = False
        self._retry_at_ms = 0
        return FollowerRegistrationAction.APPLIED

    # --- Internals -------------------------------------------------------------------

    def _truncate_on_divergence(
        self, leader_epoch: int, leader_end_offset: int, now_ms: int
    ) -> FollowerDecision:
        log_end_offset = self._log.log_end_offset
        target = truncation_offset(self._log, leader_epoch, leader_end_offset)
        if target >= log_end_offset and self._log.latest_epoch() > leader_epoch:
            # Nothing to cut but our latest epoch, which began at our log end and holds
            # no record: a leadership here that appended nothing. The leader does not
            # know that epoch; as long as it stays in our cache every fetch names it and
            # gets the same answer, forever. Truncating to the log end drops just that
            # entry (Kafka's truncateTo does the same), and the next fetch names the
            # epoch before it. Found by the replication simulator, seed 373.
            return self._truncate_to(
                log_end_offset,
                f"diverging epoch {leader_epoch}@{leader_end_offset}: drop our unused "
                f"epoch {self._log.latest_epoch()} at the log end",
            )
        if target >= log_end_offset:
            # The leader says we diverge, but the epochs leave nothing to cut: retrying
            # at once would loop; a later fetch (or new metadata) settles it.
            return self._backoff(
                now_ms,
                f"diverging epoch {leader_epoch}@{leader_end_offset} truncates nothing",
            )
        return self._truncate_to(
            target, f"diverging epoch {leader_epoch} ends at {leader_end_offset} on the leader"
        )

    def _truncate_to(self, offset: int, reason: str) -> FollowerDecision:
        below = offset < self._high_watermark
        if below:
            self._high_watermark = offset
        return self._decision(
            FollowerAction.TRUNCATE, offset=offset, below_high_watermark=below, reason=reason
        )

    def _backoff(self, now_ms: int, reason: str) -> FollowerDecision:
        self._retry_at_ms = now_ms + self.replica_fetch_backoff_ms
        return self._decision(FollowerAction.BACKOFF, retry_at_ms=self._retry_at_ms, reason=reason)

    def _decision(
        self,
        action: FollowerAction,
        *,
        offset: int = -1,
        below_high_watermark: bool = False,
        retry_at_ms: int = 0,
        reason: str = "",
    ) -> FollowerDecision:
        return FollowerDecision(
            action, self._high_watermark, offset, below_high_watermark, retry_at_ms, reason
        )


def _error_code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR
