"""No long-lived task dies silently: a failure is logged with its stack and is either
handled by the task's own handler or fatal (the node stops with a non-zero exit)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from odradek.shell.supervisor import Supervisor, TaskEnded


async def _fails() -> None:
    await asyncio.sleep(0)
    raise OSError(28, "No space left on device")


async def _returns() -> None:
    await asyncio.sleep(0)


async def _runs() -> None:
    await asyncio.sleep(3600)


def test_an_unhandled_failure_is_logged_with_its_stack_and_fatal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fatal: list[tuple[str, BaseException]] = []

    async def scenario() -> None:
        supervisor = Supervisor(lambda name, error: fatal.append((name, error)))
        supervisor.start("fetcher-2", _fails())
        await asyncio.sleep(0.01)
        assert supervisor.failure is not None and "fetcher-2" in supervisor.failure

    with caplog.at_level(logging.ERROR, logger="odradek.node"):
        asyncio.run(scenario())
    assert [name for name, _ in fatal] == ["fetcher-2"]
    assert isinstance(fatal[0][1], OSError)
    record = next(r for r in caplog.records if "fetcher-2" in r.getMessage())
    assert record.exc_info is not None  # the stack is in the log


def test_a_task_that_returns_although_it_should_run_is_a_failure() -> None:
    fatal: list[BaseException] = []

    async def scenario() -> None:
        supervisor = Supervisor(lambda name, error: fatal.append(error))
        supervisor.start("flusher", _returns())
        supervisor.start("request", _returns(), may_end=True)
        await asyncio.sleep(0.01)

    asyncio.run(scenario())
    assert len(fatal) == 1 and isinstance(fatal[0], TaskEnded)


def test_a_handled_failure_is_not_fatal_and_a_failing_handler_is() -> None:
    fatal: list[str] = []
    handled: list[BaseException] = []

    def broken(error: BaseException) -> None:
        raise RuntimeError("the handler failed too")

    async def scenario() -> None:
        supervisor = Supervisor(lambda name, error: fatal.append(name))
        supervisor.start("group-write", _fails(), on_failure=handled.append)
        supervisor.start("delete", _fails(), on_failure=broken)
        await asyncio.sleep(0.01)

    asyncio.run(scenario())
    assert len(handled) == 1 and isinstance(handled[0], OSError)
    assert fatal == ["delete"]


def test_stopping_cancels_every_task_and_is_no_failure() -> None:
    fatal: list[str] = []

    async def scenario() -> None:
        supervisor = Supervisor(lambda name, error: fatal.append(name))
        tasks = [supervisor.start(f"ticker-{i}", _runs()) for i in range(3)]
        await asyncio.sleep(0)
        await supervisor.stop()
        assert all(task.cancelled() for task in tasks)
        assert supervisor.failure is None

    asyncio.run(scenario())
    assert fatal == []
