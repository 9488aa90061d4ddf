"""Client quota arithmetic: which quota applies to a client, and how long to throttle it.

Pure: time is always passed in (milliseconds, any monotonic origin), nothing is read
or started. The connection code calls :class:`QuotaManager` once per request and
answers with the ``throttle_time_ms`` it returns, muting the connection that long
(KIP-219).

Which quota applies (:func:`resolve_quota`) follows Kafka's precedence (KIP-55), first
entity holding the key wins, for each key on its own:

1. ``/users/<user>/clients/<client-id>``
2. ``/users/<user>/clients/<default>``
3. ``/users/<user>``
4. ``/users/<default>/clients/<client-id>``
5. ``/users/<default>/clients/<default>``
6. ``/users/<default>``
7. ``/clients/<client-id>``
8. ``/clients/<default>``

The entity that wins also says who shares the quota (Kafka's metric tags): a default
stands for each user (or client id) on its own, so ``/users/<default>`` gives every user
its own allowance, shared by all its clients, and ``/clients/<default>`` every client id
its own. :attr:`ResolvedQuota.key` is that sharing key, ``(user, client id)`` with ""
for the part the entity does not name.

How long to throttle (:class:`RateTracker`) is Kafka's rate arithmetic
(``SampledStat``/``Rate``, ``QuotaUtils.throttleTime``): amounts go into ``samples``
windows of ``window_ms`` each (``quota.window.num`` = 11, ``quota.window.size.seconds``
= 1); the observed rate is their sum over the time they span, counted as at least
``samples - 1`` full windows, so a first burst is spread over ten seconds rather than
one instant; a window older than ``samples`` windows is forgotten. When a record takes
the rate above the quota the client is throttled for ``(rate - quota) / quota * span``,
the time it must stay silent to bring the rate back to the quota, never longer than
the whole sample window (11 s) for bytes and one window (1 s) for request time, as
Kafka's request quota manager bounds it.

Controller mutations (KIP-599) use Kafka's token bucket instead (:class:`TokenBucket`):
a client may burst ``quota * samples * window`` mutations, the bucket refills at the
quota, and a client that overdrew it waits until it is back at zero (unbounded, as in
Kafka).

Connections: ``connection_creation_rate`` is a quota of ip entities (KIP-612), an
``/ips/<ip>`` entity before ``/ips/<default>``, each ip counting its own connections a
second over the same windows (:meth:`QuotaManager.connection`).

Request time: ``request_percentage`` is a share of one event loop's time, as Kafka's is
of one request handler thread. :meth:`QuotaManager.request_time` records the
nanoseconds a request held the event loop as percent-seconds, so a
``request_percentage`` of 100 allows one full core-second per second (the whole loop)
and 10 allows 100 ms of loop time each second.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from odradek.controller.image import QuotaEntity

__all__ = [
    "CONNECTION_CREATION_RATE",
    "CONSUMER_BYTE_RATE",
    "CONTROLLER_MUTATION_RATE",
    "DEFAULT_SAMPLES",
    "DEFAULT_WINDOW_MS",
    "IDLE_EXPIRY_MS",
    "PRODUCER_BYTE_RATE",
    "REQUEST_PERCENTAGE",
    "QuotaManager",
    "RateTracker",
    "ResolvedQuota",
    "TokenBucket",
    "candidates",
    "resolve_quota",
]

PRODUCER_BYTE_RATE: Final = "producer_byte_rate"
CONSUMER_BYTE_RATE: Final = "consumer_byte_rate"
REQUEST_PERCENTAGE: Final = "request_percentage"
CONTROLLER_MUTATION_RATE: Final = "controller_mutation_rate"
CONNECTION_CREATION_RATE: Final = "connection_creation_rate"

DEFAULT_SAMPLES: Final = 11
"""Kafka's ``quota.window.num``."""
DEFAULT_WINDOW_MS: Final = 1000
"""Kafka's ``quota.window.size.seconds``, in milliseconds."""
IDLE_EXPIRY_MS: Final = 3_600_000
"""A tracker unused this long is dropped (Kafka expires idle quota sensors after 1 h)."""

_NANOS_TO_PERCENT: Final = 100 / 1e9  # nanoseconds of loop time to percent-seconds

QuotaKey = tuple[str, str]
"""Who shares one allowance: ``(user, client id)``, "" for a part the entity omits."""


@dataclass(frozen=True, slots=True)
class ResolvedQuota:
    """The quota that applies to a client for one key."""

    entity: QuotaEntity
    """The entity of the image that holds it."""
    key: QuotaKey
    """Who shares it (see the module's docstring)."""
    value: float


def candidates(user: str, client_id: str) -> list[tuple[QuotaEntity, QuotaKey]]:
    """The entities that may hold a quota for ``(user, client_id)``, in Kafka's order of
    precedence, each with the sharing key it gives."""
    pair = (user, client_id)
    return [
        ((("client-id", client_id), ("user", user)), pair),
        ((("client-id", None), ("user", user)), pair),
        ((("user", user),), (user, "")),
        ((("client-id", client_id), ("user", None)), pair),
        ((("client-id", None), ("user", None)), pair),
        ((("user", None),), (user, "")),
        ((("client-id", client_id),), ("", client_id)),
        ((("client-id", None),), ("", client_id)),
    ]


def resolve_quota(
    quotas: Mapping[QuotaEntity, Mapping[str, float]], key: str, user: str, client_id: str
) -> ResolvedQuota | None:
    """The ``key`` quota that applies to ``user`` (the principal's name) connected as
    ``client_id``; None when no entity sets it (no limit)."""
    for entity, sharing in candidates(user, client_id):
        values = quotas.get(entity)
        if values is not None and key in values:
            return ResolvedQuota(entity, sharing, values[key])
    return None


def _round(value: float) -> int:
    # Java's Math.round: halves go up.
    return math.floor(value + 0.5)


class RateTracker:
    """A rate against a quota over a sliding window of samples (Kafka's ``Rate``).

    ``quota`` is in units per second and may be changed between records; ``max_throttle_ms``
    bounds what :meth:`record` returns (the whole window by default).
    """

    def __init__(
        self,
        quota: float,
        *,
        samples: int = DEFAULT_SAMPLES,
        window_ms: int = DEFAULT_WINDOW_MS,
        max_throttle_ms: int | None = None,
    ) -> None:
        if samples < 2 or window_ms <= 0:
            raise ValueError("a rate needs at least two samples of a positive length")
        self.quota = quota
        self.samples = samples
        self.window_ms = window_ms
        self.max_throttle_ms = samples * window_ms if max_throttle_ms is None else max_throttle_ms
        self._windows: list[list[float]] = []  # [start ms, amount], oldest first
        self.last_record_ms: int | None = None

    def record(self, now_ms: int, amount: float) -> int:
        """Add ``amount`` at ``now_ms``; the milliseconds to throttle for (0 within the
        quota)."""
        self._expire(now_ms)
        if not self._windows or now_ms >= self._windows[-1][0] + self.window_ms:
            if self._windows:
                # Windows stay aligned on the first one's start, as Kafka's do.
                last = self._windows[-1][0]
                start = now_ms - (now_ms - last) % self.window_ms
            else:
                start = now_ms
            self._windows.append([start, 0.0])
            del self._windows[: -self.samples]
        self._windows[-1][1] += amount
        self.last_record_ms = now_ms
        return self.throttle_ms(now_ms)

    def rate(self, now_ms: int) -> float:
        """The observed rate at ``now_ms``, in units per second."""
        self._expire(now_ms)
        if not self._windows:
            return 0.0
        return sum(amount for _, amount in self._windows) / (self.span_ms(now_ms) / 1000)

    def span_ms(self, now_ms: int) -> float:
        """The time the samples span at ``now_ms``, counted as at least ``samples - 1``
        full windows (Kafka's ``Rate.windowSize``)."""
        elapsed = now_ms - self._windows[0][0] if self._windows else 0
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return float(elapsed)

    def throttle_ms(self, now_ms: int) -> int:
        """How long a client at this rate must wait: ``(rate - quota) / quota * span``,
        bounded by :attr:`max_throttle_ms`; 0 at or under the quota."""
        rate = self.rate(now_ms)
        if rate <= self.quota:
            return 0
        if self.quota <= 0:
            return self.max_throttle_ms
        throttle = _round((rate - self.quota) / self.quota * self.span_ms(now_ms))
        return min(throttle, self.max_throttle_ms)

    def _expire(self, now_ms: int) -> None:
        age = self.samples * self.window_ms
        self._windows = [w for w in self._windows if now_ms - w[0] < age]


class TokenBucket:
    """Kafka's token bucket for controller mutations (KIP-599): up to ``quota * samples
    * window`` tokens, refilled at ``quota`` a second, one taken per mutation."""

    def __init__(
        self, quota: float, *, samples: int = DEFAULT_SAMPLES, window_ms: int = DEFAULT_WINDOW_MS
    ) -> None:
        self.quota = quota
        self.burst_seconds = samples * window_ms / 1000
        self.tokens = self.burst
        self._updated_ms: int | None = None
        self.last_record_ms: int | None = None

    @property
    def burst(self) -> float:
        return self.quota * self.burst_seconds

    def record(self, now_ms: int, amount: float) -> int:
        """Take ``amount`` tokens at ``now_ms``; the milliseconds until the bucket is
        back at zero (0 while tokens remain)."""
        self._refill(now_ms)
        self.tokens -= amount
        self.last_record_ms = now_ms
        return self.throttle_ms(now_ms)

    def throttle_ms(self, now_ms: int, pending: float = 0) -> int:
        """The milliseconds until the bucket, less ``pending`` tokens not yet taken, is
        back at zero."""
        self._refill(now_ms)
        tokens = self.tokens - pending
        if tokens >= 0:
            return 0
        if self.quota <= 0:
            return 2**31 - 1
        return _round(-tokens / self.quota * 1000)

    def _refill(self, now_ms: int) -> None:
        if self._updated_ms is not None and now_ms > self._updated_ms:
            elapsed = (now_ms - self._updated_ms) / 1000
            self.tokens = min(self.burst, self.tokens + self.quota * elapsed)
        if self._updated_ms is None or now_ms > self._updated_ms:
            self._updated_ms = now_ms
        self.tokens = min(self.tokens, self.burst)


_Tracker = RateTracker | TokenBucket


class QuotaManager:
    """The broker's quota state: one tracker per quota key and sharing key.

    Built from a snapshot of :attr:`MetadataImage.client_quotas`; call :meth:`update`
    with the image's mapping before recording (cheap: it rebuilds only when the
    mapping's identity changed, which is exactly when the quotas did). A tracker keeps
    its samples across a change of its quota's value. Every recording method returns the
    throttle time in milliseconds, 0 when the client is within its quota or has none.
    """

    def __init__(
        self,
        quotas: Mapping[QuotaEntity, Mapping[str, float]] | None = None,
        *,
        samples: int = DEFAULT_SAMPLES,
        window_ms: int = DEFAULT_WINDOW_MS,
    ) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._quotas: Mapping[QuotaEntity, Mapping[str, float]] = {}
        self._resolved: dict[tuple[str, str, str], ResolvedQuota | None] = {}
        self._trackers: dict[tuple[str, QuotaKey], _Tracker] = {}
        self.update({} if quotas is None else quotas)

    @property
    def quotas(self) -> Mapping[QuotaEntity, Mapping[str, float]]:
        return self._quotas

    def update(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """Use ``quotas`` (the image's ``client_quotas``) from now on."""
        if quotas is self._quotas:
            return
        self._quotas = quotas
        self._resolved = {}

    def quota(self, key: str, user: str, client_id: str) -> ResolvedQuota | None:
        """The ``key`` quota that applies to ``(user, client_id)``, cached per snapshot."""
        cache_key = (key, user, client_id)
        if cache_key not in self._resolved:
            self._resolved[cache_key] = resolve_quota(self._quotas, key, user, client_id)
        return self._resolved[cache_key]

    def produce(self, user: str, client_id: str, nbytes: int, now_ms: int) -> int:
        """Record ``nbytes`` produced (against ``producer_byte_rate``)."""
        return self._record(PRODUCER_BYTE_RATE, user, client_id, nbytes, now_ms)

    def fetch(self, user: str, client_id: str, nbytes: int, now_ms: int) -> int:
        """Record ``nbytes`` fetched (against ``consumer_byte_rate``)."""
        return self._record(CONSUMER_BYTE_RATE, user, client_id, nbytes, now_ms)

    def request_time(self, user: str, client_id: str, time_ns: int, now_ms: int) -> int:
        """Record ``time_ns`` nanoseconds of event-loop time spent on one request
        (against ``request_percentage``, 100 being the whole loop)."""
        percent_seconds = time_ns * _NANOS_TO_PERCENT
        return self._record(REQUEST_PERCENTAGE, user, client_id, percent_seconds, now_ms)

    def controller_mutations(self, user: str, client_id: str, count: int, now_ms: int) -> int:
        """Record ``count`` controller mutations (topics or partitions created or
        deleted; against ``controller_mutation_rate``)."""
        return self._record(CONTROLLER_MUTATION_RATE, user, client_id, count, now_ms)

    def mutation_throttle_ms(self, user: str, client_id: str, pending: int, now_ms: int) -> int:
        """The controller-mutation throttle ``(user, client_id)`` would have with
        ``pending`` more mutations, recording nothing (KIP-599's strict check)."""
        resolved = self.quota(CONTROLLER_MUTATION_RATE, user, client_id)
        if resolved is None:
            return 0
        tracker = self._trackers.get((CONTROLLER_MUTATION_RATE, resolved.key))
        bucket = TokenBucket(resolved.value, samples=self.samples, window_ms=self.window_ms)
        if isinstance(tracker, TokenBucket):
            tracker.quota = resolved.value
            bucket = tracker
        return bucket.throttle_ms(now_ms, pending)

    def connection(self, ip: str, now_ms: int) -> int:
        """Record a new connection from ``ip`` (against ``connection_creation_rate``)."""
        resolved = None
        for entity in ((("ip", ip),), (("ip", None),)):
            values = self._quotas.get(entity)
            if values is not None and CONNECTION_CREATION_RATE in values:
                resolved = values[CONNECTION_CREATION_RATE]
                break
        if resolved is None:
            return 0
        sharing = (ip, "")
        tracker = self._trackers.get((CONNECTION_CREATION_RATE, sharing))
        if tracker is None:
            tracker = self._new_tracker(CONNECTION_CREATION_RATE, resolved)
            self._trackers[CONNECTION_CREATION_RATE, sharing] = tracker
        tracker.quota = resolved
        return tracker.record(now_ms, 1)

    def expire_idle(self, now_ms: int, idle_ms: int = IDLE_EXPIRY_MS) -> int:
        """Drop the trackers not recorded into for ``idle_ms``; how many were dropped."""
        idle = [
            k
            for k, t in self._trackers.items()
            if t.last_record_ms is not None and now_ms - t.last_record_ms >= idle_ms
        ]
        for k in idle:
            del self._trackers[k]
        return len(idle)

    def tracker(self, key: str, sharing: QuotaKey) -> _Tracker | None:
        """The tracker for quota ``key`` shared by ``sharing``, if one exists."""
        return self._trackers.get((key, sharing))

    def _record(self, key: str, user: str, client_id: str, amount: float, now_ms: int) -> int:
        resolved = self.quota(key, user, client_id)
        if resolved is None:
            return 0
        tracker = self._trackers.get((key, resolved.key))
        if tracker is None:
            tracker = self._new_tracker(key, resolved.value)
            self._trackers[key, resolved.key] = tracker
        else:
            tracker.quota = resolved.value
        return tracker.record(now_ms, amount)

    def _new_tracker(self, key: str, quota: float) -> _Tracker:
        if key == CONTROLLER_MUTATION_RATE:
            return TokenBucket(quota, samples=self.samples, window_ms=self.window_ms)
        # Kafka's request quota manager bounds a throttle by one window, the byte quota
        # managers here by the whole sample window.
        bound = self.window_ms if key == REQUEST_PERCENTAGE else None
        return RateTracker(
            quota, samples=self.samples, window_ms=self.window_ms, max_throttle_ms=bound
        )
