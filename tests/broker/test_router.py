"""The router answers ApiVersions exactly and closes on what it cannot serve."""

from __future__ import annotations

import pytest

from odradek.broker.effects import Reply
from odradek.broker.router import Close, Dispatch, Respond, Router
from odradek.protocol.api import RequestHeader, decode_response, encode_request
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import ApiVersionsRequest, MetadataRequest


def payload_of(routed: object) -> bytes:
    if isinstance(routed, Dispatch):
        assert isinstance(routed.outcome, Reply)
        chunks = Router.encode(routed.header, routed.outcome.response, routed.response_version)
    else:
        assert isinstance(routed, Respond)
        chunks = routed.chunks
    return b"".join(
        c if isinstance(c, bytes | bytearray | memoryview) else c.read() for c in chunks
    )


@pytest.mark.parametrize("version", range(0, 5))
def test_api_versions_advertises_what_is_registered(version: int) -> None:
    header = RequestHeader(request_api_key=18, request_api_version=version, correlation_id=9)
    reply = Router().handle(encode_request(header, ApiVersionsRequest()))
    rheader, body = decode_response(payload_of(reply), 18, version)
    assert rheader.correlation_id == 9
    assert body.error_code == ErrorCode.NONE
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [
        (17, 0, 1),
        (18, 0, 4),
        (36, 0, 2),
    ]


def test_newer_api_versions_gets_our_ranges_in_v0() -> None:
    # A client newer than us sends v9; we cannot parse its body, but the header is
    # enough to answer in the v0 layout that every client reads.
    payload = b"\x00\x12\x00\x09\x00\x00\x00\x05\x00\x01c\x00\x00"
    reply = Router().handle(payload)
    _, body = decode_response(payload_of(reply), 18, 0)
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert {k.api_key: k.max_version for k in body.api_keys}[18] == 4


def test_unimplemented_api_closes_the_connection() -> None:
    header = RequestHeader(request_api_key=3, request_api_version=12, correlation_id=1)
    reply = Router().handle(encode_request(header, MetadataRequest()), "127.0.0.1:5")
    assert isinstance(reply, Close)
    assert "127.0.0.1:5" in reply.reason and "API key 3" in reply.reason


@pytest.mark.parametrize(
    "payload",
    [b"", b"\x00\x12", b"\x00\x12\x00\x03\x00\x00\x00\x01\x00\x01", b"\x7f\x7f\x00\x00" * 3],
)
def test_malformed_requests_close_with_a_reason(payload: bytes) -> None:
    reply = Router().handle(payload, "peer")
    assert isinstance(reply, Close)
    assert reply.reason.startswith("client peer")


def test_trailing_bytes_are_tolerated_as_kafka_does() -> None:
    # Captured from librdkafka 2.16 (confluent-kafka AdminClient.list_topics): a
    # Metadata v12 request that carries IncludeClusterAuthorizedOperations, a field of
    # v8-v10 only. Kafka ignores the extra bytes; closing the connection would make the
    # client unusable.
    payload = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
    router = Router()
    router.register(3, (0, 12), lambda header, body: Reply(body))
    routed = router.handle(payload)
    assert isinstance(routed, Dispatch)
    assert isinstance(routed.outcome, Reply)
    assert routed.outcome.response.topics is None
