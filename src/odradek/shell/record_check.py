"""The record-check thread: where the records of very large produce requests are checked,
off the event loop.

A produce handler checks a request's records itself, on the loop, unless the request
carries more than 8,192 records or a batch that decompresses to more than the loop's
4 MiB buffer (see ``broker/record_validation.py``); then it returns
:class:`~odradek.broker.effects.AwaitRecordCheck`, and the check (pure: it reads the
request's bytes) runs here, on one long-lived thread that owns one
:class:`~odradek.protocol.record_batch.DecompressBuffer` bounded by
``socket.request.max.bytes``.

This is not for speed: the walk holds the GIL, and a decompression on this thread waits
for the GIL at its start and at its end while the loop runs, so a check costs more here
than on the loop. It is so that no request, however large or however inflated once
decompressed, holds the loop for longer than a GIL switch interval (5 ms) at a time.

One thread, not a pool: the checks of all connections queue here, which bounds the
memory decompression takes to one buffer, whatever the number of producers.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any

from odradek.protocol.record_batch import DecompressBuffer

__all__ = ["RecordCheckThread"]

_Job = tuple[Callable[[DecompressBuffer], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


class RecordCheckThread:
    """Runs record checks on one thread, each with the thread's decompression buffer.

    Handing a check over costs a queue put and one ``call_soon_threadsafe`` when it is
    done (as :class:`~odradek.shell.group_commit.SyncThread` does for fsyncs), less than
    ``asyncio.to_thread`` with its executor future and chained asyncio future.
    """

    def __init__(self, decompress_limit: int) -> None:
        self._decompress_limit = decompress_limit
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    async def run(self, check: Callable[[DecompressBuffer], Any]) -> Any:
        """``check(buffer)`` on the thread; its result, or the exception it raised."""
        loop = asyncio.get_running_loop()
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._work, args=(self._jobs,), name="odradek-records", daemon=True
            )
            self._thread.start()
        future: asyncio.Future[Any] = loop.create_future()
        self._jobs.put((check, loop, future))
        return await future

    def stop(self) -> None:
        """Let the thread end once the check it runs (if any) is done."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread = None
            # A later run starts a new thread with a queue of its own.
            self._jobs = queue.SimpleQueue()

    def _work(self, jobs: queue.SimpleQueue[_Job | None]) -> None:
        buffer = DecompressBuffer(self._decompress_limit)
        while True:
            job = jobs.get()
            if job is None:
                return
            check, loop, future = job
            outcome: Any
            failed = False
            try:
                outcome = check(buffer)
            except BaseException as e:  # handed to the waiting coroutine, which raises it
                outcome, failed = e, True
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(_settle, future, outcome, failed)


def _settle(future: asyncio.Future[Any], outcome: Any, failed: bool) -> None:
    if future.done():
        return  # the waiting request was cancelled (the node is stopping)
    if failed:
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
