"""SCRAM credentials on three combined nodes: from ``storage format --add-scram`` to
every node's metadata, changed by AdminClient through a node that is not the active
controller (forwarded, KIP-590), and the same after a restart.

DescribeUserScramCredentials is also sent straight to each node over a socket, because
a client picks one broker of its own choosing: only that shows what each node holds.
"""

from __future__ import annotations

import socket
import struct
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

from odradek.protocol.api import RequestHeader, decode_response, encode_request
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
from tests.integration.cluster import Cluster, ClusterNode

ADMIN = "SCRAM-SHA-512=[name=admin,password=admin-secret]"
Listing = dict[str, list[tuple[int, int]]]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, 3, format_args=["--add-scram", ADMIN])
    c.start()
    yield c
    c.kill()


def _call(node: ClusterNode, request: object, api_key: int) -> object:
    header = RequestHeader(
        request_api_key=api_key, request_api_version=0, correlation_id=1, client_id="test"
    )
    payload = encode_request(header, request)  # type: ignore[arg-type]
    with socket.create_connection(("127.0.0.1", node.port), timeout=30) as conn:
        conn.sendall(struct.pack(">i", len(payload)) + payload)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = conn.recv(65536)
            assert chunk, "the node closed the connection"
            data += chunk
    _, body = decode_response(data[4:], api_key, 0)
    return body


def listing(node: ClusterNode) -> Listing:
    """Every user with a credential on ``node``: mechanism types and iterations."""
    response = _call(
        node,
        DescribeUserScramCredentialsRequest(users=None),
        DescribeUserScramCredentialsRequest.API_KEY,
    )
    assert isinstance(response, DescribeUserScramCredentialsResponse)
    assert response.error_code == 0
    return {
        r.user: sorted((c.mechanism, c.iterations) for c in r.credential_infos)
        for r in response.results
    }


def wait_everywhere(cluster: Cluster, expected: Listing) -> None:
    for node in cluster.nodes:
        deadline = time.monotonic() + 15
        while (seen := listing(node)) != expected:
            assert time.monotonic() < deadline, f"node {node.node_id} lists {seen}"
            time.sleep(0.2)


def test_add_scram_credentials_reach_every_node_change_through_any_node_and_persist(
    cluster: Cluster,
) -> None:
    # Formatted on every controller, appended once by the first active one.
    wait_everywhere(cluster, {"admin": [(2, 4096)]})
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
    response = _call(
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
        AlterUserScramCredentialsRequest.API_KEY,
    )
    assert isinstance(response, AlterUserScramCredentialsResponse)
    assert [(r.user, r.error_code) for r in response.results] == [("bob", 0)]
    # The bootstrap credential can be deleted like any other.
    futures = client.alter_user_scram_credentials(
        [UserScramCredentialDeletion("admin", ScramMechanism.SCRAM_SHA_512)]
    )
    futures["admin"].result(timeout=30)
    expected = {"alice": [(1, 8192)], "bob": [(2, 4096)]}
    wait_everywhere(cluster, expected)

    # After a restart the log still holds records, so whichever controller becomes
    # active does not append the bootstrap credential again: admin stays deleted.
    cluster.kill()  # kill -9: what is committed must be there after any restart
    cluster.start()
    wait_everywhere(cluster, expected)
    time.sleep(1)  # a late bootstrap append would show up by now
    wait_everywhere(cluster, expected)
