"""``odradek acls`` and ``odradek users`` against three real nodes with SASL (PLAIN and
SCRAM-SHA-512 on the broker listener) and the authorizer on: the real ``odradek``
command, logged in with ``--command-config``, grants and takes back what a real client
(confluent-kafka) may do, and makes a SCRAM user that can log in; a principal without
ACLs is refused with a clear line."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.cluster import Cluster, odradek
from tests.integration.test_authorization import SETTINGS, login

SECURITY_SETTINGS = (
    SETTINGS.replace(
        "sasl.enabled.mechanisms=PLAIN\n", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512\n"
    )
    # SCRAM's credentials are in the metadata log the controllers serve: PLAIN there.
    + "listener.name.controller.sasl.enabled.mechanisms=PLAIN\n"
)
TOPIC = "orders"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(
        tmp_path_factory.mktemp("security-commands"), extra=SECURITY_SETTINGS,
        broker_protocol="SASL_PLAINTEXT", controller_protocol="SASL_PLAINTEXT",
    )  # fmt: skip
    c.start()
    admin = AdminClient(login(c, "admin"))
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=3)])[TOPIC].result(30)
    yield c
    c.kill()


def command_config(directory: Path, user: str) -> str:
    path = directory / f"{user}.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{user}" password="{user}-secret";\n'
    )
    return str(path)


def as_user(cluster: Cluster, config: str, *args: str, check: bool = True) -> Any:
    return odradek(
        *args, "--bootstrap-server", cluster.bootstrap, "--command-config", config, check=check
    )


def until(check: Any, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.3)


def alice_produces(cluster: Cluster) -> list[KafkaError | None]:
    producer = Producer({**login(cluster, "alice"), "acks": "all", "message.timeout.ms": 10_000})
    results: list[KafkaError | None] = []
    producer.produce(TOPIC, b"hello", on_delivery=lambda e, _: results.append(e))
    producer.flush(15)
    return results


def test_acls_granted_listed_used_and_removed(cluster: Cluster, tmp_path: Path) -> None:
    admin = command_config(tmp_path, "admin")
    added = as_user(
        cluster, admin, "acls", "add", "--topic", TOPIC, "--allow-principal", "User:alice",
        "--operation", "write", "--operation", "describe",
    )  # fmt: skip
    assert "Added 2 ACLs" in added.stdout

    # A list is answered from the node's own image, a moment behind the controller's
    # commit (as in Kafka): wait for the node asked to have applied the ACLs.
    def alices() -> list[Any]:
        out = as_user(cluster, admin, "acls", "list", "--principal", "User:alice", "--json")
        found: list[Any] = json.loads(out.stdout)
        return found

    listed = until(lambda: len(alices()) == 2) and alices()
    assert sorted((a["resource_name"], a["operation"], a["permission"]) for a in listed) == [
        (TOPIC, "DESCRIBE", "ALLOW"),
        (TOPIC, "WRITE", "ALLOW"),
    ]
    assert {(a["resource_type"], a["pattern_type"], a["host"]) for a in listed} == {
        ("TOPIC", "LITERAL", "*")
    }
    # Every broker replays the ACLs from the metadata log; the producer may ask any.
    assert until(lambda: alice_produces(cluster) == [None])

    removed = as_user(
        cluster, admin, "acls", "remove", "--topic", TOPIC, "--allow-principal", "User:alice"
    )
    assert "Removed 2 ACLs" in removed.stdout
    assert until(lambda: json.loads(as_user(cluster, admin, "acls", "list", "--json").stdout) == [])


def test_a_scram_user_made_by_the_command_logs_in(cluster: Cluster, tmp_path: Path) -> None:
    admin = command_config(tmp_path, "admin")
    password = tmp_path / "carol.password"
    password.write_text("carol-scram-secret\n")
    added = as_user(
        cluster, admin, "users", "add", "carol", "--mechanism", "SCRAM-SHA-512",
        "--iterations", "8192", "--password-file", str(password),
    )  # fmt: skip
    assert added.stdout == "carol: SCRAM-SHA-512 credential set (8192 iterations)\n"
    assert "carol-scram-secret" not in added.stdout + added.stderr

    def carol_logs_in() -> bool:
        carol = AdminClient(
            {
                "bootstrap.servers": cluster.bootstrap,
                "security.protocol": "sasl_plaintext",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "carol",
                "sasl.password": "carol-scram-secret",
            }
        )
        try:
            carol.list_topics(timeout=5)  # she may see no topic, but she is in
        except KafkaException:
            return False
        return True

    assert until(carol_logs_in)

    def users() -> list[Any]:
        found: list[Any] = json.loads(as_user(cluster, admin, "users", "list", "--json").stdout)
        return found

    carol = {"user": "carol", "mechanism": "SCRAM-SHA-512", "iterations": 8192}
    assert until(lambda: carol in users())
    table = as_user(cluster, admin, "users", "list").stdout.splitlines()
    assert table[0].split() == ["USER", "MECHANISM", "ITERATIONS"]
    assert ["carol", "SCRAM-SHA-512", "8192"] in [line.split() for line in table]

    removed = as_user(cluster, admin, "users", "remove", "carol", "--mechanism", "SCRAM-SHA-512")
    assert removed.stdout == "carol: SCRAM-SHA-512 credential removed\n"
    assert until(lambda: all(row["user"] != "carol" for row in users()))
    again = as_user(
        cluster, admin, "users", "remove", "carol", "--mechanism", "SCRAM-SHA-512", check=False
    )
    assert again.returncode == 1 and "carol has no SCRAM-SHA-512 credential" in again.stderr


def test_a_principal_without_acls_is_refused_in_one_clear_line(
    cluster: Cluster, tmp_path: Path
) -> None:
    alice = command_config(tmp_path, "alice")
    for args, says in (
        (("acls", "list"), "not authorized to describe ACLs: user 'alice' needs DESCRIBE"),
        (
            ("acls", "add", "--cluster", "--allow-principal", "User:alice", "--operation", "all"),
            "not authorized to create ACLs: user 'alice' needs ALTER",
        ),
        (("users", "list"), "not authorized to describe SCRAM credentials"),
    ):
        result = as_user(cluster, alice, *args, check=False)
        assert result.returncode == 1, (args, result.stdout, result.stderr)
        assert says in result.stderr and "CLUSTER_AUTHORIZATION_FAILED" in result.stderr
        assert result.stderr.count("\n") == 1
