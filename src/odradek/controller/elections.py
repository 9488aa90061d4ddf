"""Unclean leader election: the controller's last resort, off by default.

This module owns the one rule Kafka's ``PartitionChangeBuilder.electLeader`` applies
when ``unclean.leader.election.enable`` is true and no ISR member can lead: pick a live
replica that is *not* in the ISR, make it the leader with an ISR of itself alone, and
mark the partition ``RECOVERING`` (KIP-704) so that the new leader recovers alone
before anyone joins it.

Why it is off by default, and why it is a separate, clearly named option: the chosen
replica may lack records the old ISR acknowledged. When the old leader comes back it
truncates its log to the new leader's, and those acknowledged records are gone (the
Jepsen analysis of Kafka 0.8). ``tests/replication/test_simulation.py`` runs exactly
that scenario and shows the loss; the safe default (no unclean election, the ISR never
empty) keeps the partition offline instead until an ISR member returns.

Pure: an image goes in, ``PartitionChangeRecord`` values come out; the caller appends
them and replays them into the image like every other controller record. ``brokers.py``
does not call this yet; today the simulator's controller step does (after each command,
for every partition left without a leader).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from odradek.controller.brokers import is_active, leader_and_isr_updates
from odradek.controller.image import (
    LEADER_RECOVERY_RECOVERING,
    NO_LEADER,
    NO_LEADER_CHANGE,
    MetadataImage,
    PartitionImage,
    TopicImage,
)
from odradek.controller.preferred import ElectionResult
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.metadata import PartitionChangeRecord

__all__ = [
    "UNCLEAN_LEADER_ELECTION_ENABLE",
    "requested_unclean_election",
    "unclean_leader_election",
    "unclean_leader_elections",
]

UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"
"""Kafka's topic and broker config key; false by default, in Kafka and here."""


def unclean_leader_election(
    image: MetadataImage,
    topic: TopicImage,
    partition_id: int,
    partition: PartitionImage,
    *,
    unclean_leader_election_enable: bool,
) -> PartitionChangeRecord | None:
    """The record that elects an out-of-sync replica of ``partition``, or ``None``.

    ``None`` unless the option is on, the partition has no leader, no ISR member and no
    eligible leader replica is active (a clean election would then be possible, and it
    is always preferred), and some replica is active. The first active replica in
    replica order is chosen, as Kafka does. The record carries the leader (so replay
    bumps the leader epoch: the old leader's epoch is fenced), the ISR ``[leader]`` (the
    only replica now known to hold the partition's history, which is by definition its
    own), an empty ELR and RECOVERING.
    """
    if not unclean_leader_election_enable or partition.leader != NO_LEADER:
        return None
    if any(is_active(image, replica) for replica in partition.isr):
        return None
    if any(is_active(image, replica) for replica in partition.eligible_leader_replicas):
        return None  # an eligible replica leads without loss (KIP-966): never skip it
    for replica in partition.replicas:
        if is_active(image, replica):
            return PartitionChangeRecord(
                partition_id=partition_id,
                topic_id=topic.topic_id,
                leader=replica,
                isr=[replica],
                # What made a replica eligible (holding every committed record) means
                # nothing after this: the new leader's log defines the partition now.
                eligible_leader_replicas=[],
                leader_recovery_state=LEADER_RECOVERY_RECOVERING,
            )
    return None


def unclean_leader_elections(
    image: MetadataImage, *, unclean_leader_election_enable: bool
) -> list[PartitionChangeRecord]:
    """:func:`unclean_leader_election` for every partition of the image, by topic name
    and partition index so that a simulation replays byte for byte."""
    if not unclean_leader_election_enable:
        return []
    records = []
    for name in sorted(image.topics_by_name):
        topic = image.topics_by_name[name]
        for partition_id in sorted(topic.partitions):
            record = unclean_leader_election(
                image,
                topic,
                partition_id,
                topic.partitions[partition_id],
                unclean_leader_election_enable=True,
            )
            if record is not None:
                records.append(record)
    return records


def requested_unclean_election(
    image: MetadataImage, wanted: Iterable[tuple[str, int]], chosen: int | None = None
) -> tuple[list[PartitionChangeRecord], list[ElectionResult]]:
    """ElectLeaders with the UNCLEAN type: the operator's deliberate decision, whatever
    the topic's ``unclean.leader.election.enable`` says (Kafka's semantics).

    Per partition: one that has a leader needs no election (ELECTION_NOT_NEEDED); one
    whose ISR or eligible replicas hold an active broker gets that one, a clean
    election, because it is always preferred; otherwise ``chosen`` (``odradek
    partitions recover --from-broker``), which must be an active replica, or else the
    first active replica, leads with an ISR of itself (:func:`unclean_leader_election`).
    ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica (or not ``chosen``) is active.
    """
    records: list[PartitionChangeRecord] = []
    results: list[ElectionResult] = []
    for name, index in wanted:
        topic = image.topics_by_name.get(name)
        if topic is None or index not in topic.partitions:
            results.append(ElectionResult(name, index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        partition = topic.partitions[index]
        if partition.leader != NO_LEADER:
            results.append(ElectionResult(name, index, ErrorCode.ELECTION_NOT_NEEDED))
            continue
        clean = leader_and_isr_updates(image, [(topic, index, partition)])
        if clean and clean[0].leader not in (NO_LEADER, NO_LEADER_CHANGE):
            records.extend(clean)  # an ISR member or eligible replica can lead
            results.append(ElectionResult(name, index, ErrorCode.NONE))
            continue
        if chosen is not None and (
            chosen not in partition.replicas or not is_active(image, chosen)
        ):
            results.append(
                ElectionResult(
                    name,
                    index,
                    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                    f"broker {chosen} is not an active replica of {name}-{index}",
                )
            )
            continue
        order = partition.replicas if chosen is None else [chosen]
        candidate = replace(partition, replicas=order)
        record = unclean_leader_election(
            image, topic, index, candidate, unclean_leader_election_enable=True
        )
        if record is None:
            results.append(
                ElectionResult(
                    name, index, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "no replica is active"
                )
            )
            continue
        records.append(record)
        results.append(ElectionResult(name, index, ErrorCode.NONE))
    return records, results
