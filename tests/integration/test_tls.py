"""TLS on the broker listener, with real clients: three nodes whose broker (and
inter-broker) listener is SSL with ``ssl.client.auth=required``. Clients produce and
consume over mutual TLS, followers fetch from leaders over TLS (every replica stays in
the ISR), and clients without a certificate, or speaking plaintext, are refused."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from cryptography import x509

from odradek.cli.certificates import cn, issue, make_ca
from tests.integration.cluster import Cluster, odradek
from tests.integration.roundtrips import aiokafka_roundtrip, kcat_roundtrip


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("pki")
    ca = make_ca()
    broker = issue(ca, cn("broker"))
    client = issue(ca, cn("alice"), hosts=())
    files = {
        "ca": ca.cert_pem,
        "broker": broker.key_pem() + broker.cert_pem,
        "client.crt": client.cert_pem,
        "client.key": client.key_pem(),
    }
    for name, data in files.items():
        (root / name).write_bytes(data)
    return {name: str(root / name) for name in files}


def mutual_tls(pki: dict[str, str]) -> str:
    """The nodes' TLS settings: the broker's PEM key store, the CA, client certificates
    required."""
    return (
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={pki['broker']}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={pki['ca']}\n"
        "ssl.client.auth=required\n"
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, pki: dict[str, str]) -> Iterator[Cluster]:
    extra = mutual_tls(pki)
    c = Cluster(tmp_path_factory.mktemp("tls"), extra=extra, broker_protocol="SSL")
    c.start()
    yield c
    c.kill()


def client_config(
    cluster: Cluster, pki: dict[str, str], *, certificate: bool = True
) -> dict[str, str | int | float | bool]:
    config: dict[str, str | int | float | bool] = {
        "bootstrap.servers": cluster.bootstrap,
        "security.protocol": "ssl",
        "ssl.ca.location": pki["ca"],
    }
    if certificate:
        config |= {
            "ssl.certificate.location": pki["client.crt"],
            "ssl.key.location": pki["client.key"],
        }
    return config


def test_produce_and_consume_over_mutual_tls_with_followers_in_sync(
    cluster: Cluster, pki: dict[str, str]
) -> None:
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(client_config(cluster, pki))
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=3)])[topic].result(30)
    producer = Producer({**client_config(cluster, pki), "acks": "all", "enable.idempotence": True})
    acked: list[object] = []

    def delivered(error: object, message: object) -> None:
        if error is None:
            acked.append(message)

    for i in range(300):
        producer.produce(
            topic, value=f"v{i}".encode() * 40, key=str(i).encode(), on_delivery=delivered
        )
        producer.poll(0)
    assert producer.flush(60) == 0
    assert len(acked) == 300

    consumer = Consumer(
        {
            **client_config(cluster, pki),
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 60
    while len(seen) < 300 and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None and message.value() is not None:
            seen.add(bytes(message.value() or b""))
    consumer.close()
    assert seen == {f"v{i}".encode() * 40 for i in range(300)}

    # Followers fetch from the leaders over the same TLS listener: all stay in sync.
    deadline = time.monotonic() + 30
    while True:
        partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
        if all(len(p.isrs) == 3 for p in partitions.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert {p.id: sorted(p.isrs) for p in partitions.values()} == {0: [1, 2, 3], 1: [1, 2, 3]}


def test_a_client_without_a_certificate_is_refused(cluster: Cluster, pki: dict[str, str]) -> None:
    admin = AdminClient({**client_config(cluster, pki, certificate=False), "retries": 0})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)


def test_plaintext_to_the_tls_port_gets_no_kafka_answer(cluster: Cluster) -> None:
    # An ApiVersions v0 request, as a client that forgot security.protocol sends it.
    header = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
    with socket.create_connection(("127.0.0.1", cluster.nodes[0].port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(header)) + header)
        try:
            answer = s.recv(4096)
        except ConnectionResetError:
            answer = b""
    # The TLS server takes the bytes for a broken ClientHello: at most a TLS alert
    # (record type 21), never a Kafka response.
    assert answer == b"" or answer[0] == 21


def test_kafka_python_over_mutual_tls(cluster: Cluster, pki: dict[str, str]) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    ssl = {
        "security_protocol": "SSL",
        "ssl_cafile": pki["ca"],
        "ssl_certfile": pki["client.crt"],
        "ssl_keyfile": pki["client.key"],
    }
    topic = f"tls-kp-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(client_config(cluster, pki))
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])[topic].result(30)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", **ssl)
    for i in range(20):
        producer.send(topic, f"kp{i}".encode()).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=cluster.bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
        **ssl,
    )
    expected = [f"kp{i}".encode() for i in range(20)]
    # As many as were sent (not until 10 s of silence), then nothing more.
    values = [m.value for _, m in zip(expected, consumer, strict=False)]
    assert not any(consumer.poll(timeout_ms=500).values())
    consumer.close()
    assert values == expected


def _client_ssl_context(pki: dict[str, str]) -> ssl.SSLContext:
    """What an asyncio client (aiokafka) takes: the CA to check the brokers with, and
    the client's certificate and key to show them."""
    context = ssl.create_default_context(cafile=pki["ca"])
    context.load_cert_chain(pki["client.crt"], pki["client.key"])
    return context


def test_aiokafka_produces_consumes_in_a_group_and_administers_over_mutual_tls(
    cluster: Cluster, pki: dict[str, str]
) -> None:
    def login() -> dict[str, Any]:
        return {
            "bootstrap_servers": cluster.bootstrap,
            "security_protocol": "SSL",
            "ssl_context": _client_ssl_context(pki),
        }

    aiokafka_roundtrip(login, "tls-aio")


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is installed by make kcat")
def test_kcat_produces_consumes_in_a_group_and_reads_metadata_over_mutual_tls(
    cluster: Cluster, pki: dict[str, str]
) -> None:
    tls = [
        "-b", cluster.bootstrap, "-X", "security.protocol=ssl",
        "-X", f"ssl.ca.location={pki['ca']}",
        "-X", f"ssl.certificate.location={pki['client.crt']}",
        "-X", f"ssl.key.location={pki['client.key']}",
    ]  # fmt: skip
    kcat_roundtrip(tls, client_config(cluster, pki), "tls-kcat")


def test_a_bad_key_store_stops_the_node_naming_the_key(tmp_path: Path, pki: dict[str, str]) -> None:
    c = Cluster(
        tmp_path,
        size=1,
        extra="ssl.keystore.type=PEM\nssl.keystore.location=/nonexistent/broker.pem\n",
        broker_protocol="SSL",
    )
    node = c.nodes[0]
    node.start(wait=False)
    assert node.process is not None
    assert node.process.wait(60) != 0
    log = (node.dir / "node.log").read_text()
    assert "ssl.keystore.location" in log


def test_odradek_commands_reach_the_cluster_over_mutual_tls(
    cluster: Cluster, pki: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "client.properties"

    def inline(path: str) -> str:
        # A .properties value on one line: \n escapes, as Kafka's inline PEM keys take.
        return Path(path).read_text().strip().replace("\n", "\\n")

    config.write_text(
        "security.protocol=SSL\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={pki['ca']}\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.certificate.chain={inline(pki['client.crt'])}\n"
        f"ssl.keystore.key={inline(pki['client.key'])}\n"
    )
    health = odradek(
        "cluster", "health", "--bootstrap-server", cluster.bootstrap,
        "--command-config", str(config), "--json", check=False,
    )  # fmt: skip
    assert health.returncode == 0, health.stdout + health.stderr
    assert json.loads(health.stdout)["healthy"] is True
    # Without the client certificate the brokers refuse the command's connections.
    plain = tmp_path / "plain.properties"
    plain.write_text(f"security.protocol=SSL\nssl.truststore.location={pki['ca']}\n")
    refused = odradek(
        "cluster", "health", "--bootstrap-server", cluster.bootstrap,
        "--command-config", str(plain), check=False,
    )  # fmt: skip
    assert refused.returncode == 2, refused.stdout + refused.stderr


def test_every_listener_on_mutual_tls_with_separate_controllers(
    tmp_path: Path, pki: dict[str, str]
) -> None:
    """Controllers' Raft traffic, brokers' registrations, heartbeats, forwarded admin
    requests and ISR changes all go over the controller listener's TLS: the cluster
    forms (each broker registers, which needs an elected quorum), a topic is created
    (forwarded), and acks=all produce succeeds with every replica in sync."""
    extra = mutual_tls(pki)
    c = Cluster(
        tmp_path, size=2, controllers=3, extra=extra, broker_protocol="SSL",
        controller_protocol="SSL",
    )  # fmt: skip
    c.start()
    try:
        topic = "all-tls"
        admin = AdminClient(client_config(c, pki))
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=2)])[
            topic
        ].result(30)
        producer = Producer({**client_config(c, pki), "acks": "all"})
        errors: list[object] = []
        for i in range(50):
            producer.produce(
                topic, f"m{i}".encode(), on_delivery=lambda error, _: errors.append(error)
            )
        assert producer.flush(60) == 0
        assert errors == [None] * 50
        partition = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
        assert sorted(partition.isrs) == [1, 2]
        for node in c.controllers:
            assert "refused a TLS client" not in (node.dir / "node.log").read_text()
    finally:
        c.kill()


def _served_subject(port: int, ca: str) -> str:
    context = ssl.create_default_context(cafile=ca)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


def test_a_dynamic_alter_configs_reloads_a_listeners_key_store(tmp_path: Path) -> None:
    """Kafka's certificate rotation: IncrementalAlterConfigs of
    ``listener.name.ssl.ssl.keystore.location`` on one broker (not the active
    controller, so the request is forwarded) makes that broker serve new connections
    with the new certificate; a store it cannot load is refused with INVALID_CONFIG and
    the old certificate stays. The controller listener's store rotates the same way
    (``listener.name.controller.ssl.keystore.location``), and the quorum goes on."""
    ca = make_ca()
    old, new = issue(ca, cn("old-broker")), issue(ca, cn("new-broker"))
    (tmp_path / "ca.pem").write_bytes(ca.cert_pem)
    (tmp_path / "old.pem").write_bytes(old.key_pem() + old.cert_pem)
    (tmp_path / "new.pem").write_bytes(new.key_pem() + new.cert_pem)
    extra = (
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={tmp_path / 'old.pem'}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={tmp_path / 'ca.pem'}\n"
    )
    c = Cluster(tmp_path / "cluster", extra=extra, broker_protocol="SSL", controller_protocol="SSL")
    c.start()
    quorum = tmp_path / "quorum.properties"
    quorum.write_text(
        "security.protocol=SSL\nssl.truststore.type=PEM\n"
        f"ssl.truststore.location={tmp_path / 'ca.pem'}\n"
    )
    try:
        leader = c.controller_leader(quorum)
        node = next(n for n in c.nodes if n.node_id != leader)
        ca_file = str(tmp_path / "ca.pem")
        assert _served_subject(node.port, ca_file) == "CN=old-broker"
        admin = AdminClient(
            {
                "bootstrap.servers": c.bootstrap,
                "security.protocol": "ssl",
                "ssl.ca.location": ca_file,
            }
        )

        def alter(location: str, listener: str = "ssl") -> None:
            resource = ConfigResource(
                ResourceType.BROKER,
                str(node.node_id),
                incremental_configs=[
                    ConfigEntry(
                        f"listener.name.{listener}.ssl.keystore.location",
                        location,
                        incremental_operation=AlterConfigOpType.SET,
                    )
                ],
            )
            admin.incremental_alter_configs([resource])[resource].result(30)

        with pytest.raises(KafkaException) as refused:
            alter(str(tmp_path / "missing.pem"))
        assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
        assert "ssl.keystore.location" in refused.value.args[0].str()
        assert _served_subject(node.port, ca_file) == "CN=old-broker"
        alter(str(tmp_path / "new.pem"))
        deadline = time.monotonic() + 30
        while _served_subject(node.port, ca_file) != "CN=new-broker":
            assert time.monotonic() < deadline, "the broker kept its old certificate"
            time.sleep(0.2)
        # The other brokers keep theirs: the change was for one broker.
        others = [n for n in c.nodes if n is not node]
        assert {_served_subject(n.port, ca_file) for n in others} == {"CN=old-broker"}
        assert "TLS key and trust stores reloaded" in (node.dir / "node.log").read_text()
        # The controller listener: still the old certificate until its own key changes.
        assert _served_subject(node.controller_port, ca_file) == "CN=old-broker"
        alter(str(tmp_path / "new.pem"), listener="controller")
        deadline = time.monotonic() + 30
        while _served_subject(node.controller_port, ca_file) != "CN=new-broker":
            assert time.monotonic() < deadline, "the controller listener kept its certificate"
            time.sleep(0.2)
        # Raft and the brokers reconnect to it with the new certificate: a commit still works.
        admin.create_topics([NewTopic("after-rotation", 1, 3)])["after-rotation"].result(30)
    finally:
        c.kill()
