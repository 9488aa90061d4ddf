"""Certificates made with ``cryptography``: a CA and the certificates it signs, with any
subject, for the TLS tests and benchmarks (and a local cluster on TLS). Keys are P-256;
certificates are valid from a day ago for ``days`` days."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

DAYS = 825


def _validity(days: int) -> tuple[datetime.datetime, datetime.datetime]:
    start = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=1)
    return start, start + datetime.timedelta(days=days)


@dataclass(frozen=True)
class Issued:
    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def der(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.DER)

    @property
    def cert_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def key_pem(self, password: bytes | None = None) -> bytes:
        encryption: serialization.KeySerializationEncryption = (
            serialization.NoEncryption()
            if password is None
            else serialization.BestAvailableEncryption(password)
        )
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )


def name(*rdns: list[x509.NameAttribute[str]]) -> x509.Name:
    """A name from its relative names, first (least specific) first, as DER orders them."""
    return x509.Name([x509.RelativeDistinguishedName(rdn) for rdn in rdns])


def cn(value: str) -> x509.Name:
    return name([x509.NameAttribute(NameOID.COMMON_NAME, value)])


def make_ca(subject: x509.Name | None = None, days: int = DAYS) -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    start, end = _validity(days)
    subject = subject or cn("Odradek test CA")
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return Issued(certificate, key)


def issue(
    ca: Issued,
    subject: x509.Name,
    *,
    hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
    days: int = DAYS,
) -> Issued:
    """A certificate for ``subject`` signed by ``ca``, naming ``hosts`` (DNS names or IP
    addresses) as its subject alternative names."""
    key = ec.generate_private_key(ec.SECP256R1())
    start, end = _validity(days)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
    )
    if hosts:
        names: list[x509.GeneralName] = [
            x509.IPAddress(ipaddress.ip_address(h)) if h[0].isdigit() else x509.DNSName(h)
            for h in hosts
        ]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return Issued(builder.sign(ca.key, hashes.SHA256()), key)
