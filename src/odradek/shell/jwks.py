"""The keys of an OAUTHBEARER listener's JWKS (``sasl.oauthbearer.jwks.endpoint.url``):
read from a ``file:`` URL once at start, as Kafka does, or fetched from ``http(s)://``
at start and refreshed on a daemon thread. The token checks themselves are pure
(:mod:`odradek.security.oauthbearer`); this is their I/O."""

from __future__ import annotations

import logging
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Final

from odradek.core.errors import ConfigError
from odradek.security.oauthbearer import JWKS_URL, JwksSettings, KeySet

__all__ = ["JwksSource", "jwks_source"]

_log = logging.getLogger("odradek.jwks")


def _fetch(url: str, key: str) -> KeySet:
    """The JWKS at ``url``; ConfigError names ``key``."""
    parsed = urllib.parse.urlsplit(url)
    try:
        if parsed.scheme == "file":
            text: bytes = Path(urllib.request.url2pathname(parsed.path)).read_bytes()
        else:
            request = urllib.request.Request(url, headers={"Accept": "application/json"})
            with urllib.request.urlopen(request, timeout=10) as response:
                text = response.read(4 * 1024 * 1024)
    except OSError as e:
        raise ConfigError(f"{key}: cannot read the JWKS at {url}: {e}") from None
    try:
        return KeySet.parse(text)
    except ValueError as e:
        raise ConfigError(f"{key}: the JWKS at {url} is unusable: {e}") from None


class JwksSource:
    """The keys of ``sasl.oauthbearer.jwks.endpoint.url``: a ``file:`` JWKS read once at
    start (as Kafka does); an ``http(s)://`` one fetched at start, then again every
    ``refresh_ms`` and soon after a token names a key it does not have, on a daemon
    thread (a failed refresh keeps the keys it has)."""

    _MIN_REFETCH_S: Final = 10.0

    def __init__(self, url: str, refresh_ms: int, key: str = JWKS_URL) -> None:
        self._url, self._key = url, key
        self._keys = _fetch(url, key)
        self._fetched_at = time.monotonic()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if not url.startswith("file:") and refresh_ms > 0:
            self._thread = threading.Thread(
                target=self._refresh, args=(refresh_ms / 1000,), name="jwks-refresh", daemon=True
            )
            self._thread.start()

    @property
    def keys(self) -> KeySet:
        return self._keys

    def missing(self) -> None:
        """A token named a key the JWKS lacks: fetch it again soon (rotated keys)."""
        if self._thread is not None:
            self._wake.set()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _refresh(self, interval_s: float) -> None:
        while not self._stop.is_set():
            asked = self._wake.wait(interval_s)
            self._wake.clear()
            if asked:
                # For unknown keys: not more than one fetch per _MIN_REFETCH_S.
                pause = self._fetched_at + self._MIN_REFETCH_S - time.monotonic()
                if pause > 0 and self._stop.wait(pause):
                    return
            if self._stop.is_set():
                return
            try:
                self._keys = _fetch(self._url, self._key)
            except ConfigError as e:
                _log.warning("JWKS refresh failed, keeping %d keys: %s", len(self._keys), e)
            self._fetched_at = time.monotonic()


def jwks_source(settings: JwksSettings) -> JwksSource:
    """The key source of a listener's JWKS settings (what ``build_validator`` takes)."""
    return JwksSource(settings.url, settings.refresh_ms)
