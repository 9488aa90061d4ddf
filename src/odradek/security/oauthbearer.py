"""SASL/OAUTHBEARER (RFC 7628, KIP-255, KIP-768): a bearer token (a JWT) instead of a
password, checked as Kafka's two server callback handlers check it.

The client's one message (RFC 7628's initial response, with Kafka's extensions, KIP-342)::

    n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[<key>=<value>\\x01...]\\x01

is parsed strictly, with Kafka's grammar (``OAuthBearerClientInitialResponse``); a
malformed one fails the exchange at once. A token that does not validate is answered,
as RFC 7628 and Kafka's ``OAuthBearerSaslServer`` do, with an error challenge
``{"status":"invalid_token"}``; the client answers ``\\x01`` and the exchange fails then,
with the reason as the message.

Two validators, chosen per listener by
``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class``:

* unsecured (Kafka's default, ``OAuthBearerUnsecuredValidatorCallbackHandler``; for
  development only): a JWS with ``alg: none`` and an empty signature, whose claims are
  checked as Kafka checks them, with the JAAS options
  ``unsecuredValidatorPrincipalClaimName`` (``sub``),
  ``unsecuredValidatorScopeClaimName`` (``scope``), ``unsecuredValidatorRequiredScope``
  and ``unsecuredValidatorAllowableClockSkewMs`` (0): ``exp`` required and in the
  future, ``iat`` (if any) not in the future and before ``exp``;
* signed (KIP-768, ``OAuthBearerValidatorCallbackHandler``): a JWT signed with a key of
  the JWKS at ``sasl.oauthbearer.jwks.endpoint.url`` (``https://``, ``http://`` or
  ``file:``), its ``kid`` naming the key, RS256/384/512, PS256/384/512, ES256/384/512
  or EdDSA (never ``none``, never an HMAC); ``exp`` and ``iat`` required, ``nbf`` if any,
  all within ``sasl.oauthbearer.clock.skew.seconds`` (30);
  ``sasl.oauthbearer.expected.audience`` (a list) and
  ``sasl.oauthbearer.expected.issuer`` if set; the principal is the
  ``sasl.oauthbearer.sub.claim.name`` (``sub``) claim. The JWS checks are PyJWT's.

The principal is ``User:<principal claim>``; the token's ``exp`` bounds the session
(KIP-368, see :class:`~odradek.security.sasl.SaslGate`).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import jwt

from odradek.core.errors import ConfigError
from odradek.security.jaas import LoginModule
from odradek.security.mechanism import MechanismError

__all__ = [
    "JWKS_VALIDATOR",
    "OAUTHBEARER",
    "OAUTHBEARER_KEYS",
    "UNSECURED_VALIDATOR",
    "InitialResponse",
    "JwksSettings",
    "JwksValidator",
    "KeySet",
    "KeySource",
    "OAuthBearerError",
    "OAuthBearerServer",
    "TokenError",
    "TokenValidator",
    "UnsecuredSettings",
    "UnsecuredValidator",
    "ValidToken",
    "build_validator",
    "initial_response",
    "oauthbearer_settings",
    "parse_initial_response",
    "unsecured_token",
]

_log = logging.getLogger(__name__)

OAUTHBEARER: Final = "OAUTHBEARER"
CALLBACK_HANDLER: Final = "sasl.server.callback.handler.class"
UNSECURED_VALIDATOR: Final = (
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
    "OAuthBearerUnsecuredValidatorCallbackHandler"
)
JWKS_VALIDATOR: Final = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
)
_JWKS_VALIDATORS: Final = (
    JWKS_VALIDATOR,
    # Its name before Kafka 3.4 (still accepted there).
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
)

JWKS_URL: Final = "sasl.oauthbearer.jwks.endpoint.url"
JWKS_REFRESH_MS: Final = "sasl.oauthbearer.jwks.endpoint.refresh.ms"
EXPECTED_AUDIENCE: Final = "sasl.oauthbearer.expected.audience"
EXPECTED_ISSUER: Final = "sasl.oauthbearer.expected.issuer"
SUB_CLAIM: Final = "sasl.oauthbearer.sub.claim.name"
SCOPE_CLAIM: Final = "sasl.oauthbearer.scope.claim.name"
CLOCK_SKEW_S: Final = "sasl.oauthbearer.clock.skew.seconds"
OAUTHBEARER_KEYS: Final = frozenset(
    {JWKS_URL, JWKS_REFRESH_MS, EXPECTED_AUDIENCE, EXPECTED_ISSUER, SUB_CLAIM, SCOPE_CLAIM}
    | {CLOCK_SKEW_S}
)
"""The broker keys read here, server-wide or as ``listener.name.<l>.oauthbearer.<key>``."""

_UNSECURED_OPTIONS: Final = {
    "principal": "unsecuredValidatorPrincipalClaimName",
    "scope": "unsecuredValidatorScopeClaimName",
    "required": "unsecuredValidatorRequiredScope",
    "skew": "unsecuredValidatorAllowableClockSkewMs",
}


class OAuthBearerError(MechanismError):
    """The OAUTHBEARER exchange failed; the message goes to the client."""


# ------------------------------------------------------------------ the message


@dataclass(frozen=True)
class InitialResponse:
    token: str
    authzid: str = ""
    extensions: Mapping[str, str] = field(default_factory=dict)


_SEPARATOR: Final = "\x01"
# Kafka's grammar (OAuthBearerClientInitialResponse), with Java's ASCII \w.
_SASLNAME: Final = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KEY: Final = re.compile(r"[A-Za-z]+")
_VALUE: Final = re.compile(r"[\x21-\x7e \t\r\n]+")
_MESSAGE: Final = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01"
    rf"(?P<kvpairs>(?:[A-Za-z]+=[\x21-\x7e \t\r\n]+\x01)*)\x01"
)
_AUTH: Final = re.compile(r"(?P<scheme>[A-Za-z0-9_]+) +(?P<token>[-_.a-zA-Z0-9]+)")
_AUTH_KEY: Final = "auth"


def parse_initial_response(message: bytes) -> InitialResponse:
    """The client's message, or :class:`OAuthBearerError` (Kafka's messages)."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise OAuthBearerError("Invalid OAUTHBEARER client first message") from None
    matched = _MESSAGE.fullmatch(text)
    if matched is None:
        raise OAuthBearerError("Invalid OAUTHBEARER client first message")
    authzid = (matched.group("authzid") or "").replace("=2C", ",").replace("=3D", "=")
    pairs: dict[str, str] = {}
    for pair in matched.group("kvpairs").split(_SEPARATOR)[:-1]:
        key, _, value = pair.partition("=")
        if key in pairs:
            raise OAuthBearerError(
                f"Invalid OAUTHBEARER client first message: {key!r} appears twice"
            )
        pairs[key] = value
    auth = pairs.pop(_AUTH_KEY, None)
    if auth is None:
        raise OAuthBearerError("Invalid OAUTHBEARER client first message: 'auth' not specified")
    # KIP-342: every other pair is an extension; its name and value are checked above.
    auth_match = _AUTH.fullmatch(auth)
    if auth_match is None:
        raise OAuthBearerError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if auth_match.group("scheme").lower() != "bearer":
        raise OAuthBearerError(
            f"Invalid scheme in OAUTHBEARER client first message: {auth_match.group('scheme')}"
        )
    return InitialResponse(auth_match.group("token"), authzid, pairs)


def initial_response(token: str, extensions: Mapping[str, str] | None = None) -> bytes:
    """A client's message carrying ``token`` (and KIP-342 ``extensions``)."""
    pairs = [f"auth=Bearer {token}"]
    for key, value in (extensions or {}).items():
        if key == _AUTH_KEY or not _KEY.fullmatch(key) or not _VALUE.fullmatch(value):
            raise ValueError(f"invalid SASL extension {key!r}")
        pairs.append(f"{key}={value}")
    return ("n,," + _SEPARATOR + "".join(p + _SEPARATOR for p in pairs) + _SEPARATOR).encode()


# ------------------------------------------------------------------ validation


@dataclass(frozen=True)
class ValidToken:
    principal: str
    expires_at_s: float
    """The token's ``exp`` (seconds since the epoch)."""
    scope: tuple[str, ...] = ()


class TokenError(Exception):
    """The token is not valid: ``str(e)`` is why, ``status`` and ``scope`` go into the
    error challenge (RFC 7628 section 3.2.2)."""

    def __init__(
        self, reason: str, *, status: str = "invalid_token", scope: str | None = None
    ) -> None:
        super().__init__(reason)
        self.status = status
        self.scope = scope

    def challenge(self) -> bytes:
        body: dict[str, str] = {"status": self.status}
        if self.scope is not None:
            body["scope"] = self.scope
        return json.dumps(body, separators=(",", ":")).encode()


class TokenValidator:
    """What a listener checks tokens with."""

    def validate(self, token: str, now_s: float) -> ValidToken:
        """The token's principal and expiry, or :class:`TokenError`."""
        raise NotImplementedError

    def claimed(self, token: str) -> str | None:
        """The principal a token names, unchecked: for the log line of a failure."""
        return None


def _b64_json(part: str, what: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError):
        raise TokenError(f"the JWS {what} is not Base64URL-encoded JSON") from None
    if not isinstance(value, dict):
        raise TokenError(f"the JWS {what} is not a JSON object")
    return value


def _number(claims: Mapping[str, Any], name: str, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise TokenError(f"No {name!r} claim in the token (it is required)")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenError(f"The {name!r} claim is not a number")
    return float(value)


def _scope(claims: Mapping[str, Any], name: str) -> tuple[str, ...]:
    value = claims.get(name)
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return tuple(value)
    raise TokenError(f"The {name!r} claim is neither a string nor a list of strings")


def _principal(claims: Mapping[str, Any], name: str) -> str:
    value = claims.get(name)
    if not isinstance(value, str) or not value.strip():
        raise TokenError(f"No principal name in JWT claim: {name}")
    return value


@dataclass(frozen=True)
class UnsecuredSettings:
    """Kafka's unsecured validator's JAAS options."""

    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    clock_skew_ms: int = 0


class UnsecuredValidator(TokenValidator):
    """Kafka's ``OAuthBearerUnsecuredValidatorCallbackHandler``: for development only,
    anyone can make such a token."""

    def __init__(self, settings: UnsecuredSettings) -> None:
        self._settings = settings

    def _claims(self, token: str) -> dict[str, Any]:
        parts = token.split(".")
        if len(parts) != 3 or parts[2] != "":
            raise TokenError(
                "Unsecured JWS compact serializations must have 3 dot-separated "
                "Base64URL-encoded values, the last one empty"
            )
        header = _b64_json(parts[0], "header")
        if header.get("alg") != "none":
            raise TokenError("Unsecured JWS must use 'none' as an algorithm")
        return _b64_json(parts[1], "claims")

    def claimed(self, token: str) -> str | None:
        try:
            value = self._claims(token).get(self._settings.principal_claim)
        except TokenError:
            return None
        return value if isinstance(value, str) else None

    def validate(self, token: str, now_s: float) -> ValidToken:
        s = self._settings
        claims = self._claims(token)
        principal = _principal(claims, s.principal_claim)
        scope = _scope(claims, s.scope_claim)
        exp = _number(claims, "exp", required=True)
        assert exp is not None
        iat = _number(claims, "iat", required=False)
        now_ms, skew = now_s * 1000, s.clock_skew_ms
        if iat is not None and iat * 1000 > now_ms + skew:
            raise TokenError(
                f"The Issued At value ({iat} seconds) was after the indicated time "
                f"({int(now_ms)} ms) plus allowable clock skew ({skew} ms)"
            )
        if now_ms - skew >= exp * 1000:
            raise TokenError(
                f"The indicated time ({int(now_ms)} ms) minus allowable clock skew ({skew} ms) "
                f"was on or after the Expiration Time value ({exp} seconds)"
            )
        if iat is not None and exp <= iat:
            raise TokenError(
                f"The Expiration Time time ({exp} seconds) was not after the Issued At time "
                f"({iat} seconds)"
            )
        missing = [required for required in s.required_scope if required not in scope]
        if missing:
            raise TokenError(
                f"The provided scope ({' '.join(scope)}) was missing a required scope "
                f"({' '.join(missing)})",
                status="insufficient_scope",
                scope=" ".join(s.required_scope),
            )
        return ValidToken(principal, exp, scope)


@dataclass(frozen=True)
class JwksSettings:
    """KIP-768's broker keys."""

    url: str
    refresh_ms: int = 3_600_000
    expected_audience: tuple[str, ...] = ()
    expected_issuer: str | None = None
    sub_claim: str = "sub"
    scope_claim: str = "scope"
    clock_skew_s: int = 30


_RSA_ALGORITHMS: Final = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
_EC_ALGORITHMS: Final = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}
_OKP_ALGORITHMS: Final = {"Ed25519": "EdDSA", "Ed448": "EdDSA"}


@dataclass(frozen=True)
class _Key:
    key: Any
    algorithms: frozenset[str]


class KeySet:
    """The signing keys of a JWKS: public RSA, EC and OKP keys meant for signatures."""

    def __init__(self, keys: Mapping[str | None, _Key]) -> None:
        self._keys = dict(keys)

    @classmethod
    def parse(cls, text: str | bytes) -> KeySet:
        """The usable keys of a JWKS document; ValueError if there is none."""
        try:
            document = json.loads(text)
        except ValueError:
            raise ValueError("not JSON") from None
        if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
            raise ValueError('not a JWKS (a JSON object with a "keys" list)')
        keys: dict[str | None, _Key] = {}
        for index, data in enumerate(document["keys"]):
            if not isinstance(data, dict) or data.get("use", "sig") != "sig":
                continue
            kty, kid = data.get("kty"), data.get("kid")
            if kty == "RSA":
                algorithms = _RSA_ALGORITHMS
            elif kty == "EC" and data.get("crv") in _EC_ALGORITHMS:
                algorithms = frozenset({_EC_ALGORITHMS[data["crv"]]})
            elif kty == "OKP" and data.get("crv") in _OKP_ALGORITHMS:
                algorithms = frozenset({_OKP_ALGORITHMS[data["crv"]]})
            else:
                continue  # symmetric ("oct") keys and what PyJWT does not know
            if "d" in data:
                continue  # a private key has no business in a published JWKS
            alg = data.get("alg")
            if alg is not None:
                if alg not in algorithms:
                    continue
                algorithms = frozenset({alg})
            try:
                jwk = jwt.PyJWK(data, algorithm=next(iter(sorted(algorithms))))
            except jwt.PyJWTError as e:
                _log.warning("JWKS key %d (kid %r) skipped: %s", index, kid, e)
                continue
            keys[kid if isinstance(kid, str) else None] = _Key(jwk.key, algorithms)
        if not keys:
            raise ValueError("no usable signing key (RSA, EC or OKP public keys with use sig)")
        return cls(keys)

    def __len__(self) -> int:
        return len(self._keys)

    def find(self, kid: str | None) -> _Key | None:
        if kid is not None:
            return self._keys.get(kid)
        # A token without a kid: the one key, if the JWKS has only one.
        return next(iter(self._keys.values())) if len(self._keys) == 1 else None


class KeySource(Protocol):
    """Where a validator finds the JWKS's keys (the shell reads or fetches them)."""

    @property
    def keys(self) -> KeySet: ...

    def missing(self) -> None:
        """A token named a key the JWKS lacks (a rotation): look again soon."""
        ...


class JwksValidator(TokenValidator):
    """Kafka's ``OAuthBearerValidatorCallbackHandler`` (KIP-768)."""

    def __init__(
        self,
        settings: JwksSettings,
        keys: Callable[[], KeySet],
        missing: Callable[[], None] = lambda: None,
    ) -> None:
        self._settings = settings
        self._keys = keys
        self._missing = missing

    def claimed(self, token: str) -> str | None:
        try:
            value = jwt.decode(token, options={"verify_signature": False}).get(
                self._settings.sub_claim
            )
        except jwt.PyJWTError:
            return None
        return value if isinstance(value, str) else None

    def validate(self, token: str, now_s: float) -> ValidToken:
        s = self._settings
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as e:
            raise TokenError(f"Malformed JWT: {e}") from None
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg == "none":
            raise TokenError("The JWT is not signed (alg none), and must be")
        if kid is not None and not isinstance(kid, str):
            raise TokenError("The JWT's kid header is not a string")
        found = self._keys().find(kid)
        if found is None:
            self._missing()
            raise TokenError(
                f"No key in the JWKS for the JWT's kid {kid!r}"
                if kid is not None
                else "The JWT names no key (kid) and the JWKS has more than one"
            )
        if alg not in found.algorithms:
            raise TokenError(f"The JWT's algorithm {alg} does not fit its key")
        try:
            claims = jwt.decode(
                token,
                found.key,
                algorithms=[alg],
                audience=list(s.expected_audience) or None,
                issuer=s.expected_issuer,
                options={
                    "require": ["exp", "iat"],
                    "verify_aud": bool(s.expected_audience),
                    # The times are checked below, against the caller's clock.
                    "verify_exp": False,
                    "verify_nbf": False,
                    "verify_iat": False,
                },
            )
        except jwt.PyJWTError as e:
            raise TokenError(f"The JWT is invalid: {e}") from None
        exp = _number(claims, "exp", required=True)
        iat = _number(claims, "iat", required=True)
        nbf = _number(claims, "nbf", required=False)
        assert exp is not None and iat is not None
        skew = s.clock_skew_s
        if now_s - skew >= exp:
            raise TokenError(f"The JWT expired at {exp:.0f} (now {now_s:.0f}, skew {skew} s)")
        if iat > now_s + skew:
            raise TokenError(f"The JWT was issued in the future ({iat:.0f}, now {now_s:.0f})")
        if nbf is not None and nbf > now_s + skew:
            raise TokenError(f"The JWT is not valid before {nbf:.0f} (now {now_s:.0f})")
        return ValidToken(_principal(claims, s.sub_claim), exp, _scope(claims, s.scope_claim))


def build_validator(
    settings: UnsecuredSettings | JwksSettings, key_source: Callable[[JwksSettings], KeySource]
) -> TokenValidator:
    """A listener's validator; for a JWKS, ``key_source`` gives its keys (the shell's
    :class:`~odradek.shell.jwks.JwksSource`, which reads them at once and raises
    :class:`ConfigError` naming the key of a problem)."""
    if isinstance(settings, UnsecuredSettings):
        return UnsecuredValidator(settings)
    source = key_source(settings)
    return JwksValidator(settings, lambda: source.keys, source.missing)


# ------------------------------------------------------------------ the server


class OAuthBearerServer:
    """One OAUTHBEARER exchange (Kafka's ``OAuthBearerSaslServer``)."""

    def __init__(self, validator: TokenValidator, clock: Callable[[], float]) -> None:
        """``clock``: the wall clock in seconds (the shell's), for ``exp`` and ``iat``."""
        self._validator = validator
        self._clock = clock
        self._error: TokenError | None = None
        self.complete = False
        self.username: str | None = None
        self.claimed: str | None = None
        self.credential_lifetime_ms: int | None = None
        """How long the token is valid still (its ``exp`` bounds the session)."""
        self.extensions: Mapping[str, str] = {}

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise OAuthBearerError("the exchange is already complete")
        if self._error is not None:
            if token != b"\x01":
                raise OAuthBearerError(
                    "Invalid OAUTHBEARER client message: expected %x01 after the error"
                )
            raise OAuthBearerError(f"Authentication failed: {self._error}")
        message = parse_initial_response(token)
        self.claimed = self._validator.claimed(message.token)
        now_s = self._clock()
        try:
            valid = self._validator.validate(message.token, now_s)
        except TokenError as e:
            # RFC 7628 3.2.2: the error challenge; the client answers %x01.
            self._error = e
            return e.challenge()
        self.claimed = valid.principal
        if message.authzid and message.authzid != valid.principal:
            raise OAuthBearerError(
                f"Authentication failed: Client requested an authorization id "
                f"({message.authzid}) that is different from the token's principal name "
                f"({valid.principal})"
            )
        self.extensions = dict(message.extensions)
        self.username = valid.principal
        self.credential_lifetime_ms = max(0, int(valid.expires_at_s * 1000 - now_s * 1000))
        self.complete = True
        return b""


# ------------------------------------------------------------------ settings


def _int_option(module: LoginModule, name: str, key: str, default: int) -> int:
    text = module.options.get(name)
    if text is None:
        return default
    try:
        value = int(text.strip())
    except ValueError:
        raise ConfigError(f"{key}: option {name}: {text!r} is not a number") from None
    if value < 0:
        raise ConfigError(f"{key}: option {name}: {value} must not be negative")
    return value


def _setting(originals: Mapping[str, str], listener: str, key: str) -> tuple[str, str | None]:
    """A broker key's value for OAUTHBEARER on ``listener`` and the key it came from."""
    own = f"listener.name.{listener.lower()}.{OAUTHBEARER.lower()}.{key}"
    if own in originals:
        return own, originals[own]
    return key, originals.get(key)


def _int_setting(originals: Mapping[str, str], listener: str, key: str, default: int) -> int:
    source, text = _setting(originals, listener, key)
    if text is None or not text.strip():
        return default
    try:
        value = int(text.strip())
    except ValueError:
        raise ConfigError(f"{source}: {text!r} is not a number") from None
    if value < 0:
        raise ConfigError(f"{source}: {value} must not be negative")
    return value


def handler_key(listener: str) -> str:
    return f"listener.name.{listener.lower()}.{OAUTHBEARER.lower()}.{CALLBACK_HANDLER}"


def validates_signed_tokens(originals: Mapping[str, str], listener: str) -> bool:
    """Whether ``listener`` takes signed tokens only (the KIP-768 handler)."""
    return originals.get(handler_key(listener), "").strip() in _JWKS_VALIDATORS


def oauthbearer_settings(
    originals: Mapping[str, str], listener: str, module: LoginModule, jaas: str
) -> UnsecuredSettings | JwksSettings:
    """How OAUTHBEARER tokens are checked on ``listener``; ``module`` is its
    ``OAuthBearerLoginModule`` (key ``jaas``). :class:`ConfigError` names the key."""
    handler_source = handler_key(listener)
    handler = originals.get(handler_source, "").strip()
    if handler in ("", UNSECURED_VALIDATOR):
        skew = _int_option(module, _UNSECURED_OPTIONS["skew"], jaas, 0)
        return UnsecuredSettings(
            principal_claim=module.options.get(_UNSECURED_OPTIONS["principal"], "sub").strip()
            or "sub",
            scope_claim=module.options.get(_UNSECURED_OPTIONS["scope"], "scope").strip() or "scope",
            required_scope=tuple(module.options.get(_UNSECURED_OPTIONS["required"], "").split()),
            clock_skew_ms=skew,
        )
    if handler not in _JWKS_VALIDATORS:
        raise ConfigError(
            f"{handler_source}: unknown OAUTHBEARER server callback handler {handler!r} "
            f"(known: {JWKS_VALIDATOR}, {UNSECURED_VALIDATOR})"
        )
    url_source, url = _setting(originals, listener, JWKS_URL)
    if url is None or not url.strip():
        raise ConfigError(
            f"{JWKS_URL} must be set: listener {listener} checks OAUTHBEARER tokens with "
            f"{handler} ({handler_source})"
        )
    url = url.strip()
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme not in ("https", "http", "file"):
        raise ConfigError(f"{url_source}: {url!r} is neither an https://, http:// nor a file: URL")
    _, audience = _setting(originals, listener, EXPECTED_AUDIENCE)
    _, issuer = _setting(originals, listener, EXPECTED_ISSUER)
    _, sub = _setting(originals, listener, SUB_CLAIM)
    _, scope = _setting(originals, listener, SCOPE_CLAIM)
    return JwksSettings(
        url=url,
        refresh_ms=_int_setting(originals, listener, JWKS_REFRESH_MS, 3_600_000),
        expected_audience=tuple(a.strip() for a in (audience or "").split(",") if a.strip()),
        expected_issuer=issuer.strip() if issuer and issuer.strip() else None,
        sub_claim=(sub or "").strip() or "sub",
        scope_claim=(scope or "").strip() or "scope",
        clock_skew_s=_int_setting(originals, listener, CLOCK_SKEW_S, 30),
    )


# ------------------------------------------------------------------ client side


def unsecured_token(
    principal: str, lifetime_s: int, now_s: float, principal_claim: str = "sub"
) -> str:
    """An unsecured JWS (``alg: none``), as Kafka's ``OAuthBearerUnsecuredLoginCallbackHandler``
    makes from ``unsecuredLoginStringClaim_sub``."""

    def part(value: Mapping[str, Any]) -> str:
        raw = json.dumps(value, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    issued = int(now_s)
    claims = {principal_claim: principal, "iat": issued, "exp": issued + lifetime_s}
    return f"{part({'alg': 'none'})}.{part(claims)}."
