"""The KRaft state machine (KIP-595, KIP-630, KIP-853, KIP-996), etcd-raft style.

Inputs go in through :meth:`RaftNode.step` (a message from a peer), :meth:`RaftNode.tick`
(time passed) and the leader's commands (:meth:`~RaftNode.propose`,
:meth:`~RaftNode.add_voter`, :meth:`~RaftNode.remove_voter`, :meth:`~RaftNode.update_voter`,
:meth:`~RaftNode.resign`), whose effects come out of the next :meth:`RaftNode.ready`.
Every input returns a :class:`~odradek.raft.ready.Ready`. The driver must, in this order: make
``Ready.persist`` durable (the quorum state: epoch, vote, leader), then send
``Ready.messages``, then apply ``Ready.snapshot`` (when set, reload the state machine
from it) and ``Ready.committed``. ``Ready.flush``, when set, asks the driver to make
the log durable up to that offset, whenever it likes (on another thread, one fsync for
many Readys), and then to say so with :meth:`RaftNode.flushed`, whose Ready is carried
out like any other.

The core writes the log itself (the writes reach the page cache, not the disk) and
never waits for the disk: until :meth:`RaftNode.flushed` says an entry is durable, the
leader does not count its own copy towards the high watermark (Kafka's rule: the
leader's end offset counts once flushed) and a follower or observer sends no Fetch
that reports it (the fetch offset is what the leader counts). So no message in any
Ready depends on an entry that a crash could still take away.

Roles (:mod:`odradek.raft.roles`, Kafka's ``EpochState`` classes): Unattached (an
epoch, maybe a vote, no leader), Prospective (asking pre-votes), Candidate (asking votes
in a new epoch), Leader, Follower (pulling from the leader with Fetch), Resigned (a
leader that stepped down; it waits for the next election). The node holds one role
object, which holds only what that role needs; every change of role goes through
:meth:`RaftNode._transition`, which refuses any the table of transitions does not list.

Voters and observers (KIP-853): the voter set in force is the last ``VotersRecord`` in
the log (committed or not), else the one in the latest snapshot, else the static
``controller.quorum.voters``. A replica whose (node id, directory id) is not in that set
is an observer: it fetches from the leader like a follower but never votes, never asks
for votes and does not count towards the high watermark. Membership changes one voter
at a time, only once the leader has committed an entry of its own epoch and no earlier
change is uncommitted.

Where the rules live. This module holds the node's state, its public inputs, the
transitions between roles and the elections (pre-votes, votes, BeginQuorumEpoch and
EndQuorumEpoch), which decide the role everything else acts in. Around it, each with
what it owns:

* :mod:`odradek.raft.ready`: what the core hands its driver (``Ready``, ``LogFlush``,
  ``QuorumState``) and the answers to the leader's commands;
* :mod:`odradek.raft.leader_replication`: the leader's side of replication (answering
  Fetch and FetchSnapshot, parked fetches, the high watermark, check-quorum);
* :mod:`odradek.raft.fetcher`: a replica's fetch loop (Fetch and FetchSnapshot requests,
  appending, truncating to a diverging epoch, installing a snapshot) and the fetch in
  flight;
* :mod:`odradek.raft.membership`: when the leader may start a KIP-853 voter change
  (AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter) and the VotersRecord that makes it;
* :mod:`odradek.raft.voter_history`: the voter set at each offset of the log;
* :mod:`odradek.raft.roles`: one state class per role and the table of transitions.

The functions of ``leader_replication``, ``fetcher`` and ``membership`` take the node
(as etcd-io/raft's ``stepLeader`` and ``stepFollower`` take its ``raft``) and use its
primitives below (``_send``, ``_persist``, ``_transition`` and the ``_become_*``
methods, ``_append``, ``_truncate``, ``_set_high_watermark``): those are for this
package only, never for a driver.
"""

from __future__ import annotations

import random
import uuid
from typing import Never, NoReturn

from odradek.core.errors import InvariantError
from odradek.core.invariant import invariant
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages.leader_change_message import LeaderChangeMessage
from odradek.protocol.messages.leader_change_message import Voter as LeaderChangeVoter
from odradek.protocol.record_batch import (
    ControlType,
)
from odradek.raft import membership
from odradek.raft.fetcher import (
    Fetching,
    ask_a_bootstrap_server,
    fetch_if_due,
    observer_tick,
    on_fetch_response,
    on_fetch_snapshot_response,
    send_fetch,
)
from odradek.raft.leader_replication import (
    advance_high_watermark,
    answer_parked,
    describe_quorum,
    leader_tick,
    on_fetch_request,
    on_fetch_snapshot_request,
    send_begin,
)
from odradek.raft.log import Entry, RaftLog, SnapshotId
from odradek.raft.messages import (
    BeginQuorumEpoch,
    EndQuorumEpoch,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    VoteRequest,
    VoteResponse,
)
from odradek.raft.ready import (
    LogFlush,
    QuorumDescription,
    QuorumState,
    Ready,
    VoterChangeOutcome,
)
from odradek.raft.roles import (
    CandidateState,
    FollowerState,
    LeaderState,
    ProspectiveState,
    ResignedState,
    Role,
    UnattachedState,
    check_transition,
)
from odradek.raft.roles import State as State
from odradek.raft.snapshot import encode_snapshot
from odradek.raft.voter_history import VoterHistory
from odradek.raft.voters import ZERO_DIRECTORY, ReplicaKey, Voter, VoterSet


class RaftNode:
    """One replica of the metadata log: a voter or an observer."""

    MAX_FETCH_ENTRIES = 64
    SNAPSHOT_CHUNK_BYTES = 1 << 20

    def __init__(
        self,
        node_id: int,
        log: RaftLog,
        rng: random.Random,
        now_ms: int,
        *,
        directory_id: uuid.UUID = ZERO_DIRECTORY,
        static_voters: VoterSet | None = None,
        bootstrap_servers: int = 0,
        election_timeout_ms: int = 1000,
        fetch_timeout_ms: int = 2000,
        quorum_state: QuorumState | None = None,
        fetch_backoff_ms: int = 50,
        request_timeout_ms: int = 300,
        fetch_max_wait_ms: int = 500,
    ) -> None:
        invariant(static_voters is None or len(static_voters) > 0, "an empty static voter set")
        self.node_id = node_id
        self.key = ReplicaKey(node_id, directory_id)
        self.log = log
        self._rng = rng
        self.election_timeout_ms = election_timeout_ms
        self.fetch_timeout_ms = fetch_timeout_ms
        self.fetch_backoff_ms = fetch_backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.bootstrap_servers = bootstrap_servers
        self._voter_history = VoterHistory(static_voters)
        self._voter_history.load(log)
        restored = quorum_state or QuorumState(0, None, None)
        # Everything in a snapshot is committed; entries after it wait for the leader.
        self.high_watermark = log.start_offset()
        self._ready = Ready()
        # What a restart finds is on the disk: the log as it was opened is durable.
        self._flushed_end = log.end_offset()
        self._log_generation = 0  # bumped by every truncation (see LogFlush)
        self._flush_asked: LogFlush | None = None
        self._fetching = Fetching(next_fetch_ms=now_ms, bootstrap_turn=node_id)
        deadline_ms = self._election_deadline(now_ms)
        self.role: Role = UnattachedState(restored.epoch, restored.voted_for, deadline_ms)
        if restored.leader == node_id:
            # We led this epoch before a restart; we cannot lead it again. The role is
            # set, not transitioned to: this is where the node starts (Kafka's
            # QuorumState.initialize does the same).
            self.role = ResignedState(restored.epoch, restored.voted_for, None, deadline_ms)
        elif restored.leader is not None:
            self._become_follower(restored.epoch, restored.leader, now_ms)
            self._ready.persist = None  # nothing changed that needs persisting

    # ------------------------------------------------------------------ public API

    @property
    def state(self) -> State:
        return self.role.STATE

    @property
    def epoch(self) -> int:
        return self.role.epoch

    @property
    def voted_for(self) -> ReplicaKey | None:
        return self.role.voted_for

    @property
    def leader(self) -> int | None:
        return self.role.leader

    @property
    def quorum_state(self) -> QuorumState:
        role = self.role
        return QuorumState(role.epoch, role.voted_for, role.leader)

    @property
    def voters(self) -> VoterSet:
        """The voter set in force: the last one in the log (committed or not)."""
        return self._voter_history.latest

    @property
    def is_voter(self) -> bool:
        return self.voters.is_voter(self.key)

    @property
    def dynamic(self) -> bool:
        """True for a KIP-853 quorum (voters in the log), False for static voters."""
        return self._voter_history.static is None

    @property
    def majority(self) -> int:
        return self.voters.majority

    def ready(self, now_ms: int) -> Ready:
        """The effects of the commands given since the last Ready."""
        return self._take_ready(now_ms)

    def flushed(self, flush: LogFlush, now_ms: int) -> Ready:
        """The driver's word that ``flush`` is done: the log is durable below its end
        offset. The leader counts its own copy towards the high watermark from now on;
        a follower's Fetch that waited for it goes out."""
        if flush.log_generation == self._log_generation and flush.end_offset > self._flushed_end:
            invariant(
                flush.end_offset <= self.log.end_offset(),
                f"flushed to {flush.end_offset} past the log end {self.log.end_offset()}",
            )
            self._flushed_end = flush.end_offset
            role = self.role
            if isinstance(role, LeaderState):
                advance_high_watermark(self, role, now_ms)
            elif (
                self._fetching.after_flush
                and self._flushed_end == self.log.end_offset()
                and (
                    isinstance(role, FollowerState)
                    or (isinstance(role, UnattachedState) and not self.is_voter)
                )
            ):
                send_fetch(self, now_ms)
        return self._take_ready(now_ms)

    def propose(self, records: list[bytes], now_ms: int) -> int | None:
        """Append one batch of ``records`` on the leader and return its base offset; None
        on any other node. The batch commits or vanishes as a whole."""
        leader = self.role
        if not isinstance(leader, LeaderState) or not records:
            return None
        offset = self.log.end_offset()
        self._append([Entry(offset, leader.epoch, tuple(records))])
        answer_parked(self, leader, now_ms)
        return offset

    def resign(self, now_ms: int) -> None:
        """Step down on purpose (shutdown): followers elect a successor without waiting
        for their fetch timeout (EndQuorumEpoch)."""
        leader = self.role
        if not isinstance(leader, LeaderState):
            return
        successors = sorted(
            (v for v in self.voters.ids if v != self.node_id),
            key=lambda v: (-leader.progress_of(v).end_offset, v),
        )
        for voter in successors:
            self._send(voter, EndQuorumEpoch(leader.epoch, self.node_id, tuple(successors)))
        self._become_resigned(leader, now_ms)

    def add_voter(self, voter: Voter, now_ms: int) -> VoterChangeOutcome:
        """AddRaftVoter: make a caught-up observer a voter."""
        return membership.add_voter(self, voter, now_ms)

    def remove_voter(self, key: ReplicaKey, now_ms: int) -> VoterChangeOutcome:
        """RemoveRaftVoter. Removing the leader makes it resign once the change commits."""
        return membership.remove_voter(self, key, now_ms)

    def update_voter(self, voter: Voter, now_ms: int) -> VoterChangeOutcome:
        """UpdateRaftVoter: a voter's new endpoints."""
        return membership.update_voter(self, voter, now_ms)

    def create_snapshot(
        self, end_offset: int, records: list[bytes], last_contained_ms: int
    ) -> SnapshotId:
        """Write a snapshot of the state below ``end_offset`` (committed, on an entry
        boundary) and drop the log below it."""
        invariant(
            end_offset <= self.high_watermark,
            f"snapshot at {end_offset} past the high watermark {self.high_watermark}",
        )
        last = self.log.entry_at(end_offset - 1)
        invariant(
            last is not None and last.next_offset == end_offset,
            f"snapshot at {end_offset} is not on an entry boundary of the log",
        )
        assert last is not None
        snapshot_id = SnapshotId(end_offset, last.epoch)
        voters = self._voter_history.at(end_offset) if self.dynamic else None
        data = encode_snapshot(snapshot_id, records, voters, last_contained_ms)
        self.log.write_snapshot(snapshot_id, data)
        self.log.delete_before_snapshot()
        # The snapshot is durable and holds everything below its end.
        self._flushed_end = max(self._flushed_end, end_offset)
        self._voter_history.compact(end_offset, voters)
        return snapshot_id

    def describe(self, now_ms: int) -> QuorumDescription:
        return describe_quorum(self)

    def tick(self, now_ms: int) -> Ready:
        role = self.role
        if isinstance(role, LeaderState):
            leader_tick(self, role, now_ms)
        elif not self.is_voter:
            observer_tick(self, now_ms)
        elif isinstance(role, (UnattachedState, ResignedState)):
            # Only an observer's Unattached state has no deadline, and the voter set
            # changes only while following or leading: a voter never holds one.
            deadline_ms = role.election_deadline_ms
            invariant(deadline_ms is not None, f"voter {self.node_id} has no election deadline")
            assert deadline_ms is not None
            # The only voter has nobody to wait for (a single-node cluster restarts
            # without sitting out an election timeout).
            alone = self.voters.ids == {self.node_id}
            if now_ms >= deadline_ms or alone:
                self._become_prospective(now_ms)
        elif isinstance(role, (ProspectiveState, CandidateState)):
            # KIP-996: a candidate that timed out goes back to asking pre-votes.
            if now_ms >= role.election_deadline_ms:
                self._become_prospective(now_ms)
        elif now_ms >= role.fetch_deadline_ms:
            self._become_prospective(now_ms)
        else:
            fetch_if_due(self, now_ms)
        return self._take_ready(now_ms)

    def silent_voters(self) -> set[int]:
        """On the leader: the other voters that have not fetched in this epoch (every
        live voter does within moments of BeginQuorumEpoch). Empty elsewhere."""
        leader = self.role
        if not isinstance(leader, LeaderState):
            return set()
        return set(self._others()) - leader.fetched_this_epoch

    def leader_unreachable(self, leader: int, now_ms: int) -> Ready:
        """The shell's word that ``leader`` refused or reset our fetch connection: its
        process is gone (a partition drops packets and is noticed by the fetch timeout
        instead). A follower of ``leader`` stops counting it as alive, so it grants
        pre-votes, and asks for them itself after a short random backoff rather than
        ``controller.quorum.fetch.timeout.ms``. A fetch in flight to it has failed: the
        next one goes out after the fetch backoff (to another replica, when looking for
        the leader) instead of after the request timeout; an observer that probed a dead
        voter so found the new leader only seconds later. Only timing changes:
        elections stay pre-voted and voted as always, so a wrong report costs one failed
        pre-vote."""
        role = self.role
        if isinstance(role, FollowerState) and role.leader == leader:
            role.last_leader_contact_ms = None
            backoff = self._rng.randrange(max(1, self.election_timeout_ms // 4))
            role.fetch_deadline_ms = min(role.fetch_deadline_ms, now_ms + backoff)
        fetching = self._fetching
        if fetching.in_flight is not None and fetching.sent_to == leader:
            fetching.in_flight = None
            fetching.next_fetch_ms = now_ms + self.fetch_backoff_ms
        return self._take_ready(now_ms)

    def step(self, message: Message, from_node: int, now_ms: int) -> Ready:
        # One case per member of Message: mypy checks that none is missing, and an
        # object of any other type is a bug in the caller, not a message to guess at.
        match message:
            case VoteRequest():
                self._on_vote_request(message, now_ms)
            case VoteResponse():
                self._on_vote_response(message, from_node, now_ms)
            case BeginQuorumEpoch():
                self._on_begin_quorum_epoch(message, now_ms)
            case EndQuorumEpoch():
                self._on_end_quorum_epoch(message, now_ms)
            case FetchRequest():
                on_fetch_request(self, message, now_ms)
            case FetchResponse():
                on_fetch_response(self, message, now_ms)
            case FetchSnapshotRequest():
                on_fetch_snapshot_request(self, message, now_ms)
            case FetchSnapshotResponse():
                on_fetch_snapshot_response(self, message, now_ms)
            case _:
                _not_a_message(message)
        return self._take_ready(now_ms)

    # ------------------------------------------------------------------ log and voters

    def _append(self, entries: list[Entry] | tuple[Entry, ...]) -> None:
        self.log.append(entries)
        self._voter_history.record(entries)

    def _truncate(self, offset: int) -> None:
        if offset < self.log.end_offset():
            self._log_generation += 1
        self.log.truncate_to(offset)
        self._flushed_end = min(self._flushed_end, offset)
        self._voter_history.truncate(offset)

    def _reset_to_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Replace the log with a snapshot installed from the leader: everything in it is
        committed, and the driver reloads its state machine from it first."""
        self.log.write_snapshot(snapshot_id, data)
        self.log.reset_to_snapshot(snapshot_id)
        self._log_generation += 1
        self._flushed_end = self.log.end_offset()
        self._voter_history.load(self.log)
        self.high_watermark = snapshot_id.end_offset
        self._ready.high_watermark = snapshot_id.end_offset
        self._ready.committed = []
        self._ready.snapshot = snapshot_id

    # ------------------------------------------------------------------ transitions

    def _take_ready(self, now_ms: int) -> Ready:
        end = self.log.end_offset()
        if end > self._flushed_end:
            flush = LogFlush(end, self._log_generation)
            if flush != self._flush_asked:
                self._flush_asked = flush
                self._ready.flush = flush
        ready, self._ready = self._ready, Ready()
        return ready

    def _tail_unflushed(self) -> bool:
        return self.log.end_offset() > self._flushed_end

    def _persist(self) -> None:
        self._ready.persist = self.quorum_state

    def _send(self, to: int, message: Message) -> None:
        self._ready.messages.append((to, message))

    def _election_deadline(self, now_ms: int) -> int:
        jitter = self._rng.randrange(self.election_timeout_ms)
        return now_ms + self.election_timeout_ms + jitter

    def _others(self) -> list[int]:
        return sorted(self.voters.ids - {self.node_id})

    def _transition(self, new: Role) -> None:
        """The one way to change role: refuse any move the table does not list."""
        old = self.role
        check_transition(old, new)
        self._fetching.after_flush = False  # a new role sends its own first fetch
        if isinstance(old, LeaderState):
            # Pending voter changes fail (they may still commit under the next leader:
            # the client learns it from DescribeQuorum).
            for offset in old.pending_changes:
                self._ready.voter_changes.append((offset, ErrorCode.NOT_LEADER_OR_FOLLOWER))
        self.role = new

    def _become_unattached(self, epoch: int, now_ms: int) -> None:
        invariant(epoch > self.epoch, f"unattached at {epoch} from epoch {self.epoch}")
        self._transition(UnattachedState(epoch, None, self._election_deadline(now_ms)))
        self._fetching.in_flight = None
        self._persist()

    def _become_resigned(self, leader: LeaderState, now_ms: int) -> None:
        deadline_ms = self._election_deadline(now_ms)
        self._transition(ResignedState(leader.epoch, leader.voted_for, leader.leader, deadline_ms))

    def _become_follower(self, epoch: int, leader: int, now_ms: int) -> None:
        invariant(epoch >= self.epoch, f"follower at {epoch} from epoch {self.epoch}")
        invariant(
            not (epoch == self.epoch and isinstance(self.role, LeaderState)),
            f"node {self.node_id} leads epoch {epoch} and was told {leader} leads it",
        )
        invariant(
            not (epoch == self.epoch and self.leader not in (None, leader)),
            f"two leaders {self.leader} and {leader} in epoch {epoch}",
        )
        voted_for = self.voted_for if epoch == self.epoch else None
        # Only a successful fetch proves the leader alive (Kafka's hasFetchedFromLeader):
        # a leader learnt from a hint may be gone, and refusing pre-votes for it would
        # keep the quorum leaderless. So the new role has no leader contact yet.
        self._transition(FollowerState(epoch, voted_for, leader, now_ms + self.fetch_timeout_ms))
        self._persist()
        send_fetch(self, now_ms)

    def _become_prospective(self, now_ms: int) -> None:
        old = self.role
        failed_round = isinstance(old, (ProspectiveState, CandidateState))
        deadline_ms = self._election_deadline(now_ms)
        self._transition(ProspectiveState(old.epoch, old.voted_for, deadline_ms, {self.node_id}))
        self._fetching.in_flight = None
        for voter in self._others():
            self._send(voter, self._vote_request(voter, pre_vote=True))
        if failed_round and self.bootstrap_servers:
            ask_a_bootstrap_server(self, now_ms)
        self._check_pre_votes(now_ms)

    def _vote_request(self, voter: int, pre_vote: bool) -> VoteRequest:
        known = self.voters.get(voter)
        key = known.key if known is not None else ReplicaKey(voter)
        return VoteRequest(
            self.epoch, self.key, key, self.log.last_epoch(), self.log.end_offset(), pre_vote
        )

    def _check_pre_votes(self, now_ms: int) -> None:
        role = self.role
        if isinstance(role, ProspectiveState) and len(role.granted) >= self.majority:
            self._become_candidate(role, now_ms)

    def _become_candidate(self, prospective: ProspectiveState, now_ms: int) -> None:
        deadline_ms = self._election_deadline(now_ms)
        epoch = prospective.epoch + 1
        self._transition(CandidateState(epoch, self.key, deadline_ms, {self.node_id}))
        self._persist()
        for voter in self._others():
            self._send(voter, self._vote_request(voter, pre_vote=False))
        self._check_votes(now_ms)

    def _check_votes(self, now_ms: int) -> None:
        role = self.role
        if isinstance(role, CandidateState) and len(role.granted) >= self.majority:
            self._become_leader(role, now_ms)

    def _become_leader(self, candidate: CandidateState, now_ms: int) -> None:
        # The leader-change entry: the first entry of our epoch, so that the high
        # watermark can move past entries of earlier epochs (Raft's commit rule).
        epoch_start_offset = self.log.end_offset()
        leader = LeaderState(candidate.epoch, candidate.voted_for, self.node_id, epoch_start_offset)
        self._transition(leader)
        self._persist()
        for voter in self.voters:
            leader.progress_of(voter.node_id, voter.directory_id).last_fetch_ms = now_ms
        leader.progress_of(self.node_id).end_offset = self._flushed_end
        change = LeaderChangeMessage(
            version=0,
            leader_id=self.node_id,
            voters=[LeaderChangeVoter(voter_id=v) for v in sorted(self.voters.ids)],
            granting_voters=[LeaderChangeVoter(voter_id=v) for v in sorted(candidate.granted)],
        )
        entry = Entry(
            epoch_start_offset, leader.epoch, (change.encode(0),), ControlType.LEADER_CHANGE
        )
        self._append([entry])
        if self.dynamic and epoch_start_offset == 0:
            # The first leader copies the bootstrap voter set into the log (KIP-853), so
            # that a replica formatted without it (an observer, a new disk) learns it.
            voters = Entry(1, leader.epoch, (self.voters.encode(),), ControlType.VOTERS)
            self._append([voters])
        for other in self._others():
            send_begin(self, leader, other, now_ms)

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
        offset = old
        while offset < value:
            entries = self.log.entries_from(offset, 1024)
            invariant(bool(entries), f"no entry at {offset} below the high watermark {value}")
            for entry in entries:
                if entry.offset >= value:
                    break
                invariant(entry.next_offset <= value, f"high watermark {value} inside a batch")
                self._ready.committed.append(entry)
                offset = entry.next_offset

    # ------------------------------------------------------------------ votes

    def _log_is_up_to_date(self, last_epoch: int, last_offset: int) -> bool:
        return (last_epoch, last_offset) >= (self.log.last_epoch(), self.log.end_offset())

    def _addressed_to_us(self, key: ReplicaKey) -> bool:
        return key.node_id == self.node_id and (
            key.directory_id == ZERO_DIRECTORY
            or self.key.directory_id == ZERO_DIRECTORY
            or key.directory_id == self.key.directory_id
        )

    def _on_vote_request(self, request: VoteRequest, now_ms: int) -> None:
        sender = request.candidate.node_id
        if not self._addressed_to_us(request.voter):
            # A candidate with an old voter set asks the replica a wiped disk replaced.
            self._send(
                sender,
                VoteResponse(
                    self.epoch, False, request.pre_vote, self.leader, ErrorCode.INVALID_VOTER_KEY
                ),
            )
            return
        if request.pre_vote:
            # A pre-vote changes nothing here. Refuse when our leader is alive (KIP-996),
            # so that a node coming back from a partition cannot disrupt a healthy quorum.
            role = self.role
            leader_alive = isinstance(role, LeaderState) or (
                isinstance(role, FollowerState)
                and role.last_leader_contact_ms is not None
                and now_ms - role.last_leader_contact_ms < self.fetch_timeout_ms
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
        role = self.role
        granted = (
            request.epoch == role.epoch
            and isinstance(role, UnattachedState)
            and (role.voted_for is None or role.voted_for.node_id == sender)
            and self._log_is_up_to_date(request.last_epoch, request.last_offset)
        )
        if granted:
            assert isinstance(role, UnattachedState)
            # A vote keeps the role: Unattached in the same epoch, now with a vote.
            if role.voted_for is None:
                role.voted_for = request.candidate
                self._persist()
            role.election_deadline_ms = self._election_deadline(now_ms)
        self._send(sender, VoteResponse(role.epoch, granted, False, role.leader))

    def _on_vote_response(self, response: VoteResponse, sender: int, now_ms: int) -> None:
        if response.epoch > self.epoch:
            if response.leader is not None and response.leader != self.node_id:
                self._become_follower(response.epoch, response.leader, now_ms)
            else:
                self._become_unattached(response.epoch, now_ms)
            return
        if (
            response.epoch == self.epoch
            and not response.granted
            and response.leader is not None
            and response.leader != self.node_id
            and isinstance(self.role, (UnattachedState, ProspectiveState, CandidateState))
        ):
            # Refused because a leader of our epoch is alive: follow it. Without this a
            # voter whose voter set is stale (removed while away) asks pre-votes forever
            # and never fetches the log that would tell it (Kafka does the same).
            self._become_follower(response.epoch, response.leader, now_ms)
            return
        if response.epoch < self.epoch or not response.granted:
            return
        if sender not in self.voters.ids:
            return  # only our own voter set elects us
        role = self.role
        if response.pre_vote and isinstance(role, ProspectiveState):
            role.granted.add(sender)
            self._check_pre_votes(now_ms)
        elif not response.pre_vote and isinstance(role, CandidateState):
            role.granted.add(sender)
            self._check_votes(now_ms)

    # ------------------------------------------------------------------ epochs

    def _on_begin_quorum_epoch(self, message: BeginQuorumEpoch, now_ms: int) -> None:
        if message.epoch < self.epoch or not self._addressed_to_us(message.voter):
            return
        if message.epoch == self.epoch and isinstance(self.role, FollowerState):
            return  # already following; the fetch loop is running
        self._become_follower(message.epoch, message.leader, now_ms)

    def _on_end_quorum_epoch(self, message: EndQuorumEpoch, now_ms: int) -> None:
        if message.epoch < self.epoch or not self.is_voter:
            return
        role = self.role
        if message.epoch > role.epoch:
            self._become_unattached(message.epoch, now_ms)
        elif isinstance(role, FollowerState) and role.leader == message.leader:
            # Its deadline is set below, from the successors' order.
            self._transition(UnattachedState(role.epoch, role.voted_for, None))
            self._fetching.in_flight = None
        else:
            return
        unattached = self.role
        assert isinstance(unattached, UnattachedState)
        # The most caught-up successor campaigns first; the others wait their turn.
        if self.node_id in message.preferred_successors:
            position = message.preferred_successors.index(self.node_id)
            backoff = (
                position * self.election_timeout_ms // max(1, len(message.preferred_successors))
            )
            unattached.election_deadline_ms = now_ms + backoff + self._rng.randrange(50)
        else:
            unattached.election_deadline_ms = self._election_deadline(now_ms)


def _not_a_message(message: Never) -> NoReturn:
    raise InvariantError(f"step() was given a {type(message).__name__}, which is no Raft message")
