"""What every SASL mechanism's server side is to the exchange that drives it."""

from __future__ import annotations

from typing import Protocol

__all__ = ["MechanismError", "MechanismServer"]


class MechanismError(Exception):
    """The exchange failed. The message goes to the client (SaslAuthenticate's
    error_message), so it names what was wrong without any secret."""


class MechanismServer(Protocol):
    """One server side of one exchange: the client's tokens in, the answers out."""

    complete: bool
    username: str | None
    """The authenticated user, once complete."""
    claimed: str | None
    """The user the client said it is (for the log line of a failed login)."""

    def evaluate(self, token: bytes) -> bytes:
        """The answer to the client's next token; :class:`MechanismError` ends it."""
        ...
