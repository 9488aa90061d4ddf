"""min.insync.replicas on real processes: with too few replicas, nothing is acknowledged.

Three controllers and three brokers (separate roles, so the controller quorum outlives
the brokers). With two of three brokers stopped, the controller fences them, the ISR
shrinks to the survivor, and acks=all produce is refused with NOT_ENOUGH_REPLICAS
(min.insync.replicas defaults to a majority of the replication factor, 2 of 3). Once a
broker is back in the ISR, produce succeeds again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.cluster import Cluster

FAST = (
    "broker.session.timeout.ms=2000\n"
    "broker.heartbeat.interval.ms=200\n"
    "replica.lag.time.max.ms=2000\n"
)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, 3, extra=FAST, controllers=3)
    c.start()
    yield c
    c.kill()  # not a test of stopping: a clean stop is tested on its own


def produce_one(bootstrap: str, value: bytes) -> Any:
    """Produce with acks=all; the delivery error (None when acknowledged)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "message.timeout.ms": 6000,
            "retry.backoff.ms": 200,
        }
    )
    outcome: list[Any] = []
    producer.produce("safe", value, callback=lambda err, msg: outcome.append(err))
    producer.flush(20)
    return outcome[0] if outcome else "no delivery report"


def isr_of(bootstrap: str, topic: str) -> list[int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    meta: Any = admin.list_topics(topic=topic, timeout=10).topics[topic]
    return sorted(meta.partitions[0].isrs)


def isr(bootstrap: str) -> list[int]:
    return isr_of(bootstrap, "safe")


def test_acks_all_is_refused_below_min_insync_replicas(cluster: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("safe", num_partitions=1, replication_factor=3)])["safe"].result(
        30
    )
    assert produce_one(cluster.bootstrap, b"with three") is None
    survivor, *others = cluster.nodes
    for node in others:
        node.stop()
    deadline = time.monotonic() + 30
    while isr(survivor.bootstrap) != [survivor.node_id]:
        assert time.monotonic() < deadline, "the ISR never shrank to the survivor"
        time.sleep(0.3)
    error = produce_one(survivor.bootstrap, b"with one")
    assert error is not None, "acknowledged with one in-sync replica of three"
    assert error.code() in (KafkaError.NOT_ENOUGH_REPLICAS, KafkaError._MSG_TIMED_OUT), error
    others[0].start()
    deadline = time.monotonic() + 30
    while len(isr(survivor.bootstrap)) < 2:
        assert time.monotonic() < deadline, "the restarted broker never rejoined the ISR"
        time.sleep(0.3)
    assert produce_one(survivor.bootstrap, b"with two") is None


def leader(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    meta: Any = admin.list_topics(topic=topic, timeout=10).topics[topic]
    return int(meta.partitions[0].leader)


def test_an_eligible_replica_leads_when_the_last_isr_member_dies(cluster: Cluster) -> None:
    """KIP-966 on real processes. Kill the followers one by one (SIGKILL): the ISR
    shrinks to the leader and the follower that left it below min.insync.replicas stays
    eligible. Kill the leader too, then bring back that eligible follower: it leads, and
    with the out-of-sync one back as its follower every acknowledged record is read.
    Without ELR the partition would stay offline until the old leader returned."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("elr", num_partitions=1, replication_factor=3)])["elr"].result(30)
    # Idempotent: InitProducerId goes through the controller-only nodes (a broker-only
    # node forwards it), which once answered COORDINATOR_LOAD_IN_PROGRESS forever.
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True}
    )
    acknowledged: list[bytes] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acknowledged.append(msg.value())

    for i in range(50):
        producer.produce("elr", f"v{i}".encode(), callback=delivered)
    producer.flush(30)
    assert len(acknowledged) == 50
    by_id = {node.node_id: node for node in cluster.nodes}
    first = leader(cluster.bootstrap, "elr")
    out_of_sync, eligible = sorted(set(by_id) - {first})
    by_id[out_of_sync].kill()
    by_id[eligible].kill()
    deadline = time.monotonic() + 30
    while isr_of(by_id[first].bootstrap, "elr") != [first]:
        assert time.monotonic() < deadline, "the ISR never shrank to the leader"
        time.sleep(0.3)
    by_id[first].kill()
    by_id[eligible].start()
    deadline = time.monotonic() + 40
    while leader(by_id[eligible].bootstrap, "elr") != eligible:
        assert time.monotonic() < deadline, "the eligible replica never took over"
        time.sleep(0.3)
    # Alone it is below min.insync.replicas, so its high watermark stays where it was
    # (nothing new is exposed on one copy); the out-of-sync replica catches up from it,
    # joins the ISR, and everything acknowledged becomes readable, the old leader still
    # dead.
    by_id[out_of_sync].start()
    consumer = Consumer(
        {
            "bootstrap.servers": by_id[eligible].bootstrap,
            "group.id": "elr-check",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    # assign, not subscribe: with two brokers down the group coordinator's partition
    # may have no leader either, and this read needs none.
    consumer.assign([TopicPartition("elr", 0, OFFSET_BEGINNING)])
    read: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(read) < len(acknowledged) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            value = msg.value()
            assert value is not None
            read.append(value)
    consumer.close()
    assert read == acknowledged
