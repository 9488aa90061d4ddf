"""Eligible leader replicas (KIP-966) and the one ``min.insync.replicas`` both sides use.

Why one source. ELR is safe only because the partition leader freezes its high
watermark while the ISR is below ``min.insync.replicas``: a replica that leaves the ISR
then still holds every committed record, and may lead later. If the controller and a
leader disagree about the number (the controller sees only the metadata log, a leader
could also read its own ``server.properties``), the leader can commit with an ISR the
controller already counts as too small, and electing an ELR member loses those records.
The replication simulator showed exactly that. So here, as KIP-966 has it, the value
comes from the metadata log alone: the topic's config, else the cluster-wide dynamic
default (the active controller writes its static value there once, see
:func:`cluster_min_isr_record`), else our default, a majority of the replicas.
A broker's own static or per-broker dynamic value is not consulted.

The ELR rule (``PartitionChangeBuilder`` with ELR on): when an ISR change leaves the ISR
below ``min.insync.replicas``, the members that leave join the ELR, which keeps its
earlier members that did not come back; an ISR at or above the minimum clears it. A
member that rejoins the ISR leaves the ELR. Our followers fsync before they report an
offset, so a member's log survives a crash: an unclean restart does not drop it from the
ELR (Kafka's followers do not fsync and must). A new log directory (a wiped disk) does.

Pure: functions of the image.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from odradek.controller.image import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_TOPIC,
    MetadataImage,
    PartitionImage,
)
from odradek.protocol.metadata import ConfigRecord

__all__ = [
    "MIN_INSYNC_REPLICAS",
    "cluster_min_isr_record",
    "elr_after",
    "majority",
    "min_insync_replicas",
]

MIN_INSYNC_REPLICAS = "min.insync.replicas"
CLUSTER_DEFAULT = (CONFIG_RESOURCE_BROKER, "")
"""Kafka's resource for a dynamic config that applies to every broker."""


def majority(replication_factor: int) -> int:
    """Our default ``min.insync.replicas``: a majority of the replicas (2 of 3)."""
    return replication_factor // 2 + 1


def _positive_int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        return None
    return number if number > 0 else None


def min_insync_replicas(
    configs: Mapping[tuple[int, str], Mapping[str, str]], topic: str, replication_factor: int
) -> int:
    """The ``min.insync.replicas`` of ``topic``, from the metadata log's configs only.

    A stored value that is not a positive integer (AlterConfigs validates, so only a
    hand-made log has one) counts as unset: the default is the safe side.
    """
    for resource in ((CONFIG_RESOURCE_TOPIC, topic), CLUSTER_DEFAULT):
        value = _positive_int(configs.get(resource, {}).get(MIN_INSYNC_REPLICAS))
        if value is not None:
            return value
    return majority(replication_factor)


def cluster_min_isr_record(image: MetadataImage, static_value: int | None) -> ConfigRecord | None:
    """The record that makes this controller's static ``min.insync.replicas`` the cluster
    default, when the log has no cluster default yet (KIP-966 does the same when ELR is
    enabled). None when there is nothing to write."""
    if static_value is None or MIN_INSYNC_REPLICAS in image.configs.get(CLUSTER_DEFAULT, {}):
        return None
    return ConfigRecord(
        resource_type=CONFIG_RESOURCE_BROKER,
        resource_name="",
        name=MIN_INSYNC_REPLICAS,
        value=str(static_value),
    )


def elr_after(partition: PartitionImage, new_isr: Iterable[int], min_isr: int) -> list[int]:
    """The ELR once ``partition``'s ISR becomes ``new_isr``, in replica order."""
    isr = set(new_isr)
    if len(isr) >= min_isr:
        return []
    kept = (set(partition.eligible_leader_replicas) | set(partition.isr)) - isr
    return [replica for replica in partition.replicas if replica in kept]
