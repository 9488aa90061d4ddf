"""The broker's view of the world that request handlers read: settings, the metadata image,
and the partitions this node hosts. The shell owns it and updates it; handlers only read
it and return effects (``odradek.broker.effects``).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from odradek.broker.fetch_session import FetchSessionCache
from odradek.broker.partition import LocalPartition
from odradek.broker.quotas import QuotaManager
from odradek.broker.record_validation import INLINE_DECOMPRESSED_BYTES
from odradek.controller.image import MetadataImage
from odradek.protocol.compression import (
    DecompressBuffer,
)

if TYPE_CHECKING:
    from odradek.broker.authorization import Authorization


@dataclass(frozen=True, slots=True)
class BrokerSettings:
    """What the handlers need from the server configuration."""

    node_id: int
    cluster_id: str
    host: str
    port: int
    rack: str | None = None
    num_partitions: int = 1
    default_replication_factor: int | None = None
    """None: min(3, live brokers), our safer default (Kafka's is 1)."""
    auto_create_topics: bool = True
    message_max_bytes: int = 1_048_588
    flush_before_ack: bool = True
    fetch_session_cache_slots: int = 1000
    """``max.incremental.fetch.session.cache.slots``."""
    is_broker: bool = True
    """False on a controller-only node, which runs forwarded admin requests but hosts no
    partitions: it must never place replicas on itself."""
    listeners: tuple[tuple[str, str, int], ...] = ()
    """Every broker listener's advertised ``(name, host, port)``, the first being
    :attr:`host` and :attr:`port`; empty: one listener, those."""

    def address(self, listener: str) -> tuple[str, int] | None:
        """Where clients of ``listener`` reach this node ("": its first listener); None
        when it has no such listener."""
        if not listener or not self.listeners:
            return self.host, self.port
        for name, host, port in self.listeners:
            if name == listener:
                return host, port
        return None


def _accept_all(configs: dict[str, str]) -> dict[str, str]:
    return dict(configs)


def _no_tls_listener(listener: str, dynamic: dict[str, str]) -> str | None:
    return f"listener {listener} does not serve TLS on this broker"


def _ignore(key: tuple[str, int]) -> None:
    pass


@dataclass(slots=True)
class BrokerState:
    settings: BrokerSettings
    image: MetadataImage
    partitions: dict[tuple[str, int], LocalPartition] = field(default_factory=dict)
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    now_ms: int = 0
    """The wall clock when the request was read: for what is stamped (LogAppendTime,
    segment age, retention)."""
    monotonic_ms: int = 0
    """The monotonic clock at the same moment: for every timeout (a follower's
    caught-up time, fetch sessions, a long poll's deadline)."""
    validate_topic_configs: Callable[[dict[str, str]], dict[str, str]] = _accept_all
    """Raises ConfigError naming the key for an unknown key or a bad value."""
    replication_changed: Callable[[tuple[str, int]], None] = _ignore
    """Called when a partition's high watermark or ISR moved (a follower's fetch): the
    shell completes acks=all produces and wakes consumers waiting on it."""
    records_appended: Callable[[tuple[str, int]], None] = _ignore
    """Called when a leader appended records: the shell schedules a group-commit flush
    (with flush-before-ack nothing becomes visible before it) and wakes followers'
    fetches."""
    fetch_sessions: FetchSessionCache = field(default_factory=FetchSessionCache)
    """Incremental fetch sessions (KIP-227) of consumers and followers."""
    validate_listener_tls: Callable[[str, dict[str, str]], str | None] = _no_tls_listener
    """Whether listener (lower-case name) could serve TLS with these dynamic configs of
    this broker: None, or the problem naming the key (loads the stores: the shell's)."""
    quotas: QuotaManager = field(default_factory=QuotaManager)
    """The client quotas' rate trackers (KIP-219), fed by Produce and Fetch."""
    authorization: Authorization | None = None
    """The authorizer (``authorizer.class.name``); None lets every client do anything."""
    decompress_buffer: DecompressBuffer = field(
        default_factory=lambda: DecompressBuffer(INLINE_DECOMPRESSED_BYTES)
    )
    """Where Produce decompresses the batches it checks on the event loop (handlers run
    on one thread, so one buffer serves them all)."""

    def fetched_topic_name(self, name: str, topic_id: uuid.UUID, by_id: bool) -> str:
        """The topic a Fetch names: by id from v13 on (empty when unknown), else by name."""
        if not by_id:
            return name
        found = self.image.topics_by_id.get(topic_id)
        return found.name if found is not None else ""

    def led_partition(self, key: tuple[str, int]) -> LocalPartition | None:
        """The partition when this node is its leader; None when it is not hosted here or
        another node leads it (the caller answers NOT_LEADER_OR_FOLLOWER then)."""
        partition = self.partitions.get(key)
        return partition if partition is not None and partition.is_leader else None

    def knows_partition(self, topic: str, index: int) -> bool:
        """Whether the metadata has this partition. A request for one this node does not
        lead is NOT_LEADER_OR_FOLLOWER if it exists, else UNKNOWN_TOPIC_OR_PARTITION, as
        Kafka's replica manager answers: a partition number past the topic's count is no
        leadership the client can wait out."""
        found = self.image.topics_by_name.get(topic)
        return found is not None and index in found.partitions

    def live_brokers(self) -> list[int]:
        live = {b.broker_id for b in self.image.brokers.values() if not b.fenced}
        if self.settings.is_broker:
            # This broker counts even before its own registration reached the image.
            live.add(self.settings.node_id)
        return sorted(live)

    def default_replication_factor(self) -> int:
        configured = self.settings.default_replication_factor
        if configured is not None:
            return configured
        return min(3, len(self.live_brokers()))
