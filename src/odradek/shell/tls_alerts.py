"""Send the TLS alert of a failed handshake before closing, which asyncio does not.

When a handshake fails (a client without the certificate ``ssl.client.auth=required``
asks for, one from another CA, no common protocol version) OpenSSL writes a fatal alert
for the peer, and asyncio's ``SSLProtocol`` closes the transport without sending it
(CPython gh-98078, fixed upstream in 2026 by flushing first; Python 3.11, which this
project runs on, has no such fix). The peer then sees a bare close, and Kafka's Java client takes
that for a broker that is down and retries for a minute, where the alert makes it fail
at once with an SSL handshake error naming the cause.

:func:`install` wraps ``SSLProtocol._on_handshake_complete`` so that, on a failure, what
OpenSSL left for the peer is written first (the transport sends it at once: a closed
transport drops only what it could not send). A Python with the fix finds nothing left
to write. Both names are asyncio's internals: if a Python lacks them, nothing is
installed and the close stays bare, as before.
"""

from __future__ import annotations

import contextlib
from asyncio import sslproto
from typing import Any

__all__ = ["install"]

_INSTALLED = "_odradek_sends_alerts"


def install() -> bool:
    """Install the flush (once per process); whether it is in place."""
    protocol: Any = sslproto.SSLProtocol
    if getattr(protocol, _INSTALLED, False):
        return True
    original = getattr(protocol, "_on_handshake_complete", None)
    if original is None or not hasattr(protocol, "_process_outgoing"):
        return False

    def on_handshake_complete(self: Any, handshake_exc: BaseException | None) -> None:
        if handshake_exc is not None and getattr(self, "_transport", None) is not None:
            # Best effort: the connection is failing anyway, and the close must happen.
            with contextlib.suppress(Exception):
                self._process_outgoing()
        original(self, handshake_exc)

    protocol._on_handshake_complete = on_handshake_complete
    setattr(protocol, _INSTALLED, True)
    return True
