"""TLS contexts from Kafka's ``ssl.*`` keys (shell/tls.py), proven by real handshakes on
loopback: key stores in PEM (file and inline, encrypted keys) and PKCS12, trust stores,
``ssl.client.auth``, ``ssl.enabled.protocols``, the client's principal, and the keys
refused at start."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from odradek.cli.certificates import Issued, cn, issue, make_ca
from odradek.core.errors import ConfigError
from odradek.security.principal import ANONYMOUS, KafkaPrincipal, parse_mapping_rules
from odradek.shell.tls import AuthenticationFailed, client_context, peer_principal, server_context

CA = make_ca()
SERVER = issue(CA, cn("broker-1"))
ALICE = issue(CA, cn("alice"))
OTHER_CA = make_ca(cn("someone else"))
MALLORY = issue(OTHER_CA, cn("mallory"))


def pem_file(tmp_path: Path, name: str, *parts: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(b"".join(parts))
    return str(path)


def server_pem(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pem_file(
            tmp_path, "server.pem", SERVER.key_pem(), SERVER.cert_pem
        ),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pem_file(tmp_path, "ca.pem", CA.cert_pem),
        **extra,
    }


def client_pem(who: Issued | None = None, extra: dict[str, str] | None = None) -> dict[str, str]:
    config = {
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": CA.cert_pem.decode(),
        **(extra or {}),
    }
    if who is not None:
        config |= {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": who.key_pem().decode(),
            "ssl.keystore.certificate.chain": who.cert_pem.decode(),
        }
    return config


SHORT_NAMES = "RULE:^CN=(.*)$/$1/,DEFAULT"


async def handshake(
    server: ssl.SSLContext, client: ssl.SSLContext, host: str, rules: str
) -> KafkaPrincipal:
    """Serve one TLS connection with ``server``, connect with ``client``, exchange a
    line, and return the principal the server saw with ``rules`` (raises what the
    handshake or the principal raised)."""
    seen: asyncio.Future[KafkaPrincipal] = asyncio.get_running_loop().create_future()
    mapping = parse_mapping_rules(rules)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            principal = peer_principal(writer.get_extra_info("ssl_object"), mapping)
            line = await reader.readline()
            writer.write(line.upper())
            await writer.drain()
            if not seen.done():
                seen.set_result(principal)
        except Exception as e:
            if not seen.done():
                seen.set_exception(e)
        finally:
            writer.close()

    listener = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server)
    port = listener.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client, server_hostname=host
        )
        writer.write(b"ping\n")
        await writer.drain()
        answer = await asyncio.wait_for(reader.readline(), 10)
        writer.close()
        if answer != b"PING\n":
            if seen.done():
                seen.result()  # the server's own failure, if that is why
            raise ConnectionError(f"no answer over TLS: {answer!r}")
        return await asyncio.wait_for(seen, 10)
    finally:
        listener.close()
        await listener.wait_closed()


def run(
    server: ssl.SSLContext,
    client: ssl.SSLContext,
    host: str = "localhost",
    rules: str = SHORT_NAMES,
) -> KafkaPrincipal:
    return asyncio.run(handshake(server, client, host, rules))


def test_pem_file_key_store_serves_and_clients_without_certificates_are_anonymous(
    tmp_path: Path,
) -> None:
    principal = run(server_context(server_pem(tmp_path), "SSL"), client_context(client_pem()))
    assert principal == ANONYMOUS


def test_required_client_auth_names_the_client_by_its_certificate(tmp_path: Path) -> None:
    server = server_context(server_pem(tmp_path, **{"ssl.client.auth": "required"}), "SSL")
    assert run(server, client_context(client_pem(ALICE))) == KafkaPrincipal("User", "alice")


def test_required_client_auth_refuses_a_client_without_a_certificate(tmp_path: Path) -> None:
    server = server_context(server_pem(tmp_path, **{"ssl.client.auth": "required"}), "SSL")
    with pytest.raises((ssl.SSLError, ConnectionError)):
        run(server, client_context(client_pem()))


def test_a_client_without_a_required_certificate_is_told_so_by_a_tls_alert(
    tmp_path: Path,
) -> None:
    """OpenSSL's fatal alert reaches the client (asyncio dropped it, CPython gh-98078):
    Kafka's Java client then fails at once with an SSL handshake error, where a bare
    close made it retry for a minute as if the broker were down."""
    server = server_context(server_pem(tmp_path, **{"ssl.client.auth": "required"}), "SSL")
    with pytest.raises(ssl.SSLError, match="CERTIFICATE_REQUIRED"):
        run(server, client_context(client_pem()))


def test_a_client_certificate_from_another_ca_is_refused(tmp_path: Path) -> None:
    server = server_context(server_pem(tmp_path, **{"ssl.client.auth": "requested"}), "SSL")
    with pytest.raises((ssl.SSLError, ConnectionError)):
        run(server, client_context(client_pem(MALLORY)))


def test_requested_client_auth_admits_both(tmp_path: Path) -> None:
    server = server_context(server_pem(tmp_path, **{"ssl.client.auth": "requested"}), "SSL")
    assert run(server, client_context(client_pem())) == ANONYMOUS
    assert run(server, client_context(client_pem(ALICE))).name == "alice"


def test_a_subject_no_rule_matches_fails_authentication(tmp_path: Path) -> None:
    server = server_context(server_pem(tmp_path, **{"ssl.client.auth": "required"}), "SSL")
    client = client_context(client_pem(ALICE))
    with pytest.raises(AuthenticationFailed, match="CN=alice"):
        run(server, client, rules="RULE:^CN=svc-(.*)$/$1/")


def test_inline_pem_and_an_encrypted_key(tmp_path: Path) -> None:
    config = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": SERVER.key_pem(b"s3cret").decode(),
        "ssl.keystore.certificate.chain": SERVER.cert_pem.decode(),
        "ssl.key.password": "s3cret",
    }
    assert run(server_context(config, "SSL"), client_context(client_pem())) == ANONYMOUS
    with pytest.raises(ConfigError, match=r"ssl\.key\.password"):
        server_context({**config, "ssl.key.password": "wrong"}, "SSL")


def test_pkcs12_stores_and_a_pkcs12_file_typed_jks(tmp_path: Path) -> None:
    keystore = pkcs12.serialize_key_and_certificates(
        b"server",
        SERVER.key,
        SERVER.certificate,
        None,
        serialization.BestAvailableEncryption(b"storepass"),
    )
    truststore = pkcs12.serialize_key_and_certificates(
        b"ca", None, None, [CA.certificate], serialization.BestAvailableEncryption(b"trust")
    )
    (tmp_path / "server.p12").write_bytes(keystore)
    (tmp_path / "trust.p12").write_bytes(truststore)
    server = {
        "ssl.keystore.location": str(tmp_path / "server.p12"),
        "ssl.keystore.password": "storepass",
    }
    client = {
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(tmp_path / "trust.p12"),
        "ssl.truststore.password": "trust",
    }
    # ssl.keystore.type is left at Kafka's default, JKS: the file is read as PKCS12.
    assert run(server_context(server, "SSL"), client_context(client)) == ANONYMOUS
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.password"):
        server_context({**server, "ssl.keystore.password": "nope"}, "SSL")


def test_enabled_protocols_bound_the_version(tmp_path: Path) -> None:
    server = server_context(server_pem(tmp_path, **{"ssl.enabled.protocols": "TLSv1.3"}), "SSL")
    old = client_context(client_pem(extra={"ssl.enabled.protocols": "TLSv1.2"}))
    with pytest.raises((ssl.SSLError, ConnectionError)):
        run(server, old)
    assert run(server, client_context(client_pem())) == ANONYMOUS


def test_client_checks_the_host_name_unless_told_not_to(tmp_path: Path) -> None:
    server = server_context(server_pem(tmp_path), "SSL")
    with pytest.raises(ssl.SSLCertVerificationError):
        run(server, client_context(client_pem()), host="elsewhere.example")
    off = client_context(client_pem(extra={"ssl.endpoint.identification.algorithm": ""}))
    assert run(server, off, host="elsewhere.example") == ANONYMOUS


async def negotiated(server: ssl.SSLContext, client: ssl.SSLContext) -> tuple[str, str]:
    """The suite and protocol a TLS connection from ``client`` to ``server`` agrees on."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    listener = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server)
    port = listener.sockets[0].getsockname()[1]
    try:
        _, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client, server_hostname="localhost"
        )
        name, protocol, _ = writer.get_extra_info("ssl_object").cipher()
        writer.close()
        return name, protocol
    finally:
        listener.close()
        await listener.wait_closed()


def test_cipher_suites_named_as_java_names_them_are_the_ones_served(tmp_path: Path) -> None:
    suite = "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
    server = server_context(server_pem(tmp_path, **{"ssl.cipher.suites": suite}), "SSL")
    client = client_context(client_pem())
    # No TLS 1.3 suite listed: TLS 1.3 is off, as in Java, and the one suite is used.
    assert asyncio.run(negotiated(server, client)) == ("ECDHE-ECDSA-AES256-GCM-SHA384", "TLSv1.2")
    tls13 = "TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384,TLS_CHACHA20_POLY1305_SHA256"
    only13 = server_context(server_pem(tmp_path, **{"ssl.cipher.suites": tls13}), "SSL")
    assert asyncio.run(negotiated(only13, client))[1] == "TLSv1.3"
    # A client that offers only another TLS 1.2 suite finds none in common.
    other = client_context(
        client_pem(extra={"ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"})
    )
    with pytest.raises(ssl.SSLError):
        asyncio.run(negotiated(server, other))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"ssl.keystore.location": ""}, "needs a key store"),
        ({"ssl.keystore.type": "BKS"}, "ssl.keystore.type"),
        ({"ssl.client.auth": "sometimes"}, "ssl.client.auth"),
        ({"ssl.enabled.protocols": "TLSv1.1"}, "ssl.enabled.protocols"),
        ({"ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}, "ssl.cipher.suites"),
        ({"ssl.keystore.location": "/nonexistent/key.pem"}, "cannot be read"),
        (
            {"ssl.client.auth": "required", "ssl.truststore.location": ""},
            "needs a trust store",
        ),
        ({"ssl.keystore.key": "x"}, "not both"),
    ],
)
def test_bad_settings_stop_at_start_naming_the_key(
    tmp_path: Path, extra: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        server_context(server_pem(tmp_path, **extra), "SSL")
    assert "listener SSL" in str(raised.value)


def test_a_jks_file_is_refused_with_the_conversion(tmp_path: Path) -> None:
    path = pem_file(tmp_path, "server.jks", b"\xfe\xed\xfe\xed\x00\x00\x00\x02")
    with pytest.raises(ConfigError, match="keytool -importkeystore"):
        server_context({"ssl.keystore.location": path}, "SSL")
