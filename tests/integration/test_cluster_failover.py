"""``odradek cluster remove-brokers`` through the broker it removes, on real processes.

The operator names the broker being removed as the bootstrap server. Once it holds
nothing the command asks for it to be stopped and waits to unregister it; stopping it
closes the command's connection, and the command carries on through another broker the
cluster listed, unregisters it, and exits 0.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.cluster import CLUSTER_ID, Cluster, ClusterNode, odradek

SETTINGS = (
    "broker.session.timeout.ms=2000\n"
    "broker.heartbeat.interval.ms=200\n"
    "controller.quorum.election.timeout.ms=500\n"
    "controller.quorum.fetch.timeout.ms=1000\n"
    "offsets.topic.num.partitions=1\n"
)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, 3, extra=SETTINGS)
    c.start()
    yield c
    c.kill()  # not a test of stopping: a clean stop is tested on its own


def test_remove_brokers_given_the_drained_broker_finishes_through_another(
    cluster: Cluster, tmp_path: Path
) -> None:
    joined = ClusterNode(tmp_path, 4, SETTINGS, "broker")
    joined.write_config(",".join(f"127.0.0.1:{n.controller_port}" for n in cluster.controllers))
    odradek("storage", "format", "--config", str(joined.config), "--cluster-id", CLUSTER_ID)
    joined.start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        # Every partition has a replica on broker 4, so the command has moves to make.
        topic = NewTopic("drained", 3, replica_assignment=[[4, 1], [2, 4], [4, 3]])
        admin.create_topics([topic])["drained"].result(30)
        removing = subprocess.Popen(
            [sys.executable, "-m", "odradek", "cluster", "remove-brokers",
             "--bootstrap-server", joined.bootstrap, "--brokers", "4",
             "--timeout", "90", "--stop-timeout", "90"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        assert removing.stdout is not None
        seen = []
        for line in removing.stdout:
            seen.append(line)
            if "holds no replicas now; stop it" in line:
                break
        else:
            raise AssertionError("remove-brokers ended early:\n" + "".join(seen))
        joined.stop()
        rest, _ = removing.communicate(timeout=120)
        output = "".join(seen) + rest
        assert removing.returncode == 0, output
        assert "Traceback" not in output
        assert f"lost the connection to {joined.bootstrap}; carrying on through" in output
        assert "broker 4 unregistered" in output
        listed = admin.list_topics(timeout=10)
        assert 4 not in listed.brokers
        assert all(4 not in p.replicas for p in listed.topics["drained"].partitions.values())
    finally:
        joined.stop()
