"""Restarts and crashes of a real node: nothing acknowledged is lost or moved."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.shell.real_fs import RealFileSystem
from odradek.storage.checkpoint import REPLICATION_CHECKPOINT, read_offset_checkpoint
from tests.integration.nodes import NodeProcess

pytestmark = pytest.mark.clients

RECORDS = 100_000


def read_partition(bootstrap: str, topic: str, end: int) -> dict[int, bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: dict[int, bytes] = {}
    deadline = time.monotonic() + 120
    while len(got) < end and time.monotonic() < deadline:
        for message in consumer.consume(10_000, 0.5):
            assert message.error() is None, message.error()
            offset, value = message.offset(), message.value()
            assert offset is not None and value is not None
            got[offset] = value
    consumer.close()
    return got


def test_clean_restart_keeps_topics_and_records(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path)
    bootstrap = node.start()
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic("kept", num_partitions=2)]).values():
            future.result(15)
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(100):
            producer.produce("kept", value=b"%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        assert node.stop() == 0
        node.start()
        topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
        assert len(topics["kept"].partitions) == 2
        assert sorted(read_partition(bootstrap, "kept", 50).values()) == sorted(
            b"%d" % i for i in range(0, 100, 2)
        )
    finally:
        node.kill()


def test_sigkill_during_acks_all_produce_loses_nothing_acknowledged(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path)
    bootstrap = node.start()
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic("durable", num_partitions=1)]).values():
            future.result(15)
        acknowledged: dict[bytes, int] = {}
        lock = threading.Lock()

        def on_delivery(error: object, message: object) -> None:
            if error is None:
                with lock:
                    acknowledged[message.value()] = message.offset()  # type: ignore[attr-defined]

        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 60_000,
                "reconnect.backoff.max.ms": 500,
            }
        )
        killed_at = 0

        def kill_once_a_third_is_acknowledged() -> None:
            nonlocal killed_at
            if not killed_at and len(acknowledged) >= RECORDS // 3:
                node.kill()  # mid-stream, with requests in flight
                killed_at = len(acknowledged)
                node.start()

        for i in range(RECORDS):
            while True:
                try:
                    producer.produce("durable", value=b"value-%06d" % i, on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
            kill_once_a_third_is_acknowledged()
        # The producer may queue every record before a third is acknowledged (its queue
        # holds them all): then the kill comes while the rest are still in flight.
        while not killed_at and len(acknowledged) < RECORDS:
            producer.poll(0.01)
            kill_once_a_third_is_acknowledged()
        producer.flush(120)
        assert killed_at > 0
        assert len(acknowledged) > killed_at
        stored = read_partition(bootstrap, "durable", max(acknowledged.values()) + 1)
        missing = [v for v, o in acknowledged.items() if stored.get(o) != v]
        assert not missing, f"{len(missing)} acknowledged records lost or moved, e.g. {missing[:3]}"
    finally:
        node.kill()


def test_corrupt_committed_metadata_stops_the_node_loudly(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path)
    bootstrap = node.start()
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic("meta", num_partitions=1)]).values():
            future.result(15)
        assert node.stop() == 0
        segment = tmp_path / "node-1" / "__cluster_metadata-0" / ("0" * 20 + ".log")
        data = bytearray(segment.read_bytes())
        data[40] ^= 0x01  # inside the first batch's CRC range: a committed record
        segment.write_bytes(bytes(data))
        with pytest.raises(AssertionError, match="did not start"):
            node.start()
        assert "offline" in node.log_path.read_text()
    finally:
        node.kill()


def _checkpointed_high_watermarks(root: Path) -> dict[tuple[str, int], int]:
    found = list(root.rglob(REPLICATION_CHECKPOINT))
    if not found:
        return {}
    return read_offset_checkpoint(RealFileSystem(), str(found[0]))


def test_the_high_watermark_checkpoint_follows_its_interval_and_a_clean_stop(
    tmp_path: Path,
) -> None:
    """``replica.high.watermark.checkpoint.interval.ms`` (Kafka's 5 s) is how far behind a
    restarted replica's high watermark may start; a clean stop writes the exact one."""
    node = NodeProcess(tmp_path)
    bootstrap = node.start()
    try:
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(30):
            producer.produce("watermarked", value=b"%d" % i)
        assert producer.flush(30) == 0
        # Within a few intervals of 5 s, where the checkpoint used to wait 60 s.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if _checkpointed_high_watermarks(tmp_path).get(("watermarked", 0)) == 30:
                break
            time.sleep(0.5)
        assert _checkpointed_high_watermarks(tmp_path).get(("watermarked", 0)) == 30
        for i in range(12):
            producer.produce("watermarked", value=b"%d" % i)
        assert producer.flush(30) == 0
        assert node.stop() == 0
        assert _checkpointed_high_watermarks(tmp_path)[("watermarked", 0)] == 42
    finally:
        node.kill()
