"""SCRAM credentials on three combined nodes: from ``storage format --add-scram`` to
every node's metadata, changed by AdminClient through a node that is not the active
controller (forwarded, KIP-590), and the same after a restart.

DescribeUserScramCredentials is also sent straight to each node over a socket, because
a client picks one broker of its own choosing: only that shows what each node holds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from odradek.protocol.messages import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from odradek.protocol.messages.alter_user_scram_credentials_request import (
    ScramCredentialUpsertion,
)
from odradek.security import scram
from tests.integration.cluster import Cluster, ClusterNode, ask, wait_everywhere

ADMIN = "SCRAM-SHA-512=[name=admin,password=admin-secret]"
Listing = dict[str, list[tuple[int, int]]]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, 3, format_args=["--add-scram", ADMIN])
    c.start()
    yield c
    c.kill()


def listing(node: ClusterNode) -> Listing:
    """Every user with a credential on ``node``: mechanism types and iterations."""
    response = ask(
        node,
        DescribeUserScramCredentialsRequest(users=None),
        0,
    )
    assert isinstance(response, DescribeUserScramCredentialsResponse)
    assert response.error_code == 0
    return {
        r.user: sorted((c.mechanism, c.iterations) for c in r.credential_infos)
        for r in response.results
    }


def test_add_scram_credentials_reach_every_node_change_through_any_node_and_persist(
    cluster: Cluster,
) -> None:
    # Formatted on every controller, appended once by the first active one.
    wait_everywhere(cluster, listing, {"admin": [(2, 4096)]})
    admin_client = AdminClient({"bootstrap.servers": cluster.bootstrap})
    everyone = admin_client.describe_user_scram_credentials()
    assert isinstance(everyone, Future)  # no user names: one future for the whole answer
    described = everyone.result(timeout=30)
    assert [(i.mechanism, i.iterations) for i in described["admin"].scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 4096)
    ]

    leader = cluster.controller_leader()
    follower = next(n for n in cluster.nodes if n.node_id != leader)
    client = AdminClient({"bootstrap.servers": follower.bootstrap})
    futures = client.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(
                "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"alice-secret"
            )
        ]
    )
    futures["alice"].result(timeout=30)
    # Straight to a node that is not the active controller: it must forward the write.
    mechanism = scram.MECHANISMS["SCRAM-SHA-512"]
    salt = b"bob's salt, 16+b"
    response = ask(
        follower,
        AlterUserScramCredentialsRequest(
            upsertions=[
                ScramCredentialUpsertion(
                    name="bob",
                    mechanism=mechanism.kafka_type,
                    iterations=4096,
                    salt=salt,
                    salted_password=scram.salted_password(mechanism, "bob-secret", salt, 4096),
                )
            ]
        ),
        0,
    )
    assert isinstance(response, AlterUserScramCredentialsResponse)
    assert [(r.user, r.error_code) for r in response.results] == [("bob", 0)]
    # The bootstrap credential can be deleted like any other.
    futures = client.alter_user_scram_credentials(
        [UserScramCredentialDeletion("admin", ScramMechanism.SCRAM_SHA_512)]
    )
    futures["admin"].result(timeout=30)
    expected = {"alice": [(1, 8192)], "bob": [(2, 4096)]}
    wait_everywhere(cluster, listing, expected)

    # After a restart the log still holds records, so whichever controller becomes
    # active does not append the bootstrap credential again: admin stays deleted.
    cluster.kill()  # kill -9: what is committed must be there after any restart
    cluster.start()
    wait_everywhere(cluster, listing, expected)
    time.sleep(1)  # a late bootstrap append would show up by now
    wait_everywhere(cluster, listing, expected)
