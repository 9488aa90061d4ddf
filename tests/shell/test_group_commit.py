"""Group commit tells each waiter whether its records are durable: a failed flush
fails its waiters (it never completes them as if the fsync had worked), while the
partitions whose flush worked are completed as before."""

from __future__ import annotations

import asyncio
import errno

from odradek.broker.partition import LocalPartition
from odradek.shell.group_commit import GroupCommit
from tests.broker.harness import new_harness


def test_a_failed_flush_fails_its_waiters_and_only_theirs() -> None:
    async def scenario() -> None:
        h = new_harness()
        h.add_topic("t", [[h.node_id], [h.node_id]])
        flushed: list[tuple[str, int]] = []

        def on_flushed(partition: LocalPartition) -> None:
            flushed.append(partition.key)

        commit = GroupCommit(
            lambda: h.state.partitions.values(), h.state.partitions.get, on_flushed
        )
        flusher = asyncio.create_task(commit.run())
        good, bad = ("t", 0), ("t", 1)
        ends = {good: h.append("t", 0), bad: h.append("t", 1)}
        h.disk.fail_next("fsync", errno.EIO, path=h.partition("t", 1).log.directory)
        failed = await commit.await_flush(ends)
        assert failed == {bad}
        assert h.partition("t", 1).log.offline is not None
        assert h.partition("t", 1).log.recovery_point < ends[bad]
        assert h.partition("t", 0).log.recovery_point == ends[good]
        # A waiter that comes after the failure is told at once, not left hanging.
        assert await commit.await_flush({bad: ends[bad]}) == {bad}
        assert await commit.await_flush({good: ends[good]}) == frozenset()
        assert good in flushed
        flusher.cancel()

    asyncio.run(scenario())


def test_a_waiter_whose_records_were_truncated_away_is_not_durable() -> None:
    async def scenario() -> None:
        h = new_harness()
        h.add_topic("t", [[h.node_id]])
        commit = GroupCommit(
            lambda: h.state.partitions.values(), h.state.partitions.get, lambda p: None
        )
        flusher = asyncio.create_task(commit.run())
        key = ("t", 0)
        end = h.append("t", 0, batches=2)
        h.partition("t", 0).log.truncate_to(3, 0, "test")
        assert await commit.await_flush({key: end}) == {key}
        flusher.cancel()

    asyncio.run(scenario())
