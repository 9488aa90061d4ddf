"""The ``sasl.*`` keys Odradek reads, and what a SASL listener or client is made of.

Kafka's keys, with Kafka's defaults and per-listener overrides
(``listener.name.<lower-case listener>.<key>``):

* ``sasl.enabled.mechanisms`` (default ``GSSAPI``): the mechanisms a listener offers;
* ``sasl.mechanism.inter.broker.protocol`` and ``sasl.mechanism.controller.protocol``
  (default ``GSSAPI``): what a broker, and every node talking to the controllers, log in
  with;
* ``listener.name.<listener>.<mechanism>.sasl.jaas.config``: the mechanism's login
  module. For PLAIN its ``user_<name>`` options are the users the listener knows; for
  PLAIN and SCRAM its ``username``/``password`` options are the node's own credentials
  when it connects to that listener as a client; for OAUTHBEARER its options say how
  unsecured tokens are checked (``security/oauthbearer.py``) and
  ``unsecuredLoginStringClaim_sub`` names the principal of the node's own unsecured token;
* ``listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class`` and the
  ``sasl.oauthbearer.*`` keys of KIP-768 (``security/oauthbearer.py``);
* ``connections.max.reauth.ms`` (default 0, KIP-368),
  ``connection.failed.authentication.delay.ms`` (default 100, KIP-306) and
  ``sasl.server.max.receive.size`` (default 524288): read by the shell.

Odradek serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER. GSSAPI (Kerberos)
and delegation tokens are not built, so a SASL listener whose mechanism keys are left at
GSSAPI stops the node at start naming the keys.
Pure: a mapping of properties in, values or :class:`ConfigError` out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from odradek.core.errors import ConfigError
from odradek.security.jaas import (
    OAUTHBEARER_LOGIN_MODULE,
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    LoginModule,
    parse_jaas_config,
)
from odradek.security.oauthbearer import (
    CALLBACK_HANDLER,
    OAUTHBEARER,
    OAUTHBEARER_KEYS,
    JwksSettings,
    UnsecuredSettings,
    oauthbearer_settings,
    validates_signed_tokens,
)
from odradek.security.plain import plain_users
from odradek.security.scram import MECHANISMS as SCRAM_MECHANISMS

__all__ = [
    "CONTROLLER_MECHANISM",
    "ENABLED_MECHANISMS",
    "INTER_BROKER_MECHANISM",
    "OAUTHBEARER",
    "SASL_JAAS_CONFIG",
    "SASL_KEYS",
    "SASL_MECHANISM",
    "SUPPORTED_MECHANISMS",
    "ClientCredentials",
    "SaslListenerConfig",
    "client_credentials",
    "is_sasl_key",
    "jaas_key",
    "sasl_client_credentials",
    "sasl_listener_config",
]

ENABLED_MECHANISMS: Final = "sasl.enabled.mechanisms"
INTER_BROKER_MECHANISM: Final = "sasl.mechanism.inter.broker.protocol"
CONTROLLER_MECHANISM: Final = "sasl.mechanism.controller.protocol"
JAAS_CONFIG: Final = "sasl.jaas.config"
SASL_JAAS_CONFIG: Final = JAAS_CONFIG
SASL_MECHANISM: Final = "sasl.mechanism"
"""A client's mechanism (a client's ``sasl.jaas.config`` holds its login)."""
MAX_REAUTH_MS: Final = "connections.max.reauth.ms"
FAILED_AUTHENTICATION_DELAY_MS: Final = "connection.failed.authentication.delay.ms"
MAX_RECEIVE_SIZE: Final = "sasl.server.max.receive.size"

SASL_KEYS: Final = frozenset(
    {
        ENABLED_MECHANISMS,
        INTER_BROKER_MECHANISM,
        CONTROLLER_MECHANISM,
        MAX_REAUTH_MS,
        FAILED_AUTHENTICATION_DELAY_MS,
        MAX_RECEIVE_SIZE,
    }
)
PLAIN: Final = "PLAIN"
SUPPORTED_MECHANISMS: Final = (PLAIN, *SCRAM_MECHANISMS, OAUTHBEARER)
_DEFAULT_MECHANISM: Final = "GSSAPI"
_DEFAULTS: Final = {
    MAX_REAUTH_MS: 0,
    FAILED_AUTHENTICATION_DELAY_MS: 100,
    MAX_RECEIVE_SIZE: 524_288,
}
_LISTENER_KEY: Final = re.compile(r"listener\.name\.([^.]+)\.(.+)")
_MECHANISM_JAAS: Final = re.compile(r"([a-z0-9-]+)\.sasl\.jaas\.config")


def is_sasl_key(key: str) -> bool:
    """Whether ``key`` is read here: one of :data:`SASL_KEYS`, server-wide or for one
    listener, or a listener's mechanism's ``sasl.jaas.config``."""
    if key in SASL_KEYS or key in OAUTHBEARER_KEYS:
        return True
    match = _LISTENER_KEY.fullmatch(key)
    if match is None:
        return False
    rest = match.group(2)
    if rest in SASL_KEYS or _MECHANISM_JAAS.fullmatch(rest) is not None:
        return True
    mechanism, _, own = rest.partition(".")
    return mechanism == OAUTHBEARER.lower() and (own in OAUTHBEARER_KEYS or own == CALLBACK_HANDLER)


def jaas_key(listener: str, mechanism: str) -> str:
    return f"listener.name.{listener.lower()}.{mechanism.lower()}.{JAAS_CONFIG}"


def _listener_value(originals: Mapping[str, str], listener: str, key: str) -> str | None:
    own = originals.get(f"listener.name.{listener.lower()}.{key}")
    return own if own is not None else originals.get(key)


def _int(originals: Mapping[str, str], listener: str, key: str) -> int:
    text = _listener_value(originals, listener, key)
    if text is None:
        return _DEFAULTS[key]
    try:
        value = int(text.strip())
    except ValueError:
        raise ConfigError(f"{key}: {text!r} is not a number") from None
    if value < 0:
        raise ConfigError(f"{key}: {value} must not be negative")
    return value


def _supported(mechanism: str, key: str) -> str:
    if mechanism == _DEFAULT_MECHANISM:
        raise ConfigError(
            f"{key} is {mechanism} (Kafka's default when it is not set): GSSAPI (Kerberos) "
            f"is not supported; set {key} to one of {', '.join(SUPPORTED_MECHANISMS)}"
        )
    if mechanism not in SUPPORTED_MECHANISMS:
        raise ConfigError(
            f"{key}: SASL mechanism {mechanism!r} is not supported "
            f"(supported: {', '.join(SUPPORTED_MECHANISMS)})"
        )
    return mechanism


@dataclass(frozen=True)
class SaslListenerConfig:
    listener: str
    mechanisms: tuple[str, ...]
    login_modules: Mapping[str, LoginModule]
    """The login module of each enabled mechanism that has a ``sasl.jaas.config``."""
    max_reauth_ms: int
    failed_authentication_delay_ms: int
    max_receive_size: int
    oauthbearer: UnsecuredSettings | JwksSettings | None = None
    """How OAUTHBEARER tokens are checked, when the listener enables it."""

    @property
    def plain_users(self) -> dict[str, str]:
        module = self.login_modules.get(PLAIN)
        return plain_users(module.options) if module is not None else {}


def sasl_listener_config(originals: Mapping[str, str], listener: str) -> SaslListenerConfig:
    """What a SASL ``listener`` serves; :class:`ConfigError` names the key of a problem."""
    key = f"listener.name.{listener.lower()}.{ENABLED_MECHANISMS}"
    text = _listener_value(originals, listener, ENABLED_MECHANISMS)
    source = key if key in originals else ENABLED_MECHANISMS
    names = [m.strip() for m in (text if text is not None else _DEFAULT_MECHANISM).split(",")]
    mechanisms = tuple(dict.fromkeys(_supported(m, source) for m in names if m))
    if not mechanisms:
        raise ConfigError(f"{source}: listener {listener} enables no SASL mechanism")
    modules: dict[str, LoginModule] = {}
    oauthbearer: UnsecuredSettings | JwksSettings | None = None
    for mechanism in mechanisms:
        jaas = jaas_key(listener, mechanism)
        expected = _login_module(mechanism)
        if jaas not in originals:
            if mechanism == PLAIN:
                raise ConfigError(
                    f"{jaas} must be set: PLAIN's users are the {PLAIN_LOGIN_MODULE} "
                    'options user_<name>="<password>"'
                )
            if mechanism == OAUTHBEARER:
                raise ConfigError(
                    f"{jaas} must be set: {expected} required (with its "
                    "unsecuredValidator* options for unsecured tokens);"
                )
            continue  # SCRAM's users are in the metadata log
        module = parse_jaas_config(originals[jaas], jaas)
        if module.class_name != expected:
            raise ConfigError(f"{jaas}: {mechanism} takes {expected}, not {module.class_name}")
        if mechanism == PLAIN and not plain_users(module.options):
            raise ConfigError(f'{jaas}: no user_<name>="<password>" option: no user could log in')
        if mechanism == OAUTHBEARER:
            oauthbearer = oauthbearer_settings(originals, listener, module, jaas)
        modules[mechanism] = module
    return SaslListenerConfig(
        listener=listener,
        mechanisms=mechanisms,
        login_modules=modules,
        max_reauth_ms=_int(originals, listener, MAX_REAUTH_MS),
        failed_authentication_delay_ms=_int(originals, listener, FAILED_AUTHENTICATION_DELAY_MS),
        max_receive_size=_int(originals, listener, MAX_RECEIVE_SIZE),
        oauthbearer=oauthbearer,
    )


@dataclass(frozen=True)
class ClientCredentials:
    """A SASL client's login: its mechanism, user name and password. For OAUTHBEARER the
    user name is the principal of an unsecured token (``unsecuredLoginStringClaim_sub``),
    valid ``token_lifetime_s``, and there is no password."""

    mechanism: str
    username: str
    password: str
    token_lifetime_s: int = 3600

    def __repr__(self) -> str:
        return f"ClientCredentials({self.mechanism!r}, {self.username!r}, password=...)"


def _login_module(mechanism: str) -> str:
    if mechanism == PLAIN:
        return PLAIN_LOGIN_MODULE
    return OAUTHBEARER_LOGIN_MODULE if mechanism == OAUTHBEARER else SCRAM_LOGIN_MODULE


def _login(module: LoginModule, mechanism: str, key: str, purpose: str) -> ClientCredentials:
    expected = _login_module(mechanism)
    if module.class_name != expected:
        raise ConfigError(f"{key}: {mechanism} takes {expected}, not {module.class_name}")
    if mechanism == OAUTHBEARER:
        return _unsecured_login(module, key, purpose)
    username, password = module.options.get("username"), module.options.get("password")
    if not username or password is None:
        raise ConfigError(f"{key}: needs username and password options, {purpose}")
    return ClientCredentials(mechanism, username, password)


def _unsecured_login(module: LoginModule, key: str, purpose: str) -> ClientCredentials:
    """Kafka's unsecured login (``OAuthBearerUnsecuredLoginCallbackHandler``): a token
    with ``unsecuredLoginStringClaim_sub`` as its ``sub``, valid
    ``unsecuredLoginLifetimeSeconds`` (3600)."""
    sub = module.options.get("unsecuredLoginStringClaim_sub", "").strip()
    if not sub:
        raise ConfigError(
            f"{key}: needs the unsecuredLoginStringClaim_sub option (the principal of an "
            f"unsecured token), {purpose}; only unsecured OAUTHBEARER logins are built"
        )
    text = module.options.get("unsecuredLoginLifetimeSeconds", "3600").strip()
    try:
        lifetime = int(text)
    except ValueError:
        raise ConfigError(
            f"{key}: unsecuredLoginLifetimeSeconds: {text!r} is not a number"
        ) from None
    if lifetime <= 0:
        raise ConfigError(f"{key}: unsecuredLoginLifetimeSeconds: {lifetime} must be positive")
    return ClientCredentials(OAUTHBEARER, sub, "", lifetime)


def sasl_client_credentials(config: Mapping[str, str]) -> ClientCredentials:
    """A client's login from its ``sasl.mechanism`` and ``sasl.jaas.config`` properties,
    as Kafka's Java clients and tools read them."""
    mechanism = _supported(config.get(SASL_MECHANISM, _DEFAULT_MECHANISM).strip(), SASL_MECHANISM)
    if JAAS_CONFIG not in config:
        what = (
            "unsecuredLoginStringClaim_sub option"
            if mechanism == OAUTHBEARER
            else "username and password options"
        )
        raise ConfigError(f"{JAAS_CONFIG} must be set: the {mechanism} login module with {what}")
    module = parse_jaas_config(config[JAAS_CONFIG], JAAS_CONFIG)
    return _login(module, mechanism, JAAS_CONFIG, "the credentials to log in with")


def client_credentials(
    originals: Mapping[str, str], listener: str, mechanism_key: str
) -> ClientCredentials:
    """What this node logs in to SASL ``listener`` with: the mechanism ``mechanism_key``
    names (``sasl.mechanism.inter.broker.protocol`` or
    ``sasl.mechanism.controller.protocol``) and that mechanism's ``username`` and
    ``password`` options on the listener."""
    mechanism = _supported(originals.get(mechanism_key, _DEFAULT_MECHANISM).strip(), mechanism_key)
    jaas = jaas_key(listener, mechanism)
    if mechanism == OAUTHBEARER and validates_signed_tokens(originals, listener):
        raise ConfigError(
            f"{mechanism_key} is OAUTHBEARER, but listener {listener} takes signed tokens "
            "only (sasl.server.callback.handler.class) and this node cannot get one (an "
            "OAuth login, sasl.login.callback.handler.class, is not built): let nodes log "
            "in with another mechanism the listener enables, such as PLAIN"
        )
    if jaas not in originals:
        what = (
            "the unsecuredLoginStringClaim_sub option"
            if mechanism == OAUTHBEARER
            else "username and password options"
        )
        raise ConfigError(
            f"{jaas} must be set with {what}: this node logs in to "
            f"listener {listener} with {mechanism} ({mechanism_key})"
        )
    module = parse_jaas_config(originals[jaas], jaas)
    return _login(
        module, mechanism, jaas, f"the credentials this node logs in to listener {listener} with"
    )
