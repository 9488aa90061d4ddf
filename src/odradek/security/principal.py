"""Who a TLS client is: its certificate's subject as Kafka names it, and the short names
``ssl.principal.mapping.rules`` make of it.

Kafka's principal for an SSL connection is ``User:`` followed by the client
certificate's subject rendered as Java's ``X500Principal.getName()`` does (RFC 2253:
the most specific attribute first, ``CN=alice,OU=eng,O=Example``), which is how users
write it in ACLs and ``super.users``. :func:`subject_name` renders a DER certificate
that way, and :func:`parse_mapping_rules` / :func:`map_subject` apply Kafka's rule
syntax to it.

Pure: no I/O; the shell hands over the certificate bytes the TLS handshake gave it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from cryptography import x509
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID

from odradek.core.errors import ConfigError, DecodeError
from odradek.protocol.messages.default_principal_data import DefaultPrincipalData
from odradek.protocol.primitives import Reader, Writer

__all__ = [
    "ANONYMOUS",
    "MAPPING_RULES_KEY",
    "KafkaPrincipal",
    "MappingRule",
    "deserialize_principal",
    "map_subject",
    "parse_mapping_rules",
    "serialize_principal",
    "subject_name",
]

MAPPING_RULES_KEY: Final = "ssl.principal.mapping.rules"
_PRINCIPAL_DATA_VERSION: Final = 0


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """A principal as Kafka writes it: ``User:alice``."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


# A client that did not authenticate (a PLAINTEXT listener, or SSL without a client
# certificate), as Kafka names it.
ANONYMOUS: Final = KafkaPrincipal("User", "ANONYMOUS")

# The attribute keywords Java's RFC 2253 rendering uses; any other attribute is written
# as its dotted OID and the hex of its DER value (RFC 2253 section 2.4), as Java does.
_KEYWORDS: Final = {
    NameOID.COMMON_NAME: "CN",
    NameOID.COUNTRY_NAME: "C",
    NameOID.LOCALITY_NAME: "L",
    NameOID.STATE_OR_PROVINCE_NAME: "ST",
    NameOID.ORGANIZATION_NAME: "O",
    NameOID.ORGANIZATIONAL_UNIT_NAME: "OU",
    NameOID.STREET_ADDRESS: "STREET",
    NameOID.DOMAIN_COMPONENT: "DC",
    NameOID.USER_ID: "UID",
}
_SPECIAL: Final = frozenset(',+"\\<>;')


def subject_name(der_certificate: bytes) -> str:
    """The certificate's subject as Java's ``X500Principal.getName()`` renders it."""
    subject = x509.load_der_x509_certificate(der_certificate).subject
    # RFC 2253 writes the relative names from the last (most specific) to the first.
    return ",".join(
        # A multi-valued name's members come in the order of their DER encoding, which
        # is the order cryptography keeps and the order Java writes them in.
        "+".join(_attribute(a) for a in rdn)
        for rdn in reversed(subject.rdns)
    )


def _attribute(attribute: x509.NameAttribute[str | bytes]) -> str:
    keyword = _KEYWORDS.get(attribute.oid)
    value = attribute.value
    if keyword is None or not isinstance(value, str):
        return f"{attribute.oid.dotted_string}=#{_der_value(attribute).hex()}"
    return f"{keyword}={_escape(value)}"


def _escape(value: str) -> str:
    out = []
    for i, char in enumerate(value):
        if char in _SPECIAL or (i == 0 and char in "# ") or (i == len(value) - 1 and char == " "):
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


_ENCODINGS: Final = {
    _ASN1Type.BMPString: "utf-16-be",
    _ASN1Type.UniversalString: "utf-32-be",
}


def _der_value(attribute: x509.NameAttribute[str | bytes]) -> bytes:
    """The DER encoding of an attribute's value: its string type's tag, length, bytes."""
    value = attribute.value
    asn1_type = attribute._type  # the string type: cryptography has no public name for it
    encoding = _ENCODINGS.get(asn1_type, "utf-8")
    body = value if isinstance(value, bytes) else value.encode(encoding)
    length = len(body)
    if length < 0x80:
        encoded_length = bytes([length])
    else:
        octets = length.to_bytes((length.bit_length() + 7) // 8, "big")
        encoded_length = bytes([0x80 | len(octets)]) + octets
    return bytes([asn1_type.value]) + encoded_length + body


# -- ssl.principal.mapping.rules


@dataclass(frozen=True, slots=True)
class MappingRule:
    """``DEFAULT`` (``pattern`` None: the subject as it is), or
    ``RULE:pattern/replacement/[LU]``: when ``pattern`` matches the whole subject, the
    name is the replacement, then lower- (L) or upper-cased (U)."""

    pattern: re.Pattern[str] | None
    replacement: str = ""
    case: str = ""

    def apply(self, subject: str) -> str | None:
        if self.pattern is None:
            return subject
        if self.pattern.fullmatch(subject) is None:
            return None
        name = self.pattern.sub(self.replacement, subject)
        if self.case == "L":
            return name.lower()
        if self.case == "U":
            return name.upper()
        return name


# Kafka's rule grammar: rules one after the other, separated by a comma and optional
# spaces; a pattern or replacement may hold commas and escaped slashes (\/).
_RULE: Final = re.compile(
    r"(?:(?P<default>DEFAULT)"
    r"|RULE:(?P<pattern>(?:\\/|[^/])*)/(?P<replacement>(?:\\/|[^/])*)/(?P<case>[LU]?)"
    r"|(?P<invalid>[^,]*))"
    r"(?:,\s*|$)"
)


def parse_mapping_rules(value: str) -> tuple[MappingRule, ...]:
    """The rules of an ``ssl.principal.mapping.rules`` value (Kafka's default: DEFAULT).

    Raises :class:`ConfigError` naming the key and the rule that does not parse.
    """
    text = value.strip()
    if not text:
        return (MappingRule(None),)
    rules: list[MappingRule] = []
    position = 0
    while position < len(text):
        match = _RULE.match(text, position)
        if match is None or match.end() == position:
            raise ConfigError(f"{MAPPING_RULES_KEY}: invalid rule at {text[position:]!r}")
        position = match.end()
        if match.group("default") is not None:
            rules.append(MappingRule(None))
            continue
        if match.group("pattern") is None:
            raise ConfigError(f"{MAPPING_RULES_KEY}: invalid rule {match.group('invalid')!r}")
        pattern = match.group("pattern").replace("\\/", "/")
        try:
            compiled = re.compile(_java_pattern(pattern))
        except re.error as e:
            raise ConfigError(f"{MAPPING_RULES_KEY}: bad pattern {pattern!r}: {e}") from None
        replacement = _java_replacement(match.group("replacement").replace("\\/", "/"))
        rules.append(MappingRule(compiled, replacement, match.group("case")))
    return tuple(rules)


def map_subject(rules: tuple[MappingRule, ...], subject: str) -> str | None:
    """The short name of ``subject`` from the first rule that matches it; None when no
    rule does (Kafka then fails the authentication rather than guess a name)."""
    for rule in rules:
        name = rule.apply(subject)
        if name is not None:
            return name
    return None


def _java_pattern(pattern: str) -> str:
    # Java writes a named group (?<name>...); Python (?P<name>...). Lookbehinds (?<= and
    # (?<! are the same in both.
    return re.sub(r"\(\?<(?![=!])", "(?P<", pattern)


def _java_replacement(replacement: str) -> str:
    """Java's ``Matcher.replaceAll`` syntax ($1, ${name}, \\$ for a dollar) in Python's."""
    out: list[str] = []
    i = 0
    while i < len(replacement):
        char = replacement[i]
        if char == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1].replace("\\", "\\\\"))
            i += 2
        elif char == "$" and i + 1 < len(replacement) and replacement[i + 1] == "{":
            end = replacement.find("}", i)
            if end < 0:
                raise ConfigError(f"{MAPPING_RULES_KEY}: bad replacement {replacement!r}")
            out.append(f"\\g<{replacement[i + 2 : end]}>")
            i = end + 1
        elif char == "$":
            digits = re.match(r"\d+", replacement[i + 1 :])
            if digits is None:
                raise ConfigError(f"{MAPPING_RULES_KEY}: bad replacement {replacement!r}")
            out.append(f"\\g<{digits.group()}>")
            i += 1 + len(digits.group())
        else:
            out.append("\\\\" if char == "\\" else char)
            i += 1
    return "".join(out)


def serialize_principal(principal: KafkaPrincipal) -> bytes:
    """A principal as a forwarding broker puts it in an Envelope (KIP-590): Kafka's
    ``DefaultPrincipalData``, prefixed with its version."""
    w = Writer()
    w.int16(_PRINCIPAL_DATA_VERSION)
    DefaultPrincipalData(type=principal.principal_type, name=principal.name).write(
        w, _PRINCIPAL_DATA_VERSION
    )
    return w.getvalue()


def deserialize_principal(data: bytes) -> KafkaPrincipal:
    """The principal of an Envelope; ``DecodeError`` for bytes that are not one."""
    r = Reader(data)
    version = r.int16()
    if version != _PRINCIPAL_DATA_VERSION:
        raise DecodeError(f"DefaultPrincipalData version {version}")
    found = DefaultPrincipalData.read(r, version)
    if not found.type or not found.name:
        raise DecodeError("an empty principal")
    return KafkaPrincipal(found.type, found.name)
