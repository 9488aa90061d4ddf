"""Consumer groups with real clients: rebalances, committed offsets, restarts."""

from __future__ import annotations

import contextlib
import json
import queue
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

from tests.integration.cluster import Cluster
from tests.integration.nodes import NodeProcess

pytestmark = pytest.mark.clients

MEMBER = Path(__file__).with_name("group_member.py")


def produce(bootstrap: str, topic: str, values: list[str], partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=i % partitions)
    assert producer.flush(30) == 0


class Member:
    def __init__(
        self, bootstrap: str, group: str, topic: str, name: str, events: queue.Queue[dict[str, Any]]
    ) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(MEMBER), bootstrap, group, topic, name],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.thread = threading.Thread(target=self._pump, args=(events,), daemon=True)
        self.thread.start()

    def _pump(self, events: queue.Queue[dict[str, Any]]) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            events.put(json.loads(line))

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(30)


def wait_until(
    events: queue.Queue[dict[str, Any]], seen: list[dict[str, Any]], done: Any, timeout: float = 60
) -> None:
    deadline = time.monotonic() + timeout
    while not done(seen):
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"timed out; last events: {seen[-5:]}"
        with contextlib.suppress(queue.Empty):
            seen.append(events.get(timeout=remaining))


def assignments(seen: list[dict[str, Any]]) -> dict[str, list[int]]:
    """Each member's latest assignment (empty after a revoke without a new assign)."""
    current: dict[str, list[int]] = {}
    for event in seen:
        if "assigned" in event:
            current[event["member"]] = event["assigned"]
        elif "revoked" in event or "closed" in event:
            current[event["member"]] = []
    return current


@pytest.fixture
def node(tmp_path: Path) -> Iterator[NodeProcess]:
    process = NodeProcess(tmp_path)
    process.start()
    yield process
    process.kill()


def test_three_members_rebalance_on_join_leave_and_death(node: NodeProcess) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    for future in admin.create_topics([NewTopic("work", num_partitions=6)]).values():
        future.result(15)
    events: queue.Queue[dict[str, Any]] = queue.Queue()
    seen: list[dict[str, Any]] = []
    members = {name: Member(node.bootstrap, "workers", "work", name, events) for name in "abc"}

    def balanced(n: int) -> Any:
        def check(seen: list[dict[str, Any]]) -> bool:
            current = assignments(seen)
            live = [p for p in current.values() if p]
            return len(live) == n and sorted(x for p in live for x in p) == list(range(6))

        return check

    try:
        wait_until(events, seen, balanced(3))
        values = [f"v{i}" for i in range(300)]
        produce(node.bootstrap, "work", values, 6)

        def consumed(seen: list[dict[str, Any]]) -> set[str]:
            return {e["record"][2] for e in seen if "record" in e}

        wait_until(events, seen, lambda s: consumed(s) >= set(values))
        # In a stable generation every partition has one owner: no record twice.
        records = [e["record"] for e in seen if "record" in e]
        assert len(records) == len({(p, o) for p, o, _ in records}) == 300

        members["c"].kill()  # dies: its session expires and the others take over
        seen.append({"member": "c", "closed": True})  # it cannot say so itself
        wait_until(events, seen, balanced(2), timeout=60)
        members["b"].stop()  # leaves cleanly: an immediate rebalance
        wait_until(events, seen, balanced(1), timeout=60)
        more = [f"w{i}" for i in range(60)]
        produce(node.bootstrap, "work", more, 6)
        wait_until(events, seen, lambda s: consumed(s) >= set(values) | set(more))
        late = [e for e in seen if "record" in e and e["record"][2] in set(more)]
        assert {e["member"] for e in late} == {"a"}
    finally:
        for member in members.values():
            member.kill()


def test_committed_offsets_survive_a_restart(node: NodeProcess) -> None:
    produce(node.bootstrap, "resume", [f"r{i}" for i in range(100)], 1)
    config = {
        "bootstrap.servers": node.bootstrap,
        "group.id": "resumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    first = Consumer(config)
    first.subscribe(["resume"])
    taken: list[str] = []
    deadline = time.monotonic() + 60
    while len(taken) < 60 and time.monotonic() < deadline:
        message = first.poll(0.5)
        if message is not None and message.error() is None:
            taken.append((message.value() or b"").decode())
            if len(taken) == 60:
                first.commit(message=message, asynchronous=False)
    first.close()
    assert taken == [f"r{i}" for i in range(60)]
    assert node.stop() == 0
    node.start()
    second = Consumer(config)
    second.subscribe(["resume"])
    rest: list[str] = []
    deadline = time.monotonic() + 60
    while len(rest) < 40 and time.monotonic() < deadline:
        message = second.poll(0.5)
        if message is not None and message.error() is None:
            rest.append((message.value() or b"").decode())
    second.close()
    assert rest == [f"r{i}" for i in range(60, 100)]


def test_offsets_commit_from_outside_any_generation_on_three_nodes(tmp_path: Path) -> None:
    """A commit for an existing partition from a consumer that never joined the group
    (librdkafka's ``commit(offsets=...)``, reset tools, a group committing while it
    rebalances) succeeds whichever broker coordinates the group, as in Kafka: the
    coordinator need not host the partition. Before, every coordinator that did not host
    it answered UNKNOWN_TOPIC_OR_PARTITION."""
    cluster = Cluster(tmp_path)
    cluster.start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        # One replica: only one broker hosts the partition.
        admin.create_topics([NewTopic("committed", 1, replication_factor=1)])["committed"].result(
            30
        )
        # Groups hash to offsets partitions led by different brokers.
        for i in range(8):
            consumer = Consumer(
                {"bootstrap.servers": cluster.bootstrap, "group.id": f"outsider-{i}"}
            )
            try:
                committed = consumer.commit(
                    offsets=[TopicPartition("committed", 0, 42)], asynchronous=False
                )
                assert committed is not None and committed[0].error is None, committed
                (fetched,) = consumer.committed([TopicPartition("committed", 0)], timeout=30)
                assert fetched.offset == 42
            finally:
                consumer.close()
    finally:
        cluster.stop()
