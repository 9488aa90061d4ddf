"""The shell's clocks: the only place that reads the time.

``now_ms`` is wall-clock time, for what is stamped or compared across nodes and
restarts: record timestamps (CreateTime checks, LogAppendTime), segment age, retention.
``monotonic_ms`` never jumps, for every timeout: the Raft core's timers, broker
sessions on the controller, ISR lag, fetch sessions and long polls, backoffs. A wall
clock set forward must not fence every broker or shrink every ISR, nor one set back
keep a dead broker alive.

``steady_ms`` is for the one core that needs both in one number, the group coordinator:
its timers (member sessions, rebalances) must not jump, and its timestamps (offset
commits, read again after a restart, for retention) must be wall-clock times. It is the
wall clock read once, at the first call, moved on by the monotonic clock: a jump of the
wall clock moves neither, and its timestamps drift from the wall clock only by the
adjustments made while the process runs.
"""

from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


_anchor: tuple[int, int] | None = None


def steady_ms() -> int:
    global _anchor
    if _anchor is None:
        _anchor = (now_ms(), monotonic_ms())
    wall, mono = _anchor
    return wall + monotonic_ms() - mono
