"""One place builds partition changes, so the eligible leader replicas follow every ISR
change (fencing, AlterPartition, reassignment) by the same rule."""

from __future__ import annotations

import uuid
from dataclasses import replace

from odradek.controller.image import PartitionImage
from odradek.controller.partition_change import partition_change

TOPIC = uuid.UUID(int=7)


def partition(**changes: object) -> PartitionImage:
    base = PartitionImage(
        replicas=[1, 2, 3],
        isr=[1, 2, 3],
        removing_replicas=[],
        adding_replicas=[],
        leader=1,
        leader_recovery_state=0,
        leader_epoch=4,
        partition_epoch=9,
        directories=[uuid.UUID(int=0)] * 3,
        eligible_leader_replicas=[],
        last_known_elr=[],
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_nothing_to_change_gives_no_record() -> None:
    p = partition()
    assert partition_change(p, TOPIC, 0, min_isr=2, isr=[1, 2, 3], leader=1) is None


def test_only_the_changed_fields_are_carried() -> None:
    record = partition_change(partition(), TOPIC, 0, min_isr=2, isr=[1, 2], leader=1)
    assert record is not None
    assert (record.isr, record.leader, record.replicas, record.eligible_leader_replicas) == (
        [1, 2],
        -2,
        None,
        None,
    )


def test_an_isr_below_the_minimum_brings_the_leavers_into_the_elr() -> None:
    record = partition_change(partition(isr=[1, 2]), TOPIC, 0, min_isr=2, isr=[1])
    assert record is not None and record.eligible_leader_replicas == [2]


def test_a_broker_that_stops_being_a_replica_leaves_the_elr() -> None:
    """A reassignment that removes an eligible replica must not leave it electable."""
    p = partition(isr=[1], eligible_leader_replicas=[2, 3])
    record = partition_change(p, TOPIC, 0, min_isr=2, replicas=[1, 2, 4], adding=[4])
    assert record is not None
    assert record.replicas == [1, 2, 4] and record.eligible_leader_replicas == [2]
