"""``ssl.cipher.suites``: Java's suite names read as Kafka users write them."""

from __future__ import annotations

import ssl

import pytest

from odradek.core.errors import ConfigError
from odradek.security.cipher_suites import TLS12_SUITES, TLS13_SUITES, cipher_choice


def test_every_mapped_suite_is_one_the_installed_openssl_knows() -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    known = {c["name"] for c in ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).get_ciphers()}
    for java, openssl in TLS12_SUITES.items():
        context.set_ciphers(openssl)  # raises for a name OpenSSL does not have
        assert openssl in {c["name"] for c in context.get_ciphers()}, java
    assert known >= TLS13_SUITES


def test_tls12_names_become_openssl_names_and_leave_tls13_off() -> None:
    choice = cipher_choice(
        " TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,", "l"
    )
    assert choice is not None
    assert choice.openssl == "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384"
    assert (choice.tls12, choice.tls13) == (True, False)


def test_all_tls13_suites_alone_leave_tls12_off() -> None:
    choice = cipher_choice(",".join(sorted(TLS13_SUITES)), "l")
    assert choice is not None and (choice.openssl, choice.tls12, choice.tls13) == ("", False, True)


def test_unset_is_openssls_defaults() -> None:
    assert cipher_choice("", "l") is None
    assert cipher_choice(" , ", "l") is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("TLS_RSA_WITH_RC4_128_SHA", "TLS_RSA_WITH_RC4_128_SHA is not a suite"),
        ("TLS_AES_128_GCM_SHA256", "add TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256"),
        ("ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256 is not a suite"),
    ],
)
def test_what_cannot_be_served_is_refused_naming_the_key(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=r"listener SSL: ssl\.cipher\.suites") as refused:
        cipher_choice(value, "listener SSL")
    assert message in str(refused.value)
