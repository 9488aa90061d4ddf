"""The follower's replication throttle for reassignment catch-up traffic.

A broker that a reassignment adds to a partition copies the whole log from the leader;
``follower.replication.throttled.rate`` (bytes per second, Kafka's broker key) bounds
that copy so that it does not starve the partitions' ordinary replication and clients.
Only the partitions where this broker is an *adding* replica are throttled, which is
what Kafka's ``kafka-reassign-partitions --throttle`` arranges through the topics'
``follower.replication.throttled.replicas`` lists; ordinary followers are never held back.

Kafka's quota rule, kept here: a fetch may include the throttled partitions while the
byte budget is not in debt; what a response brings is charged afterwards, so a single
fetch may overshoot by at most one fetch size, and the budget then stays in debt until
time pays it back. The average rate over any window longer than a fetch stays at or
below the setting.

Pure: time comes in as ``now_ms``.
"""

from __future__ import annotations

__all__ = ["FOLLOWER_REPLICATION_THROTTLED_RATE", "ReplicationThrottle"]

FOLLOWER_REPLICATION_THROTTLED_RATE = "follower.replication.throttled.rate"
UNLIMITED = 2**63 - 1
"""Kafka's default for the rate: no throttle."""


class ReplicationThrottle:
    """A byte budget that refills at ``rate`` bytes per second, at most one second's
    worth ahead."""

    def __init__(self, now_ms: int) -> None:
        self.rate = UNLIMITED
        self._budget = 0.0
        self._last_ms = now_ms

    @property
    def limited(self) -> bool:
        return self.rate < UNLIMITED

    def set_rate(self, rate: int, now_ms: int) -> None:
        if rate != self.rate:
            self._refill(now_ms)
            self.rate = rate
            self._budget = min(self._budget, float(rate))

    def _refill(self, now_ms: int) -> None:
        elapsed = max(now_ms - self._last_ms, 0)
        self._last_ms = now_ms
        if self.limited:
            self._budget = min(self._budget + self.rate * elapsed / 1000, float(self.rate))

    def allows(self, now_ms: int) -> bool:
        """Whether throttled partitions may be fetched now."""
        self._refill(now_ms)
        return not self.limited or self._budget > 0

    def charge(self, size: int, now_ms: int) -> None:
        """Bytes a response brought for throttled partitions."""
        self._refill(now_ms)
        if self.limited:
            self._budget -= size

    def max_bytes(self, wanted: int) -> int:
        """A throttled partition's fetch size: never more than one second's budget."""
        return wanted if not self.limited else max(1, min(wanted, self.rate))
