"""Quorum-loss recovery on real processes: the seed's procedure end to end.

Three controllers and two brokers (separate roles) under a light acks=all load. Two
controllers are killed with SIGKILL and their disks deleted: the quorum stalls and the
alarm says so. Then, as an operator would: survey, plan, apply on the surviving
controller (copying a broker's log if the plan says so), restart it alone, and add two
controllers on fresh disks. The cluster serves clients again (a new topic can be
created), every acknowledged record is there, and the audit record says what was done.
"""

from __future__ import annotations

import json
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.cluster import CLUSTER_ID, Cluster, ClusterNode, odradek
from tests.integration.workload import Writer

SETTINGS = (
    "broker.session.timeout.ms=3000\n"
    "broker.heartbeat.interval.ms=300\n"
    "controller.quorum.election.timeout.ms=500\n"
    "controller.quorum.fetch.timeout.ms=1000\n"
    "metadata.quorum.stall.alarm.ms=2000\n"
)
WAIT_S = 40.0


def wait_for(what: str, predicate: Callable[[], Any], timeout: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def topics_on(broker: ClusterNode) -> set[str]:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    return set(admin.list_topics(timeout=5).topics)


def leader_of(node: ClusterNode) -> int | None:
    info = describe(node)
    return info["leader_id"] if info is not None and info["leader_id"] > 0 else None


def describe(node: ClusterNode) -> dict[str, Any] | None:
    result = odradek(
        "quorum", "describe", "--bootstrap-controller", f"127.0.0.1:{node.controller_port}",
        "--json", check=False,
    )  # fmt: skip
    if result.returncode != 0:
        return None
    info: dict[str, Any] = json.loads(result.stdout)
    return info


def read_all(bootstrap: str, topic: str, expected: int) -> list[int]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    seen: list[int] = []
    deadline = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < deadline and len(set(seen)) < expected:
            for msg in consumer.consume(500, 1.0):
                value = msg.value()
                if msg.error() is None and value is not None:
                    seen.append(int(value))
    finally:
        consumer.close()
    return seen


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, 2, extra=SETTINGS, controllers=3)
    c.start()
    yield c
    # Brokers first: with the controllers still up their controlled shutdown completes
    # at once instead of waiting out its timeout.
    for n in [*c.nodes, *c.controllers]:
        n.stop()


def test_lose_two_of_three_controllers_and_recover(cluster: Cluster) -> None:
    lose_two_controllers_and_recover(cluster)


def lose_two_controllers_and_recover(cluster: Cluster) -> None:
    """The whole procedure on a started cluster (also repeated by the slow scenarios)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("orders", 2, 2)])["orders"].result(30)
    # Not idempotent: a stalled quorum cannot hand out producer ids, and an idempotent
    # producer may need a new one after timeouts; acks=all is what is under test.
    writer = Writer(
        cluster.bootstrap,
        "orders",
        idempotent=False,
        linger_ms=5,
        message_timeout_ms=120_000,
        pause_s=0.005,
    )
    writer.start()
    wait_for("acknowledged writes", lambda: len(writer.acknowledged) > 100)

    # The controller that will survive falls behind first (paused while the others
    # commit a topic), so that a broker holds the longest log: the seed's case where the
    # log must be copied from a broker.
    leader_id = wait_for("a quorum leader", lambda: leader_of(cluster.controllers[0]))
    by_id = {c.node_id: c for c in cluster.controllers}
    survivor = next(c for c in cluster.controllers if c.node_id != leader_id)
    lost = [c for c in cluster.controllers if c is not survivor]
    assert survivor.process is not None
    survivor.process.send_signal(signal.SIGSTOP)
    # Two topics: a fetch the paused node had parked on the leader may still bring it
    # the first (the answer waits in its socket), never the second.
    for topic in ("during-pause", "during-pause-2"):
        admin.create_topics([NewTopic(topic, 1, 2)])[topic].result(30)
    wait_for(
        "the brokers to learn the topics",
        lambda: all("during-pause-2" in topics_on(b) for b in cluster.nodes),
    )
    # Then lose the two others for good, the active controller among them.
    for c in lost:
        c.kill()
        shutil.rmtree(c.dir / "data")
    survivor.process.send_signal(signal.SIGCONT)

    def stalled() -> bool:
        health = odradek("cluster", "health", "--bootstrap-server", cluster.nodes[0].bootstrap,
                         check=False)  # fmt: skip
        return health.returncode == 1 and "metadata quorum stalled" in health.stdout

    wait_for("the stall alarm on the brokers", stalled)
    info = describe(survivor)
    assert info is not None and info["alarm"] and "metadata quorum stalled" in info["alarm"]

    # The operator: stop the surviving controller, survey and plan over every survivor.
    survivor.stop()
    inputs = ["--config", str(survivor.config)]
    for broker in cluster.nodes:
        inputs += ["--config", str(broker.config)]
    surveyed = json.loads(odradek("recover-quorum", "survey", *inputs, "--json").stdout)
    assert {r["node_id"] for r in surveyed} == {survivor.node_id, 1, 2}
    plan = json.loads(odradek("recover-quorum", "plan", *inputs, "--json").stdout)
    assert plan["ok"], plan["refusals"]
    assert plan["target"]["node_id"] == survivor.node_id
    assert sorted(v["id"] for v in plan["lost_voters"]) == sorted(c.node_id for c in lost)
    assert "cannot be known" in plan["given_up"]
    apply = ["--node", str(survivor.node_id), "--config", str(survivor.config)]
    apply += ["--min-epoch", str(plan["recovery_epoch"])]
    # A broker holds the longest log: it is stopped while its log is copied.
    assert plan["copy_from"] is not None and plan["copy_from"]["node_id"] in (1, 2)
    source = next(b for b in cluster.nodes if str(b.config) == plan["copy_from"]["name"])
    source.stop()
    apply += ["--from", str(source.config)]
    audit = json.loads(odradek("recover-quorum", "apply", *apply, "--json").stdout)
    assert audit["log"]["copied"] and audit["log"]["end_offset"] == plan["chosen"]["end_offset"]
    assert sorted(v["id"] for v in audit["demoted"]) == sorted(c.node_id for c in lost)
    assert audit["recovery_epoch"] == plan["recovery_epoch"]

    # The recovered controller starts alone and elects itself; the brokers follow it.
    survivor.start()
    source.start(wait=False)

    def sole_voter() -> dict[str, Any] | None:
        got = describe(survivor)
        if got is None or got["leader_id"] != survivor.node_id or got["alarm"]:
            return None
        return got if [v["id"] for v in got["voters"]] == [survivor.node_id] else None

    info = wait_for("the survivor to lead as the sole voter", sole_voter)
    assert info["leader_epoch"] > plan["recovery_epoch"]

    # Two controllers on fresh disks replace the lost ones (same ids, new directory ids).
    for c in lost:
        c.dir.joinpath("data").mkdir(exist_ok=True)
        odradek("storage", "format", "--config", str(c.config), "--cluster-id", CLUSTER_ID,
                "--no-initial-controllers")  # fmt: skip
        c.start()

    def caught_up() -> bool:
        got = describe(survivor)
        lags = {o["id"]: o["lag"] for o in got["observers"]} if got is not None else {}
        return all(lags.get(c.node_id) is not None and lags[c.node_id] <= 3 for c in lost)

    wait_for("the new controllers to catch up as observers", caught_up)
    for c in lost:
        odradek("quorum", "add-controller", "--bootstrap-controller",
                f"127.0.0.1:{survivor.controller_port}", "--config", str(c.config))  # fmt: skip
    info = describe(survivor)
    assert info is not None
    assert sorted(v["id"] for v in info["voters"]) == sorted(by_id)
    assert not info["alarm"]

    # The cluster serves clients again: metadata changes commit, writes keep landing.
    admin.create_topics([NewTopic("after-recovery", 1, 2)])["after-recovery"].result(30)
    acknowledged = len(writer.acknowledged)
    wait_for("writes after the recovery", lambda: len(writer.acknowledged) > acknowledged + 50)
    writer.stopping.set()
    writer.join(90)
    assert odradek("cluster", "health", "--bootstrap-server", cluster.bootstrap.split(",")[0],
                   check=False).returncode == 0  # fmt: skip

    # Every topic and every acknowledged record is there.
    topics = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=10).topics
    assert {"orders", "during-pause", "during-pause-2", "after-recovery"} <= set(topics)
    seen = read_all(cluster.bootstrap, "orders", len(set(writer.acknowledged)))
    missing = set(writer.acknowledged) - set(seen)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"

    # The audit record says what was done: beside the log, and in the replicated log.
    shown = json.loads(
        odradek("recover-quorum", "audit", "--config", str(survivor.config), "--json").stdout
    )
    assert {r["where"].startswith("log offset") for r in shown} == {True, False}
    for record in shown:
        assert record["audit"]["node_id"] == survivor.node_id
        assert record["audit"]["demoted"] == audit["demoted"]
    replicated = json.loads(
        odradek("recover-quorum", "audit", "--config", str(lost[0].config), "--json").stdout
    )
    assert [r["audit"]["demoted"] for r in replicated] == [audit["demoted"]]
