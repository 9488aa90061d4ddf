"""``log.cleaner.io.max.bytes.per.second``: the cleaner's reads and writes held to a rate.

Used where the pass runs: on a cleaner thread, or in a cleaner worker's own process
(:mod:`odradek.shell.cleaner_process`), which holds its share of the rate.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

UNLIMITED = 1e300
"""Rates at or above this are Kafka's default (Double.MAX_VALUE): no throttle."""


class IoThrottle:
    """``log.cleaner.io.max.bytes.per.second`` shared by every cleaner thread: each
    thread sleeps once the bytes done run ahead of the rate; time spent idle is no
    credit for later.
    ``clock`` and ``sleep`` are the monotonic clock and ``time.sleep`` but in tests."""

    def __init__(
        self,
        bytes_per_second: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = bytes_per_second
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._start = clock()
        self._done = 0.0

    def __call__(self, n: int) -> None:
        if self.rate >= UNLIMITED:
            return
        with self._lock:
            now = self._clock()
            if self._done / self.rate < now - self._start:
                # Behind the rate (the cleaner was idle): no credit is banked, or a pass
                # after a quiet hour would run an hour's worth unthrottled.
                self._start, self._done = now, 0.0
            self._done += n
            ahead = self._done / self.rate - (now - self._start)
        if ahead > 0:
            self._sleep(ahead)
