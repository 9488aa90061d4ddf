"""SASL/OAUTHBEARER with real clients: a three-node cluster whose SASL_PLAINTEXT broker
listener takes unsecured tokens (followers log in with the node's own unsecured token,
librdkafka with its built-in one, kafka-python with a token provider), and a one-node
cluster that takes tokens signed with a key of a JWKS file (confluent-kafka's
``oauth_cb``), refusing expired, badly signed and unsigned ones."""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from odradek.security.oauthbearer import JWKS_VALIDATOR, unsecured_token
from tests.integration.cluster import Cluster, odradek
from tests.integration.roundtrips import aiokafka_roundtrip, kcat_roundtrip

LISTENER = "SASL_PLAINTEXT"
PREFIX = f"listener.name.{LISTENER.lower()}"
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
ISSUER = "https://idp.example"


def _produce_and_consume(config: dict[str, Any], topic: str, count: int = 50) -> None:
    producer = Producer({**config, "acks": "all"})
    errors: list[object] = []
    for i in range(count):
        producer.produce(topic, f"v{i}".encode(), on_delivery=lambda e, _: errors.append(e))
        producer.poll(0)
    assert producer.flush(60) == 0
    assert errors == [None] * count
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 60
    while len(seen) < count and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            seen.add(bytes(message.value() or b""))
    consumer.close()
    assert seen == {f"v{i}".encode() for i in range(count)}


def _authentication_refused(config: dict[str, Any]) -> KafkaError:
    failures: list[KafkaError] = []
    producer = Producer({**config, "error_cb": failures.append})
    deadline = time.monotonic() + 20
    while not failures and time.monotonic() < deadline:
        producer.poll(0.2)
    assert failures, "no error reported"
    with pytest.raises(KafkaException):
        producer.list_topics(timeout=2)
    return failures[0]


# ----------------------------------------------------------------- unsecured


@pytest.fixture(scope="module")
def unsecured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    extra = (
        "sasl.enabled.mechanisms=OAUTHBEARER\n"
        "sasl.mechanism.inter.broker.protocol=OAUTHBEARER\n"
        f"{PREFIX}.oauthbearer.sasl.jaas.config={MODULE} required "
        'unsecuredLoginStringClaim_sub="broker";\n'
    )
    c = Cluster(tmp_path_factory.mktemp("oauth-unsecured"), extra=extra, broker_protocol=LISTENER)
    c.start()
    yield c
    c.kill()


def _unsecured_config(cluster: Cluster, principal: str = "alice") -> dict[str, Any]:
    return {
        "bootstrap.servers": cluster.bootstrap,
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": f"principal={principal}",
    }


def test_librdkafka_unsecured_token_produces_and_consumes_with_followers_in_sync(
    unsecured: Cluster,
) -> None:
    topic = f"oauth-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(_unsecured_config(unsecured))
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=3)])[topic].result(30)
    _produce_and_consume(_unsecured_config(unsecured), topic)
    # The followers log in to the leaders with the nodes' own unsecured tokens.
    deadline = time.monotonic() + 30
    while True:
        partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
        isrs = {p.id: sorted(p.isrs) for p in partitions.values()}
        if all(len(i) == 3 for i in isrs.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert isrs == {0: [1, 2, 3], 1: [1, 2, 3]}


def test_kafka_python_logs_in_with_an_unsecured_token(unsecured: Cluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            return unsecured_token("carol", 600, time.time())

    login: dict[str, Any] = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": Provider(),
    }
    topic = f"oauth-py-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(_unsecured_config(unsecured))
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])[topic].result(30)
    producer = KafkaProducer(bootstrap_servers=unsecured.bootstrap, acks="all", **login)
    for i in range(5):
        producer.send(topic, f"kp{i}".encode()).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=unsecured.bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
        **login,
    )
    expected = [f"kp{i}".encode() for i in range(5)]
    # As many as were sent (not until 10 s of silence), then nothing more.
    assert [m.value for _, m in zip(expected, consumer, strict=False)] == expected
    assert not any(consumer.poll(timeout_ms=500).values())
    consumer.close()


def test_aiokafka_logs_in_with_an_unsecured_token_and_consumes_in_a_group(
    unsecured: Cluster,
) -> None:
    from aiokafka.abc import AbstractTokenProvider

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        async def token(self) -> str:
            return unsecured_token("erin", 600, time.time())

    def login() -> dict[str, Any]:
        return {
            "bootstrap_servers": unsecured.bootstrap,
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "OAUTHBEARER",
            "sasl_oauth_token_provider": Provider(),
        }

    aiokafka_roundtrip(login, "oauth-aio")


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is installed by make kcat")
def test_kcat_logs_in_with_librdkafkas_unsecured_token(unsecured: Cluster) -> None:
    # The unsecured validator takes librdkafka's token as it is: a sub, iat and exp
    # (lifeSeconds, an hour), no scope required.
    login = [
        "-b", unsecured.bootstrap, "-X", "security.protocol=SASL_PLAINTEXT",
        "-X", "sasl.mechanisms=OAUTHBEARER", "-X", "enable.sasl.oauthbearer.unsecure.jwt=true",
        "-X", "sasl.oauthbearer.config=principal=frank",
    ]  # fmt: skip
    kcat_roundtrip(login, _unsecured_config(unsecured), "oauth-kcat")


# ----------------------------------------------------------------- JWKS


@pytest.fixture(scope="module")
def signing_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def signed(
    tmp_path_factory: pytest.TempPathFactory, signing_key: rsa.RSAPrivateKey
) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("oauth-jwks")
    jwks = root / "jwks.json"
    public = json.loads(RSAAlgorithm.to_jwk(signing_key.public_key()))
    jwks.write_text(json.dumps({"keys": [{**public, "kid": "k1", "alg": "RS256", "use": "sig"}]}))
    extra = (
        "sasl.enabled.mechanisms=PLAIN,OAUTHBEARER\n"
        "sasl.mechanism.inter.broker.protocol=PLAIN\n"
        f"{PREFIX}.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
        'required username="broker" password="broker-secret" user_broker="broker-secret";\n'
        f"{PREFIX}.oauthbearer.sasl.jaas.config={MODULE} required;\n"
        f"{PREFIX}.oauthbearer.sasl.server.callback.handler.class={JWKS_VALIDATOR}\n"
        f"sasl.oauthbearer.jwks.endpoint.url={jwks.as_uri()}\n"
        "sasl.oauthbearer.expected.audience=kafka\n"
        f"sasl.oauthbearer.expected.issuer={ISSUER}\n"
    )
    c = Cluster(root / "cluster", size=1, extra=extra, broker_protocol=LISTENER)
    c.start()
    yield c
    c.kill()


def _token(key: Any, *, exp_in: int = 600, **claims: Any) -> str:
    now = int(time.time())
    body = {"sub": "alice", "aud": "kafka", "iss": ISSUER, "iat": now, "exp": now + exp_in}
    return jwt.encode({**body, **claims}, key, algorithm="RS256", headers={"kid": "k1"})


def _signed_config(cluster: Cluster, token: Callable[[], str]) -> dict[str, Any]:
    def oauth_cb(_config: str) -> tuple[str, float, str]:
        # The expiry told to librdkafka is always ahead, so that it sends the token.
        return token(), time.time() + 300, "alice"

    return {
        "bootstrap.servers": cluster.bootstrap,
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": oauth_cb,
    }


def test_a_signed_token_produces_and_consumes(
    signed: Cluster, signing_key: rsa.RSAPrivateKey
) -> None:
    config = _signed_config(signed, lambda: _token(signing_key))
    topic = f"oauth-jwks-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(config)
    # confluent-kafka serves oauth_cb from poll(): with 2.12.2 an AdminClient does not
    # log in before one, and its first request waits for a token that never comes.
    admin.poll(1)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    _produce_and_consume(config, topic)


@pytest.mark.parametrize("kind", ["expired", "bad-signature", "wrong-audience"])
def test_bad_signed_tokens_are_refused(
    signed: Cluster, signing_key: rsa.RSAPrivateKey, kind: str
) -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    token = {
        "expired": lambda: _token(signing_key, exp_in=-300),
        "bad-signature": lambda: _token(other),
        "wrong-audience": lambda: _token(signing_key, aud="elsewhere"),
    }[kind]
    failure = _authentication_refused(_signed_config(signed, token))
    assert failure.code() == KafkaError._AUTHENTICATION, failure


def test_an_unsecured_token_is_refused_where_tokens_must_be_signed(signed: Cluster) -> None:
    failure = _authentication_refused(_unsecured_config(signed))
    assert failure.code() == KafkaError._AUTHENTICATION, failure
    log = (signed.nodes[0].dir / "node.log").read_text()
    assert "failed authentication" in log and "alg none" in log


def test_odradek_commands_log_in_with_an_unsecured_token(
    unsecured: Cluster, tmp_path: Path
) -> None:
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
        f'sasl.jaas.config={MODULE} required unsecuredLoginStringClaim_sub="admin";\n'
    )
    health = odradek(
        "cluster", "health", "--bootstrap-server", unsecured.bootstrap,
        "--command-config", str(config), "--json", check=False,
    )  # fmt: skip
    assert health.returncode == 0, health.stdout + health.stderr
    assert json.loads(health.stdout)["healthy"] is True
