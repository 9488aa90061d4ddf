"""SASL on the broker (and inter-broker) listener with real clients: three nodes whose
broker listener is SASL_PLAINTEXT with PLAIN users from the JAAS config. Followers log
in to leaders as the broker user (every replica stays in the ISR); confluent-kafka,
kafka-python, aiokafka, kcat and the odradek commands log in; wrong passwords, unknown
users, mechanisms the listener does not offer and requests before the login are refused.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import struct
import subprocess
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli.certificates import cn, issue, make_ca
from tests.integration.cluster import Cluster, odradek

LISTENER = "SASL_PLAINTEXT"
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="broker" password="broker-secret" '
    'user_broker="broker-secret" user_alice="alice-secret";'
)


def sasl_settings() -> str:
    return (
        "sasl.enabled.mechanisms=PLAIN\n"
        "sasl.mechanism.inter.broker.protocol=PLAIN\n"
        f"listener.name.{LISTENER.lower()}.plain.sasl.jaas.config={PLAIN_JAAS}\n"
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("sasl"), extra=sasl_settings(), broker_protocol=LISTENER)
    c.start()
    yield c
    c.kill()


def client_config(
    cluster: Cluster, user: str = "alice", password: str = "alice-secret", mechanism: str = "PLAIN"
) -> dict[str, str | int | float | bool]:
    return {
        "bootstrap.servers": cluster.bootstrap,
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def _wait_in_sync(admin: AdminClient, topic: str, replicas: int) -> dict[int, list[int]]:
    deadline = time.monotonic() + 30
    while True:
        partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
        if all(len(p.isrs) == replicas for p in partitions.values()) or time.monotonic() > deadline:
            return {p.id: sorted(p.isrs) for p in partitions.values()}
        time.sleep(0.5)


def test_produce_and_consume_over_sasl_plain_with_followers_in_sync(cluster: Cluster) -> None:
    topic = f"sasl-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(client_config(cluster))
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=3)])[topic].result(30)
    producer = Producer({**client_config(cluster), "acks": "all", "enable.idempotence": True})
    errors: list[object] = []
    for i in range(200):
        producer.produce(
            topic, f"v{i}".encode(), key=str(i).encode(),
            on_delivery=lambda error, _: errors.append(error),
        )  # fmt: skip
        producer.poll(0)
    assert producer.flush(60) == 0
    assert errors == [None] * 200
    consumer = Consumer(
        {**client_config(cluster), "group.id": f"g-{topic}", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 60
    while len(seen) < 200 and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            seen.add(bytes(message.value() or b""))
    consumer.close()
    assert seen == {f"v{i}".encode() for i in range(200)}
    # Followers log in to the leaders' SASL listener as the broker user.
    assert _wait_in_sync(admin, topic, 3) == {0: [1, 2, 3], 1: [1, 2, 3]}


@pytest.mark.parametrize(
    ("user", "password", "mechanism"),
    [
        ("alice", "wrong", "PLAIN"),
        ("mallory", "alice-secret", "PLAIN"),
        ("alice", "alice-secret", "SCRAM-SHA-256"),
    ],
)
def test_bad_logins_are_refused(cluster: Cluster, user: str, password: str, mechanism: str) -> None:
    failures: list[KafkaError] = []
    producer = Producer(
        {**client_config(cluster, user, password, mechanism), "error_cb": failures.append}
    )
    deadline = time.monotonic() + 20
    while not failures and time.monotonic() < deadline:
        producer.poll(0.2)
    assert failures and failures[0].code() == KafkaError._AUTHENTICATION, failures
    with pytest.raises(KafkaException):
        producer.list_topics(timeout=2)


def test_a_failed_login_is_logged_with_the_address_and_user_but_no_password(
    cluster: Cluster,
) -> None:
    admin = AdminClient({**client_config(cluster, "alice", "not-her-password"), "retries": 0})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    deadline = time.monotonic() + 10
    while True:
        log = "".join((n.dir / "node.log").read_text() for n in cluster.nodes)
        if "failed authentication from 127.0.0.1" in log or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert "failed authentication from 127.0.0.1" in log and "as 'alice'" in log
    assert "not-her-password" not in log


def _frame(api_key: int, version: int, body: bytes = b"") -> bytes:
    payload = struct.pack(">hhih", api_key, version, 1, 4) + b"test" + body
    return struct.pack(">i", len(payload)) + payload


def test_a_request_before_the_login_closes_the_connection(cluster: Cluster) -> None:
    # A Metadata v0 request for all topics, sent without logging in.
    with socket.create_connection(("127.0.0.1", cluster.nodes[0].port), timeout=10) as s:
        s.sendall(_frame(3, 0, struct.pack(">i", -1)))
        try:
            answer = s.recv(4096)
        except ConnectionResetError:
            answer = b""
    assert answer == b""  # closed, and nothing about the cluster was said


def test_kafka_python_and_aiokafka_log_in_with_plain(cluster: Cluster) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from kafka import KafkaConsumer, KafkaProducer

    login = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "alice-secret",
    }
    topic = f"sasl-py-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(client_config(cluster))
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])[topic].result(30)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", **login)
    for i in range(10):
        producer.send(topic, f"kp{i}".encode()).get(timeout=30)
    producer.close()

    async def aio() -> list[bytes]:
        sender = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", **login)
        await sender.start()
        for i in range(10):
            await sender.send_and_wait(topic, f"aio{i}".encode())
        await sender.stop()
        reader = AIOKafkaConsumer(
            topic, bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest", **login
        )
        await reader.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                async for message in reader:
                    got.append(message.value or b"")
                    if len(got) == 20:
                        break
        finally:
            await reader.stop()
        return got

    expected = [f"kp{i}".encode() for i in range(10)] + [f"aio{i}".encode() for i in range(10)]
    assert asyncio.run(aio()) == expected
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=cluster.bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
        **login,
    )
    # Read as many as were sent (not until 10 s of silence), then nothing more is there.
    assert [m.value for _, m in zip(expected, consumer, strict=False)] == expected
    assert not any(consumer.poll(timeout_ms=500).values())
    consumer.close()


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is installed by make kcat")
def test_kcat_logs_in_with_plain(cluster: Cluster) -> None:
    topic = f"sasl-kcat-{uuid.uuid4().hex[:8]}"
    login = [
        "-b", cluster.bootstrap, "-X", "security.protocol=SASL_PLAINTEXT",
        "-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=alice",
        "-X", "sasl.password=alice-secret",
    ]  # fmt: skip
    admin = AdminClient(client_config(cluster))
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])[topic].result(30)
    subprocess.run(["kcat", *login, "-P", "-t", topic], input=b"one\ntwo\n", check=True, timeout=60)
    out = subprocess.run(
        ["kcat", *login, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
        capture_output=True, check=True, timeout=60,
    )  # fmt: skip
    assert out.stdout.split() == [b"one", b"two"]


def test_odradek_commands_log_in_with_plain(cluster: Cluster, tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="alice" password="alice-secret";\n'
    )
    health = odradek(
        "cluster", "health", "--bootstrap-server", cluster.bootstrap,
        "--command-config", str(config), "--json", check=False,
    )  # fmt: skip
    assert health.returncode == 0, health.stdout + health.stderr
    assert json.loads(health.stdout)["healthy"] is True
    config.write_text(config.read_text().replace("alice-secret", "wrong"))
    refused = odradek(
        "cluster", "health", "--bootstrap-server", cluster.bootstrap,
        "--command-config", str(config), check=False,
    )  # fmt: skip
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "Invalid username or password" in refused.stderr, refused.stderr


def test_a_sasl_listener_left_at_gssapi_stops_the_node_naming_the_keys(tmp_path: Path) -> None:
    c = Cluster(tmp_path, size=1, extra="", broker_protocol=LISTENER)
    node = c.nodes[0]
    node.start(wait=False)
    assert node.process is not None
    assert node.process.wait(60) != 0
    log = (node.dir / "node.log").read_text()
    assert "sasl.enabled.mechanisms is GSSAPI" in log


def test_sasl_ssl_brokers_with_controllers_behind_a_sasl_listener(tmp_path: Path) -> None:
    """The broker listener is SASL_SSL and the controller listener SASL_PLAINTEXT, both
    with PLAIN: controllers' Raft traffic, brokers' registrations, heartbeats, forwards
    and ISR changes log in to the controller listener; clients and followers log in over
    TLS. The cluster forms, a forwarded CreateTopics works, acks=all produce succeeds with
    every replica in sync."""
    ca = make_ca()
    broker_cert = issue(ca, cn("broker"))
    (tmp_path / "ca.pem").write_bytes(ca.cert_pem)
    (tmp_path / "broker.pem").write_bytes(broker_cert.key_pem() + broker_cert.cert_pem)
    controller_jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="node" password="node-secret" user_node="node-secret";'
    )
    extra = (
        sasl_settings().replace(LISTENER.lower(), "sasl_ssl")
        + "sasl.mechanism.controller.protocol=PLAIN\n"
        + f"listener.name.controller.plain.sasl.jaas.config={controller_jaas}\n"
        + "ssl.keystore.type=PEM\n"
        + f"ssl.keystore.location={tmp_path / 'broker.pem'}\n"
        + "ssl.truststore.type=PEM\n"
        + f"ssl.truststore.location={tmp_path / 'ca.pem'}\n"
    )
    c = Cluster(
        tmp_path / "cluster", size=2, controllers=3, extra=extra, broker_protocol="SASL_SSL",
        controller_protocol="SASL_PLAINTEXT",
    )  # fmt: skip
    c.start()
    try:
        config = {
            **client_config(c),
            "security.protocol": "sasl_ssl",
            "ssl.ca.location": str(tmp_path / "ca.pem"),
        }
        admin = AdminClient(config)
        admin.create_topics([NewTopic("all-sasl", num_partitions=1, replication_factor=2)])[
            "all-sasl"
        ].result(30)
        producer = Producer({**config, "acks": "all"})
        errors: list[object] = []
        for i in range(50):
            producer.produce(
                "all-sasl", f"m{i}".encode(), on_delivery=lambda error, _: errors.append(error)
            )
        assert producer.flush(60) == 0
        assert errors == [None] * 50
        assert _wait_in_sync(admin, "all-sasl", 2) == {0: [1, 2]}
        for node in [*c.controllers, *c.nodes]:
            assert "failed authentication" not in (node.dir / "node.log").read_text()
    finally:
        c.kill()


def test_sessions_with_a_lifetime_are_renewed_without_losing_a_request(tmp_path: Path) -> None:
    """connections.max.reauth.ms (KIP-368): every session lasts 1.5 s. librdkafka logs
    in again in band before its session ends, the followers' and the brokers' own
    connections are renewed, so over several lifetimes nothing fails, no follower drops
    out of the ISR, and no connection is closed for an expired session."""
    c = Cluster(
        tmp_path, size=3, extra=sasl_settings() + "connections.max.reauth.ms=1500\n",
        broker_protocol=LISTENER,
    )  # fmt: skip
    c.start()
    try:
        admin = AdminClient(client_config(c))
        admin.create_topics([NewTopic("renewed", num_partitions=1, replication_factor=3)])[
            "renewed"
        ].result(30)
        producer = Producer({**client_config(c), "acks": "all", "linger.ms": 5})
        errors: list[object] = []
        sent = 0
        end = time.monotonic() + 4.5
        while time.monotonic() < end:
            producer.produce("renewed", b"x", on_delivery=lambda error, _: errors.append(error))
            sent += 1
            producer.poll(0.05)
        assert producer.flush(30) == 0
        assert errors == [None] * sent
        assert _wait_in_sync(admin, "renewed", 3) == {0: [1, 2, 3]}
        for node in c.nodes:
            log = (node.dir / "node.log").read_text()
            assert "SASL session expired" not in log
            assert "failed authentication" not in log
    finally:
        c.kill()


SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="broker" password="broker-scram";'
)


def test_scram_sha_512_over_sasl_ssl_from_format_to_every_client(tmp_path: Path) -> None:
    """Brokers log in to each other with SCRAM-SHA-512 (the broker user comes from
    ``storage format --add-scram``); confluent-kafka, kafka-python, aiokafka, kcat and
    the commands log in as a user an admin client added; a deleted user, a wrong
    password and SCRAM-SHA-256 (no credential of that mechanism) are refused; the
    credentials survive a restart of every node."""
    from aiokafka import AIOKafkaProducer
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )
    from kafka import KafkaConsumer

    ca = make_ca()
    cert = issue(ca, cn("broker"))
    (tmp_path / "ca.pem").write_bytes(ca.cert_pem)
    (tmp_path / "broker.pem").write_bytes(cert.key_pem() + cert.cert_pem)
    extra = (
        "sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256\n"
        "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512\n"
        f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={SCRAM_JAAS}\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={tmp_path / 'broker.pem'}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={tmp_path / 'ca.pem'}\n"
    )
    c = Cluster(
        tmp_path / "cluster", extra=extra, broker_protocol="SASL_SSL",
        format_args=[
            "--add-scram", "SCRAM-SHA-512=[name=broker,password=broker-scram]",
            "--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]",
        ],
    )  # fmt: skip
    c.start()
    ca_file = str(tmp_path / "ca.pem")

    def login(
        user: str, password: str, mechanism: str = "SCRAM-SHA-512"
    ) -> dict[str, str | int | float | bool]:
        return {
            "bootstrap.servers": c.bootstrap,
            "security.protocol": "sasl_ssl",
            "ssl.ca.location": ca_file,
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
        }

    def refused(config: dict[str, str | int | float | bool]) -> bool:
        """Whether the login is refused: a metadata request answered means it is not
        (at once); a refused one times out, and the error callback says why."""
        failures: list[KafkaError] = []
        producer = Producer({**config, "error_cb": failures.append})
        try:
            producer.list_topics(timeout=5)
        except KafkaException:
            producer.poll(0.5)
            return any(f.code() == KafkaError._AUTHENTICATION for f in failures)
        return False

    try:
        admin = AdminClient(login("admin", "admin-secret"))
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
        admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("carol", info, b"carol-secret")]
        )["carol"].result(30)
        # Every node applies the new credential from the metadata log.
        deadline = time.monotonic() + 30
        while refused(login("carol", "carol-secret")) and time.monotonic() < deadline:
            time.sleep(0.5)
        topic = "scram"
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])[
            topic
        ].result(30)
        producer = Producer({**login("carol", "carol-secret"), "acks": "all"})
        errors: list[object] = []
        for i in range(20):
            producer.produce(topic, f"c{i}".encode(), on_delivery=lambda e, _: errors.append(e))
        assert producer.flush(60) == 0 and errors == [None] * 20

        async def aio() -> None:
            sender = AIOKafkaProducer(
                bootstrap_servers=c.bootstrap, acks="all", security_protocol="SASL_SSL",
                ssl_context=__import__("ssl").create_default_context(cafile=ca_file),
                sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="carol",
                sasl_plain_password="carol-secret",
            )  # fmt: skip
            await sender.start()
            for i in range(20, 30):
                await sender.send_and_wait(topic, f"c{i}".encode())
            await sender.stop()

        asyncio.run(aio())
        if shutil.which("kcat") is not None:
            subprocess.run(
                ["kcat", "-b", c.bootstrap, "-X", "security.protocol=SASL_SSL",
                 "-X", f"ssl.ca.location={ca_file}", "-X", "sasl.mechanisms=SCRAM-SHA-512",
                 "-X", "sasl.username=carol", "-X", "sasl.password=carol-secret",
                 "-P", "-t", topic],
                input=b"c30\n", check=True, timeout=60,
            )  # fmt: skip
        expected = [f"c{i}".encode() for i in range(30)]
        if shutil.which("kcat") is not None:
            expected.append(b"c30")
        consumer = KafkaConsumer(
            topic, bootstrap_servers=c.bootstrap, auto_offset_reset="earliest",
            consumer_timeout_ms=10_000, security_protocol="SASL_SSL", ssl_cafile=ca_file,
            sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="carol",
            sasl_plain_password="carol-secret",
        )  # fmt: skip
        assert [m.value for _, m in zip(expected, consumer, strict=False)] == expected
        assert not any(consumer.poll(timeout_ms=500).values())
        consumer.close()
        # Followers logged in to the leader with the bootstrapped broker credential.
        assert _wait_in_sync(admin, topic, 3) == {0: [1, 2, 3]}

        config = tmp_path / "client.properties"
        config.write_text(
            f"security.protocol=SASL_SSL\nssl.truststore.type=PEM\nssl.truststore.location={ca_file}\n"
            "sasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config="
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="carol" password="carol-secret";\n'
        )
        health = odradek(
            "cluster", "health", "--bootstrap-server", c.bootstrap,
            "--command-config", str(config), "--json", check=False,
        )  # fmt: skip
        assert health.returncode == 0, health.stdout + health.stderr

        assert refused(login("carol", "wrong"))
        assert refused(login("carol", "carol-secret", "SCRAM-SHA-256"))
        admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)]
        )["carol"].result(30)
        deadline = time.monotonic() + 30
        while not refused(login("carol", "carol-secret")) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert refused(login("carol", "carol-secret"))

        c.kill()
        c.start()
        after = AdminClient(login("admin", "admin-secret"))
        described = after.describe_user_scram_credentials()
        assert isinstance(described, Future)  # all users: one future
        users = described.result(30)
        assert set(users) == {"admin", "broker"}
        assert _wait_in_sync(after, topic, 3) == {0: [1, 2, 3]}
    finally:
        c.kill()
