"""The fsync thread of group commit: tickets run off the event loop, failures come back
by ticket, and a bug in a ticket reaches the flusher instead of killing the thread."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from odradek.shell.group_commit import SyncThread


class Ticket:
    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error
        self.ran_on: str | None = None

    def run(self) -> None:
        self.ran_on = threading.current_thread().name
        if self.error is not None:
            raise self.error


def test_tickets_run_on_the_thread_and_their_os_errors_come_back_by_ticket() -> None:
    async def scenario() -> None:
        sync = SyncThread()
        good, bad = Ticket(), Ticket(OSError(5, "EIO"))
        tickets: Any = [(None, good), (None, bad)]
        failures = await sync.run(tickets)
        assert good.ran_on == bad.ran_on == "odradek-fsync"
        assert list(failures) == [id(bad)] and failures[id(bad)].errno == 5
        # The thread goes on with the next flush.
        again = Ticket()
        assert await sync.run([(None, again)]) == {}  # type: ignore[list-item]
        assert again.ran_on == "odradek-fsync"
        sync.stop()

    asyncio.run(scenario())


def test_a_bug_in_a_ticket_is_raised_in_the_flusher_and_the_thread_survives() -> None:
    async def scenario() -> None:
        sync = SyncThread()
        with pytest.raises(ZeroDivisionError):
            await sync.run([(None, Ticket(ZeroDivisionError()))])  # type: ignore[list-item]
        assert await sync.run([(None, Ticket())]) == {}  # type: ignore[list-item]
        sync.stop()

    asyncio.run(scenario())


def test_stop_ends_the_thread() -> None:
    async def scenario() -> None:
        sync = SyncThread()
        await sync.run([])
        thread = sync._worker._thread
        assert thread is not None and thread.is_alive()
        sync.stop()
        thread.join(timeout=5)
        assert not thread.is_alive()

    asyncio.run(scenario())
