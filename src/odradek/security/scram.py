"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them (KIP-84).

Both sides of the exchange, pure: :class:`ScramServer` checks a client against a stored
:class:`ScramCredential` (what a ``UserScramCredentialRecord`` holds: salt, stored key,
server key, iterations, never the password); :class:`ScramClient` is what a node or an
``odradek`` command authenticates with. Neither does I/O: each step takes the peer's
message and returns the next one, or raises :class:`ScramError`.

Messages (RFC 5802 section 7; Kafka sends no channel binding, so the GS2 header is
``n,,`` or ``n,a=<authzid>,``)::

    client-first  n,,n=<user>,r=<client nonce>[,<extensions>]
    server-first  r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final  c=<base64 GS2 header>,r=<nonce>,p=<base64 proof>
    server-final  v=<base64 server signature>

An unknown user gets the same exchange as a known one, against a made-up credential,
and fails at the proof like a wrong password: nothing the server sends tells the two
apart. Keys are compared in constant time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from odradek.core.scram_credential import ScramCredential
from odradek.security.mechanism import MechanismError

__all__ = [
    "MECHANISMS",
    "ScramClient",
    "ScramCredential",
    "ScramError",
    "ScramMechanism",
    "ScramServer",
    "credential_from_password",
    "credential_from_salted_password",
    "mechanism_by_type",
]


class ScramError(MechanismError):
    """The exchange failed: a malformed message, a wrong proof, a bad server signature."""


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    name: str
    hash_name: str
    kafka_type: int
    """The mechanism's id in Kafka's records and requests (ScramMechanism.type())."""
    min_iterations: int = 4096
    max_iterations: int = 16384

    def hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    @property
    def key_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size


SCRAM_SHA_256: Final = ScramMechanism("SCRAM-SHA-256", "sha256", 1)
SCRAM_SHA_512: Final = ScramMechanism("SCRAM-SHA-512", "sha512", 2)
MECHANISMS: Final = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}


def mechanism_by_type(kafka_type: int) -> ScramMechanism | None:
    """The mechanism with Kafka's id ``kafka_type`` (1 SHA-256, 2 SHA-512), or None."""
    return next((m for m in MECHANISMS.values() if m.kafka_type == kafka_type), None)


def salted_password(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> bytes:
    """Hi(Normalize(password), salt, i): PBKDF2 with the mechanism's HMAC.

    Kafka does not SASLprep the password (it takes its UTF-8 bytes), and neither do we,
    so a credential made by Kafka's tools and one made here agree."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def credential_from_salted_password(
    mechanism: ScramMechanism, salted: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    """The stored credential of a salted password (AlterUserScramCredentials sends one)."""
    client_key = mechanism.hmac(salted, b"Client Key")
    return ScramCredential(
        salt=salt,
        stored_key=mechanism.hash(client_key),
        server_key=mechanism.hmac(salted, b"Server Key"),
        iterations=iterations,
    )


def credential_from_password(
    mechanism: ScramMechanism,
    password: str,
    iterations: int = 4096,
    salt: bytes | None = None,
) -> ScramCredential:
    """A new credential for ``password`` with a random salt unless one is given."""
    salt = secrets.token_bytes(32) if salt is None else salt
    salted = salted_password(mechanism, password, salt, iterations)
    return credential_from_salted_password(mechanism, salted, salt, iterations)


# ---------------------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------------------

# RFC 5802 "printable": %x21-2B / %x2D-7E (no comma).
_NONCE: Final = re.compile(r"[\x21-\x2b\x2d-\x7e]+")
_EXTENSION_KEY: Final = re.compile(r"[A-Za-z]+")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise ScramError(f"invalid base64 in {what}") from None


def _escape_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _unescape_name(text: str) -> str:
    # Any '=' not starting =2C or =3D is invalid (RFC 5802 section 5.1).
    if re.search(r"=(?!2C|3D)", text):
        raise ScramError("invalid username encoding")
    return text.replace("=2C", ",").replace("=3D", "=")


def _attributes(message: str, what: str) -> list[tuple[str, str]]:
    parts = []
    for item in message.split(","):
        if len(item) < 2 or item[1] != "=":
            raise ScramError(f"malformed {what}")
        parts.append((item[0], item[2:]))
    return parts


def _text(token: bytes, what: str) -> str:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError(f"{what} is not UTF-8") from None


@dataclass(frozen=True, slots=True)
class ClientFirst:
    gs2_header: str
    authzid: str
    username: str
    nonce: str
    extensions: dict[str, str]

    @property
    def bare(self) -> str:
        extensions = "".join(f",{k}={v}" for k, v in self.extensions.items())
        return f"n={_escape_name(self.username)},r={self.nonce}{extensions}"


def parse_client_first(token: bytes) -> ClientFirst:
    text = _text(token, "client-first message")
    # gs2-cbind-flag "," [authzid] "," bare
    pieces = text.split(",", 2)
    if len(pieces) != 3:
        raise ScramError("malformed client-first message")
    flag, authz, bare = pieces
    if flag == "p" or flag.startswith("p="):
        raise ScramError("channel binding is not supported")
    if flag not in ("n", "y"):
        raise ScramError("malformed client-first message: bad GS2 header")
    authzid = ""
    if authz:
        if not authz.startswith("a="):
            raise ScramError("malformed client-first message: bad authzid")
        authzid = _unescape_name(authz[2:])
    attributes = _attributes(bare, "client-first message")
    if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r":
        raise ScramError("malformed client-first message: n= and r= must come first")
    username = _unescape_name(attributes[0][1])
    nonce = attributes[1][1]
    if not username or not _NONCE.fullmatch(nonce):
        raise ScramError("malformed client-first message: empty user or bad nonce")
    extensions: dict[str, str] = {}
    for key, value in attributes[2:]:
        if key == "m":
            raise ScramError("mandatory extension not supported")
        extensions[key] = value
    # Kafka writes extensions as key=value items after r= (ScramExtensions): "tokenauth".
    return ClientFirst(f"{flag},{authz},", authzid, username, nonce, extensions)


# ---------------------------------------------------------------------------------------
# Server
# ---------------------------------------------------------------------------------------

Lookup = Callable[[str], ScramCredential | None]


class ScramServer:
    """One server side of one exchange: two client messages in, two answers out.

    ``lookup`` gives the stored credential of a user name for this mechanism (None:
    unknown). ``nonce`` is for tests; by default a fresh random one."""

    def __init__(self, mechanism: ScramMechanism, lookup: Lookup, nonce: str | None = None):
        self.mechanism = mechanism
        self._lookup = lookup
        self._server_nonce = nonce if nonce is not None else secrets.token_urlsafe(24)
        self._first: ClientFirst | None = None
        self._server_first = ""
        self._credential: ScramCredential | None = None
        self._known = False
        self.username: str | None = None
        """The authenticated user, once :attr:`complete`."""
        self.claimed: str | None = None
        self.complete = False
        self.token_auth = False
        """The client asked for delegation-token authentication (``tokenauth=true``)."""

    def evaluate(self, token: bytes) -> bytes:
        """The answer to the client's next message; :class:`ScramError` ends it."""
        if self.complete:
            raise ScramError("the exchange is already complete")
        if self._first is None:
            return self._on_client_first(token)
        return self._on_client_final(token)

    def _on_client_first(self, token: bytes) -> bytes:
        first = parse_client_first(token)
        self.claimed = first.username
        if first.authzid and first.authzid != first.username:
            raise ScramError("authorization id must be the user name")
        if first.extensions.get("tokenauth", "false").lower() == "true":
            # Delegation tokens are not built; refused rather than read as a password.
            raise ScramError("delegation token authentication is not supported")
        credential = self._lookup(first.username)
        self._known = credential is not None
        if credential is None:
            # A made-up credential, so an unknown user runs the same exchange and fails
            # only at the proof, like a wrong password.
            credential = ScramCredential(
                salt=hashlib.sha256(b"odradek-unknown-user:" + first.username.encode()).digest(),
                stored_key=secrets.token_bytes(self.mechanism.key_size),
                server_key=secrets.token_bytes(self.mechanism.key_size),
                iterations=self.mechanism.min_iterations,
            )
        self._first = first
        self._credential = credential
        self._server_first = (
            f"r={first.nonce}{self._server_nonce},s={_b64(credential.salt)},"
            f"i={credential.iterations}"
        )
        return self._server_first.encode()

    def _on_client_final(self, token: bytes) -> bytes:
        first, credential = self._first, self._credential
        assert first is not None and credential is not None
        text = _text(token, "client-final message")
        attributes = _attributes(text, "client-final message")
        if len(attributes) < 3 or [k for k, _ in attributes[:2]] != ["c", "r"]:
            raise ScramError("malformed client-final message")
        if attributes[-1][0] != "p":
            raise ScramError("malformed client-final message: no proof")
        channel_binding = _unb64(attributes[0][1], "channel binding")
        if channel_binding != first.gs2_header.encode():
            raise ScramError("channel binding does not match the client-first message")
        # Kafka's server checks that the nonce ends with the one it sent, not that it
        # equals it, and librdkafka before 2.1 sends its own nonce in front of that
        # (client nonce + client nonce + server nonce): accepted as Kafka accepts it.
        # The proof covers the message as sent, so this weakens nothing.
        if not attributes[1][1].endswith(first.nonce + self._server_nonce):
            raise ScramError("nonce does not match")
        proof = _unb64(attributes[-1][1], "client proof")
        without_proof = text[: text.rindex(",p=")]
        auth_message = f"{first.bare},{self._server_first},{without_proof}".encode()
        m = self.mechanism
        client_signature = m.hmac(credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise ScramError("invalid credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        matches = hmac.compare_digest(m.hash(client_key), credential.stored_key)
        if not (matches and self._known):
            raise ScramError("invalid credentials")
        self.complete = True
        self.username = first.username
        return f"v={_b64(m.hmac(credential.server_key, auth_message))}".encode()


# ---------------------------------------------------------------------------------------
# Client
# ---------------------------------------------------------------------------------------


class ScramClient:
    """The client side: :meth:`first`, then :meth:`final` with the server's first
    message, then :meth:`verify` with its final one (which proves the server knew the
    credential too)."""

    def __init__(
        self, mechanism: ScramMechanism, username: str, password: str, nonce: str | None = None
    ):
        self.mechanism = mechanism
        self._username = username
        self._password = password
        self._nonce = nonce if nonce is not None else secrets.token_urlsafe(24)
        self._auth_message = b""
        self._salted = b""

    def first(self) -> bytes:
        return f"n,,n={_escape_name(self._username)},r={self._nonce}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = _text(server_first, "server-first message")
        attributes = dict(_attributes(text, "server-first message"))
        if "e" in attributes:
            raise ScramError(f"server refused: {attributes['e']}")
        nonce, salt_text, iterations_text = (attributes.get(k) for k in ("r", "s", "i"))
        if nonce is None or salt_text is None or iterations_text is None:
            raise ScramError("malformed server-first message")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise ScramError("server nonce does not extend the client's")
        if not iterations_text.isdigit():
            raise ScramError("malformed iteration count")
        iterations = int(iterations_text)
        if not self.mechanism.min_iterations <= iterations <= 10 * self.mechanism.max_iterations:
            raise ScramError(f"iteration count {iterations} out of range")
        salt = _unb64(salt_text, "salt")
        m = self.mechanism
        self._salted = salted_password(m, self._password, salt, iterations)
        client_key = m.hmac(self._salted, b"Client Key")
        stored_key = m.hash(client_key)
        without_proof = f"c={_b64(b'n,,')},r={nonce}"
        bare = self.first().decode()[3:]
        self._auth_message = f"{bare},{text},{without_proof}".encode()
        signature = m.hmac(stored_key, self._auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        text = _text(server_final, "server-final message")
        attributes = dict(_attributes(text, "server-final message"))
        if "e" in attributes:
            raise ScramError(f"server refused: {attributes['e']}")
        expected = self.mechanism.hmac(
            self.mechanism.hmac(self._salted, b"Server Key"), self._auth_message
        )
        if not hmac.compare_digest(_unb64(attributes.get("v", ""), "server signature"), expected):
            raise ScramError("the server's signature is wrong: it does not know the credential")
