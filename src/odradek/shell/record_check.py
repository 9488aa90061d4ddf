"""The record-check thread: where the records of very large produce requests are checked,
off the event loop.

A produce handler checks a request's records itself, on the loop, unless the request
carries more than 8,192 records or a batch that decompresses to more than the loop's
4 MiB buffer (see ``broker/record_validation.py``); then it returns
:class:`~odradek.broker.effects.AwaitRecordCheck`, and the check (pure: it reads the
request's bytes) runs here, on one long-lived thread that owns one
:class:`~odradek.protocol.compression.DecompressBuffer` bounded by
``socket.request.max.bytes``.

This is not for speed: the walk holds the GIL, and a decompression on this thread waits
for the GIL at its start and at its end while the loop runs, so a check costs more here
than on the loop. It is so that no request, however large or however inflated once
decompressed, holds the loop for longer than a GIL switch interval (5 ms) at a time.

One thread, not a pool: the checks of all connections queue here, which bounds the
memory decompression takes to one buffer, whatever the number of producers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any

from odradek.protocol.compression import (
    DecompressBuffer,
)
from odradek.shell.worker_thread import WorkerThread

__all__ = ["RecordCheckThread"]


class RecordCheckThread:
    """Runs record checks on one thread, each with the thread's decompression buffer
    (a :class:`~odradek.shell.worker_thread.WorkerThread`)."""

    def __init__(self, decompress_limit: int) -> None:
        self._decompress_limit = decompress_limit
        self._worker = WorkerThread("odradek-records")
        # The buffer belongs to the thread that uses it: a thread started after stop()
        # makes its own.
        self._local = threading.local()

    async def run(self, check: Callable[[DecompressBuffer], Any]) -> Any:
        """``check(buffer)`` on the thread; its result, or the exception it raised."""
        return await self._worker.run(partial(self._check, check))

    def stop(self) -> None:
        """Let the thread end once the check it runs (if any) is done."""
        self._worker.stop()

    def _check(self, check: Callable[[DecompressBuffer], Any]) -> Any:
        buffer: DecompressBuffer | None = getattr(self._local, "buffer", None)
        if buffer is None:
            buffer = self._local.buffer = DecompressBuffer(self._decompress_limit)
        return check(buffer)
