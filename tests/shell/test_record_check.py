"""The record-check thread: checks run off the event loop with the thread's own
decompression buffer, the loop goes on meanwhile, and a bug in a check reaches the
waiting request instead of killing the thread."""

from __future__ import annotations

import asyncio
import threading

import pytest

from odradek.protocol.compression import (
    DecompressBuffer,
)
from odradek.protocol.record_batch import (
    Compression,
    validate_batch,
)
from odradek.protocol.record_codec import (
    Record,
    encode_batch,
)
from odradek.protocol.record_scan import (
    scan_records,
)
from odradek.shell.record_check import RecordCheckThread


def test_checks_run_on_the_thread_with_one_buffer_of_the_given_limit() -> None:
    batch = encode_batch(
        [Record(offset_delta=0, timestamp=7, value=b"x")], compression=Compression.ZSTD
    )
    seen: list[tuple[str, DecompressBuffer]] = []

    def check(buffer: DecompressBuffer) -> int:
        seen.append((threading.current_thread().name, buffer))
        header = validate_batch(batch)
        return scan_records(buffer.records(batch, header), header).max_timestamp

    async def scenario() -> None:
        records = RecordCheckThread(1 << 20)
        assert await records.run(check) == 7
        assert await records.run(check) == 7
        records.stop()

    asyncio.run(scenario())
    (first_thread, first), (second_thread, second) = seen
    assert first_thread == second_thread == "odradek-records"
    assert first is second and first.limit == 1 << 20


def test_the_event_loop_goes_on_while_a_check_runs() -> None:
    started = threading.Event()
    release = threading.Event()

    def slow(buffer: DecompressBuffer) -> str:
        started.set()
        assert release.wait(10)
        return "checked"

    async def scenario() -> None:
        records = RecordCheckThread(1024)
        task = asyncio.ensure_future(records.run(slow))
        while not started.is_set():
            await asyncio.sleep(0.001)
        # The loop runs other work while the check is held on its thread.
        ticks = 0
        for _ in range(5):
            await asyncio.sleep(0)
            ticks += 1
        assert not task.done() and ticks == 5
        release.set()
        assert await task == "checked"
        records.stop()

    asyncio.run(scenario())


def test_a_bug_in_a_check_is_raised_in_the_request_and_the_thread_survives() -> None:
    def broken(buffer: DecompressBuffer) -> None:
        raise ZeroDivisionError

    async def scenario() -> None:
        records = RecordCheckThread(1024)
        with pytest.raises(ZeroDivisionError):
            await records.run(broken)
        assert await records.run(lambda buffer: buffer.limit) == 1024
        records.stop()
        # A stopped thread is started again by the next check.
        assert await records.run(lambda buffer: "again") == "again"
        records.stop()

    asyncio.run(scenario())


def test_a_large_compressed_batch_checked_on_the_thread() -> None:
    records = [Record(offset_delta=i, timestamp=i, value=bytes(1000)) for i in range(2000)]
    batch = encode_batch(records, compression=Compression.ZSTD)

    def check(buffer: DecompressBuffer) -> int:
        header = validate_batch(batch)
        return scan_records(buffer.records(batch, header), header).max_timestamp

    async def scenario() -> int:
        thread = RecordCheckThread(4 << 20)
        try:
            result: int = await thread.run(check)
        finally:
            thread.stop()
        return result

    assert asyncio.run(scenario()) == 1999
