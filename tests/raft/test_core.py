"""One test per Raft rule of RaftNode, driven by hand through step/tick."""

from __future__ import annotations

import random

import pytest

from odradek.core.errors import InvariantError
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.record_batch import (
    ControlType,
)
from odradek.raft.core import RaftNode, State
from odradek.raft.log import Entry, MemoryRaftLog
from odradek.raft.messages import (
    BeginQuorumEpoch,
    FetchRequest,
    FetchResponse,
    Message,
    VoteRequest,
    VoteResponse,
)
from odradek.raft.ready import QuorumState, Ready
from odradek.raft.voters import ReplicaKey, VoterSet
from odradek.testing.instant_disk import InstantFlushNode

ET = 1000  # election timeout
FT = 2000  # fetch timeout


def node(node_id: int = 1, voters: tuple[int, ...] = (1, 2, 3), seed: int = 0) -> RaftNode:
    return InstantFlushNode(
        node_id,
        MemoryRaftLog(),
        random.Random(seed),
        0,
        static_voters=VoterSet.static(voters),
        election_timeout_ms=ET,
        fetch_timeout_ms=FT,
    )


def K(node_id: int) -> ReplicaKey:
    return ReplicaKey(node_id)


def E(offset: int, epoch: int, *records: str) -> Entry:
    """An entry of one record per text (one record "." when none given)."""
    return Entry(offset, epoch, tuple(r.encode() for r in records or (".",)))


def vote(
    epoch: int, candidate: int, last_epoch: int, last_offset: int, pre: bool, to: int = 2
) -> VoteRequest:
    return VoteRequest(epoch, K(candidate), K(to), last_epoch, last_offset, pre)


def fetch(epoch: int, replica: int, offset: int, last_epoch: int, request_id: int) -> FetchRequest:
    return FetchRequest(epoch, K(replica), offset, last_epoch, request_id)


def begin(epoch: int, leader: int, to: int = 2) -> BeginQuorumEpoch:
    return BeginQuorumEpoch(epoch, leader, K(to))


class Cluster:
    """Instant, lossless delivery, except to and from the nodes in ``cut``."""

    def __init__(self, size: int) -> None:
        ids = tuple(range(1, size + 1))
        self.nodes = {i: node(i, ids, seed=i) for i in ids}
        self.now = 0
        self.cut: set[int] = set()

    def run(self, readies: list[tuple[int, Ready]]) -> None:
        queue = [(src, to, m) for src, r in readies for to, m in r.messages]
        while queue:
            src, to, message = queue.pop(0)
            if src in self.cut or to in self.cut:
                continue
            ready = self.nodes[to].step(message, src, self.now)
            queue += [(to, t, m) for t, m in ready.messages]

    def advance(self, until_ms: int, step_ms: int = 10) -> None:
        while self.now < until_ms:
            self.now += step_ms
            self.run([(i, n.tick(self.now)) for i, n in sorted(self.nodes.items())])

    def leaders(self) -> list[RaftNode]:
        return [n for n in self.nodes.values() if n.state is State.LEADER]


def state_of(n: RaftNode) -> State:
    """The state, read through a call so that mypy does not narrow it across steps."""
    return n.state


def sent(ready: Ready, kind: type) -> list[tuple[int, Message]]:
    return [(to, m) for to, m in ready.messages if isinstance(m, kind)]


def test_election_timeout_is_randomized_from_the_rng() -> None:
    deadlines = set()
    for seed in range(5):
        n = node(seed=seed)
        first = next(t for t in range(0, 3 * ET, 10) if n.tick(t).messages)
        assert ET <= first < 2 * ET
        deadlines.add(first)
    assert len(deadlines) > 1


def test_timeout_starts_a_pre_vote_without_bumping_the_epoch() -> None:
    n = node()
    ready = n.tick(2 * ET)
    assert n.state is State.PROSPECTIVE
    assert n.epoch == 0
    assert ready.persist is None
    requests = sent(ready, VoteRequest)
    assert sorted(to for to, _ in requests) == [2, 3]
    assert all(isinstance(m, VoteRequest) and m.pre_vote for _, m in requests)


def test_pre_vote_majority_starts_a_real_election_and_persists_the_vote() -> None:
    n = node()
    n.tick(2 * ET)
    ready = n.step(VoteResponse(0, True, True), 2, 2 * ET)
    assert n.state is State.CANDIDATE
    assert ready.persist == QuorumState(1, K(1), None)
    requests = sent(ready, VoteRequest)
    assert len(requests) == 2
    assert all(isinstance(m, VoteRequest) and not m.pre_vote and m.epoch == 1 for _, m in requests)


def test_pre_vote_changes_nothing_on_the_receiver() -> None:
    n = node(2)
    ready = n.step(vote(5, 1, 0, 0, True), 1, 10)
    assert n.epoch == 0 and n.voted_for is None and ready.persist is None
    assert sent(ready, VoteResponse) == [(1, VoteResponse(0, True, True, None))]


def test_pre_vote_is_refused_while_the_leader_is_alive() -> None:
    n = node(2)
    ready = n.step(begin(3, 3), 3, 100)
    ((_, request),) = sent(ready, FetchRequest)
    assert isinstance(request, FetchRequest)
    n.step(FetchResponse(3, 3, 0, (), request.request_id), 3, 100)
    ready = n.step(vote(3, 1, 0, 0, True), 1, 200)
    assert sent(ready, VoteResponse) == [(1, VoteResponse(3, False, True, 3))]
    # After the fetch timeout without hearing from the leader, the pre-vote is granted.
    later = 100 + FT + 1
    n.tick(later)
    ready = n.step(vote(3, 1, 0, 0, True), 1, later)
    responses = sent(ready, VoteResponse)
    assert responses and isinstance(responses[0][1], VoteResponse) and responses[0][1].granted


def test_vote_requires_an_up_to_date_log() -> None:
    n = node(2)
    n.log.append([E(0, 2), E(1, 2)])
    # Lower last epoch, longer log: refused.
    ready = n.step(vote(3, 1, 1, 5, False), 1, 0)
    assert sent(ready, VoteResponse) == [(1, VoteResponse(3, False, False, None))]
    # Same last epoch, shorter log: refused.
    ready = n.step(vote(4, 1, 2, 1, False), 1, 0)
    assert sent(ready, VoteResponse) == [(1, VoteResponse(4, False, False, None))]
    # Same last epoch, same end offset: granted and persisted.
    ready = n.step(vote(5, 1, 2, 2, False), 1, 0)
    assert sent(ready, VoteResponse) == [(1, VoteResponse(5, True, False, None))]
    assert ready.persist == QuorumState(5, K(1), None)


def test_one_vote_per_epoch() -> None:
    n = node(2)
    assert n.step(vote(1, 1, 0, 0, False), 1, 0).persist == QuorumState(1, K(1), None)
    ready = n.step(vote(1, 3, 0, 0, False), 3, 0)
    assert sent(ready, VoteResponse) == [(3, VoteResponse(1, False, False, None))]
    # Asking again for the same candidate is answered the same way.
    ready = n.step(vote(1, 1, 0, 0, False), 1, 0)
    assert sent(ready, VoteResponse) == [(1, VoteResponse(1, True, False, None))]


def test_lower_epoch_vote_is_refused() -> None:
    n = node(2)
    n.step(begin(4, 3), 3, 0)
    ready = n.step(vote(2, 1, 9, 9, False), 1, 0)
    assert sent(ready, VoteResponse) == [(1, VoteResponse(4, False, False, 3))]


def test_new_leader_appends_a_leader_change_entry_and_announces_itself() -> None:
    n = node()
    n.tick(2 * ET)
    n.step(VoteResponse(0, True, True), 2, 2 * ET)
    ready = n.step(VoteResponse(1, True, False), 3, 2 * ET)
    assert n.state is State.LEADER
    assert ready.persist == QuorumState(1, K(1), 1)
    (entry,) = n.log.entries_from(0, 10)
    assert (entry.offset, entry.epoch, entry.control) == (0, 1, ControlType.LEADER_CHANGE)
    assert sorted(to for to, _ in sent(ready, BeginQuorumEpoch)) == [2, 3]


def test_single_voter_elects_itself_and_commits_alone() -> None:
    n = node(1, (1,))
    ready = n.tick(2 * ET)
    assert n.state is State.LEADER and n.epoch == 1
    assert ready.high_watermark == 1
    assert n.propose([b"a"], 2 * ET) == 1
    assert n.tick(2 * ET + 1).committed == [E(1, 1, "a")]


def test_propose_only_on_the_leader() -> None:
    assert node().propose([b"x"], 2 * ET) is None


def test_followers_pull_and_the_high_watermark_needs_a_majority() -> None:
    c = Cluster(3)
    c.advance(3 * ET)
    (leader,) = c.leaders()
    offset = leader.propose([b"v"], 2 * ET)
    assert offset == 1
    c.advance(c.now + 200)
    for n in c.nodes.values():
        assert n.high_watermark == 2
        assert n.log.entry_at(1) == E(1, leader.epoch, "v")


def leader_with_log(epochs: list[int], epoch: int) -> RaftNode:
    """Node 1 as leader of ``epoch`` over a log whose entries have ``epochs``."""
    n = node()
    n.log.append([E(i, e) for i, e in enumerate(epochs)])
    n.role.epoch = epoch - 1
    n.tick(2 * ET)
    n.step(VoteResponse(epoch - 1, True, True), 2, 2 * ET)
    n.step(VoteResponse(epoch, True, False), 2, 2 * ET)
    assert n.state is State.LEADER and n.epoch == epoch
    return n


def test_high_watermark_counts_only_entries_of_the_current_epoch() -> None:
    n = leader_with_log([1, 1, 2], 3)  # leader-change entry at offset 3
    # Node 2 holds the old entries only: a majority has offset 3, but it is not ours.
    ready = n.step(fetch(3, 2, 3, 2, 1), 2, 2 * ET)
    assert ready.high_watermark is None and n.high_watermark == 0
    ready = n.step(fetch(3, 2, 4, 3, 2), 2, 2 * ET)
    assert ready.high_watermark == 4
    assert [e.offset for e in ready.committed] == [0, 1, 2, 3]


def test_leader_answers_a_diverging_fetch_with_epoch_and_end_offset() -> None:
    n = leader_with_log([1, 1, 2], 3)
    # The follower has epoch 2 entries up to offset 5: ours end at 3.
    ready = n.step(fetch(3, 2, 5, 2, 7), 2, 2 * ET)
    ((_, response),) = sent(ready, FetchResponse)
    assert isinstance(response, FetchResponse)
    assert (response.diverging_epoch, response.diverging_end_offset) == (2, 3)
    assert response.request_id == 7 and response.entries == ()
    # An epoch we never had (epoch 1 then a follower-only epoch 2 we lack): answer epoch 1.
    n2 = leader_with_log([1, 1], 3)
    ready = n2.step(fetch(3, 2, 4, 2, 8), 2, 2 * ET)
    ((_, response),) = sent(ready, FetchResponse)
    assert isinstance(response, FetchResponse)
    assert (response.diverging_epoch, response.diverging_end_offset) == (1, 2)


def test_follower_truncates_exactly_and_fetches_again() -> None:
    f = node(2)
    f.log.append([E(0, 1, "a"), E(1, 1, "b"), E(2, 2, "x"), E(3, 2, "y")])
    ready = f.step(begin(3, 1), 1, 0)
    ((_, fetch),) = sent(ready, FetchRequest)
    assert isinstance(fetch, FetchRequest)
    assert (fetch.fetch_offset, fetch.last_fetched_epoch) == (4, 2)
    diverging = FetchResponse(
        3, 1, 0, (), fetch.request_id, diverging_epoch=1, diverging_end_offset=2
    )
    ready = f.step(diverging, 1, 10)
    assert f.log.end_offset() == 2
    ((_, again),) = sent(ready, FetchRequest)
    assert isinstance(again, FetchRequest)
    assert (again.fetch_offset, again.last_fetched_epoch) == (2, 1)


def test_follower_ignores_stale_fetch_responses() -> None:
    f = node(2)
    ready = f.step(begin(1, 1), 1, 0)
    ((_, fetch),) = sent(ready, FetchRequest)
    assert isinstance(fetch, FetchRequest)
    stale = FetchResponse(1, 1, 0, (E(0, 1),), fetch.request_id + 5)
    f.step(stale, 1, 10)
    assert f.log.end_offset() == 0


def test_follower_high_watermark_never_moves_back() -> None:
    f = node(2)
    ready = f.step(begin(1, 1), 1, 0)
    ((_, fetch),) = sent(ready, FetchRequest)
    assert isinstance(fetch, FetchRequest)
    entries = (E(0, 1), E(1, 1, "a"))
    ready = f.step(FetchResponse(1, 1, 2, entries, fetch.request_id), 1, 10)
    assert f.high_watermark == 2 and ready.high_watermark == 2
    ((_, fetch),) = sent(ready, FetchRequest)
    assert isinstance(fetch, FetchRequest)
    f.step(FetchResponse(1, 1, 1, (), fetch.request_id), 1, 20)
    assert f.high_watermark == 2


def test_check_quorum_leader_resigns_without_fetches() -> None:
    c = Cluster(3)
    c.advance(3 * ET)
    (leader,) = c.leaders()
    c.cut = {leader.node_id}
    start = c.now
    # The last fetches arrived up to fetch_max_wait_ms before the cut (held open).
    c.advance(start + FT - leader.fetch_max_wait_ms - 100)
    assert state_of(leader) is State.LEADER
    c.advance(start + FT + 100)
    assert state_of(leader) is State.RESIGNED


def test_follower_without_leader_becomes_prospective_and_a_new_leader_wins() -> None:
    c = Cluster(3)
    c.advance(3 * ET)
    (old,) = c.leaders()
    c.cut = {old.node_id}
    start = c.now
    c.advance(start + FT - old.fetch_max_wait_ms - 100)
    others = [n for n in c.nodes.values() if n is not old]
    assert all(n.state is State.FOLLOWER for n in others)
    c.advance(start + FT + 4 * ET)
    assert any(n.state is State.LEADER and n.epoch > old.epoch for n in others)
    # After the heal the old leader follows the new one.
    c.cut = set()
    c.advance(c.now + 3 * ET)
    assert len(c.leaders()) == 1 and old.state is State.FOLLOWER


def test_higher_epoch_response_makes_a_leader_step_down() -> None:
    n = leader_with_log([], 1)
    ready = n.step(vote(2, 3, 5, 5, False, to=1), 3, 2 * ET)
    assert n.state is State.UNATTACHED and n.epoch == 2
    assert ready.persist == QuorumState(2, K(3), None)


def test_two_leaders_in_one_epoch_is_a_bug() -> None:
    n = leader_with_log([], 1)
    with pytest.raises(InvariantError):
        n.step(begin(1, 2, to=1), 2, 2 * ET)


def test_restart_as_former_leader_is_resigned() -> None:
    n = InstantFlushNode(
        1,
        MemoryRaftLog(),
        random.Random(0),
        0,
        static_voters=VoterSet.static((1, 2, 3)),
        election_timeout_ms=ET,
        fetch_timeout_ms=FT,
        quorum_state=QuorumState(4, K(1), 1),
    )
    assert n.state is State.RESIGNED and n.epoch == 4
    ready = n.step(vote(4, 2, 9, 9, False, to=1), 2, 0)
    assert sent(ready, VoteResponse) == [(2, VoteResponse(4, False, False, None))]


def test_a_resigned_leader_does_not_keep_its_followers_attached() -> None:
    c = Cluster(5)
    c.advance(3 * ET)
    (leader,) = c.leaders()
    follower = next(n for n in c.nodes.values() if n is not leader)
    # The leader hears only this follower, 2 of 5 voters: short of a majority, it resigns.
    c.cut = set(c.nodes) - {leader.node_id, follower.node_id}
    start = c.now
    c.advance(start + FT + 100)
    assert state_of(leader) is State.RESIGNED
    # Its empty answers do not count as hearing from a leader: the follower moves on.
    c.advance(start + 2 * FT + 200)
    assert state_of(follower) is not State.FOLLOWER or follower.leader != leader.node_id


def test_fetch_with_an_old_epoch_learns_the_leader() -> None:
    n = leader_with_log([], 2)
    ready = n.step(fetch(1, 2, 0, 0, 9), 2, 2 * ET)
    expected = FetchResponse(2, 1, 0, (), 9, error=ErrorCode.FENCED_LEADER_EPOCH)
    assert sent(ready, FetchResponse) == [(2, expected)]
    f = node(2)
    f.step(begin(1, 3), 3, 0)
    f.step(FetchResponse(2, 1, 0, (), 1), 1, 10)
    assert (f.epoch, f.leader, f.state) == (2, 1, State.FOLLOWER)


def test_pre_vote_is_granted_until_the_leader_answered_a_fetch() -> None:
    """Kafka's hasFetchedFromLeader: a leader only named (BeginQuorumEpoch, a hint) may be
    gone; refusing pre-votes for it could leave the quorum without a leader for good."""
    n = node(2)
    n.step(begin(3, 3), 3, 100)
    ready = n.step(vote(3, 1, 0, 0, True), 1, 200)
    assert sent(ready, VoteResponse) == [(1, VoteResponse(3, True, True, 3))]


def test_a_pre_vote_refusal_naming_the_leader_makes_a_prospective_follow_it() -> None:
    """A voter that missed its own removal asks pre-votes and is refused by the live
    leader; it must follow that leader (and learn the new voter set), not ask forever."""
    n = node(3)
    n.step(begin(2, 1, to=3), 1, 0)
    n.tick(FT + 10)  # no fetch answered: the follower gives up on the leader
    assert state_of(n) is State.PROSPECTIVE
    ready = n.step(VoteResponse(2, False, True, 1), 1, FT + 20)
    assert (state_of(n), n.leader, n.epoch) == (State.FOLLOWER, 1, 2)
    assert [to for to, _ in sent(ready, FetchRequest)] == [1]
    # A refusal without a leader changes nothing.
    m = node(3)
    m.tick(2 * ET)
    m.step(VoteResponse(0, False, True, None), 1, 2 * ET)
    assert state_of(m) is State.PROSPECTIVE


def test_a_refused_fetch_connection_starts_the_election_without_the_fetch_timeout() -> None:
    """A killed leader's port refuses connections: its followers grant pre-votes at once
    and ask for them after a short backoff, instead of waiting the fetch timeout."""
    n = node(2)
    ready = n.step(begin(3, 3), 3, 100)
    ((_, request),) = sent(ready, FetchRequest)
    assert isinstance(request, FetchRequest)
    n.step(FetchResponse(3, 3, 0, (), request.request_id), 3, 100)
    # Alive as far as this follower knows: a pre-vote is refused.
    assert sent(n.step(vote(3, 1, 0, 0, True), 1, 150), VoteResponse)[0][1] == VoteResponse(
        3, False, True, 3
    )
    n.leader_unreachable(3, 200)
    ready = n.step(vote(3, 1, 0, 0, True), 1, 200)
    assert sent(ready, VoteResponse) == [(1, VoteResponse(3, True, True, 3))]
    ready = n.tick(200 + ET // 4)
    assert state_of(n) is State.PROSPECTIVE
    assert sorted(to for to, _ in sent(ready, VoteRequest)) == [1, 3]
    # A report about a node that is not our leader changes nothing.
    m = node(2)
    m.step(begin(3, 3), 3, 100)
    m.leader_unreachable(1, 200)
    m.tick(200 + ET)
    assert state_of(m) is State.FOLLOWER


def test_a_new_leader_names_the_voters_that_have_not_fetched_from_it() -> None:
    c = Cluster(3)
    c.advance(3 * ET)
    (leader,) = c.leaders()
    assert leader.silent_voters() == set()
    follower = next(n for n in c.nodes.values() if n is not leader)
    assert follower.silent_voters() == set()  # only the leader knows
    # A new election with one voter gone: it never fetches from the new leader.
    c.cut = {leader.node_id}
    c.advance(c.now + FT + 4 * ET)
    (new,) = [n for n in c.nodes.values() if n.state is State.LEADER and n is not leader]
    assert new.silent_voters() == {leader.node_id}


def test_an_observer_whose_probe_is_refused_asks_another_voter_at_once() -> None:
    """An observer looking for the new leader after its leader died may pick a dead
    voter: a refused connection fails that fetch now, and the next goes out after the
    fetch backoff, not after the request timeout (a broker found the new controller 4 s
    late that way, and forwarded admin requests gave up meanwhile)."""
    refusals = 0
    for seed in range(20):
        o = node(9, voters=(1, 2, 3), seed=seed)
        assert not o.is_voter
        o.step(FetchResponse(1, 3, 0, (), 0), 3, 0)  # it learns that 3 leads epoch 1
        refused = 0
        now = 100
        while o.leader != 1 and now < 10_000:
            for to, message in sent(o.tick(now), FetchRequest):
                assert isinstance(message, FetchRequest)
                if to in (2, 3):  # both gone: their hosts refuse the connection
                    refused += 1
                    o.leader_unreachable(to, now)
                else:  # 1 leads epoch 2 now
                    o.step(FetchResponse(2, 1, 0, (), message.request_id), to, now)
            now += 20
        assert o.leader == 1 and o.epoch == 2
        refusals += refused
        # Every refusal costs a fetch backoff (50 ms, on 20 ms ticks), never the request
        # timeout (300 ms here, 2 s by default in Kafka).
        assert now <= 100 + 60 * (refused + 1), (seed, refused, now)
    assert refusals > 0  # the seeds do pick dead voters
