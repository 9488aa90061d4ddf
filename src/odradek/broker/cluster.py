"""DescribeCluster: this node's view of the cluster, as the Admin client's describeCluster asks.

The answer holds the cluster id, the controller id and the live brokers: this node, with
the address it advertises, and every registered, unfenced broker in the metadata image
with its first listener, the same list Metadata gives. While this node is the single
voter of its own metadata log it is also the controller, so it names itself, as Metadata
does.

Kafka's rules for the endpoint type (v1): a broker serves requests for broker endpoints
only; an unknown type is UNSUPPORTED_ENDPOINT_TYPE and a controller type is
MISMATCHED_ENDPOINT_TYPE (both INVALID_REQUEST in v0, which has neither code).
"""

from __future__ import annotations

from typing import Final

from odradek.broker.addresses import listener_of, registered_address
from odradek.broker.authorization import OPERATIONS_NOT_REQUESTED, authorized_operations
from odradek.broker.effects import Outcome, Reply
from odradek.broker.state import BrokerState
from odradek.protocol.api import RequestHeader
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import DescribeClusterRequest, DescribeClusterResponse
from odradek.protocol.messages.describe_cluster_response import DescribeClusterBroker
from odradek.security.acls import ResourceType

__all__ = [
    "CLUSTER_OPERATIONS",
    "DESCRIBE_CLUSTER_VERSIONS",
    "ENDPOINT_TYPE_BROKER",
    "ENDPOINT_TYPE_CONTROLLER",
    "handle_describe_cluster",
]

DESCRIBE_CLUSTER_VERSIONS: Final = (0, 1)

ENDPOINT_TYPE_BROKER: Final = 1
ENDPOINT_TYPE_CONTROLLER: Final = 2
_ENDPOINT_TYPE_NAMES: Final = {
    ENDPOINT_TYPE_BROKER: "BROKER",
    ENDPOINT_TYPE_CONTROLLER: "CONTROLLER",
}

# Kafka's AclOperation codes of the operations a CLUSTER resource supports: ALTER (7),
# DESCRIBE (8), CLUSTER_ACTION (9), DESCRIBE_CONFIGS (10), ALTER_CONFIGS (11),
# IDEMPOTENT_WRITE (12) and CREATE (5): what the answer reports without an authorizer.
CLUSTER_OPERATIONS: Final = sum(1 << code for code in (5, 7, 8, 9, 10, 11, 12))


def handle_describe_cluster(
    state: BrokerState, header: RequestHeader, request: DescribeClusterRequest
) -> Outcome:
    version = header.request_api_version
    wanted = request.endpoint_type
    if wanted != ENDPOINT_TYPE_BROKER:
        if wanted in _ENDPOINT_TYPE_NAMES:
            code = ErrorCode.MISMATCHED_ENDPOINT_TYPE
            message = (
                "The request was sent to an endpoint of type BROKER, but we wanted an "
                f"endpoint of type {_ENDPOINT_TYPE_NAMES[wanted]}"
            )
        else:
            code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
            message = f"Unsupported endpoint type {wanted}"
        return Reply(
            DescribeClusterResponse(
                error_code=code if version >= 1 else ErrorCode.INVALID_REQUEST,
                error_message=message,
            )
        )
    s = state.settings
    listener = listener_of(header)
    brokers = []
    own = s.address(listener)
    if own is not None:
        brokers.append(DescribeClusterBroker(s.node_id, own[0], own[1], s.rack))
    for broker in sorted(state.image.brokers.values(), key=lambda b: b.broker_id):
        address = registered_address(broker, listener)
        if broker.broker_id == s.node_id or broker.fenced or address is None:
            continue
        brokers.append(DescribeClusterBroker(broker.broker_id, address[0], address[1], broker.rack))
    brokers.sort(key=lambda b: b.broker_id)
    return Reply(
        DescribeClusterResponse(
            error_code=ErrorCode.NONE,
            error_message=None,
            cluster_id=s.cluster_id,
            controller_id=s.node_id,
            brokers=brokers,
            cluster_authorized_operations=(
                authorized_operations(state, header, ResourceType.CLUSTER)
                if request.include_cluster_authorized_operations
                else OPERATIONS_NOT_REQUESTED
            ),
        )
    )
