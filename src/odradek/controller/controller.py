"""The active controller's command core: requests in, records and responses out.

This module owns :class:`QuorumControllerState`, the small pure facade an asyncio shell
drives on the active controller (the command side of Kafka's ``QuorumController``). It
holds only the broker sessions (:class:`~odradek.controller.brokers.BrokerHeartbeats`)
and the image it is given; the rules live in ``brokers.py``, ``alter_partition.py``,
``topics.py`` and the other command modules.

The shell's contract (ADR 0007; Kafka's controller pipelines commands on a speculative
image instead, which Odradek does not):

1. Handle one command at a time. Each method returns a :class:`ControllerResult`: the
   records to append to the metadata log and the response.
2. Append the records as one batch (atomically) and wait until the batch has committed
   and been applied to the image before the next command: the image is only ever the
   committed state, the same function of the same log on every node, so there is no
   speculative state to roll back when this node stops being the active controller.
3. Send the response only once the records are committed; with no records, send it
   after everything appended before it has committed (Kafka's read-after-write rule),
   because the response may describe state that is not committed yet.
4. When the controller becomes active, create a new :class:`QuorumControllerState`:
   broker sessions are not in the log and start afresh.
5. Every ``metadata.max.idle.interval.ms`` without an append, append
   :func:`noop_record`, so that brokers and standby controllers see the log advance and
   can tell a quiet controller from a lost one.

Nothing in a response waits on the offsets the records will get, except through the
``next_offset`` the caller passes in, so a response is a finished value rather than a
callback.
"""

from __future__ import annotations

import dataclasses
from typing import Generic, NamedTuple, TypeVar

from odradek.controller.alter_partition import alter_partition
from odradek.controller.brokers import (
    DEFAULT_SESSION_TIMEOUT_MS,
    BrokerHeartbeats,
    BrokerRecord,
    register_broker,
)
from odradek.controller.image import MetadataImage
from odradek.controller.unclean_history import (
    LOSS_REPORTS_TAG,
    decode_loss_reports,
    loss_records,
)
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages.alter_partition_request import AlterPartitionRequest
from odradek.protocol.messages.alter_partition_response import AlterPartitionResponse
from odradek.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from odradek.protocol.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from odradek.protocol.messages.broker_registration_request import BrokerRegistrationRequest
from odradek.protocol.messages.broker_registration_response import BrokerRegistrationResponse
from odradek.protocol.metadata import ConfigRecord, NoOpRecord

__all__ = [
    "DEFAULT_METADATA_MAX_IDLE_INTERVAL_MS",
    "ControllerRecord",
    "ControllerResult",
    "QuorumControllerState",
    "noop_record",
]

DEFAULT_METADATA_MAX_IDLE_INTERVAL_MS = 500
"""Kafka's default ``metadata.max.idle.interval.ms`` (KIP-835)."""

ControllerRecord = BrokerRecord | NoOpRecord | ConfigRecord
"""The metadata records this facade returns."""

R = TypeVar("R")


class ControllerResult(NamedTuple, Generic[R]):
    """Kafka's ``ControllerResult``: records to append atomically, then the response."""

    records: list[ControllerRecord]
    response: R


def noop_record() -> NoOpRecord:
    """The record the active controller appends when the log has been idle for
    ``metadata.max.idle.interval.ms``."""
    return NoOpRecord()


class QuorumControllerState:
    """The active controller's command state: the image it is given and broker sessions.

    ``image`` is the shell's image, shared, not copied: the shell replays every record
    this returns into it, and the next command sees the result.
    """

    def __init__(
        self,
        image: MetadataImage,
        *,
        cluster_id: str,
        activated_ms: int,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        connection_loss_ms: int = -1,
    ) -> None:
        self.image = image
        self.cluster_id = cluster_id
        self.heartbeats = BrokerHeartbeats(activated_ms, session_timeout_ms, connection_loss_ms)

    def register_broker(
        self, request: BrokerRegistrationRequest, next_offset: int, now_ms: int
    ) -> ControllerResult[BrokerRegistrationResponse]:
        """BrokerRegistration; ``next_offset`` is where the first record will go."""
        outcome = register_broker(
            self.image,
            request,
            next_offset,
            now_ms,
            cluster_id=self.cluster_id,
            heartbeats=self.heartbeats,
        )
        return ControllerResult(list(outcome.records), outcome.response())

    def broker_heartbeat(
        self, request: BrokerHeartbeatRequest, next_offset: int, now_ms: int
    ) -> ControllerResult[BrokerHeartbeatResponse]:
        """BrokerHeartbeat; ``next_offset`` is where the first record will go. Loss
        reports in Odradek's tagged field (a broker that dropped records an unclean
        election gave up) go into their topics' histories."""
        outcome = self.heartbeats.heartbeat(self.image, request, now_ms, next_offset)
        records: list[ControllerRecord] = list(outcome.records)
        if outcome.response.error_code == ErrorCode.NONE:
            reports = [
                dataclasses.replace(report, broker=request.broker_id)
                for tag, data in request.unknown_tagged_fields
                if tag == LOSS_REPORTS_TAG
                for report in decode_loss_reports(data)
            ]
            records += loss_records(self.image, reports)
        return ControllerResult(records, outcome.response)

    def alter_partition(
        self, request: AlterPartitionRequest, version: int
    ) -> ControllerResult[AlterPartitionResponse]:
        """AlterPartition of ``version`` from a partition leader."""
        outcome = alter_partition(self.image, request, version)
        return ControllerResult(list(outcome.records), outcome.response)

    def fence_stale_brokers(self, now_ms: int) -> list[ControllerRecord]:
        """Fence every broker whose session timed out; run at :meth:`next_expiry_ms`."""
        return list(self.heartbeats.expire(self.image, now_ms))

    def next_expiry_ms(self) -> int | None:
        """When a session may next time out, for the shell's timer; None if none can."""
        return self.heartbeats.next_expiry_ms(self.image)
