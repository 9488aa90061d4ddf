"""Records written with any ``acks`` become readable soon, on one node and on three.

With flush-before-ack (our default) the high watermark passes only fsynced records. An
acks=0 or acks=1 produce waits for no flush, so the node itself must schedule one for
every append; before it did, such records stayed invisible until some later acks=all
produce forced a flush (schema registries and REST proxies produce with acks=1).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol.messages import ProduceRequest
from odradek.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from odradek.protocol.record_codec import (
    Record,
    encode_batch,
)
from tests.integration.cluster import Cluster
from tests.integration.nodes import NodeProcess
from tests.integration.test_record_validation import PRODUCE_VERSION, Connection

# Far above the few milliseconds a group commit takes; the records of the bug never
# became visible at all.
READ_DEADLINE_S = 20.0


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    process = NodeProcess(tmp_path_factory.mktemp("visibility") / "node")
    process.start()
    yield process
    process.kill()


def produce(bootstrap: str, topic: str, acks: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, f"{acks}-{i}".encode())
    assert producer.flush(30) == 0


def read_values(bootstrap: str, topic: str, count: int) -> list[str]:
    """Read partition 0 from the start until ``count`` values arrive or the deadline
    passes. The partition is assigned, not subscribed: a group's writes to
    ``__consumer_offsets`` would flush the node and hide the bug."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{topic}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values: list[str] = []
    deadline = time.monotonic() + READ_DEADLINE_S
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(bytes(message.value() or b"").decode())
    finally:
        consumer.close()
    return values


def create_topic(bootstrap: str, topic: str, replication_factor: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, 1, replication_factor=replication_factor)])
    futures[topic].result(30)
    # The controller has created it; its leader creates the log a moment later, and an
    # acks=0 record sent before that is lost (the producer hears of no error, only of
    # the closed connection). Wait until the leader answers for the partition.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"wait-{topic}"})
    deadline = time.monotonic() + READ_DEADLINE_S
    try:
        while True:
            try:
                consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=2)
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        consumer.close()


@pytest.mark.parametrize("acks", ["1", "0"])
def test_one_node_serves_records_of_any_acks(node: NodeProcess, acks: str) -> None:
    topic = f"visible-acks{acks}"
    create_topic(node.bootstrap, topic, 1)
    produce(node.bootstrap, topic, acks, 20)
    # acks=0 gives no answer to wait on: every record is readable all the same.
    assert read_values(node.bootstrap, topic, 20) == [f"{acks}-{i}" for i in range(20)]


def test_three_nodes_serve_acks_1_records(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    cluster.start()
    try:
        create_topic(cluster.bootstrap, "visible-rf3", 3)
        produce(cluster.bootstrap, "visible-rf3", "1", 20)
        assert read_values(cluster.bootstrap, "visible-rf3", 20) == [f"1-{i}" for i in range(20)]
    finally:
        cluster.stop()


def send_acks_zero(connection: Connection, topic: str) -> None:
    records = encode_batch([Record(offset_delta=0, timestamp=int(time.time() * 1000), value=b"x")])
    connection.send(
        0,
        PRODUCE_VERSION,
        ProduceRequest(
            acks=0,
            timeout_ms=10_000,
            topic_data=[
                TopicProduceData(
                    name=topic, partition_data=[PartitionProduceData(index=0, records=records)]
                )
            ],
        ),
    )
    connection.sent.pop()  # acks=0: no answer comes


def test_a_failed_acks_zero_produce_closes_the_connection(node: NodeProcess) -> None:
    # As in Kafka: the producer waits for no answer, so the closed connection is how it
    # learns to refresh its metadata. A good acks=0 produce keeps the connection.
    create_topic(node.bootstrap, "acks0-good", 1)
    good = Connection(node.bootstrap)
    send_acks_zero(good, "acks0-good")
    # Answered on the same connection, once the flush the append scheduled has run.
    deadline = time.monotonic() + READ_DEADLINE_S
    while good.log_end("acks0-good") != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert good.log_end("acks0-good") == 1
    good.close()
    bad = Connection(node.bootstrap)
    send_acks_zero(bad, "acks0-no-such-topic")
    assert bad.sock.recv(1) == b""  # closed by the node
    bad.close()
