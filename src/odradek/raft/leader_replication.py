"""The leader's side of replication: answering Fetch and FetchSnapshot, the fetches it
holds open, the high watermark, check-quorum and BeginQuorumEpoch.

A leader learns what its replicas hold only from their fetches (KIP-595's pull model):
:func:`on_fetch_request` validates the fetch offset and last epoch against the log
(Kafka's ``validateOffsetAndEpoch``: answer with the diverging epoch, or with the
snapshot to load when the fetcher diverged below the log start), records the replica's
progress in the :class:`~odradek.raft.roles.LeaderState`, moves the high watermark by a
majority of the voter set (:func:`advance_high_watermark`, counting its own copy only
up to what is flushed) and answers at once or parks the fetch until there is something
new. :func:`leader_tick` resigns when a majority has not fetched within the fetch
timeout (check-quorum) and resends BeginQuorumEpoch to voters that have not fetched.

These functions hold the rules a leader applies to what its replicas tell it; they read
and change only the :class:`~odradek.raft.roles.LeaderState`, the log and the high
watermark of the :class:`~odradek.raft.core.RaftNode` they are given (as etcd-io/raft's
``stepLeader`` takes its ``raft``), and change role only through the node's
transitions. The replica's own fetch loop, its other half, is
:mod:`odradek.raft.fetcher`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from odradek.protocol.error_codes import ErrorCode
from odradek.raft.log import UNDEFINED
from odradek.raft.messages import (
    BeginQuorumEpoch,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
)
from odradek.raft.ready import QuorumDescription, ReplicaDescription
from odradek.raft.roles import LeaderState, ReplicaProgress, ResignedState
from odradek.raft.voters import ReplicaKey, Voter, VoterSet

if TYPE_CHECKING:
    from odradek.raft.core import RaftNode


def send_begin(node: RaftNode, leader: LeaderState, voter: int, now_ms: int) -> None:
    known = node.voters.get(voter)
    key = known.key if known is not None else ReplicaKey(voter)
    node._send(voter, BeginQuorumEpoch(leader.epoch, node.node_id, key))
    leader.begin_sent_ms[voter] = now_ms


def _voter_end_offset(node: RaftNode, leader: LeaderState, voter: Voter) -> int:
    """What a voter provably holds; a replica with another directory id (a wiped disk
    under the same node id) is not that voter and counts for nothing."""
    progress = leader.progress_of(voter.node_id, voter.directory_id)
    if not VoterSet((voter,)).is_voter(progress.key):
        return 0
    return progress.end_offset


def leader_tick(node: RaftNode, leader: LeaderState, now_ms: int) -> None:
    # Check-quorum: resign when a majority (counting ourselves) has not fetched lately.
    recent = 0
    for voter in node.voters:
        progress = leader.progress_of(voter.node_id, voter.directory_id)
        last = progress.last_fetch_ms
        if voter.node_id == node.node_id or (
            last is not None
            and now_ms - last < node.fetch_timeout_ms
            and node.voters.is_voter(progress.key)
        ):
            recent += 1
    if recent < node.majority:
        node._become_resigned(leader, now_ms)
        return
    # A voter that has not fetched in this epoch may have missed BeginQuorumEpoch.
    for other in node._others():
        if other in leader.fetched_this_epoch:
            continue
        sent = leader.begin_sent_ms.get(other)
        if sent is None or now_ms - sent >= node.election_timeout_ms // 2:
            send_begin(node, leader, other, now_ms)
    for replica, (request, deadline) in sorted(leader.parked.items()):
        if now_ms >= deadline:
            del leader.parked[replica]
            answer_fetch(node, leader, request, now_ms)


def advance_high_watermark(node: RaftNode, leader: LeaderState, now_ms: int) -> None:
    leader.progress_of(node.node_id).end_offset = node._flushed_end
    offsets = sorted((_voter_end_offset(node, leader, v) for v in node.voters), reverse=True)
    candidate = offsets[node.majority - 1]
    # Only an offset past our own leader-change entry commits (it is of our epoch).
    if candidate <= leader.epoch_start_offset or candidate <= node.high_watermark:
        return
    node._set_high_watermark(candidate)
    pending = leader.pending_changes
    done = [o for o in pending if o < node.high_watermark]
    leader.pending_changes = [o for o in pending if o >= node.high_watermark]
    for offset in done:
        node._ready.voter_changes.append((offset, ErrorCode.NONE))
    answer_parked(node, leader, now_ms)
    if not node.is_voter and not (node._voter_history.change_pending(node.high_watermark)):
        # Our own removal committed: hand over to the voters (KIP-853).
        node.resign(now_ms)


def on_fetch_request(node: RaftNode, request: FetchRequest, now_ms: int) -> None:
    sender = request.replica.node_id
    if request.epoch > node.epoch:
        node._become_unattached(request.epoch, now_ms)
    role = node.role
    if not isinstance(role, LeaderState):
        # Tell the fetcher who leads (if we know) so that it catches up on the epoch. A
        # resigned leader names no leader: its answers must not keep followers attached.
        leader = None if isinstance(role, ResignedState) else role.leader
        node._send(
            sender,
            FetchResponse(
                role.epoch,
                leader,
                node.high_watermark,
                (),
                request.request_id,
                error=ErrorCode.NOT_LEADER_OR_FOLLOWER,
            ),
        )
        return
    if request.epoch < role.epoch:
        node._send(
            sender,
            FetchResponse(
                role.epoch,
                node.node_id,
                node.high_watermark,
                (),
                request.request_id,
                error=ErrorCode.FENCED_LEADER_EPOCH,
            ),
        )
        return
    progress = role.progress.get(sender)
    if progress is None or progress.key != request.replica:
        # A new replica, or a replaced disk: nothing it held before counts.
        progress = ReplicaProgress(request.replica)
        role.progress[sender] = progress
    previous_fetch_ms = progress.last_fetch_ms
    progress.last_fetch_ms = now_ms
    role.fetched_this_epoch.add(sender)
    role.parked.pop(sender, None)
    if _needs_snapshot(node, request) or _diverging(node, request) is not None:
        answer_fetch(node, role, request, now_ms)
        return
    # A valid fetch proves the fetcher's log equals ours below fetch_offset.
    if request.fetch_offset > progress.end_offset:
        progress.end_offset = request.fetch_offset
    leader_end = node.log.end_offset()
    if request.fetch_offset >= leader_end:
        progress.last_caught_up_ms = now_ms
    elif (
        progress.leader_end_at_last_fetch is not None
        and previous_fetch_ms is not None
        and request.fetch_offset >= progress.leader_end_at_last_fetch
    ):
        progress.last_caught_up_ms = max(progress.last_caught_up_ms or 0, previous_fetch_ms)
    progress.leader_end_at_last_fetch = leader_end
    if sender in node.voters.ids:
        advance_high_watermark(node, role, now_ms)
        if node.role is not role:
            return  # our own removal committed and we resigned; the fetcher retries
    nothing_new = request.fetch_offset >= node.log.end_offset()
    if (
        nothing_new
        and request.max_wait_ms > 0
        and progress.sent_high_watermark >= node.high_watermark
    ):
        role.parked[sender] = (request, now_ms + request.max_wait_ms)
        return
    answer_fetch(node, role, request, now_ms)


def _needs_snapshot(node: RaftNode, request: FetchRequest) -> bool:
    start = node.log.start_offset()
    snapshot = node.log.latest_snapshot()
    if start == 0 or snapshot is None:
        return False
    if request.fetch_offset < start:
        return True
    # Kafka's validateOffsetAndEpoch: a fetcher at our log start whose last epoch is
    # not the snapshot's, or whose last epoch is older than the snapshot's, diverged
    # below the log start (end_offset_for_epoch cannot see that: it answers an epoch
    # older than every held one with the start of the first held epoch).
    if request.fetch_offset == start and request.last_fetched_epoch != snapshot.epoch:
        return True
    if request.last_fetched_epoch < snapshot.epoch:
        return True
    # An epoch we know nothing of means the fetcher diverged below our log start,
    # where only the snapshot can repair it.
    epoch, _ = node.log.end_offset_for_epoch(request.last_fetched_epoch)
    return request.fetch_offset > 0 and epoch == UNDEFINED


def _diverging(node: RaftNode, request: FetchRequest) -> tuple[int, int] | None:
    """None when (fetch_offset, last_fetched_epoch) is a prefix of our log."""
    if request.fetch_offset == 0:
        return None
    epoch, end_offset = node.log.end_offset_for_epoch(request.last_fetched_epoch)
    if epoch == request.last_fetched_epoch and end_offset >= request.fetch_offset:
        return None
    return (epoch, max(end_offset, 0))


def answer_fetch(node: RaftNode, leader: LeaderState, request: FetchRequest, now_ms: int) -> None:
    sender = request.replica.node_id
    progress = leader.progress_of(sender)
    base = FetchResponse(leader.epoch, node.node_id, node.high_watermark, (), request.request_id)
    if _needs_snapshot(node, request):
        snapshot = node.log.latest_snapshot()
        node._send(sender, dataclasses.replace(base, snapshot_id=snapshot))
        return
    diverging = _diverging(node, request)
    if diverging is not None:
        epoch, end_offset = diverging
        node._send(
            sender,
            dataclasses.replace(base, diverging_epoch=epoch, diverging_end_offset=end_offset),
        )
        return
    entries = tuple(node.log.entries_from(request.fetch_offset, node.MAX_FETCH_ENTRIES))
    progress.sent_high_watermark = node.high_watermark
    node._send(sender, dataclasses.replace(base, entries=entries))


def answer_parked(node: RaftNode, leader: LeaderState, now_ms: int) -> None:
    parked, leader.parked = leader.parked, {}
    for _, (request, _deadline) in sorted(parked.items()):
        answer_fetch(node, leader, request, now_ms)


def on_fetch_snapshot_request(node: RaftNode, request: FetchSnapshotRequest, now_ms: int) -> None:
    sender = request.replica.node_id

    def answer(error: int, size: int = 0, chunk: bytes = b"") -> None:
        role = node.role
        leader = None if isinstance(role, ResignedState) else role.leader
        node._send(
            sender,
            FetchSnapshotResponse(
                role.epoch,
                leader,
                request.snapshot_id,
                size,
                request.position,
                chunk,
                request.request_id,
                error,
            ),
        )

    if request.epoch > node.epoch:
        node._become_unattached(request.epoch, now_ms)
    leader = node.role
    if not isinstance(leader, LeaderState):
        answer(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return
    if request.epoch < leader.epoch:
        answer(ErrorCode.FENCED_LEADER_EPOCH)
        return
    progress = leader.progress.get(sender)
    if progress is None or progress.key != request.replica:
        progress = ReplicaProgress(request.replica)
        leader.progress[sender] = progress
    progress.last_fetch_ms = now_ms
    leader.fetched_this_epoch.add(sender)
    data = node.log.read_snapshot(request.snapshot_id)
    if data is None:
        answer(ErrorCode.SNAPSHOT_NOT_FOUND)
        return
    if not 0 <= request.position <= len(data):
        answer(ErrorCode.POSITION_OUT_OF_RANGE, len(data))
        return
    size = min(request.max_bytes, node.SNAPSHOT_CHUNK_BYTES)
    answer(ErrorCode.NONE, len(data), data[request.position : request.position + size])


def describe_quorum(node: RaftNode) -> QuorumDescription:
    """DescribeQuorum's view: every replica's progress on the leader, voters only elsewhere."""

    def row(progress: ReplicaProgress) -> ReplicaDescription:
        return ReplicaDescription(
            progress.key.node_id,
            str(progress.key.directory_id),
            progress.end_offset,
            progress.last_fetch_ms,
            progress.last_caught_up_ms,
        )

    leader = node.role
    if isinstance(leader, LeaderState):
        voters = tuple(
            row(leader.progress_of(v.node_id))
            if node.voters.is_voter(leader.progress_of(v.node_id).key)
            else ReplicaDescription(v.node_id, str(v.directory_id), -1, None, None)
            for v in node.voters
        )
        observers = tuple(
            row(p)
            for _, p in sorted(leader.progress.items())
            if not node.voters.is_voter(p.key) and p.last_fetch_ms is not None
        )
    else:
        voters = tuple(
            ReplicaDescription(v.node_id, str(v.directory_id), -1, None, None) for v in node.voters
        )
        observers = ()
    return QuorumDescription(node.leader, node.epoch, node.high_watermark, voters, observers)
