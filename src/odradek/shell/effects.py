"""Effects: carrying a handler's outcome through what it waits for, to its answer.

A handler (:mod:`odradek.broker`) returns an outcome: a reply, or an effect with a
continuation (:mod:`odradek.broker.effects`, ADR 0004). :class:`Effects` performs each
effect and calls the continuation until a reply comes: it commits metadata records on
the active controller (deciding again when the image moved meanwhile), forwards a
metadata write to the active controller from any other node (:class:`Forwarder`), waits
for a flush, for the in-sync replicas or for data (:class:`LongPolls`), runs record
checks off the loop, and hands group and controller calls to their services. Each
service is reached through a small protocol naming what is asked of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from odradek.broker.effects import (
    AwaitData,
    AwaitFlush,
    AwaitRecordCheck,
    AwaitReplication,
    CommitRecords,
    ControllerCall,
    GroupCall,
    NoReply,
    Outcome,
    Reply,
)
from odradek.broker.router import Close, Dispatch, Respond, Router
from odradek.broker.state import BrokerState
from odradek.broker.throttle import connection_throttle_ms, from_replica, request_throttle_ms
from odradek.core.errors import RemoteProtocolError
from odradek.protocol.api import decode_response
from odradek.protocol.compression import (
    DecompressBuffer,
)
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import EnvelopeRequest
from odradek.protocol.primitives import Records
from odradek.raft.core import RaftNode
from odradek.security.principal import KafkaPrincipal, serialize_principal
from odradek.shell.clock import monotonic_ms, now_ms
from odradek.shell.connections import CloseConnection
from odradek.shell.peer_client import PeerPool, PeerUnavailable
from odradek.shell.quorum import NotController

# Forwarding a metadata write to the active controller: how long to keep trying, across
# leader changes, and the pause between tries while the leader stays the same.
FORWARD_BACKOFF_S = 0.1
FORWARD_TIMEOUT_S = 30.0

PartitionKey = tuple[str, int]


class ImageGeneration(Protocol):
    """Counts the image's changes (:class:`~odradek.shell.metadata_apply.MetadataApplier`)."""

    @property
    def generation(self) -> int: ...


class Flushes(Protocol):
    """Group commit (:class:`~odradek.shell.group_commit.GroupCommit`)."""

    async def await_flush(self, offsets: dict[PartitionKey, int]) -> frozenset[PartitionKey]: ...

    def request_flush(self) -> None: ...


class ReplicaWaits(Protocol):
    """The in-sync replicas' acknowledgements (the replication service)."""

    async def await_replication(
        self, offsets: dict[PartitionKey, int], timeout_ms: int
    ) -> dict[PartitionKey, int]: ...


class MetadataWriter(Protocol):
    """The active controller (:class:`~odradek.shell.controller_service.ControllerService`)."""

    write_lock: asyncio.Lock

    async def commit(self, records: list[Any]) -> None: ...

    async def handle(self, call: ControllerCall, peer: str = "?") -> Any: ...


class GroupCalls(Protocol):
    """The group coordinator's service (:class:`~odradek.shell.group_service.GroupService`)."""

    async def call(self, call: GroupCall, peer: str) -> Any: ...


class RecordChecks(Protocol):
    """The record-check thread (:class:`~odradek.shell.record_check.RecordCheckThread`)."""

    async def run(self, check: Callable[[DecompressBuffer], Any]) -> Any: ...


class ControllerLocation(Protocol):
    """Where the active controller is (the metadata quorum's driver)."""

    leader_changed: asyncio.Event

    @property
    def raft(self) -> RaftNode: ...

    def address_of(self, node_id: int) -> tuple[str, int] | None: ...


class LongPolls:
    """Fetches waiting for data: woken by new records or a new high watermark."""

    def __init__(self, flushes: Flushes, *, flush_before_ack: bool) -> None:
        self._flushes = flushes
        self._flush_before_ack = flush_before_ack
        self._waiters: dict[PartitionKey, set[asyncio.Future[None]]] = {}

    def wake(self, key: PartitionKey) -> None:
        """New records or a new high watermark: long-polling fetches of ``key`` retry."""
        for future in self._waiters.pop(key, set()):
            if not future.done():
                future.set_result(None)

    async def wait(self, partitions: frozenset[PartitionKey], deadline_ms: int) -> bool:
        """Wait until one of ``partitions`` is woken or ``deadline_ms`` (monotonic)
        passes; whether it timed out."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        for key in partitions:
            self._waiters.setdefault(key, set()).add(future)
        if not self._flush_before_ack:
            self._flushes.request_flush()
        try:
            async with asyncio.timeout(max(deadline_ms - monotonic_ms(), 0) / 1000):
                await future
            return False
        except TimeoutError:
            return True
        finally:
            for key in partitions:
                self._waiters.get(key, set()).discard(future)


def _address_bytes(host: str) -> bytes:
    """A client host as Envelope's ``client_host_address`` carries it (4 or 16 bytes)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).packed
    except ValueError:
        return b"\x7f\x00\x00\x01"  # not an address (a test's peer name): loopback


def _relayed_throttle_ms(dispatch: Dispatch, relayed: bytes) -> int:
    """The ``throttle_time_ms`` of a response the active controller sent for a
    forwarded request (0 when it has none or cannot be read: the client still gets the
    bytes as they came)."""
    header = dispatch.header
    try:
        _, body = decode_response(relayed, header.request_api_key, dispatch.response_version)
    except RemoteProtocolError:
        return 0
    return int(getattr(body, "throttle_time_ms", 0))


class Forwarder:
    """Sends a metadata write to the active controller whole (Envelope, KIP-590)."""

    def __init__(self, quorum: ControllerLocation, peers: PeerPool) -> None:
        self._quorum = quorum
        self._peers = peers

    async def forward(self, payload: bytes, principal: KafkaPrincipal, host: str) -> bytes:
        """Send a client's request to the active controller, with the client's principal
        and host (the controller authorizes it as the client); its encoded response.

        Tries for ``FORWARD_TIMEOUT_S`` in all, across controller failovers: each time
        the leader this node knows changes (or after a short backoff) it asks again.
        Before, it gave up after 20 quick tries, about 2 s, less than a failover can
        take, and the client saw its connection closed.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FORWARD_TIMEOUT_S
        while (remaining := deadline - loop.time()) > 0:
            changed = self._quorum.leader_changed
            leader = self._quorum.raft.leader
            address = None if leader is None else self._quorum.address_of(leader)
            if address is not None:
                peer = self._peers.get(address)
                try:
                    answer = await peer.request(
                        EnvelopeRequest(
                            request_data=payload,
                            request_principal=serialize_principal(principal),
                            client_host_address=_address_bytes(host),
                        ),
                        0,
                        remaining,
                    )
                except (PeerUnavailable, TimeoutError):
                    answer = None
                if answer is not None and answer.error_code == ErrorCode.NONE:
                    return bytes(answer.response_data or b"")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(FORWARD_BACKOFF_S):
                    await changed.wait()
        raise NotController("no active controller answered the forwarded request")


class Effects:
    """Carries outcomes; what it needs of the rest of the node is given, or set once
    it exists (:attr:`controller` on a controller, :attr:`replication` and
    :attr:`forwarder` once the broker starts)."""

    def __init__(
        self,
        state: BrokerState,
        router: Router,
        image: ImageGeneration,
        flushes: Flushes,
        long_polls: LongPolls,
        record_checks: RecordChecks,
        groups: GroupCalls,
        *,
        node_id: int,
    ) -> None:
        self._state = state
        self._router = router
        self._image = image
        self._flushes = flushes
        self._long_polls = long_polls
        self._record_checks = record_checks
        self._groups = groups
        self._node_id = node_id
        self.controller: MetadataWriter | None = None
        self.replication: ReplicaWaits | None = None
        self.forwarder: Forwarder | None = None

    def connection_throttle_ms(self, address: str) -> int:
        if not self._state.image.client_quotas:
            return 0
        self.stamp()
        return connection_throttle_ms(self._state, address)

    def request_throttle_ms(self, dispatch: Dispatch, time_ns: int) -> int:
        if not self._state.image.client_quotas or from_replica(dispatch.body):
            return 0  # no quotas (the common case), or replication: nothing to charge
        return request_throttle_ms(self._state, dispatch.header, time_ns)

    def answer(
        self,
        dispatch: Dispatch,
        payload: bytearray,
        throttled: Callable[[int], None] = lambda ms: None,
        throttle_ms: int = 0,
    ) -> Coroutine[Any, Any, list[Records] | None]:
        """Carry ``dispatch`` to its encoded answer (None: no answer).

        The image this handler decided on is read now, when the handler has run: a
        commit applied before the returned coroutine first runs must make it decide
        again, never commit what it decided."""
        return self._answer(dispatch, payload, self._image.generation, throttled, throttle_ms)

    async def _answer(
        self,
        dispatch: Dispatch,
        payload: bytearray,
        decided_on: int,
        throttled: Callable[[int], None],
        request_throttle_ms: int,
    ) -> list[Records] | None:
        header = dispatch.header
        try:
            response = await self.carry(dispatch, payload, decided_on)
        except NotController:
            # A metadata write on a node that is not the active controller: forward the
            # whole request there (Envelope, KIP-590) and relay its response, muting
            # this connection for the throttle the controller set (KIP-599's quota is
            # charged there).
            assert self.forwarder is not None
            relayed = await self.forwarder.forward(bytes(payload), header.principal, header.host)
            throttle_ms = max(request_throttle_ms, _relayed_throttle_ms(dispatch, relayed))
            if throttle_ms > 0:
                throttled(throttle_ms)
            return [relayed]
        if response is None:
            return None
        throttle_ms = getattr(response, "throttle_time_ms", 0)
        if request_throttle_ms > throttle_ms and hasattr(response, "throttle_time_ms"):
            throttle_ms = response.throttle_time_ms = request_throttle_ms
        if throttle_ms > 0:
            throttled(throttle_ms)  # the connection reads nothing more for that long
        return Router.encode(header, response, dispatch.response_version)

    async def run_forwarded(self, payload: bytes, principal: KafkaPrincipal, host: str) -> bytes:
        """On the active controller: run a forwarded request through the broker handlers,
        as the client that sent it to the forwarding broker."""
        self.stamp()
        routed = self._router.handle(bytearray(payload), f"{host}:0", principal, forwarded=True)
        decided_on = self._image.generation
        if isinstance(routed, Close):
            raise NotController(f"forwarded request refused: {routed.reason}")
        if isinstance(routed, Respond):
            return _joined(routed.chunks)
        response = await self.carry(routed, bytearray(payload), decided_on)
        if response is None:
            return b""
        return _joined(Router.encode(routed.header, response, routed.response_version))

    async def carry(self, dispatch: Dispatch, payload: bytearray, decided_on: int) -> Any:
        """Carry a handler's outcome through its effects. ``decided_on`` is the image
        generation the handler decided on (read when it ran, not when this task first
        runs: a commit applied in between would otherwise pass for seen, and two
        requests decided on one image would both commit, a topic created twice or one
        block of producer ids handed out twice, which breaks the image on every node).
        Records built on an older image are decided again rather than committed."""
        outcome: Outcome = dispatch.outcome
        seen = decided_on
        while True:
            if isinstance(outcome, Reply):
                return outcome.response
            if isinstance(outcome, NoReply):
                if outcome.close_reason is not None:
                    raise CloseConnection(outcome.close_reason)
                return None
            self.stamp()
            if isinstance(outcome, CommitRecords):
                if self.controller is None:
                    await self._commit_records(outcome.records)  # raises NotController
                    return None
                async with self.controller.write_lock:
                    stale = self._image.generation != seen
                    if not stale:
                        await self._commit_records(outcome.records)
                        seen = self._image.generation
                if stale:
                    self.stamp()
                    again = self._router.handle(
                        payload,
                        dispatch.peer,
                        dispatch.header.principal,
                        forwarded=dispatch.header.forwarded,
                        listener=dispatch.header.listener,
                    )
                    if not isinstance(again, Dispatch):
                        return None
                    seen = self._image.generation
                    outcome = again.outcome
                    continue
                outcome = outcome.then()
            elif isinstance(outcome, ControllerCall):
                assert self.controller is not None
                return await self.controller.handle(outcome, dispatch.peer)
            elif isinstance(outcome, AwaitFlush):
                failed = await self._flushes.await_flush(outcome.offsets)
                outcome = outcome.then(failed)
            elif isinstance(outcome, AwaitReplication):
                assert self.replication is not None
                errors = await self.replication.await_replication(
                    outcome.offsets, outcome.timeout_ms
                )
                self.stamp()
                outcome = outcome.then(errors)
            elif isinstance(outcome, AwaitData):
                timed_out = await self._long_polls.wait(outcome.partitions, outcome.deadline_ms)
                self.stamp()
                outcome = outcome.then(timed_out)
            elif isinstance(outcome, GroupCall):
                return await self._groups.call(outcome, dispatch.peer)
            elif isinstance(outcome, AwaitRecordCheck):
                outcome = await self.check_records(outcome)

    async def _commit_records(self, records: list[Any]) -> None:
        """Commit records to the metadata log (only the active controller can)."""
        if self.controller is None:
            # A broker-only node forwards metadata writes to the active controller
            # (the Forward effect); one that reaches this point is answered NOT_CONTROLLER,
            # which every client retries.
            raise NotController(
                f"node {self._node_id} is not a controller: a metadata write "
                "must be forwarded to the active controller"
            )
        await self.controller.commit(records)

    async def check_records(self, effect: AwaitRecordCheck) -> Outcome:
        """A produce's record checks on the record-check thread; then its next step."""
        verdicts = await self._record_checks.run(effect.check)
        self.stamp()
        return effect.then(verdicts)

    def stamp(self) -> None:
        """Set the clocks the handlers read: before each request, and again before a
        continuation (a flush or a wait may have taken a while). Before, only
        continuations set it, and a request answered at once read the time of the last
        continuation on any connection, however long ago that was."""
        self._state.now_ms = now_ms()
        self._state.monotonic_ms = monotonic_ms()


def _joined(chunks: list[Records]) -> bytes:
    return b"".join(
        bytes(c) if isinstance(c, bytes | bytearray | memoryview) else c.read() for c in chunks
    )
