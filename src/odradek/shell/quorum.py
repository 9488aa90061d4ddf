"""The asyncio driver of the Raft core: timers, sockets, the quorum-state file.

:class:`QuorumDriver` owns one :class:`~odradek.raft.core.RaftNode` and does for it what
the simulator does in tests: tick it, deliver messages to it, and carry out each
:class:`~odradek.raft.ready.Ready` in the order the core demands (persist the quorum
state, then send, then apply; flush the log when it can, then tell the core).
Requests to other nodes go out on
:class:`~odradek.shell.peer_client.PeerConnection`; requests from them arrive through
:meth:`QuorumDriver.handle`, called by the node's controller listener.

No disk write waits on the event loop. :class:`~odradek.shell.quorum_sync.QuorumSync`
runs the quorum-state writes and the metadata log's fsyncs on one thread of its own, one
job at a time: what is asked while a job runs goes into the next, so one fsync covers
every append made meanwhile (group commit). A Ready whose quorum state is being written
waits, with every Ready after it, until the write is durable; then its messages leave.
A log flush holds nothing back: the core sends no message that depends on an unflushed
entry, and counts its own appends only once :meth:`~odradek.raft.core.RaftNode.flushed`
says they are durable.

It also keeps the metadata log moving and watched: the leader appends a NoOpRecord
when nothing else was written for ``metadata.max.idle.interval.ms``, and any node that
sees its high watermark stand still for ``metadata.quorum.stall.alarm.ms`` while it
should move raises the alarm "metadata quorum stalled" until it moves again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from odradek.core.errors import LogOfflineError
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import UpdateRaftVoterRequest
from odradek.protocol.messages import describe_quorum_response as dq
from odradek.protocol.messages.update_raft_voter_request import KRaftVersionFeature
from odradek.protocol.messages.update_raft_voter_request import Listener as UpdateListener
from odradek.protocol.metadata import NoOpRecord
from odradek.protocol.metadata_record import encode_metadata_record
from odradek.raft import wire
from odradek.raft.core import RaftNode, State
from odradek.raft.disk_log import DiskRaftLog
from odradek.raft.log import Entry, RaftLog, SnapshotId
from odradek.raft.messages import (
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    VoteRequest,
    VoteResponse,
    bootstrap_index,
)
from odradek.raft.quorum_file import QuorumStateFile, StoredQuorumState
from odradek.raft.ready import QuorumState, Ready
from odradek.raft.voters import ReplicaKey, Voter, VoterEndpoint, VoterSet
from odradek.shell.clock import monotonic_ms
from odradek.shell.peer_client import (
    PLAINTEXT,
    ClientSecurity,
    PeerConnection,
    PeerPool,
    PeerUnavailable,
)
from odradek.shell.quorum_sync import QuorumSync
from odradek.shell.supervisor import Supervisor

log = logging.getLogger("odradek.quorum")

TICK_MS = 20
VERSIONS: dict[type[Any], int] = {
    VoteRequest: wire.VOTE_VERSION,
    FetchRequest: wire.FETCH_VERSION,
    FetchSnapshotRequest: wire.FETCH_SNAPSHOT_VERSION,
}


def _unsupervised(name: str, error: BaseException) -> None:
    """Without the node's supervisor (tests): a failed task is logged, loudly."""
    log.critical("task %s failed: %r", name, error)


class NotController(Exception):
    """This node is not (or no longer) the quorum leader; the write may or may not commit."""


class QuorumHalted(Exception):
    """This node left the quorum for good: its metadata log failed (see
    :meth:`QuorumDriver.halt`). A peer's request to it gets no answer."""


@dataclass(frozen=True, slots=True)
class QuorumConfig:
    node_id: int
    cluster_id: str
    directory_id: uuid.UUID
    static_voters: dict[int, tuple[str, int]] | None  # controller.quorum.voters
    bootstrap_servers: list[tuple[str, int]]  # controller.quorum.bootstrap.servers
    controller_listener: str  # the listener name voters publish (CONTROLLER)
    own_endpoints: tuple[VoterEndpoint, ...]
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    max_idle_interval_ms: int = 500
    stall_alarm_ms: int = 10_000
    security: ClientSecurity = PLAINTEXT
    """The client context of the controller listener, when it is SSL."""


class QuorumDriver:
    def __init__(
        self,
        config: QuorumConfig,
        raft_log: RaftLog,
        state_file: QuorumStateFile,
        on_commit: Callable[[list[Entry]], None],
        on_snapshot: Callable[[SnapshotId], None],
        supervisor: Supervisor | None = None,
    ) -> None:
        self.config = config
        self._supervisor = supervisor or Supervisor(_unsupervised)
        self.log = raft_log
        self.state_file = state_file
        self.on_commit = on_commit
        self.on_snapshot = on_snapshot
        self.node: RaftNode | None = None
        self._peers = PeerPool(f"raft-{config.node_id}", config.security)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._ticker: asyncio.Task[None] | None = None
        self._sync: QuorumSync | None = None
        self._syncer: asyncio.Task[None] | None = None
        # Readys waiting for a quorum-state write: (its number, the Ready), in order.
        self._held: deque[tuple[int, Ready]] = deque()
        # Acknowledgements waiting for the same: (the state's number, the waiter).
        self._barriers: deque[tuple[int, asyncio.Future[None]]] = deque()
        # The high watermark of the last Ready carried out: what the state machine has.
        self._applied_high_watermark = 0
        self._inbound: dict[tuple[int, int], asyncio.Future[Message]] = {}
        self._vote_inbound: dict[int, asyncio.Future[Message]] = {}
        self._inbound_seq = 0
        self._commit_waiters: dict[int, asyncio.Future[None]] = {}
        self._change_waiters: dict[int, asyncio.Future[int]] = {}
        self._leader_epoch: int | None = None  # the epoch we lead, if we do
        self._writable_from = 0  # the log end when we became leader
        self._known_leader: tuple[int, int | None] = (-1, None)
        self._update_sent_epoch: int | None = None
        self._update_not_before_ms = 0
        self._last_write_ms = 0
        self._hw_moved_ms = 0
        self._hw_seen = -1
        self.stalled_since_ms: int | None = None
        self.leader_changed = asyncio.Event()
        self.halted: str | None = None
        """Why this replica stopped for good (its metadata log failed), or None."""
        self.on_halt: Callable[[str], None] | None = None
        # Endpoints learned from responses (KIP-853 NodeEndpoints): how an observer that
        # knows no voter set yet reaches the leader a bootstrap server named.
        self._learned: dict[int, tuple[str, int]] = {}
        # Where this node's own controller listener is bound (its voter entry may name
        # an older port, as after `odradek dev --port 0` restarts).
        self.local_address: tuple[str, int] | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        cfg = self.config
        stored = self.state_file.read()
        restored = None
        if stored is not None:
            voted = None
            if stored.voted_id is not None:
                voted = ReplicaKey(stored.voted_id, stored.voted_directory_id or uuid.UUID(int=0))
            restored = QuorumState(stored.epoch, voted, stored.leader_id)
        static = VoterSet.static(cfg.static_voters) if cfg.static_voters else None
        now = monotonic_ms()
        self.node = RaftNode(
            cfg.node_id,
            self.log,
            random.Random(),
            now,
            directory_id=cfg.directory_id,
            static_voters=static,
            bootstrap_servers=len(cfg.bootstrap_servers),
            election_timeout_ms=cfg.election_timeout_ms,
            fetch_timeout_ms=cfg.fetch_timeout_ms,
            quorum_state=restored,
            fetch_backoff_ms=cfg.retry_backoff_ms,
            request_timeout_ms=cfg.request_timeout_ms,
        )
        self._hw_moved_ms = now
        self._applied_high_watermark = self.node.high_watermark
        self._sync = QuorumSync(self.log, self.state_file)
        # The syncer carries out what waited for the disk; like the ticker it ends only
        # when the replica halts.
        self._syncer = self._supervisor.start("raft-sync", self._sync_forever(), may_end=True)
        self._process(self.node.ready(now))
        # The ticker drives the core: without it this replica neither votes nor fetches.
        # It ends only when the replica halts (which stops the node by itself).
        self._ticker = self._supervisor.start("raft-ticker", self._tick_forever(), may_end=True)
        log.info(
            "metadata quorum: node %d (%s) starts in epoch %d, log %d..%d",
            cfg.node_id,
            "voter" if self.node.is_voter else "observer",
            self.node.epoch,
            self.log.start_offset(),
            self.log.end_offset(),
        )

    async def stop(self) -> None:
        node = self.node
        if node is not None and node.state is State.LEADER and self.halted is None:
            # Hand over now rather than make the voters wait out their fetch timeout.
            with contextlib.suppress(QuorumHalted), self._persisting():
                node.resign(monotonic_ms())
                self._process(node.ready(monotonic_ms()))
            with contextlib.suppress(Exception):
                async with asyncio.timeout(0.5):
                    await self._synced()
                    await asyncio.gather(*self._tasks, return_exceptions=True)
        tasks = [t for t in [self._ticker, self._syncer, *self._tasks] if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._sync is not None:
            self._sync.stop()
        await self._peers.close()
        self._fail_waiters()

    async def _synced(self) -> None:
        """Until the sync thread has nothing left to do and nothing waits for it."""
        while self._sync is not None and not (self._sync.idle and not self._held):
            await asyncio.sleep(0.001)

    @property
    def raft(self) -> RaftNode:
        assert self.node is not None, "the quorum driver is not started"
        return self.node

    @property
    def is_leader(self) -> bool:
        return self.halted is None and self.node is not None and self.node.state is State.LEADER

    def halt(self, reason: str) -> None:
        """Leave the quorum for good: the metadata log (or the quorum-state file) cannot
        be written, so this replica can persist neither a vote nor a record, and a Raft
        replica that acts without persisting breaks the protocol's safety. The core is
        never driven again; the node's ``on_halt`` stops the node."""
        if self.halted is not None:
            return
        self.halted = reason
        log.error(
            "node %d leaves the metadata quorum: %s (it can persist neither a vote nor a "
            "record any more)",
            self.config.node_id,
            reason,
        )
        if self._ticker is not None:
            self._ticker.cancel()
        if self._syncer is not None:
            self._syncer.cancel()
        if self._sync is not None:
            self._sync.stop()
        # What waited for a write that failed must never be sent.
        self._held.clear()
        for _, barrier in self._barriers:
            if not barrier.done():
                barrier.set_exception(QuorumHalted(reason))
        self._barriers.clear()
        self._fail_waiters()
        for waiter in self._change_waiters.values():
            if not waiter.done():
                waiter.set_result(ErrorCode.NOT_CONTROLLER)
        self._change_waiters.clear()
        if self.on_halt is not None:
            self.on_halt(reason)

    @contextlib.contextmanager
    def _persisting(self) -> Iterator[None]:
        """Drive the core here: an I/O failure of the metadata log halts the replica."""
        if self.halted is not None:
            raise QuorumHalted(self.halted)
        try:
            yield
        except (LogOfflineError, OSError) as e:
            if isinstance(e, LogOfflineError) and not self._is_metadata_log(e.path):
                raise  # another log dir (applying a commit hosts partitions): not ours
            self.halt(f"the metadata log failed: {e}")
            raise QuorumHalted(str(e)) from e

    def _is_metadata_log(self, path: str) -> bool:
        directory = getattr(self.log, "directory", None)
        return directory is None or path == directory or path.startswith(directory + "/")

    @property
    def writable(self) -> bool:
        """Leader, and everything before its epoch is committed and applied: the image
        is the whole committed state, so commands can be decided on it."""
        return self.is_leader and self._applied_high_watermark >= self._writable_from

    # ------------------------------------------------------------------ writes

    async def propose(self, records: list[bytes]) -> int:
        """Append one batch on the leader and wait until it commits; its base offset.

        NotController when this node does not lead, or stops leading before the batch
        commits (it may still commit under the next leader, as with Kafka's controller).
        """
        node = self.raft
        now = monotonic_ms()
        try:
            with self._persisting():
                offset = node.propose(records, now)
                if offset is None:
                    raise NotController(f"node {node.node_id} is not the metadata quorum leader")
                self._last_write_ms = now
                future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._commit_waiters[offset] = future
                self._process(node.ready(now))
        except QuorumHalted as e:
            raise NotController(f"node {node.node_id} left the metadata quorum: {e}") from e
        await future
        return offset

    async def wait_caught_up(self, target: int) -> None:
        """Wait until the high watermark reaches ``target`` (the log end at start)."""
        while self._applied_high_watermark < target or self.raft.leader is None:
            await asyncio.sleep(TICK_MS / 1000)

    async def change_voters(
        self, change: Callable[[RaftNode, int], Any], timeout_ms: int
    ) -> tuple[int, str]:
        """Run a voter change on the leader and wait for its commit: (error, message)."""
        node = self.raft
        now = monotonic_ms()
        try:
            with self._persisting():
                outcome = change(node, now)
                if outcome.error != ErrorCode.NONE or outcome.offset is None:
                    return outcome.error, outcome.message
                future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
                self._change_waiters[outcome.offset] = future
                self._process(node.ready(now))
        except QuorumHalted:
            return ErrorCode.NOT_CONTROLLER, "this controller left the metadata quorum"
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                error = await future
        except TimeoutError:
            return ErrorCode.REQUEST_TIMED_OUT, "the voter change did not commit in time"
        return error, ""

    # ------------------------------------------------------------------ the Ready loop

    async def _tick_forever(self) -> None:
        while self.halted is None:
            await asyncio.sleep(TICK_MS / 1000)
            now = monotonic_ms()
            node = self.raft
            try:
                with self._persisting():
                    if (
                        node.state is State.LEADER
                        and now - self._last_write_ms >= self.config.max_idle_interval_ms
                    ):
                        # Keep the high watermark moving, so that a stall is visible (KIP-835).
                        self._last_write_ms = now
                        node.propose([encode_metadata_record(NoOpRecord())], now)
                    self._process(node.tick(now))
            except QuorumHalted:
                return
            self._watch_progress(now)
            self._maybe_update_own_voter()

    def _process(self, ready: Ready) -> None:
        """Carry out ``ready``: hand its writes to the sync thread, then send and apply
        it now, or once the quorum state it carries (or an earlier one) is durable."""
        sync = self._sync
        assert sync is not None, "the quorum driver is not started"
        if ready.persist is not None:
            p = ready.persist
            sync.write_state(
                StoredQuorumState(
                    p.epoch,
                    p.leader,
                    None if p.voted_for is None else p.voted_for.node_id,
                    None if p.voted_for is None else p.voted_for.directory_id,
                )
            )
        if ready.flush is not None:
            sync.flush(ready.flush)
        # The disk starts now, while the loop sends and applies.
        sync.kick()
        # Followed at once, not when the Ready is carried out: `writable` must never see
        # a new leadership with the previous one's log end.
        self._track_leadership()
        if sync.state_durable < sync.state_asked:
            self._held.append((sync.state_asked, ready))
        else:
            self._carry_out(ready)

    def _carry_out(self, ready: Ready) -> None:
        """Send, then apply: the quorum state ``ready`` depends on is durable."""
        for destination, message in ready.messages:
            if isinstance(message, VoteResponse | FetchResponse | FetchSnapshotResponse):
                self._answer(destination, message)
            else:
                self._spawn(self._request(destination, message))
        if ready.snapshot is not None:
            self.on_snapshot(ready.snapshot)
        if ready.committed:
            self.on_commit(ready.committed)
        if ready.high_watermark is not None:
            self._applied_high_watermark = ready.high_watermark
        for offset in [o for o in self._commit_waiters if o < self._applied_high_watermark]:
            future = self._commit_waiters.pop(offset)
            if not future.done():
                future.set_result(None)
        for offset, error in ready.voter_changes:
            waiter = self._change_waiters.pop(offset, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(error)

    def _track_leadership(self) -> None:
        node = self.raft
        leading = node.epoch if node.state is State.LEADER else None
        if leading != self._leader_epoch:
            if self._leader_epoch is not None:
                self._fail_waiters()
            self._leader_epoch = leading
            if leading is not None:
                self._writable_from = node.log.end_offset()
                log.info("node %d leads the metadata quorum in epoch %d", node.node_id, leading)
        if (node.epoch, node.leader) != self._known_leader:
            self._known_leader = (node.epoch, node.leader)
            self.leader_changed.set()
            self.leader_changed = asyncio.Event()

    async def _sync_forever(self) -> None:
        """Carry out what each finished sync job let go: the Readys that waited for its
        quorum state, then the core's reaction to its flush."""
        sync = self._sync
        assert sync is not None
        while self.halted is None:
            job = await sync.finished()
            if job.error is not None:
                if job.ticket is not None and isinstance(self.log, DiskRaftLog):
                    self.log.fail_flush(job.ticket, job.error)
                self.halt(f"the metadata log failed: {job.error}")
                return
            while self._held and self._held[0][0] <= sync.state_durable:
                self._carry_out(self._held.popleft()[1])
            while self._barriers and self._barriers[0][0] <= sync.state_durable:
                barrier = self._barriers.popleft()[1]
                if not barrier.done():
                    barrier.set_result(None)
            try:
                with self._persisting():
                    if job.flush is not None:
                        self._process(self.raft.flushed(job.flush, monotonic_ms()))
                    sync.kick()
            except QuorumHalted:
                return

    def _fail_waiters(self) -> None:
        for future in self._commit_waiters.values():
            if not future.done():
                future.set_exception(NotController("lost the metadata quorum leadership"))
        self._commit_waiters.clear()

    def _watch_progress(self, now: int) -> None:
        node = self.raft
        if node.high_watermark != self._hw_seen:
            self._hw_seen = node.high_watermark
            self._hw_moved_ms = now
            if self.stalled_since_ms is not None:
                log.warning(
                    "metadata quorum progressing again: high watermark %d after %d ms",
                    node.high_watermark,
                    now - self.stalled_since_ms,
                )
                self.stalled_since_ms = None
            return
        if self.stalled_since_ms is None and now - self._hw_moved_ms >= self.config.stall_alarm_ms:
            self.stalled_since_ms = self._hw_moved_ms
            log.error(
                "metadata quorum stalled: high watermark %d unchanged for %d ms "
                "(node %d is %s in epoch %d, leader %s)",
                node.high_watermark,
                now - self._hw_moved_ms,
                node.node_id,
                node.state.value,
                node.epoch,
                node.leader,
            )

    def _maybe_update_own_voter(self) -> None:
        """A voter whose listener moved tells the leader (UpdateRaftVoter, KIP-853), so
        that the voter set other nodes dial stays right; once per epoch."""
        node = self.raft
        own = node.voters.get(self.config.node_id)
        if (
            own is None
            or not node.is_voter
            or not node.dynamic
            or node.leader is None
            or self._update_sent_epoch == node.epoch
            or monotonic_ms() < self._update_not_before_ms
        ):
            return
        wanted = self.own_voter()
        if not wanted.endpoints or own.endpoints == wanted.endpoints:
            return
        self._update_sent_epoch = node.epoch
        if node.leader == self.config.node_id:
            self._spawn(self._update_self(wanted))
            return
        address = self._address(node.leader)
        if address is not None:
            self._spawn(self._send_update_voter(address, wanted, node.epoch))

    async def _update_self(self, voter: Voter) -> None:
        error, _ = await self.change_voters(lambda n, now: n.update_voter(voter, now), 30_000)
        if error != ErrorCode.NONE:
            self._retry_update_later()

    def _retry_update_later(self) -> None:
        self._update_sent_epoch = None
        self._update_not_before_ms = monotonic_ms() + 1000

    async def _send_update_voter(self, address: tuple[str, int], voter: Voter, epoch: int) -> None:
        request = UpdateRaftVoterRequest(
            cluster_id=self.config.cluster_id,
            current_leader_epoch=epoch,
            voter_id=voter.node_id,
            voter_directory_id=voter.directory_id,
            listeners=[
                UpdateListener(name=e.name, host=e.host, port=e.port) for e in voter.endpoints
            ],
            k_raft_version_feature=KRaftVersionFeature(
                min_supported_version=0, max_supported_version=1
            ),
        )
        try:
            response = await self._peer(address).request(
                request, 0, self.config.request_timeout_ms / 1000
            )
        except (PeerUnavailable, TimeoutError):
            self._retry_update_later()
            return
        if response.error_code != ErrorCode.NONE:
            log.warning("UpdateRaftVoter refused: %s", ErrorCode(response.error_code).name)
            self._retry_update_later()
        else:
            log.info("updated this voter's endpoints to %s", voter.endpoints)

    def stall_message(self) -> str | None:
        if self.stalled_since_ms is None:
            return None
        for_ms = monotonic_ms() - self.stalled_since_ms
        return (
            f"metadata quorum stalled: high watermark {self.raft.high_watermark} unchanged "
            f"for {for_ms} ms"
        )

    def _spawn(self, coroutine: Any) -> None:
        # One request. Network trouble is handled inside it (Raft tolerates a lost
        # message); anything else that escapes is a bug, or a committed record the image
        # refused, and either way the node must not go on: fatal.
        task = self._supervisor.start("raft-request", coroutine, may_end=True)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ outbound

    def address_of(self, node_id: int) -> tuple[str, int] | None:
        """Where to reach voter ``node_id`` on its controller listener, if known."""
        return self._address(node_id) if node_id >= 0 else None

    def _address(self, destination: int) -> tuple[str, int] | None:
        index = bootstrap_index(destination)
        if index is not None:
            servers = self.config.bootstrap_servers
            return servers[index] if index < len(servers) else None
        if destination == self.config.node_id and self.local_address is not None:
            return self.local_address
        static = self.config.static_voters
        if static and destination in static:
            return static[destination]
        voter = self.raft.voters.get(destination)
        if voter is None:
            return self._learned.get(destination)
        for endpoint in voter.endpoints:
            if endpoint.name == self.config.controller_listener:
                return (endpoint.host, endpoint.port)
        return (voter.endpoints[0].host, voter.endpoints[0].port) if voter.endpoints else None

    def _peer(self, address: tuple[str, int]) -> PeerConnection:
        return self._peers.get(address)

    async def _request(self, destination: int, message: Message) -> None:
        address = self._address(destination)
        if address is None:
            return  # an unknown voter: the core retries elsewhere on its timers
        body = wire.request_to_wire(message, self.config.cluster_id)
        version = VERSIONS.get(type(message), wire.BEGIN_QUORUM_EPOCH_VERSION)
        wait_ms = getattr(message, "max_wait_ms", 0)
        try:
            response = await self._peer(address).request(
                body, version, (wait_ms + self.config.request_timeout_ms) / 1000
            )
        except (PeerUnavailable, TimeoutError) as e:
            log.debug("%s to %s failed: %s", type(message).__name__, address, e)
            if (
                isinstance(e, PeerUnavailable)
                and e.refused
                and isinstance(message, FetchRequest)
                and self.node is not None
            ):
                with contextlib.suppress(QuorumHalted), self._persisting():
                    self._process(self.node.leader_unreachable(destination, monotonic_ms()))
            return
        for endpoint in getattr(response, "node_endpoints", None) or ():
            self._learned[endpoint.node_id] = (endpoint.host, endpoint.port)
        answer = wire.response_from_wire(message, response)
        if answer is not None and self.node is not None:
            with contextlib.suppress(QuorumHalted), self._persisting():
                self._process(self.node.step(answer, destination, monotonic_ms()))

    # ------------------------------------------------------------------ inbound

    def _answer(
        self, destination: int, message: VoteResponse | FetchResponse | FetchSnapshotResponse
    ) -> None:
        if isinstance(message, VoteResponse):
            future = self._vote_inbound.pop(destination, None)
        else:
            future = self._inbound.pop((destination, message.request_id), None)
        if future is not None and not future.done():
            future.set_result(message)

    async def handle(self, body: wire.WireRequest) -> wire.WireResponse:
        """Answer a KRaft request from another node (Vote, BeginQuorumEpoch,
        EndQuorumEpoch, Fetch of the metadata partition, FetchSnapshot)."""
        node = self.raft
        self._inbound_seq += 1
        request_id = self._inbound_seq
        decoded = wire.request_from_wire(body, self.config.cluster_id, request_id)
        if isinstance(decoded, wire.Rejected):
            return wire.rejection(body, decoded)
        message, sender = decoded
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Message] | None = None
        if isinstance(message, VoteRequest):
            future = loop.create_future()
            self._vote_inbound[sender] = future
        elif isinstance(message, FetchRequest | FetchSnapshotRequest):
            future = loop.create_future()
            self._inbound[(sender, request_id)] = future
        with self._persisting():  # a halted replica answers nothing: QuorumHalted
            self._process(node.step(message, sender, monotonic_ms()))
        if future is None:
            # Even an acknowledgement (BeginQuorumEpoch, EndQuorumEpoch) tells our epoch:
            # it leaves once that epoch is durable, like every other message.
            epoch, leader = node.epoch, node.leader
            await self._state_durable()
            return wire.acknowledgement(body, epoch, leader)
        wait_ms = getattr(message, "max_wait_ms", 0) + self.config.request_timeout_ms
        try:
            async with asyncio.timeout(wait_ms / 1000):
                answer = await future
        except TimeoutError:
            # The core dropped the request (it lost the leadership meanwhile).
            self._inbound.pop((sender, request_id), None)
            return wire.rejection(
                body, wire.Rejected(ErrorCode.NOT_LEADER_OR_FOLLOWER, "leadership changed")
            )
        response = wire.response_to_wire(answer, int(time.time() * 1000))
        self._add_leader_endpoint(response)
        return response

    async def _state_durable(self) -> None:
        """Until every quorum state asked for so far is durable (QuorumHalted if the
        replica halts first)."""
        sync = self._sync
        assert sync is not None
        if sync.state_durable >= sync.state_asked:
            return
        barrier: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._barriers.append((sync.state_asked, barrier))
        await barrier

    def _add_leader_endpoint(self, response: wire.WireResponse) -> None:
        """Name the leader's address in the response (NodeEndpoints), for fetchers that
        do not know the voter set yet."""
        leader = self.raft.leader
        if leader is None:
            return
        address = self._own_advertised() if leader == self.config.node_id else None
        address = address or self._address(leader)
        if address is None:
            return
        wire.add_leader_endpoint(response, leader, *address)

    def _own_advertised(self) -> tuple[str, int] | None:
        for endpoint in self.config.own_endpoints:
            if endpoint.name == self.config.controller_listener:
                return (endpoint.host, endpoint.port)
        return self.local_address

    # ------------------------------------------------------------------ DescribeQuorum

    def describe(self) -> dq.DescribeQuorumResponse:
        node = self.raft
        mono = monotonic_ms()
        wall = int(time.time() * 1000)
        description = node.describe(mono)

        def stamp(value: int | None) -> int:
            return -1 if value is None else wall - (mono - value)

        def state(row: Any) -> dq.ReplicaState:
            return dq.ReplicaState(
                replica_id=row.node_id,
                replica_directory_id=uuid.UUID(row.directory_id),
                log_end_offset=row.log_end_offset,
                last_fetch_timestamp=stamp(row.last_fetch_ms),
                last_caught_up_timestamp=stamp(row.last_caught_up_ms),
            )

        partition = dq.PartitionData(
            partition_index=wire.METADATA_PARTITION,
            error_code=ErrorCode.NONE,
            error_message=self.stall_message(),
            leader_id=-1 if description.leader is None else description.leader,
            leader_epoch=description.epoch,
            high_watermark=description.high_watermark,
            current_voters=[state(r) for r in description.voters],
            observers=[state(r) for r in description.observers],
        )
        nodes = [
            dq.Node(
                node_id=v.node_id,
                listeners=[dq.Listener(name=e.name, host=e.host, port=e.port) for e in v.endpoints],
            )
            for v in node.voters
        ]
        return dq.DescribeQuorumResponse(
            topics=[dq.TopicData(topic_name=wire.METADATA_TOPIC, partitions=[partition])],
            nodes=nodes,
        )

    def own_voter(self) -> Voter:
        """This node as a voter: its id, metadata directory id and controller listener
        (with the bound port when the configured one is 0)."""
        endpoints = tuple(
            VoterEndpoint(e.name, e.host, self.local_address[1])
            if e.port == 0 and self.local_address is not None
            else e
            for e in self.config.own_endpoints
        )
        return Voter(self.config.node_id, self.config.directory_id, endpoints)
