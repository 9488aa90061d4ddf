"""Principals of TLS clients: the certificate subject as Kafka (Java) renders it, and
Kafka's ``ssl.principal.mapping.rules``."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID

from odradek.cli.certificates import issue, make_ca, name
from odradek.core.errors import ConfigError
from odradek.security.principal import map_subject, parse_mapping_rules, subject_name

A = x509.NameAttribute

SUBJECTS = {
    "plain": name(
        [A(NameOID.COUNTRY_NAME, "DE")],
        [A(NameOID.ORGANIZATION_NAME, "Example")],
        [A(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng")],
        [A(NameOID.COMMON_NAME, "alice")],
    ),
    "specials": name(
        [A(NameOID.ORGANIZATION_NAME, 'Smith, Jones & "Partners" <x>;y+z\\w')],
        [A(NameOID.COMMON_NAME, "#lead and trail ")],
    ),
    "leading space": name([A(NameOID.COMMON_NAME, " bob")]),
    "multi-valued": name(
        [A(NameOID.DOMAIN_COMPONENT, "com")],
        [A(NameOID.DOMAIN_COMPONENT, "example")],
        [A(NameOID.COMMON_NAME, "carol"), A(NameOID.USER_ID, "c42")],
    ),
    "email and serial": name(
        [A(NameOID.COMMON_NAME, "dave")],
        [A(NameOID.EMAIL_ADDRESS, "dave@example.com")],
        [A(NameOID.SERIAL_NUMBER, "1234")],
    ),
    "non-ascii": name(
        [A(NameOID.LOCALITY_NAME, "Zürich")],
        [A(NameOID.STATE_OR_PROVINCE_NAME, "ZH")],
        [A(NameOID.STREET_ADDRESS, "Bahnhofstraße 1")],
        [A(NameOID.COMMON_NAME, "Ödön")],
    ),
    "printable string": name(
        [A(NameOID.COMMON_NAME, "erin", _type=_ASN1Type.PrintableString)],
        [A(NameOID.TITLE, "boss", _type=_ASN1Type.PrintableString)],
    ),
}

EXPECTED = {
    "plain": "CN=alice,OU=eng,O=Example,C=DE",
    "leading space": "CN=\\ bob",
    "multi-valued": "CN=carol+UID=c42,DC=example,DC=com",
}

JAVA_SUBJECT = """
import java.io.FileInputStream;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;

public class Subject {
    public static void main(String[] args) throws Exception {
        CertificateFactory factory = CertificateFactory.getInstance("X.509");
        for (String path : args) {
            try (FileInputStream in = new FileInputStream(path)) {
                X509Certificate cert = (X509Certificate) factory.generateCertificate(in);
                System.out.println(cert.getSubjectX500Principal().getName());
            }
        }
    }
}
"""


@pytest.fixture(scope="module")
def certificates() -> dict[str, bytes]:
    ca = make_ca()
    return {label: issue(ca, subject).der for label, subject in SUBJECTS.items()}


@pytest.mark.parametrize("label", sorted(EXPECTED))
def test_subject_is_rendered_most_specific_first(
    certificates: dict[str, bytes], label: str
) -> None:
    assert subject_name(certificates[label]) == EXPECTED[label]


def test_subjects_match_what_java_renders(certificates: dict[str, bytes], tmp_path: Path) -> None:
    """Kafka's principal is ``X500Principal.getName()``; ACLs are written in that form,
    so every subject must render exactly as the JDK renders it."""
    if shutil.which("java") is None:
        pytest.skip("no java on this machine to compare with")
    source = tmp_path / "Subject.java"
    source.write_text(JAVA_SUBJECT)
    labels = sorted(certificates)
    paths = []
    for label in labels:
        path = tmp_path / f"{labels.index(label)}.der"
        path.write_bytes(certificates[label])
        paths.append(str(path))
    run = subprocess.run(
        ["java", "-Dfile.encoding=UTF-8", "-Dstdout.encoding=UTF-8", str(source), *paths],
        capture_output=True,
        check=True,
        timeout=120,
    )
    java = run.stdout.decode("utf-8").splitlines()
    ours = [subject_name(certificates[label]) for label in labels]
    assert dict(zip(labels, ours, strict=True)) == dict(zip(labels, java, strict=True))


SERVICE = "CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown"
ADMIN = "CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown"


def test_first_matching_rule_names_the_principal() -> None:
    rules = parse_mapping_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT")
    assert map_subject(rules, SERVICE) == "serviceuser"
    assert map_subject(rules, ADMIN) == ADMIN  # DEFAULT: the subject as it is


def test_case_flags_and_several_groups() -> None:
    rules = parse_mapping_rules(
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, RULE:^cn=(.*?),.*$/$1/U"
    )
    assert map_subject(rules, ADMIN) == "adminuser@admin"
    assert map_subject(rules, "cn=zed,o=x") == "ZED"


def test_no_matching_rule_names_nobody() -> None:
    rules = parse_mapping_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    assert map_subject(rules, ADMIN) is None


def test_empty_value_is_default() -> None:
    assert map_subject(parse_mapping_rules(""), ADMIN) == ADMIN
    assert map_subject(parse_mapping_rules("DEFAULT"), ADMIN) == ADMIN


def test_escaped_slashes_named_groups_and_literal_dollars() -> None:
    rules = parse_mapping_rules(r"RULE:^CN=(?<team>[^\/]*)\/(.*?),.*$/${team}-$2\$/")
    assert map_subject(rules, "CN=ops/bob,O=x") == "ops-bob$"


@pytest.mark.parametrize(
    "value",
    [
        "FOO",
        "RULE:^CN=(.*$/$1/",  # unbalanced group
        "RULE:^CN=(.*)$/$x/",  # a dollar that names no group
        "RULE:^CN=(.*)$/${team/",
        "RULE:^CN=(.*)$/$1",  # no closing slash
        "DEFAULT,BOGUS",
    ],
)
def test_bad_rules_are_refused_naming_the_key(value: str) -> None:
    with pytest.raises(ConfigError, match=r"ssl\.principal\.mapping\.rules"):
        parse_mapping_rules(value)
