"""Real Kafka clients against a real node process: what users do day to day."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.nodes import NodeProcess

pytestmark = pytest.mark.clients


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    process = NodeProcess(tmp_path_factory.mktemp("node"))
    process.start()
    yield process
    process.kill()


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, num_partitions=partitions)]).values():
        future.result(15)


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[object]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    messages: list[object] = []
    deadline = time.monotonic() + 30
    while len(messages) < expected and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        assert message.error() is None, message.error()
        messages.append(message)
    consumer.close()
    return messages


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_kafka_round_trip(node: NodeProcess, compression: str) -> None:
    topic = f"ck-{compression}"
    create_topic(node.bootstrap, topic, partitions=3)
    producer = Producer(
        {"bootstrap.servers": node.bootstrap, "acks": "all", "compression.type": compression}
    )
    sent = []
    for i in range(300):
        key = None if i % 5 == 0 else b"key-%d" % i
        value = None if i % 7 == 0 else b"value-%d" % i
        producer.produce(
            topic,
            key=key,
            value=value,
            headers=[("n", b"%d" % i), ("empty", None)],
            timestamp=1_700_000_000_000 + i,
            partition=i % 3,
        )
        sent.append((i % 3, key, value, 1_700_000_000_000 + i))
    assert producer.flush(30) == 0
    got = consume_all(node.bootstrap, topic, 3, len(sent))
    # Timestamps are unique here, so they order both sides.
    received = sorted(
        ((m.partition(), m.key(), m.value(), m.timestamp()[1]) for m in got),  # type: ignore[attr-defined]
        key=lambda t: t[3],
    )
    assert received == sent
    headers = {m.timestamp()[1]: m.headers() for m in got}  # type: ignore[attr-defined]
    assert headers[1_700_000_000_042] == [("n", b"42"), ("empty", None)]


def test_offsets_are_dense_and_in_order_per_partition(node: NodeProcess) -> None:
    create_topic(node.bootstrap, "order")
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 2})
    delivered: list[int] = []
    for i in range(500):
        producer.produce(
            "order", value=b"%d" % i, on_delivery=lambda e, m: delivered.append(m.offset() or 0)
        )
    assert producer.flush(30) == 0
    assert sorted(delivered) == list(range(500))
    got = consume_all(node.bootstrap, "order", 1, 500)
    assert [m.offset() for m in got] == list(range(500))  # type: ignore[attr-defined]
    assert [int(m.value()) for m in got] == list(range(500))  # type: ignore[attr-defined]


def test_admin_lists_and_deletes_topics(node: NodeProcess) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    create_topic(node.bootstrap, "doomed", partitions=2)
    assert "doomed" in admin.list_topics(timeout=10).topics
    for future in admin.delete_topics(["doomed"]).values():
        future.result(15)
    assert "doomed" not in admin.list_topics(timeout=10).topics
    again = admin.create_topics([NewTopic("doomed", num_partitions=1)])
    for future in again.values():
        future.result(15)
    metadata = admin.list_topics(timeout=10).topics["doomed"]
    assert len(metadata.partitions) == 1
    bad = admin.create_topics([NewTopic("bad name!", num_partitions=1)])
    with pytest.raises(KafkaException) as info:
        for future in bad.values():
            future.result(15)
    assert info.value.args[0].code() == KafkaError.TOPIC_EXCEPTION  # INVALID_TOPIC_EXCEPTION, 17


def test_list_offsets_by_time(node: NodeProcess) -> None:
    create_topic(node.bootstrap, "times")
    producer = Producer({"bootstrap.servers": node.bootstrap})
    for i in range(10):
        producer.produce("times", value=b"x", timestamp=1_000_000 + i * 1000)
        producer.flush(10)
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "unused"})
    found = consumer.offsets_for_times([TopicPartition("times", 0, 1_004_500)], timeout=10)
    assert found[0].offset == 5
    low, high = consumer.get_watermark_offsets(TopicPartition("times", 0), timeout=10)
    assert (low, high) == (0, 10)
    consumer.close()


def test_aiokafka_round_trip(node: NodeProcess) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as AioTopicPartition

    async def scenario() -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]]:
        producer = AIOKafkaProducer(bootstrap_servers=node.bootstrap, acks="all")
        await producer.start()
        try:
            for i in range(40):
                await producer.send_and_wait(
                    "aio", b"v%d" % i, key=b"k%d" % i, headers=[("h", b"%d" % i)]
                )
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=node.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
        )
        await consumer.start()
        got: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = []
        try:
            consumer.assign([AioTopicPartition("aio", 0)])
            while len(got) < 40:
                message = await asyncio.wait_for(consumer.getone(), 20)
                got.append((message.key, message.value, list(message.headers)))
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(scenario())
    assert got == [(b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)]) for i in range(40)]


def test_kafka_python_round_trip(node: NodeProcess) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KpTopicPartition

    # kafka-python's default producer is idempotent: InitProducerId and sequences.
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, acks="all", compression_type="gzip")
    futures = [producer.send("kp", key=b"k", value=b"v%d" % i) for i in range(60)]
    producer.flush(30)
    assert [f.get(10).offset for f in futures] == list(range(60))
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=node.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=5000
    )
    consumer.assign([KpTopicPartition("kp", 0)])
    assert [m.value for m in consumer] == [b"v%d" % i for i in range(60)]
    consumer.close()


def test_garbage_from_one_client_does_not_hurt_others(node: NodeProcess) -> None:
    host, port = node.bootstrap.rsplit(":", 1)
    for junk in (b"\x00\x00\x00\x05hello", b"\x7f\xff\xff\xff", b"\x00\x00\x00\x08" + b"\xff" * 8):
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(junk)
            assert sock.recv(100) == b""  # closed by the node
    create_topic(node.bootstrap, "after-garbage")
    producer = Producer({"bootstrap.servers": node.bootstrap})
    producer.produce("after-garbage", value=b"still here")
    assert producer.flush(15) == 0


def test_unknown_topic_without_auto_create_errors(node: NodeProcess) -> None:
    consumer = Consumer(
        {"bootstrap.servers": node.bootstrap, "group.id": "x", "allow.auto.create.topics": False}
    )
    metadata = consumer.list_topics("never-created-here", timeout=10)
    error = metadata.topics["never-created-here"].error
    assert error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    consumer.close()


# The legacy AlterConfigs API is what this test exercises, deprecated or not.
@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_confluent_admin_configs_partitions_and_delete_records(node: NodeProcess) -> None:
    from confluent_kafka.admin import ConfigResource, NewPartitions

    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    create_topic(node.bootstrap, "admin", partitions=1)
    resource = ConfigResource(ConfigResource.Type.TOPIC, "admin")
    configs = admin.describe_configs([resource])[resource].result(15)
    assert configs["retention.ms"].value == "604800000"
    assert configs["retention.ms"].is_default
    altered = ConfigResource(
        ConfigResource.Type.TOPIC, "admin", set_config={"retention.ms": "3600000"}
    )
    admin.alter_configs([altered])[altered].result(15)
    configs = admin.describe_configs([resource])[resource].result(15)
    assert configs["retention.ms"].value == "3600000"
    assert not configs["retention.ms"].is_default
    bad = ConfigResource(ConfigResource.Type.TOPIC, "admin", set_config={"retention.ms": "soon"})
    with pytest.raises(KafkaException):
        admin.alter_configs([bad])[bad].result(15)

    admin.create_partitions([NewPartitions("admin", 3)])["admin"].result(15)
    assert len(admin.list_topics(timeout=10).topics["admin"].partitions) == 3

    producer = Producer({"bootstrap.servers": node.bootstrap})
    for i in range(10):
        producer.produce("admin", value=b"%d" % i, partition=0)
    assert producer.flush(15) == 0
    deleted = admin.delete_records([TopicPartition("admin", 0, 4)])
    for future in deleted.values():
        assert future.result(15).low_watermark == 4
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "unused"})
    assert consumer.get_watermark_offsets(TopicPartition("admin", 0), timeout=10) == (4, 10)
    consumer.close()


def test_librdkafka_idempotent_producer(node: NodeProcess) -> None:
    create_topic(node.bootstrap, "idem", partitions=2)
    producer = Producer(
        {"bootstrap.servers": node.bootstrap, "enable.idempotence": True, "linger.ms": 1}
    )
    delivered: list[tuple[int, int]] = []
    for i in range(2000):
        producer.produce(
            "idem",
            value=b"%d" % i,
            partition=i % 2,
            on_delivery=lambda e, m: delivered.append((m.partition() or 0, m.offset() or 0)),
        )
    assert producer.flush(30) == 0
    assert sorted(delivered) == sorted((p, o) for p in (0, 1) for o in range(1000))
    got = consume_all(node.bootstrap, "idem", 2, 2000)
    assert len(got) == 2000


def test_topic_max_message_bytes_and_dynamic_broker_configs(node: NodeProcess) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource

    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    topic = NewTopic("small-messages", num_partitions=1, config={"max.message.bytes": "2000"})
    for future in admin.create_topics([topic]).values():
        future.result(15)
    producer = Producer({"bootstrap.servers": node.bootstrap, "compression.type": "none"})
    errors: list[int] = []
    producer.produce(
        "small-messages",
        value=b"x" * 5000,
        on_delivery=lambda e, m: errors.append(0 if e is None else e.code()),
    )
    producer.flush(20)  # separate batches: a batch is refused whole
    producer.produce(
        "small-messages",
        value=b"x" * 100,
        on_delivery=lambda e, m: errors.append(0 if e is None else e.code()),
    )
    producer.flush(20)
    assert errors == [KafkaError.MSG_SIZE_TOO_LARGE, 0]

    broker = ConfigResource(
        ConfigResource.Type.BROKER,
        "1",
        incremental_configs=[
            ConfigEntry(
                "log.retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET
            )  # SET
        ],
    )
    admin.incremental_alter_configs([broker])[broker].result(15)
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "1")])
    entry = next(iter(described.values())).result(15)["log.retention.ms"]
    assert entry.value == "7200000"
    assert entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    topic_resource = ConfigResource(ConfigResource.Type.TOPIC, "small-messages")
    topic_configs = admin.describe_configs([topic_resource])[topic_resource].result(15)
    assert topic_configs["retention.ms"].value == "7200000"  # the new broker default
    refused = ConfigResource(
        ConfigResource.Type.BROKER,
        "1",
        incremental_configs=[
            ConfigEntry("num.io.threads", "4", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(KafkaException) as info:
        admin.incremental_alter_configs([refused])[refused].result(15)
    assert info.value.args[0].code() == KafkaError.POLICY_VIOLATION
