"""After a quorum-loss recovery, every survivor converges on the recovered log.

Five voters lose three for good. The survivors' logs are edited offline as
``recover-quorum apply`` does (VotersRecords demoting everyone but node 1, in an epoch
above every survivor's, and the audit record), then the survivors restart from their
logs and persisted quorum state: node 1 elects itself, the demoted voter and the observer
follow it and learn they do not vote, and a controller with a fresh disk joins as an
observer and is added as a voter online.
"""

from __future__ import annotations

import random

from odradek.protocol.error_codes import ErrorCode
from odradek.raft.core import RaftNode, State
from odradek.raft.ready import QuorumState
from odradek.raft.recovery import recovery_entries
from odradek.testing.instant_disk import InstantFlushNode
from tests.raft.test_membership import ET, FT, Cluster, directory, voter


def restart(c: Cluster, node_id: int, state: QuorumState, generation: int = 0) -> RaftNode:
    """The node again, from the log and quorum state it had on disk."""
    old = c.nodes[node_id]
    n = InstantFlushNode(
        node_id,
        old.log,
        random.Random(node_id * 13),
        c.now,
        directory_id=directory(node_id, generation),
        bootstrap_servers=len(c.bootstrap),
        election_timeout_ms=ET,
        fetch_timeout_ms=FT,
        quorum_state=state,
    )
    c.nodes[node_id] = n
    return n


def lose_a_majority_and_recover(
    *, demoted_epoch_ahead: bool, observer: bool = True, bump: bool = True
) -> Cluster:
    c = Cluster(5, observers=1 if observer else 0)
    c.advance(4 * ET)
    for i in range(5):
        c.propose(f"before-{i}")
    c.advance(c.now + 500)
    lost = [3, 4, 5]
    survivors = [1, 2, 6] if observer else [1, 2]
    states = {i: c.nodes[i].quorum_state for i in survivors}
    for i in lost:
        del c.nodes[i]
    c.advance(c.now + 3 * FT)  # the quorum is lost: nothing commits any more
    assert not any(n.state is State.LEADER for n in c.nodes.values())
    if demoted_epoch_ahead:
        # Node 2 went through elections node 1 never saw (it kept campaigning).
        states[2] = QuorumState(states[2].epoch + 5, None, None)
    # Offline: node 1 holds the longest log (the survivors are prefixes of it).
    survivor = c.nodes[1]
    assert all(n.log.end_offset() <= survivor.log.end_offset() for n in c.nodes.values())
    epochs = [n.log.last_epoch() for n in c.nodes.values()]
    if bump:
        epochs += [s.epoch for s in states.values()]
    epoch = 1 + max(epochs)
    end = survivor.log.end_offset()
    survivor.log.append(recovery_entries(survivor.voters, voter(1), end, epoch, {"who": "op"}))
    states[1] = QuorumState(epoch, None, None)
    for i in survivors:
        restart(c, i, states[i])
    c.advance(c.now + 4 * FT)
    return c


def check_converged(c: Cluster) -> None:
    leader = c.leader()
    assert leader.node_id == 1 and leader.voters.ids == {1}
    for i in sorted(set(c.nodes) - {1}):
        n = c.nodes[i]
        assert not n.is_voter, f"node {i} still votes"
        assert n.state is State.FOLLOWER and n.leader == 1
    offset = c.propose("after")
    c.advance(c.now + 500)
    for n in c.nodes.values():
        assert n.high_watermark > offset
        entry = n.log.entry_at(offset)
        assert entry is not None and entry.records == (b"after",)


def test_survivors_follow_the_sole_voter_and_learn_they_do_not_vote() -> None:
    check_converged(lose_a_majority_and_recover(demoted_epoch_ahead=False))


def test_a_demoted_voter_whose_epoch_ran_ahead_converges_too() -> None:
    # apply's epoch is above every survivor's: here node 2's quorum state is ahead of
    # node 1's log, and the recovery epoch still passes it.
    check_converged(lose_a_majority_and_recover(demoted_epoch_ahead=True))
    check_converged(lose_a_majority_and_recover(demoted_epoch_ahead=True, observer=False))


def test_without_the_epoch_bump_a_demoted_voter_ahead_in_epoch_still_converges() -> None:
    # A survivor left out of the survey can be ahead of the recovery epoch. It ignores
    # the answers of a leader in a lower epoch to its pre-votes, but after a failed round
    # it asks a bootstrap server: the recovered leader learns the higher epoch, elects
    # itself again above it, and the survivor follows.
    check_converged(
        lose_a_majority_and_recover(demoted_epoch_ahead=True, observer=False, bump=False)
    )


def test_replacement_controllers_join_as_observers_and_become_voters() -> None:
    c = lose_a_majority_and_recover(demoted_epoch_ahead=False)
    # Node 3 comes back on a fresh disk: a new directory id, formatted without voters.
    fresh = c.start(3, formatted_as_voter=False, generation=1)
    c.advance(c.now + 2 * FT)
    assert not fresh.is_voter and fresh.leader == 1
    leader = c.leader()
    outcome = leader.add_voter(voter(3, generation=1), c.now)
    assert outcome.error == ErrorCode.NONE, outcome.message
    c.deliver(1, leader.ready(c.now))
    c.advance(c.now + 500)
    assert (outcome.offset, ErrorCode.NONE) in c.changes
    assert c.leader().voters.ids == {1, 3} and fresh.is_voter
    # The demoted survivor loses its disk too: it comes back as an observer under a new
    # directory id, and is added as a voter the same way.
    wiped = c.start(2, formatted_as_voter=False, generation=1)
    c.advance(c.now + 2 * FT)
    assert not wiped.is_voter and wiped.leader == 1
    outcome = c.leader().add_voter(voter(2, generation=1), c.now)
    assert outcome.error == ErrorCode.NONE, outcome.message
    c.deliver(1, c.leader().ready(c.now))
    c.advance(c.now + 500)
    assert c.leader().voters.ids == {1, 2, 3} and wiped.is_voter


def test_a_demoted_voter_that_never_heard_of_the_recovered_one_finds_it() -> None:
    """Node 2 was away while node 6 joined the voters, so its voter set does not name
    the controller recovered on: its pre-votes go only to the lost voters. A voter whose
    pre-vote round fails asks a bootstrap server, as an observer would, and so learns of
    the new leader."""
    c = Cluster(5, observers=1)
    c.bootstrap = [1, 2, 3, 4, 5, 6]  # controller.quorum.bootstrap.servers names all six
    c.advance(4 * ET)
    c.cut = {2}
    c.advance(c.now + 2 * FT)
    leader = c.leader()
    outcome = leader.add_voter(voter(6), c.now)
    assert outcome.error == ErrorCode.NONE, outcome.message
    c.deliver(leader.node_id, leader.ready(c.now))
    c.advance(c.now + 500)
    assert c.nodes[6].is_voter and 6 not in c.nodes[2].voters.ids
    states = {i: c.nodes[i].quorum_state for i in (2, 6)}
    for i in (1, 3, 4, 5):
        del c.nodes[i]
    c.cut = set()
    recovered = c.nodes[6]
    assert c.nodes[2].log.end_offset() <= recovered.log.end_offset()
    epoch = 1 + max([s.epoch for s in states.values()] + [recovered.log.last_epoch()])
    end = recovered.log.end_offset()
    recovered.log.append(recovery_entries(recovered.voters, voter(6), end, epoch, {}))
    restart(c, 6, QuorumState(epoch, None, None))
    restart(c, 2, states[2])
    c.advance(c.now + 6 * FT)
    leader = c.leader()
    assert leader.node_id == 6 and leader.voters.ids == {6}
    stale = c.nodes[2]
    assert stale.state is State.FOLLOWER and stale.leader == 6 and not stale.is_voter
