"""The odradek command: storage format, random-uuid, and server start-up checks."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.cli.main import main
from odradek.core.kafka_uuid import from_kafka_str


def properties(tmp_path: Path, port: int = 0, extra: str = "") -> Path:
    path = tmp_path / "server.properties"
    controller_port = port + 1 if port else 0
    path.write_text(
        "process.roles=broker,controller\n"
        "node.id=1\n"
        f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}\n"
        "controller.listener.names=CONTROLLER\n"
        f"controller.quorum.voters=1@127.0.0.1:{controller_port or 9093}\n"
        f"log.dirs={tmp_path / 'logs'}\n" + extra
    )
    return path


def test_random_uuid_is_a_kafka_uuid() -> None:
    result = CliRunner().invoke(main, ["storage", "random-uuid"])
    assert result.exit_code == 0
    from_kafka_str(result.output.strip())


def test_format_writes_meta_properties_once(tmp_path: Path) -> None:
    config = properties(tmp_path)
    cluster = "MkU3OEVBNTcwNTJENDM2Qg"
    runner = CliRunner()
    first = runner.invoke(
        main, ["storage", "format", "--config", str(config), "--cluster-id", cluster]
    )
    assert first.exit_code == 0, first.output
    meta = (tmp_path / "logs" / "meta.properties").read_text()
    assert f"cluster.id={cluster}" in meta and "node.id=1" in meta
    again = runner.invoke(
        main, ["storage", "format", "--config", str(config), "--cluster-id", cluster]
    )
    assert again.exit_code != 0 and "already formatted" in again.output
    tolerated = runner.invoke(
        main,
        [
            "storage",
            "format",
            "--config",
            str(config),
            "--cluster-id",
            cluster,
            "--ignore-formatted",
        ],
    )
    assert tolerated.exit_code == 0
    other = runner.invoke(
        main,
        [
            "storage",
            "format",
            "--config",
            str(config),
            "--cluster-id",
            "AAAAAAAAAAAAAAAAAAAAAA",
            "--ignore-formatted",
        ],
    )
    assert other.exit_code != 0 and "already formatted for cluster" in other.output


def test_server_refuses_unformatted_dirs_and_bad_values(tmp_path: Path) -> None:
    config = properties(tmp_path)
    runner = CliRunner()
    unformatted = runner.invoke(main, ["server", "--config", str(config)])
    assert unformatted.exit_code != 0 and "not formatted" in unformatted.output
    bad = runner.invoke(main, ["server", "--config", str(config), "--override", "num.partitions=x"])
    assert bad.exit_code != 0 and "num.partitions" in bad.output
    bad_format = runner.invoke(
        main, ["storage", "format", "--config", str(config), "--cluster-id", "not-a-uuid"]
    )
    assert bad_format.exit_code != 0 and "--cluster-id" in bad_format.output


def test_server_from_properties_serves_clients(tmp_path: Path) -> None:
    config = properties(tmp_path, extra="num.partitions=3\nunheard.of.key=1\n")
    runner = CliRunner()
    assert (
        runner.invoke(
            main,
            [
                "storage",
                "format",
                "--config",
                str(config),
                "--cluster-id",
                "MkU3OEVBNTcwNTJENDM2Qg",
            ],
        ).exit_code
        == 0
    )
    log_path = tmp_path / "server.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "odradek", "server", "--config", str(config)],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("bootstrap.servers="), log_path.read_text()
        bootstrap = line.strip().split("=", 1)[1]
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce("auto", value=b"hello", partition=2)
        assert producer.flush(20) == 0
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False}
        )
        metadata = consumer.list_topics("auto", timeout=10)
        assert len(metadata.topics["auto"].partitions) == 3  # num.partitions from the file
        consumer.assign([TopicPartition("auto", 2, 0)])
        deadline = time.monotonic() + 20
        message = None
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
        assert message is not None and message.value() == b"hello"
        consumer.close()
    finally:
        process.terminate()
        assert process.wait(30) == 0  # a clean stop on SIGTERM
    assert "unknown configuration keys: unheard.of.key" in log_path.read_text()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            "listeners=SSL://127.0.0.1:19500,CONTROLLER://127.0.0.1:19501\n"
            "listener.security.protocol.map=SSL:SSL,CONTROLLER:PLAINTEXT\n"
            "controller.quorum.voters=1@127.0.0.1:19501\n"
            "inter.broker.listener.name=SSL\n",
            "an SSL listener needs a key store",
        ),
        (
            "listeners=SASL_SSL://127.0.0.1:19500,CONTROLLER://127.0.0.1:19501\n"
            "listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT\n"
            "controller.quorum.voters=1@127.0.0.1:19501\n"
            "inter.broker.listener.name=SASL_SSL\n",
            "sasl.enabled.mechanisms is GSSAPI (Kafka's default when it is not set): GSSAPI "
            "(Kerberos) is not supported",
        ),
        (
            "listeners=PLAINTEXT://127.0.0.1:19500,CONTROLLER://127.0.0.1:19501\n"
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SSL\n"
            "controller.quorum.voters=1@127.0.0.1:19501\n",
            "listener CONTROLLER: an SSL listener needs a key store",
        ),
        (
            "listeners=PLAINTEXT://127.0.0.1:19500,SSL://127.0.0.1:19502,"
            "CONTROLLER://127.0.0.1:19501\n"
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT\n"
            "controller.quorum.voters=1@127.0.0.1:19501\n",
            # A second broker listener is served too: its missing store stops the node.
            "listener SSL: an SSL listener needs a key store",
        ),
        (
            "listeners=SSL://127.0.0.1:19500,CONTROLLER://127.0.0.1:19501\n"
            "listener.security.protocol.map=SSL:SSL,CONTROLLER:PLAINTEXT\n"
            "controller.quorum.voters=1@127.0.0.1:19501\n"
            "inter.broker.listener.name=SSL\n"
            "ssl.keystore.location=/nonexistent/server.p12\n",
            "ssl.keystore.location='/nonexistent/server.p12' cannot be read",
        ),
        ("process.roles=broker\n", "process.roles"),
    ],
)
def test_server_refuses_what_it_cannot_serve_safely(
    tmp_path: Path, extra: str, message: str
) -> None:
    config = properties(tmp_path, extra=extra)
    runner = CliRunner()
    runner.invoke(
        main,
        ["storage", "format", "--config", str(config), "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qg"],
    )
    result = runner.invoke(main, ["server", "--config", str(config)])
    assert result.exit_code != 0
    assert message in result.output
