"""Preferred leader election (ElectLeaders with the PREFERRED type, and the controller's
automatic leader rebalance).

A partition's preferred leader is the first replica of its assignment: placement spreads
those over the brokers, so moving leadership back to them after failures restores the
balance. The move is made only when the preferred replica is active (registered,
unfenced, not shutting down) and in the ISR: a preferred election never elects a replica
that could be missing acknowledged records.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from odradek.controller.brokers import is_active
from odradek.controller.image import MetadataImage, PartitionImage
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.metadata import PartitionChangeRecord

PREFERRED = 0
UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class ElectionResult:
    topic: str
    partition: int
    error: int
    message: str | None = None


def preferred_election(
    image: MetadataImage, wanted: Iterable[tuple[str, int]] | None
) -> tuple[list[PartitionChangeRecord], list[ElectionResult]]:
    """Records moving each wanted partition's leadership to its preferred replica, and a
    result per partition (all partitions when ``wanted`` is None: Kafka's null list)."""
    records: list[PartitionChangeRecord] = []
    results: list[ElectionResult] = []
    if wanted is None:
        wanted = [
            (topic.name, index)
            for topic in sorted(image.topics_by_name.values(), key=lambda t: t.name)
            for index in sorted(topic.partitions)
        ]
    for name, index in wanted:
        topic = image.topics_by_name.get(name)
        if topic is None or index not in topic.partitions:
            results.append(ElectionResult(name, index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        partition = topic.partitions[index]
        error, record = _elect_preferred(image, topic.topic_id, index, partition)
        if record is not None:
            records.append(record)
        results.append(ElectionResult(name, index, error))
    return records, results


def _elect_preferred(
    image: MetadataImage, topic_id: uuid.UUID, index: int, partition: PartitionImage
) -> tuple[int, PartitionChangeRecord | None]:
    preferred = partition.replicas[0] if partition.replicas else -1
    if preferred == partition.leader:
        return ErrorCode.ELECTION_NOT_NEEDED, None
    if preferred not in partition.isr or not is_active(image, preferred):
        return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, None
    return ErrorCode.NONE, PartitionChangeRecord(
        partition_id=index, topic_id=topic_id, leader=preferred
    )


def imbalanced_partitions(image: MetadataImage, threshold_percent: int) -> list[tuple[str, int]]:
    """Partitions to move back to their preferred leader, per Kafka's
    ``leader.imbalance.per.broker.percentage``: for each broker whose share of
    partitions it should lead but does not exceeds the threshold, those partitions
    whose preferred replica could lead now."""
    preferred_of: dict[int, list[tuple[str, int, PartitionImage]]] = {}
    for topic in image.topics_by_name.values():
        for index, partition in topic.partitions.items():
            if partition.replicas:
                preferred_of.setdefault(partition.replicas[0], []).append(
                    (topic.name, index, partition)
                )
    wanted: list[tuple[str, int]] = []
    for broker, partitions in sorted(preferred_of.items()):
        if not is_active(image, broker):
            continue
        elsewhere = [(t, i) for t, i, p in partitions if p.leader != broker and broker in p.isr]
        if elsewhere and 100 * len(elsewhere) / len(partitions) > threshold_percent:
            wanted += sorted(elsewhere)
    return wanted
