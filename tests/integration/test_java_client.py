"""Apache Kafka's own Java client (kafka-clients 4.3) against Odradek's secured listeners:
``java/SecureClient.java`` creates a topic with the AdminClient, produces with an
idempotent acks=all KafkaProducer, consumes in a group with a KafkaConsumer, commits and
describes the group; or checks that a wrong password fails with Kafka's
SaslAuthenticationException. Over SASL_PLAINTEXT with PLAIN, over SSL with a client
certificate required (PKCS12 key and trust stores), and over SASL_SSL with SCRAM-SHA-512
for a user made with AlterUserScramCredentials.

``make java-clients`` (part of ``make test``) fetches the jars into ``.cache/kafka-java``;
without them, or without ``java``, these tests skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, pkcs12

from odradek.cli.certificates import cn, issue, make_ca
from tests.integration.cluster import Cluster

ROOT = Path(__file__).resolve().parents[2]
JARS = Path(os.environ.get("ODRADEK_KAFKA_JARS", ROOT / ".cache" / "kafka-java"))
PROGRAM = Path(__file__).resolve().parent / "java" / "SecureClient.java"
RECORDS = 200
SASL_EXCEPTION = "org.apache.kafka.common.errors.SaslAuthenticationException"
SSL_EXCEPTION = "org.apache.kafka.common.errors.SslAuthenticationException"


def _why_not_runnable() -> str | None:
    if shutil.which("java") is None:
        return "java is not installed"
    if not list(JARS.glob("kafka-clients-*.jar")):
        return f"Kafka's Java client jars are not in {JARS}: `make java-clients` fetches them"
    return None


SKIP_REASON = _why_not_runnable()
pytestmark = [
    pytest.mark.clients,
    pytest.mark.skipif(SKIP_REASON is not None, reason=SKIP_REASON or ""),
]


def plain_jaas(username: str, password: str, users: dict[str, str] | None = None) -> str:
    options = [f'username="{username}"', f'password="{password}"']
    options += [f'user_{name}="{secret}"' for name, secret in (users or {}).items()]
    return f"org.apache.kafka.common.security.plain.PlainLoginModule required {' '.join(options)};"


def scram_jaas(username: str, password: str) -> str:
    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{username}" password="{password}";'
    )


BROKER_USERS = {"broker": "broker-secret", "alice": "alice-secret"}


def sasl_settings(listener: str, mechanisms: str = "PLAIN") -> str:
    jaas = plain_jaas("broker", "broker-secret", BROKER_USERS)
    return (
        f"sasl.enabled.mechanisms={mechanisms}\n"
        "sasl.mechanism.inter.broker.protocol=PLAIN\n"
        f"listener.name.{listener.lower()}.plain.sasl.jaas.config={jaas}\n"
    )


def run_java(
    tmp_path: Path, mode: str, client: dict[str, str], topic: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """Run SecureClient with ``client`` as its properties file; return the finished run."""
    properties = tmp_path / f"{mode}-{uuid.uuid4().hex[:6]}.properties"
    # Java's properties format: ``\`` escapes, so none may appear unescaped.
    properties.write_text(
        "".join(f"{key}={value.replace(chr(92), chr(92) * 2)}\n" for key, value in client.items())
    )
    return subprocess.run(
        ["java", "-cp", f"{JARS}/*", str(PROGRAM), mode, str(properties), topic, *args],
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )


def summary(run: subprocess.CompletedProcess[str]) -> dict[str, object]:
    """The JSON line SecureClient prints last."""
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no summary (exit {run.returncode}):\n{run.stdout}\n{run.stderr[-4000:]}"
    result: dict[str, object] = json.loads(lines[-1])
    return result


def roundtrip(tmp_path: Path, client: dict[str, str], replicas: int) -> dict[str, object]:
    topic = f"java-{uuid.uuid4().hex[:8]}"
    run = run_java(tmp_path, "roundtrip", client, topic, str(RECORDS), str(replicas))
    result = summary(run)
    assert run.returncode == 0, f"{result}\n{run.stderr[-4000:]}"
    return result


EXPECTED_ROUNDTRIP = {
    "produced": RECORDS,
    "consumed": RECORDS,
    "distinct": RECORDS,
    "committed": RECORDS,
    "group": "Stable",
    "members": 1,
}


def assert_login_refused(tmp_path: Path, client: dict[str, str]) -> None:
    run = run_java(tmp_path, "bad-login", client, f"refused-{uuid.uuid4().hex[:8]}")
    assert summary(run) == {"admin": SASL_EXCEPTION, "producer": SASL_EXCEPTION}, run.stderr
    assert run.returncode == 0


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A CA, the brokers' PEM key store, and alice's PKCS12 key store and a PKCS12 trust
    store holding the CA, as Java's KeyStore reads them."""
    root = tmp_path_factory.mktemp("java-pki")
    ca = make_ca()
    broker = issue(ca, cn("broker"))
    alice = issue(ca, cn("alice"), hosts=())
    files = {
        "ca.pem": ca.cert_pem,
        "broker.pem": broker.key_pem() + broker.cert_pem,
        "alice.p12": pkcs12.serialize_key_and_certificates(
            b"alice",
            alice.key,
            alice.certificate,
            [ca.certificate],
            BestAvailableEncryption(b"alice-store-secret"),
        ),
        "truststore.p12": pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(ca.certificate, b"odradek-ca")],
            BestAvailableEncryption(b"trust-secret"),
        ),
    }
    for name, data in files.items():
        (root / name).write_bytes(data)
    return {name: root / name for name in files}


def broker_tls(pki: dict[str, Path]) -> str:
    return (
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={pki['broker.pem']}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={pki['ca.pem']}\n"
    )


def java_truststore(pki: dict[str, Path]) -> dict[str, str]:
    return {
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(pki["truststore.p12"]),
        "ssl.truststore.password": "trust-secret",
    }


@contextmanager
def started(cluster: Cluster) -> Iterator[Cluster]:
    """The cluster running; killed afterwards (a clean stop is tested elsewhere and
    costs seconds of controlled shutdown per node)."""
    try:
        cluster.start()
        yield cluster
    finally:
        for node in cluster.everyone:
            node.kill()


@pytest.fixture
def sasl_plaintext_cluster(tmp_path: Path) -> Iterator[Cluster]:
    listener = "SASL_PLAINTEXT"
    with started(
        Cluster(tmp_path / "cluster", 3, sasl_settings(listener), broker_protocol=listener)
    ) as cluster:
        yield cluster


def test_java_client_over_sasl_plaintext_with_plain(
    sasl_plaintext_cluster: Cluster, tmp_path: Path
) -> None:
    client = {
        "bootstrap.servers": sasl_plaintext_cluster.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": plain_jaas("alice", "alice-secret"),
    }
    assert roundtrip(tmp_path, client, replicas=3) == EXPECTED_ROUNDTRIP
    assert_login_refused(
        tmp_path, {**client, "sasl.jaas.config": plain_jaas("alice", "not-her-password")}
    )


def test_java_client_over_mutual_tls_with_pkcs12_stores(
    pki: dict[str, Path], tmp_path: Path
) -> None:
    cluster = Cluster(
        tmp_path / "cluster", 2, broker_tls(pki) + "ssl.client.auth=required\n",
        broker_protocol="SSL",
    )  # fmt: skip
    with started(cluster) as c:
        client = {
            "bootstrap.servers": c.bootstrap,
            "security.protocol": "SSL",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(pki["alice.p12"]),
            "ssl.keystore.password": "alice-store-secret",
            **java_truststore(pki),
        }
        assert roundtrip(tmp_path, client, replicas=2) == EXPECTED_ROUNDTRIP
        # Without a certificate the handshake is refused with a TLS alert, and the Java
        # client fails at once (a bare close made it retry until its timeouts).
        anonymous = {k: v for k, v in client.items() if not k.startswith("ssl.keystore.")}
        run = run_java(tmp_path, "bad-login", anonymous, "no-certificate", SSL_EXCEPTION)
        assert summary(run) == {"admin": SSL_EXCEPTION, "producer": SSL_EXCEPTION}, run.stderr
        assert run.returncode == 0


def _scram_login_works(bootstrap: str, ca: Path, user: str, password: str) -> bool:
    admin = AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "sasl_ssl",
            "ssl.ca.location": str(ca),
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": password,
        }
    )
    try:
        admin.list_topics(timeout=5)
    except KafkaException:
        return False
    return True


def test_java_client_over_sasl_ssl_with_scram_sha_512(pki: dict[str, Path], tmp_path: Path) -> None:
    listener = "SASL_SSL"
    cluster = Cluster(
        tmp_path / "cluster", 2, sasl_settings(listener, "PLAIN,SCRAM-SHA-512") + broker_tls(pki),
        broker_protocol=listener,
    )  # fmt: skip
    with started(cluster) as c:
        # The SCRAM user, made over a PLAIN login with AlterUserScramCredentials.
        admin = AdminClient(
            {
                "bootstrap.servers": c.bootstrap,
                "security.protocol": "sasl_ssl",
                "ssl.ca.location": str(pki["ca.pem"]),
                "sasl.mechanism": "PLAIN",
                "sasl.username": "alice",
                "sasl.password": "alice-secret",
            }
        )
        upsert = UserScramCredentialUpsertion(
            "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"carol-secret"
        )
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(30)
        # Every broker learns the credential from the metadata log; wait until each
        # accepts the login before the Java client, which does not retry a refusal, tries.
        deadline = time.monotonic() + 30
        pending = list(c.nodes)
        while pending and time.monotonic() < deadline:
            pending = [
                n
                for n in pending
                if not _scram_login_works(n.bootstrap, pki["ca.pem"], "carol", "carol-secret")
            ]
        assert not pending, f"nodes {[n.node_id for n in pending]} refuse carol's SCRAM login"

        client = {
            "bootstrap.servers": c.bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": scram_jaas("carol", "carol-secret"),
            **java_truststore(pki),
        }
        assert roundtrip(tmp_path, client, replicas=2) == EXPECTED_ROUNDTRIP
        assert_login_refused(
            tmp_path, {**client, "sasl.jaas.config": scram_jaas("carol", "not-her-password")}
        )
