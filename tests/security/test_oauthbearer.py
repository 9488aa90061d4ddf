"""SASL/OAUTHBEARER: the client's message, the unsecured and the JWKS validators, the
two-step failure, the session lifetime a token bounds, and the keys at start."""

from __future__ import annotations

import base64
import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from odradek.core.errors import ConfigError
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
)
from odradek.security.mechanism import MechanismError
from odradek.security.oauthbearer import (
    JWKS_VALIDATOR,
    JwksSettings,
    JwksValidator,
    KeySet,
    OAuthBearerError,
    OAuthBearerServer,
    TokenError,
    UnsecuredSettings,
    UnsecuredValidator,
    initial_response,
    parse_initial_response,
    unsecured_token,
)
from odradek.security.principal import KafkaPrincipal
from odradek.security.sasl import Answer, Drop, Pass, Refuse, SaslGate, sasl_listener
from odradek.security.sasl_client import mechanism_client
from odradek.security.sasl_keys import (
    client_credentials,
    is_sasl_key,
    sasl_client_credentials,
    sasl_listener_config,
)
from odradek.shell.jwks import JwksSource, jwks_source
from tests.security.test_sasl_gate import _answer, _authenticate, _frame, _handshake

NOW = 1_800_000_000.0
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def _b64(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def _unsecured(claims: dict[str, Any], header: dict[str, Any] | None = None) -> str:
    return f"{_b64(header or {'alg': 'none'})}.{_b64(claims)}."


def _claims(**extra: Any) -> dict[str, Any]:
    return {"sub": "alice", "iat": NOW - 10, "exp": NOW + 600, **extra}


# ----------------------------------------------------------------- the message


def test_parse_initial_response_with_authzid_and_extensions() -> None:
    message = b"n,a=al=2Cice=3D,\x01auth=Bearer abc.def.\x01traceId=x y=z\x01other=1\x01\x01"
    parsed = parse_initial_response(message)
    assert parsed.token == "abc.def."
    assert parsed.authzid == "al,ice="
    assert parsed.extensions == {"traceId": "x y=z", "other": "1"}
    assert parse_initial_response(initial_response("t.u.", {"a": "b"})).extensions == {"a": "b"}
    assert parse_initial_response(b"n,,\x01auth=bearer  tok\x01\x01").token == "tok"


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (b"", "Invalid OAUTHBEARER client first message"),
        (b"y,,\x01auth=Bearer t\x01\x01", "Invalid OAUTHBEARER client first message"),
        (b"n,,\x01auth=Bearer t\x01", "Invalid OAUTHBEARER client first message"),
        (b"n,,auth=Bearer t\x01\x01", "Invalid OAUTHBEARER client first message"),
        (b"n,,\x01auth=Bearer t\x01ext1=v\x01\x01", "Invalid OAUTHBEARER client first message"),
        (b"n,,\x01auth=Bearer t\x01ext=\x7f\x01\x01", "Invalid OAUTHBEARER client first message"),
        (b"n,,\x01auth=Bearer t\x01e=\x01\x01", "Invalid OAUTHBEARER client first message"),
        (b"n,,\xff\x01auth=Bearer t\x01\x01", "Invalid OAUTHBEARER client first message"),
        (b"n,,\x01e=v\x01\x01", "'auth' not specified"),
        (b"n,,\x01auth=Bearer t\x01auth=Bearer u\x01\x01", "appears twice"),
        (b"n,,\x01auth=Bearer\x01\x01", "invalid 'auth' format"),
        (b"n,,\x01auth=Bearer a b\x01\x01", "invalid 'auth' format"),
        (b"n,,\x01auth=Bearer t=\x01\x01", "invalid 'auth' format"),
        (b"n,,\x01auth=Basic dXNlcg\x01\x01", "Invalid scheme"),
    ],
)
def test_malformed_initial_responses_are_refused(message: bytes, error: str) -> None:
    with pytest.raises(OAuthBearerError, match=error):
        parse_initial_response(message)


def test_initial_response_refuses_bad_extensions() -> None:
    for name, value in [("auth", "x"), ("a1", "x"), ("ok", "\x00")]:
        with pytest.raises(ValueError, match="invalid SASL extension"):
            initial_response("t", {name: value})


# ----------------------------------------------------------------- unsecured


def test_unsecured_token_is_valid() -> None:
    validator = UnsecuredValidator(UnsecuredSettings())
    valid = validator.validate(_unsecured(_claims(scope="a b")), NOW)
    assert (valid.principal, valid.expires_at_s, valid.scope) == ("alice", NOW + 600, ("a", "b"))
    made = unsecured_token("bob", 60, NOW)
    assert validator.validate(made, NOW).principal == "bob"
    assert validator.claimed(made) == "bob"
    # iat is optional, scope may be a list
    assert validator.validate(_unsecured({"sub": "c", "exp": NOW + 1, "scope": ["x"]}), NOW).scope


@pytest.mark.parametrize(
    ("token", "error"),
    [
        ("abc", "3 dot-separated"),
        (_unsecured(_claims()) + "sig", "3 dot-separated"),
        (_unsecured(_claims(), {"alg": "RS256"}), "'none' as an algorithm"),
        (_unsecured(_claims(), {"typ": "JWT"}), "'none' as an algorithm"),
        ("e30." + base64.urlsafe_b64encode(b"[1]").decode().rstrip("=") + ".", "algorithm"),
        (_b64({"alg": "none"}) + ".!!.", "Base64URL"),
        (_b64({"alg": "none"}) + "." + base64.urlsafe_b64encode(b"[1]").decode() + ".", "object"),
        (_unsecured({"iat": NOW, "exp": NOW + 9}), "No principal name in JWT claim: sub"),
        (_unsecured(_claims(sub=" ")), "No principal name"),
        (_unsecured(_claims(sub=7)), "No principal name"),
        (_unsecured({"sub": "a", "iat": NOW}), "'exp' claim"),
        (_unsecured(_claims(exp="soon")), "'exp' claim is not a number"),
        (_unsecured(_claims(exp=True)), "'exp' claim is not a number"),
        (_unsecured(_claims(exp=NOW)), "on or after the Expiration Time"),
        (_unsecured(_claims(exp=NOW - 5)), "on or after the Expiration Time"),
        (_unsecured(_claims(iat=NOW + 5)), "Issued At value"),
        (_unsecured({"sub": "a", "iat": NOW - 5, "exp": NOW - 6}), "Expiration Time"),
        (_unsecured(_claims(scope=3)), "neither a string nor a list"),
    ],
)
def test_unsecured_refusals(token: str, error: str) -> None:
    with pytest.raises(TokenError, match=error) as refused:
        UnsecuredValidator(UnsecuredSettings()).validate(token, NOW)
    assert refused.value.challenge() == b'{"status":"invalid_token"}'


def test_unsecured_options_principal_scope_and_clock_skew() -> None:
    settings = UnsecuredSettings("user", "roles", ("read", "write"), clock_skew_ms=2000)
    validator = UnsecuredValidator(settings)
    token = _unsecured({"user": "carol", "roles": "read write admin", "exp": NOW - 1})
    assert validator.validate(token, NOW).principal == "carol"  # within the skew
    assert validator.validate(_unsecured(_claims(user="d", roles="write read", iat=NOW + 1)), NOW)
    with pytest.raises(TokenError, match="missing a required scope") as refused:
        validator.validate(_unsecured(_claims(user="carol", roles="read")), NOW)
    assert json.loads(refused.value.challenge()) == {
        "status": "insufficient_scope",
        "scope": "read write",
    }


# ----------------------------------------------------------------- JWKS


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _jwks(rsa_key: rsa.RSAPrivateKey, ec_key: ec.EllipticCurvePrivateKey) -> dict[str, Any]:
    r = json.loads(RSAAlgorithm.to_jwk(rsa_key.public_key()))
    e = json.loads(ECAlgorithm.to_jwk(ec_key.public_key()))
    return {"keys": [{**r, "kid": "r1", "use": "sig"}, {**e, "kid": "e1", "alg": "ES256"}]}


def _signed(key: Any, alg: str = "RS256", kid: str | None = "r1", **claims: Any) -> str:
    body = {"sub": "alice", "iat": int(NOW) - 10, "exp": int(NOW) + 600, **claims}
    return jwt.encode(
        {k: v for k, v in body.items() if v is not None},
        key,
        algorithm=alg,
        headers={"kid": kid} if kid else None,
    )


@pytest.fixture
def jwks_validator(rsa_key: rsa.RSAPrivateKey, ec_key: ec.EllipticCurvePrivateKey) -> JwksValidator:
    keys = KeySet.parse(json.dumps(_jwks(rsa_key, ec_key)))
    settings = JwksSettings(
        url="file:/x", expected_audience=("kafka", "other"), expected_issuer="https://idp"
    )
    return JwksValidator(settings, lambda: keys)


def test_jwks_rs256_and_es256_tokens_are_valid(
    jwks_validator: JwksValidator, rsa_key: rsa.RSAPrivateKey, ec_key: ec.EllipticCurvePrivateKey
) -> None:
    good: dict[str, Any] = {"aud": ["kafka"], "iss": "https://idp"}
    token = _signed(rsa_key, **good, scope="s1")
    valid = jwks_validator.validate(token, NOW)
    assert (valid.principal, valid.expires_at_s, valid.scope) == ("alice", int(NOW) + 600, ("s1",))
    assert jwks_validator.validate(_signed(rsa_key, "PS256", **good), NOW).principal == "alice"
    assert jwks_validator.validate(_signed(ec_key, "ES256", "e1", **good), NOW)
    assert jwks_validator.claimed(token) == "alice"
    # 30 s of clock skew by default
    assert jwks_validator.validate(_signed(rsa_key, **good, exp=int(NOW) - 20), NOW)


def test_jwks_refusals(
    jwks_validator: JwksValidator, rsa_key: rsa.RSAPrivateKey, ec_key: ec.EllipticCurvePrivateKey
) -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    good: dict[str, Any] = {"aud": "kafka", "iss": "https://idp"}
    now = int(NOW)
    cases = [
        (_signed(rsa_key, **{**good, "exp": now - 31}), "expired"),
        (_signed(rsa_key, **{**good, "iat": now + 60}), "issued in the future"),
        (_signed(rsa_key, **{**good, "nbf": now + 60}), "not valid before"),
        (_signed(rsa_key, **{**good, "exp": None}), '"exp"'),
        (_signed(rsa_key, **{**good, "iat": None}), '"iat"'),
        (_signed(rsa_key, **{**good, "aud": "elsewhere"}), "(?i)audience"),
        (_signed(rsa_key, iss="https://idp"), "aud"),
        (_signed(rsa_key, **{**good, "iss": "https://evil"}), "(?i)issuer"),
        (_signed(rsa_key, aud="kafka"), "iss"),
        (_signed(rsa_key, "RS256", "nope", **good), "No key in the JWKS for the JWT's kid 'nope'"),
        (_signed(rsa_key, "RS256", None, **good), "names no key"),
        (_signed(other, "RS256", "r1", **good), "Signature verification failed"),
        (_signed(ec_key, "ES256", "r1", **good), "does not fit its key"),
        (_signed(rsa_key, "RS256", "e1", **good), "does not fit its key"),
        (_signed(b"s" * 32, "HS256", "r1", **good), "does not fit its key"),
        (_signed(rsa_key, **{**good, "sub": None}), "No principal name"),
        (_unsecured({**good, "sub": "alice", "iat": now, "exp": now + 60}), "alg none"),
        ("not-a-jwt", "Malformed JWT"),
    ]
    for token, error in cases:
        with pytest.raises(TokenError, match=error):
            jwks_validator.validate(token, NOW)


def test_jwks_without_expected_audience_ignores_aud(rsa_key: rsa.RSAPrivateKey) -> None:
    keys = KeySet.parse(
        json.dumps({"keys": [json.loads(RSAAlgorithm.to_jwk(rsa_key.public_key()))]})
    )
    validator = JwksValidator(JwksSettings(url="file:/x", sub_claim="client_id"), lambda: keys)
    # One key and no kid: that key.
    token = _signed(rsa_key, kid=None, aud="anything", client_id="svc")
    assert validator.validate(token, NOW).principal == "svc"


def test_keyset_skips_unusable_keys(rsa_key: rsa.RSAPrivateKey) -> None:
    public = json.loads(RSAAlgorithm.to_jwk(rsa_key.public_key()))
    private = json.loads(RSAAlgorithm.to_jwk(rsa_key))
    with pytest.raises(ValueError, match="no usable signing key"):
        KeySet.parse(
            json.dumps(
                {
                    "keys": [
                        {"kty": "oct", "k": "c2VjcmV0", "kid": "h"},
                        {**public, "use": "enc", "kid": "enc"},
                        {**private, "kid": "p"},
                        {**public, "alg": "HS256", "kid": "x"},
                    ]
                }
            )
        )
    for text in ("[]", "{}", "nope"):
        with pytest.raises(ValueError):
            KeySet.parse(text)


def test_jwks_source_reads_a_file_and_fetches_over_http(
    tmp_path: Path, rsa_key: rsa.RSAPrivateKey, ec_key: ec.EllipticCurvePrivateKey
) -> None:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(_jwks(rsa_key, ec_key)))
    assert len(JwksSource(path.as_uri(), 1000).keys) == 2
    with pytest.raises(ConfigError, match=r"sasl\.oauthbearer\.jwks\.endpoint\.url: cannot read"):
        JwksSource((tmp_path / "missing.json").as_uri(), 1000)
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ConfigError, match="unusable"):
        JwksSource((tmp_path / "bad.json").as_uri(), 1000)

    served = {"body": json.dumps({"keys": _jwks(rsa_key, ec_key)["keys"][:1]}).encode()}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(served["body"])

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        source = JwksSource(f"http://127.0.0.1:{server.server_port}/jwks", 100)
        try:
            assert len(source.keys) == 1
            served["body"] = path.read_bytes()  # rotated: a second key
            deadline = time.monotonic() + 5
            while len(source.keys) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(source.keys) == 2
        finally:
            source.close()
    finally:
        server.shutdown()


# ----------------------------------------------------------------- the exchange


class _Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def test_server_two_step_failure() -> None:
    server = OAuthBearerServer(UnsecuredValidator(UnsecuredSettings()), _Clock())
    challenge = server.evaluate(initial_response(_unsecured(_claims(exp=NOW - 1))))
    assert challenge == b'{"status":"invalid_token"}' and not server.complete
    assert server.claimed == "alice"
    with pytest.raises(MechanismError, match="Authentication failed: The indicated time"):
        server.evaluate(b"\x01")
    again = OAuthBearerServer(UnsecuredValidator(UnsecuredSettings()), _Clock())
    again.evaluate(initial_response(_unsecured(_claims(exp=NOW - 1))))
    with pytest.raises(MechanismError, match="expected %x01"):
        again.evaluate(initial_response(_unsecured(_claims())))


def test_server_success_authzid_and_lifetime() -> None:
    server = OAuthBearerServer(UnsecuredValidator(UnsecuredSettings()), _Clock())
    message = b"n,a=alice,\x01auth=Bearer " + _unsecured(_claims()).encode() + b"\x01x=y\x01\x01"
    assert server.evaluate(message) == b""
    assert server.complete and server.username == "alice"
    assert server.credential_lifetime_ms == 600_000 and server.extensions == {"x": "y"}
    with pytest.raises(MechanismError, match="already complete"):
        server.evaluate(b"\x01")
    other = OAuthBearerServer(UnsecuredValidator(UnsecuredSettings()), _Clock())
    with pytest.raises(MechanismError, match=r"authorization id \(bob\)"):
        other.evaluate(b"n,a=bob,\x01auth=Bearer " + _unsecured(_claims()).encode() + b"\x01\x01")
    with pytest.raises(MechanismError, match="Invalid OAUTHBEARER client first message"):
        OAuthBearerServer(UnsecuredValidator(UnsecuredSettings()), _Clock()).evaluate(b"\x01")


# ----------------------------------------------------------------- keys and the gate

UNSECURED_JAAS = f'{MODULE} required unsecuredLoginStringClaim_sub="broker";'


def _listener_keys(**extra: str) -> dict[str, str]:
    return {
        "sasl.enabled.mechanisms": "OAUTHBEARER,PLAIN",
        "listener.name.sasl.oauthbearer.sasl.jaas.config": UNSECURED_JAAS,
        "listener.name.sasl.plain.sasl.jaas.config": (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="broker" password="b" user_broker="b";'
        ),
        **extra,
    }


def _oauth_gate(keys: dict[str, str]) -> SaslGate:
    return SaslGate(
        sasl_listener(
            sasl_listener_config(keys, "SASL"),
            lambda m, u: None,
            key_source=jwks_source,
            clock=time.time,
        )
    )


def test_gate_logs_in_with_an_unsecured_token_and_its_exp_bounds_the_session() -> None:
    gate = _oauth_gate(_listener_keys())
    _handshake(gate, "OAUTHBEARER")
    token = unsecured_token("alice", 60, time.time())
    _, response = _authenticate(gate, initial_response(token), now=1000)
    assert isinstance(response, SaslAuthenticateResponse) and response.error_code == 0
    assert 58_000 <= response.session_lifetime_ms <= 60_000
    assert gate.principal == KafkaPrincipal("User", "alice")
    assert isinstance(gate.receive(_frame(MetadataRequest(), 12), 2000), Pass)
    assert isinstance(gate.receive(_frame(MetadataRequest(), 12), 1000 + 61_000), Drop)


def test_gate_session_is_the_shorter_of_reauth_and_token() -> None:
    gate = _oauth_gate(_listener_keys(**{"connections.max.reauth.ms": "5000"}))
    _handshake(gate, "OAUTHBEARER")
    _, response = _authenticate(gate, initial_response(unsecured_token("a", 60, time.time())))
    assert isinstance(response, SaslAuthenticateResponse) and response.session_lifetime_ms == 5000


def test_gate_answers_the_error_challenge_then_fails_on_x01() -> None:
    gate = _oauth_gate(_listener_keys())
    _handshake(gate, "OAUTHBEARER")
    expired = unsecured_token("alice", 60, time.time() - 3600)
    result, response = _authenticate(gate, initial_response(expired))
    assert isinstance(result, Answer) and isinstance(response, SaslAuthenticateResponse)
    assert response.error_code == 0 and response.auth_bytes == b'{"status":"invalid_token"}'
    result = gate.receive(_frame(SaslAuthenticateRequest(auth_bytes=b"\x01"), 2), 0)
    assert isinstance(result, Refuse) and result.user == "alice" and result.delay
    failed = _answer(result, SaslAuthenticateRequest.API_KEY, 2)
    assert isinstance(failed, SaslAuthenticateResponse)
    assert failed.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "Expiration Time" in (failed.error_message or "")


def test_node_and_command_unsecured_logins() -> None:
    keys = _listener_keys(**{"sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"})
    credentials = client_credentials(keys, "SASL", "sasl.mechanism.inter.broker.protocol")
    assert (credentials.mechanism, credentials.username) == ("OAUTHBEARER", "broker")
    client = mechanism_client(credentials, time.time())
    gate = _oauth_gate(keys)
    _handshake(gate, "OAUTHBEARER")
    _, response = _authenticate(gate, client.first())
    assert isinstance(response, SaslAuthenticateResponse) and response.error_code == 0
    assert client.next(response.auth_bytes) is None
    assert gate.principal == KafkaPrincipal("User", "broker")
    # An error challenge is answered %x01.
    assert mechanism_client(credentials, time.time()).next(b'{"status":"invalid_token"}') == b"\x01"
    command = sasl_client_credentials(
        {
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.jaas.config": f'{MODULE} required unsecuredLoginStringClaim_sub="admin" '
            "unsecuredLoginLifetimeSeconds=120;",
        }
    )
    assert (command.username, command.token_lifetime_s) == ("admin", 120)


@pytest.mark.parametrize(
    ("keys", "error"),
    [
        (
            {"listener.name.sasl.oauthbearer.sasl.jaas.config": None},
            "listener.name.sasl.oauthbearer.sasl.jaas.config must be set",
        ),
        (
            {
                "listener.name.sasl.oauthbearer.sasl.jaas.config": (
                    "org.apache.kafka.common.security.plain.PlainLoginModule required;"
                )
            },
            "OAUTHBEARER takes org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
        ),
        (
            {"listener.name.sasl.oauthbearer.sasl.server.callback.handler.class": "com.Nope"},
            "listener.name.sasl.oauthbearer.sasl.server.callback.handler.class: unknown",
        ),
        (
            {"listener.name.sasl.oauthbearer.sasl.server.callback.handler.class": JWKS_VALIDATOR},
            "sasl.oauthbearer.jwks.endpoint.url must be set",
        ),
        (
            {
                "listener.name.sasl.oauthbearer.sasl.server.callback.handler.class": JWKS_VALIDATOR,
                "sasl.oauthbearer.jwks.endpoint.url": "ftp://idp/jwks",
            },
            "sasl.oauthbearer.jwks.endpoint.url: 'ftp://idp/jwks' is neither",
        ),
        (
            {
                "listener.name.sasl.oauthbearer.sasl.server.callback.handler.class": JWKS_VALIDATOR,
                "listener.name.sasl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": "file:/x",
                "sasl.oauthbearer.clock.skew.seconds": "soon",
            },
            "sasl.oauthbearer.clock.skew.seconds: 'soon' is not a number",
        ),
        (
            {
                "listener.name.sasl.oauthbearer.sasl.jaas.config": (
                    f"{MODULE} required unsecuredValidatorAllowableClockSkewMs=-1;"
                )
            },
            "unsecuredValidatorAllowableClockSkewMs: -1 must not be negative",
        ),
    ],
)
def test_listener_config_errors_name_the_key(keys: dict[str, str | None], error: str) -> None:
    merged: dict[str, str] = {
        k: v for k, v in {**_listener_keys(), **keys}.items() if v is not None
    }
    with pytest.raises(ConfigError, match=error):
        sasl_listener_config(merged, "SASL")


@pytest.fixture
def jwks_file(
    tmp_path: Path, rsa_key: rsa.RSAPrivateKey, ec_key: ec.EllipticCurvePrivateKey
) -> Iterator[Path]:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(_jwks(rsa_key, ec_key)))
    yield path


def test_jwks_listener_keys_and_gate(jwks_file: Path, rsa_key: rsa.RSAPrivateKey) -> None:
    keys = _listener_keys(
        **{
            "listener.name.sasl.oauthbearer.sasl.server.callback.handler.class": JWKS_VALIDATOR,
            "sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri(),
            "sasl.oauthbearer.expected.audience": "kafka, other",
            "sasl.oauthbearer.expected.issuer": "https://idp",
            "listener.name.sasl.oauthbearer.sasl.oauthbearer.sub.claim.name": "azp",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
        }
    )
    assert all(is_sasl_key(k) for k in keys)
    config = sasl_listener_config(keys, "SASL")
    assert config.oauthbearer == JwksSettings(
        url=jwks_file.as_uri(),
        expected_audience=("kafka", "other"),
        expected_issuer="https://idp",
        sub_claim="azp",
    )
    gate = _oauth_gate(keys)
    _handshake(gate, "OAUTHBEARER")
    now = int(time.time())
    token = jwt.encode(
        {"azp": "svc", "aud": "other", "iss": "https://idp", "iat": now, "exp": now + 100},
        rsa_key,
        algorithm="RS256",
        headers={"kid": "r1"},
    )
    _, response = _authenticate(gate, initial_response(token))
    assert isinstance(response, SaslAuthenticateResponse) and response.error_code == 0
    assert gate.principal == KafkaPrincipal("User", "svc")
    # A node cannot log in with OAUTHBEARER to a listener that takes signed tokens only.
    with pytest.raises(ConfigError, match="takes signed tokens only"):
        client_credentials(
            {**keys, "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"},
            "SASL",
            "sasl.mechanism.inter.broker.protocol",
        )
    # A missing JWKS file stops the listener at start, naming the key.
    missing = {**keys, "sasl.oauthbearer.jwks.endpoint.url": jwks_file.with_name("x").as_uri()}
    with pytest.raises(ConfigError, match=r"sasl\.oauthbearer\.jwks\.endpoint\.url: cannot read"):
        sasl_listener(
            sasl_listener_config(missing, "SASL"),
            lambda m, u: None,
            key_source=jwks_source,
            clock=time.time,
        )


def test_unsecured_login_options_are_required() -> None:
    with pytest.raises(ConfigError, match="unsecuredLoginStringClaim_sub"):
        sasl_client_credentials(
            {"sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": f"{MODULE} required;"}
        )
    with pytest.raises(ConfigError, match=r"sasl\.jaas\.config must be set"):
        sasl_client_credentials({"sasl.mechanism": "OAUTHBEARER"})
    keys = _listener_keys(**{"sasl.mechanism.controller.protocol": "OAUTHBEARER"})
    del keys["listener.name.sasl.oauthbearer.sasl.jaas.config"]
    with pytest.raises(ConfigError, match="must be set with the unsecuredLoginStringClaim_sub"):
        client_credentials(keys, "SASL", "sasl.mechanism.controller.protocol")
