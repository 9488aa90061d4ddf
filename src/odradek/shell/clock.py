"""The shell's clocks: the only place that reads the time.

``now_ms`` is wall-clock time, for what Kafka stamps or compares across nodes (record
timestamps, broker sessions, retention); ``monotonic_ms`` never jumps, for the Raft
core's timers, which must not fire early when the wall clock is set back or forward.
"""

from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)
