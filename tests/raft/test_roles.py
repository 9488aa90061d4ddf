"""The roles of a replica and the transitions between them (odradek.raft.roles), and
what a RaftNode does with an input that is no Raft message."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from odradek.core.errors import InvariantError
from odradek.raft.core import RaftNode, State
from odradek.raft.log import MemoryRaftLog, SnapshotId
from odradek.raft.messages import VoteResponse
from odradek.raft.roles import (
    TRANSITIONS,
    CandidateState,
    FollowerState,
    LeaderState,
    ProspectiveState,
    ResignedState,
    Role,
    UnattachedState,
    check_transition,
)
from odradek.raft.voters import ReplicaKey, VoterSet
from odradek.testing.instant_disk import InstantFlushNode

ET = 1000


def node() -> RaftNode:
    return InstantFlushNode(
        1,
        MemoryRaftLog(),
        random.Random(0),
        0,
        static_voters=VoterSet.static((1, 2, 3)),
        election_timeout_ms=ET,
    )


def unattached(epoch: int) -> UnattachedState:
    return UnattachedState(epoch, None, 0)


def prospective(epoch: int) -> ProspectiveState:
    return ProspectiveState(epoch, None, 0, {1})


def candidate(epoch: int) -> CandidateState:
    return CandidateState(epoch, ReplicaKey(1), 0, {1})


def leader(epoch: int) -> LeaderState:
    return LeaderState(epoch, ReplicaKey(1), 1, 0)


def follower(epoch: int) -> FollowerState:
    return FollowerState(epoch, None, 2, 0)


def resigned(epoch: int) -> ResignedState:
    return ResignedState(epoch, ReplicaKey(1), 1, 0)


@dataclass(frozen=True, slots=True)
class SnapshotChunkV2:
    """A message the core does not know, shaped like a FetchSnapshotResponse."""

    epoch: int
    leader: int | None
    snapshot_id: SnapshotId
    size: int
    position: int
    chunk: bytes
    request_id: int
    error: int = 0


def test_a_message_of_an_unknown_type_is_a_loud_invariant() -> None:
    # It used to be taken for a FetchSnapshotResponse and, its request id not being the
    # one in flight, dropped without a word.
    n = node()
    foreign = SnapshotChunkV2(0, None, SnapshotId(0, 0), 0, 0, b"", 12345)
    with pytest.raises(InvariantError, match="SnapshotChunkV2"):
        n.step(foreign, 2, 10)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (unattached(3), leader(3)),  # only a candidate with a majority leads
        (prospective(3), leader(3)),
        (unattached(3), candidate(4)),  # a vote needs a pre-vote round first (KIP-996)
        (follower(3), candidate(4)),
        (resigned(3), candidate(4)),
        (leader(3), prospective(3)),  # a leader resigns, it does not campaign
        (leader(3), candidate(4)),
        (follower(3), resigned(3)),  # only a leader resigns
        (candidate(3), resigned(3)),
    ],
    ids=lambda r: r.STATE.value,
)
def test_a_transition_not_in_the_table_is_refused(old: Role, new: Role) -> None:
    with pytest.raises(InvariantError, match="no transition"):
        check_transition(old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (prospective(3), candidate(5)),  # an election raises the epoch by exactly one
        (prospective(3), candidate(3)),
        (candidate(3), leader(4)),  # a leader leads the epoch it was elected in
        (leader(3), follower(3)),  # two leaders in one epoch
        (follower(3), follower(3)),  # another leader of our leader's epoch
        (unattached(3), unattached(3)),
        (leader(3), unattached(3)),
        (follower(3), unattached(2)),  # epochs never go back
        (unattached(3), follower(2)),
        (follower(3), prospective(4)),  # a pre-vote round keeps the epoch
    ],
    ids=lambda r: f"{r.STATE.value}-{r.epoch}",
)
def test_a_transition_that_moves_the_epoch_wrongly_is_refused(old: Role, new: Role) -> None:
    with pytest.raises(InvariantError, match="needs"):
        check_transition(old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (unattached(3), prospective(3)),
        (prospective(3), candidate(4)),
        (candidate(3), leader(3)),
        (leader(3), resigned(3)),
        (leader(3), follower(4)),
        (resigned(3), follower(3)),
        (follower(3), unattached(3)),  # EndQuorumEpoch, or an observer's fetch timeout
        (candidate(3), prospective(3)),  # an election round that timed out
    ],
    ids=lambda r: f"{r.STATE.value}-{r.epoch}",
)
def test_the_transitions_raft_takes_are_allowed(old: Role, new: Role) -> None:
    check_transition(old, new)


def test_only_a_candidate_becomes_leader_and_only_a_prospective_becomes_candidate() -> None:
    assert {old for old, new in TRANSITIONS if new is LeaderState} == {CandidateState}
    assert {old for old, new in TRANSITIONS if new is CandidateState} == {ProspectiveState}
    assert {old for old, new in TRANSITIONS if new is ResignedState} == {LeaderState}


def test_a_node_changes_role_only_through_the_table() -> None:
    """An election walks Unattached, Prospective, Candidate, Leader; the role object holds
    only that role's fields (the leader's progress is gone once it steps down)."""
    n = node()
    n.tick(2 * ET)
    assert isinstance(n.role, ProspectiveState) and n.role.granted == {1}
    n.step(VoteResponse(0, True, True), 2, 2 * ET)
    assert isinstance(n.role, CandidateState) and n.epoch == 1
    n.step(VoteResponse(1, True, False), 2, 2 * ET)
    assert isinstance(n.role, LeaderState) and n.leader == 1
    assert set(n.role.progress) == {1, 2, 3}
    n.resign(2 * ET)
    assert isinstance(n.role, ResignedState) and not hasattr(n.role, "progress")
    assert n.state is State.RESIGNED and n.epoch == 1
