"""Replication on real processes: acks=all survives killing the partition leader.

Three combined nodes, a topic with replication factor 3 (min.insync.replicas defaults to
2). confluent-kafka produces with acks=all (idempotent) while the partition's leader is
killed with SIGKILL and restarted, twice. Every acknowledged value must then be read back
exactly once, in the order it was acknowledged.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.cluster import Cluster, ClusterNode
from tests.integration.workload import Writer

FAST_FAILOVER = (
    "broker.session.timeout.ms=2000\n"
    "broker.heartbeat.interval.ms=200\n"
    "replica.lag.time.max.ms=2000\n"
    "controller.quorum.election.timeout.ms=500\n"
    "controller.quorum.fetch.timeout.ms=1000\n"
)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, 3, extra=FAST_FAILOVER)
    c.start()
    yield c
    c.kill()  # not a test of stopping: a clean stop is tested on its own


def partition_leader(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    meta: Any = admin.list_topics(topic=topic, timeout=10).topics[topic]
    leader: int = meta.partitions[0].leader
    return leader


def read_all(bootstrap: str, topic: str, expected: int) -> list[int]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "checker",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[int] = []
    deadline = time.monotonic() + 60
    while len(values) < expected and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            values.append(int(msg.value() or b"-1"))
    consumer.close()
    return values


def kill_and_restart(cluster: Cluster, leader_id: int) -> None:
    node: ClusterNode = cluster.nodes[leader_id - 1]
    node.kill()
    time.sleep(4)  # the partition fails over to another in-sync replica meanwhile
    node.start()


def test_acks_all_survives_killing_the_leader_twice(cluster: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("acked", num_partitions=1, replication_factor=3)])[
        "acked"
    ].result(30)
    writer = Writer(cluster.bootstrap, "acked")
    writer.start()
    time.sleep(2)
    first = partition_leader(cluster.bootstrap, "acked")
    kill_and_restart(cluster, first)
    time.sleep(3)
    second = partition_leader(cluster.bootstrap, "acked")
    assert second > 0, "the partition has a leader again after the first kill"
    kill_and_restart(cluster, second)
    time.sleep(3)
    writer.stopping.set()
    writer.join(120)
    acknowledged = writer.acknowledged
    assert len(acknowledged) > 100, "the writer made progress"
    read = read_all(cluster.bootstrap, "acked", len(acknowledged))
    position = {v: i for i, v in enumerate(read)}
    lost = [v for v in acknowledged if v not in position]
    assert not lost, f"{len(lost)} acknowledged values lost, e.g. {lost[:10]}"
    assert len(read) == len(set(read)), "a value was read twice"
    offsets = [position[v] for v in sorted(acknowledged)]
    assert offsets == sorted(offsets), "acknowledged values out of order"


def test_committed_offsets_survive_losing_the_group_coordinator(cluster: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("work", num_partitions=1, replication_factor=3)])["work"].result(
        30
    )
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(100):
        producer.produce("work", str(i).encode())
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "g",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["work"])
    seen: list[int] = []
    deadline = time.monotonic() + 60
    while len(seen) < 50 and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            seen.append(int(msg.value() or b"-1"))
    assert seen[:50] == list(range(50))
    consumer.commit(offsets=[TopicPartition("work", 0, 50)], asynchronous=False)
    consumer.close()
    # The offsets topic is replicated like any topic: three replicas here.
    offsets_meta: Any = admin.list_topics(topic="__consumer_offsets", timeout=10).topics[
        "__consumer_offsets"
    ]
    assert all(len(p.replicas) == 3 for p in offsets_meta.partitions.values())
    described = admin.describe_consumer_groups(["g"])["g"].result(30)
    coordinator = described.coordinator.id
    cluster.nodes[coordinator - 1].kill()
    # Another broker takes over the group's offsets partition, committed offset included.
    survivor = next(n for n in cluster.nodes if n.node_id != coordinator)
    resumed = Consumer(
        {
            "bootstrap.servers": survivor.bootstrap,
            "group.id": "g",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    resumed.subscribe(["work"])
    first = None
    deadline = time.monotonic() + 60
    while first is None and time.monotonic() < deadline:
        msg = resumed.poll(1.0)
        if msg is not None and msg.error() is None:
            first = int(msg.value() or b"-1")
    resumed.close()
    assert first == 50, f"resumed at {first}, not at the committed offset 50"
