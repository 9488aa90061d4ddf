"""Two broker listeners, as most Kafka deployments have them: ``PLAINTEXT`` inside, the
inter-broker one followers fetch over, and ``EXTERNAL`` (SASL_PLAINTEXT with PLAIN) for
clients. Each client is told the addresses of the listener it came in on (Metadata,
FindCoordinator, DescribeCluster), so a client outside never gets an inside address;
produce with acks=all (the follower replicating over the inside listener), a consumer
group and its commits all work through the outside one alone.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.protocol.messages import DescribeClusterRequest, MetadataRequest
from tests.integration.cluster import Cluster, ClusterNode, ask

pytestmark = pytest.mark.clients

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
EXTERNAL = (
    "listener.name.external.sasl.enabled.mechanisms=PLAIN\n"
    f"listener.name.external.plain.sasl.jaas.config={JAAS}\n"
)
RECORDS = 200


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(
        tmp_path_factory.mktemp("listeners"), 2, EXTERNAL, external_protocol="SASL_PLAINTEXT"
    )
    c.start()
    yield c
    c.kill()


def outside(cluster: Cluster, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": ",".join(f"127.0.0.1:{n.external_port}" for n in cluster.nodes),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
        **extra,
    }


def inside_brokers(node: ClusterNode) -> dict[int, int]:
    answer = ask(node, MetadataRequest(topics=None), 12)
    return {b.node_id: b.port for b in answer.brokers}


def test_each_listener_hands_out_its_own_addresses(cluster: Cluster) -> None:
    from confluent_kafka.admin import AdminClient

    inside = {n.node_id: n.port for n in cluster.nodes}
    external = {n.node_id: n.external_port for n in cluster.nodes}
    for node in cluster.nodes:
        assert inside_brokers(node) == inside
        described = ask(node, DescribeClusterRequest(), 1)
        assert {b.broker_id: b.port for b in described.brokers} == inside
    admin = AdminClient(outside(cluster))
    brokers = admin.list_topics(timeout=15).brokers
    seen: dict[int, tuple[str, int]] = {b: (str(m.host), m.port) for b, m in brokers.items()}
    assert seen == {i: ("127.0.0.1", port) for i, port in external.items()}


def test_produce_and_a_group_work_through_the_outside_listener_alone(cluster: Cluster) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"outside-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(outside(cluster))
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=2)])[topic].result(30)
    acked: list[int] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked.append(int(msg.key()))

    producer = Producer(outside(cluster, acks="all"))
    for i in range(RECORDS):
        producer.produce(
            topic,
            str(i).encode(),
            key=str(i).encode(),
            on_delivery=lambda err, msg: (
                acked.append(int(msg.key() or b"-1")) if err is None else None
            ),
        )
    assert producer.flush(30) == 0
    assert sorted(acked) == list(range(RECORDS))
    group = f"g-{uuid.uuid4().hex[:6]}"
    consumer = Consumer(outside(cluster, **{"group.id": group, "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    seen: set[int] = set()
    for _ in range(60):
        for message in consumer.consume(RECORDS, timeout=1.0):
            assert message.error() is None, message.error()
            seen.add(int(message.value() or b"-1"))
        if len(seen) == RECORDS:
            break
    # The coordinator it found (FindCoordinator) is on the outside listener too: commits
    # go there.
    committed = consumer.commit(asynchronous=False)
    consumer.close()
    assert seen == set(range(RECORDS))
    assert committed is not None and sum(p.offset for p in committed) == RECORDS
