"""A replica's fetch loop: the Fetch and FetchSnapshot requests a follower, an observer
or a prospective voter sends, and what it does with their answers.

A follower pulls the log from its leader (KIP-595): :func:`send_fetch` reports its log
end and last epoch, and the answer brings entries to append and the high watermark, a
diverging epoch to truncate to, or a snapshot to download chunk by chunk
(FetchSnapshot, KIP-630) and install in place of the log. An observer does the same
without ever campaigning (:func:`observer_tick`), looking for the leader among the
voters or the bootstrap servers; a voter whose election round failed asks a bootstrap
server too (:func:`ask_a_bootstrap_server`), in case its voter set is stale. No Fetch
leaves whose fetch offset reports entries not yet flushed: the leader counts that
offset towards the high watermark, so the Fetch waits for
:meth:`~odradek.raft.core.RaftNode.flushed`.

The fetch in flight (:class:`Fetching`, Kafka's ``RequestManager``) outlives roles and
is kept on the node; the snapshot transfer belongs to the
:class:`~odradek.raft.roles.FollowerState`. These functions take the
:class:`~odradek.raft.core.RaftNode` whose fetch loop they run (as etcd-io/raft's
``stepFollower`` takes its ``raft``) and change role only through its transitions. The
leader's side of the exchange is :mod:`odradek.raft.leader_replication`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.core.invariant import invariant
from odradek.protocol.error_codes import ErrorCode
from odradek.raft.log import UNDEFINED, SnapshotId
from odradek.raft.messages import (
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    bootstrap_destination,
)
from odradek.raft.roles import (
    CandidateState,
    FollowerState,
    ProspectiveState,
    ResignedState,
    UnattachedState,
)
from odradek.raft.snapshot import decode_snapshot

if TYPE_CHECKING:
    from odradek.raft.core import RaftNode


@dataclass(slots=True)
class Fetching:
    """The fetch in flight and when the next one is due (Kafka's ``RequestManager``). It
    outlives roles: a prospective voter's fetch to a bootstrap server may be answered
    once it is a candidate, and an observer's backoff runs on when it loses its leader."""

    next_fetch_ms: int
    last_request_id: int = 0
    in_flight: int | None = None  # the request id of the fetch we wait for
    sent_to: int | None = None  # where it went
    sent_ms: int = 0
    wait_ms: int = 0  # how long the receiver may hold it
    # A Fetch was due while the log had entries not yet durable: its fetch offset would
    # report them, so it goes out when they are (RaftNode.flushed).
    after_flush: bool = False
    bootstrap_turn: int = 0  # which bootstrap server a failed election asks next


def fetch_if_due(node: RaftNode, now_ms: int) -> None:
    fetching = node._fetching
    if fetching.in_flight is None:
        if now_ms >= fetching.next_fetch_ms:
            send_fetch(node, now_ms)
    elif now_ms - fetching.sent_ms >= fetching.wait_ms + node.request_timeout_ms:
        send_fetch(node, now_ms)


def _fetch_target(node: RaftNode) -> int | None:
    if node.leader is not None:
        return node.leader
    others = node._others()
    if others:
        return node._rng.choice(others)
    if node.bootstrap_servers:
        return bootstrap_destination(node._rng.randrange(node.bootstrap_servers))
    return None


def send_fetch(node: RaftNode, now_ms: int) -> None:
    role = node.role
    # A snapshot transfer belongs to a Follower: once the leader that offered it is
    # gone, only a Fetch finds the next one (a FetchSnapshot to anyone else just
    # fails, forever).
    snapshot_fetch = role.snapshot_fetch if isinstance(role, FollowerState) else None
    fetching = node._fetching
    fetching.after_flush = False
    if snapshot_fetch is None and node._tail_unflushed():
        # The fetch offset tells the leader what we hold, and it counts that towards
        # the high watermark: it must be on our disk first. The fetch replaces the
        # one in flight, if any, as it would have had it gone out.
        fetching.in_flight = None
        fetching.after_flush = True
        return
    target = _fetch_target(node)
    if target is None:
        fetching.next_fetch_ms = now_ms + node.fetch_backoff_ms
        return
    fetching.last_request_id += 1
    request_id = fetching.last_request_id
    fetching.in_flight = request_id
    fetching.sent_ms = now_ms
    fetching.sent_to = target
    if snapshot_fetch is not None:
        snapshot_id, buffer = snapshot_fetch
        fetching.wait_ms = 0
        request: Message = FetchSnapshotRequest(
            role.epoch, node.key, snapshot_id, len(buffer), request_id
        )
    else:
        # Only a known leader holds a fetch open; anyone else answers at once.
        fetching.wait_ms = node.fetch_max_wait_ms if role.leader is not None else 0
        request = FetchRequest(
            role.epoch,
            node.key,
            node.log.end_offset(),
            node.log.last_epoch(),
            request_id,
            fetching.wait_ms,
        )
    node._send(target, request)


def ask_a_bootstrap_server(node: RaftNode, now_ms: int) -> None:
    """After a failed election round, Fetch from a bootstrap server as an observer
    would. Our voter set may be stale: changed while we were away, or by a quorum-loss
    recovery that made a controller we never heard of the only voter. Then every vote
    request goes to voters that are gone, and only an answer from outside our voter
    set (a leader, or a node that knows one, in a higher epoch) makes us follow."""
    if node._tail_unflushed():
        # Its fetch offset would report entries a crash could still take away; the
        # next failed round asks.
        return
    fetching = node._fetching
    fetching.last_request_id += 1
    fetching.in_flight = fetching.last_request_id
    fetching.sent_ms = now_ms
    fetching.wait_ms = 0
    # Round robin rather than the rng: the rng's sequence drives the simulator's
    # schedules, which this must not perturb.
    fetching.bootstrap_turn = (fetching.bootstrap_turn + 1) % node.bootstrap_servers
    request = FetchRequest(
        node.epoch,
        node.key,
        node.log.end_offset(),
        node.log.last_epoch(),
        fetching.last_request_id,
        0,
    )
    fetching.sent_to = bootstrap_destination(fetching.bootstrap_turn)
    node._send(fetching.sent_to, request)


def on_fetch_response(node: RaftNode, response: FetchResponse, now_ms: int) -> None:
    fetching = node._fetching
    if response.request_id != fetching.in_flight:
        return  # stale, duplicated, or for a fetch we gave up on
    fetching.in_flight = None
    if response.epoch > node.epoch:
        if response.leader is not None and response.leader != node.node_id:
            node._become_follower(response.epoch, response.leader, now_ms)
        else:
            node._become_unattached(response.epoch, now_ms)
            fetching.next_fetch_ms = now_ms + node.fetch_backoff_ms
        return
    role = node.role
    # Unattached is the only role that both fetches and knows no leader: a Follower
    # always has one, and the candidates' roles do not follow from a fetch answer.
    if response.epoch < role.epoch or response.error != ErrorCode.NONE:
        if (
            response.epoch == role.epoch
            and response.leader is not None
            and response.leader != node.node_id
            and isinstance(role, UnattachedState)
        ):
            node._become_follower(response.epoch, response.leader, now_ms)
            return
        fetching.next_fetch_ms = now_ms + node.fetch_backoff_ms
        return
    if response.leader is None or response.leader == node.node_id:
        fetching.next_fetch_ms = now_ms + node.fetch_backoff_ms
        return
    if not isinstance(role, FollowerState) or role.leader != response.leader:
        if isinstance(role, UnattachedState):
            node._become_follower(response.epoch, response.leader, now_ms)
        return
    role.fetch_deadline_ms = now_ms + node.fetch_timeout_ms
    role.last_leader_contact_ms = now_ms
    if response.snapshot_id is not None:
        role.snapshot_fetch = (response.snapshot_id, bytearray())
        send_fetch(node, now_ms)
        return
    if response.diverging_epoch is not None:
        _truncate_to_diverging(node, response.diverging_epoch, response.diverging_end_offset)
        send_fetch(node, now_ms)
        return
    if response.entries:
        invariant(
            response.entries[0].offset == node.log.end_offset(),
            "fetched entries do not start at the log end",
        )
        node._append(response.entries)
    node._set_high_watermark(min(response.high_watermark, node.log.end_offset()))
    send_fetch(node, now_ms)


def _truncate_to_diverging(node: RaftNode, epoch: int, end_offset: int | None) -> None:
    leader_end = end_offset if end_offset is not None else 0
    local_epoch, local_end = node.log.end_offset_for_epoch(epoch)
    target = leader_end if local_epoch == UNDEFINED else min(local_end, leader_end)
    target = max(target, node.log.start_offset())
    invariant(
        target >= node.high_watermark,
        f"node {node.node_id} truncating to {target} below its high watermark "
        f"{node.high_watermark}",
    )
    node._truncate(target)


def on_fetch_snapshot_response(
    node: RaftNode, response: FetchSnapshotResponse, now_ms: int
) -> None:
    fetching = node._fetching
    if response.request_id != fetching.in_flight:
        return
    fetching.in_flight = None
    if response.epoch > node.epoch:
        # The transfer in progress, if any, goes with the role it belongs to.
        if response.leader is not None and response.leader != node.node_id:
            node._become_follower(response.epoch, response.leader, now_ms)
        else:
            node._become_unattached(response.epoch, now_ms)
        return
    role = node.role
    fetch = role.snapshot_fetch if isinstance(role, FollowerState) else None
    if (
        fetch is None
        or not isinstance(role, FollowerState)
        or response.epoch < role.epoch
        or response.leader != role.leader
        or response.snapshot_id != fetch[0]
    ):
        fetching.next_fetch_ms = now_ms + node.fetch_backoff_ms
        return
    if response.error != ErrorCode.NONE:
        # The leader moved on to a newer snapshot (or lost this one): fetch again.
        role.snapshot_fetch = None
        fetching.next_fetch_ms = now_ms + node.fetch_backoff_ms
        return
    role.fetch_deadline_ms = now_ms + node.fetch_timeout_ms
    role.last_leader_contact_ms = now_ms
    snapshot_id, buffer = fetch
    if response.position != len(buffer):
        send_fetch(node, now_ms)
        return
    buffer += response.chunk
    if len(buffer) < response.size:
        send_fetch(node, now_ms)
        return
    _install_snapshot(node, role, snapshot_id, bytes(buffer))
    send_fetch(node, now_ms)


def _install_snapshot(
    node: RaftNode, follower: FollowerState, snapshot_id: SnapshotId, data: bytes
) -> None:
    decode_snapshot(data)  # a damaged transfer must not replace the log
    invariant(
        snapshot_id.end_offset >= node.high_watermark,
        f"snapshot {snapshot_id} below the high watermark {node.high_watermark}",
    )
    follower.snapshot_fetch = None
    node._reset_to_snapshot(snapshot_id, data)


def observer_tick(node: RaftNode, now_ms: int) -> None:
    """An observer (or a voter removed from the set) never campaigns; it fetches."""
    role = node.role
    if isinstance(role, FollowerState) and now_ms >= role.fetch_deadline_ms:
        node._transition(UnattachedState(role.epoch, role.voted_for, None))
        node._fetching.in_flight = None
    elif isinstance(role, (ProspectiveState, CandidateState, ResignedState)):
        deadline_ms = role.election_deadline_ms
        node._transition(UnattachedState(role.epoch, role.voted_for, deadline_ms))
    fetch_if_due(node, now_ms)
