"""A partition replica hosted on this node: its log plus what the broker needs around it.

For now every partition here is led by this node with itself as the only in-sync
replica; the replication layer will add followers, the ISR and its high watermark.
With ``flush_before_ack`` (our default) the high watermark is the flushed offset, so a
consumer never reads a record that a power loss could still take back.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from odradek.replication.producer_state import ProducerStateManager
from odradek.storage.log import PartitionLog


@dataclass(slots=True)
class LocalPartition:
    topic: str
    index: int
    topic_id: uuid.UUID
    log: PartitionLog
    leader_epoch: int
    flush_before_ack: bool = True
    producers: ProducerStateManager = field(default_factory=ProducerStateManager)
    """Idempotent producers' sequence state, rebuilt from a snapshot and the log tail."""
    max_message_bytes: int | None = None
    """The topic's ``max.message.bytes``; None: the broker's ``message.max.bytes``."""
    is_leader: bool = True
    """Whether this node leads the partition (the image's leader); only the leader takes
    produce requests and serves consumers."""

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.index)

    @property
    def high_watermark(self) -> int:
        if self.flush_before_ack:
            return min(self.log.recovery_point, self.log.log_end_offset)
        return self.log.log_end_offset
