"""Every command that talks to a cluster takes a list of addresses, tries each in turn,
carries on through another node when the connection is lost mid-command, and ends any
failure to reach the cluster in one line and exit status 2, never a traceback.

The brokers and controllers here are stubs (``broker_stub.py``) that answer what each
test says and stop when it says so; ``tests/integration/test_cluster_failover.py`` does
the same remove-brokers on real processes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from odradek.cli.main import main
from odradek.cli.ports import free_port
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    MetadataRequest,
    MetadataResponse,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)
from odradek.protocol.messages import describe_configs_response as dcr
from odradek.protocol.messages import describe_quorum_response as dq
from odradek.protocol.messages import metadata_response as md
from odradek.protocol.messages.request_header import RequestHeader
from odradek.protocol.record_codec import (
    Record,
    encode_batch,
)
from odradek.raft.wire import METADATA_PARTITION, METADATA_TOPIC
from tests.cli.broker_stub import HANG, STOP, StubBroker, start
from tests.cli.test_quarantine_cli import ENTRY, make_entry

DIRECTORY_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


def metadata(
    live: dict[int, StubBroker], topics: list[md.MetadataResponseTopic] | None = None
) -> Any:
    return MetadataResponse(
        brokers=[
            md.MetadataResponseBroker(node_id=i, host="127.0.0.1", port=s.port)
            for i, s in sorted(live.items())
        ],
        cluster_id="stub",
        controller_id=min(live),
        topics=topics or [],
    )


def quorum(leader: StubBroker) -> Any:
    return DescribeQuorumResponse(
        topics=[
            dq.TopicData(
                topic_name=METADATA_TOPIC,
                partitions=[
                    dq.PartitionData(
                        partition_index=METADATA_PARTITION,
                        leader_id=1,
                        leader_epoch=3,
                        high_watermark=42,
                        current_voters=[dq.ReplicaState(replica_id=1, log_end_offset=42)],
                    )
                ],
            )
        ],
        nodes=[dq.Node(1, [dq.Listener("CONTROLLER", "127.0.0.1", leader.port)])],
    )


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def error_lines(result: Result) -> list[str]:
    return [line for line in result.output.splitlines() if line.startswith("Error:")]


def assert_one_line_failure(result: Result) -> str:
    """Exit status 2, no traceback, and the failure said in one line, the last."""
    assert result.exit_code == 2, result.output
    # A traceback would show as an exception other than click's SystemExit.
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert error_lines(result) == [lines[-1]], result.output
    return lines[-1]


# --- Nothing answers -------------------------------------------------------------------


def controller_config(tmp_path: Path) -> Path:
    """A formatted controller's server.properties, for add-controller."""
    path = tmp_path / "controller.properties"
    path.write_text(
        "process.roles=controller\nnode.id=7\n"
        f"listeners=CONTROLLER://127.0.0.1:{free_port()}\n"
        "controller.listener.names=CONTROLLER\n"
        "controller.quorum.bootstrap.servers=127.0.0.1:1\n"
        f"log.dirs={tmp_path / 'controller-logs'}\n"
    )
    formatted = invoke(
        "storage", "format", "--config", str(path), "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qg",
        "--no-initial-controllers",
    )  # fmt: skip
    assert formatted.exit_code == 0, formatted.output
    return path


def quarantine_dir(tmp_path: Path) -> Path:
    log_dir = tmp_path / "logs"
    batch = encode_batch([Record(offset_delta=0, timestamp=0, key=b"k", value=b"v")])
    make_entry(log_dir, "orders", 1, [batch])
    return log_dir


COMMANDS: dict[str, Callable[[Path], list[str]]] = {
    "cluster health": lambda _: ["cluster", "health"],
    "cluster acknowledge-unclean-elections": lambda _: [
        "cluster", "acknowledge-unclean-elections", "--topic", "orders",
    ],
    "cluster add-brokers": lambda _: ["cluster", "add-brokers", "--brokers", "4"],
    "cluster remove-brokers": lambda _: ["cluster", "remove-brokers", "--brokers", "4"],
    "cluster cancel-reassignments": lambda _: ["cluster", "cancel-reassignments"],
    "cluster unregister-broker": lambda _: ["cluster", "unregister-broker", "--broker", "4"],
    "partitions recover": lambda _: [
        "partitions", "recover", "--topic", "orders", "--partition", "0",
        "--from-broker", "1", "--yes",
    ],
    "quarantine republish": lambda tmp: [
        "quarantine", "republish", "--log-dir", str(quarantine_dir(tmp)), "--topic", "orders",
        "--partition", "1", "--entry", ENTRY,
    ],
    "quorum describe": lambda _: ["quorum", "describe"],
    "quorum add-controller": lambda tmp: [
        "quorum", "add-controller", "--config", str(controller_config(tmp)),
    ],
    "quorum remove-controller": lambda _: [
        "quorum", "remove-controller", "--controller-id", "3",
        "--controller-directory-id", DIRECTORY_ID,
    ],
}  # fmt: skip


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_with_no_address_answering_every_command_says_so_in_one_line(
    command: str, tmp_path: Path
) -> None:
    # Nothing listens on port 1, nor on a port just found free: refused at once.
    dead = f"127.0.0.1:1,127.0.0.1:{free_port()}"
    flag = "--bootstrap-controller" if command.startswith("quorum") else "--bootstrap-server"
    line = assert_one_line_failure(invoke(*COMMANDS[command](tmp_path), flag, dead))
    kind = "controller" if command.startswith("quorum") else "broker"
    assert line.startswith(f"Error: cannot reach any {kind} (")
    for address in dead.split(","):
        assert address in line


# --- The first address that answers ------------------------------------------------------


def test_health_asks_the_next_address_when_the_first_does_not_answer(
    stubs: list[StubBroker],
) -> None:
    def answer(header: RequestHeader, body: Any) -> Any:
        if isinstance(body, MetadataRequest):
            return metadata({1: broker})
        if isinstance(body, DescribeConfigsRequest):  # the brokers' failed log dirs: none
            return DescribeConfigsResponse(
                results=[
                    dcr.DescribeConfigsResult(
                        resource_type=r.resource_type, resource_name=r.resource_name
                    )
                    for r in body.resources
                ]
            )
        assert isinstance(body, DescribeQuorumRequest)
        return quorum(broker)

    broker = start(stubs, answer)
    result = invoke("cluster", "health", "--bootstrap-server", f"127.0.0.1:1,{broker.address}")
    assert result.exit_code == 0, result.output
    assert "metadata quorum: ok" in result.output and "healthy" in result.output


def test_quorum_describe_asks_the_next_controller(stubs: list[StubBroker]) -> None:
    controller = start(stubs, lambda header, body: quorum(controller))
    result = invoke(
        "quorum", "describe", "--bootstrap-controller", f"[::1]:1,127.0.0.1:1,{controller.address}"
    )
    assert result.exit_code == 0, result.output
    assert "LeaderId:       1" in result.output
    assert "HighWatermark:  42" in result.output


# --- The connection lost mid-command ----------------------------------------------------


def test_remove_brokers_carries_on_through_another_broker_when_the_drained_one_stops(
    stubs: list[StubBroker],
) -> None:
    """The operator gives the broker being removed as the bootstrap server, and stops it
    once it holds nothing, while the command waits to unregister it: the command carries
    on through a broker the cluster listed and unregisters it."""
    metadata_asked = 0

    def live() -> Any:
        return metadata({1: other} if drained.stopped.is_set() else {1: other, 4: drained})

    def drained_answer(header: RequestHeader, body: Any) -> Any:
        nonlocal metadata_asked
        if isinstance(body, MetadataRequest):
            metadata_asked += 1
            # The plan's, then the first look while waiting ("stop it"), then the
            # operator stops it while the next question is on its way.
            return STOP if metadata_asked == 3 else live()
        if isinstance(body, ListPartitionReassignmentsRequest):
            return ListPartitionReassignmentsResponse()
        assert isinstance(body, DescribeLogDirsRequest)
        return DescribeLogDirsResponse()

    def other_answer(header: RequestHeader, body: Any) -> Any:
        if isinstance(body, MetadataRequest):
            return live()
        if isinstance(body, DescribeLogDirsRequest):
            return DescribeLogDirsResponse()
        assert isinstance(body, UnregisterBrokerRequest)
        return UnregisterBrokerResponse()

    other = start(stubs, other_answer)
    drained = start(stubs, drained_answer)
    result = invoke(
        "cluster", "remove-brokers", "--bootstrap-server", drained.address, "--brokers", "4",
        "--stop-timeout", "30",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.exception is None
    assert "broker 4 holds no replicas now; stop it" in result.output
    assert f"lost the connection to {drained.address}; carrying on through {other.address}" in (
        result.output
    )
    assert result.output.rstrip().endswith("broker 4 unregistered")
    assert [r.broker_id for r in other.received(UnregisterBrokerRequest.API_KEY)] == [4]


def test_a_lost_answer_to_an_election_is_reported_and_the_election_not_asked_again(
    stubs: list[StubBroker],
) -> None:
    """An unclean election is never sent twice: the command says it may or may not have
    happened, even though another broker could be asked."""
    offline = md.MetadataResponseTopic(
        name="lost",
        partitions=[
            md.MetadataResponsePartition(
                error_code=ErrorCode.LEADER_NOT_AVAILABLE,
                partition_index=0,
                leader_id=-1,
                replica_nodes=[1, 2],
                isr_nodes=[2],
            )
        ],
    )

    def answer(header: RequestHeader, body: Any) -> Any:
        if isinstance(body, MetadataRequest):
            return metadata({1: first, 2: second}, [offline])
        assert isinstance(body, ElectLeadersRequest)
        return STOP

    first = start(stubs, answer)
    second = start(stubs, answer)
    result = invoke(
        "partitions", "recover", "--bootstrap-server", f"{first.address},{second.address}",
        "--topic", "lost", "--partition", "0", "--from-broker", "1", "--yes",
    )  # fmt: skip
    line = assert_one_line_failure(result)
    assert f"lost the connection to {first.address} before it answered" in line
    assert "broker 1 may or may not have been elected" in line
    elections = [s.received(ElectLeadersRequest.API_KEY) for s in (first, second)]
    assert [len(e) for e in elections] == [1, 0]


# --- --command-config ------------------------------------------------------------------


def test_command_config_gives_the_address_client_id_and_request_timeout(
    stubs: list[StubBroker], tmp_path: Path
) -> None:
    silent = start(stubs, lambda header, body: HANG)
    config = tmp_path / "client.properties"
    config.write_text(
        f"bootstrap.servers={silent.address}\nclient.id=night-ops\nrequest.timeout.ms=300\n"
    )
    line = assert_one_line_failure(invoke("cluster", "health", "--command-config", str(config)))
    assert f"{silent.address}: no answer in 0.3 s" in line
    assert [h.client_id for h, _ in silent.requests] == ["night-ops"]


def test_a_sasl_setting_without_a_login_is_refused_before_anything_is_sent(
    stubs: list[StubBroker], tmp_path: Path
) -> None:
    broker = start(stubs, lambda header, body: metadata({1: broker}))
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n")
    result = invoke(
        "cluster", "health", "--bootstrap-server", broker.address, "--command-config", str(config)
    )
    assert result.exit_code == 2, result.output
    assert "sasl.jaas.config must be set" in result.output
    assert broker.requests == []
