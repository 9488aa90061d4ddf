"""Every client, every codec: keys, headers, timestamps and null values survive the round
trip, and each client's admin API creates, describes and deletes topics and configs."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.nodes import NodeProcess

pytestmark = pytest.mark.clients

CODECS = ["gzip", "snappy", "lz4", "zstd"]
COUNT = 30
BASE_TS = 1_700_000_000_000


def expected() -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]], int]]:
    out = []
    for i in range(COUNT):
        key = None if i % 5 == 2 else b"k%d" % i  # clients refuse a null key and value
        value = None if i % 5 == 0 else b"v%d" % i
        out.append((key, value, [("h", b"%d" % i)], BASE_TS + i))
    return out


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    process = NodeProcess(tmp_path_factory.mktemp("matrix"))
    process.start()
    yield process
    process.kill()


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python(node: NodeProcess, codec: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = f"kp-{codec}"
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, compression_type=codec, acks="all")
    for key, value, headers, ts in expected():
        producer.send(topic, key=key, value=value, headers=headers, timestamp_ms=ts)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=node.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=5000
    )
    consumer.assign([TopicPartition(topic, 0)])
    got = [(m.key, m.value, list(m.headers), m.timestamp) for m in consumer]
    consumer.close()
    assert got == expected()


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka(node: NodeProcess, codec: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = f"aio-{codec}"

    async def scenario() -> list[Any]:
        producer = AIOKafkaProducer(
            bootstrap_servers=node.bootstrap, compression_type=codec, acks="all"
        )
        await producer.start()
        try:
            for key, value, headers, ts in expected():
                await producer.send_and_wait(
                    topic, value, key=key, headers=headers, timestamp_ms=ts
                )
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=node.bootstrap, auto_offset_reset="earliest")
        await consumer.start()
        got: list[Any] = []
        try:
            consumer.assign([TopicPartition(topic, 0)])
            while len(got) < COUNT:
                m = await asyncio.wait_for(consumer.getone(), 20)
                got.append((m.key, m.value, list(m.headers), m.timestamp))
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(scenario()) == expected()


@pytest.mark.skipif(shutil.which("kcat") is None, reason="Debian's kcat is not installed")
@pytest.mark.parametrize("codec", CODECS)
def test_kcat(node: NodeProcess, codec: str) -> None:
    topic = f"kcat-{codec}"
    lines = "".join(f"k{i}\tv{i}\n" for i in range(COUNT))
    subprocess.run(
        ["kcat", "-b", node.bootstrap, "-t", topic, "-P", "-K", "\t", "-z", codec, "-H", "h=x"],
        input=lines,
        text=True,
        check=True,
        timeout=30,
    )
    out = subprocess.run(
        [
            "kcat",
            "-b",
            node.bootstrap,
            "-t",
            topic,
            "-C",
            "-e",
            "-o",
            "beginning",
            "-f",
            "%k|%s|%h\\n",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert out.stdout.splitlines() == [f"k{i}|v{i}|h=x" for i in range(COUNT)]


def test_kafka_python_admin(node: NodeProcess) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        admin.create_topics([NewTopic("kp-admin", num_partitions=2, replication_factor=1)])
        assert "kp-admin" in admin.list_topics()
        described = admin.describe_topics(["kp-admin"])
        assert len(described[0]["partitions"]) == 2
        admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "kp-admin", configs={"retention.ms": "1000"})]
        )
        # kafka-python 3 lists only the keys that differ from their defaults.
        result = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-admin")])
        assert result["topic"]["kp-admin"]["retention.ms"]["value"] == "1000"
        admin.delete_topics(["kp-admin"])
        assert "kp-admin" not in admin.list_topics()
    finally:
        admin.close()


def test_aiokafka_admin(node: NodeProcess) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    async def scenario() -> tuple[list[str], dict[str, Any], list[str]]:
        admin = AIOKafkaAdminClient(bootstrap_servers=node.bootstrap)
        await admin.start()
        try:
            await admin.create_topics(
                [NewTopic("aio-admin", num_partitions=3, replication_factor=1)]
            )
            listed = await admin.list_topics()
            await admin.alter_configs(
                [
                    ConfigResource(
                        ConfigResourceType.TOPIC, "aio-admin", configs={"segment.ms": "60000"}
                    )
                ]
            )
            configs = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, "aio-admin")]
            )
            entries = {c[0]: c[1] for c in configs[0].resources[0][4]}
            await admin.delete_topics(["aio-admin"])
            after = await admin.list_topics()
        finally:
            await admin.close()
        return listed, entries, after

    listed, entries, after = asyncio.run(scenario())
    assert "aio-admin" in listed
    assert entries["segment.ms"] == "60000"
    assert "aio-admin" not in after
