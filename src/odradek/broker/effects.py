"""What a request handler returns: a response now, or an effect for the shell to carry out.

Handlers are pure and never wait. When an answer depends on something only the shell
can bring about (records committed to the metadata log, a flush covering an offset,
new data or a deadline for a long-polling fetch, work too long for the event loop), the
handler returns an effect with a continuation; the shell performs the effect and calls
``then`` for the next outcome. Every chain ends in :class:`Reply` or :class:`NoReply`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from odradek.protocol.compression import (
    DecompressBuffer,
)
from odradek.security.principal import ANONYMOUS, KafkaPrincipal


@dataclass(frozen=True, slots=True)
class Reply:
    response: Any


@dataclass(frozen=True, slots=True)
class NoReply:
    """acks=0 produce: the client expects no response at all.

    With ``close_reason`` the connection is closed instead (after the answers before
    it): an acks=0 producer hears of no error, and a closed connection is how Kafka
    tells it to refresh its metadata (a partition that moved, a topic not yet hosted)."""

    close_reason: str | None = None


@dataclass(frozen=True, slots=True)
class CommitRecords:
    """Append ``records`` to the metadata log, make them durable, replay them; then go on."""

    records: list[Any]
    then: Callable[[], Outcome]


@dataclass(frozen=True, slots=True)
class AwaitFlush:
    """Wait until each ``(topic, partition)`` is flushed up to its offset; then go on
    with the partitions whose flush failed (their log went offline, or lost the records)."""

    offsets: dict[tuple[str, int], int]
    then: Callable[[frozenset[tuple[str, int]]], Outcome]


@dataclass(frozen=True, slots=True)
class AwaitData:
    """A fetch that may wait: call ``then(timed_out)`` when any of ``partitions`` gets new
    readable data, or with True at ``deadline_ms`` (on the monotonic clock, as
    :attr:`~odradek.broker.state.BrokerState.monotonic_ms`)."""

    partitions: frozenset[tuple[str, int]]
    deadline_ms: int
    then: Callable[[bool], Outcome]


@dataclass(frozen=True, slots=True)
class GroupCall:
    """Hand a group request (JoinGroup, OffsetCommit, ...) to the group coordinator, which
    answers it now or later (after a rebalance, or once its records are durable)."""

    request: Any
    version: int
    client_id: str
    principal: KafkaPrincipal = ANONYMOUS
    """Who sent it, and from where: the group APIs' ACLs decide on them."""
    host: str = ""


@dataclass(frozen=True, slots=True)
class AwaitReplication:
    """acks=all: wait until each ``(topic, partition)``'s leader says the produce up to its
    required offset is done (in the ISR, or refused); ``then(errors)`` gets the error
    code of every partition that did not succeed."""

    offsets: dict[tuple[str, int], int]
    then: Callable[[dict[tuple[str, int], int]], Outcome]
    timeout_ms: int = 30_000


@dataclass(frozen=True, slots=True)
class ControllerCall:
    """Hand a request of the controller listener (KRaft RPCs, voter changes, broker
    registration and heartbeats, AlterPartition) to the controller, which answers it
    when it can: after a long-polling fetch, or once its records are committed."""

    header: Any
    body: Any


@dataclass(frozen=True, slots=True)
class AwaitRecordCheck:
    """Produce: run ``check`` (pure: it reads the request's bytes and nothing else) on the
    shell's record-check thread, with that thread's :class:`DecompressBuffer`, then go
    on with ``then(check(buffer))``.

    For requests of many records, and batches that decompress to more than the event
    loop's buffer takes, whose checks would hold the loop too long. The shell finishes
    this effect before it starts the connection's next request, so appends keep the
    order of a connection's requests.
    """

    check: Callable[[DecompressBuffer], Any]
    then: Callable[[Any], Outcome]


Outcome = (
    Reply
    | NoReply
    | AwaitRecordCheck
    | CommitRecords
    | AwaitFlush
    | AwaitReplication
    | AwaitData
    | GroupCall
    | ControllerCall
)
