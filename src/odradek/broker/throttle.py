"""How long a client must wait for going over its byte-rate quota (KIP-219).

Produce and (consumer) Fetch record their bytes against the quota that applies to the
request's user and client id (:mod:`odradek.broker.quotas`, Kafka's precedence) and put
the throttle in the answer's ``throttle_time_ms``; the connection then reads nothing
more from that client for that long, as Kafka mutes the channel. The request itself is
answered at once and in order: a throttled client is slowed, never refused or reordered.

``request_percentage`` charges the event-loop time a request's handler took
(:func:`request_throttle_ms`, measured by the connection), for every client request of
the broker listener; the answer's ``throttle_time_ms`` is the larger of the two throttles,
as Kafka's is. ``controller_mutation_rate`` (KIP-599) is :class:`MutationQuota`: the
partitions CreateTopics, CreatePartitions and DeleteTopics create or delete, charged on
the active controller when their records commit.

A user is the principal's name (``ANONYMOUS`` on PLAINTEXT, which ``/users/<default>``
quotas cover, as in Kafka). Followers' fetches are replication, not consumption, and are
never throttled here, nor is any request a follower sends (Kafka exempts cluster
actions).
"""

from __future__ import annotations

from typing import Any, Final

from odradek.broker.router import Request
from odradek.broker.state import BrokerState
from odradek.protocol.messages.produce_request import ProduceRequest
from odradek.protocol.messages.request_header import RequestHeader
from odradek.security.principal import ANONYMOUS

__all__ = [
    "THROTTLING_QUOTA_EXCEEDED_MESSAGE",
    "MutationQuota",
    "connection_throttle_ms",
    "fetch_throttle_ms",
    "from_replica",
    "produce_throttle_ms",
    "request_throttle_ms",
    "who",
]

THROTTLING_QUOTA_EXCEEDED_MESSAGE: Final = "The throttling quota has been exceeded."


def who(header: RequestHeader) -> tuple[str, str]:
    """The (user, client id) a request is charged to."""
    principal = header.principal if isinstance(header, Request) else ANONYMOUS
    return principal.name, header.client_id or ""


def produce_throttle_ms(state: BrokerState, header: RequestHeader, request: ProduceRequest) -> int:
    quotas = state.image.client_quotas
    if not quotas:
        return 0  # no quota anywhere: nothing to count (the common case, so counted lazily)
    state.quotas.update(quotas)
    user, client_id = who(header)
    nbytes = sum(len(d.records or b"") for t in request.topic_data for d in t.partition_data)
    return state.quotas.produce(user, client_id, nbytes, state.monotonic_ms)


def fetch_throttle_ms(state: BrokerState, charged: tuple[str, str], nbytes: int) -> int:
    quotas = state.image.client_quotas
    if not quotas:
        return 0
    state.quotas.update(quotas)
    user, client_id = charged
    return state.quotas.fetch(user, client_id, nbytes, state.monotonic_ms)


def from_replica(body: Any) -> bool:
    """Whether a request comes from a follower (a Fetch, ListOffsets or
    OffsetForLeaderEpoch naming a replica id): replication, never throttled."""
    replica_state = getattr(body, "replica_state", None)
    replica = getattr(body, "replica_id", -1)
    if replica_state is not None:
        replica = max(replica, replica_state.replica_id)
    return bool(replica >= 0)


def request_throttle_ms(state: BrokerState, header: RequestHeader, time_ns: int) -> int:
    """Charge ``time_ns`` of event-loop time to the request's client
    (``request_percentage``); how long to throttle it for."""
    quotas = state.image.client_quotas
    if not quotas:
        return 0
    state.quotas.update(quotas)
    user, client_id = who(header)
    return state.quotas.request_time(user, client_id, time_ns, state.monotonic_ms)


class MutationQuota:
    """``controller_mutation_rate`` for one CreateTopics, CreatePartitions or DeleteTopics
    request (KIP-599).

    Strict (the versions KIP-599 added: CreateTopics v6, CreatePartitions v3,
    DeleteTopics v5): once the client's token bucket is below zero, counting what this
    request has taken so far, each further topic is refused with
    THROTTLING_QUOTA_EXCEEDED; a topic admitted while tokens remain goes through whole,
    however many partitions it has, as in Kafka. Older versions are permissive: nothing
    is refused and the answer only carries the throttle. Nothing is charged until
    :meth:`record`, which the handler calls once its records are committed: a handler
    that runs again on a newer image, or on a broker that forwards the request to the
    active controller, charges nothing, and a validate-only request is never charged.
    """

    def __init__(self, state: BrokerState, header: RequestHeader, strict: bool) -> None:
        self._state = state
        self._strict = strict
        self._user, self._client_id = who(header)
        self._taken = 0
        quotas = state.image.client_quotas
        self._limited = bool(quotas)
        if self._limited:
            state.quotas.update(quotas)

    def admits(self, mutations: int) -> bool:
        """Whether a topic of ``mutations`` partition creations or deletions may go
        ahead; if so they are counted for :meth:`record`."""
        if self._strict and self.throttle_ms() > 0:
            return False
        self._taken += mutations
        return True

    def throttle_ms(self) -> int:
        """How long the client must wait with this request's mutations counted."""
        if not self._limited:
            return 0
        return self._state.quotas.mutation_throttle_ms(
            self._user, self._client_id, self._taken, self._state.monotonic_ms
        )

    def record(self) -> int:
        """Charge what this request took (its records are committed); the throttle."""
        if not self._limited:
            return 0
        taken, self._taken = self._taken, 0
        return self._state.quotas.controller_mutations(
            self._user, self._client_id, taken, self._state.monotonic_ms
        )


def connection_throttle_ms(state: BrokerState, ip: str) -> int:
    """Count a new connection from ``ip`` (``connection_creation_rate``, KIP-612); how
    long to hold it before closing it (0: admitted)."""
    quotas = state.image.client_quotas
    if not quotas:
        return 0
    state.quotas.update(quotas)
    return state.quotas.connection(ip, state.monotonic_ms)
