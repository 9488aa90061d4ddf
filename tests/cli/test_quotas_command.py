"""``odradek quotas describe|alter``: options checked before anything is sent, the
requests the commands build, and what they print, against a stub broker
(``broker_stub.py``) that answers what each test says.
``tests/integration/test_client_quotas.py`` runs them against a real cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from odradek.cli.main import main
from odradek.cli.ports import free_port
from odradek.cli.quotas import value_text
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from odradek.protocol.messages import alter_client_quotas_response as acqr
from odradek.protocol.messages import describe_client_quotas_response as dcqr
from tests.cli.broker_stub import StubBroker, start


def run(stub: StubBroker, *args: str) -> Result:
    return CliRunner().invoke(main, ["quotas", *args, "--bootstrap-server", stub.address])


def versions(stub: StubBroker) -> set[tuple[int, int]]:
    return {(h.request_api_key, h.request_api_version) for h, _ in stub.requests}


Pairs = list[tuple[str, str | None]]


def described(*entries: tuple[Pairs, dict[str, float]]) -> DescribeClientQuotasResponse:
    return DescribeClientQuotasResponse(
        error_message=None,
        entries=[
            dcqr.EntryData(
                entity=[dcqr.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                values=[dcqr.ValueData(key=k, value=v) for k, v in values.items()],
            )
            for entity, values in entries
        ],
    )


def altered(body: Any, code: int = ErrorCode.NONE, message: str | None = None) -> Any:
    return AlterClientQuotasResponse(
        entries=[
            acqr.EntryData(
                error_code=code,
                error_message=message,
                entity=[
                    acqr.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                    for e in entry.entity
                ],
            )
            for entry in body.entries
        ]
    )


# The broker sorts an entity's types by name, so client-id comes before user.
ALICE_DEFAULT_CLIENT: Pairs = [("client-id", None), ("user", "alice")]
APP: Pairs = [("client-id", "app")]


# --- describe -------------------------------------------------------------------------


def test_describe_asks_for_every_entity_by_default_and_prints_each(
    stubs: list[StubBroker],
) -> None:
    stub = start(
        stubs,
        lambda _, body: described(
            (ALICE_DEFAULT_CLIENT, {"consumer_byte_rate": 2048.0, "producer_byte_rate": 1048576}),
            (APP, {"request_percentage": 25.5}),
        ),
    )
    result = run(stub, "describe")
    assert result.exit_code == 0, result.output
    assert versions(stub) == {(DescribeClientQuotasRequest.API_KEY, 1)}
    (request,) = stub.received(DescribeClientQuotasRequest.API_KEY)
    assert (request.components, request.strict) == ([], False)
    assert result.stdout.splitlines() == [
        "user=alice, client-id=<default>: consumer_byte_rate=2048, producer_byte_rate=1048576",
        "client-id=app: request_percentage=25.5",
    ]


def test_describe_filters_by_name_and_default_strictly_and_prints_json(
    stubs: list[StubBroker],
) -> None:
    stub = start(
        stubs, lambda _, body: described((ALICE_DEFAULT_CLIENT, {"producer_byte_rate": 1024.0}))
    )
    result = run(stub, "describe", "--user", "alice", "--client-default", "--strict", "--json")
    assert result.exit_code == 0, result.output
    (request,) = stub.received(DescribeClientQuotasRequest.API_KEY)
    assert [(c.entity_type, c.match_type, c.match) for c in request.components] == [
        ("user", 0, "alice"),  # EXACT
        ("client-id", 1, None),  # DEFAULT
    ]
    assert request.strict is True
    assert json.loads(result.stdout) == [
        {"entity": {"user": "alice", "client-id": None}, "quotas": {"producer_byte_rate": 1024.0}}
    ]
    # Kafka's tools list the user first, whatever order the answer has.
    assert list(json.loads(result.stdout)[0]["entity"]) == ["user", "client-id"]

    stub.requests.clear()
    assert run(stub, "describe", "--user-default", "--client-id", "app").exit_code == 0
    (request,) = stub.received(DescribeClientQuotasRequest.API_KEY)
    assert [(c.entity_type, c.match_type, c.match) for c in request.components] == [
        ("user", 1, None),
        ("client-id", 0, "app"),
    ]
    assert request.strict is False


def test_describe_with_no_match_says_so_on_stderr_and_json_is_an_empty_list(
    stubs: list[StubBroker],
) -> None:
    stub = start(stubs, lambda _, body: described())
    text = run(stub, "describe", "--user", "nobody")
    assert text.exit_code == 0, text.output
    assert (text.stdout, text.stderr) == ("", "No client quotas match.\n")
    as_json = run(stub, "describe", "--json")
    assert as_json.exit_code == 0 and json.loads(as_json.stdout) == []


@pytest.mark.parametrize(
    ("code", "message", "says"),
    [
        (
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            "x",
            "not authorized to describe client quotas: this client's principal needs "
            "DESCRIBE_CONFIGS on the cluster",
        ),
        (
            ErrorCode.INVALID_REQUEST,
            "Invalid empty entity type.",
            "INVALID_REQUEST: Invalid empty entity type.",
        ),
    ],
)
def test_describe_refused_is_one_line_and_status_1(
    stubs: list[StubBroker], code: ErrorCode, message: str, says: str
) -> None:
    stub = start(
        stubs,
        lambda _, body: DescribeClientQuotasResponse(
            error_code=code, error_message=message, entries=None
        ),
    )
    result = run(stub, "describe")
    assert result.exit_code == 1
    assert says in result.output and result.output.count("\n") == 1


# --- alter ----------------------------------------------------------------------------


def test_alter_sets_and_removes_quotas_of_one_entity(stubs: list[StubBroker]) -> None:
    stub = start(stubs, lambda _, body: altered(body))
    result = run(
        stub, "alter", "--user", "alice", "--client-id", "app",
        "--add", "producer_byte_rate=1048576,consumer_byte_rate=2048",
        "--add", "request_percentage=25.5", "--delete", "controller_mutation_rate",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert versions(stub) == {(AlterClientQuotasRequest.API_KEY, 1)}
    (request,) = stub.received(AlterClientQuotasRequest.API_KEY)
    assert request.validate_only is False
    (entry,) = request.entries
    assert [(e.entity_type, e.entity_name) for e in entry.entity] == [
        ("user", "alice"),
        ("client-id", "app"),
    ]
    assert [(op.key, op.value, op.remove) for op in entry.ops] == [
        ("producer_byte_rate", 1048576.0, False),
        ("consumer_byte_rate", 2048.0, False),
        ("request_percentage", 25.5, False),
        ("controller_mutation_rate", 0.0, True),
    ]
    assert result.stdout == (
        "user=alice, client-id=app: set producer_byte_rate=1048576, consumer_byte_rate=2048, "
        "request_percentage=25.5; deleted controller_mutation_rate\n"
    )


def test_alter_of_the_default_entities_with_validate_only_changes_nothing(
    stubs: list[StubBroker],
) -> None:
    stub = start(stubs, lambda _, body: altered(body))
    result = run(
        stub, "alter", "--user-default", "--client-default", "--delete", "producer_byte_rate",
        "--delete", "producer_byte_rate", "--validate-only",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (request,) = stub.received(AlterClientQuotasRequest.API_KEY)
    assert request.validate_only is True
    (entry,) = request.entries
    assert [(e.entity_type, e.entity_name) for e in entry.entity] == [
        ("user", None),
        ("client-id", None),
    ]
    # A key deleted twice is asked for once.
    assert [(op.key, op.remove) for op in entry.ops] == [("producer_byte_rate", True)]
    assert result.stdout == (
        "user=<default>, client-id=<default>: valid, nothing changed (--validate-only): "
        "deleted producer_byte_rate\n"
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--add", "producer_byte_rate=1"], "name the entity: --user NAME or --user-default"),
        (
            ["--user", "a", "--user-default", "--add", "producer_byte_rate=1"],
            "--user and --user-default exclude each other",
        ),
        (
            ["--client-id", "c", "--client-default", "--add", "producer_byte_rate=1"],
            "--client-id and --client-default exclude each other",
        ),
        (
            ["--user", "", "--add", "producer_byte_rate=1"],
            "must not be empty (--user-default is the default user)",
        ),
        (
            ["--client-id", "", "--delete", "producer_byte_rate"],
            "must not be empty (--client-default is the default client-id)",
        ),
        (["--user", "a"], "nothing to alter: give --add KEY=VALUE or --delete KEY"),
        (
            ["--user", "a", "--add", "produce_byte_rate=1"],
            "'produce_byte_rate' is not a quota key of a user or client-id: one of "
            "consumer_byte_rate, controller_mutation_rate, producer_byte_rate, "
            "request_percentage",
        ),
        (["--user", "a", "--delete", "bogus"], "'bogus' is not a quota key"),
        (
            ["--user", "a", "--add", "connection_creation_rate=5"],
            "(a quota of ip entities: --ip ADDRESS or --ip-default)",
        ),
        (
            ["--ip", "10.0.0.1", "--add", "producer_byte_rate=5"],
            "'producer_byte_rate' is not a quota key of an ip (a quota of users and client "
            "ids): one of connection_creation_rate",
        ),
        (
            ["--ip", "10.0.0.1", "--user", "a", "--add", "connection_creation_rate=5"],
            "an ip entity stands alone",
        ),
        (
            ["--ip", "10.0.0.1", "--ip-default", "--add", "connection_creation_rate=5"],
            "--ip and --ip-default exclude each other",
        ),
        (["--user", "a", "--add", "producer_byte_rate=fast"], "'fast' is not a number"),
        (["--user", "a", "--add", "producer_byte_rate="], "'' is not a number"),
        (["--user", "a", "--add", "request_percentage=nan"], "'nan' is not a number"),
        (["--user", "a", "--add", "request_percentage=inf"], "'inf' is not a number"),
        (["--user", "a", "--add", "producer_byte_rate"], "'producer_byte_rate' is not KEY=VALUE"),
        (
            ["--user", "a", "--add", "producer_byte_rate=1", "--add", "producer_byte_rate=2"],
            "producer_byte_rate is given twice",
        ),
        (
            ["--user", "a", "--add", "producer_byte_rate=1", "--delete", "producer_byte_rate"],
            "producer_byte_rate: both added and deleted",
        ),
    ],
)
def test_alter_refuses_bad_options_before_asking(
    stubs: list[StubBroker], args: list[str], says: str
) -> None:
    stub = start(stubs, lambda _, body: altered(body))
    result = run(stub, "alter", *args)
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert stub.requests == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--strict"], "--strict needs --user/--user-default or --client-id/--client-default"),
        (["--user", "a", "--user-default"], "--user and --user-default exclude each other"),
        (["--client-id", ""], "must not be empty (--client-default is the default client-id)"),
    ],
)
def test_describe_refuses_bad_options_before_asking(
    stubs: list[StubBroker], args: list[str], says: str
) -> None:
    stub = start(stubs, lambda _, body: described())
    result = run(stub, "describe", *args)
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert stub.requests == []


@pytest.mark.parametrize(
    ("code", "message", "says"),
    [
        (
            ErrorCode.INVALID_REQUEST,
            "Quota producer_byte_rate must be greater than 0",
            "user=alice: not altered: INVALID_REQUEST: Quota producer_byte_rate must be "
            "greater than 0",
        ),
        (
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            "x",
            "user=alice: not altered: not authorized to alter client quotas: this client's "
            "principal needs ALTER_CONFIGS on the cluster",
        ),
        # No message: the code's own description.
        (ErrorCode.NOT_CONTROLLER, None, "user=alice: not altered: NOT_CONTROLLER: "),
    ],
)
def test_alter_refused_by_the_broker_is_one_line_and_status_1(
    stubs: list[StubBroker], code: ErrorCode, message: str | None, says: str
) -> None:
    stub = start(stubs, lambda _, body: altered(body, code, message))
    result = run(stub, "alter", "--user", "alice", "--add", "producer_byte_rate=-1")
    assert result.exit_code == 1
    assert says in result.output and result.output.count("\n") == 1
    assert result.stdout == ""


def test_an_answer_without_the_entity_is_status_1(stubs: list[StubBroker]) -> None:
    stub = start(stubs, lambda _, body: AlterClientQuotasResponse(entries=[]))
    result = run(stub, "alter", "--client-id", "app", "--add", "consumer_byte_rate=1")
    assert result.exit_code == 1
    assert "client-id=app: the broker's answer has no result for the entity" in result.output


# --- reaching the cluster -------------------------------------------------------------


def test_command_config_gives_the_brokers_and_the_client_id(
    stubs: list[StubBroker], tmp_path: Path
) -> None:
    stub = start(stubs, lambda _, body: described())
    config = tmp_path / "client.properties"
    config.write_text(f"bootstrap.servers={stub.address}\nclient.id=ops-quotas\n")
    result = CliRunner().invoke(main, ["quotas", "describe", "--command-config", str(config)])
    assert result.exit_code == 0, result.output
    assert [h.client_id for h, _ in stub.requests] == ["ops-quotas"]


def test_an_unreachable_cluster_is_one_line_and_status_2() -> None:
    port = free_port()
    result = CliRunner().invoke(
        main, ["quotas", "describe", "--bootstrap-server", f"127.0.0.1:{port}"]
    )
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "cannot reach any broker" in result.output


def test_values_read_as_written() -> None:
    assert [value_text(v) for v in (1048576.0, 25.5, 0.0, 1e300)] == [
        "1048576",
        "25.5",
        "0",
        "1e+300",
    ]


def test_alter_and_describe_an_ip_entity(stubs: list[StubBroker]) -> None:
    stub = start(stubs, lambda _, body: altered(body))
    result = run(stub, "alter", "--ip", "10.0.0.7", "--add", "connection_creation_rate=5")
    assert result.exit_code == 0, result.output
    (request,) = stub.received(AlterClientQuotasRequest.API_KEY)
    (entry,) = request.entries
    assert [(e.entity_type, e.entity_name) for e in entry.entity] == [("ip", "10.0.0.7")]
    assert [(op.key, op.value, op.remove) for op in entry.ops] == [
        ("connection_creation_rate", 5.0, False)
    ]
    assert result.stdout == "ip=10.0.0.7: set connection_creation_rate=5\n"
    answer = described(([("ip", None)], {"connection_creation_rate": 10.0}))
    lister = start(stubs, lambda _, body: answer)
    listed = run(lister, "describe", "--ip-default")
    (asked,) = lister.received(DescribeClientQuotasRequest.API_KEY)
    assert [(c.entity_type, c.match_type, c.match) for c in asked.components] == [
        ("ip", 1, None)  # DEFAULT
    ]
    assert listed.exit_code == 0, listed.output
    assert listed.stdout == "ip=<default>: connection_creation_rate=10\n"
