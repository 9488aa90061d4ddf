"""Start-up of a real node: what it reads before serving, the scrub, open files.

What an operator relies on (ADR 0016): a clean restart serves without reading the log,
and after a SIGKILL only what lies past the recovery point is read (the recovery-point
checkpoint is written every ``log.flush.offset.checkpoint.interval.ms``); a torn tail is
still cut into quarantine; corruption below the recovery point is found by the scrub
afterwards and takes only its partition offline, with a log line naming the file and
position; and a node with many segments keeps few files open and raises its soft
open-files limit, so that it never fails with EMFILE where the hard limit would do.

Bytes read are the process's ``rchar`` (``/proc/PID/io``) when it starts serving
clients, against a fresh node's in the same test: a count, not a time.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.cluster import Cluster, ClusterNode

pytestmark = pytest.mark.clients

MIB = 1024 * 1024
VALUE = b"v" * (10 * 1024)


def bytes_read(node: ClusterNode) -> int:
    assert node.process is not None
    io = Path(f"/proc/{node.process.pid}/io").read_text()
    match = re.search(r"^rchar: (\d+)$", io, re.MULTILINE)
    assert match is not None
    return int(match.group(1))


def node_log(node: ClusterNode) -> str:
    return (node.dir / "node.log").read_text()


@contextlib.contextmanager
def single_node(root: Path, extra: str) -> Iterator[ClusterNode]:
    cluster = Cluster(root, size=1, extra=extra)
    node = cluster.nodes[0]
    node.start()
    try:
        yield node
    finally:
        node.kill()


def create_topic(bootstrap: str, name: str, partitions: int = 1, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=configs)
    for future in admin.create_topics([topic]).values():
        future.result(15)


def produce(
    bootstrap: str, topic: str, total_bytes: int, partitions: int = 1, batch_size: int = 1_000_000
) -> int:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": batch_size,
            "enable.idempotence": True,
        }
    )
    count = total_bytes // len(VALUE)
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=VALUE, key=b"%d" % i, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0
    return count


def end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "offsets"})
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        ]
    finally:
        consumer.close()


def read_back(bootstrap: str, topic: str, partition: int, start: int, count: int) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, partition, start)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < count and time.monotonic() < deadline:
        for message in consumer.consume(1000, 0.5):
            if message.error() is None and message.key() is not None:
                got.append(message.key())  # type: ignore[arg-type, unused-ignore]
    consumer.close()
    return got[:count]


def wait_for_line(node: ClusterNode, pattern: str, timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        match = re.search(pattern, node_log(node))
        if match is not None:
            return match.group(0)
        time.sleep(0.2)
    raise AssertionError(f"no line matching {pattern!r} in:\n{node_log(node)[-3000:]}")


# Small segments so that the log has many; a slow scrub so that what it reads before the
# node serves is small; the recovery point checkpointed every second.
EXTRA = (
    "log.segment.bytes=8388608\n"
    "odradek.log.scrub.bytes.per.second=1048576\n"
    "log.flush.offset.checkpoint.interval.ms=1000\n"
)
LOG_BYTES = 160 * MIB


def test_a_clean_restart_serves_without_reading_the_log(tmp_path: Path) -> None:
    with single_node(tmp_path, EXTRA) as node:
        fresh = bytes_read(node)
        create_topic(node.bootstrap, "big")
        count = produce(node.bootstrap, "big", LOG_BYTES)
        node.stop()
        node.start()
        read_at_start = bytes_read(node) - fresh
        # The old start-up validated every batch: it read the whole log first.
        assert read_at_start < LOG_BYTES // 4, f"read {read_at_start} bytes before serving"
        assert end_offsets(node.bootstrap, "big", 1) == [count]
        assert read_back(node.bootstrap, "big", 0, count - 3, 3) == [
            b"%d" % i for i in range(count - 3, count)
        ]
        assert read_back(node.bootstrap, "big", 0, 0, 3) == [b"0", b"1", b"2"]


def test_after_sigkill_only_what_lies_past_the_recovery_point_is_read(tmp_path: Path) -> None:
    with single_node(tmp_path, EXTRA) as node:
        fresh = bytes_read(node)
        create_topic(node.bootstrap, "big")
        count = produce(node.bootstrap, "big", LOG_BYTES)
        time.sleep(3)  # the recovery-point checkpoint is written every second
        node.kill()
        # A torn tail past the recovery point, as a crash in the middle of a write
        # leaves it: cut into quarantine at start, as before.
        segments = sorted((node.dir / "data" / "big-0").glob("*.log"))
        with open(segments[-1], "ab") as f:
            f.write(b"\x00" * 8 + b"\x00\x00\x10\x00" + b"torn")
        node.start()
        read_at_start = bytes_read(node) - fresh
        assert read_at_start < LOG_BYTES // 4, f"read {read_at_start} bytes before serving"
        line = wait_for_line(node, r"recovery of \S+\.log: TRUNCATED at position \d+.*quarantine")
        assert segments[-1].name in line
        assert (node.dir / "data" / "big-0" / "quarantine").is_dir()
        assert end_offsets(node.bootstrap, "big", 1) == [count]
        assert read_back(node.bootstrap, "big", 0, count - 2, 2) == [
            b"%d" % (count - 2),
            b"%d" % (count - 1),
        ]


def test_the_scrub_takes_only_the_corrupt_partition_offline(tmp_path: Path) -> None:
    extra = "log.flush.offset.checkpoint.interval.ms=1000\n"
    with single_node(tmp_path, extra) as node:
        # segment.index.bytes=64 rolls a segment every eight index entries (~32 KiB).
        create_topic(node.bootstrap, "t", partitions=2, **{"segment.index.bytes": "64"})
        produce(node.bootstrap, "t", 2 * MIB, partitions=2)
        node.stop()
        first = node.dir / "data" / "t-0" / ("0" * 20 + ".log")
        data = bytearray(first.read_bytes())
        data[100] ^= 0x10  # inside the first batch's records: its CRC no longer matches
        first.write_bytes(bytes(data))
        node.start()
        line = wait_for_line(node, r"partition \S+t-0 is offline: scrub: corrupt batch in \S+")
        assert str(first) in line
        assert re.search(r"BAD_CRC at position 0", node_log(node))
        # The other partition is served as before.
        producer = Producer({"bootstrap.servers": node.bootstrap, "message.timeout.ms": 10_000})
        delivered: list[object] = []
        producer.produce(
            "t", value=b"after", partition=1, on_delivery=lambda e, m: delivered.append(e)
        )
        producer.flush(15)
        assert delivered == [None]
        assert "t-1 is offline" not in node_log(node)


def test_many_segments_keep_few_files_open_and_the_soft_limit_is_raised(tmp_path: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 4096:
        pytest.skip(f"the hard open-files limit ({hard}) leaves no room to test")
    partitions = 30
    with single_node(tmp_path, "") as node:
        # Batches of 16 KiB, each indexed, and a segment rolled every four index entries.
        create_topic(node.bootstrap, "many", partitions=partitions, **{"segment.index.bytes": "32"})
        count = produce(node.bootstrap, "many", 32 * MIB, partitions=partitions, batch_size=16384)
        node.stop()
        segments = len(list((node.dir / "data").glob("many-*/*.log")))
        # Started the way most services are, with a soft limit of 1,024: the old node
        # kept three descriptors per segment and hit EMFILE opening these.
        assert segments * 3 > 1024
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
        try:
            node.start()
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        assert node.process is not None
        limits = Path(f"/proc/{node.process.pid}/limits").read_text()
        max_open = re.search(r"^Max open files\s+(\S+)\s+(\S+)", limits, re.MULTILINE)
        assert max_open is not None and max_open.group(1) == max_open.group(2)
        assert "raised from 1024" in node_log(node)
        assert re.search(r"room for about \d+ partitions; 30 in the log dir", node_log(node))
        assert sum(end_offsets(node.bootstrap, "many", partitions)) == count
        for p in range(partitions):
            with contextlib.suppress(KafkaException):
                assert len(read_back(node.bootstrap, "many", p, 0, 50)) == 50
        open_files = len(os.listdir(f"/proc/{node.process.pid}/fd"))
        # Three per partition (the active segment) plus the cache of older segments and
        # the rest of the process; far below three per segment.
        assert open_files < 3 * partitions + 128 + 200 < segments * 3
        assert "too many open files" not in node_log(node)
        assert " is offline" not in node_log(node)  # no log went offline on this node
