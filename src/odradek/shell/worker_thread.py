"""One long-lived worker thread fed by a queue: work that must not hold the event loop.

The node's fsyncs (group commit), the metadata quorum's fsyncs and quorum-state writes,
and the checks of very large produce requests each run on a :class:`WorkerThread` of
their own. Handing it work costs a queue put and, when the work is done, one
``call_soon_threadsafe``, where ``asyncio.to_thread`` builds an executor future, a work
item and a chained asyncio future every time: a follower's flush is on the path of
every acks=all produce and the quorum's on that of every metadata commit, so the
handoff counts.

Work runs in the order it was handed over, one piece at a time. What it returns, or
the exception it raised, comes back on the loop that handed it over; a failure never
ends the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

T = TypeVar("T")

Done = Callable[[Any, bool], None]
"""Told, on the loop, what the work returned (False) or the exception it raised (True)."""

_Job = tuple[Callable[[], Any], asyncio.AbstractEventLoop, Done]


class WorkerThread:
    def __init__(self, name: str) -> None:
        self.name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def submit(self, work: Callable[[], Any], done: Done) -> None:
        """Run ``work()`` on the thread, then ``done(outcome, failed)`` on this loop."""
        loop = asyncio.get_running_loop()
        if self._thread is None:
            self._thread = threading.Thread(
                target=_work, args=(self._jobs,), name=self.name, daemon=True
            )
            self._thread.start()
        self._jobs.put((work, loop, done))

    async def run(self, work: Callable[[], T]) -> T:
        """``work()`` on the thread: what it returns, or the exception it raised."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self.submit(work, partial(_settle, future))
        return await future

    def stop(self) -> None:
        """Let the thread end once the work it runs (if any) is done."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread = None
            # A later submit starts a new thread with a queue of its own, so the old
            # thread's stop can never end the new one.
            self._jobs = queue.SimpleQueue()


def _work(jobs: queue.SimpleQueue[_Job | None]) -> None:
    while True:
        job = jobs.get()
        if job is None:
            return
        work, loop, done = job
        outcome: Any
        failed = False
        try:
            outcome = work()
        except BaseException as e:  # handed back to the loop, which decides what it means
            outcome, failed = e, True
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(done, outcome, failed)


def _settle(future: asyncio.Future[Any], outcome: Any, failed: bool) -> None:
    if future.done():
        return  # the waiter was cancelled (the node is stopping)
    if failed:
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
