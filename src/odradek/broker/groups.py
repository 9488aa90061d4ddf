"""FindCoordinator, and the hand-off of group requests to the group coordinator.

The coordinator of a group is the leader of the group's partition of the internal
topic ``__consumer_offsets``, created on the first lookup as Kafka does (its replication
factor is ``offsets.topic.replication.factor``, at most the number of live brokers).
The group requests themselves go to :class:`odradek.coordinator.GroupCoordinator`
through the :class:`~odradek.broker.effects.GroupCall` effect.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.addresses import listener_of, registered_address
from odradek.broker.authorization import allowed_names
from odradek.broker.effects import CommitRecords, GroupCall, Outcome, Reply
from odradek.broker.router import Request
from odradek.broker.server_keys import MIB
from odradek.broker.state import BrokerState
from odradek.controller.topics import NewTopic, create_topic
from odradek.coordinator import find_coordinator
from odradek.coordinator.lookup import Node
from odradek.protocol.api import RequestHeader
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import FindCoordinatorRequest
from odradek.security.acls import AclOperation, ResourceType

OFFSETS_TOPIC = "__consumer_offsets"
FIND_COORDINATOR_VERSIONS = (0, 5)

# Kafka's: the offsets topic is compacted (the log cleaner keeps each group's and
# partition's last commit, and drops a deleted group's tombstones after
# delete.retention.ms), and without "delete" in its policy it gets no time or size
# retention (topic_config.to_log_config), so no group's committed offsets are ever cut
# by retention, whatever log.retention.bytes says. retention.ms=-1 says the same for
# anyone who reads the topic's configs.
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "retention.ms": "-1"}


def handle_group_request(header: RequestHeader, request: Any) -> Outcome:
    if isinstance(header, Request):
        return GroupCall(
            request,
            header.request_api_version,
            header.client_id or "",
            header.principal,
            header.host,
        )
    return GroupCall(request, header.request_api_version, header.client_id or "")


def _segment_size(segment_bytes: int) -> dict[str, str]:
    """``offsets.topic.segment.bytes`` as the offsets topic's segment size: below
    ``segment.bytes``' 1 MiB minimum (tests) as ``internal.segment.bytes``."""
    key = "segment.bytes" if segment_bytes >= MIB else "internal.segment.bytes"
    return {key: str(segment_bytes)}


def handle_find_coordinator(
    state: BrokerState,
    header: RequestHeader,
    request: FindCoordinatorRequest,
    *,
    offsets_topic_num_partitions: int,
    offsets_topic_replication_factor: int,
    offsets_topic_segment_bytes: int = 100 * MIB,
) -> Outcome:
    version = header.request_api_version

    # DESCRIBE on the group (or the transactional id) each key names.
    kind = ResourceType.TRANSACTIONAL_ID if request.key_type == 1 else ResourceType.GROUP
    keys = request.coordinator_keys if version >= 4 else [request.key]
    described = allowed_names(state, header, AclOperation.DESCRIBE, kind, keys)
    denied_code = (
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        if request.key_type == 1
        else ErrorCode.GROUP_AUTHORIZATION_FAILED
    )

    def answer() -> Outcome:
        response = find_coordinator(
            request,
            version,
            offsets_topic_num_partitions=offsets_topic_num_partitions,
            leader_of=lambda p: _leader_of(state, p, listener_of(header)),
        )
        for coordinator in response.coordinators:
            if coordinator.key not in described:
                coordinator.node_id, coordinator.host, coordinator.port = -1, "", -1
                coordinator.error_code = denied_code
                coordinator.error_message = "Authorization failed."
        if version < 4 and request.key not in described:
            response.node_id, response.host, response.port = -1, "", -1
            response.error_code = denied_code
            response.error_message = "Authorization failed."
        return Reply(response)

    if not described:
        return answer()  # nothing to coordinate for this principal: no topic made

    if OFFSETS_TOPIC in state.image.topics_by_name:
        return answer()
    live = state.live_brokers()
    outcome = create_topic(
        state.image,
        NewTopic(
            name=OFFSETS_TOPIC,
            num_partitions=offsets_topic_num_partitions,
            replication_factor=min(offsets_topic_replication_factor, len(live)),
            configs={**OFFSETS_TOPIC_CONFIGS, **_segment_size(offsets_topic_segment_bytes)},
        ),
        live,
        default_partitions=offsets_topic_num_partitions,
        default_replication_factor=1,
        rng=state.rng,
    )
    if outcome.error_code != ErrorCode.NONE:
        return answer()  # COORDINATOR_NOT_AVAILABLE: the client retries
    return CommitRecords(outcome.records, answer)


def _leader_of(state: BrokerState, partition: int, listener: str) -> Node | None:
    topic = state.image.topics_by_name.get(OFFSETS_TOPIC)
    if topic is None or partition not in topic.partitions:
        return None
    leader = topic.partitions[partition].leader
    settings = state.settings
    if leader == settings.node_id:
        if (OFFSETS_TOPIC, partition) not in state.partitions:
            return None
        own = settings.address(listener)
        return None if own is None else (settings.node_id, *own)
    broker = state.image.brokers.get(leader)
    address = registered_address(broker, listener) if broker is not None else None
    if broker is None or broker.fenced or address is None:
        return None
    return (leader, *address)
