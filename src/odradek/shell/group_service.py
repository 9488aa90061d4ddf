"""The group service: the pure group coordinator on this node's event loop.

:class:`GroupService` owns the node's :class:`~odradek.coordinator.GroupCoordinator`:
it hands it the group requests (the ``GroupCall`` effect) and answers each once the
coordinator completes it; it appends the coordinator's writes to their
``__consumer_offsets`` partition, waits until they are flushed and held by the in-sync
replicas, and reports each with ``write_completed``; it fires the coordinator's timers;
and it makes this node the coordinator of every offsets partition led here, rebuilding
its groups from the partition's records, and no longer of those led elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any, Protocol

from odradek.broker import groups
from odradek.broker.effects import GroupCall
from odradek.broker.group_authorization import May, screen
from odradek.broker.partition import LocalPartition
from odradek.broker.state import BrokerState
from odradek.coordinator import GroupCoordinator, Output, Write
from odradek.core.errors import LogOfflineError
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.record_batch import (
    iter_batches,
)
from odradek.protocol.record_codec import (
    Record,
    decode_records,
    encode_batch,
)
from odradek.shell.clock import now_ms, steady_ms
from odradek.shell.effects import ReplicaWaits
from odradek.shell.supervisor import Supervisor
from odradek.storage.log import PartitionLog

PartitionKey = tuple[str, int]


class Durability(Protocol):
    """Group commit, as a write waits for its flush."""

    async def await_flush(self, offsets: dict[PartitionKey, int]) -> frozenset[PartitionKey]: ...


class Readers(Protocol):
    """Long-polling fetches, woken by new records."""

    def wake(self, key: PartitionKey) -> None: ...


class GroupService:
    def __init__(
        self,
        state: BrokerState,
        coordinator: GroupCoordinator,
        durability: Durability,
        readers: Readers,
        supervisor: Supervisor,
        *,
        offsets_commit_timeout_ms: int,
    ) -> None:
        self._state = state
        self.coordinator = coordinator
        self._durability = durability
        self._readers = readers
        self._supervisor = supervisor
        self._offsets_commit_timeout_ms = offsets_commit_timeout_ms
        self.replication: ReplicaWaits | None = None
        """Set once the broker starts: a write waits for the in-sync replicas too."""
        self._waiters: dict[object, asyncio.Future[Any]] = {}
        self._timer_wakeup = asyncio.Event()
        self._loaded_offsets_partitions: set[int] = set()

    def load_offsets_partitions(self) -> None:
        """Become the coordinator of every ``__consumer_offsets`` partition led here,
        rebuilding its groups from the partition's records."""
        for index in sorted(self._loaded_offsets_partitions):
            hosted = self._state.partitions.get((groups.OFFSETS_TOPIC, index))
            if hosted is None or not hosted.is_leader:
                # Another broker leads it now and coordinates its groups.
                self._loaded_offsets_partitions.discard(index)
                self._apply_output(self.coordinator.unload(index, now_ms=steady_ms()))
        for (topic, index), partition in self._state.partitions.items():
            if topic != groups.OFFSETS_TOPIC or index in self._loaded_offsets_partitions:
                continue
            if not partition.is_leader:
                continue  # a follower replicates the partition; its leader coordinates
            records: list[tuple[bytes, bytes | None]] = []
            for batch in _batches(partition.log):
                for record in decode_records(batch):
                    if record.key is not None:
                        records.append((record.key, record.value))
            self._loaded_offsets_partitions.add(index)
            self._apply_output(self.coordinator.load(index, records, now_ms=steady_ms()))

    async def call(self, call: GroupCall, peer: str) -> Any:
        """Hand a group request to the coordinator; its response once completed. What the
        principal may not do of it is answered here, never handed over."""
        screened = screen(call.request, call.version, self._may(call))
        if screened.request is None:
            return screened.finish(None)
        return screened.finish(
            await self._coordinate(dataclasses.replace(call, request=screened.request), peer)
        )

    def _may(self, call: GroupCall) -> May:
        authorization = self._state.authorization
        if authorization is None:
            return lambda operation, resource_type, name: True
        authorizer = authorization.authorizer(self._state.image.acls)
        return lambda operation, resource_type, name: authorizer.authorize(
            call.principal, call.host, operation, resource_type, name
        )

    async def _coordinate(self, call: GroupCall, peer: str) -> Any:
        loop = asyncio.get_running_loop()
        token = object()
        future: asyncio.Future[Any] = loop.create_future()
        self._waiters[token] = future
        output = self.coordinator.handle(
            token,
            call.request,
            call.version,
            now_ms=steady_ms(),
            client_id=call.client_id,
            client_host="/" + peer.rsplit(":", 1)[0],
            # The cluster's partitions (the image): the coordinator need not host them.
            partition_exists=self._state.knows_partition,
        )
        self._apply_output(output)
        try:
            return await future
        finally:
            self._waiters.pop(token, None)

    def _apply_output(self, output: Output) -> None:
        for completion in output.completions:
            future = self._waiters.pop(completion.token, None)
            if future is not None and not future.done():
                future.set_result(completion.response)
        for write in output.writes:
            self._write_group_records(write)
        self._timer_wakeup.set()

    def _write_group_records(self, write: Write) -> None:
        """Append a write to its ``__consumer_offsets`` partition; report it once durable."""
        partition = self._state.led_partition((groups.OFFSETS_TOPIC, write.partition))
        now = now_ms()
        refused = ErrorCode.NOT_LEADER_OR_FOLLOWER if partition is None else ErrorCode.NONE
        if partition is not None and partition.leader_state is not None:
            # Group state is written like an acks=all produce: only with enough replicas.
            refused = partition.leader_state.check_produce(-1)
        if partition is None or refused != ErrorCode.NONE:
            output = self.coordinator.write_completed(
                write.write_id, now_ms=steady_ms(), error=refused
            )
            self._apply_output(output)
            return
        batch = bytearray(
            encode_batch(
                [
                    Record(offset_delta=i, timestamp=now, key=key, value=value)
                    for i, (key, value) in enumerate(write.records)
                ]
            )
        )
        try:
            info = partition.log.append_as_leader(memoryview(batch), partition.leader_epoch, now)
        except LogOfflineError:
            self._apply_output(
                self.coordinator.write_completed(
                    write.write_id, now_ms=steady_ms(), error=ErrorCode.KAFKA_STORAGE_ERROR
                )
            )
            return
        if partition.leader_state is not None:
            partition.leader_state.on_append(partition.log.log_end_offset)
            self._readers.wake(partition.key)

        def failed(error: BaseException) -> None:
            # The coordinator must hear of every write, or its group waits forever.
            self._apply_output(
                self.coordinator.write_completed(
                    write.write_id, now_ms=steady_ms(), error=ErrorCode.UNKNOWN_SERVER_ERROR
                )
            )

        self._supervisor.start(
            f"group-write-{write.partition}",
            self._complete_group_write(write, partition, info.last_offset + 1),
            on_failure=failed,
            may_end=True,
        )

    async def _complete_group_write(
        self, write: Write, partition: LocalPartition, end_offset: int
    ) -> None:
        failed = await self._durability.await_flush({partition.key: end_offset})
        error: int = ErrorCode.KAFKA_STORAGE_ERROR if failed else ErrorCode.NONE
        if error == ErrorCode.NONE and self.replication is not None:
            # Durable here is not enough: the in-sync replicas must hold it too.
            errors = await self.replication.await_replication(
                {partition.key: end_offset}, self._offsets_commit_timeout_ms
            )
            error = errors.get(partition.key, ErrorCode.NONE)
        self._apply_output(
            self.coordinator.write_completed(write.write_id, now_ms=steady_ms(), error=error)
        )

    async def ticker(self) -> None:
        """Fire the coordinator's timers: rebalance and session timeouts, retention."""
        while True:
            deadline = self.coordinator.next_deadline_ms()
            delay = 1.0 if deadline is None else max(deadline - steady_ms(), 0) / 1000
            self._timer_wakeup.clear()
            # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a
            # cancellation that races with the wake-up, and the node then never stops.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(delay, 1.0)):
                    await self._timer_wakeup.wait()
            self._apply_output(self.coordinator.tick(steady_ms()))
            # tick() may set the wake-up itself; avoid spinning on it.
            self._timer_wakeup.clear()


def _batches(partition_log: PartitionLog, start: int | None = None) -> Iterator[bytes]:
    """Every batch of a log from ``start`` (default: the log start), in order, read a
    megabyte at a time."""
    offset = partition_log.log_start_offset if start is None else start
    while offset < partition_log.log_end_offset:
        found = partition_log.read(offset, 1 << 20)
        if found is None:
            break
        data = found.read()
        before = offset
        for header in iter_batches(data):
            yield data[header.position : header.end]
            offset = header.next_offset
        if offset == before:
            break  # reads return whole batches; no progress means nothing more to read
