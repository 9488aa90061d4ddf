"""A simulated broker of :mod:`odradek.testing.replication_sim`: its disk, its hosted
partitions and the messages it exchanges.

A :class:`Broker` is the production state of one broker process without its sockets: a
:class:`~odradek.broker.state.BrokerState` (the metadata image, the hosted
:class:`~odradek.broker.partition.LocalPartition` values, the leader's fetch sessions)
and the :class:`~odradek.replication.replica_manager.ReplicaManager` the shell drives,
over a :class:`~odradek.testing.sim_disk.SimDisk` on which every replica's log is a real
:class:`~odradek.storage.log.PartitionLog`. What the simulator adds is bookkeeping: the
acks=all waiters, the flush timers, the fetches a leader holds, and what the checks
know of each log (``Replica.entries``, read back from the log's files).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from odradek.broker.effects import AwaitData
from odradek.broker.partition import LocalPartition, may_take_roles
from odradek.broker.state import BrokerState
from odradek.controller.image import MetadataImage
from odradek.protocol.record_batch import (
    iter_batches,
)
from odradek.protocol.record_codec import (
    Record,
    decode_records,
    encode_batch,
)
from odradek.replication.follower import PartitionFollower
from odradek.replication.leader import PartitionLeader
from odradek.replication.replica_manager import ReplicaManager
from odradek.storage.log import LogConfig, PartitionLog, partition_dir_name
from odradek.testing.sim_disk import SimDisk

__all__ = [
    "LOG_CONFIG",
    "TOPIC",
    "Broker",
    "MetadataFetch",
    "ParkedFetch",
    "Produce",
    "Replica",
    "Request",
    "Response",
    "Wire",
    "log_dir",
    "record_batch",
]

TOPIC = "t"

# ---------------------------------------------------------------------- disk


# Small segments and a dense offset index: a run rolls segments, truncates across them
# and reads every offset through the index, as a long-lived log does.
LOG_CONFIG = LogConfig(segment_bytes=16_384, index_interval_bytes=256)


def log_dir(partition: int) -> str:
    return f"data/{partition_dir_name(TOPIC, partition)}"


def record_batch(value: str, now_ms: int) -> memoryview:
    """A producer's batch of one record: every offset is a batch boundary, so truncation
    never has to round."""
    return memoryview(
        bytearray(encode_batch([Record(offset_delta=0, timestamp=now_ms, value=value.encode())]))
    )


def _read_entries(log: PartitionLog, start: int) -> list[tuple[int, str]]:
    """The log's records from ``start`` to its end as ``(leader epoch, value)``, read
    back from the segment files (what the checks compare)."""
    found: list[tuple[int, str]] = []
    offset = start
    while offset < log.log_end_offset:
        chunk = log.read(offset, 1 << 20)
        if chunk is None:
            break
        data = chunk.read()
        for header in iter_batches(data):
            for record in decode_records(data, header.position):
                assert record.value is not None
                found.append((header.partition_leader_epoch, record.value.decode()))
            offset = header.next_offset
    return found


# ---------------------------------------------------------------------- brokers


@dataclass
class Produce:
    partition: int
    value: str
    state: str = "pending"  # pending, ok, fail, info


@dataclass
class Replica:
    """One partition on one broker. ``local`` is the broker's own
    :class:`~odradek.broker.partition.LocalPartition` (its log a real
    :class:`~odradek.storage.log.PartitionLog` on the broker's :class:`SimDisk`, its
    roles the production cores); ``hw_checkpoint`` and the log survive a crash,
    everything else is the process's memory. ``entries`` is what the checks know of the
    log: its records read back after every change."""

    partition: int
    local: LocalPartition
    entries: list[tuple[int, str]] = field(default_factory=list)
    hw_checkpoint: int = 0
    waiters: list[tuple[Produce, int]] = field(default_factory=list)
    flush_due_ms: int | None = None
    last_hw: int = 0  # for the monotonic check, within this process lifetime
    checked_upto: int = 0  # records below this were compared with the committed map

    @property
    def log(self) -> PartitionLog:
        return self.local.log

    @property
    def leader(self) -> PartitionLeader | None:
        return self.local.leader_state

    @property
    def follower(self) -> PartitionFollower | None:
        return self.local.follower_state

    @property
    def flushed(self) -> int:
        """How far the log is durable (the recovery point)."""
        return min(self.log.recovery_point, self.log.log_end_offset)

    @property
    def high_watermark(self) -> int:
        if self.leader is not None:
            return self.leader.high_watermark
        if self.follower is not None:
            return self.follower.high_watermark
        return min(self.hw_checkpoint, self.log.log_end_offset)

    def sync(self) -> None:
        """Read back what changed in the log (after an append or a truncation)."""
        end = self.log.log_end_offset
        del self.entries[end:]
        if len(self.entries) < end:
            self.entries += _read_entries(self.log, len(self.entries))

    def forget_process(self) -> None:
        self.local.leader_state = self.local.follower_state = None
        self.local.follower_broker_epochs = {}
        self.local.is_leader = False
        self.waiters = []
        self.flush_due_ms = None


@dataclass
class ParkedFetch:
    """A follower's fetch the leader holds until data arrives or its wait ends."""

    src: int
    request_id: int
    outcome: AwaitData


@dataclass
class Broker:
    broker_id: int
    disk: SimDisk
    state: BrokerState
    manager: ReplicaManager[LocalPartition]
    replicas: dict[int, Replica] = field(default_factory=dict)
    alive: bool = True
    generation: int = 0
    paused: bool = False
    held: list[tuple[int, Any]] = field(default_factory=list)
    incarnation: uuid.UUID = field(default_factory=lambda: uuid.UUID(int=0))
    broker_epoch: int = -1
    registering: bool = False
    next_registration_ms: int = 0
    next_heartbeat_ms: int = 0
    heartbeat_in_flight: bool = False
    metadata_in_flight: bool = False
    next_metadata_ms: int = 0
    pending: dict[int, tuple[str, Any]] = field(default_factory=dict)
    fetching: set[int] = field(default_factory=set)  # leaders with a fetch in flight
    parked: list[ParkedFetch] = field(default_factory=list)
    disk_number: int = 0  # a wipe puts in a new disk (a new log directory id)
    # What a wiped disk durably held, by partition: leaders may still count those
    # copies (the broker acknowledged them, then its disk was replaced), so the
    # durability invariant does too; the final read judges what was really lost.
    phantoms: dict[int, list[tuple[int, str]]] = field(default_factory=dict)

    @property
    def image(self) -> MetadataImage:
        return self.state.image

    @image.setter
    def image(self, image: MetadataImage) -> None:
        self.state.image = image

    @property
    def caught_up(self) -> bool:
        """Kafka's broker starts its replicas once its metadata reaches its registration."""
        return may_take_roles(self.image.offset, self.broker_epoch)


# ---------------------------------------------------------------------- messages


@dataclass(frozen=True)
class Request:
    """A broker's request to another node; the answer names ``request_id``."""

    request_id: int
    body: Any


@dataclass(frozen=True)
class Response:
    request_id: int
    body: Any


@dataclass(frozen=True)
class Wire:
    """A Fetch request or response as it travels: encoded at ``FETCH_VERSION``, so that
    no object is shared between brokers and the codec is on the path."""

    payload: bytes

    def __repr__(self) -> str:
        return f"Wire({len(self.payload)} bytes)"


@dataclass(frozen=True)
class MetadataFetch:
    after_offset: int
