"""The ``ssl.*`` keys Odradek reads, and a listener's effective values of them.

Kafka reads a listener's TLS settings from ``listener.name.<listener>.ssl.*`` (the name
in lower case) over the server-wide ``ssl.*``; a client reads its ``ssl.*`` properties.
The keys are read as strings by :mod:`odradek.shell.tls`, which applies Kafka's
defaults; none of them is logged or described (passwords are among them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

__all__ = [
    "RELOADABLE_SSL_KEYS",
    "SSL_KEYS",
    "dynamic_ssl_key",
    "effective_ssl_config",
    "is_ssl_key",
]

RELOADABLE_SSL_KEYS: Final = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
    }
)
"""The keys a broker's dynamic config may change at run time, per listener
(``listener.name.<l>.ssl.keystore.location``), as Kafka reloads its key and trust stores."""

SSL_KEYS: Final = RELOADABLE_SSL_KEYS | frozenset(
    {
        "ssl.client.auth",
        "ssl.enabled.protocols",
        "ssl.protocol",
        "ssl.cipher.suites",
        "ssl.endpoint.identification.algorithm",
        "ssl.principal.mapping.rules",
    }
)
"""Every ``ssl.*`` key read (the broker's ServerKeys declare the same keys, so that
DescribeConfigs lists them; a test keeps the two equal)."""
_LISTENER_PREFIX: Final = re.compile(r"listener\.name\.([^.]+)\.(ssl\..+)")


def dynamic_ssl_key(key: str) -> tuple[str, str] | None:
    """``(listener in lower case, ssl key)`` of a reloadable per-listener key; else None."""
    match = _LISTENER_PREFIX.fullmatch(key)
    if match is None or match.group(2) not in RELOADABLE_SSL_KEYS:
        return None
    return match.group(1), match.group(2)


def is_ssl_key(key: str) -> bool:
    """Whether ``key`` is one of :data:`SSL_KEYS`, server-wide or for one listener."""
    if key in SSL_KEYS:
        return True
    match = _LISTENER_PREFIX.fullmatch(key)
    return match is not None and match.group(2) in SSL_KEYS


def effective_ssl_config(
    originals: Mapping[str, str], listener: str, dynamic: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``listener``'s ``ssl.*`` values: its own (``listener.name.<lower-case name>.``)
    over the server-wide ones, and over those the broker's ``dynamic`` configs of the
    listener's reloadable keys (set with AlterConfigs)."""
    values = {k: v for k, v in originals.items() if k in SSL_KEYS}
    prefix = f"listener.name.{listener.lower()}."
    for key, value in originals.items():
        if key.startswith(prefix) and key[len(prefix) :] in SSL_KEYS:
            values[key[len(prefix) :]] = value
    for key, value in (dynamic or {}).items():
        found = dynamic_ssl_key(key)
        if found is not None and found[0] == listener.lower():
            values[found[1]] = value
    return values
