"""The client side of a SASL login, for a node or an ``odradek`` command: the tokens to
send in SaslAuthenticate requests, one after another, until the server's last answer
has been checked. Pure; the connection that carries the tokens is the shell's."""

from __future__ import annotations

import json
from typing import Protocol

from odradek.security.mechanism import MechanismError
from odradek.security.oauthbearer import OAUTHBEARER, initial_response, unsecured_token
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


class _OAuthBearerClient:
    """An unsecured token (Kafka's ``unsecuredLoginStringClaim_sub``), made at login."""

    def __init__(self, credentials: ClientCredentials, now_s: float) -> None:
        self._credentials = credentials
        self._now_s = now_s
        self._failed: str | None = None

    def first(self) -> bytes:
        c = self._credentials
        return initial_response(unsecured_token(c.username, c.token_lifetime_s, self._now_s))

    def next(self, challenge: bytes) -> bytes | None:
        if self._failed is not None:
            raise MechanismError(f"OAUTHBEARER token refused: {self._failed}")
        if not challenge:
            return None
        # RFC 7628 3.2.2: an error challenge, to be answered %x01; the server's
        # SaslAuthenticate answer to that carries the failure.
        try:
            status = json.loads(challenge).get("status", "?")
        except (ValueError, AttributeError):
            status = "?"
        self._failed = str(status)
        return b"\x01"


def mechanism_client(credentials: ClientCredentials, now_s: float) -> MechanismClient:
    """The client side of ``credentials``' mechanism; ``now_s`` (the wall clock, seconds)
    stamps an unsecured OAUTHBEARER token."""
    if credentials.mechanism == PLAIN:
        return _PlainClient(credentials)
    if credentials.mechanism == OAUTHBEARER:
        return _OAuthBearerClient(credentials, now_s)
    return _ScramClient(credentials)
