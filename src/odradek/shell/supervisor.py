"""The supervisor of a node's long-lived tasks: no task dies silently.

Every task that should live as long as the node (the flusher, housekeeping, tickers,
the Raft driver, fetchers, the broker's heartbeats) is started through
:meth:`Supervisor.start`. When one ends by an exception, or returns although it was
meant to run until cancelled, its failure is logged with its stack and then either
handled, by the ``on_failure`` given when it was started (the task may be started
again, or a log dir taken offline), or it is fatal: the supervisor calls its
``on_fatal``, and the node stops with a non-zero exit status. A replica that stops
working must never look alive to the cluster.

Cancellation is not a failure: it is how the node stops its tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger("odradek.node")


class TaskEnded(Exception):
    """A task meant to run until cancelled returned."""


class Supervisor:
    def __init__(self, on_fatal: Callable[[str, BaseException], None]) -> None:
        self._on_fatal = on_fatal
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopping = False
        self.failure: str | None = None
        """Why the node must stop (the first fatal failure), or None."""

    def start(
        self,
        name: str,
        coroutine: Coroutine[Any, Any, Any],
        *,
        on_failure: Callable[[BaseException], None] | None = None,
        may_end: bool = False,
    ) -> asyncio.Task[Any]:
        """Run ``coroutine`` as the task ``name``; ``on_failure`` handles its failure
        (otherwise it is fatal). With ``may_end`` a normal return is not a failure."""
        task = asyncio.get_running_loop().create_task(coroutine, name=name)
        self._tasks.add(task)
        task.add_done_callback(lambda done: self._ended(done, on_failure, may_end))
        return task

    def _ended(
        self,
        task: asyncio.Task[Any],
        on_failure: Callable[[BaseException], None] | None,
        may_end: bool,
    ) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if self._stopping:
            # The node is stopping anyway: a task that ends now, or fails on its way out,
            # changes nothing but is still said.
            if error is not None:
                log.warning("task %s failed while stopping", task.get_name(), exc_info=error)
            return
        if error is None:
            if may_end:
                return
            error = TaskEnded(f"task {task.get_name()} ended, but it should run until stopped")
        log.error("task %s failed", task.get_name(), exc_info=error)
        if on_failure is not None:
            try:
                on_failure(error)
                return
            except Exception as handling:  # the handler itself failed: nothing handles it
                log.error("handling the failure of %s failed", task.get_name(), exc_info=handling)
                error = handling
        if self.failure is None:
            self.failure = f"task {task.get_name()} failed: {error!r}"
        self._on_fatal(task.get_name(), error)

    async def stop(self) -> None:
        """Cancel every task and wait for them to end."""
        self._stopping = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            # A failure was logged by _ended already.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
