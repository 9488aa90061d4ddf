"""The request router: one whole request frame in, one reply out, never an exception.

It owns the list of APIs this node implements (and so what ApiVersions advertises)
and the rules for requests it cannot serve:

* an ApiVersions version above ours gets UNSUPPORTED_VERSION with our ranges, in the
  v0 layout every client can read, so the client retries with a version we know;
* an unknown API key, an unsupported version of another API, or a malformed frame
  closes the connection, with one log line naming the client, the API and why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from odradek.broker.effects import Outcome, Reply
from odradek.core.errors import RemoteProtocolError
from odradek.protocol.api import (
    REQUESTS,
    RequestHeader,
    ResponseHeader,
    decode_request,
    decode_request_header_as,
    write_response,
)
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from odradek.protocol.messages.api_versions_response import ApiVersion
from odradek.protocol.primitives import Reader, Records, Writer
from odradek.security.principal import ANONYMOUS, KafkaPrincipal
from odradek.security.sasl import SASL_AUTHENTICATE_VERSIONS, SASL_HANDSHAKE_VERSIONS

API_VERSIONS = ApiVersionsRequest.API_KEY


@dataclass(slots=True)
class Request(RequestHeader):
    """A request's header and who sent it (Kafka's ``RequestContext``): the principal its
    connection authenticated as (``User:ANONYMOUS`` on PLAINTEXT) and the client's host,
    which the authorizer decides on."""

    principal: KafkaPrincipal = ANONYMOUS
    host: str = ""
    forwarded: bool = False
    """Run on the active controller for the broker that received it (KIP-590): what only
    that broker can check (its id, its files) it checked already."""
    listener: str = ""
    """The listener it came in on: a client is told the brokers' addresses on that one
    (Kafka's rule); "" for the node's first broker listener."""


Handler = Callable[[Request, Any], Outcome]


@dataclass(frozen=True, slots=True)
class Respond:
    """Send these buffers (a whole response payload, without the size prefix)."""

    correlation_id: int
    chunks: list[Records]


@dataclass(frozen=True, slots=True)
class Dispatch:
    """A decoded request and its handler's first outcome; the shell carries it through."""

    header: Request
    outcome: Outcome
    response_version: int
    peer: str = "?"
    body: Any = None
    """The decoded request (for what the shell must know of it: who sent it)."""


@dataclass(frozen=True, slots=True)
class Close:
    """Close the connection; ``reason`` is the one log line."""

    reason: str


Routed = Respond | Close | Dispatch


class Router:
    """Dispatches requests to handlers registered with their supported version range."""

    def __init__(self) -> None:
        self._handlers: dict[int, tuple[int, int, Handler]] = {}
        self.register(API_VERSIONS, (0, 4), self._api_versions)
        # On a SASL listener the connection's SaslGate answers these before the router
        # sees them; here the listener is not SASL, and Kafka's answer is this error.
        self.register(SaslHandshakeRequest.API_KEY, SASL_HANDSHAKE_VERSIONS, _not_sasl_handshake)
        self.register(
            SaslAuthenticateRequest.API_KEY, SASL_AUTHENTICATE_VERSIONS, _not_sasl_authenticate
        )

    def register(self, api_key: int, versions: tuple[int, int], handler: Handler) -> None:
        lo, hi = versions
        schema_lo, schema_hi = REQUESTS[api_key].VALID_VERSIONS
        if not schema_lo <= lo <= hi <= schema_hi:
            raise ValueError(f"API {api_key}: versions {versions} outside the schema's range")
        self._handlers[api_key] = (lo, hi, handler)

    def supported(self) -> list[ApiVersion]:
        """What ApiVersions advertises: exactly the registered APIs and versions."""
        return [
            ApiVersion(api_key=key, min_version=lo, max_version=hi)
            for key, (lo, hi, _) in sorted(self._handlers.items())
        ]

    def handle(
        self,
        payload: bytes | bytearray | memoryview,
        peer: str = "?",
        principal: KafkaPrincipal = ANONYMOUS,
        *,
        forwarded: bool = False,
        listener: str = "",
    ) -> Routed:
        """Route one request of ``peer`` (``host:port``), whose connection to
        ``listener`` authenticated as ``principal``."""
        try:
            header = decode_request_header_as(Reader(payload), Request)
        except RemoteProtocolError as e:
            return Close(f"client {peer}: malformed request header: {e}")
        header.principal = principal
        header.host = peer.rpartition(":")[0] or peer
        header.forwarded = forwarded
        header.listener = listener
        key, version = header.request_api_key, header.request_api_version
        who = f"client {peer} ({header.client_id!r})"
        entry = self._handlers.get(key)
        if entry is None:
            return Close(f"{who}: unknown or unsupported API key {key} v{version}")
        lo, hi, handler = entry
        if not lo <= version <= hi:
            if key == API_VERSIONS and version > hi:
                return self._unsupported_api_versions(header)
            return Close(f"{who}: API {REQUESTS[key].NAME} v{version} not in {lo}-{hi}")
        try:
            _, body = decode_request(payload, allow_trailing=True)
        except RemoteProtocolError as e:
            return Close(f"{who}: malformed {REQUESTS[key].NAME} v{version}: {e}")
        return Dispatch(header, handler(header, body), version, peer, body)

    @staticmethod
    def encode(header: RequestHeader, response: Any, version: int) -> list[Records]:
        w = Writer()
        write_response(w, ResponseHeader(correlation_id=header.correlation_id), response, version)
        return w.chunks()

    def _api_versions(self, header: RequestHeader, body: ApiVersionsRequest) -> Outcome:
        return Reply(ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=self.supported()))

    def _unsupported_api_versions(self, header: RequestHeader) -> Routed:
        body = ApiVersionsResponse(
            error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=self.supported()
        )
        w = Writer()
        write_response(w, ResponseHeader(correlation_id=header.correlation_id), body, 0)
        return Respond(header.correlation_id, w.chunks())


def _not_sasl_handshake(header: RequestHeader, body: SaslHandshakeRequest) -> Outcome:
    return Reply(SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE))


def _not_sasl_authenticate(header: RequestHeader, body: SaslAuthenticateRequest) -> Outcome:
    return Reply(
        SaslAuthenticateResponse(
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message="this listener does not use SASL",
        )
    )
