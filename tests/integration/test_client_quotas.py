"""Client quotas on three combined PLAINTEXT nodes, authorizer off: set through a node
that is not the active controller (forwarded, KIP-590), described from every node, and
the same after every node restarts; ``odradek quotas`` run as an operator runs it.

The installed confluent-kafka and kafka-python have no client-quota admin calls, so the
requests go over a socket.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.protocol.api import RequestHeader, decode_response, encode_request
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    ApiVersionsRequest,
    CreateTopicsRequest,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    MetadataRequest,
)
from odradek.protocol.messages import alter_client_quotas_request as ar
from odradek.protocol.messages import create_topics_request as ct
from tests.integration.cluster import Cluster, ClusterNode, ask, odradek, wait_everywhere

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


def test_the_quotas_command_alters_describes_and_deletes(cluster: Cluster) -> None:
    carol = (("client-id", None), ("user", "carol"))  # carol on any client without its own

    def quotas(*args: str, check: bool = True) -> Any:
        return odradek("quotas", *args, "--bootstrap-server", cluster.bootstrap, check=check)

    def carols(node: ClusterNode) -> dict[str, float]:
        return listing(node).get(carol, {})

    added = quotas(
        "alter", "--user", "carol", "--client-default",
        "--add", "producer_byte_rate=4096,request_percentage=12.5",
    )  # fmt: skip
    assert added.stdout == (
        "user=carol, client-id=<default>: set producer_byte_rate=4096, request_percentage=12.5\n"
    )
    # Every node, so that the command's describe sees it whichever node it asks.
    wait_everywhere(cluster, carols, {"producer_byte_rate": 4096.0, "request_percentage": 12.5})
    assert json.loads(quotas("describe", "--user", "carol", "--json").stdout) == [
        {
            "entity": {"user": "carol", "client-id": None},
            "quotas": {"producer_byte_rate": 4096.0, "request_percentage": 12.5},
        }
    ]
    # The broker's own rule, and its message: a byte rate is a whole number.
    refused = quotas(
        "alter", "--user", "carol", "--client-default", "--add", "producer_byte_rate=1.5",
        check=False,
    )  # fmt: skip
    assert refused.returncode == 1
    assert "INVALID_REQUEST: producer_byte_rate cannot be a fractional value." in refused.stderr

    quotas(
        "alter", "--user", "carol", "--client-default",
        "--delete", "producer_byte_rate", "--delete", "request_percentage",
    )  # fmt: skip
    none: dict[str, float] = {}
    wait_everywhere(cluster, carols, none)
    gone = quotas("describe", "--user", "carol", "--client-default", "--strict")
    assert (gone.stdout, gone.stderr) == ("", "No client quotas match.\n")


class Session:
    """One connection to one node as client id ``client_id``, requests one at a time (a
    muted connection shows as a late answer)."""

    def __init__(self, node: ClusterNode, client_id: str) -> None:
        self._conn = socket.create_connection(("127.0.0.1", node.port), timeout=30)
        self._client_id = client_id
        self._correlation = 0

    def ask(self, request: Any, version: int) -> Any:
        self._correlation += 1
        api_key: int = type(request).API_KEY
        header = RequestHeader(api_key, version, self._correlation, self._client_id)
        payload = encode_request(header, request)
        self._conn.sendall(struct.pack(">i", len(payload)) + payload)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = self._conn.recv(65536)
            assert chunk, "the node closed the connection"
            data += chunk
        _, body = decode_response(data[4:], api_key, version)
        return body

    def close(self) -> None:
        self._conn.close()


def _set_quota(cluster: Cluster, client_id: str, key: str, value: float) -> None:
    request = AlterClientQuotasRequest(
        entries=[
            ar.EntryData(
                entity=[ar.EntityData(entity_type="client-id", entity_name=client_id)],
                ops=[ar.OpData(key=key, value=value)],
            )
        ]
    )
    answer = ask(cluster.nodes[0], request, 1)
    assert [e.error_code for e in answer.entries] == [0]
    deadline = time.monotonic() + 20
    while any((("client-id", client_id),) not in listing(n) for n in cluster.nodes):
        assert time.monotonic() < deadline
        time.sleep(0.2)


def test_a_client_over_its_request_time_share_is_throttled_and_muted(cluster: Cluster) -> None:
    """request_percentage: 1 % of the loop is 100 ms of handler time in the ten seconds
    the first samples span; a stream of Metadata requests for every topic passes it.
    Each answer is whole (nothing refused); the throttle grows to Kafka's bound for
    request time, one window, and the connection then reads nothing for that long."""
    _set_quota(cluster, "busy", "request_percentage", 1)
    session = Session(cluster.nodes[1], "busy")
    throttles: list[int] = []
    try:
        while len(throttles) < 20_000 and (not throttles or throttles[-1] < 1000):
            answer = session.ask(MetadataRequest(topics=None), 12)
            assert len(answer.brokers) == 3  # answered in full, throttled or not
            throttles.append(answer.throttle_time_ms)
        assert throttles[0] == 0  # within the share at first
        assert throttles[-1] == 1000
        started = time.monotonic()
        answer = session.ask(MetadataRequest(topics=None), 12)
        # Muted for the second the last answer named: the next is read only after it.
        assert time.monotonic() - started >= 0.8
    finally:
        session.close()
    # Another client id is not charged for busy's time.
    other = Session(cluster.nodes[1], "idle")
    try:
        assert other.ask(MetadataRequest(topics=None), 12).throttle_time_ms == 0
    finally:
        other.close()


def test_topic_creations_past_the_mutation_rate_are_refused_through_any_node(
    cluster: Cluster,
) -> None:
    """controller_mutation_rate (KIP-599) of 1 partition a second: a bucket of 11. Sent to
    a node that is not the active controller, the request is forwarded and charged
    there; the answer names the topics refused and the wait."""
    _set_quota(cluster, "mutator", "controller_mutation_rate", 1)
    leader = cluster.controller_leader()
    follower = next(n for n in cluster.nodes if n.node_id != leader)
    session = Session(follower, "mutator")
    try:
        answer = session.ask(
            CreateTopicsRequest(
                topics=[
                    ct.CreatableTopic(name=name, num_partitions=count, replication_factor=1)
                    for name, count in (("m1", 10), ("m2", 5), ("m3", 1))
                ],
                timeout_ms=30_000,
            ),
            7,
        )
    finally:
        session.close()
    assert {t.name: t.error_code for t in answer.topics} == {
        "m1": ErrorCode.NONE,
        "m2": ErrorCode.NONE,
        "m3": ErrorCode.THROTTLING_QUOTA_EXCEEDED,
    }
    # 16 taken of 11: about 4 s until the bucket is back at zero (it refills meanwhile).
    assert 3000 <= answer.throttle_time_ms <= 4000
    wait_everywhere(
        cluster,
        lambda n: (
            {"m1", "m2", "m3"} & {t.name for t in ask(n, MetadataRequest(topics=None), 12).topics}
        ),
        {"m1", "m2"},
    )


def _api_versions_from(source: str, node: ClusterNode) -> bool:
    """Whether a connection from ``source`` to ``node`` gets an ApiVersions answer
    (False: closed without one)."""
    header = RequestHeader(ApiVersionsRequest.API_KEY, 0, 1, "conn-test")
    payload = encode_request(header, ApiVersionsRequest())
    with socket.socket() as conn:
        conn.settimeout(30)
        conn.bind((source, 0))
        conn.connect(("127.0.0.1", node.port))
        conn.sendall(struct.pack(">i", len(payload)) + payload)
        try:
            return len(conn.recv(4)) == 4
        except ConnectionResetError:
            return False


def test_connections_past_an_ips_creation_rate_are_closed(cluster: Cluster) -> None:
    """connection_creation_rate (KIP-612) of 1 a second for 127.0.0.2 (a loopback alias;
    the cluster's nodes connect from 127.0.0.1): the first ten connections, the ten
    seconds' worth the first samples span, are served; the next ones are held for the
    throttle and closed unanswered. Other addresses are not counted against it."""
    request = AlterClientQuotasRequest(
        entries=[
            ar.EntryData(
                entity=[ar.EntityData(entity_type="ip", entity_name="127.0.0.2")],
                ops=[ar.OpData(key="connection_creation_rate", value=1)],
            )
        ]
    )
    assert [e.error_code for e in ask(cluster.nodes[0], request, 1).entries] == [0]
    deadline = time.monotonic() + 20
    while any((("ip", "127.0.0.2"),) not in listing(n) for n in cluster.nodes):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    node = cluster.nodes[2]
    answered = [_api_versions_from("127.0.0.2", node) for _ in range(12)]
    assert answered == [True] * 10 + [False] * 2
    assert _api_versions_from("127.0.0.1", node)
    assert _api_versions_from("127.0.0.3", node)
