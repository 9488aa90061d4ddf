"""Answering a write with acks=all: once its batches are flushed (with
``odradek.flush.before.ack``) and the in-sync replicas hold them.

Produce and WriteTxnMarkers (the transaction coordinator's markers, which Kafka appends
with acks=all too) both end this way: :func:`await_acks` takes the offset each
partition's write must reach, the replica it went to, and two callbacks: ``fail`` to
mark a partition's result with an error (unless it already failed), ``reply`` for the
answer once every partition is settled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from odradek.broker.effects import AwaitFlush, AwaitReplication, Outcome
from odradek.broker.partition import LocalPartition
from odradek.broker.state import BrokerState
from odradek.protocol.error_codes import ErrorCode

Key = tuple[str, int]
Fail = Callable[[Key, ErrorCode, str | None], None]
"""Mark partition ``key``'s result failed with a code and a message (None: no message),
unless it failed already."""


def await_acks(
    state: BrokerState,
    waits: dict[Key, int],
    appended: dict[Key, LocalPartition],
    timeout_ms: int,
    fail: Fail,
    reply: Callable[[], Outcome],
) -> Outcome:
    """Flush first where the node acknowledges only synced batches, then wait for the
    in-sync replicas."""
    write = _Write(state, appended, timeout_ms, fail, reply)
    if state.settings.flush_before_ack:
        return AwaitFlush(waits, lambda failed: write.after_flush(waits, failed))
    return write.await_replication(waits)


@dataclass(frozen=True, slots=True)
class _Write:
    state: BrokerState
    appended: dict[Key, LocalPartition]
    timeout_ms: int
    fail: Fail
    reply: Callable[[], Outcome]

    def after_flush(self, waits: dict[Key, int], failed: frozenset[Key]) -> Outcome:
        """A batch whose flush failed is never acknowledged, nor waited on further."""
        for key in failed:
            if key in waits:
                self.fail(
                    key,
                    ErrorCode.KAFKA_STORAGE_ERROR,
                    "the log went offline before the batch was flushed",
                )
        return self.await_replication({k: o for k, o in waits.items() if k not in failed})

    def await_replication(self, waits: dict[Key, int]) -> Outcome:
        """Wait until the in-sync replicas hold the batches (the leader's high watermark
        passed them), or the leader says they cannot.

        A partition this node no longer leads in the epoch it appended in (leadership
        moved while the batch was being flushed) answers NOT_LEADER_OR_FOLLOWER: the new
        leader may not have the batch, so it must not be acknowledged here; the writer
        retries there.
        """
        partitions = self.state.partitions
        moved = {key for key in waits if partitions.get(key) is not self.appended.get(key)}
        for key in moved:
            self.fail(key, ErrorCode.NOT_LEADER_OR_FOLLOWER, None)
        replicated = {
            key: offset
            for key, offset in waits.items()
            if key not in moved and self.appended[key].leader_state is not None
        }
        if not replicated:
            return self.reply()

        def answer(errors: dict[Key, int]) -> Outcome:
            for key, error in errors.items():
                if error != ErrorCode.NONE:
                    self.fail(
                        key,
                        ErrorCode(error),
                        "the in-sync replicas fell below min.insync.replicas"
                        if error == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                        else None,
                    )
            return self.reply()

        return AwaitReplication(replicated, answer, self.timeout_ms)
