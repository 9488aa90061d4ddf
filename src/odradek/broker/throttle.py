"""How long a client must wait for going over its byte-rate quota (KIP-219).

Produce and (consumer) Fetch record their bytes against the quota that applies to the
request's user and client id (:mod:`odradek.broker.quotas`, Kafka's precedence) and put
the throttle in the answer's ``throttle_time_ms``; the connection then reads nothing
more from that client for that long, as Kafka mutes the channel. The request itself is
answered at once and in order: a throttled client is slowed, never refused or reordered.

A user is the principal's name (``ANONYMOUS`` on PLAINTEXT, which ``/users/<default>``
quotas cover, as in Kafka). Followers' fetches are replication, not consumption, and are
never throttled here.
"""

from __future__ import annotations

from odradek.broker.router import Request
from odradek.broker.state import BrokerState
from odradek.protocol.messages.produce_request import ProduceRequest
from odradek.protocol.messages.request_header import RequestHeader
from odradek.security.principal import ANONYMOUS

__all__ = ["fetch_throttle_ms", "produce_throttle_ms", "who"]


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
