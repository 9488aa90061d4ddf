"""TLS contexts from Kafka's ``ssl.*`` keys, and the principal of a TLS peer.

:func:`server_context` builds what a listener serves with, :func:`client_context` what
a client (a follower, a forward, the CLI) connects with. Both read the keys Kafka reads,
with its defaults, from one mapping: a listener's effective ``ssl.*`` values (its
``listener.name.<listener>.ssl.*`` over the server-wide ``ssl.*``) or a client's
properties.

Key stores (``ssl.keystore.*``) and trust stores (``ssl.truststore.*``):

* ``PEM`` (KIP-651): a file (``location``) holding the private key and its certificate
  chain, or the PEM text itself in ``ssl.keystore.key`` and
  ``ssl.keystore.certificate.chain``; trusted certificates in a file or in
  ``ssl.truststore.certificates``. ``ssl.key.password`` decrypts an encrypted key.
* ``PKCS12``, read with the ``cryptography`` package; ``ssl.keystore.password`` opens
  the store.
* ``JKS``, Kafka's default type, is not read (no well-kept Python reader exists). As
  the JDK does since Java 9, a store whose type is left at JKS but whose file is a
  PKCS12 store is read as one; a real JKS file stops the node naming the key and the
  ``keytool`` command that converts it.

Python's ``ssl`` loads keys from files only, so inline PEM and PKCS12 keys are written
to a private temporary file, loaded, and removed at once; a PKCS12 key goes there
encrypted with a password made for the load (an inline key as the configuration has it).

``ssl.cipher.suites`` takes Java's (IANA) suite names, mapped to OpenSSL's by
:mod:`odradek.security.cipher_suites`; the enabled protocols follow the suites listed.
"""

from __future__ import annotations

import os
import secrets
import ssl
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.serialization import pkcs12

from odradek.core.errors import ConfigError
from odradek.security.cipher_suites import cipher_choice
from odradek.security.principal import (
    ANONYMOUS,
    KafkaPrincipal,
    MappingRule,
    map_subject,
    subject_name,
)
from odradek.shell import tls_alerts

__all__ = [
    "CLIENT_AUTH",
    "AuthenticationFailed",
    "ReloadableServerContext",
    "client_context",
    "peer_principal",
    "server_context",
]

CLIENT_AUTH: Final = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
_PROTOCOLS: Final = {
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_JKS_MAGIC: Final = b"\xfe\xed\xfe\xed"
_STORE_TYPES: Final = ("JKS", "PKCS12", "PEM")


class AuthenticationFailed(Exception):
    """A TLS peer whose certificate names no principal (no mapping rule matched)."""


def server_context(config: Mapping[str, str], listener: str) -> ssl.SSLContext:
    """The context ``listener`` serves TLS with. Raises :class:`ConfigError` naming the
    key (prefixed with the listener) for anything missing, unreadable or unsupported."""
    where = f"listener {listener}"
    # A refused handshake tells the client why (a TLS alert), as Kafka's brokers do.
    tls_alerts.install()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _common(context, config, where)
    if not _load_keystore(context, config, where):
        raise ConfigError(
            f"{where}: an SSL listener needs a key store: set ssl.keystore.location, "
            "or ssl.keystore.type=PEM with ssl.keystore.certificate.chain and ssl.keystore.key"
        )
    client_auth = config.get("ssl.client.auth", "none").strip().lower()
    if client_auth not in CLIENT_AUTH:
        raise ConfigError(
            f"{where}: ssl.client.auth={client_auth!r}: expected none, requested or required"
        )
    context.verify_mode = CLIENT_AUTH[client_auth]
    trusted = _load_truststore(context, config, where)
    if client_auth != "none" and not trusted:
        raise ConfigError(
            f"{where}: ssl.client.auth={client_auth} needs a trust store to check client "
            "certificates: set ssl.truststore.location or ssl.truststore.certificates"
        )
    return context


def client_context(config: Mapping[str, str]) -> ssl.SSLContext:
    """The context a client connects with: the trust store (the system's when none is
    set), a key store for mutual TLS when one is set, and host name checking unless
    ``ssl.endpoint.identification.algorithm`` is empty (Kafka's default: https)."""
    where = "client"
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _common(context, config, where)
    _load_keystore(context, config, where)
    if not _load_truststore(context, config, where):
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    algorithm = config.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("", "https"):
        raise ConfigError(
            f"ssl.endpoint.identification.algorithm={algorithm!r}: expected https or empty"
        )
    context.check_hostname = algorithm == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def peer_principal(
    ssl_object: ssl.SSLObject | ssl.SSLSocket | None, rules: tuple[MappingRule, ...]
) -> KafkaPrincipal:
    """The principal of a TLS connection's peer: ``User:`` and the short name the rules
    make of its certificate's subject; ANONYMOUS when it sent no certificate.
    :class:`AuthenticationFailed` when no rule matches (Kafka refuses the client)."""
    der = None if ssl_object is None else ssl_object.getpeercert(binary_form=True)
    if not der:
        return ANONYMOUS
    subject = subject_name(der)
    name = map_subject(rules, subject)
    if name is None:
        raise AuthenticationFailed(f"no ssl.principal.mapping.rules rule matches {subject!r}")
    return KafkaPrincipal("User", name)


def _common(context: ssl.SSLContext, config: Mapping[str, str], where: str) -> None:
    raw = config.get("ssl.enabled.protocols", "TLSv1.2,TLSv1.3")
    names = [p.strip() for p in raw.split(",") if p.strip()]
    unknown = [p for p in names if p not in _PROTOCOLS]
    if unknown or not names:
        raise ConfigError(
            f"{where}: ssl.enabled.protocols={raw!r}: supported are TLSv1.2 and TLSv1.3"
        )
    versions = sorted(_PROTOCOLS[p] for p in names)
    choice = cipher_choice(config.get("ssl.cipher.suites", ""), where)
    if choice is not None:
        # As in Java, a protocol none of whose suites is listed is not offered.
        versions = [
            v
            for v in versions
            if (choice.tls12 and v == ssl.TLSVersion.TLSv1_2)
            or (choice.tls13 and v == ssl.TLSVersion.TLSv1_3)
        ]
        if not versions:
            raise ConfigError(
                f"{where}: ssl.cipher.suites lists no suite of ssl.enabled.protocols={raw!r}"
            )
        if choice.openssl:
            try:
                context.set_ciphers(choice.openssl)
            except ssl.SSLError as e:
                raise ConfigError(
                    f"{where}: ssl.cipher.suites: OpenSSL here offers none of them ({e})"
                ) from None
    context.minimum_version = versions[0]
    context.maximum_version = versions[-1]


def _store_type(config: Mapping[str, str], key: str, where: str) -> str:
    store_type = config.get(key, "JKS").strip().upper()
    if store_type not in _STORE_TYPES:
        raise ConfigError(f"{where}: {key}={store_type!r}: supported are PEM, PKCS12 (and JKS)")
    return store_type


def _read(path: str, key: str, where: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ConfigError(f"{where}: {key}={path!r} cannot be read: {e.strerror}") from None


def _resolve_jks(data: bytes, store_type: str, key: str, where: str) -> str:
    """The type a store file really has: PKCS12 for a PKCS12 file typed JKS (as the JDK
    reads it); a real JKS file is refused."""
    if store_type == "JKS":
        if data.startswith(_JKS_MAGIC):
            raise ConfigError(
                f"{where}: {key}=JKS: JKS stores are not supported; convert it with "
                "`keytool -importkeystore -srckeystore FILE -destkeystore FILE.p12 "
                "-deststoretype PKCS12` and set the type to PKCS12, or use PEM"
            )
        return "PKCS12"
    return store_type


def _load_keystore(context: ssl.SSLContext, config: Mapping[str, str], where: str) -> bool:
    store_type = _store_type(config, "ssl.keystore.type", where)
    location = config.get("ssl.keystore.location", "").strip()
    chain = config.get("ssl.keystore.certificate.chain", "").strip()
    inline_key = config.get("ssl.keystore.key", "").strip()
    key_password = config.get("ssl.key.password") or None
    if chain or inline_key:
        if store_type != "PEM":
            raise ConfigError(
                f"{where}: ssl.keystore.certificate.chain and ssl.keystore.key need "
                "ssl.keystore.type=PEM"
            )
        if location:
            raise ConfigError(
                f"{where}: set ssl.keystore.location or the inline PEM keys, not both"
            )
        if not (chain and inline_key):
            raise ConfigError(
                f"{where}: ssl.keystore.certificate.chain and ssl.keystore.key go together"
            )
        _load_pem_chain(context, f"{inline_key}\n{chain}\n".encode(), key_password, where)
        return True
    if not location:
        return False
    data = _read(location, "ssl.keystore.location", where)
    store_type = _resolve_jks(data, store_type, "ssl.keystore.type", where)
    if store_type == "PEM":
        _load_pem_chain(context, data, key_password, where)
        return True
    key, certificates = _open_pkcs12(data, config, "ssl.keystore", location, where)
    if key is None or not certificates:
        raise ConfigError(f"{where}: ssl.keystore.location={location!r} holds no private key")
    # Through the temporary file the key goes encrypted, with a password made for it.
    password = secrets.token_urlsafe(32)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password.encode()),
    ) + b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certificates)
    _load_pem_chain(context, pem, password, where)
    return True


def _open_pkcs12(
    data: bytes, config: Mapping[str, str], prefix: str, location: str, where: str
) -> tuple[PrivateKeyTypes | None, list[x509.Certificate]]:
    """A PKCS12 store's private key (if any) and its certificates, the store's own first;
    ``prefix`` is ssl.keystore or ssl.truststore, whose ``.password`` opens it."""
    password = config.get(f"{prefix}.password", "")
    try:
        key, certificate, extra = pkcs12.load_key_and_certificates(
            data, password.encode() if password else None
        )
    except ValueError as e:
        raise ConfigError(
            f"{where}: {prefix}.location={location!r} is not a PKCS12 store that "
            f"{prefix}.password opens: {e}"
        ) from None
    return key, [c for c in [certificate, *extra] if c is not None]


def _load_pem_chain(context: ssl.SSLContext, pem: bytes, password: str | None, where: str) -> None:
    """Load a private key and its chain from PEM bytes, through a file only this process
    can read, removed before returning."""
    fd, path = tempfile.mkstemp(prefix="odradek-key-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        context.load_cert_chain(path, password=password)
    except ssl.SSLError as e:
        raise ConfigError(
            f"{where}: the key store's private key and certificate chain do not load "
            f"(is ssl.key.password right?): {e.reason or e}"
        ) from None
    finally:
        os.unlink(path)


def _load_truststore(context: ssl.SSLContext, config: Mapping[str, str], where: str) -> bool:
    store_type = _store_type(config, "ssl.truststore.type", where)
    location = config.get("ssl.truststore.location", "").strip()
    inline = config.get("ssl.truststore.certificates", "").strip()
    if inline:
        if store_type != "PEM":
            raise ConfigError(f"{where}: ssl.truststore.certificates needs ssl.truststore.type=PEM")
        _load_cas(context, inline, "ssl.truststore.certificates", where)
        return True
    if not location:
        return False
    data = _read(location, "ssl.truststore.location", where)
    store_type = _resolve_jks(data, store_type, "ssl.truststore.type", where)
    if store_type == "PEM":
        _load_cas(context, data.decode("ascii", "replace"), "ssl.truststore.location", where)
        return True
    _key, certificates = _open_pkcs12(data, config, "ssl.truststore", location, where)
    if not certificates:
        raise ConfigError(f"{where}: ssl.truststore.location={location!r} holds no certificate")
    pem = "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certificates)
    _load_cas(context, pem, "ssl.truststore.location", where)
    return True


def _load_cas(context: ssl.SSLContext, pem: str, key: str, where: str) -> None:
    try:
        context.load_verify_locations(cadata=pem)
    except (ssl.SSLError, ValueError) as e:
        raise ConfigError(f"{where}: {key} holds no readable PEM certificate: {e}") from None


class ReloadableServerContext:
    """A listener's TLS context that can be replaced while it serves (Kafka reloads a
    listener's key and trust stores on a dynamic AlterConfigs).

    asyncio's server keeps the context it was started with; that context's SNI callback,
    which OpenSSL calls for every ClientHello (with or without a server name), hands
    each new connection the current context instead. Connections already open keep the
    one they were made with."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self.serving = context
        self.current = context
        context.sni_callback = self._choose

    def replace(self, context: ssl.SSLContext) -> None:
        self.current = context

    def _choose(
        self, connection: ssl.SSLObject, server_name: str | None, context: ssl.SSLContext
    ) -> None:
        if self.current is not context:
            connection.context = self.current
