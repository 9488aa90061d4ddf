"""The authorizer on a three-node SASL cluster with real clients: ACLs written with an
admin client reach every node from the metadata log; a principal without the ACL for an
API is refused with Kafka's error and sees no topic it may not describe; a DENY wins; a
client posing as a follower or as a node on the controller listener is refused; the ACLs
survive a restart of every node."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from confluent_kafka.admin import AclBindingFilter as _AclBindingFilter

from odradek.protocol.api import Body
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    BrokerHeartbeatRequest,
    DescribeClusterRequest,
    DescribeQuorumRequest,
    FetchRequest,
    RemoveRaftVoterRequest,
)
from odradek.protocol.messages import describe_quorum_request as dq
from odradek.protocol.messages import fetch_request as fr
from odradek.security.sasl_keys import ClientCredentials
from odradek.shell.peer_client import ClientSecurity, PeerConnection
from tests.integration.cluster import Cluster

# confluent-kafka's hints say str where None (match anything) is what it takes.
AclBindingFilter: Any = _AclBindingFilter

USERS = 'user_admin="admin-secret" user_alice="alice-secret" user_broker="broker-secret"'
BROKER_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="broker" password="broker-secret" {USERS};'
)
CONTROLLER_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="broker" password="broker-secret" {USERS};'
)
SETTINGS = (
    "sasl.enabled.mechanisms=PLAIN\n"
    "sasl.mechanism.inter.broker.protocol=PLAIN\n"
    "sasl.mechanism.controller.protocol=PLAIN\n"
    f"listener.name.sasl_plaintext.plain.sasl.jaas.config={BROKER_JAAS}\n"
    f"listener.name.controller.plain.sasl.jaas.config={CONTROLLER_JAAS}\n"
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
    "super.users=User:admin;User:broker\n"
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(
        tmp_path_factory.mktemp("authz"), extra=SETTINGS, broker_protocol="SASL_PLAINTEXT",
        controller_protocol="SASL_PLAINTEXT",
    )  # fmt: skip
    c.start()
    admin = AdminClient(login(c, "admin"))
    for topic in ("alice-orders", "secret"):
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])[
            topic
        ].result(30)
    yield c
    c.kill()


def login(cluster: Cluster, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": cluster.bootstrap,
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": f"{user}-secret",
    }


def allow(
    resource: ResourceType, name: str, operation: AclOperation,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> AclBinding:  # fmt: skip
    return AclBinding(resource, name, pattern, "User:alice", "*", operation, permission)


def produce(cluster: Cluster, topic: str, count: int = 10) -> list[KafkaError | None]:
    producer = Producer({**login(cluster, "alice"), "acks": "all", "message.timeout.ms": 10_000})
    results: list[KafkaError | None] = []
    for i in range(count):
        producer.produce(topic, f"m{i}".encode(), on_delivery=lambda e, _: results.append(e))
    producer.flush(30)
    return results


def until(check: Any, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.5)


def test_a_principal_without_acls_sees_nothing_and_may_do_nothing(cluster: Cluster) -> None:
    alice = AdminClient(login(cluster, "alice"))
    assert set(alice.list_topics(timeout=10).topics) == set()
    named = alice.list_topics("secret", timeout=10).topics["secret"]
    assert named.error is not None and named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    errors = produce(cluster, "alice-orders", 1)
    assert errors and errors[0] is not None
    assert errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    cluster_view = alice.describe_cluster().result(10)
    assert cluster_view.nodes  # librdkafka answers it from Metadata, which any client may
    created = alice.create_topics([NewTopic("alice-new", 1, 1)])["alice-new"]
    with pytest.raises(KafkaException) as no_create:
        created.result(10)
    assert no_create.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException):
        alice.create_acls([allow(ResourceType.TOPIC, "*", AclOperation.ALL)])[
            allow(ResourceType.TOPIC, "*", AclOperation.ALL)
        ].result(10)


def test_acls_grant_what_they_name_on_every_node_and_a_deny_wins(cluster: Cluster) -> None:
    admin = AdminClient(login(cluster, "admin"))
    grants = [
        allow(ResourceType.TOPIC, "alice-", AclOperation.WRITE, ResourcePatternType.PREFIXED),
        allow(ResourceType.TOPIC, "alice-", AclOperation.READ, ResourcePatternType.PREFIXED),
        allow(ResourceType.GROUP, "alice-", AclOperation.READ, ResourcePatternType.PREFIXED),
    ]
    for future in admin.create_acls(grants).values():
        future.result(30)
    alice_filter = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    # DescribeAcls is answered from the node's own image, which follows the controller's
    # commit by a moment (in Kafka too): wait until the node asked has applied them.
    assert until(
        lambda: (
            sorted(str(b) for b in admin.describe_acls(alice_filter).result(30))
            == sorted(str(b) for b in grants)
        )
    )
    # Every node applies the ACLs from the metadata log; the producer may go to any.
    assert until(lambda: produce(cluster, "alice-orders") == [None] * 10)
    alice = AdminClient(login(cluster, "alice"))
    assert set(alice.list_topics(timeout=10).topics) == {"alice-orders"}
    consumer = Consumer(
        {**login(cluster, "alice"), "group.id": "alice-group", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe(["alice-orders"])
    seen = 0
    deadline = time.monotonic() + 30
    while seen < 10 and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            seen += 1
    consumer.commit(asynchronous=False)
    consumer.close()
    assert seen >= 10
    # A group it may not read.
    other = Consumer({**login(cluster, "alice"), "group.id": "bobs-group"})
    other.subscribe(["alice-orders"])
    failure = None
    deadline = time.monotonic() + 20
    while failure is None and time.monotonic() < deadline:
        message = other.poll(0.5)
        if message is not None and message.error() is not None:
            failure = message.error()
    other.close()
    assert failure is not None and failure.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    # A DENY on the one topic wins over the prefixed ALLOW.
    deny = allow(
        ResourceType.TOPIC, "alice-orders", AclOperation.WRITE,
        permission=AclPermissionType.DENY,
    )  # fmt: skip
    admin.create_acls([deny])[deny].result(30)
    assert until(lambda: produce(cluster, "alice-orders", 1)[0] is not None)
    deny_filter = AclBindingFilter(
        ResourceType.TOPIC, "alice-orders", ResourcePatternType.LITERAL, "User:alice", "*",
        AclOperation.WRITE, AclPermissionType.DENY,
    )  # fmt: skip
    assert admin.delete_acls([deny_filter])[deny_filter].result(30) == [deny]
    assert until(lambda: produce(cluster, "alice-orders", 1) == [None])


def _alice(port: int) -> PeerConnection:
    credentials = ClientCredentials("PLAIN", "alice", "alice-secret")
    return PeerConnection("127.0.0.1", port, "alice", 5, ClientSecurity(sasl=credentials))


def test_posing_as_a_follower_or_as_a_node_is_refused(cluster: Cluster) -> None:
    node = cluster.nodes[0]

    async def attempts() -> list[int]:
        broker = _alice(node.port)
        fetch = FetchRequest(
            replica_id=2,
            max_wait_ms=0,
            topics=[fr.FetchTopic(topic="secret", partitions=[fr.FetchPartition(partition=0)])],
        )
        follower = await broker.request(fetch, 12, 10)
        described = await broker.request(DescribeClusterRequest(), 0, 10)
        await broker.close()
        controller = _alice(node.controller_port)
        answers = [follower.error_code, described.error_code]
        calls: list[tuple[Body, int]] = [
            (
                DescribeQuorumRequest(
                    topics=[
                        dq.TopicData(
                            topic_name="__cluster_metadata",
                            partitions=[dq.PartitionData(partition_index=0)],
                        )
                    ]
                ),
                2,
            ),
            (
                RemoveRaftVoterRequest(cluster_id="x", voter_id=2, voter_directory_id=uuid.uuid4()),
                0,
            ),
            (BrokerHeartbeatRequest(broker_id=2, broker_epoch=1), 1),
        ]
        for body, version in calls:
            answer = await controller.request(body, version, 10)
            answers.append(answer.error_code)
        await controller.close()
        return answers

    assert asyncio.run(attempts()) == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED] * 5
    log = (node.dir / "node.log").read_text()
    assert "refused RemoveRaftVoter from" in log and "User:alice" in log


def test_acls_survive_a_restart_of_every_node(cluster: Cluster) -> None:
    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
        AclPermissionType.ANY,
    )  # fmt: skip
    # What the earlier test left: its three grants (the DENY it removed is gone). Each
    # node answers from its own image, so wait until the one asked has it all.
    expected = sorted(
        str(b)
        for b in [
            allow(ResourceType.TOPIC, "alice-", AclOperation.WRITE, ResourcePatternType.PREFIXED),
            allow(ResourceType.TOPIC, "alice-", AclOperation.READ, ResourcePatternType.PREFIXED),
            allow(ResourceType.GROUP, "alice-", AclOperation.READ, ResourcePatternType.PREFIXED),
        ]
    )
    admin = AdminClient(login(cluster, "admin"))
    assert until(
        lambda: sorted(str(b) for b in admin.describe_acls(everything).result(30)) == expected
    )
    cluster.kill()  # kill -9: what is committed must be there after any restart
    cluster.start()
    # A restarted node serves only once it has caught up with the metadata log.
    after_admin = AdminClient(login(cluster, "admin"))
    after = sorted(str(b) for b in after_admin.describe_acls(everything).result(30))
    assert after == expected
    assert until(lambda: produce(cluster, "alice-orders", 1) == [None])
