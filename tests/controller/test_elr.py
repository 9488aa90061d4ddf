"""Eligible leader replicas (KIP-966) and the one ``min.insync.replicas``.

What a user relies on: with the ISR below ``min.insync.replicas`` nothing new is
committed, so a replica that left the ISR then still holds every committed record; when
the last ISR member dies the partition comes back under such a replica instead of
staying offline, and never under one that was out of sync (or whose disk was wiped).
"""

from __future__ import annotations

import uuid
from dataclasses import replace

from odradek.controller.alter_partition import alter_partition
from odradek.controller.brokers import register_broker
from odradek.controller.elections import unclean_leader_election
from odradek.controller.elr import (
    cluster_min_isr_record,
    elr_after,
    min_insync_replicas,
)
from odradek.controller.image import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_TOPIC,
    NO_LEADER,
    MetadataImage,
)
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages.alter_partition_request import (
    AlterPartitionRequest,
    BrokerState,
    PartitionData,
    TopicData,
)
from odradek.protocol.metadata import ConfigRecord
from tests.controller.test_brokers import CLUSTER_ID, TOPIC, Cluster, registration


def _configs(**values: str) -> dict[tuple[int, str], dict[str, str]]:
    configs: dict[tuple[int, str], dict[str, str]] = {}
    if "topic" in values:
        configs[(CONFIG_RESOURCE_TOPIC, "t")] = {"min.insync.replicas": values["topic"]}
    if "cluster" in values:
        configs[(CONFIG_RESOURCE_BROKER, "")] = {"min.insync.replicas": values["cluster"]}
    if "broker" in values:
        configs[(CONFIG_RESOURCE_BROKER, "1")] = {"min.insync.replicas": values["broker"]}
    return configs


def test_min_isr_comes_from_the_topic_then_the_cluster_default_then_a_majority() -> None:
    assert min_insync_replicas(_configs(topic="3", cluster="1"), "t", 5) == 3
    assert min_insync_replicas(_configs(cluster="1"), "t", 5) == 1
    assert min_insync_replicas({}, "t", 5) == 3
    assert min_insync_replicas({}, "t", 3) == 2
    # One broker's own value would make leaders disagree with the controller: ignored.
    assert min_insync_replicas(_configs(broker="1"), "t", 3) == 2
    # A value no validation would have let in counts as unset (the safe side).
    assert min_insync_replicas(_configs(topic="zero"), "t", 3) == 2


def test_the_controller_makes_its_static_value_the_cluster_default_once() -> None:
    image = MetadataImage()
    record = cluster_min_isr_record(image, 1)
    assert record is not None
    assert (record.resource_type, record.resource_name, record.value) == (
        CONFIG_RESOURCE_BROKER,
        "",
        "1",
    )
    image.replay(record, 0)
    assert min_insync_replicas(image.configs, "t", 3) == 1
    assert cluster_min_isr_record(image, 2) is None  # the log's value wins from now on
    assert cluster_min_isr_record(MetadataImage(), None) is None


def _cluster(*brokers: int, replicas: list[int], min_isr: int | None = None) -> Cluster:
    cluster = Cluster()
    cluster.start(*brokers)
    cluster.partition(0, replicas)
    if min_isr is not None:
        name = cluster.image.topics_by_id[TOPIC].name
        cluster.apply(
            [
                ConfigRecord(
                    resource_type=CONFIG_RESOURCE_TOPIC,
                    resource_name=name,
                    name="min.insync.replicas",
                    value=str(min_isr),
                )
            ]
        )
    return cluster


def test_members_leaving_an_isr_below_the_minimum_stay_eligible() -> None:
    cluster = _cluster(1, 2, 3, replicas=[1, 2, 3])
    cluster.beat(3, want_fence=True)
    assert (cluster.get(0).isr, cluster.get(0).eligible_leader_replicas) == ([1, 2], [])
    cluster.beat(2, want_fence=True)
    assert (cluster.get(0).isr, cluster.get(0).eligible_leader_replicas) == ([1], [2])


def test_an_eligible_replica_leads_when_the_last_isr_member_dies() -> None:
    cluster = _cluster(1, 2, 3, replicas=[1, 2, 3])
    cluster.beat(3, want_fence=True)
    cluster.beat(2, want_fence=True)
    # Broker 2 comes back (same disk) while the leader is still alive: it rejoins
    # later through AlterPartition; first the leader dies too.
    cluster.beat(2)
    assert cluster.get(0).leader == 1
    epoch = cluster.get(0).leader_epoch
    cluster.beat(1, want_fence=True)
    partition = cluster.get(0)
    assert (partition.leader, partition.isr) == (2, [2])
    assert partition.eligible_leader_replicas == [1]  # the old leader was complete too
    assert partition.leader_epoch == epoch + 1


def test_an_out_of_sync_replica_is_never_eligible() -> None:
    cluster = _cluster(1, 2, 3, replicas=[1, 2, 3])
    # 3 leaves while the ISR stays at the minimum: the high watermark may move on
    # without it, so it is not eligible.
    cluster.beat(3, want_fence=True)
    cluster.beat(2, want_fence=True)
    cluster.beat(3)
    cluster.beat(1, want_fence=True)
    partition = cluster.get(0)
    assert partition.leader == NO_LEADER
    assert 3 not in partition.eligible_leader_replicas
    # And unclean election (when enabled) waits while an eligible replica could lead.
    cluster.beat(2)
    assert cluster.get(0).leader == 2


def test_an_isr_back_at_the_minimum_clears_the_elr() -> None:
    partition = _cluster(1, 2, 3, replicas=[1, 2, 3]).get(0)
    below = replace(partition, isr=[1], eligible_leader_replicas=[2])
    assert elr_after(below, [1, 3], 2) == []
    assert elr_after(below, [1], 3) == [2]
    assert elr_after(below, [1, 2], 3) == []  # a member that rejoins leaves the ELR


def test_alter_partition_shrinking_below_the_minimum_keeps_the_leaver_eligible() -> None:
    cluster = _cluster(1, 2, 3, replicas=[1, 2, 3])
    partition = cluster.get(0)
    broker = cluster.image.brokers[1]
    request = AlterPartitionRequest(
        broker_id=1,
        broker_epoch=broker.epoch,
        topics=[
            TopicData(
                topic_id=TOPIC,
                partitions=[
                    PartitionData(
                        partition_index=0,
                        leader_epoch=partition.leader_epoch,
                        new_isr_with_epochs=[BrokerState(broker_id=1, broker_epoch=broker.epoch)],
                        partition_epoch=partition.partition_epoch,
                    )
                ],
            )
        ],
    )
    outcome = alter_partition(cluster.image, request, 3)
    assert outcome.response.topics[0].partitions[0].error_code == ErrorCode.NONE
    cluster.apply(outcome.records)
    assert (cluster.get(0).isr, cluster.get(0).eligible_leader_replicas) == ([1], [2, 3])


def test_a_wiped_disk_is_neither_eligible_nor_the_last_isr_member() -> None:
    cluster = _cluster(1, 2, 3, replicas=[1, 2, 3], min_isr=3)
    cluster.beat(3, want_fence=True)
    cluster.beat(2, want_fence=True)
    assert cluster.get(0).eligible_leader_replicas == [2, 3]
    cluster.beat(1, want_fence=True)
    assert cluster.get(0).leader == NO_LEADER
    # Broker 1 (the last ISR member) and 2 come back with new, empty disks.
    for broker_id in (1, 2):
        outcome = register_broker(
            cluster.image,
            registration(broker_id, 1, log_dirs=[uuid.UUID(int=0xE000 + broker_id)]),
            cluster.next_offset,
            cluster.now_ms,
            cluster_id=CLUSTER_ID,
            heartbeats=cluster.heartbeats,
        )
        assert outcome.error_code == ErrorCode.NONE
        cluster.apply(outcome.records)
    partition = cluster.get(0)
    assert partition.isr == [] and partition.eligible_leader_replicas == [3]
    cluster.beat(1)
    cluster.beat(2)
    assert cluster.get(0).leader == NO_LEADER  # neither may lead: their logs are empty
    cluster.beat(3)
    assert (cluster.get(0).leader, cluster.get(0).isr) == (3, [3])


def test_unclean_election_waits_for_an_eligible_replica_and_clears_the_elr() -> None:
    cluster = _cluster(1, 2, 3, replicas=[1, 2, 3])
    cluster.beat(3, want_fence=True)
    cluster.beat(2, want_fence=True)
    cluster.beat(1, want_fence=True)
    image = cluster.image
    topic = image.topics_by_id[TOPIC]
    # 3 is out of sync; 2 is eligible but fenced: an unclean election could pick 3.
    cluster.beat(3)
    record = unclean_leader_election(
        image, topic, 0, cluster.get(0), unclean_leader_election_enable=True
    )
    assert record is not None and record.leader == 3
    assert record.eligible_leader_replicas == []
    # With the eligible 2 alive, the clean path elects it and no unclean record is made.
    cluster.beat(2)
    assert cluster.get(0).leader == 2
    assert (
        unclean_leader_election(
            image, topic, 0, cluster.get(0), unclean_leader_election_enable=True
        )
        is None
    )
