"""Kafka's ``sasl.jaas.config`` values: one JAAS login module and its options.

The syntax Kafka reads (``JaasConfig``, a Java ``StreamTokenizer``)::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

a class name, a control flag (``required``, ``requisite``, ``sufficient``,
``optional``), ``key=value`` options whose values are quoted strings or bare words, and
a closing semicolon. Kafka takes exactly one module in a ``sasl.jaas.config`` value, and
so do we. Pure: text in, :class:`LoginModule` out, or :class:`ConfigError` naming the
key and what is wrong, never the option values (they hold passwords).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

from odradek.core.errors import ConfigError

__all__ = ["PLAIN_LOGIN_MODULE", "SCRAM_LOGIN_MODULE", "LoginModule", "parse_jaas_config"]

PLAIN_LOGIN_MODULE: Final = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE: Final = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE: Final = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
)
_FLAGS: Final = ("required", "requisite", "sufficient", "optional")

_TOKEN: Final = re.compile(
    r"""\s*(?:
        (?P<string>"(?:[^"\\]|\\.)*")
      | (?P<word>[A-Za-z0-9_.$\-/:*@+]+)
      | (?P<symbol>[=;])
    )""",
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True)
class LoginModule:
    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        # Options hold passwords: never in a log line or a traceback.
        return f"LoginModule({self.class_name!r}, {self.flag!r}, options={sorted(self.options)})"


def _tokens(text: str, key: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None:
            raise ConfigError(f"{key}: unexpected character at position {position}")
        kind = match.lastgroup
        assert kind is not None
        value = match.group(kind)
        if kind == "string":
            # Java's StreamTokenizer reads \" and \\ inside quotes as the character.
            value = re.sub(r"\\(.)", r"\1", value[1:-1], flags=re.DOTALL)
        found.append((kind, value))
        position = match.end()
    return found


def parse_jaas_config(text: str, key: str) -> LoginModule:
    """The one login module ``text`` configures; ``key`` names the setting in errors."""
    tokens = _tokens(text, key)
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise ConfigError(f"{key}: expected a login module class, a control flag and ';'")
    class_name, flag = tokens[0][1], tokens[1][1].lower()
    if flag not in _FLAGS:
        raise ConfigError(f"{key}: invalid control flag {tokens[1][1]!r} (one of {_FLAGS})")
    options: dict[str, str] = {}
    rest = tokens[2:]
    while rest and rest[0] != ("symbol", ";"):
        if len(rest) < 3 or rest[0][0] != "word" or rest[1] != ("symbol", "="):
            raise ConfigError(f"{key}: expected option=value in the login module's options")
        if rest[2][0] == "symbol":
            raise ConfigError(f"{key}: option {rest[0][1]!r} has no value")
        options[rest[0][1]] = rest[2][1]
        rest = rest[3:]
    if not rest:
        raise ConfigError(f"{key}: the login module must end with ';'")
    if len(rest) > 1:
        raise ConfigError(f"{key}: must configure exactly one login module")
    return LoginModule(class_name, flag, options)
