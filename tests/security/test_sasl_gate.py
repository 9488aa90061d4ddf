"""The SASL exchange on one connection: what passes, what is answered, what closes it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from odradek.protocol.api import Body, decode_response, encode_request
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    ApiVersionsRequest,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from odradek.protocol.messages.request_header import RequestHeader
from odradek.security.plain import plain_token
from odradek.security.principal import KafkaPrincipal
from odradek.security.sasl import Answer, Drop, Pass, Refuse, SaslGate, sasl_listener
from odradek.security.sasl_keys import sasl_listener_config
from odradek.security.scram import SCRAM_SHA_512, ScramClient, credential_from_password

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_alice="alice-secret" user_bob="bob-secret";'
)
SCRAM = {("bob", 2): credential_from_password(SCRAM_SHA_512, "bob-scram")}


def _gate(max_reauth_ms: int = 0) -> SaslGate:
    config = sasl_listener_config(
        {
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.sasl.plain.sasl.jaas.config": JAAS,
            "connections.max.reauth.ms": str(max_reauth_ms),
        },
        "SASL",
    )
    return SaslGate(sasl_listener(config, lambda m, user: SCRAM.get((user, m.kafka_type))))


def _frame(body: Body, version: int, correlation: int = 7) -> bytes:
    api_key: int = getattr(type(body), "API_KEY")  # noqa: B009
    return encode_request(RequestHeader(api_key, version, correlation, "test"), body)


def _answer(result: object, api_key: int, version: int) -> object:
    assert isinstance(result, Answer | Refuse), result
    assert result.chunks is not None
    _, body = decode_response(b"".join(bytes(c) for c in result.chunks), api_key, version)  # type: ignore[arg-type]
    return body


def _handshake(gate: SaslGate, mechanism: str, version: int = 1, now: int = 0) -> object:
    result = gate.receive(_frame(SaslHandshakeRequest(mechanism=mechanism), version), now)
    return _answer(result, SaslHandshakeRequest.API_KEY, version)


def _authenticate(
    gate: SaslGate, token: bytes, version: int = 2, now: int = 0
) -> tuple[object, object]:
    result = gate.receive(_frame(SaslAuthenticateRequest(auth_bytes=token), version), now)
    return result, _answer(result, SaslAuthenticateRequest.API_KEY, version)


def test_api_versions_passes_before_login_and_nothing_else_does() -> None:
    gate = _gate()
    assert isinstance(gate.receive(_frame(ApiVersionsRequest(), 3), 0), Pass)
    assert isinstance(gate.receive(_frame(MetadataRequest(), 12), 0), Drop)
    assert isinstance(gate.receive(_frame(ApiVersionsRequest(), 3), 0), Drop)  # closed


def test_plain_login_then_requests_pass_as_the_user() -> None:
    gate = _gate()
    handshake = _handshake(gate, "PLAIN")
    assert isinstance(handshake, SaslHandshakeResponse)
    assert handshake.error_code == 0 and handshake.mechanisms == ["PLAIN", "SCRAM-SHA-512"]
    result, response = _authenticate(gate, plain_token("alice", "alice-secret"))
    assert isinstance(result, Answer) and isinstance(response, SaslAuthenticateResponse)
    assert response.error_code == 0 and response.session_lifetime_ms == 0
    passed = gate.receive(_frame(MetadataRequest(), 12), 0)
    assert passed == Pass(KafkaPrincipal("User", "alice"))


def test_scram_login_takes_two_rounds_and_proves_the_server() -> None:
    gate = _gate()
    _handshake(gate, "SCRAM-SHA-512")
    client = ScramClient(SCRAM_SHA_512, "bob", "bob-scram")
    _, first = _authenticate(gate, client.first())
    assert isinstance(first, SaslAuthenticateResponse) and first.error_code == 0
    assert not gate.authenticated
    _, final = _authenticate(gate, client.final(first.auth_bytes))
    assert isinstance(final, SaslAuthenticateResponse)
    client.verify(final.auth_bytes)
    assert gate.principal == KafkaPrincipal("User", "bob")


def test_a_wrong_password_is_answered_after_the_delay_and_closes() -> None:
    gate = _gate()
    _handshake(gate, "PLAIN")
    result, response = _authenticate(gate, plain_token("alice", "nope"))
    assert isinstance(result, Refuse) and result.delay and result.user == "alice"
    assert isinstance(response, SaslAuthenticateResponse)
    assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert response.error_message == "Authentication failed: Invalid username or password"
    assert "nope" not in result.reason
    assert isinstance(gate.receive(_frame(MetadataRequest(), 12), 0), Drop)


def test_an_unknown_scram_user_fails_with_kafkas_message() -> None:
    gate = _gate()
    _handshake(gate, "SCRAM-SHA-512")
    client = ScramClient(SCRAM_SHA_512, "eve", "x")
    _, first = _authenticate(gate, client.first())
    assert isinstance(first, SaslAuthenticateResponse) and first.error_code == 0
    result, final = _authenticate(gate, client.final(first.auth_bytes))
    assert isinstance(result, Refuse) and isinstance(final, SaslAuthenticateResponse)
    assert final.error_message == (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-512"
    )


def test_a_mechanism_not_enabled_is_refused_with_the_list() -> None:
    gate = _gate()
    result = gate.receive(_frame(SaslHandshakeRequest(mechanism="GSSAPI"), 1), 0)
    assert isinstance(result, Refuse) and not result.delay
    response = _answer(result, SaslHandshakeRequest.API_KEY, 1)
    assert isinstance(response, SaslHandshakeResponse)
    assert response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert response.mechanisms == ["PLAIN", "SCRAM-SHA-512"]


def test_authenticate_before_a_handshake_is_an_illegal_state() -> None:
    result, response = _authenticate(_gate(), plain_token("alice", "alice-secret"))
    assert isinstance(result, Refuse)
    assert isinstance(response, SaslAuthenticateResponse)
    assert response.error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_a_v0_handshake_takes_bare_tokens() -> None:
    gate = _gate()
    _handshake(gate, "PLAIN", version=0)
    assert gate.receive(plain_token("alice", "alice-secret"), 0) == Answer([b""])
    assert gate.receive(_frame(MetadataRequest(), 12), 0) == Pass(KafkaPrincipal("User", "alice"))


def test_a_v0_exchange_that_fails_closes_without_an_answer() -> None:
    gate = _gate()
    _handshake(gate, "PLAIN", version=0)
    result = gate.receive(plain_token("alice", "wrong"), 0)
    assert isinstance(result, Refuse) and result.chunks is None


def test_a_session_with_a_lifetime_ends_unless_renewed_in_band() -> None:
    gate = _gate(max_reauth_ms=1000)
    _handshake(gate, "PLAIN", now=0)
    _, response = _authenticate(gate, plain_token("alice", "alice-secret"), now=0)
    assert isinstance(response, SaslAuthenticateResponse) and response.session_lifetime_ms == 1000
    assert isinstance(gate.receive(_frame(MetadataRequest(), 12), 999), Pass)
    # Re-authenticated in band at 900 ms: the session runs to 1900 ms.
    _handshake(gate, "PLAIN", now=900)
    assert isinstance(gate.receive(_frame(MetadataRequest(), 12), 950), Pass)  # in flight
    _authenticate(gate, plain_token("alice", "alice-secret"), now=900)
    assert isinstance(gate.receive(_frame(MetadataRequest(), 12), 1899), Pass)
    assert isinstance(gate.receive(_frame(MetadataRequest(), 12), 1900), Drop)


def test_re_authentication_may_not_change_the_principal_or_mechanism() -> None:
    gate = _gate(max_reauth_ms=1000)
    _handshake(gate, "PLAIN")
    _authenticate(gate, plain_token("alice", "alice-secret"))
    _handshake(gate, "PLAIN")
    result, response = _authenticate(gate, plain_token("bob", "bob-secret"))
    assert isinstance(result, Refuse) and isinstance(response, SaslAuthenticateResponse)
    assert "Cannot change principals" in (response.error_message or "")
    other = _gate(max_reauth_ms=1000)
    _handshake(other, "PLAIN")
    _authenticate(other, plain_token("alice", "alice-secret"))
    changed = _handshake(other, "SCRAM-SHA-512")
    assert isinstance(changed, SaslHandshakeResponse)
    assert changed.error_code == ErrorCode.ILLEGAL_SASL_STATE


@given(
    st.lists(st.binary(max_size=64), min_size=1, max_size=6),
    st.sampled_from(["PLAIN", "SCRAM-SHA-512"]),
)
def test_garbage_in_the_exchange_never_authenticates_or_raises(
    tokens: list[bytes], mechanism: str
) -> None:
    gate = _gate()
    _handshake(gate, mechanism)
    for token in tokens:
        result = gate.receive(_frame(SaslAuthenticateRequest(auth_bytes=token), 2), 0)
        if not isinstance(result, Answer):
            assert isinstance(result, Refuse | Drop)
            break
    assert not gate.authenticated


@given(st.binary(max_size=200))
def test_garbage_frames_before_login_are_dropped_never_passed(frame: bytes) -> None:
    gate = _gate()
    result = gate.receive(frame, 0)
    if isinstance(result, Pass):
        # Only an ApiVersions header may pass before login.
        assert frame[:2] == b"\x00\x12"
    assert not gate.authenticated
