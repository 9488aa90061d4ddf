"""The server side of Kafka's SASL exchange on one connection: what may pass, and when.

A connection of a SASL listener (``SASL_PLAINTEXT``, ``SASL_SSL``) starts
unauthenticated. :class:`SaslGate` reads each request frame before the router does and
says what becomes of it (Kafka's ``SaslServerAuthenticator``):

* ApiVersions passes at any time, so a client can learn the versions first;
* SaslHandshake (v0, v1) picks a mechanism the listener enables
  (``sasl.enabled.mechanisms``); an unknown one gets UNSUPPORTED_SASL_MECHANISM with the
  list, and the connection closes;
* then the mechanism's tokens: in SaslAuthenticate requests (v0-v2) after a v1
  handshake, or as bare size-prefixed frames after a v0 handshake (clients before
  Kafka 1.0). A failure is answered SASL_AUTHENTICATION_FAILED with a message, after
  ``connection.failed.authentication.delay.ms`` (KIP-306), and closes the connection;
* any other request before authentication completes closes the connection;
* once authenticated, the principal is ``User:<name>`` and requests pass. With
  ``connections.max.reauth.ms`` above 0 (KIP-368) the session has that lifetime, told to
  the client in SaslAuthenticate v1+; the client re-authenticates in band (a new
  SaslHandshake, same mechanism, same principal), and a request after the session has
  expired closes the connection. A mechanism whose credential expires (an OAUTHBEARER
  token's ``exp``) bounds the session too, as Kafka does: the lifetime is the shorter
  of the two, and with ``connections.max.reauth.ms`` at 0 the token's alone.

Pure: frames and the time in, :data:`GateResult` out; the shell sends, delays and closes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum, auto
from functools import partial
from typing import Final

from odradek.core.errors import ConfigError, RemoteProtocolError
from odradek.protocol.api import (
    REQUESTS,
    RequestHeader,
    ResponseHeader,
    decode_request,
    decode_request_header,
    write_response,
)
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    ApiVersionsRequest,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from odradek.protocol.primitives import Reader, Records, Writer
from odradek.security.mechanism import MechanismError, MechanismServer
from odradek.security.oauthbearer import (
    OAUTHBEARER,
    JwksSettings,
    KeySource,
    OAuthBearerServer,
    build_validator,
)
from odradek.security.plain import PlainServer
from odradek.security.principal import KafkaPrincipal
from odradek.security.sasl_keys import PLAIN, SaslListenerConfig
from odradek.security.scram import MECHANISMS as SCRAM_MECHANISMS
from odradek.security.scram import ScramCredential, ScramMechanism, ScramServer

__all__ = [
    "SASL_AUTHENTICATE_VERSIONS",
    "SASL_HANDSHAKE_VERSIONS",
    "Answer",
    "Drop",
    "GateResult",
    "Pass",
    "Refuse",
    "SaslGate",
    "SaslListener",
    "sasl_listener",
]

SASL_HANDSHAKE_VERSIONS: Final = (0, 1)
SASL_AUTHENTICATE_VERSIONS: Final = (0, 2)

_API_VERSIONS: Final = ApiVersionsRequest.API_KEY
_HANDSHAKE: Final = SaslHandshakeRequest.API_KEY
_AUTHENTICATE: Final = SaslAuthenticateRequest.API_KEY


@dataclass(frozen=True)
class SaslListener:
    """A SASL listener's settings: its mechanisms, each with what starts one exchange."""

    mechanisms: Mapping[str, Callable[[], MechanismServer]]
    """``sasl.enabled.mechanisms``, in order, each with a factory of its server side."""
    max_reauth_ms: int = 0
    """``connections.max.reauth.ms``: a session's lifetime; 0 means no limit."""


@dataclass(frozen=True, slots=True)
class Pass:
    """Route the frame as usual; the connection's principal is ``principal``."""

    principal: KafkaPrincipal | None


@dataclass(frozen=True, slots=True)
class Answer:
    """Send ``chunks`` (a whole response payload, or a bare token, unprefixed)."""

    chunks: list[Records]


@dataclass(frozen=True, slots=True)
class Refuse:
    """Authentication failed: send ``chunks`` (if any), after the failed-authentication
    delay when ``delay``, then close. ``reason`` and ``user`` are for the log line."""

    chunks: list[Records] | None
    reason: str
    user: str | None
    delay: bool = True


@dataclass(frozen=True, slots=True)
class Drop:
    """Close the connection at once; ``reason`` is the log line."""

    reason: str


GateResult = Pass | Answer | Refuse | Drop


class _State(Enum):
    HANDSHAKE = auto()
    AUTHENTICATE = auto()
    AUTHENTICATED = auto()
    CLOSED = auto()


class SaslGate:
    """One connection's SASL state (created when the connection is accepted)."""

    def __init__(self, listener: SaslListener) -> None:
        self._listener = listener
        self._state = _State.HANDSHAKE
        self._mechanism: str | None = None
        self._server: MechanismServer | None = None
        self._raw_tokens = False
        self._handshake_version = 0
        self.principal: KafkaPrincipal | None = None
        self._expires_ms: int | None = None
        self._lifetime_ms = 0
        """The session lifetime told to the client (0: none)."""

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    def receive(self, payload: bytes | bytearray | memoryview, now_ms: int) -> GateResult:
        """What becomes of one request frame (without its size prefix)."""
        if self._state is _State.CLOSED:
            return Drop("the connection is closing")
        if self._raw_tokens:
            return self._raw_token(bytes(payload), now_ms)
        if self._state is _State.AUTHENTICATED and len(payload) >= 2:
            # The common case, without decoding the header: a request of a live session.
            key = int.from_bytes(payload[:2], "big", signed=True)
            live = self._expires_ms is None or now_ms < self._expires_ms
            if live and key not in (_HANDSHAKE, _AUTHENTICATE):
                return Pass(self.principal)
        try:
            header = decode_request_header(Reader(payload))
        except RemoteProtocolError as e:
            return self._drop(f"malformed request header: {e}")
        key = header.request_api_key
        if key == _HANDSHAKE:
            return self._handshake(payload, header)
        if key == _AUTHENTICATE:
            return self._authenticate(payload, header, now_ms)
        if self._expires_ms is not None and now_ms >= self._expires_ms:
            return self._drop(
                "the SASL session expired (connections.max.reauth.ms, or the end of the "
                "client's token) and the client did not re-authenticate"
            )
        if key == _API_VERSIONS or self.principal is not None:
            # Once authenticated, requests pass while the client re-authenticates too.
            return Pass(self.principal)
        return self._drop(f"request of API key {key} before SASL authentication completed")

    def _decoded(
        self,
        payload: bytes | bytearray | memoryview,
        header: RequestHeader,
        versions: tuple[int, int],
    ) -> object:
        """The request body, or the Drop that ends a connection sending a version out of
        ``versions`` or bytes that do not decode."""
        name = REQUESTS[header.request_api_key].NAME.removesuffix("Request")
        version = header.request_api_version
        lo, hi = versions
        if not lo <= version <= hi:
            return self._drop(f"{name} v{version} not in {lo}-{hi}")
        try:
            _, body = decode_request(payload, allow_trailing=True)
        except RemoteProtocolError as e:
            return self._drop(f"malformed {name}: {e}")
        return body

    # -------------------------------------------------------------------- handshake

    def _handshake(
        self, payload: bytes | bytearray | memoryview, header: RequestHeader
    ) -> GateResult:
        body = self._decoded(payload, header, SASL_HANDSHAKE_VERSIONS)
        if isinstance(body, Drop):
            return body
        assert isinstance(body, SaslHandshakeRequest)
        version = header.request_api_version
        enabled = list(self._listener.mechanisms)
        if self._state is _State.AUTHENTICATE:
            return self._refuse_now(
                header,
                SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=enabled),
                "a second SaslHandshake during the exchange",
            )
        factory = self._listener.mechanisms.get(body.mechanism)
        if factory is None:
            return self._refuse_now(
                header,
                SaslHandshakeResponse(
                    error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled
                ),
                f"SASL mechanism {body.mechanism!r} is not enabled (enabled: {', '.join(enabled)})",
            )
        if self.principal is not None:
            # Re-authentication (KIP-368): only in band, with the same mechanism.
            if version == 0:
                return self._drop("re-authentication needs SaslHandshake v1 or later")
            if body.mechanism != self._mechanism:
                return self._refuse_now(
                    header,
                    SaslHandshakeResponse(
                        error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=enabled
                    ),
                    f"SaslHandshake mechanism cannot change during re-authentication "
                    f"(from {self._mechanism} to {body.mechanism})",
                )
        self._mechanism = body.mechanism
        self._server = factory()
        self._state = _State.AUTHENTICATE
        self._raw_tokens = version == 0
        self._handshake_version = version
        return Answer(
            _encode(header, SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=enabled))
        )

    # --------------------------------------------------------------- authentication

    def _authenticate(
        self, payload: bytes | bytearray | memoryview, header: RequestHeader, now_ms: int
    ) -> GateResult:
        body = self._decoded(payload, header, SASL_AUTHENTICATE_VERSIONS)
        if isinstance(body, Drop):
            return body
        assert isinstance(body, SaslAuthenticateRequest)
        if self._state is not _State.AUTHENTICATE or self._server is None:
            message = "SaslAuthenticate without a SaslHandshake before it"
            return self._refuse_now(
                header,
                SaslAuthenticateResponse(
                    error_code=ErrorCode.ILLEGAL_SASL_STATE, error_message=message
                ),
                message,
            )
        server = self._server
        try:
            challenge = server.evaluate(body.auth_bytes)
        except MechanismError as e:
            message = self._failure_message(e)
            return self._fail(
                _encode(
                    header,
                    SaslAuthenticateResponse(
                        error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=message
                    ),
                ),
                message,
                server.claimed,
            )
        if not server.complete:
            return Answer(_encode(header, SaslAuthenticateResponse(auth_bytes=challenge)))
        refusal = self._complete(server, now_ms)
        if refusal is not None:
            return self._fail(
                _encode(
                    header,
                    SaslAuthenticateResponse(
                        error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=refusal
                    ),
                ),
                refusal,
                server.claimed,
            )
        return Answer(
            _encode(
                header,
                SaslAuthenticateResponse(
                    auth_bytes=challenge, session_lifetime_ms=self._lifetime_ms
                ),
            )
        )

    def _raw_token(self, token: bytes, now_ms: int) -> GateResult:
        server = self._server
        assert server is not None and self._state is _State.AUTHENTICATE
        try:
            challenge = server.evaluate(token)
        except MechanismError as e:
            # A v0 exchange has no way to carry an error: the connection closes.
            return self._fail(None, self._failure_message(e), server.claimed)
        if server.complete:
            refusal = self._complete(server, now_ms)
            if refusal is not None:
                return self._fail(None, refusal, server.claimed)
            self._raw_tokens = False
        return Answer([challenge])

    def _complete(self, server: MechanismServer, now_ms: int) -> str | None:
        """Make the connection authenticated; a refusal's message instead, if any."""
        assert server.username is not None
        principal = KafkaPrincipal("User", server.username)
        if self.principal is not None and principal != self.principal:
            return (
                f"Cannot change principals during re-authentication from {self.principal}: "
                f"{principal}"
            )
        self.principal = principal
        self._state = _State.AUTHENTICATED
        self._server = None
        lifetime = self._listener.max_reauth_ms
        credential: int | None = getattr(server, "credential_lifetime_ms", None)
        if credential is not None:
            # KIP-368: the credential's end bounds the session (at least 1 ms, since a
            # lifetime of 0 would tell the client there is no end).
            lifetime = min(lifetime, credential) if lifetime > 0 else credential
            lifetime = max(lifetime, 1)
        self._lifetime_ms = lifetime if lifetime > 0 else 0
        self._expires_ms = now_ms + lifetime if lifetime > 0 else None
        return None

    def _failure_message(self, error: MechanismError) -> str:
        if self._mechanism is not None and self._mechanism.startswith("SCRAM-"):
            return (
                f"Authentication failed during authentication due to {error} with SASL "
                f"mechanism {self._mechanism}"
            )
        return str(error)

    # ------------------------------------------------------------------- endings

    def _fail(self, chunks: list[Records] | None, reason: str, user: str | None) -> GateResult:
        self._state = _State.CLOSED
        return Refuse(chunks, reason, user, delay=True)

    def _refuse_now(self, header: RequestHeader, response: object, reason: str) -> GateResult:
        self._state = _State.CLOSED
        return Refuse(_encode(header, response), reason, None, delay=False)

    def _drop(self, reason: str) -> GateResult:
        self._state = _State.CLOSED
        return Drop(reason)


def _encode(header: RequestHeader, body: object) -> list[Records]:
    w = Writer()
    write_response(
        w,
        ResponseHeader(correlation_id=header.correlation_id),
        body,  # type: ignore[arg-type]
        header.request_api_version,
    )
    return w.chunks()


ScramLookup = Callable[[ScramMechanism, str], ScramCredential | None]


def sasl_listener(
    config: SaslListenerConfig,
    scram_credentials: ScramLookup,
    *,
    key_source: Callable[[JwksSettings], KeySource] | None = None,
    clock: Callable[[], float] | None = None,
) -> SaslListener:
    """The listener's mechanisms, each with its server side: PLAIN against the users of
    its JAAS config, SCRAM against ``scram_credentials`` (the metadata image's, read at
    each login, so a credential changed in the metadata log counts at once), OAUTHBEARER
    with the listener's validator: ``key_source`` gives a JWKS's keys (the shell reads
    them now; ConfigError names the key of a problem) and ``clock`` the wall clock in
    seconds, both needed only for OAUTHBEARER."""
    users = config.plain_users
    factories: dict[str, Callable[[], MechanismServer]] = {}
    for name in config.mechanisms:
        if name == PLAIN:
            factories[name] = lambda: PlainServer(users)
        elif name == OAUTHBEARER:
            assert config.oauthbearer is not None
            if clock is None or (
                key_source is None and isinstance(config.oauthbearer, JwksSettings)
            ):
                raise ConfigError("OAUTHBEARER needs the shell's clock and JWKS reader")
            validator = build_validator(config.oauthbearer, key_source or _no_jwks)
            factories[name] = partial(OAuthBearerServer, validator, clock)
        else:
            mechanism = SCRAM_MECHANISMS[name]
            factories[name] = partial(_scram_server, mechanism, scram_credentials)
    return SaslListener(factories, config.max_reauth_ms)


def _no_jwks(settings: JwksSettings) -> KeySource:
    raise ConfigError("no JWKS reader given")


def _scram_server(mechanism: ScramMechanism, lookup: ScramLookup) -> MechanismServer:
    return ScramServer(mechanism, lambda user: lookup(mechanism, user))
