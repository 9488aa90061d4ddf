"""Client quotas on three combined PLAINTEXT nodes, authorizer off: set through a node
that is not the active controller (forwarded, KIP-590), described from every node, and
the same after every node restarts.

The installed confluent-kafka and kafka-python have no client-quota admin calls, so the
requests go over a socket.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from odradek.protocol.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from odradek.protocol.messages import alter_client_quotas_request as ar
from tests.integration.cluster import Cluster, ClusterNode, ask, wait_everywhere

Listing = dict[tuple[tuple[str, str | None], ...], dict[str, float]]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("quotas"), 3)
    c.start()
    yield c
    c.kill()


def listing(node: ClusterNode) -> Listing:
    response = ask(node, DescribeClientQuotasRequest(), 1)
    assert isinstance(response, DescribeClientQuotasResponse)
    assert response.error_code == 0, response.error_message
    assert response.entries is not None
    return {
        tuple((e.entity_type, e.entity_name) for e in r.entity): {v.key: v.value for v in r.values}
        for r in response.entries
    }


def test_quotas_set_through_a_follower_reach_every_node_and_survive_restarts(
    cluster: Cluster,
) -> None:
    wait_everywhere(cluster, listing, Listing())
    leader = cluster.controller_leader()
    follower = next(n for n in cluster.nodes if n.node_id != leader)
    request = AlterClientQuotasRequest(
        entries=[
            ar.EntryData(
                entity=[ar.EntityData(entity_type="user", entity_name="alice")],
                ops=[
                    ar.OpData(key="producer_byte_rate", value=1048576),
                    ar.OpData(key="request_percentage", value=25.5),
                ],
            ),
            ar.EntryData(
                entity=[ar.EntityData(entity_type="client-id", entity_name="app")],
                ops=[ar.OpData(key="consumer_byte_rate", value=2048)],
            ),
            ar.EntryData(
                entity=[ar.EntityData(entity_type="user", entity_name="bad")],
                ops=[ar.OpData(key="producer_byte_rate", value=-1)],
            ),
        ]
    )
    response = ask(follower, request, 1)
    assert isinstance(response, AlterClientQuotasResponse)
    assert [(e.entity[0].entity_name, e.error_code) for e in response.entries] == [
        ("alice", 0),
        ("app", 0),
        ("bad", 42),
    ]
    expected: Listing = {
        (("user", "alice"),): {"producer_byte_rate": 1048576.0, "request_percentage": 25.5},
        (("client-id", "app"),): {"consumer_byte_rate": 2048.0},
    }
    wait_everywhere(cluster, listing, expected)
    # Version 0 (not flexible) through the follower too: remove one key.
    removal = AlterClientQuotasRequest(
        entries=[
            ar.EntryData(
                entity=[ar.EntityData(entity_type="user", entity_name="alice")],
                ops=[ar.OpData(key="request_percentage", remove=True)],
            )
        ]
    )
    answer = ask(follower, removal, 0)
    assert isinstance(answer, AlterClientQuotasResponse)
    assert [e.error_code for e in answer.entries] == [0]
    expected[(("user", "alice"),)] = {"producer_byte_rate": 1048576.0}
    wait_everywhere(cluster, listing, expected)

    cluster.kill()  # kill -9: what is committed must be there after any restart
    cluster.start()
    wait_everywhere(cluster, listing, expected)


def test_a_producer_over_its_quota_is_throttled_and_loses_nothing(cluster: Cluster) -> None:
    """KIP-219 on real processes: a client id's producer_byte_rate of 64 KiB/s against
    librdkafka sending about 1.5 MB; the broker answers with throttle_time_ms (librdkafka
    reports it through throttle_cb) and mutes the connection, and every record is
    acknowledged and read back in the order it was sent."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    node = cluster.nodes[0]
    request = AlterClientQuotasRequest(
        entries=[
            ar.EntryData(
                entity=[ar.EntityData(entity_type="client-id", entity_name="slow")],
                ops=[ar.OpData(key="producer_byte_rate", value=65536)],
            )
        ]
    )
    answer = ask(node, request, 1)
    assert isinstance(answer, AlterClientQuotasResponse)
    assert [e.error_code for e in answer.entries] == [0]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("throttled", num_partitions=1, replication_factor=3)])[
        "throttled"
    ].result(30)
    deadline = time.monotonic() + 20
    while any((("client-id", "slow"),) not in listing(n) for n in cluster.nodes):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    throttles: list[int] = []
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "client.id": "slow",
            "acks": "all",
            "linger.ms": 5,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    errors: list[object] = []
    value = b"x" * 1000
    for i in range(1500):
        while True:
            try:
                producer.produce(
                    "throttled", value, key=str(i).encode(),
                    on_delivery=lambda error, _: errors.append(error),
                )  # fmt: skip
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0
    assert errors == [None] * 1500
    assert throttles and max(throttles) > 0
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "throttle-check",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["throttled"])
    keys: list[int] = []
    deadline = time.monotonic() + 60
    while len(keys) < 1500 and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            keys.append(int(message.key() or b"-1"))
    consumer.close()
    assert keys == list(range(1500))
