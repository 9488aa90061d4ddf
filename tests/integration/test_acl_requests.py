"""ACLs on three combined nodes: created, described and deleted by AdminClient through a
node that is not the active controller (forwarded, KIP-590), held by every node's
metadata image, and the same after every node restarts (they are in the metadata log).

DescribeAcls is also sent straight to each node over a socket, because a client picks
one broker of its own choosing: only that shows what each node holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from odradek.protocol.messages import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsResponse,
)
from odradek.protocol.messages.create_acls_request import AclCreation
from odradek.protocol.messages.delete_acls_request import DeleteAclsFilter
from tests.broker.test_acl_requests import Acl, described, every_acl
from tests.integration.cluster import Cluster, ClusterNode, ask, wait_everywhere

# (resource type, name, pattern type, principal, host, operation, permission), Kafka's ids.

# confluent-kafka's stubs type a filter's name, principal and host as str, but None is
# what matches any (its documentation): called untyped here.
_Filter: Any = AclBindingFilter

EVERYTHING = _Filter(
    ResourceType.ANY,
    None,
    ResourcePatternType.ANY,
    None,
    None,
    AclOperation.ANY,
    AclPermissionType.ANY,
)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    # PLAINTEXT: every client, the nodes included, is User:ANONYMOUS, here a super user.
    c = Cluster(
        tmp_path,
        3,
        extra="authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "super.users=User:ANONYMOUS\n",
    )
    c.start()
    yield c
    c.kill()


def as_tuple(binding: AclBinding) -> Acl:
    b: Any = binding  # its enum fields are typed as unions with str and int
    return (
        b.restype.value,
        b.name,
        b.resource_pattern_type.value,
        b.principal,
        b.host,
        b.operation.value,
        b.permission_type.value,
    )


def listing(node: ClusterNode) -> set[Acl]:
    """Every ACL ``node`` holds, from a DescribeAcls sent to it alone."""
    body = ask(node, every_acl(), 1)
    assert isinstance(body, DescribeAclsResponse)
    return set(described(body))


def test_acls_created_and_deleted_through_any_node_reach_every_node_and_persist(
    cluster: Cluster,
) -> None:
    wait_everywhere(cluster, listing, set[Acl]())
    leader = cluster.controller_leader()
    follower = next(n for n in cluster.nodes if n.node_id != leader)
    client = AdminClient({"bootstrap.servers": follower.bootstrap})

    alice_reads = AclBinding(
        ResourceType.TOPIC,
        "orders",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    bob_denied = AclBinding(
        ResourceType.TOPIC,
        "pay",
        ResourcePatternType.PREFIXED,
        "User:bob",
        "10.0.0.1",
        AclOperation.WRITE,
        AclPermissionType.DENY,
    )
    bob_group = AclBinding(
        ResourceType.GROUP,
        "billing",
        ResourcePatternType.LITERAL,
        "User:bob",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    admin_alters = AclBinding(
        ResourceType.BROKER,  # confluent-kafka's name for the cluster resource
        "kafka-cluster",
        ResourcePatternType.LITERAL,
        "User:admin",
        "*",
        AclOperation.ALTER,
        AclPermissionType.ALLOW,
    )
    wrong_cluster = AclBinding(
        ResourceType.BROKER,
        "my-cluster",
        ResourcePatternType.LITERAL,
        "User:admin",
        "*",
        AclOperation.ALTER,
        AclPermissionType.ALLOW,
    )
    created = [alice_reads, bob_denied, bob_group, admin_alters]
    futures = client.create_acls([*created, wrong_cluster])
    for binding in created:
        assert futures[binding].result(timeout=30) is None
    with pytest.raises(KafkaException) as refused:
        futures[wrong_cluster].result(timeout=30)
    assert "kafka-cluster" in str(refused.value)
    # The same binding again succeeds and adds nothing.
    assert client.create_acls([alice_reads])[alice_reads].result(timeout=30) is None
    everything = {as_tuple(b) for b in created}
    wait_everywhere(cluster, listing, everything)

    described = client.describe_acls(EVERYTHING).result(timeout=30)
    assert {as_tuple(b) for b in described} == everything
    matching = _Filter(
        ResourceType.TOPIC,
        "payments",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert [as_tuple(b) for b in client.describe_acls(matching).result(timeout=30)] == [
        as_tuple(bob_denied)
    ]

    # Straight to a node that is not the active controller: it must forward the write.
    carol: Acl = (2, "audit", 3, "User:carol", "*", 8, 3)  # ALLOW DESCRIBE on topic audit
    response = ask(
        follower,
        CreateAclsRequest(
            creations=[
                AclCreation(
                    resource_type=carol[0],
                    resource_name=carol[1],
                    resource_pattern_type=carol[2],
                    principal=carol[3],
                    host=carol[4],
                    operation=carol[5],
                    permission_type=carol[6],
                )
            ]
        ),
        1,
    )
    assert isinstance(response, CreateAclsResponse)
    assert [(r.error_code, r.error_message) for r in response.results] == [(0, None)]
    wait_everywhere(cluster, listing, everything | {carol})
    response = ask(
        follower,
        DeleteAclsRequest(
            filters=[
                DeleteAclsFilter(
                    resource_type_filter=1,
                    resource_name_filter=None,
                    pattern_type_filter=1,
                    principal_filter="User:carol",
                    host_filter=None,
                    operation=1,
                    permission_type=1,
                )
            ]
        ),
        1,
    )
    assert isinstance(response, DeleteAclsResponse)
    [result] = response.filter_results
    assert result.error_code == 0
    assert [(m.resource_name, m.principal) for m in result.matching_acls] == [(carol[1], carol[3])]
    wait_everywhere(cluster, listing, everything)

    bob = _Filter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        "User:bob",
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    deleted = client.delete_acls([bob])[bob].result(timeout=30)
    assert {as_tuple(b) for b in deleted} == {as_tuple(bob_denied), as_tuple(bob_group)}
    remaining = {as_tuple(alice_reads), as_tuple(admin_alters)}
    wait_everywhere(cluster, listing, remaining)

    # Every node restarts: the ACLs come back from the metadata log alone.
    cluster.kill()  # kill -9: what is committed must be there after any restart
    cluster.start()
    wait_everywhere(cluster, listing, remaining)
    client = AdminClient({"bootstrap.servers": cluster.bootstrap})
    after = client.describe_acls(EVERYTHING).result(timeout=30)
    assert {as_tuple(b) for b in after} == remaining
