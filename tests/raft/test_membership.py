"""Observers, voter changes (KIP-853), graceful resignation and snapshots, driven by hand.

A small lossless cluster: every node has its own directory id, the voters come from the
bootstrap snapshot that ``storage format --initial-controllers`` writes, and observers
find the leader through the bootstrap servers.
"""

from __future__ import annotations

import random
import uuid

from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.record_batch import (
    ControlType,
)
from odradek.raft.core import RaftNode, State
from odradek.raft.log import MemoryRaftLog, SnapshotId
from odradek.raft.messages import (
    EndQuorumEpoch,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    Message,
    bootstrap_index,
)
from odradek.raft.ready import Ready
from odradek.raft.snapshot import BOOTSTRAP_SNAPSHOT_ID, bootstrap_snapshot, decode_snapshot
from odradek.raft.voters import ReplicaKey, Voter, VoterEndpoint, VoterSet
from odradek.testing.instant_disk import InstantFlushNode

ET = 1000
FT = 2000


def directory(node_id: int, generation: int = 0) -> uuid.UUID:
    return uuid.UUID(int=node_id * 1000 + generation + 1)


def voter(node_id: int, generation: int = 0) -> Voter:
    return Voter(
        node_id,
        directory(node_id, generation),
        (VoterEndpoint("CONTROLLER", "127.0.0.1", 9000 + node_id),),
    )


class Cluster:
    """Instant delivery except across ``cut``; nodes 1..voters vote, the rest observe."""

    def __init__(self, voters: int, observers: int = 0) -> None:
        self.initial = VoterSet.of(voter(i) for i in range(1, voters + 1))
        self.now = 0
        self.cut: set[int] = set()
        self.nodes: dict[int, RaftNode] = {}
        self.bootstrap = list(range(1, voters + 1))
        self.changes: list[tuple[int, int]] = []
        self.snapshots: list[tuple[int, SnapshotId]] = []
        for i in range(1, voters + observers + 1):
            self.start(i, formatted_as_voter=i <= voters)

    def start(self, node_id: int, formatted_as_voter: bool, generation: int = 0) -> RaftNode:
        log = MemoryRaftLog()
        # Voters are formatted with --initial-controllers; the rest with
        # --no-initial-controllers, which writes a bootstrap snapshot without voters.
        voters = self.initial if formatted_as_voter else None
        log.write_snapshot(BOOTSTRAP_SNAPSHOT_ID, bootstrap_snapshot(voters))
        n = InstantFlushNode(
            node_id,
            log,
            random.Random(node_id * 7 + generation),
            self.now,
            directory_id=directory(node_id, generation),
            bootstrap_servers=len(self.bootstrap),
            election_timeout_ms=ET,
            fetch_timeout_ms=FT,
        )
        self.nodes[node_id] = n
        return n

    def deliver(self, src: int, ready: Ready) -> None:
        self.changes += ready.voter_changes
        if ready.snapshot is not None:
            self.snapshots.append((src, ready.snapshot))
        queue: list[tuple[int, int, Message]] = [(src, to, m) for to, m in ready.messages]
        while queue:
            sender, to, message = queue.pop(0)
            index = bootstrap_index(to)
            if index is not None:
                to = self.bootstrap[index]
            if sender in self.cut or to in self.cut or to not in self.nodes:
                continue
            reply = self.nodes[to].step(message, sender, self.now)
            self.changes += reply.voter_changes
            if reply.snapshot is not None:
                self.snapshots.append((to, reply.snapshot))
            queue += [(to, t, m) for t, m in reply.messages]

    def advance(self, until_ms: int, step_ms: int = 10) -> None:
        while self.now < until_ms:
            self.now += step_ms
            for i, n in sorted(self.nodes.items()):
                self.deliver(i, n.tick(self.now))

    def leader(self) -> RaftNode:
        leaders = [n for n in self.nodes.values() if n.state is State.LEADER]
        assert len(leaders) == 1, f"{len(leaders)} leaders"
        return leaders[0]

    def propose(self, text: str) -> int:
        leader = self.leader()
        offset = leader.propose([text.encode()], self.now)
        assert offset is not None
        self.deliver(leader.node_id, leader.ready(self.now))
        return offset


def test_observer_replicates_but_neither_votes_nor_counts() -> None:
    c = Cluster(3, observers=1)
    c.advance(4 * ET)
    leader = c.leader()
    observer = c.nodes[4]
    assert not observer.is_voter and observer.state is State.FOLLOWER
    assert observer.leader == leader.node_id
    offset = c.propose("x")
    c.advance(c.now + 200)
    assert observer.high_watermark > offset
    entry = observer.log.entry_at(offset)
    assert entry is not None and entry.records == (b"x",)
    # The observer is listed as such by the leader, and never counted for the watermark.
    described = leader.describe(c.now)
    assert [r.node_id for r in described.voters] == [1, 2, 3]
    assert [r.node_id for r in described.observers] == [4]
    # With two voters cut off, the observer's copy does not commit anything.
    c.cut = {v for v in (1, 2, 3) if v != leader.node_id}
    before = leader.high_watermark
    c.propose("y")
    c.advance(c.now + 300)
    assert leader.high_watermark == before


def test_observer_never_campaigns() -> None:
    c = Cluster(3, observers=1)
    c.advance(3 * ET)
    c.cut = {1, 2, 3}
    c.advance(c.now + 5 * FT)
    assert c.nodes[4].state is State.UNATTACHED and c.nodes[4].epoch == c.nodes[1].epoch


def test_add_voter_only_for_a_caught_up_observer_then_it_votes() -> None:
    c = Cluster(3, observers=1)
    c.advance(4 * ET)
    leader = c.leader()
    # Not a replica that fetches: refused.
    assert leader.add_voter(voter(9), c.now).error == ErrorCode.REQUEST_TIMED_OUT
    # Wrong directory id (not the replica that is fetching): refused.
    wrong = leader.add_voter(voter(4, generation=5), c.now)
    assert wrong.error == ErrorCode.REQUEST_TIMED_OUT
    # Already a voter.
    assert leader.add_voter(voter(2), c.now).error == ErrorCode.DUPLICATE_VOTER
    outcome = leader.add_voter(voter(4), c.now)
    assert outcome.error == ErrorCode.NONE and outcome.offset is not None
    # One change at a time.
    assert leader.remove_voter(voter(2).key, c.now).error == ErrorCode.REQUEST_TIMED_OUT
    c.deliver(leader.node_id, leader.ready(c.now))
    c.advance(c.now + 300)
    assert (outcome.offset, ErrorCode.NONE) in c.changes
    for n in c.nodes.values():
        assert n.voters.ids == {1, 2, 3, 4}
    assert c.nodes[4].is_voter
    # Four voters need three: with two cut off nothing commits.
    others = sorted(v for v in (1, 2, 3, 4) if v != leader.node_id)
    c.cut = set(others[:2])
    before = leader.high_watermark
    c.propose("needs three of four")
    c.advance(c.now + 200)
    assert leader.high_watermark == before
    # With one cut off, three of four hold it: it commits.
    c.cut = {others[0]}
    c.advance(c.now + 600)
    assert leader.high_watermark > before


def test_remove_voter_and_the_removed_leader_hands_over() -> None:
    c = Cluster(3)
    c.advance(4 * ET)
    leader = c.leader()
    old_id = leader.node_id
    outcome = leader.remove_voter(ReplicaKey(old_id, directory(old_id)), c.now)
    assert outcome.error == ErrorCode.NONE
    c.deliver(old_id, leader.ready(c.now))
    c.advance(c.now + 3 * ET)
    assert (outcome.offset, ErrorCode.NONE) in c.changes
    new = c.leader()
    assert new.node_id != old_id and new.voters.ids == {1, 2, 3} - {old_id}
    # The removed node now observes the new leader and keeps replicating.
    removed = c.nodes[old_id]
    assert not removed.is_voter
    offset = c.propose("after removal")
    c.advance(c.now + 300)
    assert removed.high_watermark > offset


def test_remove_voter_checks_the_directory_id() -> None:
    c = Cluster(3)
    c.advance(4 * ET)
    leader = c.leader()
    other = next(i for i in (1, 2, 3) if i != leader.node_id)
    stale = leader.remove_voter(ReplicaKey(other, directory(other, generation=1)), c.now)
    assert stale.error == ErrorCode.VOTER_NOT_FOUND


def test_a_wiped_voter_comes_back_as_an_observer() -> None:
    c = Cluster(3)
    c.advance(4 * ET)
    leader = c.leader()
    victim = next(i for i in (1, 2, 3) if i != leader.node_id)
    c.propose("before wipe")
    c.advance(c.now + 200)
    # A new disk: formatted with --no-initial-controllers, so a new directory id.
    wiped = c.start(victim, formatted_as_voter=False, generation=1)
    c.advance(c.now + 3 * ET)
    assert not wiped.is_voter, "a fresh disk must never be the old voter"
    assert wiped.voters.ids == {1, 2, 3}
    # Its vote requests would name a directory the voters do not know.
    described = leader.describe(c.now)
    row = next(r for r in described.voters if r.node_id == victim)
    assert row.directory_id == str(directory(victim)) and row.log_end_offset == -1
    (observer,) = described.observers
    assert observer.directory_id == str(directory(victim, 1))
    assert observer.log_end_offset == leader.log.end_offset()


def test_static_quorum_refuses_voter_changes() -> None:
    log = MemoryRaftLog()
    n = InstantFlushNode(1, log, random.Random(1), 0, static_voters=VoterSet.static((1,)))
    n.tick(3 * ET)
    assert n.state is State.LEADER
    assert n.add_voter(voter(2), 3 * ET).error == ErrorCode.UNSUPPORTED_VERSION


def test_graceful_resignation_elects_the_preferred_successor_quickly() -> None:
    c = Cluster(3)
    c.advance(4 * ET)
    leader = c.leader()
    c.propose("x")
    c.advance(c.now + 200)
    leader.resign(c.now)
    ready = leader.ready(c.now)
    ends = [m for _, m in ready.messages if isinstance(m, EndQuorumEpoch)]
    assert len(ends) == 2 and ends[0].leader == leader.node_id
    c.deliver(leader.node_id, ready)
    start = c.now
    # Well before any fetch timeout a successor leads a higher epoch.
    c.advance(start + ET // 2 + 100)
    new = c.leader()
    assert new.node_id != leader.node_id and new.epoch == leader.epoch
    assert new.node_id == ends[0].preferred_successors[0]


def test_snapshot_moves_the_log_start_and_a_lagging_follower_installs_it() -> None:
    c = Cluster(3)
    c.advance(4 * ET)
    leader = c.leader()
    lagging = next(i for i in (1, 2, 3) if i != leader.node_id)
    c.cut = {lagging}
    for i in range(10):
        c.propose(f"r{i}")
    c.advance(c.now + 200)
    hw = leader.high_watermark
    snapshot = leader.create_snapshot(hw, [b"state-at-hw"], c.now)
    assert leader.log.start_offset() == hw
    contents = decode_snapshot(leader.log.read_snapshot(snapshot) or b"")
    assert contents.records == [b"state-at-hw"] and contents.voters == c.initial
    c.propose("after snapshot")
    c.cut = set()
    c.advance(c.now + 3 * ET)
    follower = c.nodes[lagging]
    assert (lagging, snapshot) in c.snapshots
    assert follower.log.start_offset() == snapshot.end_offset
    assert follower.high_watermark == leader.high_watermark > snapshot.end_offset
    assert follower.voters == c.initial


def test_snapshot_fetch_with_a_wrong_id_is_refused() -> None:
    c = Cluster(1)
    c.advance(3 * ET)
    leader = c.leader()
    request = FetchSnapshotRequest(leader.epoch, ReplicaKey(2), SnapshotId(99, 1), 0, 1)
    ready = leader.step(request, 2, c.now)
    ((_, response),) = ready.messages
    assert getattr(response, "error", None) == ErrorCode.SNAPSHOT_NOT_FOUND


def test_first_leader_writes_the_bootstrap_voters_into_the_log() -> None:
    c = Cluster(3)
    c.advance(4 * ET)
    leader = c.leader()
    first, second = leader.log.entries_from(0, 2)
    assert first.control == ControlType.LEADER_CHANGE
    assert second.control == ControlType.VOTERS
    assert VoterSet.decode(second.records[0]) == c.initial


def test_a_fetcher_that_diverged_below_the_log_start_gets_the_snapshot() -> None:
    """Kafka's validateOffsetAndEpoch: at the log start with another last epoch, or with a
    last epoch older than the snapshot's, the fetcher's prefix differs from the snapshot
    (seed 0 of the simulation kept such a prefix below its high watermark)."""
    c = Cluster(1)
    c.advance(3 * ET)
    leader = c.leader()
    for i in range(3):
        c.propose(f"r{i}")
    c.advance(c.now + 100)
    snapshot = leader.create_snapshot(leader.high_watermark, [b"s"], c.now)
    start = snapshot.end_offset
    assert leader.log.start_offset() == start and snapshot.epoch == leader.epoch

    def answer(offset: int, last_epoch: int) -> FetchResponse:
        request = FetchRequest(leader.epoch, ReplicaKey(2), offset, last_epoch, 1)
        ((_, response),) = leader.step(request, 2, c.now).messages
        assert isinstance(response, FetchResponse)
        return response

    assert answer(start, snapshot.epoch - 1).snapshot_id == snapshot
    c.propose("after")
    assert answer(start + 1, snapshot.epoch - 1).snapshot_id == snapshot
    # The same epoch at the log start is the snapshot's own prefix: plain entries.
    same = answer(start, snapshot.epoch)
    assert same.snapshot_id is None and same.entries


def test_a_voter_removed_while_away_learns_it_and_observes() -> None:
    c = Cluster(3)
    c.advance(4 * ET)
    leader = c.leader()
    away = next(i for i in (1, 2, 3) if i != leader.node_id)
    c.cut = {away}
    outcome = leader.remove_voter(ReplicaKey(away, directory(away)), c.now)
    assert outcome.error == ErrorCode.NONE
    c.deliver(leader.node_id, leader.ready(c.now))
    c.advance(c.now + 500)
    assert (outcome.offset, ErrorCode.NONE) in c.changes
    # Still a voter in its own eyes, it campaigns; the leader's refusal names it.
    c.advance(c.now + 3 * FT)
    c.cut = set()
    c.advance(c.now + 3 * FT)
    node = c.nodes[away]
    assert not node.is_voter and node.leader == c.leader().node_id
    assert node.high_watermark == c.leader().high_watermark


def test_an_observer_that_loses_the_leader_mid_snapshot_fetches_again() -> None:
    """Seed 2447: an observer whose leader went away during a snapshot transfer kept
    asking random voters for that snapshot, was refused forever and never caught up."""
    c = Cluster(3)
    c.advance(4 * ET)
    leader = c.leader()
    c.propose("x")
    c.advance(c.now + 100)
    snapshot = leader.create_snapshot(leader.high_watermark, [b"s"], c.now)
    observer = InstantFlushNode(
        4,
        MemoryRaftLog(),
        random.Random(4),
        c.now,
        directory_id=directory(4),
        bootstrap_servers=3,
        election_timeout_ms=ET,
        fetch_timeout_ms=FT,
    )
    ready = observer.tick(c.now)
    ((_, request),) = ready.messages
    assert isinstance(request, FetchRequest)
    # The leader names itself and offers its snapshot; the observer asks for it.
    answer = FetchResponse(leader.epoch, leader.node_id, 0, (), request.request_id)
    ((_, second),) = observer.step(answer, leader.node_id, c.now).messages
    assert isinstance(second, FetchRequest)
    offer = FetchResponse(
        leader.epoch, leader.node_id, 0, (), second.request_id, snapshot_id=snapshot
    )
    ready = observer.step(offer, leader.node_id, c.now)
    assert [type(m) for _, m in ready.messages] == [FetchSnapshotRequest]
    # Nothing answers: past the fetch timeout the observer forgets the leader, and its
    # next request is a Fetch that can find the new one.
    later = c.now + FT + 10
    observer.tick(later)
    assert observer.leader is None
    ready = observer.tick(later + 1000)
    assert [type(m) for _, m in ready.messages] == [FetchRequest]


def _observer_fetch(leader: RaftNode, key: ReplicaKey, offset: int, now: int) -> None:
    last = leader.log.entry_at(offset - 1)
    request = FetchRequest(leader.epoch, key, offset, last.epoch if last else 0, request_id=now)
    leader.step(request, key.node_id, now)


def test_add_voter_accepts_an_observer_that_trails_a_leader_that_keeps_appending() -> None:
    # Kafka's rule: caught up means the replica reached the leader's log end at a fetch
    # within the fetch timeout. A leader that appends between every two fetches never
    # sees the replica at its log end; reaching the end of the previous fetch counts.
    c = Cluster(1)
    c.advance(2 * ET)
    leader = c.leader()
    new = voter(2)
    for i in range(4):
        offset = leader.log.end_offset()
        leader.propose([f"r{i}".encode()], c.now)
        c.now += 50
        _observer_fetch(leader, new.key, offset, c.now)
    assert leader.describe(c.now).observers[0].log_end_offset < leader.high_watermark
    outcome = leader.add_voter(new, c.now)
    assert outcome.error == ErrorCode.NONE, outcome.message


def test_add_voter_refuses_an_observer_that_falls_further_behind() -> None:
    c = Cluster(1)
    c.advance(2 * ET)
    leader = c.leader()
    new = voter(2)
    start = leader.log.end_offset()
    for i in range(4):
        leader.propose([f"a{i}".encode()], c.now)
        leader.propose([f"b{i}".encode()], c.now)
        c.now += 50
        # Each fetch gains one batch while the leader appends two.
        _observer_fetch(leader, new.key, start + i, c.now)
    outcome = leader.add_voter(new, c.now)
    assert outcome.error == ErrorCode.REQUEST_TIMED_OUT
    # Caught up once, then silent past the fetch timeout: refused again.
    _observer_fetch(leader, new.key, leader.log.end_offset(), c.now)
    assert leader.add_voter(new, c.now + FT).error == ErrorCode.REQUEST_TIMED_OUT
    assert leader.add_voter(new, c.now + FT - 1).error == ErrorCode.NONE
