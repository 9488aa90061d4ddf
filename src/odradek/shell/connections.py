"""Client connections: admission, framing, answers in request order, idle watch, sendfile.

:class:`Connections` owns every connection of the node's listeners (broker and
controller) and what each is doing: it admits a connection under its listener's limits
(:mod:`odradek.shell.connection_limits`), reads whole frames, hands each request to its
:class:`~odradek.broker.router.Router` and the outcome to a :class:`RequestCarrier`
(the node's :class:`~odradek.shell.effects.Effects`), and sends the answers back in
request order, segment ranges with sendfile. It knows nothing of what a request means.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import os
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any, Protocol

from odradek.broker.effects import AwaitRecordCheck, Outcome, Reply
from odradek.broker.router import Close, Dispatch, Respond, Routed, Router
from odradek.broker.server_config import ServerConfig
from odradek.core.errors import RemoteProtocolError
from odradek.protocol.framing import FrameDecoder, size_prefix
from odradek.protocol.primitives import Records
from odradek.security.principal import ANONYMOUS, KafkaPrincipal, MappingRule
from odradek.security.sasl import Answer, Drop, Pass, Refuse, SaslGate, SaslListener
from odradek.shell.clock import monotonic_ms
from odradek.shell.connection_limits import (
    MAX_IN_FLIGHT_PER_CONNECTION,
    ConnectionBudget,
    ListenerGuard,
    ListenerLimits,
    PartialFrameWatch,
    ensure_open_files,
)
from odradek.shell.quorum import NotController
from odradek.shell.tls import AuthenticationFailed, peer_principal
from odradek.storage.segment import FileRange

log = logging.getLogger("odradek.node")

Answers = asyncio.Queue["asyncio.Future[list[Records] | None] | None"]
"""A connection's answers in request order; ``None`` ends the sender."""


class CloseConnection(Exception):
    """An answer that is no answer: close the connection after the answers before it
    (an acks=0 produce that failed, see :class:`~odradek.broker.effects.NoReply`)."""


Route = Callable[[bytearray, str, KafkaPrincipal], Routed]
"""A listener's router: a request's payload, peer and principal in, where it goes out."""


class RequestCarrier(Protocol):
    """What a connection needs to have a routed request carried out."""

    def stamp(self) -> None:
        """Set the clocks the handlers read, before a handler runs."""

    async def check_records(self, effect: AwaitRecordCheck) -> Outcome:
        """Finish a produce's record checks off the loop; its next outcome."""

    def connection_throttle_ms(self, address: str) -> int:
        """Count a new connection from ``address`` (``connection_creation_rate``); how
        long to hold it before closing it (0: admitted)."""

    def request_throttle_ms(self, dispatch: Dispatch, time_ns: int) -> int:
        """Charge the ``time_ns`` its handler held the loop to the request's client
        (``request_percentage``); how long to throttle the client for (0: not)."""

    def answer(
        self,
        dispatch: Dispatch,
        payload: bytearray,
        throttled: Callable[[int], None] = ...,
        throttle_ms: int = 0,
    ) -> Coroutine[Any, Any, list[Records] | None]:
        """Carry ``dispatch`` through its effects; its encoded answer (None: none).
        The answer's ``throttle_time_ms`` is at least ``throttle_ms``; ``throttled(ms)``
        is told it when above 0.

        Called (not awaited) when the handler has run: the carrier notes then what the
        handler decided on, before any other task runs."""


@dataclass(frozen=True, slots=True)
class ServingSecurity:
    """What a listener's connections must prove before their requests reach the router.

    ``principal_rules`` (an SSL listener): a client certificate that no rule names a
    principal from is refused. ``sasl`` (a SASL_* listener): every connection logs in
    first (:class:`~odradek.security.sasl.SaslGate`); a failed login is answered after
    ``failed_authentication_delay_ms`` (KIP-306), and until it succeeds no frame may be
    larger than ``max_receive_size`` (``sasl.server.max.receive.size``)."""

    principal_rules: tuple[MappingRule, ...] | None = None
    sasl: SaslListener | None = None
    failed_authentication_delay_ms: int = 100
    max_receive_size: int = 524_288


class ConnectionObserver(Protocol):
    """Told when a connection of its listener ends (the controller's broker sessions)."""

    def connection_closed(self, peer: str) -> None: ...


class Connections:
    def __init__(
        self,
        carrier: RequestCarrier,
        server: ServerConfig,
        peer_hosts: Callable[[], set[str]],
        *,
        max_frame_bytes: int,
        connections_max_idle_ms: int,
    ) -> None:
        """``peer_hosts`` gives the hosts the cluster's own nodes connect from (admitted
        apart from the connection limits)."""
        self._carrier = carrier
        self._server = server
        self._peer_hosts = peer_hosts
        self._max_frame_bytes = max_frame_bytes
        self._connections_max_idle_ms = connections_max_idle_ms
        # The connections and the answers they are carrying, cancelled at stop.
        self._tasks: set[asyncio.Future[Any]] = set()
        self._listener_guards: dict[str, ListenerGuard] = {}

    def guard(self, listener: str) -> ListenerGuard:
        """The connection and request limits of ``listener`` (one set per listener)."""
        guard = self._listener_guards.get(listener)
        if guard is None:
            limits = ListenerLimits.from_server(self._server, listener)
            guard = self._listener_guards[listener] = ListenerGuard(limits, self._peer_hosts)
            ensure_open_files(g.limits for g in self._listener_guards.values())
        return guard

    def serving(
        self,
        router: Router,
        listener: str,
        observer: ConnectionObserver | None = None,
        security: ServingSecurity | None = None,
    ) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Coroutine[Any, Any, None]]:
        """The connection callback of ``listener`` for ``asyncio.start_server``;
        ``security`` says what its clients must prove (None: nothing, PLAINTEXT)."""
        guard = self.guard(listener)
        rules = security.principal_rules if security is not None else None
        # The router is told the listener of each request (clients get its addresses).
        route: Route = functools.partial(router.handle, listener=listener)

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            principal = ANONYMOUS
            if rules is not None:
                named = _certificate_principal(writer, rules)
                if named is None:
                    writer.transport.abort()
                    return
                principal = named
            await self._serve(route, guard, observer, reader, writer, security, principal)

        return serve

    async def close_all(self) -> None:
        """Cancel every connection and every answer in progress, and wait for them."""
        tasks = list(self._tasks)  # they leave the set as they end
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _serve(
        self,
        route: Route,
        guard: ListenerGuard,
        observer: ConnectionObserver | None,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        security: ServingSecurity | None = None,
        principal: KafkaPrincipal = ANONYMOUS,
    ) -> None:
        """Admit the connection, read requests, start each at once, send the answers in
        request order.

        Handlers run in arrival order (so appends keep the order of the requests); what
        they wait for (a flush, data, a rebalance) overlaps, so several produce requests
        in flight on one connection share one fsync. A bounded queue of answers in order,
        and the listener's request budget (:mod:`odradek.shell.connection_limits`), stop
        reading when a client has too much outstanding.
        """
        peername = writer.get_extra_info("peername")
        address = str(peername[0]) if peername else "?"
        throttle_ms = self._carrier.connection_throttle_ms(address)
        if throttle_ms > 0 and not await guard.peers.contains(address):
            # Over its ip's connection_creation_rate (KIP-612): held, then closed, as
            # Kafka closes it after the throttle time; the cluster's own nodes never are.
            guard.refusals.refused(
                address, f"over its connection_creation_rate, closed after {throttle_ms} ms"
            )
            held = asyncio.current_task()
            assert held is not None
            self._tasks.add(held)  # a stopping node cancels the wait
            try:
                await asyncio.sleep(throttle_ms / 1000)
            finally:
                self._tasks.discard(held)
                writer.transport.abort()
            return
        slot = await guard.admit(address)
        if slot is None:
            # Over a connection limit: closed before anything is read.
            writer.transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        peer = f"{peername[0]}:{peername[1]}" if peername else "?"
        answers: Answers = asyncio.Queue(MAX_IN_FLIGHT_PER_CONNECTION)
        budget = guard.budget.connection()
        sender = asyncio.create_task(self._send_in_order(writer, answers, peer))
        stopping = False
        try:
            await self._read_requests(
                route, guard, budget, reader, writer, answers, peer, security, principal
            )
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            stopping = True  # the node is stopping; the connection closes below
        finally:
            budget.closed()
            try:
                if not stopping:
                    # Send what was already asked for (answers before a bad frame, say).
                    with contextlib.suppress(Exception):
                        async with asyncio.timeout(30):
                            await answers.put(None)
                            await sender
                sender.cancel()
                self._tasks.discard(task)
                if not stopping and observer is not None:
                    observer.connection_closed(peer)
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
            finally:
                # Counted until the socket is closed: it holds a descriptor until then.
                guard.release(slot)

    async def _read_requests(
        self,
        route: Route,
        guard: ListenerGuard,
        budget: ConnectionBudget,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        answers: Answers,
        peer: str,
        security: ServingSecurity | None,
        principal: KafkaPrincipal,
    ) -> None:
        decoder = FrameDecoder(self._max_frame_bytes)
        loop = asyncio.get_running_loop()

        def close_idle() -> None:
            log.info("closing idle connection from %s", peer)
            writer.close()  # the read below sees the end of the stream

        def close_partial() -> None:
            log.warning(
                "closing connection from %s: a request has been arriving for more than "
                "odradek.connections.partial.request.timeout.ms (%d) without completing",
                peer,
                guard.limits.partial_request_timeout_ms,
            )
            writer.transport.abort()  # the read below sees the end of the stream

        idle = IdleWatch(loop, self._connections_max_idle_ms / 1000, close_idle)
        partial = PartialFrameWatch(loop, guard.partial_request_timeout_s, close_partial)
        try:
            await self._read_frames(
                route, budget, reader, answers, peer, decoder, idle, partial, security, principal
            )
        finally:
            idle.cancel()
            partial.cancel()

    async def _read_frames(
        self,
        route: Route,
        budget: ConnectionBudget,
        reader: asyncio.StreamReader,
        answers: Answers,
        peer: str,
        decoder: FrameDecoder,
        idle: IdleWatch,
        partial: PartialFrameWatch,
        security: ServingSecurity | None,
        principal: KafkaPrincipal,
    ) -> None:
        """``principal``: the connection's, before any SASL login (from its certificate,
        or ``User:ANONYMOUS``); a SASL login sets its own."""
        loop = asyncio.get_running_loop()
        carrier = self._carrier
        limit = self._max_frame_bytes
        gate = SaslGate(security.sasl) if security is not None and security.sasl else None
        if gate is not None:
            assert security is not None
            # Nothing larger than a login needs arrives before the login is done.
            decoder.max_frame_bytes = min(security.max_receive_size, self._max_frame_bytes)

        async def queue(answer: asyncio.Future[list[Records] | None], size: int) -> None:
            # The request's bytes are counted until its answer is ready; the answer waits
            # its turn in the queue (a full queue stops reading, as a spent budget does).
            if answer.done():
                budget.finished(size)
            else:
                answer.add_done_callback(lambda _: budget.finished(size))
            if answers.full():
                partial.pause()
                await answers.put(answer)
                partial.resume()
                idle.touch()
            else:
                answers.put_nowait(answer)

        # KIP-219: after an answer that says "throttled for N ms" nothing more is read
        # from this client for N ms (answers already due are still sent, in order).
        muted_until = 0.0

        def throttled(ms: int) -> None:
            nonlocal muted_until
            muted_until = max(muted_until, loop.time() + ms / 1000)

        while True:
            if loop.time() < muted_until:
                partial.pause()
                await asyncio.sleep(muted_until - loop.time())
                partial.resume()
                idle.touch()
            if not budget.ready():
                # The listener holds all it may of requests: read on once some are
                # answered. Waiting on us is no fault of the client's.
                partial.pause()
                await budget.wait_until_ready()
                partial.resume()
                idle.touch()
            data = await reader.read(budget.read_bytes())
            if not data:
                return
            idle.touch()
            try:
                frames = decoder.feed(data)
            except RemoteProtocolError as e:
                log.warning("closing connection from client %s: %s", peer, e)
                return
            partial.received(bool(frames), decoder.pending_bytes() > 0)
            for payload in frames:
                size = len(payload) + 4
                budget.started(size)
                decided = gate.receive(payload, monotonic_ms()) if gate is not None else None
                if gate is not None and gate.authenticated and decoder.max_frame_bytes != limit:
                    decoder.max_frame_bytes = limit  # logged in: full-size requests now
                if isinstance(decided, Pass) and decided.principal is not None:
                    principal = decided.principal
                if decided is not None and not isinstance(decided, Pass):
                    if isinstance(decided, Answer):
                        done_now: asyncio.Future[list[Records] | None] = loop.create_future()
                        done_now.set_result(decided.chunks)
                        await queue(done_now, size)
                        continue
                    budget.finished(size)
                    assert security is not None
                    await self._refuse(decided, security, answers, peer)
                    return
                carrier.stamp()  # the handler decides on the time it was read
                started_ns = perf_counter_ns()
                try:
                    routed = route(payload, peer, principal)
                except BaseException:
                    budget.finished(size)  # the listener's budget outlives this connection
                    raise
                if isinstance(routed, Close):
                    budget.finished(size)
                    log.warning("closing connection: %s", routed.reason)
                    return
                if isinstance(routed, Respond):
                    done: asyncio.Future[list[Records] | None] = loop.create_future()
                    done.set_result(routed.chunks)
                    await queue(done, size)
                    continue
                # request_percentage: the time the handler held the loop, charged now.
                request_throttle = carrier.request_throttle_ms(
                    routed, perf_counter_ns() - started_ns
                )
                if isinstance(routed.outcome, AwaitRecordCheck):
                    # Before the next request of this connection is handled, so that its
                    # appends keep the order of the requests.
                    try:
                        checked = await carrier.check_records(routed.outcome)
                    except BaseException:
                        budget.finished(size)
                        raise
                    routed = dataclasses.replace(routed, outcome=checked)
                if isinstance(routed.outcome, Reply):
                    # Answered at once (a fetch with data, acks=1, metadata): no task, and
                    # the answer is ready for the sender on its next turn.
                    response = routed.outcome.response
                    throttle_ms = getattr(response, "throttle_time_ms", 0)
                    if request_throttle > throttle_ms and hasattr(response, "throttle_time_ms"):
                        throttle_ms = response.throttle_time_ms = request_throttle
                    if throttle_ms > 0:
                        throttled(throttle_ms)
                    ready: asyncio.Future[list[Records] | None] = loop.create_future()
                    try:
                        ready.set_result(
                            Router.encode(routed.header, response, routed.response_version)
                        )
                    except Exception as e:  # the sender logs it and closes, as for a task
                        ready.set_exception(e)
                    await queue(ready, size)
                    continue
                # answer() notes the image this handler decided on now: a commit applied
                # before its task first runs must make it decide again.
                answer = asyncio.ensure_future(
                    carrier.answer(routed, payload, throttled, request_throttle)
                )
                self._tasks.add(answer)
                answer.add_done_callback(self._tasks.discard)
                await queue(answer, size)
            budget.arriving(decoder.pending_frame_bytes())

    async def _refuse(
        self,
        decided: Refuse | Drop,
        security: ServingSecurity,
        answers: Answers,
        peer: str,
    ) -> None:
        """End a connection whose login failed or broke the SASL rules: the answer (if
        any) is sent after the failed-authentication delay, then the connection closes."""
        if isinstance(decided, Drop):
            log.warning("closing connection from %s: %s", peer, decided.reason)
            return
        who = f" as {decided.user!r}" if decided.user else ""
        log.warning("failed authentication from %s%s: %s", peer, who, decided.reason)
        if decided.chunks is None:
            return
        answer: asyncio.Future[list[Records] | None] = asyncio.get_running_loop().create_future()
        delay_s = security.failed_authentication_delay_ms / 1000 if decided.delay else 0
        # The delay holds this connection only; reading stops, the answer waits in order.
        chunks = decided.chunks

        def send() -> None:
            if not answer.done():
                answer.set_result(chunks)

        asyncio.get_running_loop().call_later(delay_s, send)
        await answers.put(answer)

    async def _send_in_order(
        self, writer: asyncio.StreamWriter, answers: Answers, peer: str
    ) -> None:
        try:
            while True:
                item = await answers.get()
                if item is None:
                    return
                chunks = await item
                if chunks is not None:
                    await send_frame(writer, chunks)
        except (ConnectionError, asyncio.CancelledError):
            pass
        except NotController as e:
            # No error code fits every admin API: close, and the client retries.
            log.warning("closing connection from %s: %s", peer, e)
            writer.close()
        except CloseConnection as e:
            log.info("closing connection from %s: %s", peer, e)
            writer.close()
        except Exception:
            # A bug in a handler or in encoding: say so loudly, drop this connection,
            # keep serving the others.
            log.exception("closing connection from %s after an internal error", peer)
            writer.close()


class IdleWatch:
    """Calls ``on_idle`` once nothing was read for ``idle_s`` (``connections.max.idle.ms``).

    One timer per connection, re-armed only when it fires early: a timeout around each
    read would create and cancel a timer for every request.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, idle_s: float, on_idle: Callable[[], None]
    ) -> None:
        self._loop = loop
        self._idle_s = idle_s
        self._on_idle = on_idle
        self._last = loop.time()
        self._handle: asyncio.TimerHandle | None = loop.call_at(self._last + idle_s, self._check)

    def touch(self) -> None:
        self._last = self._loop.time()

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _check(self) -> None:
        due = self._last + self._idle_s
        if self._loop.time() >= due:
            self._handle = None
            self._on_idle()
        else:
            self._handle = self._loop.call_at(due, self._check)


def _certificate_principal(
    writer: asyncio.StreamWriter, rules: tuple[MappingRule, ...]
) -> KafkaPrincipal | None:
    """A TLS client's principal: its certificate's, mapped by the rules (ANONYMOUS without
    a certificate); None, logged, when no rule names one."""
    try:
        return peer_principal(writer.get_extra_info("ssl_object"), rules)
    except AuthenticationFailed as e:
        peername = writer.get_extra_info("peername")
        log.warning("refused a TLS client from %s: %s", peername[0] if peername else "?", e)
        return None


async def send_frame(writer: asyncio.StreamWriter, chunks: list[Records]) -> None:
    """Send one response: its size, then its chunks in order; the records of a segment
    file go with sendfile (zero copy), the rest as bytes. Over TLS the records are read
    and encrypted like any other bytes: the kernel cannot send a file into a TLS stream."""
    size = sum(len(c) for c in chunks)
    pending: list[bytes | bytearray | memoryview] = [size_prefix(size)]
    loop = asyncio.get_running_loop()
    tls = writer.get_extra_info("sslcontext") is not None
    for chunk in chunks:
        if isinstance(chunk, bytes | bytearray | memoryview):
            pending.append(chunk)
            continue
        fd = chunk.handle.fileno() if isinstance(chunk, FileRange) and not tls else None
        if fd is None or not isinstance(chunk, FileRange):
            pending.append(chunk.read())
            continue
        writer.writelines(pending)
        pending = []
        await writer.drain()
        position, length = chunk.position, chunk.length
        transport = writer.transport
        if transport.get_write_buffer_size() == 0 and not transport.is_closing():
            # The socket usually takes a fetch's records at once: one sendfile call
            # instead of asyncio's (fstat, lseek, writer registration each time).
            sent = _sendfile_now(transport.get_extra_info("socket"), fd, position, length)
            position += sent
            length -= sent
        if length > 0:
            with open(fd, "rb", buffering=0, closefd=False) as file:
                await loop.sendfile(transport, file, position, length)
    writer.writelines(pending)
    await writer.drain()


def _sendfile_now(sock: Any, fd: int, position: int, length: int) -> int:
    """Send what the (non-blocking) socket takes now of ``length`` bytes of ``fd`` from
    ``position``; the bytes sent (the caller sends the rest the patient way)."""
    if sock is None:
        return 0
    out = sock.fileno()
    sent = 0
    while sent < length:
        try:
            n = os.sendfile(out, fd, position + sent, length - sent)
        except (BlockingIOError, InterruptedError):
            break
        if n == 0:
            break  # the file is shorter than asked: asyncio's path raises for it
        sent += n
    return sent
