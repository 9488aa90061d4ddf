"""``ssl.cipher.suites`` as Kafka takes it: Java's (IANA) suite names, turned into what
Python's ``ssl`` (OpenSSL) can be told.

Java names a suite ``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256``; OpenSSL calls the same
suite ``ECDHE-RSA-AES128-GCM-SHA256``. :data:`TLS12_SUITES` maps the TLS 1.2 suites
OpenSSL offers with forward secrecy or AEAD (the table ``openssl ciphers -stdname``
prints; a test checks it against the OpenSSL this runs on). TLS 1.3 suites keep their
names in both, but Python's ``ssl`` cannot narrow them (it has no
``set_ciphersuites``): a list naming some of OpenSSL's three but not all is refused,
naming the key, rather than serving suites the operator left out.

As with Java, the protocols follow the suites: a list with no TLS 1.3 suite leaves
TLS 1.3 off, one with only TLS 1.3 suites leaves TLS 1.2 off. An unknown name is
refused with the key and the name. Pure: a string in, a :class:`CipherChoice` or
:class:`ConfigError` out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from odradek.core.errors import ConfigError

__all__ = ["TLS12_SUITES", "TLS13_SUITES", "CipherChoice", "cipher_choice"]

KEY: Final = "ssl.cipher.suites"

TLS13_SUITES: Final = frozenset(
    {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}
)
"""The TLS 1.3 suites OpenSSL enables (and Python's ``ssl`` always offers)."""

TLS12_SUITES: Final = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256": "DHE-RSA-AES128-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256": "DHE-RSA-AES256-SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA256": "AES256-SHA256",
}
"""Java's (IANA) name of each TLS 1.2 suite, and OpenSSL's."""


@dataclass(frozen=True, slots=True)
class CipherChoice:
    """What ``ssl.cipher.suites`` asks of a context."""

    openssl: str
    """The TLS 1.2 suites for ``SSLContext.set_ciphers`` ("" when none)."""
    tls12: bool
    """Whether any TLS 1.2 suite is listed (else TLS 1.2 is left off)."""
    tls13: bool
    """Whether the TLS 1.3 suites are listed (else TLS 1.3 is left off)."""


def cipher_choice(value: str, where: str) -> CipherChoice | None:
    """The suites ``value`` names (None: unset or empty, OpenSSL's defaults)."""
    names = list(dict.fromkeys(n.strip() for n in value.split(",") if n.strip()))
    if not names:
        return None
    unknown = [n for n in names if n not in TLS12_SUITES and n not in TLS13_SUITES]
    if unknown:
        raise ConfigError(
            f"{where}: {KEY}: {', '.join(unknown)} is not a suite this build can serve "
            f"(TLS 1.3: {', '.join(sorted(TLS13_SUITES))}; TLS 1.2: the ECDHE, DHE and "
            "RSA suites with AES-GCM, ChaCha20-Poly1305 or AES-CBC-SHA2)"
        )
    tls13 = [n for n in names if n in TLS13_SUITES]
    if tls13 and set(tls13) != TLS13_SUITES:
        missing = sorted(TLS13_SUITES - set(tls13))
        raise ConfigError(
            f"{where}: {KEY}: the TLS 1.3 suites cannot be narrowed here (Python's ssl "
            f"always offers all three): add {', '.join(missing)}, or list no TLS 1.3 suite "
            "to leave TLS 1.3 off"
        )
    tls12 = [TLS12_SUITES[n] for n in names if n in TLS12_SUITES]
    return CipherChoice(openssl=":".join(tls12), tls12=bool(tls12), tls13=bool(tls13))
