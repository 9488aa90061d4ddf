"""What a run's metadata log says the controller did: brokers fenced, ISRs shrunk,
leaders moved. Pure: it reads the bytes of the ``__cluster_metadata-0`` segments that
the runner hands it.

The metadata log is the cluster's own record of every decision, in order; a client
polling metadata would miss a broker fenced and unfenced between two polls. A fault
such as a clock jump must cause none of these (and a run of that fault alone shows
any as a finding); under other faults they are the expected consequences and are
reported as such. Batch timestamps are not used: they come from the active
controller's wall clock, the very clock a clock jump moves.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from odradek.core.errors import DecodeError, InvalidRecordBatchError
from odradek.protocol.metadata.fence_broker_record import FenceBrokerRecord
from odradek.protocol.metadata.partition_change_record import PartitionChangeRecord
from odradek.protocol.metadata.partition_record import PartitionRecord
from odradek.protocol.metadata.topic_record import TopicRecord
from odradek.protocol.metadata_record import decode_metadata_record
from odradek.protocol.record_batch import (
    BatchHeader,
    iter_batches,
)
from odradek.protocol.record_codec import (
    decode_records,
)

__all__ = ["MetadataSummary", "summarize"]

NO_CHANGE = -2
"""PartitionChangeRecord's leader when the leader does not change."""


@dataclass(frozen=True, slots=True)
class MetadataSummary:
    records: int
    fenced: tuple[int, ...]
    """The brokers the controller fenced, in order (one entry per fencing)."""
    isr_shrinks: dict[str, int]
    """Topic -> how many times an ISR of it lost members."""
    leader_changes: dict[str, int]
    """Topic -> how many times a partition of it got another leader (none included)."""

    def to_json(self) -> dict[str, object]:
        return {
            "metadata_records": self.records,
            "brokers_fenced": len(self.fenced),
            "fenced": list(self.fenced),
            "isr_shrinks": dict(sorted(self.isr_shrinks.items())),
            "leader_changes": dict(sorted(self.leader_changes.items())),
        }

    def describe(self, topic: str) -> str:
        fenced = ", ".join(str(b) for b in self.fenced)
        return (
            f"{len(self.fenced)} broker fencing(s)" + (f" ({fenced})" if fenced else "")
            + f"; {topic}: {self.isr_shrinks.get(topic, 0)} ISR shrink(s), "
            f"{self.leader_changes.get(topic, 0)} leader change(s)"
        )  # fmt: skip


def _whole_batches(buf: bytes) -> list[BatchHeader]:
    """The batches of a segment up to the first that cannot be read (a torn or
    zero-filled tail after a kill)."""
    headers: list[BatchHeader] = []
    batches = iter_batches(buf)
    while True:
        try:
            headers.append(next(batches))
        except (StopIteration, DecodeError, InvalidRecordBatchError):
            return headers


def summarize(segments: Iterable[bytes]) -> MetadataSummary:
    """The summary of a metadata log given as its segment files' bytes, oldest first.
    A torn batch at a segment's end (a node killed while writing) ends that segment."""
    names: dict[uuid.UUID, str] = {}
    isr: dict[tuple[uuid.UUID, int], int] = {}
    leader: dict[tuple[uuid.UUID, int], int] = {}
    fenced: list[int] = []
    shrinks: dict[str, int] = {}
    changes: dict[str, int] = {}
    records = 0
    for buf in segments:
        for header in _whole_batches(buf):
            if header.is_control:
                continue
            for entry in decode_records(buf, header.position):
                if entry.value is None:
                    continue
                record, _ = decode_metadata_record(entry.value)
                records += 1
                if isinstance(record, TopicRecord):
                    names[record.topic_id] = record.name
                elif isinstance(record, PartitionRecord):
                    key = (record.topic_id, record.partition_id)
                    isr[key] = len(record.isr)
                    leader[key] = record.leader
                elif isinstance(record, PartitionChangeRecord):
                    key = (record.topic_id, record.partition_id)
                    name = names.get(record.topic_id, str(record.topic_id))
                    if record.isr is not None:
                        if len(record.isr) < isr.get(key, 0):
                            shrinks[name] = shrinks.get(name, 0) + 1
                        isr[key] = len(record.isr)
                    if record.leader != NO_CHANGE and record.leader != leader.get(key):
                        changes[name] = changes.get(name, 0) + 1
                        leader[key] = record.leader
                elif isinstance(record, FenceBrokerRecord):
                    fenced.append(record.id)
    return MetadataSummary(records, tuple(fenced), shrinks, changes)
