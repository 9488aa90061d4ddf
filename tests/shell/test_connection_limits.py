"""A listener's connection and request limits: connections over ``max.connections`` or
a per-address limit are refused, peers' are admitted apart; the request budget admits a
request whole once its size is known and reads no new one while it is spent, but a
small one on a connection that holds nothing; a request arriving for longer than the
partial-request timeout closes its connection, time the node was not reading excluded."""

from __future__ import annotations

import asyncio
import resource
from collections.abc import Callable
from typing import Any

import pytest

from odradek.shell import connection_limits
from odradek.shell.connection_limits import (
    ConnectionQuotas,
    ListenerGuard,
    ListenerLimits,
    PartialFrameWatch,
    PeerAddresses,
    RequestBudget,
    Slot,
    ensure_open_files,
    normalize_address,
)


def test_connections_over_max_connections_are_refused_until_one_closes() -> None:
    quotas = ConnectionQuotas(ListenerLimits("PLAINTEXT", max_connections=3))
    slots = [quotas.admit(f"10.0.0.{i}") for i in range(3)]
    assert all(isinstance(s, Slot) for s in slots)
    refused = quotas.admit("10.0.0.9")
    assert isinstance(refused, str) and "max.connections (3)" in refused
    first = slots[0]
    assert isinstance(first, Slot)
    quotas.release(first)
    assert isinstance(quotas.admit("10.0.0.9"), Slot)


def test_per_address_limit_and_its_overrides() -> None:
    limits = ListenerLimits(
        "PLAINTEXT",
        max_connections_per_ip=2,
        max_connections_per_ip_overrides={"10.0.0.7": 4, "10.0.0.8": 0},
    )
    quotas = ConnectionQuotas(limits)
    assert [isinstance(quotas.admit("10.0.0.1"), Slot) for _ in range(3)] == [True, True, False]
    assert [isinstance(quotas.admit("10.0.0.7"), Slot) for _ in range(5)] == [True] * 4 + [False]
    assert not isinstance(quotas.admit("10.0.0.8"), Slot)
    # An IPv4 client on a dual-stack socket is the same address.
    assert not isinstance(quotas.admit("::ffff:10.0.0.1"), Slot)
    assert quotas.count("10.0.0.1") == 2


def test_peers_are_admitted_over_the_limit_counted_apart() -> None:
    quotas = ConnectionQuotas(ListenerLimits("CONTROLLER", max_connections=1))
    assert isinstance(quotas.admit("10.0.0.1"), Slot)
    assert not isinstance(quotas.admit("10.0.0.2"), Slot)
    peer = quotas.admit_peer("10.0.0.2")
    assert isinstance(peer, Slot) and peer.peer
    # Peers have max.connections of their own, no more.
    assert not isinstance(quotas.admit_peer("10.0.0.3"), Slot)
    quotas.release(peer)
    assert isinstance(quotas.admit_peer("10.0.0.3"), Slot)
    assert quotas.total == 1


def test_the_guard_admits_a_peer_address_over_the_limit_and_refuses_a_client() -> None:
    async def scenario() -> None:
        guard = ListenerGuard(
            ListenerLimits("CONTROLLER", max_connections=1), lambda: {"127.0.0.6", "localhost"}
        )
        assert await guard.admit("127.0.0.1") is not None
        assert await guard.admit("127.0.0.2") is None  # a client over the limit
        peer = await guard.admit("127.0.0.6")
        assert peer is not None and peer.peer
        guard.release(peer)

    asyncio.run(scenario())


def test_peer_host_names_are_resolved() -> None:
    async def scenario() -> None:
        peers = PeerAddresses(lambda: ["localhost", "[::1]", "", "no-such-host.invalid"])
        addresses = await peers.addresses()
        assert "127.0.0.1" in addresses and "::1" in addresses
        assert await peers.contains("::ffff:127.0.0.1")
        assert not await peers.contains("10.1.2.3")

    asyncio.run(scenario())


def test_normalize_address() -> None:
    assert normalize_address("::ffff:192.0.2.1") == "192.0.2.1"
    assert normalize_address("fe80::1%eth0") == "fe80::1"
    assert normalize_address("2001:db8::0:1") == "2001:db8::1"
    assert normalize_address("?") == "?"


# --- The request budget ---------------------------------------------------------------


def test_a_request_is_admitted_whole_once_its_size_is_known() -> None:
    async def scenario() -> None:
        large = connection_limits.SMALL_REQUEST_BYTES + 1
        budget = RequestBudget(max_requests=10, max_bytes=large)
        big = budget.connection()
        big.arriving(2 * large)  # larger than the budget: admitted while there is room
        assert budget.bytes == 2 * large and not budget.has_room()
        assert big.ready() and big.read_bytes() == connection_limits.READ_BYTES
        other = budget.connection()
        assert other.ready()  # holds nothing: may read a small request's worth
        assert other.read_bytes() == connection_limits.SMALL_REQUEST_BYTES
        other.arriving(large)  # a large request begins: not admitted, not counted
        assert budget.bytes == 2 * large and not other.ready()
        big.started(2 * large)  # the admitted request is complete: still counted
        assert budget.bytes == 2 * large and not big.ready()
        big.finished(2 * large)
        assert budget.bytes == 0
        assert other.ready() and budget.bytes == large  # admitted on the next look
        other.closed()  # gone before it arrived
        assert budget.bytes == 0 and budget.has_room()

    asyncio.run(scenario())


def test_a_small_request_is_read_from_a_connection_that_holds_nothing() -> None:
    async def scenario() -> None:
        small = connection_limits.SMALL_REQUEST_BYTES
        budget = RequestBudget(max_requests=10, max_bytes=1000)
        produce = budget.connection()
        produce.arriving(1000)
        produce.started(1000)  # an acks=all produce waiting for the followers
        assert not budget.has_room()
        # A follower's fetch on its own connection is read: the produce depends on it.
        fetch = budget.connection()
        fetch.arriving(200)
        assert budget.bytes == 1200
        fetch.started(200)
        # Its next request waits while the first is in progress: it holds something.
        fetch.arriving(small)
        assert not fetch.ready()
        woken = asyncio.ensure_future(fetch.wait_until_ready())
        await asyncio.sleep(0)
        assert not woken.done()
        fetch.finished(200)  # answered: the connection holds nothing, the request fits
        await asyncio.wait_for(woken, 1)
        assert fetch.reserved == small

    asyncio.run(scenario())


def test_only_requests_beyond_the_first_of_a_connection_count_against_queued_max_requests() -> None:
    async def scenario() -> None:
        budget = RequestBudget(max_requests=2, max_bytes=-1)
        connections = [budget.connection() for _ in range(5)]
        for c in connections:
            c.started(10)  # one each: none counts
        assert budget.requests == 0 and budget.has_room()
        pipelined = connections[0]
        pipelined.started(10)
        pipelined.started(10)
        assert budget.requests == 2 and not budget.has_room()
        assert not pipelined.ready()
        pipelined.finished(10)
        assert budget.requests == 1 and pipelined.ready()
        pipelined.finished(10)
        pipelined.finished(10)
        assert budget.requests == 0 and pipelined.holds_nothing()
        assert budget.bytes == 40  # the four other connections' requests

    asyncio.run(scenario())


def test_waiting_connections_read_on_once_the_budget_has_room() -> None:
    async def scenario() -> None:
        budget = RequestBudget(max_requests=100, max_bytes=1000)
        holder = budget.connection()
        holder.started(1000)
        waiting = [budget.connection() for _ in range(3)]
        for c in waiting:
            c.started(1)  # each holds something, so each waits for room
        woken = [asyncio.ensure_future(c.wait_until_ready()) for c in waiting]
        await asyncio.sleep(0)
        assert not any(w.done() for w in woken)
        holder.finished(1000)
        await asyncio.wait_for(asyncio.gather(*woken), 1)

    asyncio.run(scenario())


# --- The partial-request watch --------------------------------------------------------


class FakeLoop:
    """The two things the watch asks of a loop: the time, and a timer."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[tuple[float, Callable[[], None], Handle]] = []

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], None]) -> Any:
        handle = Handle()
        self.timers.append((when, callback, handle))
        return handle

    def advance(self, to: float) -> None:
        while True:
            due = [t for t in self.timers if t[0] <= to and not t[2].cancelled]
            if not due:
                break
            first = min(due, key=lambda t: t[0])
            self.timers.remove(first)
            self.now = first[0]
            first[1]()
        self.now = to


class Handle:
    cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


def watch(loop: FakeLoop, closed: list[float]) -> PartialFrameWatch:
    return PartialFrameWatch(loop, 10.0, lambda: closed.append(loop.now))  # type: ignore[arg-type]


def test_a_request_still_arriving_after_the_timeout_closes_the_connection() -> None:
    loop, closed = FakeLoop(), list[float]()
    w = watch(loop, closed)
    w.received(completed_frames=False, pending=True)  # bytes of a request arrive at 0
    for t in (3.0, 6.0, 9.0):  # more bytes of the same request: the deadline stays
        loop.advance(t)
        w.received(completed_frames=False, pending=True)
    loop.advance(9.9)
    assert closed == []
    loop.advance(10.0)
    assert closed == [10.0]
    loop.advance(50.0)
    assert closed == [10.0]  # once


def test_completed_requests_and_silence_do_not_count() -> None:
    loop, closed = FakeLoop(), list[float]()
    w = watch(loop, closed)
    w.received(completed_frames=False, pending=True)
    loop.advance(8.0)
    w.received(completed_frames=True, pending=False)  # complete: nothing arriving
    loop.advance(100.0)  # silence is connections.max.idle.ms's business
    assert closed == []
    w.received(completed_frames=True, pending=True)  # a new request began at 100
    loop.advance(109.0)
    assert closed == []
    loop.advance(110.0)
    assert closed == [110.0]


def test_time_the_node_did_not_read_is_not_the_clients_fault() -> None:
    loop, closed = FakeLoop(), list[float]()
    w = watch(loop, closed)
    w.received(completed_frames=False, pending=True)
    loop.advance(5.0)
    w.pause()  # the listener's budget is spent: the node stops reading
    loop.advance(60.0)
    assert closed == []
    w.resume()  # 5 s of the 10 were used before the pause
    loop.advance(64.0)
    assert closed == []
    loop.advance(65.0)
    assert closed == [65.0]


def test_cancel_stops_the_partial_watch() -> None:
    loop, closed = FakeLoop(), list[float]()
    w = watch(loop, closed)
    w.received(completed_frames=False, pending=True)
    w.cancel()
    loop.advance(100.0)
    assert closed == []


# --- Open files -----------------------------------------------------------------------


def test_open_files_are_raised_for_the_connections_the_limits_allow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    limits: dict[str, tuple[int, int]] = {"now": (1024, 65536)}
    monkeypatch.setattr(resource, "getrlimit", lambda _: limits["now"])
    monkeypatch.setattr(resource, "setrlimit", lambda _, value: limits.update(now=value))
    ensure_open_files([ListenerLimits("PLAINTEXT")])  # no limit: nothing to size for
    assert limits["now"] == (1024, 65536)
    ensure_open_files(
        [ListenerLimits("PLAINTEXT", max_connections=1000), ListenerLimits("CONTROLLER")]
    )
    assert limits["now"] == (2000 + connection_limits.OTHER_OPEN_FILES, 65536)
    limits["now"] = (1024, 1500)
    ensure_open_files([ListenerLimits("PLAINTEXT", max_connections=1000)])
    assert limits["now"] == (1500, 1500)  # as far as the hard limit allows


def test_refusals_are_logged_with_a_count_not_one_line_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [100.0]
    refusals = connection_limits.RefusalLog("PLAINTEXT", clock=lambda: now[0])
    with caplog.at_level("WARNING", logger="odradek.connections"):
        for i in range(500):
            now[0] = 100.0 + i * 0.01
            refusals.refused("10.0.0.1", "max.connections (1000) reached")
        now[0] = 112.0
        refusals.refused("10.0.0.2", "max.connections (1000) reached")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert "refused a connection from 10.0.0.1" in lines[0]
    assert "refused 500 connection(s) in the last 12 s, the latest from 10.0.0.2" in lines[1]
