"""``odradek acls`` and ``odradek users``: options checked before anything is sent, the
requests the commands build, and what they print, against a stub broker
(``broker_stub.py``) that answers what each test says.
``tests/integration/test_security_commands.py`` runs them against a real cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from odradek.cli.acls import EnumName
from odradek.cli.main import main
from odradek.cli.ports import free_port
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from odradek.protocol.messages import alter_user_scram_credentials_response as ausr
from odradek.protocol.messages import create_acls_response as car
from odradek.protocol.messages import delete_acls_response as dar
from odradek.protocol.messages import describe_acls_response as dacr
from odradek.protocol.messages import describe_user_scram_credentials_response as dusr
from odradek.protocol.messages.request_header import RequestHeader
from odradek.security.acls import AclOperation, AclPermission, PatternType, ResourceType
from odradek.security.scram import SCRAM_SHA_256, SCRAM_SHA_512, salted_password
from tests.cli.broker_stub import StubBroker, start


def run(stub: StubBroker | None, *args: str, input: str | None = None) -> Result:
    where = ["--bootstrap-server", stub.address] if stub is not None else []
    return CliRunner().invoke(main, [*args, *where], input=input)


def versions(stub: StubBroker) -> set[tuple[int, int]]:
    return {(h.request_api_key, h.request_api_version) for h, _ in stub.requests}


# --- Options checked before anything is sent --------------------------------------------

NOWHERE = ["--bootstrap-server", "127.0.0.1:1"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--topic", "t", "--allow-principal", "User:a", "--operation", "fly"], "'fly'"),
        (["--topic", "t", "--allow-principal", "User:a", "--operation", "any"], "'any'"),
        (["--topic", "t", "--allow-principal", "User:a"], "--operation"),
        (
            ["--topic", "t", "--group", "g", "--allow-principal", "User:a", "--operation", "read"],
            "--topic and --group exclude each other",
        ),
        (["--topic", "t", "--operation", "read"], "give --allow-principal or --deny-principal"),
        (["--topic", "t", "--allow-principal", "alice", "--operation", "read"], "TYPE:NAME"),
        (["--allow-principal", "User:a", "--operation", "read"], "name the resource"),
        (["--topic", "t", "--resource-type", "group", "--operation", "read"], "exclude each other"),
        (
            ["--resource-type", "topic", "--allow-principal", "User:a", "--operation", "read"],
            "--resource-type needs --resource-name",
        ),
        (["--topic", "t", "--allow-principal", "User:a", "--pattern", "match"], "'match'"),
        (["--topic", "", "--allow-principal", "User:a", "--operation", "read"], "empty"),
    ],
)
def test_acls_add_refuses_bad_options_before_asking(args: list[str], says: str) -> None:
    result = CliRunner().invoke(main, ["acls", "add", *args, *NOWHERE])
    assert result.exit_code == 2, result.output
    assert says in result.output


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--password", "a", "--password-file", "-"], "exclude each other"),
        (["--password", "a", "--iterations", "100"], "4096 to 16384"),
        (["--password", "a", "--iterations", "20000"], "4096 to 16384"),
        (["--password", "a", "--mechanism", "SCRAM-SHA-1"], "SCRAM-SHA-1"),
        (["--password", ""], "must not be empty"),
    ],
)
def test_users_add_refuses_bad_options_before_asking(args: list[str], says: str) -> None:
    base = ["users", "add", "carol"] + (
        [] if "--mechanism" in args else ["--mechanism", "SCRAM-SHA-512"]
    )
    result = CliRunner().invoke(main, [*base, *args, *NOWHERE], input="")
    assert result.exit_code == 2, result.output
    assert says in result.output


def test_an_empty_password_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "pw"
    path.write_text("\n")
    result = CliRunner().invoke(
        main,
        ["users", "add", "carol", "--mechanism", "SCRAM-SHA-512", "--password-file", str(path),
         *NOWHERE],
    )  # fmt: skip
    assert result.exit_code == 2 and "the file is empty" in result.output


@pytest.mark.parametrize("spelling", ["cluster-action", "CLUSTER_ACTION", "ClusterAction"])
def test_operations_take_kafkas_spellings(spelling: str) -> None:
    choice = EnumName(AclOperation)
    assert choice.convert(spelling, None, None) is AclOperation.CLUSTER_ACTION
    with pytest.raises(click.BadParameter):
        choice.convert("cluster action!", None, None)


def test_an_unreachable_cluster_is_one_line_and_status_2() -> None:
    port = free_port()
    for args in (["acls", "list"], ["users", "list"]):
        result = CliRunner().invoke(main, [*args, "--bootstrap-server", f"127.0.0.1:{port}"])
        assert result.exit_code == 2
        assert result.output.count("\n") == 1 and "cannot reach any broker" in result.output


# --- acls add -------------------------------------------------------------------------


def test_add_creates_every_principal_host_and_operation_and_names_refusals(
    stubs: list[StubBroker],
) -> None:
    def answer(header: RequestHeader, body: Any) -> Any:
        assert isinstance(body, CreateAclsRequest)
        return CreateAclsResponse(
            results=[
                car.AclCreationResult(error_code=ErrorCode.INVALID_REQUEST, error_message="no")
                if c.principal == "User:mallory"
                else car.AclCreationResult(error_message=None)
                for c in body.creations
            ]
        )

    stub = start(stubs, answer)
    result = run(
        stub, "acls", "add", "--topic", "orders", "--resource-pattern-type", "prefixed",
        "--allow-principal", "User:alice", "--deny-principal", "User:mallory",
        "--operation", "Read", "--operation", "WRITE",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    (request,) = stub.received(CreateAclsRequest.API_KEY)
    assert versions(stub) == {(CreateAclsRequest.API_KEY, 3)}
    assert [
        (c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
         c.operation, c.permission_type)
        for c in request.creations
    ] == [
        (ResourceType.TOPIC, "orders", PatternType.PREFIXED, who, "*", op, permission)
        for who, permission in (
            ("User:alice", AclPermission.ALLOW), ("User:mallory", AclPermission.DENY)
        )
        for op in (AclOperation.READ, AclOperation.WRITE)
    ]  # fmt: skip
    assert "Added 2 ACLs" in result.stdout
    assert "User:alice" in result.stdout and "User:mallory" not in result.stdout
    assert "PREFIXED" in result.stdout and "READ" in result.stdout and "WRITE" in result.stdout
    assert result.stderr.count("not added: DENY User:mallory") == 2
    assert "INVALID_REQUEST: no" in result.stderr


def test_add_on_the_cluster_names_it_kafka_cluster_and_takes_hosts(
    stubs: list[StubBroker],
) -> None:
    stub = start(
        stubs,
        lambda _, body: CreateAclsResponse(
            results=[car.AclCreationResult(error_message=None) for _ in body.creations]
        ),
    )
    result = run(
        stub, "acls", "add", "--cluster", "--allow-principal", "User:ops", "--host", "10.0.0.1",
        "--operation", "describe",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (request,) = stub.received(CreateAclsRequest.API_KEY)
    (creation,) = request.creations
    assert (creation.resource_type, creation.resource_name, creation.resource_pattern_type) == (
        ResourceType.CLUSTER,
        "kafka-cluster",
        PatternType.LITERAL,
    )
    assert (creation.host, creation.operation, creation.permission_type) == (
        "10.0.0.1",
        AclOperation.DESCRIBE,
        AclPermission.ALLOW,
    )
    assert "Added 1 ACL " in result.stdout


@pytest.mark.parametrize(
    ("code", "says"),
    [
        (ErrorCode.SECURITY_DISABLED, "the cluster has no authorizer (authorizer.class.name"),
        (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "not authorized to create ACLs"),
    ],
)
def test_add_without_an_authorizer_or_permission_is_one_clear_line(
    stubs: list[StubBroker], code: ErrorCode, says: str
) -> None:
    stub = start(
        stubs,
        lambda _, body: CreateAclsResponse(
            results=[
                car.AclCreationResult(error_code=code, error_message="x") for _ in body.creations
            ]
        ),
    )
    result = run(
        stub, "acls", "add", "--group", "g", "--allow-principal", "User:a", "--operation", "read",
        "--operation", "describe",
    )  # fmt: skip
    assert result.exit_code == 1
    assert says in result.output and result.output.count("\n") == 1


# --- acls list ------------------------------------------------------------------------


def described(*acls: tuple[int, str, int, str, str, int, int]) -> DescribeAclsResponse:
    return DescribeAclsResponse(
        error_message=None,
        resources=[
            dacr.DescribeAclsResource(
                resource_type=t, resource_name=n, pattern_type=p,
                acls=[dacr.AclDescription(principal=w, host=h, operation=o, permission_type=pe)],
            )
            for t, n, p, w, h, o, pe in acls
        ],
    )  # fmt: skip


ORDERS_READ = (2, "orders", 3, "User:alice", "*", 3, 3)
GROUP_ALL = (3, "app-", 4, "User:alice", "*", 2, 3)


def test_list_asks_for_everything_by_default_and_prints_a_table(stubs: list[StubBroker]) -> None:
    stub = start(stubs, lambda _, body: described(GROUP_ALL, ORDERS_READ))
    result = run(stub, "acls", "list")
    assert result.exit_code == 0, result.output
    (request,) = stub.received(DescribeAclsRequest.API_KEY)
    assert versions(stub) == {(DescribeAclsRequest.API_KEY, 3)}
    assert (
        request.resource_type_filter, request.resource_name_filter, request.pattern_type_filter,
        request.principal_filter, request.host_filter, request.operation, request.permission_type,
    ) == (
        ResourceType.ANY, None, PatternType.ANY, None, None, AclOperation.ANY, AclPermission.ANY
    )  # fmt: skip
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "RESOURCE", "TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"
    ]  # fmt: skip
    # Sorted: topic (2) before group (3).
    assert lines[1].split() == ["TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"]
    assert lines[2].split() == ["GROUP", "app-", "PREFIXED", "User:alice", "*", "ALL", "ALLOW"]


def test_list_filters_and_json(stubs: list[StubBroker]) -> None:
    stub = start(stubs, lambda _, body: described(ORDERS_READ, (2, "x", 3, "User:a", "*", 99, 3)))
    result = run(
        stub, "acls", "list", "--topic", "orders", "--pattern", "match", "--principal",
        "User:alice", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (request,) = stub.received(DescribeAclsRequest.API_KEY)
    assert (request.resource_type_filter, request.resource_name_filter) == (2, "orders")
    assert (request.pattern_type_filter, request.principal_filter) == (
        PatternType.MATCH,
        "User:alice",
    )
    assert json.loads(result.stdout) == [
        {"resource_type": "TOPIC", "resource_name": "orders", "pattern_type": "LITERAL",
         "principal": "User:alice", "host": "*", "operation": "READ", "permission": "ALLOW"},
        {"resource_type": "TOPIC", "resource_name": "x", "pattern_type": "LITERAL",
         "principal": "User:a", "host": "*", "operation": "UNKNOWN(99)", "permission": "ALLOW"},
    ]  # fmt: skip


def test_list_with_a_resource_type_and_several_principals_asks_once_for_each(
    stubs: list[StubBroker],
) -> None:
    stub = start(stubs, lambda _, body: described(ORDERS_READ))
    result = run(
        stub, "acls", "list", "--resource-type", "transactional-id", "--allow-principal",
        "User:a", "--deny-principal", "User:b",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    asked = stub.received(DescribeAclsRequest.API_KEY)
    assert [(r.resource_type_filter, r.principal_filter, r.permission_type) for r in asked] == [
        (ResourceType.TRANSACTIONAL_ID, "User:a", AclPermission.ALLOW),
        (ResourceType.TRANSACTIONAL_ID, "User:b", AclPermission.DENY),
    ]
    assert result.stdout.count("orders") == 1  # the same ACL in both answers, shown once


@pytest.mark.parametrize(
    ("code", "says"),
    [
        (ErrorCode.SECURITY_DISABLED, "the cluster has no authorizer (authorizer.class.name"),
        (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "not authorized to describe ACLs"),
    ],
)
def test_list_refused_is_status_1_with_one_line(
    stubs: list[StubBroker], code: ErrorCode, says: str
) -> None:
    stub = start(stubs, lambda _, body: DescribeAclsResponse(error_code=code, error_message="x"))
    result = run(stub, "acls", "list")
    assert result.exit_code == 1
    assert says in result.output and result.output.count("\n") == 1


# --- acls remove ----------------------------------------------------------------------


def deleted(body: DeleteAclsRequest) -> DeleteAclsResponse:
    return DeleteAclsResponse(
        filter_results=[
            dar.DeleteAclsFilterResult(
                error_message=None,
                matching_acls=[
                    dar.DeleteAclsMatchingAcl(
                        error_message=None, resource_type=2, resource_name="orders",
                        pattern_type=3, principal="User:alice", host="*", operation=3,
                        permission_type=3,
                    )
                ],
            )
            for _ in body.filters
        ]
    )  # fmt: skip


def test_remove_with_a_resource_is_literal_by_default_and_lists_what_went(
    stubs: list[StubBroker],
) -> None:
    stub = start(stubs, lambda _, body: deleted(body))
    result = run(
        stub, "acls", "remove", "--topic", "orders", "--allow-principal", "User:alice",
        "--operation", "read", "--operation", "write",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert versions(stub) == {(DeleteAclsRequest.API_KEY, 3)}
    (request,) = stub.received(DeleteAclsRequest.API_KEY)
    assert [
        (f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
         f.host_filter, f.operation, f.permission_type)
        for f in request.filters
    ] == [
        (ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", None, op,
         AclPermission.ALLOW)
        for op in (AclOperation.READ, AclOperation.WRITE)
    ]  # fmt: skip
    assert "Removed 1 ACL:" in result.stdout  # two filters matched the same one
    assert result.stdout.splitlines()[2].split() == [
        "TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"
    ]  # fmt: skip


def test_remove_without_a_resource_shows_the_matches_and_asks(stubs: list[StubBroker]) -> None:
    def answer(header: RequestHeader, body: Any) -> Any:
        if isinstance(body, DescribeAclsRequest):
            return described(ORDERS_READ, GROUP_ALL)
        return deleted(body)

    stub = start(stubs, answer)
    refused = run(stub, "acls", "remove", "--principal", "User:alice", input="n\n")
    assert refused.exit_code == 1
    assert "matches 2 ACLs" in refused.stdout and "app-" in refused.stdout
    assert "nothing removed" in refused.output
    assert stub.received(DeleteAclsRequest.API_KEY) == []
    (asked,) = stub.received(DescribeAclsRequest.API_KEY)
    assert (asked.pattern_type_filter, asked.principal_filter) == (PatternType.ANY, "User:alice")

    confirmed = run(stub, "acls", "remove", "--principal", "User:alice", input="y\n")
    assert confirmed.exit_code == 0, confirmed.output
    assert "Removed 1 ACL:" in confirmed.stdout
    (request,) = stub.received(DeleteAclsRequest.API_KEY)
    (only,) = request.filters
    assert (only.resource_type_filter, only.resource_name_filter, only.pattern_type_filter) == (
        ResourceType.ANY,
        None,
        PatternType.ANY,
    )

    stub.requests.clear()
    assert run(stub, "acls", "remove", "--yes").exit_code == 0
    assert stub.received(DescribeAclsRequest.API_KEY) == []
    assert len(stub.received(DeleteAclsRequest.API_KEY)) == 1


def test_remove_names_a_failed_filter_and_a_refusal(stubs: list[StubBroker]) -> None:
    codes = iter([ErrorCode.INVALID_REQUEST, ErrorCode.CLUSTER_AUTHORIZATION_FAILED])

    def answer(header: RequestHeader, body: Any) -> Any:
        code = next(codes)
        return DeleteAclsResponse(
            filter_results=[dar.DeleteAclsFilterResult(error_code=code, error_message=None)]
        )

    stub = start(stubs, answer)
    failed = run(stub, "acls", "remove", "--group", "g")
    assert failed.exit_code == 1
    assert "not removed: INVALID_REQUEST" in failed.stderr
    denied = run(stub, "acls", "remove", "--group", "g")
    assert denied.exit_code == 1 and "not authorized to delete ACLs" in denied.output


# --- users ----------------------------------------------------------------------------


def test_users_list_table_and_json(stubs: list[StubBroker]) -> None:
    response = DescribeUserScramCredentialsResponse(
        error_message=None,
        results=[
            dusr.DescribeUserScramCredentialsResult(
                user="admin", error_message=None,
                credential_infos=[dusr.CredentialInfo(mechanism=2, iterations=8192)],
            ),
            dusr.DescribeUserScramCredentialsResult(
                user="carol", error_message=None,
                credential_infos=[
                    dusr.CredentialInfo(mechanism=1, iterations=4096),
                    dusr.CredentialInfo(mechanism=2, iterations=4096),
                ],
            ),
        ],
    )  # fmt: skip
    stub = start(stubs, lambda _, body: response)
    table = run(stub, "users", "list")
    assert table.exit_code == 0, table.output
    assert [line.split() for line in table.stdout.splitlines()] == [
        ["USER", "MECHANISM", "ITERATIONS"],
        ["admin", "SCRAM-SHA-512", "8192"],
        ["carol", "SCRAM-SHA-256", "4096"],
        ["carol", "SCRAM-SHA-512", "4096"],
    ]
    as_json = run(stub, "users", "list", "--json")
    assert json.loads(as_json.stdout)[0] == {
        "user": "admin",
        "mechanism": "SCRAM-SHA-512",
        "iterations": 8192,
    }
    assert versions(stub) == {(DescribeUserScramCredentialsRequest.API_KEY, 0)}
    assert [r.users for r in stub.received(DescribeUserScramCredentialsRequest.API_KEY)] == [
        None,
        None,
    ]


def test_users_list_of_a_user_without_credentials_and_a_refusal(stubs: list[StubBroker]) -> None:
    answers = iter(
        [
            DescribeUserScramCredentialsResponse(
                error_message=None,
                results=[
                    dusr.DescribeUserScramCredentialsResult(
                        user="nobody", error_code=ErrorCode.RESOURCE_NOT_FOUND
                    )
                ],
            ),
            DescribeUserScramCredentialsResponse(
                error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message="x"
            ),
        ]
    )
    stub = start(stubs, lambda _, body: next(answers))
    missing = run(stub, "users", "list", "nobody")
    assert missing.exit_code == 1 and "nobody: no SCRAM credential" in missing.stderr
    (asked,) = stub.received(DescribeUserScramCredentialsRequest.API_KEY)
    assert [u.name for u in asked.users] == ["nobody"]
    denied = run(stub, "users", "list")
    assert denied.exit_code == 1
    assert "not authorized to describe SCRAM credentials" in denied.output


def altered(body: Any, code: int = 0) -> AlterUserScramCredentialsResponse:
    names = [u.name for u in body.upsertions] + [d.name for d in body.deletions]
    return AlterUserScramCredentialsResponse(
        results=[
            ausr.AlterUserScramCredentialsResult(user=n, error_code=code, error_message=None)
            for n in names
        ]
    )


def test_users_add_salts_here_and_never_prints_the_password(
    stubs: list[StubBroker], tmp_path: Path
) -> None:
    stub = start(stubs, lambda _, body: altered(body))
    path = tmp_path / "pw"
    path.write_text("s3cret-pass\n")
    result = run(
        stub, "users", "add", "carol", "--mechanism", "scram-sha-512", "--iterations", "8192",
        "--password-file", str(path),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stdout == "carol: SCRAM-SHA-512 credential set (8192 iterations)\n"
    assert versions(stub) == {(AlterUserScramCredentialsRequest.API_KEY, 0)}
    (request,) = stub.received(AlterUserScramCredentialsRequest.API_KEY)
    (upsertion,) = request.upsertions
    assert request.deletions == []
    assert (upsertion.name, upsertion.mechanism, upsertion.iterations) == ("carol", 2, 8192)
    assert len(upsertion.salt) == 32
    assert upsertion.salted_password == salted_password(
        SCRAM_SHA_512, "s3cret-pass", upsertion.salt, 8192
    )

    prompted = run(
        stub, "users", "add", "dave", "--mechanism", "SCRAM-SHA-256", input="hidden\nhidden\n"
    )
    assert prompted.exit_code == 0, prompted.output
    assert "hidden" not in prompted.output
    second = stub.received(AlterUserScramCredentialsRequest.API_KEY)[1].upsertions[0]
    assert second.salt != upsertion.salt
    assert second.salted_password == salted_password(SCRAM_SHA_256, "hidden", second.salt, 4096)


def test_users_add_refused_names_the_error(stubs: list[StubBroker]) -> None:
    stub = start(stubs, lambda _, body: altered(body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    result = run(stub, "users", "add", "carol", "--mechanism", "SCRAM-SHA-512", "--password", "p")
    assert result.exit_code == 1
    assert "carol: not set: not authorized to alter SCRAM credentials" in result.output
    assert "ALTER on the cluster" in result.output


def test_users_remove_deletes_one_mechanism(stubs: list[StubBroker]) -> None:
    codes = iter([ErrorCode.NONE, ErrorCode.RESOURCE_NOT_FOUND])
    stub = start(stubs, lambda _, body: altered(body, next(codes)))
    removed = run(stub, "users", "remove", "carol", "--mechanism", "SCRAM-SHA-256")
    assert removed.exit_code == 0, removed.output
    assert removed.stdout == "carol: SCRAM-SHA-256 credential removed\n"
    (request, *_) = stub.received(AlterUserScramCredentialsRequest.API_KEY)
    assert [(d.name, d.mechanism) for d in request.deletions] == [("carol", 1)]
    assert request.upsertions == []
    missing = run(stub, "users", "remove", "carol", "--mechanism", "SCRAM-SHA-256")
    assert missing.exit_code == 1
    assert "carol has no SCRAM-SHA-256 credential" in missing.output
