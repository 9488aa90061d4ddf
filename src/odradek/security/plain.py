"""SASL/PLAIN (RFC 4616) with the users of a JAAS config, as Kafka's PlainLoginModule.

The client sends one message, ``[authzid] NUL authcid NUL password``; the server knows
each user's password from the listener's JAAS options ``user_<name>="<password>"``
(``listener.name.<listener>.plain.sasl.jaas.config``). Passwords are compared in
constant time, and an unknown user is compared against a password too, so the time of
a refusal does not tell a known user from an unknown one. PLAIN sends the password
itself: Kafka's advice, and ours, is to use it over SASL_SSL only.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from odradek.security.mechanism import MechanismError

__all__ = ["PlainError", "PlainServer", "plain_token", "plain_users"]

_USER_PREFIX = "user_"


class PlainError(MechanismError):
    """The client's message is malformed or its credentials are wrong."""


def plain_users(options: Mapping[str, str]) -> dict[str, str]:
    """The users a PlainLoginModule's options define: ``user_alice="secret"``."""
    return {
        key[len(_USER_PREFIX) :]: value
        for key, value in options.items()
        if key.startswith(_USER_PREFIX) and len(key) > len(_USER_PREFIX)
    }


def plain_token(username: str, password: str) -> bytes:
    """The client's message (no authorization id, as Kafka's client sends it)."""
    return b"\0" + username.encode() + b"\0" + password.encode()


class PlainServer:
    """One PLAIN exchange: one message in, an empty answer out, or :class:`PlainError`."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.username: str | None = None
        self.claimed: str | None = None
        self.complete = False

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise PlainError("the exchange is already complete")
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise PlainError("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, username, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise PlainError("Invalid SASL/PLAIN response: not UTF-8") from None
        if not username:
            raise PlainError("Authentication failed: username not specified")
        self.claimed = username
        if not password:
            raise PlainError("Authentication failed: password not specified")
        if authzid and authzid != username:
            raise PlainError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        expected = self._users.get(username)
        # Compared even for an unknown user, so that both take the same time.
        same = hmac.compare_digest(
            password.encode(), (expected if expected is not None else "\0" + password).encode()
        )
        if expected is None or not same:
            raise PlainError("Authentication failed: Invalid username or password")
        self.username = username
        self.complete = True
        return b""
