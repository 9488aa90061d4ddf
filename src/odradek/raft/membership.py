"""KIP-853 voter changes on the leader: AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter.

A change may start only on the leader of a quorum whose voters are in the log (not the
static ``controller.quorum.voters``), once the leader has committed an entry of its own
epoch and no earlier change is still uncommitted, so the voter set changes one voter at
a time and two sets that share no majority never both decide. A voter is added only
once it has caught up: it reached the leader's log end at some fetch within
``controller.quorum.fetch.timeout.ms`` (Kafka's rule). A change is one VotersRecord
appended to the log; the immediate answer is an error or the offset whose commit
completes it, reported in ``Ready.voter_changes``.

These admission rules are apart from :class:`~odradek.raft.core.RaftNode` because they
are the leader's answers to an operator's commands, as Kafka's ``AddVoterHandler``,
``RemoveVoterHandler`` and ``UpdateVoterHandler`` are apart from its Raft client; how
the new set then counts (the high watermark, the leader's resignation once its own
removal commits) is the core's and :mod:`odradek.raft.leader_replication`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.record_batch import (
    ControlType,
)
from odradek.raft.leader_replication import answer_parked
from odradek.raft.log import Entry
from odradek.raft.ready import VoterChangeOutcome
from odradek.raft.roles import LeaderState
from odradek.raft.voters import ReplicaKey, Voter, VoterSet

if TYPE_CHECKING:
    from odradek.raft.core import RaftNode


def add_voter(node: RaftNode, voter: Voter, now_ms: int) -> VoterChangeOutcome:
    """AddRaftVoter: make a caught-up observer a voter."""
    leader = _leader_for_voter_change(node)
    if isinstance(leader, VoterChangeOutcome):
        return leader
    if node.voters.get(voter.node_id) is not None:
        return VoterChangeOutcome(
            ErrorCode.DUPLICATE_VOTER, f"node {voter.node_id} is already a voter"
        )
    progress = leader.progress.get(voter.node_id)
    if progress is None or progress.key.directory_id != voter.directory_id:
        return VoterChangeOutcome(
            ErrorCode.REQUEST_TIMED_OUT,
            f"replica {voter.node_id}/{voter.directory_id} is not fetching from the leader",
        )
    # Kafka's rule: caught up means it reached our log end at some fetch within the
    # fetch timeout. Its log end right now may trail a leader that keeps appending.
    caught_up = (
        progress.last_caught_up_ms is not None
        and now_ms - progress.last_caught_up_ms < node.fetch_timeout_ms
    )
    if not caught_up:
        return VoterChangeOutcome(
            ErrorCode.REQUEST_TIMED_OUT,
            f"replica {voter.node_id} has not caught up (log end {progress.end_offset}, "
            f"high watermark {node.high_watermark})",
        )
    return _append_voters(node, leader, node.voters.with_voter(voter), now_ms)


def remove_voter(node: RaftNode, key: ReplicaKey, now_ms: int) -> VoterChangeOutcome:
    """RemoveRaftVoter. Removing the leader makes it resign once the change commits."""
    leader = _leader_for_voter_change(node)
    if isinstance(leader, VoterChangeOutcome):
        return leader
    if _voter_named(node, key) is None:
        return _not_a_voter(key)
    if len(node.voters) == 1:
        return VoterChangeOutcome(ErrorCode.INVALID_REQUEST, "cannot remove the last voter")
    return _append_voters(node, leader, node.voters.without(key.node_id), now_ms)


def update_voter(node: RaftNode, voter: Voter, now_ms: int) -> VoterChangeOutcome:
    """UpdateRaftVoter: a voter's new endpoints."""
    leader = _leader_for_voter_change(node)
    if isinstance(leader, VoterChangeOutcome):
        return leader
    current = _voter_named(node, voter.key)
    if current is None:
        return _not_a_voter(voter.key)
    if current == voter:
        return VoterChangeOutcome(ErrorCode.NONE)
    return _append_voters(node, leader, node.voters.replaced(voter), now_ms)


def _voter_named(node: RaftNode, key: ReplicaKey) -> Voter | None:
    """The voter with exactly this node id and directory id."""
    current = node.voters.get(key.node_id)
    return current if current is not None and current.directory_id == key.directory_id else None


def _leader_for_voter_change(node: RaftNode) -> LeaderState | VoterChangeOutcome:
    """The leader's role when a voter change may start now, else the error."""
    leader = node.role
    if not isinstance(leader, LeaderState):
        return VoterChangeOutcome(ErrorCode.NOT_LEADER_OR_FOLLOWER, "not the quorum leader")
    if not node.dynamic:
        return VoterChangeOutcome(
            ErrorCode.UNSUPPORTED_VERSION,
            "the quorum has static voters (controller.quorum.voters); voter changes "
            "need a quorum formatted with --standalone or --initial-controllers",
        )
    if node.high_watermark <= leader.epoch_start_offset:
        return VoterChangeOutcome(
            ErrorCode.REQUEST_TIMED_OUT, "the leader has not committed in its epoch yet"
        )
    if node._voter_history.change_pending(node.high_watermark):
        return VoterChangeOutcome(
            ErrorCode.REQUEST_TIMED_OUT, "another voter change is not committed yet"
        )
    return leader


def _append_voters(
    node: RaftNode, leader: LeaderState, voters: VoterSet, now_ms: int
) -> VoterChangeOutcome:
    offset = node.log.end_offset()
    node._append([Entry(offset, leader.epoch, (voters.encode(),), ControlType.VOTERS)])
    leader.pending_changes.append(offset)
    for voter in voters:
        leader.progress_of(voter.node_id, voter.directory_id)
    answer_parked(node, leader, now_ms)
    return VoterChangeOutcome(ErrorCode.NONE, offset=offset)


def _not_a_voter(key: ReplicaKey) -> VoterChangeOutcome:
    return VoterChangeOutcome(
        ErrorCode.VOTER_NOT_FOUND, f"{key.node_id}/{key.directory_id} is not a voter"
    )
