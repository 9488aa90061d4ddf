"""The worker thread under group commit, the quorum's sync and the record checks: work
runs off the loop in order, results and exceptions come back on the loop, a failure
never ends the thread, and a stop never ends a thread started after it."""

from __future__ import annotations

import asyncio
import threading
from functools import partial

import pytest

from odradek.shell.worker_thread import WorkerThread


def test_work_runs_on_the_thread_in_order_and_its_result_comes_back() -> None:
    async def scenario() -> None:
        worker = WorkerThread("odradek-test")
        ran: list[tuple[int, str]] = []

        def work(n: int) -> int:
            ran.append((n, threading.current_thread().name))
            return n * 10

        results = await asyncio.gather(*(worker.run(partial(work, n)) for n in range(5)))
        assert results == [0, 10, 20, 30, 40]
        assert ran == [(n, "odradek-test") for n in range(5)]
        worker.stop()

    asyncio.run(scenario())


def test_an_exception_comes_back_and_the_thread_goes_on() -> None:
    async def scenario() -> None:
        worker = WorkerThread("odradek-test")

        def broken() -> int:
            raise ZeroDivisionError

        with pytest.raises(ZeroDivisionError):
            await worker.run(broken)
        told: list[tuple[object, bool]] = []
        done = asyncio.Event()

        def tell(outcome: object, failed: bool) -> None:
            told.append((outcome, failed))
            done.set()

        worker.submit(lambda: OSError(5, "EIO"), tell)  # an exception returned, not raised
        await done.wait()
        assert len(told) == 1 and isinstance(told[0][0], OSError) and told[0][1] is False
        assert await worker.run(lambda: 7) == 7
        worker.stop()

    asyncio.run(scenario())


def test_a_stop_ends_its_own_thread_never_a_later_one() -> None:
    async def scenario() -> None:
        worker = WorkerThread("odradek-test")
        release = threading.Event()
        first = asyncio.ensure_future(worker.run(release.wait))  # the old thread is busy
        await asyncio.sleep(0.01)
        old = worker._thread
        worker.stop()
        # Work handed over after the stop gets a thread of its own and is done, while
        # the old thread still finishes what it ran.
        # (A stop that ended the later thread would leave this work waiting behind the
        # old thread's: the bound turns that hang into a failure.)
        try:
            ran_on = await asyncio.wait_for(worker.run(threading.current_thread), 5)
        finally:
            release.set()
        assert ran_on is not old
        assert await first is True
        assert old is not None
        old.join(timeout=5)
        assert not old.is_alive()
        worker.stop()

    asyncio.run(scenario())
