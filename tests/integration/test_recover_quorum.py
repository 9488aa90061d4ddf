"""Quorum-loss recovery on real processes: the seed's procedure end to end.

Three controllers and two brokers (separate roles) under a light acks=all load, with the
authorizer on. ACLs, SCRAM credentials and client quotas are created first; then the
active controller is killed, and its successor must answer them from its own image and
take a new ACL. Then two controllers are killed with SIGKILL and their disks deleted:
the quorum stalls and the alarm says so. Then, as an operator would: survey, plan, apply
on the surviving controller (copying a broker's log if the plan says so), restart it
alone, and add two controllers on fresh disks. The cluster serves clients again (a new
topic can be created), every acknowledged record is there, every node (and, after one
more failover, a controller that came on a fresh disk) answers exactly the ACLs, SCRAM
credentials and quotas that were created, and the audit record says what was done.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol.api import RequestHeader, decode_response, encode_request
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    CreateAclsRequest,
    CreateAclsResponse,
    DescribeAclsResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    EnvelopeRequest,
    EnvelopeResponse,
)
from odradek.protocol.messages import alter_client_quotas_request as quota_request
from odradek.protocol.messages.alter_user_scram_credentials_request import (
    ScramCredentialUpsertion,
)
from odradek.protocol.messages.create_acls_request import AclCreation
from odradek.security import scram
from odradek.security.principal import ANONYMOUS, serialize_principal
from tests.broker.test_acl_requests import Acl, described, every_acl
from tests.integration.cluster import (
    CLUSTER_ID,
    Cluster,
    ClusterNode,
    ask,
    odradek,
    wait_everywhere,
)
from tests.integration.workload import Writer

SNAPSHOTS = "metadata.log.max.snapshot.interval.ms=1000"
SETTINGS = (
    "broker.session.timeout.ms=3000\n"
    "broker.heartbeat.interval.ms=300\n"
    "controller.quorum.election.timeout.ms=500\n"
    "controller.quorum.fetch.timeout.ms=1000\n"
    "metadata.quorum.stall.alarm.ms=2000\n"
    # CreateAcls needs an authorizer (without one it is SECURITY_DISABLED). On PLAINTEXT
    # every client, the nodes and the odradek commands included, is User:ANONYMOUS:
    # a super user here, so that the ACLs the test creates refuse nothing it does.
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
    "super.users=User:ANONYMOUS\n"
    # Every node writes a metadata snapshot about every second, and its log then starts
    # there: the copied log starts at a snapshot that holds the oldest records (the
    # ACLs, SCRAM credentials and quotas among them), and the new controllers must
    # fetch that snapshot. After the recovery the controllers stop, see `no_snapshots`.
    f"{SNAPSHOTS}\n"
)
WAIT_S = 40.0


def wait_for(what: str, predicate: Callable[[], Any], timeout: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def topics_on(broker: ClusterNode) -> set[str]:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    return set(admin.list_topics(timeout=5).topics)


def leader_of(node: ClusterNode) -> int | None:
    info = describe(node)
    return info["leader_id"] if info is not None and info["leader_id"] > 0 else None


def describe(node: ClusterNode) -> dict[str, Any] | None:
    result = odradek(
        "quorum", "describe", "--bootstrap-controller", f"127.0.0.1:{node.controller_port}",
        "--json", check=False,
    )  # fmt: skip
    if result.returncode != 0:
        return None
    info: dict[str, Any] = json.loads(result.stdout)
    return info


def read_all(bootstrap: str, topic: str, expected: int) -> list[int]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    seen: list[int] = []
    deadline = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < deadline and len(set(seen)) < expected:
            for msg in consumer.consume(500, 1.0):
                value = msg.value()
                if msg.error() is None and value is not None:
                    seen.append(int(value))
    finally:
        consumer.close()
    return seen


# (resource type, name, pattern type, principal, host, operation, permission), Kafka's ids.
QuotaEntity = tuple[tuple[str, str | None], ...]
#: Sends one request to one node and returns the body of its answer (None: not now).
Send = Callable[[Any, int], Any]

# Created before anything is lost: committed on all three controllers and both brokers.
ACLS_BEFORE: list[Acl] = [
    (2, "orders", 3, "User:alice", "*", 3, 3),  # ALLOW READ on topic orders
    (3, "billing-", 4, "User:bob", "10.0.0.1", 3, 2),  # DENY READ on groups billing-*
]
# Created through the controller that took over from the killed active one.
ACL_AFTER_FAILOVER: Acl = (2, "orders", 3, "User:carol", "*", 4, 3)  # ALLOW WRITE
# Created while the survivor is paused: only the lost controllers and the brokers have it.
ACL_DURING_PAUSE: Acl = (4, "kafka-cluster", 3, "User:dave", "*", 7, 3)  # ALLOW ALTER
# Entities no client of the test uses: a quota must not slow the writer down.
ALICE: QuotaEntity = (("user", "alice"),)
REPORTING: QuotaEntity = (("client-id", "reporting"),)


class SecurityState(NamedTuple):
    """What a node answers to DescribeAcls, DescribeUserScramCredentials and
    DescribeClientQuotas. The ACLs are a sorted list, not a set, so that an ACL held
    twice (two records, two ids) shows."""

    acls: list[Acl]
    #: user -> sorted (mechanism type, iterations)
    users: dict[str, list[tuple[int, int]]]
    quotas: dict[QuotaEntity, dict[str, float]]


def security_state(send: Send) -> SecurityState | None:
    """Everything ``send``'s node holds, from its own image; None if it answers nothing."""
    acls = send(every_acl(), 1)
    users = send(DescribeUserScramCredentialsRequest(users=None), 0)
    quotas = send(DescribeClientQuotasRequest(), 1)
    if acls is None or users is None or quotas is None:
        return None
    assert isinstance(acls, DescribeAclsResponse) and acls.error_code == 0, acls
    assert isinstance(users, DescribeUserScramCredentialsResponse) and users.error_code == 0
    assert isinstance(quotas, DescribeClientQuotasResponse) and quotas.error_code == 0, quotas
    assert quotas.entries is not None
    return SecurityState(
        sorted(described(acls)),
        {
            r.user: sorted((c.mechanism, c.iterations) for c in r.credential_infos)
            for r in users.results
        },
        {
            tuple((e.entity_type, e.entity_name) for e in r.entity): {
                v.key: v.value for v in r.values
            }
            for r in quotas.entries
        },
    )


def on_broker(broker: ClusterNode) -> Send:
    return lambda request, version: ask(broker, request, version)


def on_controller(controller: ClusterNode) -> Send:
    return lambda request, version: enveloped(controller, request, version)


def broker_state(broker: ClusterNode) -> SecurityState:
    state = security_state(on_broker(broker))
    assert state is not None  # a broker answers every request itself
    return state


def enveloped(controller: ClusterNode, request: Any, version: int) -> Any:
    """``request`` run by ``controller`` itself, inside an Envelope as a broker forwards
    a client's request (KIP-590): the body of the answer, or None while that node is not
    the active controller. A controller-only node has no client listener, and the active
    controller runs a forwarded request on its own image: only this shows what it holds,
    the image that decides every forwarded metadata write."""
    api_key: int = type(request).API_KEY
    inner = RequestHeader(
        request_api_key=api_key, request_api_version=version, correlation_id=1, client_id="test"
    )
    outer = RequestHeader(
        request_api_key=EnvelopeRequest.API_KEY,
        request_api_version=0,
        correlation_id=2,
        client_id="test",
    )
    envelope = EnvelopeRequest(
        request_data=encode_request(inner, request),
        request_principal=serialize_principal(ANONYMOUS),
        client_host_address=bytes([127, 0, 0, 1]),
    )
    payload = encode_request(outer, envelope)
    try:
        with socket.create_connection(("127.0.0.1", controller.controller_port), 30) as conn:
            conn.sendall(struct.pack(">i", len(payload)) + payload)
            data = b""
            while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
                chunk = conn.recv(65536)
                if not chunk:
                    return None  # closed: not serving (yet)
                data += chunk
    except OSError:
        return None  # not listening (yet)
    _, answer = decode_response(data[4:], EnvelopeRequest.API_KEY, 0)
    assert isinstance(answer, EnvelopeResponse)
    if answer.error_code == ErrorCode.NOT_CONTROLLER:
        return None
    assert answer.error_code == 0 and answer.response_data is not None, answer
    _, body = decode_response(answer.response_data, api_key, version)
    return body


def create_acls(send: Send, acls: list[Acl]) -> None:
    creations = [
        AclCreation(
            resource_type=acl[0],
            resource_name=acl[1],
            resource_pattern_type=acl[2],
            principal=acl[3],
            host=acl[4],
            operation=acl[5],
            permission_type=acl[6],
        )
        for acl in acls
    ]
    response = send(CreateAclsRequest(creations=creations), 1)
    assert isinstance(response, CreateAclsResponse), response
    assert [(r.error_code, r.error_message) for r in response.results] == [(0, None)] * len(acls)


def add_scram_user(send: Send, user: str, mechanism_name: str, iterations: int) -> None:
    mechanism = scram.MECHANISMS[mechanism_name]
    salt = f"{user}'s salt, 16 bytes or more".encode()
    upsertion = ScramCredentialUpsertion(
        name=user,
        mechanism=mechanism.kafka_type,
        iterations=iterations,
        salt=salt,
        salted_password=scram.salted_password(mechanism, f"{user}-secret", salt, iterations),
    )
    response = send(AlterUserScramCredentialsRequest(upsertions=[upsertion]), 0)
    assert isinstance(response, AlterUserScramCredentialsResponse), response
    assert [(r.user, r.error_code) for r in response.results] == [(user, 0)]


def set_quotas(send: Send, entity: QuotaEntity, values: dict[str, float]) -> None:
    entry = quota_request.EntryData(
        entity=[quota_request.EntityData(entity_type=t, entity_name=n) for t, n in entity],
        ops=[quota_request.OpData(key=k, value=v) for k, v in values.items()],
    )
    response = send(AlterClientQuotasRequest(entries=[entry]), 1)
    assert isinstance(response, AlterClientQuotasResponse), response
    assert [e.error_code for e in response.entries] == [0]


def no_snapshots(controller: ClusterNode) -> None:
    """Start ``controller`` without frequent snapshots from now on: a snapshot compacts
    the audit record out of the log (docs/recover-quorum.md), and the test reads it
    there on the recovered controller and on a new one."""
    text = controller.config.read_text()
    assert f"{SNAPSHOTS}\n" in text
    controller.config.write_text(text.replace(f"{SNAPSHOTS}\n", ""))


def new_leader(cluster: Cluster, old_leader_id: int) -> int | None:
    """The quorum leader a running controller names, once it is not ``old_leader_id``."""
    for c in cluster.controllers:
        if c.node_id != old_leader_id:
            leader = leader_of(c)
            if leader is not None and leader != old_leader_id:
                return leader
    return None


def every_voter_holds(controller: ClusterNode, offset: int) -> bool:
    """Whether every voter's log reaches ``offset``, as the leader ``controller`` names
    reports it."""
    info = describe(controller)
    return info is not None and all(v["log_end_offset"] >= offset for v in info["voters"])


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, 2, extra=SETTINGS, controllers=3)
    c.start()
    yield c
    # Brokers first: with the controllers still up their controlled shutdown completes
    # at once instead of waiting out its timeout.
    for n in [*c.nodes, *c.controllers]:
        n.stop()


def test_lose_two_of_three_controllers_and_recover(cluster: Cluster) -> None:
    lose_two_controllers_and_recover(cluster)


def lose_two_controllers_and_recover(cluster: Cluster) -> None:
    """The whole procedure on a started cluster (also repeated by the slow scenarios)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("orders", 2, 2)])["orders"].result(30)
    # Not idempotent: a stalled quorum cannot hand out producer ids, and an idempotent
    # producer may need a new one after timeouts; acks=all is what is under test.
    writer = Writer(
        cluster.bootstrap,
        "orders",
        idempotent=False,
        linger_ms=5,
        message_timeout_ms=120_000,
        pause_s=0.005,
    )
    writer.start()
    wait_for("acknowledged writes", lambda: len(writer.acknowledged) > 100)

    # ACLs, a SCRAM credential and client quotas, through a broker (it forwards them to
    # the active controller). They are created before the survivor is paused below, and
    # every voter is made to hold them before that: the survivor's own log must have
    # them, or the plan could pick that log and lose them with the rest of what only
    # the lost disks held ("cannot be known"), and the test would prove nothing about
    # what recover-quorum keeps. Those created during the pause test the copied log.
    through_broker = on_broker(cluster.nodes[0])
    create_acls(through_broker, ACLS_BEFORE)
    add_scram_user(through_broker, "alice", "SCRAM-SHA-256", 8192)
    set_quotas(through_broker, ALICE, {"producer_byte_rate": 1048576.0, "request_percentage": 25.5})
    expected = SecurityState(
        sorted(ACLS_BEFORE),
        {"alice": [(1, 8192)]},
        {ALICE: {"producer_byte_rate": 1048576.0, "request_percentage": 25.5}},
    )
    wait_everywhere(cluster, broker_state, expected)
    info = describe(cluster.controllers[0])
    assert info is not None
    first_security_end = info["high_watermark"]

    # Controller failover: the active controller is killed. Its successor answers from
    # the image it built by replaying the log as a standby; its first answer is the one
    # compared, because it decides forwarded writes from the moment it answers at all.
    by_id = {c.node_id: c for c in cluster.controllers}
    killed = by_id[wait_for("a quorum leader", lambda: leader_of(cluster.controllers[0]))]
    killed.kill()
    successor = by_id[wait_for("a new leader", lambda: new_leader(cluster, killed.node_id))]
    # The killed controller comes back on its own disk at once (it starts while the
    # successor is checked) and must catch up: see above why every voter must hold all
    # of it before one of them is paused.
    killed.start()
    answered = wait_for(
        "the new active controller to answer", lambda: security_state(on_controller(successor))
    )
    assert answered == expected
    create_acls(on_controller(successor), [ACL_AFTER_FAILOVER])
    expected = expected._replace(acls=sorted([*expected.acls, ACL_AFTER_FAILOVER]))
    assert security_state(on_controller(successor)) == expected
    wait_everywhere(cluster, broker_state, expected)
    info = describe(successor)
    assert info is not None
    committed = info["high_watermark"]
    wait_for("every voter to catch up", lambda: every_voter_holds(successor, committed))

    # The controller that will survive falls behind first (paused while the others
    # commit a topic), so that a broker holds the longest log: the seed's case where the
    # log must be copied from a broker.
    leader_id = wait_for("a quorum leader", lambda: leader_of(cluster.controllers[0]))
    survivor = next(c for c in cluster.controllers if c.node_id != leader_id)
    lost = [c for c in cluster.controllers if c is not survivor]
    assert survivor.process is not None
    survivor.process.send_signal(signal.SIGSTOP)
    # Security records the survivor does not get (at most the first, by the parked fetch
    # described below): recovery keeps them only by copying a broker's log.
    create_acls(through_broker, [ACL_DURING_PAUSE])
    add_scram_user(through_broker, "dave", "SCRAM-SHA-512", 4096)
    set_quotas(through_broker, REPORTING, {"consumer_byte_rate": 2048.0})
    expected = SecurityState(
        sorted([*expected.acls, ACL_DURING_PAUSE]),
        {**expected.users, "dave": [(2, 4096)]},
        {**expected.quotas, REPORTING: {"consumer_byte_rate": 2048.0}},
    )
    # Two topics: a fetch the paused node had parked on the leader may still bring it
    # the first (the answer waits in its socket), never the second.
    for topic in ("during-pause", "during-pause-2"):
        admin.create_topics([NewTopic(topic, 1, 2)])[topic].result(30)
    wait_for(
        "the brokers to learn the topics",
        lambda: all("during-pause-2" in topics_on(b) for b in cluster.nodes),
    )
    # Then lose the two others for good, the active controller among them.
    for c in lost:
        c.kill()
        shutil.rmtree(c.dir / "data")
    survivor.process.send_signal(signal.SIGCONT)

    def stalled() -> bool:
        health = odradek("cluster", "health", "--bootstrap-server", cluster.nodes[0].bootstrap,
                         check=False)  # fmt: skip
        return health.returncode == 1 and "metadata quorum stalled" in health.stdout

    wait_for("the stall alarm on the brokers", stalled)
    info = describe(survivor)
    assert info is not None and info["alarm"] and "metadata quorum stalled" in info["alarm"]

    # The operator: stop the surviving controller, survey and plan over every survivor.
    survivor.stop()
    inputs = ["--config", str(survivor.config)]
    for broker in cluster.nodes:
        inputs += ["--config", str(broker.config)]
    surveyed = json.loads(odradek("recover-quorum", "survey", *inputs, "--json").stdout)
    assert {r["node_id"] for r in surveyed} == {survivor.node_id, 1, 2}
    plan = json.loads(odradek("recover-quorum", "plan", *inputs, "--json").stdout)
    assert plan["ok"], plan["refusals"]
    assert plan["target"]["node_id"] == survivor.node_id
    assert sorted(v["id"] for v in plan["lost_voters"]) == sorted(c.node_id for c in lost)
    assert "cannot be known" in plan["given_up"]
    apply = ["--node", str(survivor.node_id), "--config", str(survivor.config)]
    apply += ["--min-epoch", str(plan["recovery_epoch"])]
    # A broker holds the longest log: it is stopped while its log is copied.
    assert plan["copy_from"] is not None and plan["copy_from"]["node_id"] in (1, 2)
    source = next(b for b in cluster.nodes if str(b.config) == plan["copy_from"]["name"])
    # The copied log starts at a snapshot written after the first ACLs, SCRAM credential
    # and quotas: the recovered controller gets them from that snapshot, not by replay.
    [copied] = [r for r in surveyed if r["node_id"] == source.node_id]
    assert copied["latest_snapshot"] is not None
    assert copied["start_offset"] == copied["latest_snapshot"]["end_offset"] >= first_security_end
    source.stop()
    apply += ["--from", str(source.config)]
    audit = json.loads(odradek("recover-quorum", "apply", *apply, "--json").stdout)
    assert audit["log"]["copied"] and audit["log"]["end_offset"] == plan["chosen"]["end_offset"]
    assert sorted(v["id"] for v in audit["demoted"]) == sorted(c.node_id for c in lost)
    assert audit["recovery_epoch"] == plan["recovery_epoch"]

    # The recovered controller starts alone and elects itself; the brokers follow it.
    no_snapshots(survivor)
    survivor.start()
    source.start(wait=False)

    def sole_voter() -> dict[str, Any] | None:
        got = describe(survivor)
        if got is None or got["leader_id"] != survivor.node_id or got["alarm"]:
            return None
        return got if [v["id"] for v in got["voters"]] == [survivor.node_id] else None

    info = wait_for("the survivor to lead as the sole voter", sole_voter)
    assert info["leader_epoch"] > plan["recovery_epoch"]

    # Two controllers on fresh disks replace the lost ones (same ids, new directory ids).
    for c in lost:
        c.dir.joinpath("data").mkdir(exist_ok=True)
        no_snapshots(c)
        odradek("storage", "format", "--config", str(c.config), "--cluster-id", CLUSTER_ID,
                "--no-initial-controllers")  # fmt: skip
        c.start()

    def caught_up() -> bool:
        got = describe(survivor)
        lags = {o["id"]: o["lag"] for o in got["observers"]} if got is not None else {}
        return all(lags.get(c.node_id) is not None and lags[c.node_id] <= 3 for c in lost)

    wait_for("the new controllers to catch up as observers", caught_up)
    for c in lost:
        odradek("quorum", "add-controller", "--bootstrap-controller",
                f"127.0.0.1:{survivor.controller_port}", "--config", str(c.config))  # fmt: skip
    info = describe(survivor)
    assert info is not None
    assert sorted(v["id"] for v in info["voters"]) == sorted(by_id)
    assert not info["alarm"]

    # The cluster serves clients again: metadata changes commit, writes keep landing.
    admin.create_topics([NewTopic("after-recovery", 1, 2)])["after-recovery"].result(30)
    acknowledged = len(writer.acknowledged)
    wait_for("writes after the recovery", lambda: len(writer.acknowledged) > acknowledged + 50)
    writer.stopping.set()
    writer.join(90)
    assert odradek("cluster", "health", "--bootstrap-server", cluster.bootstrap.split(",")[0],
                   check=False).returncode == 0  # fmt: skip

    # Every topic and every acknowledged record is there.
    topics = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=10).topics
    assert {"orders", "during-pause", "during-pause-2", "after-recovery"} <= set(topics)
    seen = read_all(cluster.bootstrap, "orders", len(set(writer.acknowledged)))
    missing = set(writer.acknowledged) - set(seen)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"

    # Every surviving node answers exactly the ACLs, SCRAM credentials and quotas that
    # were created: both brokers (the one whose log was copied was restarted) and the
    # recovered controller, which leads.
    wait_everywhere(cluster, broker_state, expected)
    assert security_state(on_controller(survivor)) == expected

    # The audit record says what was done: beside the log, and in the replicated log.
    shown = json.loads(
        odradek("recover-quorum", "audit", "--config", str(survivor.config), "--json").stdout
    )
    assert {r["where"].startswith("log offset") for r in shown} == {True, False}
    for record in shown:
        assert record["audit"]["node_id"] == survivor.node_id
        assert record["audit"]["demoted"] == audit["demoted"]
    replicated = json.loads(
        odradek("recover-quorum", "audit", "--config", str(lost[0].config), "--json").stdout
    )
    assert [r["audit"]["demoted"] for r in replicated] == [audit["demoted"]]

    # One more failover, onto a controller that came on a fresh disk: it holds only what
    # it fetched from the recovered controller, the copied snapshot first (that log
    # starts there, see above), then the entries after it.
    survivor.kill()
    successor = by_id[wait_for("a new leader", lambda: new_leader(cluster, survivor.node_id))]
    assert successor in lost
    answered = wait_for(
        "the new active controller to answer", lambda: security_state(on_controller(successor))
    )
    assert answered == expected
