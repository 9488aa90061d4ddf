"""Compacted topics on a real node, with real clients: the cleaner keeps each key's last
value at its offset, consumers read across what it removed, and tombstones go once their
``delete.retention.ms`` has passed."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as Assigned
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from tests.integration.cluster import Cluster
from tests.integration.test_java_client import JARS
from tests.integration.topic_reads import Records, read_with_kafka_python, read_with_librdkafka

pytestmark = pytest.mark.clients

SET = AlterConfigOpType.SET

TOPIC = "table"
KEYS = [b"key-%02d" % i for i in range(20)]
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "internal.segment.bytes": "4096",  # Kafka's own test override (segment.bytes >= 1 MiB)
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "2000",
}
Seen = Records


def produce(bootstrap: str, pairs: Sequence[tuple[bytes, bytes | None]]) -> Seen:
    """Every pair produced with Kafka's defaults and acks=all; offset -> (key, value)."""
    delivered: Seen = {}

    def on_delivery(error: KafkaError | None, message: object) -> None:
        assert error is None, error
        delivered[message.offset()] = (message.key(), message.value())  # type: ignore[attr-defined]

    # Small batches, so that the log rolls many segments of internal.segment.bytes.
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "batch.size": 1024})
    for key, value in pairs:
        producer.produce(TOPIC, key=key, value=value, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert len(delivered) == len(pairs)
    return delivered


def consume_all(bootstrap: str) -> Seen:
    """Every record from the start to the end, as librdkafka reads them."""
    return read_with_librdkafka(bootstrap, TOPIC)[0]


def consume_with_java(bootstrap: str) -> Seen | None:
    """Every record as Apache Kafka's own KafkaConsumer reads them (``java/ReadAll.java``),
    or None where Java or the client's jars are missing."""
    if shutil.which("java") is None or not list(JARS.glob("kafka-clients-*.jar")):
        return None
    run = subprocess.run(
        ["java", "-cp", f"{JARS}/*", str(Path(__file__).parent / "java" / "ReadAll.java"),
         bootstrap, TOPIC],
        capture_output=True, text=True, timeout=150, check=False,
    )  # fmt: skip
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no output (exit {run.returncode}):\n{run.stdout}\n{run.stderr[-3000:]}"
    result = json.loads(lines[-1])
    assert result["position"] == result["end"], result
    return {
        offset: (key.encode(), None if value is None else value.encode())
        for offset, key, value in result["records"]
    }


def last_of_each_key(written: Seen) -> Seen:
    last: dict[bytes | None, int] = {}
    for offset in sorted(written):
        last[written[offset][0]] = offset
    return {offset: written[offset] for offset in last.values()}


def wait_cleaned(bootstrap: str, written: Seen, gone: int) -> Seen:
    """Read until at least ``gone`` of the written records are gone (or 30 s)."""
    deadline = time.monotonic() + 30
    seen = consume_all(bootstrap)
    while len(written) - len(seen) < gone and time.monotonic() < deadline:
        time.sleep(0.5)
        seen = consume_all(bootstrap)
    return seen


def test_the_cleaner_keeps_each_keys_last_value_and_consumers_read_across_the_gaps(
    tmp_path: Path,
) -> None:
    cluster = Cluster(tmp_path, 1, extra="log.cleaner.backoff.ms=200\n")
    cluster.start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1, config=TOPIC_CONFIGS)])[TOPIC].result(30)
        described = admin.describe_configs([ConfigResource("topic", TOPIC)])
        configs = next(iter(described.values())).result(30)
        assert configs["cleanup.policy"].value == "compact"
        rounds = [(key, b"round-%d-%s" % (r, key) * 4) for r in range(30) for key in KEYS]
        written = produce(cluster.bootstrap, rounds)
        seen = wait_cleaned(cluster.bootstrap, written, gone=len(written) // 2)
        # Kafka's guarantees: every record read is one written, at its own offset; every
        # key's last value is there; at least half the superseded ones are gone.
        assert all(written[offset] == record for offset, record in seen.items())
        last = last_of_each_key(written)
        assert last.items() <= seen.items()
        assert len(seen) <= len(written) // 2, (len(seen), len(written))
        # Other clients read across what cleaning removed. The cleaner may run another
        # pass between two reads, and a pass only removes: each later read is within the
        # one before it and still holds every key's last value.
        python = read_with_kafka_python(cluster.bootstrap, TOPIC)
        assert last.items() <= python.items() <= seen.items()
        java = consume_with_java(cluster.bootstrap)
        assert java is None or last.items() <= java.items() <= python.items()

        # A tombstone is kept for delete.retention.ms after the first pass saw it, then
        # goes with a later pass (which more writes make due).
        tombstone = produce(cluster.bootstrap, [(KEYS[0], None)])
        written |= tombstone
        filler = produce(cluster.bootstrap, [(KEYS[1], b"x" * 400) for _ in range(40)])
        written |= filler
        tombstone_offset = next(iter(tombstone))
        seen = wait_cleaned(cluster.bootstrap, written, gone=len(written) - 60)
        assert tombstone_offset in seen and seen[tombstone_offset] == (KEYS[0], None)
        assert not any(k == KEYS[0] and v is not None for k, v in seen.values())
        time.sleep(2.5)
        more = produce(cluster.bootstrap, [(KEYS[2], b"y" * 400) for _ in range(40)])
        written |= more
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            seen = consume_all(cluster.bootstrap)
            if tombstone_offset not in seen:
                break
            time.sleep(0.5)
        assert tombstone_offset not in seen, "the tombstone outlived delete.retention.ms"
        assert not any(k == KEYS[0] for k, _v in seen.values())
        assert last_of_each_key(more).items() <= seen.items()
    finally:
        cluster.kill()


def test_the_offsets_topic_is_compacted_and_a_restarted_coordinator_loads_what_is_left(
    tmp_path: Path,
) -> None:
    cluster = Cluster(
        tmp_path,
        1,
        extra=(
            "log.cleaner.backoff.ms=200\n"
            "offsets.topic.num.partitions=1\n"
            "offsets.topic.segment.bytes=16384\n"
        ),
    )
    cluster.start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("events", 1, 1)])["events"].result(30)
        consumer = Consumer({
            "bootstrap.servers": cluster.bootstrap, "group.id": "committer",
            "enable.auto.commit": False,
        })  # fmt: skip
        commits = 1500
        for offset in range(1, commits + 1):
            consumer.commit(offsets=[Assigned("events", 0, offset)], asynchronous=False)
        consumer.close()
        deadline = time.monotonic() + 30
        left = len(read_with_kafka_python(cluster.bootstrap, "__consumer_offsets"))
        while left > commits // 10 and time.monotonic() < deadline:
            time.sleep(0.5)
            left = len(read_with_kafka_python(cluster.bootstrap, "__consumer_offsets"))
        assert left <= commits // 10, f"{left} of {commits} commits left after cleaning"
        # A coordinator loading the cleaned partition finds the last commit.
        node = cluster.nodes[0]
        node.kill()
        node.start()
        reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "committer"})
        [committed] = reader.committed([Assigned("events", 0)], timeout=30)
        reader.close()
        assert committed.offset == commits
    finally:
        cluster.kill()


def test_with_the_cleaner_off_a_node_serves_and_keeps_every_record(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, 1, extra="log.cleaner.enable=false\nlog.cleaner.backoff.ms=200\n")
    cluster.start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1, config=TOPIC_CONFIGS)])[TOPIC].result(30)
        written = produce(cluster.bootstrap, [(KEYS[i % 3], b"%d" % i) for i in range(300)])
        time.sleep(1.5)  # several backoffs of a cleaner that must not run
        assert consume_all(cluster.bootstrap) == written
        assert cluster.nodes[0].process is not None and cluster.nodes[0].process.poll() is None
    finally:
        cluster.kill()


def cleaner_processes(pid: int) -> set[int]:
    """The node's cleaner worker processes (its spawned multiprocessing children; the
    multiprocessing resource tracker is not one)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            except FileNotFoundError:
                continue
            if b"spawn_main" in cmdline:
                found.add(int(child))
    return found


def alter_broker(bootstrap: str, name: str, value: str) -> None:
    """One dynamic config of broker 1 (librdkafka cannot name the cluster default)."""
    resource = ConfigResource(
        "broker", "1", incremental_configs=[ConfigEntry(name, value, incremental_operation=SET)]
    )
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.incremental_alter_configs([resource])[resource].result(30)


def test_the_cleaners_dynamic_keys_change_the_running_cleaner(tmp_path: Path) -> None:
    # After its first look (before the topic exists) the cleaner backs off for an hour.
    cluster = Cluster(tmp_path, 1, extra="log.cleaner.backoff.ms=3600000\n")
    cluster.start()
    try:
        node = cluster.nodes[0].process
        assert node is not None
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1, config=TOPIC_CONFIGS)])[TOPIC].result(30)
        rounds = [(key, b"round-%d-%s" % (r, key)) for r in range(20) for key in KEYS]
        written = produce(cluster.bootstrap, rounds)
        time.sleep(2)
        assert consume_all(cluster.bootstrap) == written  # due, but the cleaner sleeps
        # A shorter backoff wakes the sleeping worker, as an AlterConfigs does in Kafka.
        alter_broker(cluster.bootstrap, "log.cleaner.backoff.ms", "200")
        seen = wait_cleaned(cluster.bootstrap, written, gone=len(written) // 2)
        assert len(seen) <= len(written) // 2 and last_of_each_key(written).items() <= seen.items()
        # Each worker runs its passes in a process of its own: more threads, more
        # processes; fewer, and the extra worker ends with its process.
        assert len(cleaner_processes(node.pid)) == 1
        for threads in (3, 1):
            alter_broker(cluster.bootstrap, "log.cleaner.threads", str(threads))
            deadline = time.monotonic() + 30
            while len(cleaner_processes(node.pid)) != threads and time.monotonic() < deadline:
                time.sleep(0.2)
            assert len(cleaner_processes(node.pid)) == threads
        # Kafka's rule for a running cleaner: at least one thread.
        with pytest.raises(KafkaException) as refused:
            alter_broker(cluster.bootstrap, "log.cleaner.threads", "0")
        assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
        assert "at least 1" in refused.value.args[0].str()
        # The one worker left goes on cleaning what is written later.
        more = produce(cluster.bootstrap, [(k, b"later-" + k) for k in KEYS for _ in range(10)])
        deadline = time.monotonic() + 30
        while more.items() <= (seen := consume_all(cluster.bootstrap)).items():
            assert time.monotonic() < deadline, "not cleaned again within 30 s"
            time.sleep(0.5)
        assert last_of_each_key(written | more).items() <= seen.items()
        assert "log cleaner reconfigured" in (cluster.nodes[0].dir / "node.log").read_text()
    finally:
        cluster.kill()
