"""The broker's handler table: each API served once, by the handler Kafka's clients expect."""

from __future__ import annotations

from collections import Counter

from odradek.broker.effects import GroupCall, Reply
from odradek.broker.handlers import broker_routes, register
from odradek.broker.router import Dispatch, Router
from odradek.protocol.api import encode_request
from odradek.protocol.messages import (
    ApiVersionsRequest,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    HeartbeatRequest,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from tests.broker.harness import Harness, header, new_harness

QUORUM_VIEW = DescribeQuorumResponse(error_code=0, error_message="from the quorum")


def _router(h: Harness) -> Router:
    return register(
        Router(),
        broker_routes(
            h.state,
            h.server,
            offsets_topic_num_partitions=50,
            offsets_topic_replication_factor=3,
            describe_quorum=lambda: QUORUM_VIEW,
        ),
    )


def test_every_api_has_one_route_and_api_versions_advertises_them_all() -> None:
    h = new_harness()
    routes = broker_routes(
        h.state,
        h.server,
        offsets_topic_num_partitions=50,
        offsets_topic_replication_factor=3,
        describe_quorum=lambda: QUORUM_VIEW,
    )
    # A second route for one API would silently replace the first in the router.
    keys = Counter(api_key for api_key, _, _ in routes)
    assert [key for key, count in keys.items() if count > 1] == []
    advertised = {v.api_key: (v.min_version, v.max_version) for v in _router(h).supported()}
    expected = {api_key: versions for api_key, versions, _ in routes}
    expected[ApiVersionsRequest.API_KEY] = (0, 4)
    # Every listener advertises the SASL exchange; the router answers it where the
    # listener is not SASL (a SASL listener's gate answers it first).
    expected[SaslHandshakeRequest.API_KEY] = (0, 1)
    expected[SaslAuthenticateRequest.API_KEY] = (0, 2)
    assert advertised == expected


def test_describe_quorum_answers_with_the_quorums_own_view() -> None:
    h = new_harness()
    request = DescribeQuorumRequest(topics=[])
    routed = _router(h).handle(encode_request(header(DescribeQuorumRequest.API_KEY, 2), request))
    assert isinstance(routed, Dispatch)
    assert routed.outcome == Reply(QUORUM_VIEW)


def test_group_requests_go_to_the_coordinator_and_metadata_is_answered_at_once() -> None:
    h = new_harness()
    router = _router(h)
    heartbeat = HeartbeatRequest(group_id="g", generation_id=1, member_id="m")
    routed = router.handle(encode_request(header(HeartbeatRequest.API_KEY, 4), heartbeat))
    assert isinstance(routed, Dispatch)
    assert isinstance(routed.outcome, GroupCall)
    assert routed.outcome.request == heartbeat
    metadata = router.handle(
        encode_request(header(MetadataRequest.API_KEY, 12), MetadataRequest(topics=[]))
    )
    assert isinstance(metadata, Dispatch)
    assert isinstance(metadata.outcome, Reply)
