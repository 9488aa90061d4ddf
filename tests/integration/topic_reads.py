"""Reading a topic from its start to its end with a real client, for the tests (and
benches) of what a log holds: ``offset -> (key, value)`` of every record read."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError
from confluent_kafka import TopicPartition as Assigned
from kafka import KafkaConsumer, TopicPartition

Records = dict[int, tuple[bytes | None, bytes | None]]


def read_with_librdkafka(bootstrap: str, topic: str, timeout_s: float = 30) -> dict[int, Records]:
    """Every partition of ``topic`` until librdkafka reports its end: partition ->
    records."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
        "enable.partition.eof": True, "enable.auto.commit": False,
    })  # fmt: skip
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([Assigned(topic, p, OFFSET_BEGINNING) for p in partitions])
        read: dict[int, Records] = {p: {} for p in partitions}
        ended: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while len(ended) < len(read) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error, partition, offset = message.error(), message.partition(), message.offset()
            assert partition is not None
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                ended.add(partition)
                continue
            assert error is None and offset is not None, error
            read[partition][offset] = (message.key(), message.value())
    finally:
        consumer.close()
    assert len(ended) == len(read), f"{topic}: no end of every partition in {timeout_s} s"
    return read


def read_with_kafka_python(
    bootstrap: str, topic: str, partition: int = 0, timeout_s: float = 30
) -> Records:
    """One partition of ``topic`` up to its end offset, as kafka-python reads it."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    assigned = TopicPartition(topic, partition)
    consumer.assign([assigned])
    end = consumer.end_offsets([assigned])[assigned]
    consumer.seek_to_beginning(assigned)
    read: Records = {}
    deadline = time.monotonic() + timeout_s
    while consumer.position(assigned) < end and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=1000).values():
            read.update({r.offset: (r.key, r.value) for r in records})
    reached = consumer.position(assigned)
    consumer.close()
    assert reached >= end, f"{topic}-{partition}: read to {reached} of {end} in {timeout_s} s"
    return read
