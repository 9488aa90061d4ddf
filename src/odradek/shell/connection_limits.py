"""Connection and request limits of one listener: who may connect, and how much of the
clients' requests a listener holds before it stops reading.

Each listener the node serves (the broker listener, the controller listener) has its own
:class:`ListenerGuard`, as a KRaft broker and a KRaft controller each have their own
socket server in Kafka: connections and requests on one never use up the other's
limits. A guard owns

* :class:`ListenerLimits`, the values from ``server.properties``;
* :class:`ConnectionQuotas`, the connections open on the listener and from each address
  (``max.connections``, ``listener.name.<name>.max.connections``,
  ``max.connections.per.ip``, ``max.connections.per.ip.overrides``). Over a limit a new
  connection is closed at once, where Kafka stops accepting and leaves it in the
  kernel's backlog: a refused client learns it at once and tries its next bootstrap
  server, instead of waiting there until it gave up and then taking a slot it no longer
  uses. A connection from the cluster's own nodes (:class:`PeerAddresses`: the quorum's
  voters and the registered brokers) over a limit is still admitted, counted apart and
  up to ``max.connections`` of them, so that a client flood never refuses a voter's
  Vote or Fetch, a broker's heartbeat or a follower's fetch;
* :class:`RequestBudget`, what the listener holds of requests received and not yet
  answered. A connection may have up to :data:`MAX_IN_FLIGHT_PER_CONNECTION` requests in
  progress (pipelined, answered in request order: acks=all produce requests on one
  connection share one fsync); the ones beyond the first of each connection count
  against ``queued.max.requests``, and the bytes of all of them, and of the requests
  admitted to arrive, against ``queued.max.request.bytes``. A request is admitted once
  its size is known, and then finishes arriving whatever the budget. While the budget is
  spent, a connection reads no new request, except a small one
  (:data:`SMALL_REQUEST_BYTES`) on a connection that holds nothing, as Kafka always reads
  the one request of a connection it has not muted: so the follower fetch that a waiting
  acks=all produce depends on is read, and a spent budget always comes back;
* :class:`PartialFrameWatch` (one per connection): a connection whose request has been
  arriving for ``odradek.connections.partial.request.timeout.ms`` without completing is
  closed (slow loris). Time the node spent not reading from it does not count.

What a listener holds is bounded by ``queued.max.request.bytes`` plus one request (the
one admitted past the bound) plus, per connection, a small request, the start of a
request waiting to be admitted (what one read returned) and what asyncio's stream
buffers before it pauses the socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import resource
import socket
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from odradek.broker.server_config import ServerConfig
from odradek.core.config_keys import INT_MAX
from odradek.core.errors import ConfigError

log = logging.getLogger("odradek.connections")

# Requests one connection may have in progress before the node stops reading from it.
# Kafka mutes a connection while it serves one request; the clients send up to five and
# gain from it (acks=all produce requests in flight share one fsync here).
MAX_IN_FLIGHT_PER_CONNECTION = 64
# The most one read from a connection takes.
READ_BYTES = 1 << 20
# A request this small is read from a connection that holds nothing even while the
# listener's budget is spent (a follower's fetch, a heartbeat, a metadata request), and
# what such a connection reads at once meanwhile.
SMALL_REQUEST_BYTES = 128 * 1024
# How often host names of peers are resolved again, and how long one lookup may take.
PEER_REFRESH_S = 30.0
PEER_LOOKUP_TIMEOUT_S = 2.0
# One log line per listener per this many seconds for refused connections, with a count.
REFUSAL_LOG_INTERVAL_S = 10.0
# Files the node needs besides its connections (segments, indexes, checkpoints).
OTHER_OPEN_FILES = 1024


def normalize_address(address: str) -> str:
    """An IP address as text in one form (an IPv4-mapped IPv6 address as IPv4), so that
    counts per address and comparisons with peers agree; other text is kept."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def broker_listener_name(server: ServerConfig) -> str:
    """The listener clients use: the first one not in ``controller.listener.names`` (the
    one :func:`odradek.shell.boot.node_config` serves)."""
    controller = set(server.controller_listener_names)
    for endpoint in server.listeners:
        if endpoint.listener_name not in controller:
            return endpoint.listener_name
    return "PLAINTEXT"


@dataclass(frozen=True)
class ListenerLimits:
    """One listener's limits (see the module doc); ``queued_max_request_bytes`` <= 0
    means no bound, as Kafka reads it."""

    listener: str
    max_connections: int = INT_MAX
    max_connections_per_ip: int = INT_MAX
    max_connections_per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    queued_max_requests: int = 500
    queued_max_request_bytes: int = -1
    partial_request_timeout_ms: int = 30_000

    @classmethod
    def from_server(cls, server: ServerConfig, listener: str) -> ListenerLimits:
        """The limits of ``listener``; host names in the per-address overrides are
        resolved now, once, as Kafka resolves them when it reads its configuration."""
        return cls(
            listener=listener,
            max_connections=server.listener_max_connections(listener),
            max_connections_per_ip=server.max_connections_per_ip,
            max_connections_per_ip_overrides=_resolve_overrides(
                server.max_connections_per_ip_overrides
            ),
            queued_max_requests=server.queued_max_requests,
            queued_max_request_bytes=server.queued_max_request_bytes,
            partial_request_timeout_ms=server.partial_request_timeout_ms,
        )


def _resolve_overrides(overrides: Mapping[str, int]) -> dict[str, int]:
    resolved: dict[str, int] = {}
    for host, count in overrides.items():
        literal = normalize_address(host)
        if literal != host or _is_ip(host):
            resolved[literal] = count
            continue
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except OSError as e:
            raise ConfigError(
                f"max.connections.per.ip.overrides: cannot resolve host {host!r}: {e}"
            ) from e
        for info in infos:
            resolved[normalize_address(str(info[4][0]))] = count
    return resolved


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


# --- Connections --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Slot:
    """One admitted connection: where it came from, and whether it counts as a peer's."""

    address: str
    peer: bool


class ConnectionQuotas:
    """The connections open on one listener, in total and per address (Kafka's
    ``ConnectionQuotas``), and the peers' connections admitted over the limits."""

    def __init__(self, limits: ListenerLimits) -> None:
        self.limits = limits
        self.total = 0
        self.peers = 0
        self._per_address: Counter[str] = Counter()

    def limit_for(self, address: str) -> int:
        return self.limits.max_connections_per_ip_overrides.get(
            address, self.limits.max_connections_per_ip
        )

    def admit(self, address: str) -> Slot | str:
        """Count a new connection from ``address``, or say which limit refuses it."""
        address = normalize_address(address)
        if self.total >= self.limits.max_connections:
            return f"max.connections ({self.limits.max_connections}) reached"
        allowed = self.limit_for(address)
        if self._per_address[address] >= allowed:
            return f"max.connections.per.ip ({allowed}) reached for {address}"
        self.total += 1
        self._per_address[address] += 1
        return Slot(address, peer=False)

    def admit_peer(self, address: str) -> Slot | str:
        """Count a connection from a peer's address that :meth:`admit` refused."""
        if self.peers >= self.limits.max_connections:
            return f"max.connections ({self.limits.max_connections}) reached, peers' too"
        self.peers += 1
        return Slot(normalize_address(address), peer=True)

    def release(self, slot: Slot) -> None:
        if slot.peer:
            self.peers -= 1
            return
        self.total -= 1
        self._per_address[slot.address] -= 1
        if self._per_address[slot.address] <= 0:
            del self._per_address[slot.address]

    def count(self, address: str) -> int:
        """Connections open from ``address`` (peers' admitted over the limit excluded)."""
        return self._per_address.get(normalize_address(address), 0)


class PeerAddresses:
    """The IP addresses of the cluster's own nodes, from the host names ``hosts`` gives
    (voters, registered brokers); names are resolved at most every
    :data:`PEER_REFRESH_S`, and only when a connection is over a limit."""

    def __init__(self, hosts: Callable[[], Iterable[str]]) -> None:
        self._hosts = hosts
        self._addresses: frozenset[str] = frozenset()
        self._resolved_from: frozenset[str] | None = None
        self._resolved_at = 0.0
        self._resolving: asyncio.Future[frozenset[str]] | None = None

    async def contains(self, address: str) -> bool:
        return normalize_address(address) in await self.addresses()

    async def addresses(self) -> frozenset[str]:
        hosts = frozenset(h for h in self._hosts() if h)
        loop = asyncio.get_running_loop()
        fresh = loop.time() - self._resolved_at < PEER_REFRESH_S
        if hosts == self._resolved_from and fresh:
            return self._addresses
        if self._resolving is None:
            # One lookup at a time, shared by every connection that asks meanwhile.
            self._resolving = asyncio.ensure_future(self._resolve(hosts))
        resolving = self._resolving
        try:
            return await asyncio.shield(resolving)
        finally:
            if resolving.done() and self._resolving is resolving:
                self._resolving = None

    async def _resolve(self, hosts: frozenset[str]) -> frozenset[str]:
        loop = asyncio.get_running_loop()
        found: set[str] = set()
        for host in hosts:
            literal = normalize_address(host.strip("[]"))
            if _is_ip(literal):
                found.add(literal)
                continue
            with contextlib.suppress(OSError, TimeoutError):
                async with asyncio.timeout(PEER_LOOKUP_TIMEOUT_S):
                    infos = await loop.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
                found.update(normalize_address(str(info[4][0])) for info in infos)
        self._addresses = frozenset(found)
        self._resolved_from = hosts
        self._resolved_at = loop.time()
        return self._addresses


class RefusalLog:
    """Refused connections, logged at most once per :data:`REFUSAL_LOG_INTERVAL_S` with a
    count: a flood must not turn into a flood of log lines."""

    def __init__(self, listener: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.listener = listener
        self._clock = clock
        self._last_logged: float | None = None
        self._since = 0

    def refused(self, address: str, reason: str) -> None:
        now = self._clock()
        last = self._last_logged
        if last is None:
            log.warning(
                "listener %s refused a connection from %s: %s (further refusals are "
                "counted and logged every %.0f s at most)",
                self.listener,
                address,
                reason,
                REFUSAL_LOG_INTERVAL_S,
            )
            self._last_logged = now
            return
        self._since += 1
        if now - last < REFUSAL_LOG_INTERVAL_S:
            return
        log.warning(
            "listener %s refused %d connection(s) in the last %.0f s, the latest from %s: %s",
            self.listener,
            self._since,
            now - last,
            address,
            reason,
        )
        self._last_logged = now
        self._since = 0


# --- Requests -----------------------------------------------------------------------------


class RequestBudget:
    """What one listener holds of requests received and not yet answered: the requests
    beyond the first of each connection (``queued.max.requests``), and the bytes of all
    of them plus those of the requests admitted to arrive (``queued.max.request.bytes``).

    A request is admitted when its size is known (its first four bytes have arrived), and
    its whole size is counted from then on, as Kafka takes a request's buffer from its
    memory pool at that moment: an admitted request always finishes arriving, so the
    budget cannot fill up with halves of requests that wait for each other. It is
    admitted while there is room (one may go past the bound, as in Kafka), or when its
    connection holds nothing and it is small (:data:`SMALL_REQUEST_BYTES`).
    """

    def __init__(self, max_requests: int, max_bytes: int) -> None:
        self.max_requests = max_requests
        self.max_bytes = max_bytes if max_bytes > 0 else None
        self.requests = 0
        self.bytes = 0
        self._waiters: set[asyncio.Future[None]] = set()

    def has_room(self) -> bool:
        if self.requests >= self.max_requests:
            return False
        return self.max_bytes is None or self.bytes < self.max_bytes

    def connection(self) -> ConnectionBudget:
        return ConnectionBudget(self)

    def _changed(self) -> None:
        if self._waiters and self.has_room():
            for waiter in self._waiters:
                if not waiter.done():
                    waiter.set_result(None)


class ConnectionBudget:
    """One connection's share of its listener's :class:`RequestBudget`."""

    __slots__ = ("_waiter", "budget", "in_flight", "reserved", "waiting_frame")

    def __init__(self, budget: RequestBudget) -> None:
        self.budget = budget
        self.in_flight = 0
        # The size of the request arriving: counted once admitted, else waiting for room.
        self.reserved = 0
        self.waiting_frame: int | None = None
        self._waiter: asyncio.Future[None] | None = None

    def holds_nothing(self) -> bool:
        return self.in_flight == 0 and self.reserved == 0

    def ready(self) -> bool:
        """Whether the connection may read now (admitting the request it waits with)."""
        if self.reserved:
            return True  # an admitted request finishes arriving
        if self.waiting_frame is not None:
            return self._admit(self.waiting_frame)
        return self.in_flight == 0 or self.budget.has_room()

    def read_bytes(self) -> int:
        """How much the next read may take: while the budget is spent, a connection that
        holds nothing reads a small request's worth at most."""
        if self.reserved or self.budget.has_room():
            return READ_BYTES
        return SMALL_REQUEST_BYTES

    async def wait_until_ready(self) -> None:
        """Return once the connection may read on: room in the budget, or its own
        requests answered."""
        loop = asyncio.get_running_loop()
        while not self.ready():
            waiter = self._waiter = loop.create_future()
            self.budget._waiters.add(waiter)
            try:
                await waiter
            finally:
                self.budget._waiters.discard(waiter)
                self._waiter = None

    def arriving(self, frame_bytes: int | None) -> None:
        """After a read: the size (prefix included) of the request that has begun to
        arrive and is not complete, once known."""
        if frame_bytes is None or self.reserved:
            return
        if not self._admit(frame_bytes):
            self.waiting_frame = frame_bytes

    def started(self, frame_bytes: int) -> None:
        """A complete request of ``frame_bytes`` is now in progress."""
        if self.reserved:
            # The admitted request is the first one complete; its bytes are counted.
            self.reserved = 0
        else:
            self.budget.bytes += frame_bytes  # arrived whole within one read
        if self.in_flight:
            self.budget.requests += 1
        self.in_flight += 1
        self.budget._changed()

    def finished(self, frame_bytes: int) -> None:
        """A request that :meth:`started` is answered (or never will be)."""
        self.in_flight -= 1
        if self.in_flight:
            self.budget.requests -= 1
        self.budget.bytes -= frame_bytes
        self.budget._changed()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)  # a small request may be admitted now

    def closed(self) -> None:
        """The connection is gone: the request that was arriving never will (those in
        progress still call :meth:`finished` when they end)."""
        self.budget.bytes -= self.reserved
        self.reserved = 0
        self.waiting_frame = None
        self.budget._changed()

    def _admit(self, frame_bytes: int) -> bool:
        small = self.in_flight == 0 and frame_bytes <= SMALL_REQUEST_BYTES
        if not (small or self.budget.has_room()):
            return False
        self.reserved = frame_bytes
        self.waiting_frame = None
        self.budget.bytes += frame_bytes
        self.budget._changed()
        return True


class PartialFrameWatch:
    """Calls ``on_timeout`` once a request has been arriving for ``timeout_s`` without
    completing; the time between :meth:`pause` and :meth:`resume` (the node was not
    reading from the connection) does not count.

    One timer per connection, re-armed only when it fires early, as
    :class:`~odradek.shell.connections.IdleWatch` does.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, timeout_s: float, on_timeout: Callable[[], None]
    ) -> None:
        self._loop = loop
        self._timeout_s = timeout_s
        self._on_timeout = on_timeout
        self._deadline: float | None = None
        self._paused_at: float | None = None
        self._handle: asyncio.TimerHandle | None = None

    def received(self, completed_frames: bool, pending: bool) -> None:
        """After a read: whether it completed frames, and whether bytes of an incomplete
        frame remain (those of a new frame when it completed some)."""
        if not pending:
            self._deadline = None
            return
        if completed_frames or self._deadline is None:
            self._deadline = self._loop.time() + self._timeout_s
            self._arm()

    def pause(self) -> None:
        if self._paused_at is None:
            self._paused_at = self._loop.time()

    def resume(self) -> None:
        if self._paused_at is None:
            return
        if self._deadline is not None:
            self._deadline += self._loop.time() - self._paused_at
        self._paused_at = None
        self._arm()

    def cancel(self) -> None:
        self._deadline = None
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _arm(self) -> None:
        if self._handle is None and self._deadline is not None:
            self._handle = self._loop.call_at(self._deadline, self._check)

    def _check(self) -> None:
        self._handle = None
        if self._deadline is None or self._paused_at is not None:
            return  # complete meanwhile, or paused: resume() arms it again
        if self._loop.time() >= self._deadline:
            self._deadline = None
            self._on_timeout()
        else:
            self._arm()


# --- One listener -------------------------------------------------------------------------


class ListenerGuard:
    """Everything above for one listener; the node asks it at every new connection."""

    def __init__(self, limits: ListenerLimits, peer_hosts: Callable[[], Iterable[str]]) -> None:
        self.limits = limits
        self.quotas = ConnectionQuotas(limits)
        self.budget = RequestBudget(limits.queued_max_requests, limits.queued_max_request_bytes)
        self.peers = PeerAddresses(peer_hosts)
        self.refusals = RefusalLog(limits.listener)

    @property
    def partial_request_timeout_s(self) -> float:
        return self.limits.partial_request_timeout_ms / 1000

    async def admit(self, address: str) -> Slot | None:
        """Count a new connection from ``address``; None when it must be closed."""
        admitted = self.quotas.admit(address)
        if isinstance(admitted, Slot):
            return admitted
        if await self.peers.contains(address):
            admitted_peer = self.quotas.admit_peer(address)
            if isinstance(admitted_peer, Slot):
                return admitted_peer
            admitted = admitted_peer
        self.refusals.refused(address, admitted)
        return None

    def release(self, slot: Slot) -> None:
        self.quotas.release(slot)


def ensure_open_files(limits: Iterable[ListenerLimits]) -> None:
    """Raise the soft limit of open files (RLIMIT_NOFILE) so that every listener can
    hold its ``max.connections`` (and as many peers' connections over it) besides the
    node's files; a listener without a limit adds nothing here. Up to the hard limit:
    short of that, say so, for a node out of descriptors refuses connections under its
    limits and cannot open segment files."""
    finite = [lim.max_connections for lim in limits if lim.max_connections < INT_MAX]
    if not finite:
        return
    wanted = sum(2 * n for n in finite) + OTHER_OPEN_FILES
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    if soft < wanted:
        log.warning(
            "open files limit %d is below the %d that max.connections needs; raise the "
            "hard limit (ulimit -Hn) or lower max.connections",
            soft,
            wanted,
        )
