"""``odradek dev --secure``: every listener SASL_SSL with a CA made in the data dir, PLAIN
for the nodes, SCRAM-SHA-512 for clients as ``admin``, the StandardAuthorizer; the
client settings printed and written next to the data, and kept from run to run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.broker.server_config import ServerConfig
from odradek.cli.dev_cluster import (
    CLIENT_PROPERTIES,
    LIBRDKAFKA_PROPERTIES,
    plan_cluster,
    prepare,
    secure_dev,
)
from odradek.core.errors import ConfigError
from tests.cli.test_dev_cluster import node_pids


def test_secure_settings_are_made_once_and_kept(tmp_path: Path) -> None:
    root = str(tmp_path)
    settings, add_scram = secure_dev(root, [1, 2], "127.0.0.1", ())
    assert add_scram == (f"SCRAM-SHA-512=[name=admin,password={settings.admin_password}]",)
    assert settings.admin_password != settings.broker_password
    for name in ("ca.pem", "ca-key.pem", "node-1.pem", "node-2.pem", "admin.password"):
        assert (tmp_path / "security" / name).exists(), name
    assert (tmp_path / "security" / "admin.password").stat().st_mode & 0o077 == 0
    ca = (tmp_path / "security" / "ca.pem").read_bytes()
    again, _ = secure_dev(root, [1, 2, 3], "127.0.0.1", ("SCRAM-SHA-256=[name=u,password=p]",))
    assert again == settings
    assert (tmp_path / "security" / "ca.pem").read_bytes() == ca
    assert (tmp_path / "security" / "node-3.pem").exists()  # issued by the same CA

    config = ServerConfig.load(
        "process.roles=broker,controller\nnode.id=1\n"
        "listeners=SASL_SSL://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093\n"
        "controller.listener.names=CONTROLLER\n"
        "controller.quorum.bootstrap.servers=127.0.0.1:19093\n"
        f"log.dirs={tmp_path}/node-1\n" + settings.server_properties(1)
    )
    assert config.listener_security_protocol_map["CONTROLLER"] == "SASL_SSL"
    assert config.inter_broker_listener_name == "SASL_SSL"


def test_secure_and_plain_data_are_not_mixed(tmp_path: Path) -> None:
    plan = plan_cluster(str(tmp_path / "plain"), 2, "127.0.0.1", 19092)
    prepare(plan)
    with pytest.raises(ConfigError, match="formatted without --secure"):
        plan_cluster(str(tmp_path / "plain"), 2, "127.0.0.1", 19092, secure=True)
    secured = tmp_path / "secure"
    secure_dev(str(secured), [1, 2], "127.0.0.1", ())
    (secured / "node-1").mkdir()
    (secured / "node-1" / "meta.properties").write_text("")
    (secured / "node-2").mkdir()
    (secured / "node-2" / "meta.properties").write_text("")
    with pytest.raises(ConfigError, match="with --secure"):
        plan_cluster(str(secured), 2, "127.0.0.1", 19092)


class SecureDev:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.process: subprocess.Popen[str] | None = None
        self.stderr = directory.parent / "dev.stderr"

    def start(self) -> dict[str, str]:
        """The settings it printed, up to and with ``bootstrap.servers``."""
        args = ["dev", "--secure", "--nodes", "2", "--port", "0", "--dir", str(self.directory)]
        with open(self.stderr, "a") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "odradek", *args],
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        assert self.process.stdout is not None
        printed: dict[str, str] = {}
        # The launcher gives up by itself after 60 s, so these reads end.
        for line in self.process.stdout:
            if line.startswith("#") or "=" not in line:
                continue
            key, value = line.strip().split("=", 1)
            printed[key] = value
            if key == "bootstrap.servers":
                return printed
        raise AssertionError(self.stderr.read_text()[-5000:])

    def stop(self) -> int:
        if self.process is None or self.process.poll() is not None:
            return -1
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(60)


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[SecureDev]:
    cluster = SecureDev(tmp_path / "dev")
    yield cluster
    cluster.stop()
    for pid in node_pids(cluster.directory):  # only after a failure
        os.kill(pid, signal.SIGKILL)


def odradek(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.timeout(120)
def test_secure_dev_cluster_serves_the_printed_login_only(dev: SecureDev) -> None:
    printed = dev.start()
    assert printed["security.protocol"] == "SASL_SSL"
    assert printed["sasl.mechanism"] == "SCRAM-SHA-512"
    assert printed["sasl.username"] == "admin"
    assert Path(printed["ssl.ca.location"]).read_bytes().startswith(b"-----BEGIN CERTIFICATE")
    written = (dev.directory / LIBRDKAFKA_PROPERTIES).read_text()
    assert all(f"{k}={v}" in written for k, v in printed.items()), written
    config: dict[str, str | int | float | bool] = {**printed, "log_level": 0}

    topic = f"secure-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(config)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=2)])[topic].result(30)
    producer = Producer({**config, "acks": "all"})
    errors: list[object] = []
    for i in range(20):
        producer.produce(topic, f"m{i}".encode(), on_delivery=lambda e, _: errors.append(e))
    assert producer.flush(30) == 0
    assert errors == [None] * 20
    consumer = Consumer({**config, "group.id": "g", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        for _ in range(60):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value() or b"")
            if len(values) == 20:
                break
    finally:
        consumer.close()
    assert values == [f"m{i}".encode() for i in range(20)]

    # The odradek commands log in with the written file, on both listeners.
    client_file = dev.directory / CLIENT_PROPERTIES
    health = odradek("cluster", "health", "--command-config", str(client_file))
    assert health.returncode == 0, health.stdout + health.stderr
    assert "healthy" in health.stdout
    quorum = odradek(
        "quorum", "describe", "--command-config", str(dev.directory / "controller.properties")
    )
    assert quorum.returncode == 0, quorum.stdout + quorum.stderr

    # Without the login: refused.
    servers = printed["bootstrap.servers"]
    plain = odradek("cluster", "health", "--bootstrap-server", servers)
    assert plain.returncode == 2, plain.stdout + plain.stderr
    for other in (
        {"bootstrap.servers": servers},  # PLAINTEXT to a TLS port
        {**printed, "sasl.password": "not-the-password"},
    ):
        with pytest.raises(KafkaException):
            AdminClient({**other, "log_level": 0}).list_topics(timeout=3)

    # A restart reuses the certificates and the logins the data was formatted with.
    assert dev.stop() == 0
    assert dev.start() == printed
    again = odradek("cluster", "health", "--command-config", str(client_file))
    assert again.returncode == 0, again.stdout + again.stderr
    assert dev.stop() == 0
