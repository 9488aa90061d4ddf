"""Who leads a partition, for clients told NOT_LEADER_OR_FOLLOWER (KIP-951).

Produce v10+ and Fetch v12+ carry the current leader and epoch in the partition's
error answer, and the leader's address in NodeEndpoints, so that a client moves to the
new leader at once instead of refreshing its metadata first.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.broker.addresses import address_of
from odradek.broker.state import BrokerState


@dataclass(frozen=True, slots=True)
class LeaderHint:
    leader_id: int
    leader_epoch: int
    host: str | None
    port: int | None
    rack: str | None


def leader_hint(
    state: BrokerState, topic: str, partition: int, listener: str = ""
) -> LeaderHint | None:
    """The image's leader of ``topic``-``partition`` and its address on ``listener``,
    if known."""
    found = state.image.topics_by_name.get(topic)
    if found is None or partition not in found.partitions:
        return None
    registration = found.partitions[partition]
    if registration.leader < 0:
        return LeaderHint(-1, registration.leader_epoch, None, None, None)
    broker = state.image.brokers.get(registration.leader)
    address = address_of(state, registration.leader, listener) if broker is not None else None
    return LeaderHint(
        registration.leader,
        registration.leader_epoch,
        address[0] if address else None,
        address[1] if address else None,
        broker.rack if broker else None,
    )
