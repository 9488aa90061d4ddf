"""One partition change as a record (Kafka's ``PartitionChangeBuilder``, in small).

Every controller decision that changes a partition (fencing, AlterPartition, a
reassignment step) ends in a ``PartitionChangeRecord`` that carries only the fields
that change; a field left out keeps its value on replay. Built here, in one place, so
that the eligible leader replicas follow every ISR change by the same rule
(:func:`odradek.controller.elr.elr_after`) and never name a broker that is no longer a
replica.

Pure.
"""

from __future__ import annotations

import uuid

from odradek.controller.elr import elr_after
from odradek.controller.image import PartitionImage
from odradek.protocol.metadata import PartitionChangeRecord

__all__ = ["partition_change"]


def partition_change(
    partition: PartitionImage,
    topic_id: uuid.UUID,
    index: int,
    *,
    min_isr: int,
    replicas: list[int] | None = None,
    isr: list[int] | None = None,
    leader: int | None = None,
    adding: list[int] | None = None,
    removing: list[int] | None = None,
    elr: list[int] | None = None,
) -> PartitionChangeRecord | None:
    """The record that moves ``partition`` to the given values (None: unchanged), or
    None when nothing changes. Without an explicit ``elr``, a new ISR brings the ELR
    that :func:`elr_after` gives under ``min_isr``."""
    new_replicas = partition.replicas if replicas is None else replicas
    new_isr = partition.isr if isr is None else isr
    if elr is None:
        elr = (
            partition.eligible_leader_replicas
            if new_isr == partition.isr
            else elr_after(partition, new_isr, min_isr)
        )
    elr = [replica for replica in elr if replica in new_replicas]
    record = PartitionChangeRecord(partition_id=index, topic_id=topic_id)
    changed = False
    if new_replicas != partition.replicas:
        record.replicas = new_replicas
        changed = True
    if new_isr != partition.isr:
        record.isr = new_isr
        changed = True
    if leader is not None and leader != partition.leader:
        # The merge bumps the leader epoch because the record carries a leader.
        record.leader = leader
        changed = True
    if adding is not None and adding != partition.adding_replicas:
        record.adding_replicas = adding
        changed = True
    if removing is not None and removing != partition.removing_replicas:
        record.removing_replicas = removing
        changed = True
    if elr != partition.eligible_leader_replicas:
        record.eligible_leader_replicas = elr
        changed = True
    return record if changed else None
