"""connections.max.idle.ms: a connection that reads nothing for that long is closed; each
read pushes the moment back, and the one timer is re-armed only when it fires early."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from odradek.shell.connections import IdleWatch


class FakeLoop:
    """The two things IdleWatch asks of a loop: the time, and a timer."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[tuple[float, Callable[[], None], Any]] = []

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], None]) -> Any:
        handle = Handle()
        self.timers.append((when, callback, handle))
        return handle

    def advance(self, to: float) -> None:
        self.now = to
        due = [t for t in self.timers if t[0] <= to and not t[2].cancelled]
        self.timers = [t for t in self.timers if t not in due]
        for _, callback, _ in due:
            callback()


class Handle:
    cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


def test_reads_keep_a_connection_open_and_silence_closes_it() -> None:
    loop = FakeLoop()
    closed: list[float] = []
    watch = IdleWatch(loop, 10.0, lambda: closed.append(loop.now))  # type: ignore[arg-type]
    for t in (4.0, 8.0, 12.0, 16.0):
        loop.advance(t)
        watch.touch()
    loop.advance(25.0)  # the first timer fired at 10 and re-armed for 26
    assert closed == []
    assert len([t for t in loop.timers if not t[2].cancelled]) == 1
    loop.advance(26.0)
    assert closed == [26.0]
    loop.advance(100.0)
    assert closed == [26.0]  # once


def test_cancel_stops_the_watch() -> None:
    loop = FakeLoop()
    closed: list[float] = []
    watch = IdleWatch(loop, 10.0, lambda: closed.append(loop.now))  # type: ignore[arg-type]
    watch.cancel()
    loop.advance(50.0)
    assert closed == []
