"""Brokers as observers of the metadata log: register, get unfenced, get fenced.

One controller (``process.roles=controller``, formatted ``--standalone``) and two
broker-only nodes as real processes. A broker serves clients once the controller has
unfenced it; a broker killed with SIGKILL is fenced after ``broker.session.timeout.ms``
and disappears from what clients see; restarted, it registers again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from odradek.cli.ports import free_port
from tests.integration.cluster import CLUSTER_ID as CLUSTER
from tests.integration.cluster import ServerProcess, odradek
from tests.integration.nodes import NodeProcess


class Server(ServerProcess):
    def __init__(self, root: Path, name: str, properties: str) -> None:
        super().__init__(root / name)
        self.config.write_text(properties + f"log.dirs={self.dir / 'data'}\n")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Server, dict[int, tuple[Server, int]]]]:
    controller_port = free_port()
    common = (
        "controller.listener.names=CONTROLLER\n"
        f"controller.quorum.bootstrap.servers=127.0.0.1:{controller_port}\n"
        "broker.session.timeout.ms=2000\n"
        "broker.heartbeat.interval.ms=200\n"
    )
    controller = Server(
        tmp_path,
        "controller",
        f"process.roles=controller\nnode.id=1\nlisteners=CONTROLLER://127.0.0.1:{controller_port}\n"
        + common,
    )
    odradek(
        "storage", "format", "--config", str(controller.config), "--cluster-id", CLUSTER,
        "--standalone",
    )  # fmt: skip
    controller.start(wait_for_clients=False)
    brokers: dict[int, tuple[Server, int]] = {}
    for node_id in (2, 3):
        port = free_port()
        broker = Server(
            tmp_path,
            f"broker-{node_id}",
            f"process.roles=broker\nnode.id={node_id}\nlisteners=PLAINTEXT://127.0.0.1:{port}\n"
            + common,
        )
        odradek("storage", "format", "--config", str(broker.config), "--cluster-id", CLUSTER)
        broker.start(wait_for_clients=True)
        brokers[node_id] = (broker, port)
    yield controller, brokers
    for server in [controller, *(b for b, _ in brokers.values())]:
        server.stop()


def brokers_seen(port: int) -> set[int]:
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    metadata: Any = admin.list_topics(timeout=10)
    return set(metadata.brokers)


def wait_for(what: str, predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_brokers_register_are_fenced_when_silent_and_come_back(
    cluster: tuple[Server, dict[int, tuple[Server, int]]],
) -> None:
    _, brokers = cluster
    (broker2, _), (_, port3) = brokers[2], brokers[3]
    # Both registered and unfenced: clients of broker 3 see both.
    wait_for("both brokers in the metadata", lambda: brokers_seen(port3) == {2, 3})
    # Broker 2 dies without a word: fenced after its session times out.
    broker2.kill()
    wait_for("broker 2 fenced", lambda: brokers_seen(port3) == {3})
    # Restarted, it registers again (a new incarnation) and is unfenced once caught up.
    broker2.start(wait_for_clients=True)
    wait_for("broker 2 back", lambda: brokers_seen(port3) == {2, 3})


def test_a_node_restarted_after_sigkill_registers_at_once(tmp_path: Path) -> None:
    """The restarted process holds the log dir's lock, so the registration the metadata
    names for its dir belongs to a process that is gone: it replaces it at once
    (previous_broker_epoch) instead of being refused with DUPLICATE_BROKER_REGISTRATION
    until the old session times out (broker.session.timeout.ms, 9 s by default). And a
    second process on the same dir is refused, with the dir named."""
    node = NodeProcess(tmp_path / "single")
    bootstrap = node.start()
    try:
        for round_ in range(2):
            producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
            producer.produce("restarted", value=b"before %d" % round_)
            assert producer.flush(30) == 0
            node.kill()
            log_before = node.log_path.read_text()
            node.start()
            restarted = node.log_path.read_text()[len(log_before) :]
            assert "registered with epoch" in restarted
            assert "DUPLICATE_BROKER_REGISTRATION" not in restarted
            # A client is served by the new process as soon as it says it serves.
            producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
            producer.produce("restarted", value=b"after %d" % round_)
            assert producer.flush(30) == 0
        config = tmp_path / "single" / "node-1" / "server.properties"
        second = odradek("server", "--config", str(config), check=False)
        assert second.returncode != 0
        assert "in use by another process" in second.stderr
    finally:
        node.kill()
