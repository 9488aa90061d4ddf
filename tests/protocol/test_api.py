"""Whole requests and responses: header versions, and known bytes from the guide."""

from __future__ import annotations

import pytest

from odradek.core.errors import DecodeError, UnsupportedVersionError
from odradek.protocol.api import (
    RequestHeader,
    ResponseHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_header_version,
    response_header_version,
)
from odradek.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchRequest,
    MetadataRequest,
)
from odradek.protocol.messages.api_versions_response import ApiVersion


def test_header_versions_follow_flexibility() -> None:
    assert request_header_version(3, 8) == 1  # Metadata v8: not flexible
    assert request_header_version(3, 9) == 2  # Metadata v9: flexible
    assert request_header_version(7, 0) == 0  # ControlledShutdown v0: header v0
    assert response_header_version(3, 9) == 1
    assert response_header_version(3, 8) == 0
    # ApiVersions answers always carry header v0, even at flexible versions.
    assert response_header_version(18, 3) == 0


def test_api_versions_v3_request_bytes() -> None:
    header = RequestHeader(
        request_api_key=18, request_api_version=3, correlation_id=1, client_id="c"
    )
    body = ApiVersionsRequest(client_software_name="x", client_software_version="1")
    payload = encode_request(header, body)
    # key, version, correlation id, client id as a plain int16 string even in header
    # v2, empty header tags, then compact strings and empty body tags.
    assert payload == (b"\x00\x12\x00\x03\x00\x00\x00\x01\x00\x01c\x00" + b"\x02x\x021\x00")
    assert decode_request(payload) == (header, body)


def test_api_versions_response_round_trip() -> None:
    body = ApiVersionsResponse(
        error_code=0, api_keys=[ApiVersion(api_key=0, min_version=3, max_version=9)]
    )
    payload = encode_response(ResponseHeader(correlation_id=7), body, 18, 3)
    assert payload[:4] == b"\x00\x00\x00\x07"
    assert payload[4:6] == b"\x00\x00"  # error code right after a v0 header
    header, decoded = decode_response(payload, 18, 3)
    assert header.correlation_id == 7
    assert decoded == body


def test_unknown_api_key_and_version_are_decode_errors() -> None:
    with pytest.raises(DecodeError):
        decode_request(b"\x03\xe7\x00\x00\x00\x00\x00\x01\xff\xff")  # key 999
    header = RequestHeader(request_api_key=3, request_api_version=99, correlation_id=1)
    payload = b"\x00\x03\x00\x63\x00\x00\x00\x01\xff\xff"
    with pytest.raises(DecodeError):
        decode_request(payload)
    with pytest.raises(UnsupportedVersionError):
        encode_request(header, MetadataRequest())


def test_trailing_bytes_are_rejected() -> None:
    header = RequestHeader(request_api_key=3, request_api_version=1, correlation_id=1)
    payload = encode_request(header, MetadataRequest(topics=None))
    assert decode_request(payload)[1].topics is None
    with pytest.raises(DecodeError):
        decode_request(payload + b"\x00")


def test_field_absent_from_version_cannot_be_sent_silently() -> None:
    # ReplicaState (v15+) is not ignorable: encoding it at v4 must fail, not drop it.
    req = FetchRequest()
    req.replica_state.replica_id = 5
    with pytest.raises(UnsupportedVersionError):
        req.encode(4)
    assert FetchRequest.decode(req.encode(15), 15).replica_state.replica_id == 5
