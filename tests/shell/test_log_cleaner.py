"""The log cleaner's I/O throttle (``log.cleaner.io.max.bytes.per.second``)."""

from __future__ import annotations

from odradek.shell.cleaner_throttle import IoThrottle


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_the_throttle_holds_every_thread_together_to_the_rate() -> None:
    t = FakeTime()
    throttle = IoThrottle(1000, t.clock, t.sleep)
    throttle(500)  # half a second's worth, at time 0: wait till 0.5 s
    throttle(500)  # another half: till 1.0 s
    assert t.slept == [0.5, 0.5]
    t.now += 3.0  # idle: no credit banked, so a second's worth still takes a second
    throttle(1000)
    assert t.slept == [0.5, 0.5, 1.0]
    throttle(2000)
    assert t.slept[-1] == 2.0


def test_kafkas_default_rate_never_waits() -> None:
    t = FakeTime()
    throttle = IoThrottle(1.7976931348623157e308, t.clock, t.sleep)
    throttle(10**12)
    assert t.slept == []
