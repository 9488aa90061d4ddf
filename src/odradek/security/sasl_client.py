"""The client side of a SASL login, for a node or an ``odradek`` command: the tokens to
send in SaslAuthenticate requests, one after another, until the server's last answer
has been checked. Pure; the connection that carries the tokens is the shell's."""

from __future__ import annotations

from typing import Protocol

from odradek.security.plain import plain_token
from odradek.security.sasl_keys import PLAIN, ClientCredentials
from odradek.security.scram import MECHANISMS as SCRAM_MECHANISMS
from odradek.security.scram import ScramClient

__all__ = ["MechanismClient", "mechanism_client"]


class MechanismClient(Protocol):
    def first(self) -> bytes:
        """The first token."""
        ...

    def next(self, challenge: bytes) -> bytes | None:
        """The token answering the server's ``challenge``; None once the exchange is
        complete (the server's last answer checked). Raises MechanismError."""
        ...


class _PlainClient:
    def __init__(self, credentials: ClientCredentials) -> None:
        self._token = plain_token(credentials.username, credentials.password)

    def first(self) -> bytes:
        return self._token

    def next(self, challenge: bytes) -> bytes | None:
        return None


class _ScramClient:
    def __init__(self, credentials: ClientCredentials) -> None:
        self._client = ScramClient(
            SCRAM_MECHANISMS[credentials.mechanism], credentials.username, credentials.password
        )
        self._step = 0

    def first(self) -> bytes:
        return self._client.first()

    def next(self, challenge: bytes) -> bytes | None:
        self._step += 1
        if self._step == 1:
            return self._client.final(challenge)
        self._client.verify(challenge)
        return None


def mechanism_client(credentials: ClientCredentials) -> MechanismClient:
    if credentials.mechanism == PLAIN:
        return _PlainClient(credentials)
    return _ScramClient(credentials)
