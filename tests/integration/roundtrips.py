"""One client's whole round trip against a secured cluster, shared by the security
tests: an admin request, produce with acks=all, a group member that reads everything
back and commits, and the commit read back. Each test supplies only how its client
logs in.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

__all__ = ["aiokafka_roundtrip", "kcat_roundtrip"]

PARTITIONS = (0, 1)
REPLICAS = [1, 2, 3]


def aiokafka_roundtrip(login: Callable[[], dict[str, Any]], prefix: str) -> None:
    """aiokafka's admin client creates and describes a topic of two partitions, its
    producer sends 20 records to each, a consumer in a group reads every one in order
    at the offsets acknowledged, finds nothing more, and commits; the consumer and the
    admin client read the commit back. ``login()``: the client keyword arguments
    (bootstrap and security), fresh for each client."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as AioTopicPartition
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewTopic as AioNewTopic

    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    group = f"g-{topic}"
    sent = {p: [f"aio{p}-{i}".encode() for i in range(20)] for p in PARTITIONS}
    total = sum(len(values) for values in sent.values())

    async def run() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        admin = AIOKafkaAdminClient(**login())
        await admin.start()
        try:
            created = await admin.create_topics([AioNewTopic(topic, 2, 3)], timeout_ms=30_000)
            seen["created"] = [(t, code) for t, code, *_ in created.topic_errors]
            seen["described"] = await admin.describe_topics([topic])
            producer = AIOKafkaProducer(acks="all", **login())
            await producer.start()
            try:
                pending = [
                    await producer.send(topic, value, partition=p)
                    for p, values in sent.items()
                    for value in values
                ]
                acked = await asyncio.gather(*pending)
            finally:
                await producer.stop()
            seen["acked"] = sorted((m.partition, m.offset) for m in acked)
            consumer = AIOKafkaConsumer(
                topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                **login(),
            )  # fmt: skip
            await consumer.start()
            got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in PARTITIONS}
            try:
                async with asyncio.timeout(60):
                    while sum(len(records) for records in got.values()) < total:
                        batches = await consumer.getmany(timeout_ms=1000)
                        for tp, messages in batches.items():
                            got[tp.partition] += [(m.offset, m.value or b"") for m in messages]
                seen["extra"] = await consumer.getmany(timeout_ms=500)
                await consumer.commit()
                seen["committed"] = {
                    p: await consumer.committed(AioTopicPartition(topic, p)) for p in PARTITIONS
                }
            finally:
                await consumer.stop()
            seen["got"] = got
            offsets = await admin.list_consumer_group_offsets(group)
            seen["group offsets"] = {tp.partition: o.offset for tp, o in offsets.items()}
        finally:
            await admin.close()
        return seen

    seen = asyncio.run(run())
    assert seen["created"] == [(topic, 0)]
    [described] = seen["described"]
    assert described["topic"] == topic and described["error_code"] == 0
    assert {p["partition"]: sorted(p["replicas"]) for p in described["partitions"]} == {
        p: REPLICAS for p in PARTITIONS
    }
    assert seen["acked"] == [(p, i) for p in PARTITIONS for i in range(20)]
    # Every record, in order per partition, at the offsets the producer was told.
    assert seen["got"] == {p: list(enumerate(values)) for p, values in sent.items()}
    assert seen["extra"] == {}
    # The group's commit landed: the consumer and the admin client read it back.
    assert seen["committed"] == {p: 20 for p in PARTITIONS}
    assert seen["group offsets"] == {p: 20 for p in PARTITIONS}


def kcat_roundtrip(login: list[str], confluent: dict[str, Any], prefix: str) -> None:
    """kcat (``login``: its ``-b`` and ``-X`` security arguments) produces 10 lines to
    each of two partitions with acks=all, lists the topic's metadata (the admin
    request), and consumes everything in a group, in order at offsets 0-9, committing
    as it leaves; confluent-kafka (``confluent``: its client settings) creates the topic
    and reads the commit back."""
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    group = f"g-{topic}"
    admin = AdminClient(confluent)
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=3)])[topic].result(30)
    sent = {p: [f"kc{p}-{i}" for i in range(10)] for p in PARTITIONS}
    for p, values in sent.items():
        subprocess.run(
            ["kcat", *login, "-X", "acks=all", "-P", "-t", topic, "-p", str(p)],
            input="".join(f"{v}\n" for v in values).encode(), check=True, timeout=60,
        )  # fmt: skip
    listed = subprocess.run(
        ["kcat", *login, "-L", "-t", topic, "-J"], capture_output=True, check=True, timeout=60
    )
    metadata = json.loads(listed.stdout)
    assert sorted(b["id"] for b in metadata["brokers"]) == REPLICAS
    [described] = metadata["topics"]
    assert described["topic"] == topic
    assert {
        p["partition"]: sorted(r["id"] for r in p["replicas"]) for p in described["partitions"]
    } == {p: REPLICAS for p in PARTITIONS}
    # A group member, which commits what it consumed as it leaves.
    out = subprocess.run(
        ["kcat", *login, "-C", "-G", group, "-X", "auto.offset.reset=earliest", "-e", "-q",
         "-f", "%p %o %s\n", topic],
        capture_output=True, check=True, timeout=60,
    )  # fmt: skip
    got: dict[int, list[tuple[int, str]]] = {p: [] for p in PARTITIONS}
    for line in out.stdout.decode().splitlines():
        partition, offset, value = line.split(" ", 2)
        got[int(partition)].append((int(offset), value))
    assert got == {p: list(enumerate(values)) for p, values in sent.items()}
    reader = Consumer({**confluent, "group.id": group})
    try:
        committed = reader.committed([TopicPartition(topic, p) for p in PARTITIONS], timeout=30)
    finally:
        reader.close()
    assert {tp.partition: tp.offset for tp in committed} == {p: 10 for p in PARTITIONS}
