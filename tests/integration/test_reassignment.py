"""Growing and shrinking a cluster under load, on real processes.

Three combined nodes hold a topic of 30 partitions with replication factor 2 (and so
``min.insync.replicas`` 2: every acknowledged record is on both replicas). An acks=all
producer (idempotent) and a consumer run throughout.

1. Two broker-only processes join; ``odradek cluster add-brokers --brokers 4,5
   --throttle ...`` plans and runs the reassignment. Afterwards every broker holds
   within one of the mean of replicas and of preferred leaders (over all topics, the
   group offsets topic included), no more replicas moved than the plan's minimum, and
   producer and consumer both made progress while the moves ran.
2. ``odradek cluster remove-brokers --brokers 4`` empties broker 4 (still under load);
   once it holds nothing it is stopped, and the command unregisters it.

Before step 1, the same add-brokers with a crawling throttle is interrupted (Ctrl-C):
it cancels what it started. Finally every acknowledged value is read back.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.cluster import CLUSTER_ID, Cluster, ClusterNode, odradek

TOPIC = "moves"
PLAN_LINE = re.compile(r"(\d+) replica\(s\) move \(the fewest that balance the cluster: (\d+)\)")
PARTITIONS = 30
SETTINGS = (
    "broker.session.timeout.ms=2000\n"
    "broker.heartbeat.interval.ms=200\n"
    "controller.quorum.election.timeout.ms=500\n"
    "controller.quorum.fetch.timeout.ms=1000\n"
    "offsets.topic.num.partitions=1\n"
    "offsets.topic.replication.factor=2\n"
)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, 3, extra=SETTINGS)
    c.start()
    yield c
    c.kill()  # not a test of stopping: a clean stop is tested on its own


class Writer(threading.Thread):
    """acks=all, idempotent; each value unique, keyed over all partitions."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
            }
        )
        self.acknowledged: list[int] = []
        self.failed = 0
        self.stopping = threading.Event()
        self.value = 0
        self.error: Exception | None = None

    def delivered(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acknowledged.append(int(msg.key()))
        else:
            self.failed += 1

    def send(self, value: int) -> None:
        self.producer.produce(
            TOPIC, key=str(value).encode(), value=b"x" * 300, callback=self.delivered
        )

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                self.send(self.value)
                self.value += 1
                self.producer.poll(0.005)
            self.producer.flush(120)
        except Exception as e:  # a fatal producer error: recorded, asserted on by the test
            self.error = e


class Reader(threading.Thread):
    """Reads every partition from the start, counting what it sees."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "reader",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        self.consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        self.seen = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            msg = self.consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                self.seen += 1
        self.consumer.close()


def assignment(bootstrap: str) -> dict[tuple[str, int], list[int]]:
    """Every partition of every topic (the plan balances them all together)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics: Any = admin.list_topics(timeout=10).topics
    return {
        (name, index): list(p.replicas)
        for name, meta in topics.items()
        for index, p in meta.partitions.items()
    }


def spread(values: Any) -> int:
    return int(max(values) - min(values))


def counts_of(
    layout: dict[tuple[str, int], list[int]], ids: tuple[int, ...]
) -> tuple[dict[int, int], dict[int, int]]:
    replicas = dict.fromkeys(ids, 0)
    preferred = dict.fromkeys(ids, 0)
    for r in layout.values():
        for b in r:
            replicas[b] += 1
        preferred[r[0]] += 1
    return replicas, preferred


def brokers(bootstrap: str) -> set[int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return set(admin.list_topics(timeout=10).brokers)


def read_back(bootstrap: str) -> tuple[set[int], dict[int, tuple[int, int]]]:
    """Every key in the topic, and the partitions not read up to their high watermark
    (position, high watermark)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "checker",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    ends = {}
    for p in range(PARTITIONS):
        _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)
        ends[p] = high
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    values: set[int] = set()
    positions = dict.fromkeys(ends, 0)
    deadline = time.monotonic() + 60
    while any(positions[p] < ends[p] for p in ends) and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            values.add(int(msg.key() or b"-1"))
            positions[int(msg.partition() or 0)] = int(msg.offset() or 0) + 1
    consumer.close()
    short = {p: (positions[p], ends[p]) for p in ends if positions[p] < ends[p]}
    return values, short


def join_broker(cluster: Cluster, root: Path, node_id: int) -> ClusterNode:
    node = ClusterNode(root, node_id, SETTINGS, "broker")
    node.write_config(",".join(f"127.0.0.1:{n.controller_port}" for n in cluster.controllers))
    odradek("storage", "format", "--config", str(node.config), "--cluster-id", CLUSTER_ID)
    node.start(wait=False)
    return node


def until(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def run_cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "odradek", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_add_two_brokers_then_remove_one_under_load(cluster: Cluster, tmp_path: Path) -> None:
    joined: list[ClusterNode] = []
    try:
        _scenario(cluster, tmp_path, joined)
    finally:
        for node in joined:
            node.stop()


def _scenario(cluster: Cluster, tmp_path: Path, new: list[ClusterNode]) -> None:
    started = time.monotonic()

    def phase(name: str) -> None:
        # Shown with the captured output of a failure: where the time went.
        print(f"phase {name}: {time.monotonic() - started:.1f} s")

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=2)])[
        TOPIC
    ].result(30)
    writer = Writer(cluster.bootstrap)
    # Some data to copy before the move starts (about 3 MB over the 30 partitions).
    for _ in range(10_000):
        writer.send(writer.value)
        writer.value += 1
        writer.producer.poll(0)
    assert writer.producer.flush(60) == 0
    phase("loaded")
    writer.start()
    reader = Reader(cluster.bootstrap)
    reader.start()
    new += [join_broker(cluster, tmp_path, 4), join_broker(cluster, tmp_path, 5)]
    for node in new:
        node.wait_started()
    until(lambda: {4, 5} <= brokers(cluster.bootstrap), 30, "brokers 4 and 5 to register")

    phase("brokers 4 and 5 registered")
    plan = odradek(
        "cluster", "add-brokers", "--bootstrap-server", cluster.nodes[0].bootstrap,
        "--brokers", "4,5", "--dry-run",
    ).stdout  # fmt: skip
    assert PLAN_LINE.search(plan) is not None, plan
    before = assignment(cluster.bootstrap)

    phase("dry run done")
    # Ctrl-C while a throttled move runs cancels it: every partition is back on its
    # original brokers and no reassignment is left in progress.
    slow = run_cli(
        "cluster", "add-brokers", "--bootstrap-server", cluster.nodes[0].bootstrap,
        "--brokers", "4,5", "--throttle", "1000",
    )  # fmt: skip
    assert slow.stdout is not None
    seen = []
    for line in slow.stdout:
        seen.append(line)
        if re.search(r"partitions \d+/\d+ done", line):
            break
    slow.send_signal(signal.SIGINT)
    rest, _ = slow.communicate(timeout=60)
    output = "".join(seen) + rest
    assert slow.returncode == 130, output
    cancelled = re.search(r"cancelled (\d+) partition reassignment", output)
    assert cancelled is not None and int(cancelled.group(1)) > 0, output
    # A move that finished before Ctrl-C (a tiny partition fits in the throttle) stays
    # done; every other partition is back on its original brokers.
    targets = {
        (m.group(1), int(m.group(2))): set(json.loads(m.group(3)))
        for m in re.finditer(r"  (\S+)-(\d+): \[[\d, ]*\] -> (\[[\d, ]*\]) \(move\)", output)
    }
    reverted = assignment(cluster.bootstrap)
    back = [k for k, v in reverted.items() if set(v) == set(before[k])]
    assert all(set(v) in (set(before[k]), targets.get(k)) for k, v in reverted.items())
    assert len(reverted) - len(back) <= len(targets) - int(cancelled.group(1))
    assert (
        "cancelled 0 partition reassignment(s)"
        in odradek(
            "cluster", "cancel-reassignments", "--bootstrap-server", cluster.nodes[0].bootstrap
        ).stdout
    )
    before = reverted
    phase("cancel done")
    acked_before, seen_before = len(writer.acknowledged), reader.seen
    moved = run_cli(
        "cluster", "add-brokers", "--bootstrap-server", cluster.nodes[0].bootstrap,
        "--brokers", "4,5", "--throttle", "4000000", "--timeout", "90",
    )  # fmt: skip
    output, _ = moved.communicate(timeout=120)
    assert moved.returncode == 0, output
    found = PLAN_LINE.search(output)
    assert found is not None, output
    minimum = int(found.group(2))
    # The 'moves' topic alone needs 24: 60 replicas make 12 per broker, 8 off each old one.
    assert int(found.group(1)) == minimum >= 24
    assert re.search(r"partitions (\d+)/\1 done", output), output
    assert len(writer.acknowledged) > acked_before, "produce went on during the moves"
    assert reader.seen > seen_before, "consume went on during the moves"

    phase("add-brokers done")

    def balanced() -> bool:
        replicas, preferred = counts_of(assignment(cluster.bootstrap), (1, 2, 3, 4, 5))
        return spread(replicas.values()) <= 1 and spread(preferred.values()) <= 1

    # Metadata reaches every broker a moment after the controller commits it.
    until(balanced, 10, "every broker within one of the mean")
    after = assignment(cluster.bootstrap)
    assert after.keys() == before.keys()
    for key, replicas in after.items():
        assert len(replicas) == len(before[key]) and len(set(replicas)) == len(replicas)
    changed = sum(len(set(after[k]) - set(before[k])) for k in before)
    assert changed <= minimum, f"{changed} replicas moved, the plan's minimum is {minimum}"

    phase("balance checked")
    # Remove broker 4 under the same load; stop it once it holds nothing.
    removing = run_cli(
        "cluster", "remove-brokers", "--bootstrap-server", cluster.nodes[0].bootstrap,
        "--brokers", "4", "--timeout", "90", "--stop-timeout", "60",
    )  # fmt: skip

    def emptied() -> bool:
        if removing.poll() is not None:
            raise AssertionError(f"remove-brokers ended early: {removing.communicate()[0]}")
        return all(4 not in r for r in assignment(cluster.bootstrap).values())

    try:
        until(emptied, 90, "broker 4 to hold no replica")
    except AssertionError:
        removing.kill()
        raise AssertionError(f"remove-brokers: {removing.communicate()[0]}") from None
    phase("broker 4 emptied")
    new[0].stop()
    output, _ = removing.communicate(timeout=120)
    assert removing.returncode == 0, output
    assert "broker 4 unregistered" in output, output
    final = assignment(cluster.bootstrap)
    assert all(4 not in r and len(r) == len(after[k]) for k, r in final.items())
    remaining, _ = counts_of(final, (1, 2, 3, 5))
    assert spread(remaining.values()) <= 1, remaining
    assert 4 not in brokers(cluster.bootstrap)

    phase("broker 4 unregistered")
    writer.stopping.set()
    writer.join(150)
    reader.stopping.set()
    reader.join(30)
    assert writer.error is None, f"the producer failed: {writer.error}"
    acknowledged = set(writer.acknowledged)
    assert len(acknowledged) > 10_000
    phase("writer and reader stopped")
    read, short = read_back(cluster.bootstrap)
    assert not short, f"partitions not readable up to their high watermark: {short}"
    lost = sorted(acknowledged - read)
    assert not lost, f"{len(lost)} acknowledged values lost, e.g. {lost[:10]}"
    phase("read back")
