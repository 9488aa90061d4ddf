"""Random and mutated frames: the codec raises its own error or nothing, never anything else."""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.core.errors import RemoteProtocolError
from odradek.protocol.api import (
    REQUESTS,
    RESPONSES,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
)
from odradek.protocol.framing import FrameDecoder
from tests.protocol.strategies import message_value

API_KEYS = sorted(REQUESTS)


@st.composite
def valid_request(draw: st.DrawFn) -> bytes:
    api_key = draw(st.sampled_from(API_KEYS))
    cls: Any = REQUESTS[api_key]
    lo, hi = cls.VALID_VERSIONS
    version = draw(st.integers(lo, hi))
    body = draw(message_value(cls, version))
    header = RequestHeader(
        request_api_key=api_key,
        request_api_version=version,
        correlation_id=draw(st.integers(0, 2**31 - 1)),
        client_id=draw(st.none() | st.text(max_size=8)),
    )
    return encode_request(header, body)


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "truncate", "insert", "set"]))
        if op == "truncate" and buf:
            del buf[draw(st.integers(0, len(buf) - 1)) :]
        elif op == "insert":
            pos = draw(st.integers(0, len(buf)))
            buf[pos:pos] = draw(st.binary(min_size=1, max_size=4))
        elif op == "flip" and buf:
            pos = draw(st.integers(0, len(buf) - 1))
            buf[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and buf:
            pos = draw(st.integers(0, len(buf) - 1))
            buf[pos] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
    return bytes(buf)


def decode_or_codec_error(payload: bytes) -> None:
    with contextlib.suppress(RemoteProtocolError):
        decode_request(payload)


FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))


@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes_as_request(payload: bytes) -> None:
    decode_or_codec_error(payload)


@FUZZ
@given(valid_request().flatmap(mutated))
def test_mutated_valid_requests(payload: bytes) -> None:
    decode_or_codec_error(payload)


@FUZZ
@given(
    st.sampled_from(sorted(RESPONSES)).flatmap(
        lambda key: st.tuples(
            st.just(key),
            st.integers(RESPONSES[key].VALID_VERSIONS[0], RESPONSES[key].VALID_VERSIONS[1]),
            st.binary(max_size=120),
        )
    )
)
def test_random_bytes_as_response(case: tuple[int, int, bytes]) -> None:
    api_key, version, payload = case
    with contextlib.suppress(RemoteProtocolError):
        decode_response(payload, api_key, version)


@FUZZ
@given(st.lists(st.binary(max_size=40), max_size=6))
def test_random_streams_into_the_frame_decoder(chunks: list[bytes]) -> None:
    decoder = FrameDecoder(max_frame_bytes=64)
    try:
        for chunk in chunks:
            for frame in decoder.feed(chunk):
                assert len(frame) <= 64
    except RemoteProtocolError:
        pass
