"""``odradek dev --nodes N``: the plan of ports and configs, and a real 3-node cluster."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient

from odradek.broker.server_config import ServerConfig
from odradek.cli.dev_cluster import ClusterPlan, plan_cluster, prepare
from odradek.cli.main import main
from odradek.core.errors import ConfigError


def no_port(host: str) -> int:
    raise AssertionError("a planned port must be reused, not picked again")


def write_configs(plan: ClusterPlan) -> None:
    for node in plan.nodes:
        Path(node.directory).mkdir(parents=True, exist_ok=True)
        Path(node.config_path).write_text(plan.server_properties(node))


def test_plan_gives_each_node_two_ports_from_the_first(tmp_path: Path) -> None:
    plan = plan_cluster(str(tmp_path / "dev"), 3, "127.0.0.1", 19092, pick_port=no_port)
    assert not plan.formatted
    assert [(n.node_id, n.port, n.controller_port) for n in plan.nodes] == [
        (1, 19092, 19093),
        (2, 19094, 19095),
        (3, 19096, 19097),
    ]
    second = plan.nodes[1]
    assert second.directory == str(tmp_path / "dev" / "node-2")
    config = ServerConfig.load(plan.server_properties(second))
    assert config.node_id == 2
    assert config.is_controller and config.is_broker
    assert list(config.log_dirs) == [second.directory]
    assert [(e.listener_name, e.port) for e in config.listeners] == [
        ("PLAINTEXT", 19094),
        ("CONTROLLER", 19095),
    ]
    assert [(hp.host, hp.port) for hp in config.controller_quorum_bootstrap_servers] == [
        ("127.0.0.1", 19093),
        ("127.0.0.1", 19095),
        ("127.0.0.1", 19097),
    ]
    with pytest.raises(ConfigError, match="need ports 65532 to 65537"):
        plan_cluster(str(tmp_path / "dev"), 3, "127.0.0.1", 65532)


def test_port_zero_picks_distinct_ports_once_and_reuses_them(tmp_path: Path) -> None:
    # The OS may hand a port out twice when each is released before the next pick.
    picks = iter([40001, 40002, 40002, 40003, 40001, 40004, 40005, 40006])
    plan = plan_cluster(str(tmp_path), 3, "127.0.0.1", 0, pick_port=lambda host: next(picks))
    ports = [p for n in plan.nodes for p in (n.port, n.controller_port)]
    assert ports == [40001, 40002, 40003, 40004, 40005, 40006]
    write_configs(plan)
    again = plan_cluster(str(tmp_path), 3, "127.0.0.1", 0, pick_port=no_port)
    assert again == plan


def test_formatted_data_must_match_the_plan(tmp_path: Path) -> None:
    plan = plan_cluster(str(tmp_path), 3, "127.0.0.1", 19092)
    prepare(plan)
    for node in plan.nodes:
        assert (Path(node.directory) / "meta.properties").exists()
    assert plan_cluster(str(tmp_path), 3, "127.0.0.1", 0, pick_port=no_port).formatted
    # The voter set in the metadata log names the controller ports it was formatted with.
    with pytest.raises(ConfigError, match="--port 19092"):
        plan_cluster(str(tmp_path), 3, "127.0.0.1", 29092)
    with pytest.raises(ConfigError, match="--nodes 3"):
        plan_cluster(str(tmp_path), 2, "127.0.0.1", 19092)


def test_dev_refuses_no_nodes() -> None:
    result = CliRunner().invoke(main, ["dev", "--nodes", "0"])
    assert result.exit_code != 0 and "--nodes" in result.output


def node_pids(directory: Path) -> list[int]:
    """Processes whose command line names a config in ``directory`` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile
        if b"server" in cmdline and str(directory).encode() in cmdline:
            found.append(int(entry))
    return found


class DevCluster:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.process: subprocess.Popen[str] | None = None
        self.stderr = directory.parent / "dev.stderr"

    def start(self) -> list[str]:
        args = ["dev", "--nodes", "3", "--port", "0", "--dir", str(self.directory)]
        with open(self.stderr, "a") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "odradek", *args],
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        assert self.process.stdout is not None
        # The launcher gives up by itself after 60 s, so this read ends.
        line = self.process.stdout.readline()
        assert line.startswith("bootstrap.servers="), self.stderr.read_text()[-5000:]
        return line.strip().split("=", 1)[1].split(",")

    def stop(self) -> int:
        if self.process is None or self.process.poll() is not None:
            return -1
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(60)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[DevCluster]:
    dev = DevCluster(tmp_path / "dev")
    yield dev
    dev.stop()
    for pid in node_pids(dev.directory):  # only after a failure: never leave nodes behind
        os.kill(pid, signal.SIGKILL)


@pytest.mark.timeout(150)
def test_three_node_dev_cluster_starts_stops_and_restarts(cluster: DevCluster) -> None:
    servers = cluster.start()
    assert len(servers) == 3
    assert len(set(servers)) == 3
    assert len(node_pids(cluster.directory)) == 3  # one OS process per node
    admin = AdminClient({"bootstrap.servers": ",".join(servers)})
    brokers = admin.list_topics(timeout=10).brokers
    assert sorted(b.id for b in brokers.values()) == [1, 2, 3]
    assert sorted(f"{b.host}:{b.port}" for b in brokers.values()) == sorted(servers)

    assert cluster.stop() == 0
    # The launcher waits for (and so reaps) every node before it exits.
    assert node_pids(cluster.directory) == []

    # The second run reuses the data and the ports --port 0 picked the first time.
    assert cluster.start() == servers
    assert cluster.stderr.read_text().count("formatted /") == 3  # the first run's only
    assert cluster.stop() == 0
