"""The KRaft state machine (KIP-595 with KIP-996 pre-vote), etcd-raft style.

Inputs go in through :meth:`RaftNode.step` (a message from a peer), :meth:`RaftNode.tick`
(time passed) and :meth:`RaftNode.propose` (a new entry on the leader); every input returns
a :class:`Ready` (``propose`` leaves its effects for the next ``Ready``). The driver must,
in this order: make ``Ready.persist`` durable (the quorum state: epoch, vote, leader), then
send ``Ready.messages``, then apply ``Ready.committed``. The log is written directly by the
core; the in-memory log counts as durable as soon as it is written (a storage-backed log
will add a flush point later).

States: Unattached (an epoch, maybe a vote, no leader), Prospective (asking pre-votes),
Candidate (asking votes in a new epoch), Leader, Follower (pulling from the leader with
Fetch), Resigned (a leader that lost check-quorum; it waits for an election).

Not yet: observers, voter changes (KIP-853), snapshots, EndQuorumEpoch (graceful
resignation), long-polling fetches, the mapping to the Kafka wire messages.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass, field

from odradek.core.invariant import invariant
from odradek.raft.log import UNDEFINED, Entry, RaftLog
from odradek.raft.messages import (
    BeginQuorumEpoch,
    FetchRequest,
    FetchResponse,
    Message,
    VoteRequest,
    VoteResponse,
)


class State(enum.Enum):
    UNATTACHED = "unattached"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"
    RESIGNED = "resigned"


@dataclass(frozen=True, slots=True)
class QuorumState:
    """What must survive a crash: Kafka's ``quorum-state`` file."""

    epoch: int
    voted_for: int | None
    leader: int | None


@dataclass(slots=True)
class Ready:
    """The outputs of one input. Persist first, then send, then apply."""

    messages: list[tuple[int, Message]] = field(default_factory=list)
    persist: QuorumState | None = None
    high_watermark: int | None = None  # set when it moved forward
    committed: list[Entry] = field(default_factory=list)


class RaftNode:
    """One voter of a static voter set."""

    MAX_FETCH_ENTRIES = 64

    def __init__(
        self,
        node_id: int,
        voters: frozenset[int],
        log: RaftLog,
        rng: random.Random,
        now_ms: int,
        election_timeout_ms: int = 1000,
        fetch_timeout_ms: int = 2000,
        quorum_state: QuorumState | None = None,
        fetch_backoff_ms: int = 50,
        request_timeout_ms: int = 300,
    ) -> None:
        invariant(node_id in voters, f"node {node_id} is not a voter of {sorted(voters)}")
        self.node_id = node_id
        self.voters = voters
        self.log = log
        self._rng = rng
        self.election_timeout_ms = election_timeout_ms
        self.fetch_timeout_ms = fetch_timeout_ms
        self.fetch_backoff_ms = fetch_backoff_ms
        self.request_timeout_ms = request_timeout_ms
        restored = quorum_state or QuorumState(0, None, None)
        self.epoch = restored.epoch
        self.voted_for = restored.voted_for
        self.leader: int | None = None
        self.state = State.UNATTACHED
        self.high_watermark = 0
        self._ready = Ready()
        self._election_deadline_ms = 0
        self._reset_election_timer(now_ms)
        # Prospective / Candidate: who granted.
        self._granted: set[int] = set()
        # Leader: per-voter end offset known to match ours, and last fetch time.
        self._matched: dict[int, int] = {}
        self._last_fetch_ms: dict[int, int] = {}
        self._epoch_start_offset = 0
        self._begin_sent_ms: dict[int, int] = {}
        self._fetched_this_epoch: set[int] = set()
        # Follower: the deadline for hearing from the leader and the fetch in flight.
        self._fetch_deadline_ms = 0
        self._last_leader_contact_ms: int | None = None
        self._fetch_id = 0
        self._fetch_in_flight: int | None = None
        self._fetch_sent_ms = 0
        self._next_fetch_ms = 0
        if restored.leader == node_id:
            # We led this epoch before a restart; we cannot lead it again.
            self.state = State.RESIGNED

    # ------------------------------------------------------------------ public API

    @property
    def quorum_state(self) -> QuorumState:
        return QuorumState(self.epoch, self.voted_for, self.leader)

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def propose(self, payload: bytes) -> int | None:
        """Append ``payload`` on the leader and return its offset; None elsewhere."""
        if self.state is not State.LEADER:
            return None
        offset = self.log.end_offset()
        self.log.append([Entry(offset, self.epoch, payload)])
        self._matched[self.node_id] = self.log.end_offset()
        self._advance_leader_high_watermark()
        return offset

    def tick(self, now_ms: int) -> Ready:
        if self.state in (State.UNATTACHED, State.RESIGNED):
            if now_ms >= self._election_deadline_ms:
                self._become_prospective(now_ms)
        elif self.state is State.PROSPECTIVE:
            if now_ms >= self._election_deadline_ms:
                self._become_prospective(now_ms)  # ask again
        elif self.state is State.CANDIDATE:
            if now_ms >= self._election_deadline_ms:
                # KIP-996: a candidate that timed out goes back to asking pre-votes.
                self._become_prospective(now_ms)
        elif self.state is State.FOLLOWER:
            if now_ms >= self._fetch_deadline_ms:
                self._become_prospective(now_ms)
            elif self._fetch_in_flight is None:
                if now_ms >= self._next_fetch_ms:
                    self._send_fetch(now_ms)
            elif now_ms - self._fetch_sent_ms >= self.request_timeout_ms:
                self._send_fetch(now_ms)
        elif self.state is State.LEADER:
            self._leader_tick(now_ms)
        return self._take_ready()

    def step(self, message: Message, from_node: int, now_ms: int) -> Ready:
        if from_node in self.voters and from_node != self.node_id:
            if isinstance(message, VoteRequest):
                self._on_vote_request(message, from_node, now_ms)
            elif isinstance(message, VoteResponse):
                self._on_vote_response(message, from_node, now_ms)
            elif isinstance(message, BeginQuorumEpoch):
                self._on_begin_quorum_epoch(message, now_ms)
            elif isinstance(message, FetchRequest):
                self._on_fetch_request(message, from_node, now_ms)
            else:
                self._on_fetch_response(message, from_node, now_ms)
        return self._take_ready()

    # ------------------------------------------------------------------ transitions

    def _take_ready(self) -> Ready:
        ready, self._ready = self._ready, Ready()
        return ready

    def _persist(self) -> None:
        self._ready.persist = self.quorum_state

    def _send(self, to: int, message: Message) -> None:
        self._ready.messages.append((to, message))

    def _reset_election_timer(self, now_ms: int) -> None:
        jitter = self._rng.randrange(self.election_timeout_ms)
        self._election_deadline_ms = now_ms + self.election_timeout_ms + jitter

    def _others(self) -> list[int]:
        return sorted(self.voters - {self.node_id})

    def _become_unattached(self, epoch: int, now_ms: int) -> None:
        invariant(epoch > self.epoch, f"unattached at {epoch} from epoch {self.epoch}")
        self.epoch = epoch
        self.voted_for = None
        self.leader = None
        self.state = State.UNATTACHED
        self._persist()
        self._reset_election_timer(now_ms)

    def _become_follower(self, epoch: int, leader: int, now_ms: int) -> None:
        invariant(epoch >= self.epoch, f"follower at {epoch} from epoch {self.epoch}")
        invariant(
            not (epoch == self.epoch and self.state is State.LEADER),
            f"node {self.node_id} leads epoch {epoch} and was told {leader} leads it",
        )
        invariant(
            not (epoch == self.epoch and self.leader not in (None, leader)),
            f"two leaders {self.leader} and {leader} in epoch {epoch}",
        )
        if epoch > self.epoch:
            self.voted_for = None
        self.epoch = epoch
        self.leader = leader
        self.state = State.FOLLOWER
        self._persist()
        self._fetch_deadline_ms = now_ms + self.fetch_timeout_ms
        self._last_leader_contact_ms = now_ms
        self._send_fetch(now_ms)

    def _become_prospective(self, now_ms: int) -> None:
        self.state = State.PROSPECTIVE
        self.leader = None
        self._granted = {self.node_id}
        self._reset_election_timer(now_ms)
        request = VoteRequest(
            self.epoch, self.node_id, self.log.last_epoch(), self.log.end_offset(), True
        )
        for voter in self._others():
            self._send(voter, request)
        self._check_pre_votes(now_ms)

    def _check_pre_votes(self, now_ms: int) -> None:
        if self.state is State.PROSPECTIVE and len(self._granted) >= self.majority:
            self._become_candidate(now_ms)

    def _become_candidate(self, now_ms: int) -> None:
        self.epoch += 1
        self.voted_for = self.node_id
        self.leader = None
        self.state = State.CANDIDATE
        self._persist()
        self._granted = {self.node_id}
        self._reset_election_timer(now_ms)
        request = VoteRequest(
            self.epoch, self.node_id, self.log.last_epoch(), self.log.end_offset(), False
        )
        for voter in self._others():
            self._send(voter, request)
        self._check_votes(now_ms)

    def _check_votes(self, now_ms: int) -> None:
        if self.state is State.CANDIDATE and len(self._granted) >= self.majority:
            self._become_leader(now_ms)

    def _become_leader(self, now_ms: int) -> None:
        self.state = State.LEADER
        self.leader = self.node_id
        self._persist()
        # The leader-change entry: the first entry of our epoch, so that the high
        # watermark can move past entries of earlier epochs (Raft's commit rule).
        self._epoch_start_offset = self.log.end_offset()
        self.log.append([Entry(self._epoch_start_offset, self.epoch, b"", control=True)])
        self._matched = {voter: 0 for voter in self.voters}
        self._matched[self.node_id] = self.log.end_offset()
        self._last_fetch_ms = {voter: now_ms for voter in self.voters}
        self._begin_sent_ms = {}
        self._fetched_this_epoch = set()
        for voter in self._others():
            self._send(voter, BeginQuorumEpoch(self.epoch, self.node_id))
            self._begin_sent_ms[voter] = now_ms
        self._advance_leader_high_watermark()

    def _leader_tick(self, now_ms: int) -> None:
        # Check-quorum: resign when a majority (counting ourselves) has not fetched lately.
        recent = sum(
            1
            for voter in self.voters
            if voter == self.node_id or now_ms - self._last_fetch_ms[voter] < self.fetch_timeout_ms
        )
        if recent < self.majority:
            self.state = State.RESIGNED
            self._reset_election_timer(now_ms)
            return
        # A voter that has not fetched in this epoch may have missed BeginQuorumEpoch.
        for voter in self._others():
            if voter in self._fetched_this_epoch:
                continue
            if now_ms - self._begin_sent_ms[voter] >= self.election_timeout_ms // 2:
                self._send(voter, BeginQuorumEpoch(self.epoch, self.node_id))
                self._begin_sent_ms[voter] = now_ms

    def _set_high_watermark(self, value: int) -> None:
        if value <= self.high_watermark:
            return
        invariant(
            value <= self.log.end_offset(),
            f"high watermark {value} past the log end {self.log.end_offset()}",
        )
        old = self.high_watermark
        self.high_watermark = value
        self._ready.high_watermark = value
        self._ready.committed.extend(self.log.entries_from(old, value - old))

    def _advance_leader_high_watermark(self) -> None:
        offsets = sorted((self._matched[voter] for voter in self.voters), reverse=True)
        candidate = offsets[self.majority - 1]
        # Only an offset past our own leader-change entry commits (it is of our epoch).
        if candidate > self._epoch_start_offset:
            self._set_high_watermark(candidate)

    # ------------------------------------------------------------------ votes

    def _log_is_up_to_date(self, last_epoch: int, last_offset: int) -> bool:
        return (last_epoch, last_offset) >= (self.log.last_epoch(), self.log.end_offset())

    def _on_vote_request(self, request: VoteRequest, sender: int, now_ms: int) -> None:
        if request.pre_vote:
            # A pre-vote changes nothing here. Refuse when our leader is alive (KIP-996),
            # so that a node coming back from a partition cannot disrupt a healthy quorum.
            leader_alive = self.state is State.LEADER or (
                self.state is State.FOLLOWER
                and self._last_leader_contact_ms is not None
                and now_ms - self._last_leader_contact_ms < self.fetch_timeout_ms
            )
            granted = (
                request.epoch >= self.epoch
                and not leader_alive
                and self._log_is_up_to_date(request.last_epoch, request.last_offset)
            )
            self._send(sender, VoteResponse(self.epoch, granted, True, self.leader))
            return
        if request.epoch > self.epoch:
            self._become_unattached(request.epoch, now_ms)
        granted = (
            request.epoch == self.epoch
            and self.state is State.UNATTACHED
            and self.voted_for in (None, request.candidate)
            and self._log_is_up_to_date(request.last_epoch, request.last_offset)
        )
        if granted:
            if self.voted_for is None:
                self.voted_for = request.candidate
                self._persist()
            self._reset_election_timer(now_ms)
        self._send(sender, VoteResponse(self.epoch, granted, False, self.leader))

    def _on_vote_response(self, response: VoteResponse, sender: int, now_ms: int) -> None:
        if response.epoch > self.epoch:
            if response.leader is not None and response.leader != self.node_id:
                self._become_follower(response.epoch, response.leader, now_ms)
            else:
                self._become_unattached(response.epoch, now_ms)
            return
        if response.epoch < self.epoch or not response.granted:
            return
        if response.pre_vote and self.state is State.PROSPECTIVE:
            self._granted.add(sender)
            self._check_pre_votes(now_ms)
        elif not response.pre_vote and self.state is State.CANDIDATE:
            self._granted.add(sender)
            self._check_votes(now_ms)

    # ------------------------------------------------------------------ replication

    def _on_begin_quorum_epoch(self, message: BeginQuorumEpoch, now_ms: int) -> None:
        if message.epoch < self.epoch:
            return
        if message.epoch == self.epoch and self.state is State.FOLLOWER:
            return  # already following; the fetch loop is running
        self._become_follower(message.epoch, message.leader, now_ms)

    def _send_fetch(self, now_ms: int) -> None:
        invariant(self.leader is not None, "fetch without a leader")
        assert self.leader is not None
        self._fetch_id += 1
        self._fetch_in_flight = self._fetch_id
        self._fetch_sent_ms = now_ms
        request = FetchRequest(
            self.epoch, self.node_id, self.log.end_offset(), self.log.last_epoch(), self._fetch_id
        )
        self._send(self.leader, request)

    def _on_fetch_request(self, request: FetchRequest, sender: int, now_ms: int) -> None:
        if request.epoch > self.epoch:
            self._become_unattached(request.epoch, now_ms)
        if self.state is not State.LEADER or request.epoch < self.epoch:
            # Tell the fetcher who leads (if we know) so that it catches up on the epoch. A
            # resigned leader names no leader: its answers must not keep followers attached.
            leader = None if self.state is State.RESIGNED else self.leader
            self._send(
                sender,
                FetchResponse(self.epoch, leader, self.high_watermark, (), request.request_id),
            )
            return
        self._last_fetch_ms[sender] = now_ms
        self._fetched_this_epoch.add(sender)
        diverging = self._diverging(request.fetch_offset, request.last_fetched_epoch)
        if diverging is not None:
            epoch, end_offset = diverging
            self._send(
                sender,
                FetchResponse(
                    self.epoch,
                    self.node_id,
                    self.high_watermark,
                    (),
                    request.request_id,
                    diverging_epoch=epoch,
                    diverging_end_offset=end_offset,
                ),
            )
            return
        # A valid fetch proves the follower's log equals ours below fetch_offset.
        if request.fetch_offset > self._matched[sender]:
            self._matched[sender] = request.fetch_offset
            self._advance_leader_high_watermark()
        entries = tuple(self.log.entries_from(request.fetch_offset, self.MAX_FETCH_ENTRIES))
        self._send(
            sender,
            FetchResponse(
                self.epoch, self.node_id, self.high_watermark, entries, request.request_id
            ),
        )

    def _diverging(self, fetch_offset: int, last_fetched_epoch: int) -> tuple[int, int] | None:
        """None when (fetch_offset, last_fetched_epoch) is a prefix of our log."""
        if fetch_offset == 0:
            return None
        epoch, end_offset = self.log.end_offset_for_epoch(last_fetched_epoch)
        if epoch == last_fetched_epoch and end_offset >= fetch_offset:
            return None
        return (epoch, max(end_offset, 0))

    def _on_fetch_response(self, response: FetchResponse, sender: int, now_ms: int) -> None:
        if response.epoch > self.epoch:
            if response.leader is not None and response.leader != self.node_id:
                self._become_follower(response.epoch, response.leader, now_ms)
            else:
                self._become_unattached(response.epoch, now_ms)
            return
        if (
            self.state is not State.FOLLOWER
            or response.epoch < self.epoch
            or sender != self.leader
            or response.leader != self.leader
            or response.request_id != self._fetch_in_flight
        ):
            return  # stale or for another epoch
        self._fetch_in_flight = None
        self._fetch_deadline_ms = now_ms + self.fetch_timeout_ms
        self._last_leader_contact_ms = now_ms
        if response.diverging_epoch is not None:
            self._truncate_to_diverging(response.diverging_epoch, response.diverging_end_offset)
            self._send_fetch(now_ms)
            return
        if response.entries:
            invariant(
                response.entries[0].offset == self.log.end_offset(),
                "fetched entries do not start at the log end",
            )
            self.log.append(response.entries)
        self._set_high_watermark(min(response.high_watermark, self.log.end_offset()))
        if response.entries:
            self._send_fetch(now_ms)
        else:
            self._next_fetch_ms = now_ms + self.fetch_backoff_ms

    def _truncate_to_diverging(self, epoch: int, end_offset: int | None) -> None:
        leader_end = end_offset if end_offset is not None else 0
        local_epoch, local_end = self.log.end_offset_for_epoch(epoch)
        target = leader_end if local_epoch == UNDEFINED else min(local_end, leader_end)
        target = max(target, 0)
        invariant(
            target >= self.high_watermark,
            f"node {self.node_id} truncating to {target} below its high watermark "
            f"{self.high_watermark}",
        )
        self.log.truncate_to(target)
