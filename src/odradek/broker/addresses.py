"""Where a client reaches a broker: on the listener the client came in on.

A broker registers one endpoint per broker listener (``INTERNAL`` for replication,
``EXTERNAL`` for clients, ...). As in Kafka, every address a node hands a client
(Metadata's brokers, DescribeCluster, FindCoordinator, the leader hints of Produce and
Fetch) is on the listener that client's request came in on, so a client outside never
gets an inside address. A broker without that listener is left out, as Kafka leaves it
out; "" stands for this node's first broker listener (requests made inside the node).
"""

from __future__ import annotations

from odradek.broker.router import Request
from odradek.broker.state import BrokerState
from odradek.controller.image import BrokerImage
from odradek.protocol.messages.request_header import RequestHeader

__all__ = ["address_of", "listener_of", "registered_address"]


def listener_of(header: RequestHeader) -> str:
    """The listener a request came in on ("" when not known)."""
    return header.listener if isinstance(header, Request) else ""


def registered_address(broker: BrokerImage, listener: str) -> tuple[str, int] | None:
    """The ``(host, port)`` ``broker`` registered for ``listener`` ("": its first)."""
    if not broker.endpoints:
        return None
    if not listener:
        first = broker.endpoints[0]
        return first.host, first.port
    for endpoint in broker.endpoints:
        if endpoint.name == listener:
            return endpoint.host, endpoint.port
    return None


def address_of(state: BrokerState, broker_id: int, listener: str) -> tuple[str, int] | None:
    """Where a client of ``listener`` reaches ``broker_id`` (this node's own address as
    configured, another's as registered); None when unknown or without that listener."""
    if broker_id == state.settings.node_id:
        return state.settings.address(listener)
    broker = state.image.brokers.get(broker_id)
    return registered_address(broker, listener) if broker is not None else None
