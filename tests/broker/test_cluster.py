"""DescribeCluster: the live brokers, cluster id and controller id, authorized operations on
request, and Kafka's endpoint-type errors per version."""

from __future__ import annotations

import pytest

from odradek.broker.cluster import (
    CLUSTER_OPERATIONS,
    DESCRIBE_CLUSTER_VERSIONS,
    ENDPOINT_TYPE_BROKER,
    ENDPOINT_TYPE_CONTROLLER,
    handle_describe_cluster,
)
from odradek.broker.effects import Reply
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import DescribeClusterRequest, DescribeClusterResponse
from tests.broker.harness import (
    CLUSTER_ID,
    HOST,
    PORT,
    Harness,
    header,
    new_harness,
    roundtrip,
    versions,
)

KEY = DescribeClusterRequest.API_KEY
INT32_MIN = -(2**31)


def describe(h: Harness, request: DescribeClusterRequest, version: int) -> DescribeClusterResponse:
    outcome = handle_describe_cluster(h.state, header(KEY, version), request)
    assert isinstance(outcome, Reply)
    response = roundtrip(outcome.response, version)
    assert isinstance(response, DescribeClusterResponse)
    return response


@pytest.mark.parametrize("version", versions(DESCRIBE_CLUSTER_VERSIONS))
def test_the_live_brokers_with_this_node_among_them(version: int) -> None:
    h = new_harness()
    h.register_broker(3, host="three.test", port=9300, rack="r3")
    h.register_broker(0, host="zero.test", port=9000)
    h.register_broker(2, fenced=True)
    response = h.through_router(
        KEY,
        DESCRIBE_CLUSTER_VERSIONS,
        lambda hd, body: handle_describe_cluster(h.state, hd, body),
        DescribeClusterRequest(),
        version,
    )
    assert isinstance(response, DescribeClusterResponse)
    assert (response.error_code, response.error_message) == (ErrorCode.NONE, None)
    assert response.cluster_id == CLUSTER_ID
    assert response.controller_id == h.node_id
    assert response.endpoint_type == ENDPOINT_TYPE_BROKER
    assert [(b.broker_id, b.host, b.port, b.rack) for b in response.brokers] == [
        (0, "zero.test", 9000, None),
        (1, HOST, PORT, None),
        (3, "three.test", 9300, "r3"),
    ]
    assert response.cluster_authorized_operations == INT32_MIN


def test_this_node_is_listed_once_even_when_registered() -> None:
    h = new_harness()
    h.register_broker(1, host="registered.test", port=1234)
    response = describe(h, DescribeClusterRequest(), 1)
    # This node answers with the address it advertises, not a registration's copy.
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [(1, HOST, PORT)]


@pytest.mark.parametrize("version", versions(DESCRIBE_CLUSTER_VERSIONS))
def test_authorized_operations_when_asked(version: int) -> None:
    response = describe(
        new_harness(), DescribeClusterRequest(include_cluster_authorized_operations=True), version
    )
    operations = response.cluster_authorized_operations
    assert operations == CLUSTER_OPERATIONS
    # Kafka's AclOperation codes for a cluster: CREATE 5, ALTER 7, DESCRIBE 8,
    # CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
    assert [code for code in range(32) if operations >> code & 1] == [5, 7, 8, 9, 10, 11, 12]


@pytest.mark.parametrize(
    ("endpoint_type", "code", "message"),
    [
        (
            ENDPOINT_TYPE_CONTROLLER,
            ErrorCode.MISMATCHED_ENDPOINT_TYPE,
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint "
            "of type CONTROLLER",
        ),
        (0, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, "Unsupported endpoint type 0"),
        (7, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, "Unsupported endpoint type 7"),
    ],
)
def test_other_endpoint_types_are_refused(
    endpoint_type: int, code: ErrorCode, message: str
) -> None:
    h = new_harness()
    response = h.through_router(
        KEY,
        DESCRIBE_CLUSTER_VERSIONS,
        lambda hd, body: handle_describe_cluster(h.state, hd, body),
        DescribeClusterRequest(endpoint_type=endpoint_type),
        1,
    )
    assert (response.error_code, response.error_message) == (code, message)
    assert response.brokers == []


def test_version_0_has_no_endpoint_codes() -> None:
    # v0 cannot carry an endpoint type on the wire; a request object that has one anyway
    # gets INVALID_REQUEST, as Kafka answers v0.
    response = describe(
        new_harness(), DescribeClusterRequest(endpoint_type=ENDPOINT_TYPE_CONTROLLER), 0
    )
    assert response.error_code == ErrorCode.INVALID_REQUEST
    assert "CONTROLLER" in (response.error_message or "")
