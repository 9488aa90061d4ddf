"""Requests and responses as whole frames: header plus body, for any API and version.

This is the codec's front door. ``decode_request`` reads the request header (whose
version follows from the API key and version it carries) and then the body;
``encode_response`` picks the response header version the same way. Frame size
prefixes are :mod:`odradek.protocol.framing`'s business; payloads here exclude them.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar, cast

from odradek.core.errors import DecodeError, UnsupportedVersionError
from odradek.protocol.messages import REQUESTS, RESPONSES
from odradek.protocol.messages.request_header import RequestHeader
from odradek.protocol.messages.response_header import ResponseHeader
from odradek.protocol.primitives import Reader, Writer

__all__ = [
    "REQUESTS",
    "RESPONSES",
    "Body",
    "RequestHeader",
    "ResponseHeader",
    "decode_request",
    "decode_request_header",
    "decode_request_header_as",
    "decode_response",
    "encode_request",
    "encode_response",
    "request_header_version",
    "response_header_version",
]

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7


class Body(Protocol):
    """What every generated top-level message class provides."""

    @property
    def API_KEY(self) -> int: ...

    def write(self, w: Writer, version: int) -> None: ...


def _flexible(cls: Any, version: int) -> bool:
    fv: int | None = cls.FLEXIBLE_VERSION
    return fv is not None and version >= fv


def request_header_version(api_key: int, api_version: int) -> int:
    """Header v2 for flexible request versions, else v1 (v0 for ControlledShutdown v0)."""
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    cls = REQUESTS.get(api_key)
    if cls is None:
        raise UnsupportedVersionError(f"unknown API key {api_key}")
    return 2 if _flexible(cls, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """Header v1 for flexible response versions, else v0.

    ApiVersions responses always use v0: a client that sent a version we do not know
    must still be able to read our answer (KIP-511).
    """
    if api_key == API_VERSIONS_KEY:
        return 0
    cls = RESPONSES.get(api_key)
    if cls is None:
        raise UnsupportedVersionError(f"unknown API key {api_key}")
    return 1 if _flexible(cls, api_version) else 0


H = TypeVar("H", bound=RequestHeader)


def decode_request_header(reader: Reader) -> RequestHeader:
    """Read a request header, leaving ``reader`` at the start of the body.

    The first four bytes (api key, api version) decide the header's own version, so
    an unknown API key or version is reported with the header already decoded far
    enough to answer it.
    """
    return decode_request_header_as(reader, RequestHeader)


def decode_request_header_as(reader: Reader, header_class: type[H]) -> H:
    """:func:`decode_request_header` into a subclass (the router's ``Request``, which
    adds who sent it): no copy of the header on every request."""
    if reader.remaining() < 8:
        raise DecodeError("request shorter than its header")
    start = reader.pos
    api_key = reader.int16()
    api_version = reader.int16()
    reader.pos = start
    # An unknown key is read as v1, so that the caller can still log the client id.
    version = 1 if api_key not in REQUESTS else request_header_version(api_key, api_version)
    return cast(H, header_class.read(reader, version))


def decode_request(
    payload: bytes | bytearray | memoryview, *, allow_trailing: bool = False
) -> tuple[RequestHeader, Any]:
    """Decode a whole request (without its size prefix) into header and body.

    ``allow_trailing`` accepts bytes after the body, as Kafka's brokers do: librdkafka
    2.x sends Metadata v11+ with a field that only v8-v10 define, and Kafka never
    notices. The strict default is for the codec's own tests.
    """
    r = Reader(payload)
    header = decode_request_header(r)
    cls = REQUESTS.get(header.request_api_key)
    if cls is None:
        raise DecodeError(f"unknown API key {header.request_api_key}")
    lo, hi = cls.VALID_VERSIONS
    if not lo <= header.request_api_version <= hi:
        raise DecodeError(f"{cls.NAME} has no version {header.request_api_version}")
    body = cls.read(r, header.request_api_version)
    if r.pos != r.end and not allow_trailing:
        raise DecodeError(f"{cls.NAME} v{header.request_api_version}: {r.end - r.pos} bytes left")
    return header, body


def encode_request(header: RequestHeader, body: Body) -> bytes:
    w = Writer()
    header.write(w, request_header_version(header.request_api_key, header.request_api_version))
    body.write(w, header.request_api_version)
    return w.getvalue()


def decode_response(
    payload: bytes | bytearray | memoryview, api_key: int, api_version: int
) -> tuple[ResponseHeader, Any]:
    cls = RESPONSES.get(api_key)
    if cls is None:
        raise DecodeError(f"unknown API key {api_key}")
    r = Reader(payload)
    header = ResponseHeader.read(r, response_header_version(api_key, api_version))
    body = cls.read(r, api_version)
    if r.pos != r.end:
        raise DecodeError(f"{cls.NAME} v{api_version}: {r.end - r.pos} bytes left")
    return header, body


def write_response(w: Writer, header: ResponseHeader, body: Body, api_version: int) -> None:
    header.write(w, response_header_version(body.API_KEY, api_version))
    body.write(w, api_version)


def encode_response(header: ResponseHeader, body: Body, api_key: int, api_version: int) -> bytes:
    if api_key != body.API_KEY:
        raise UnsupportedVersionError(f"body is for API {body.API_KEY}, not {api_key}")
    w = Writer()
    write_response(w, header, body, api_version)
    return w.getvalue()
