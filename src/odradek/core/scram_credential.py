"""The stored form of a SCRAM credential, shared by the layers that keep and check one.

It lives here, at the bottom, because two layers of one rank need it and may not import
each other: ``controller`` keeps credentials in the metadata image (replayed from
``UserScramCredentialRecord``) and ``security`` checks a client's proof against them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ScramCredential"]


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the server keeps of a password (RFC 5802 section 3): never the password.

    The keys stay out of ``repr``: a credential printed in a log line or an assertion
    message must not hand out the server key, which lets its holder pose as the server.
    """

    salt: bytes
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int
