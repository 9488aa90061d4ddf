"""CreateAcls, DescribeAcls and DeleteAcls handlers: ACLs created go into the metadata
log and come back from Describe grouped by resource; Delete removes what each filter
matches; every refusal carries Kafka's error code and message for that creation or
filter alone; a request naming UNKNOWN closes the connection, as Kafka's parser does."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest

from odradek.broker.acl_requests import (
    CREATE_VERSIONS,
    DELETE_VERSIONS,
    DESCRIBE_VERSIONS,
    MAX_RECORDS_PER_REQUEST,
    handle_create_acls,
    handle_delete_acls,
    handle_describe_acls,
)
from odradek.broker.authorization import Authorization
from odradek.broker.effects import CommitRecords, NoReply, Reply
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from odradek.protocol.messages.create_acls_request import AclCreation
from odradek.protocol.messages.delete_acls_request import DeleteAclsFilter
from odradek.protocol.metadata import AccessControlEntryRecord, RemoveAccessControlEntryRecord
from odradek.security.acls import (
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
    binding_from_record,
)
from tests.broker.harness import Harness, header, new_harness, versions

TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
CLUSTER = ResourceType.CLUSTER
LITERAL = PatternType.LITERAL
PREFIXED = PatternType.PREFIXED
READ = AclOperation.READ
WRITE = AclOperation.WRITE
ALLOW = AclPermission.ALLOW
DENY = AclPermission.DENY
ANY = 1  # the ANY id of all four enums

# (resource type, name, pattern, principal, host, operation, permission)
Acl = tuple[int, str, int, str, str, int, int]


def secured_harness() -> Harness:
    """A broker with the authorizer on: without one the ACL APIs answer SECURITY_DISABLED.
    The handlers are called directly, so the cluster check in front of them is not."""
    h = new_harness()
    h.state.authorization = Authorization(frozenset(), False)
    return h


def test_without_an_authorizer_the_acl_apis_answer_security_disabled() -> None:
    h = new_harness()
    created = create(h, [creation()])
    assert results(created) == [(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")]
    assert describe(h).error_code == ErrorCode.SECURITY_DISABLED
    deleted = delete(h, [delete_filter()])
    assert [r.error_code for r in deleted.filter_results] == [ErrorCode.SECURITY_DISABLED]
    assert h.image.acls == {}


def creation(
    name: str = "orders",
    resource_type: int = TOPIC,
    pattern: int = LITERAL,
    principal: str = "User:alice",
    host: str = "*",
    operation: int = READ,
    permission: int = ALLOW,
) -> AclCreation:
    return AclCreation(
        resource_type=resource_type,
        resource_name=name,
        resource_pattern_type=pattern,
        principal=principal,
        host=host,
        operation=operation,
        permission_type=permission,
    )


def acl_of(c: AclCreation) -> Acl:
    return (
        c.resource_type,
        c.resource_name,
        c.resource_pattern_type,
        c.principal,
        c.host,
        c.operation,
        c.permission_type,
    )


def create(h: Harness, creations: list[AclCreation], version: int = 3) -> CreateAclsResponse:
    response: CreateAclsResponse = h.through_router(
        CreateAclsRequest.API_KEY,
        CREATE_VERSIONS,
        lambda hd, body: handle_create_acls(h.state, hd, body),
        CreateAclsRequest(creations=creations),
        version,
    )
    return response


def describe(h: Harness, version: int = 3, **fields: Any) -> DescribeAclsResponse:
    request = DescribeAclsRequest(**_everything(fields, version))
    response: DescribeAclsResponse = h.through_router(
        DescribeAclsRequest.API_KEY,
        DESCRIBE_VERSIONS,
        lambda hd, body: handle_describe_acls(h.state, hd, body),
        request,
        version,
    )
    return response


def delete(h: Harness, filters: list[DeleteAclsFilter], version: int = 3) -> DeleteAclsResponse:
    if version == 0:
        for f in filters:
            f.pattern_type_filter = _v0_pattern(f.pattern_type_filter)
    response: DeleteAclsResponse = h.through_router(
        DeleteAclsRequest.API_KEY,
        DELETE_VERSIONS,
        lambda hd, body: handle_delete_acls(h.state, hd, body),
        DeleteAclsRequest(filters=filters),
        version,
    )
    return response


def _v0_pattern(pattern: int) -> int:
    """What a client sends at version 0, which has no pattern type: LITERAL (the schema's
    default) for ANY, as Kafka's client does; anything else it cannot send."""
    assert pattern in (ANY, LITERAL)
    return LITERAL


def _everything(fields: dict[str, Any], version: int = 3) -> dict[str, Any]:
    """A filter matching every ACL, with ``fields`` on top."""
    base: dict[str, Any] = {
        "resource_type_filter": ANY,
        "resource_name_filter": None,
        "pattern_type_filter": ANY,
        "principal_filter": None,
        "host_filter": None,
        "operation": ANY,
        "permission_type": ANY,
    }
    merged = {**base, **fields}
    if version == 0:
        merged["pattern_type_filter"] = _v0_pattern(merged["pattern_type_filter"])
    return merged


def every_acl() -> DescribeAclsRequest:
    """A DescribeAcls (v1 and up) of every ACL."""
    return DescribeAclsRequest(**_everything({}))


def delete_filter(**fields: Any) -> DeleteAclsFilter:
    return DeleteAclsFilter(**_everything(fields))


def stored(h: Harness) -> set[Acl]:
    """Every ACL the image holds."""
    result: set[Acl] = set()
    for record in h.image.acls.values():
        binding = binding_from_record(record)
        assert binding is not None
        result.add(
            (
                binding.resource_type,
                binding.resource_name,
                binding.pattern_type,
                binding.principal,
                binding.host,
                binding.operation,
                binding.permission,
            )
        )
    return result


def described(response: DescribeAclsResponse) -> list[Acl]:
    assert response.error_code == ErrorCode.NONE
    assert response.error_message is None
    return [
        (
            r.resource_type,
            r.resource_name,
            r.pattern_type,
            a.principal,
            a.host,
            a.operation,
            a.permission_type,
        )
        for r in response.resources
        for a in r.acls
    ]


def results(response: CreateAclsResponse) -> list[tuple[int, str | None]]:
    return [(r.error_code, r.error_message) for r in response.results]


OK = (ErrorCode.NONE, None)


# Create ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", versions(CREATE_VERSIONS))
def test_created_acls_are_committed_and_described_at_every_version(version: int) -> None:
    h = secured_harness()
    creations = [creation(), creation("payments", principal="User:bob", operation=WRITE)]
    if version >= 1:
        creations.append(creation("pay", pattern=PREFIXED, permission=DENY))
    response = create(h, creations, version)
    assert results(response) == [OK] * len(creations)
    [batch] = h.committed
    assert all(isinstance(r, AccessControlEntryRecord) for r in batch)
    assert stored(h) == {acl_of(c) for c in creations}
    assert sorted(described(describe(h, version))) == sorted(acl_of(c) for c in creations)


def test_version_0_creates_literal_acls_and_describes_only_those() -> None:
    h = secured_harness()
    create(h, [creation("pay", pattern=PREFIXED), creation("orders")], 1)
    # Version 0 carries no pattern type: LITERAL stands for it, in both directions.
    create(h, [creation("invoices")], 0)
    assert h.committed[-1][0].pattern_type == LITERAL
    assert [acl[1] for acl in described(describe(h, 0))] == ["invoices", "orders"]


def test_each_new_acl_gets_its_own_fresh_id() -> None:
    h = secured_harness()
    create(h, [creation("a"), creation("b")])
    create(h, [creation("c")])
    ids = list(h.image.acls)
    assert len(set(ids)) == 3
    assert uuid.UUID(int=0) not in ids and uuid.UUID(int=1) not in ids
    [first, second] = h.committed
    assert [r.id for r in first + second] == ids


def test_an_acl_already_there_or_repeated_in_the_request_succeeds_without_a_record() -> None:
    h = secured_harness()
    create(h, [creation()])
    before = dict(h.image.acls)
    response = create(h, [creation(), creation("other"), creation("other")])
    assert results(response) == [OK, OK, OK]
    assert [len(batch) for batch in h.committed] == [1, 1]
    assert len(h.image.acls) == 2
    assert before.items() <= h.image.acls.items()
    # Nothing new at all: answered without a commit.
    assert results(create(h, [creation("other")])) == [OK]
    assert len(h.committed) == 2


def test_acls_that_differ_in_any_one_field_are_different_acls() -> None:
    h = secured_harness()
    variants = [
        creation(),
        creation(resource_type=GROUP),
        creation("orders2"),
        creation(pattern=PREFIXED),
        creation(principal="User:bob"),
        creation(host="10.0.0.1"),
        creation(operation=WRITE),
        creation(permission=DENY),
    ]
    create(h, variants)
    assert len(h.image.acls) == len(variants)


_INVALID = [
    pytest.param(
        creation("my-cluster", resource_type=CLUSTER),
        "The only valid name for the CLUSTER resource is kafka-cluster",
        id="cluster-name",
    ),
    pytest.param(
        creation("", resource_type=CLUSTER),
        "The only valid name for the CLUSTER resource is kafka-cluster",
        id="cluster-empty-name",
    ),
    pytest.param(creation(""), "Invalid empty resource name", id="empty-name"),
    pytest.param(creation(resource_type=ANY), "Invalid resourceType ANY", id="resource-any"),
    pytest.param(creation(resource_type=42), "Invalid resourceType UNKNOWN", id="resource-42"),
    pytest.param(creation(pattern=ANY), "Invalid patternType ANY", id="pattern-any"),
    pytest.param(
        creation(pattern=PatternType.MATCH), "Invalid patternType MATCH", id="pattern-match"
    ),
    pytest.param(creation(pattern=9), "Invalid patternType UNKNOWN", id="pattern-9"),
    pytest.param(creation(operation=ANY), "Invalid operation ANY", id="operation-any"),
    pytest.param(creation(operation=99), "Invalid operation UNKNOWN", id="operation-99"),
    pytest.param(creation(permission=ANY), "Invalid permissionType ANY", id="permission-any"),
    pytest.param(creation(permission=7), "Invalid permissionType UNKNOWN", id="permission-7"),
    pytest.param(
        creation(principal="alice"),
        "Could not parse principal from `alice` (no colon is present separating the "
        "principal type from the principal name)",
        id="principal-no-colon",
    ),
    pytest.param(
        creation(principal="User:"),
        "Could not parse principal from `User:` (the principal type and the principal "
        "name must not be empty)",
        id="principal-no-name",
    ),
    pytest.param(
        creation(principal=":alice"),
        "Could not parse principal from `:alice` (the principal type and the principal "
        "name must not be empty)",
        id="principal-no-type",
    ),
]


@pytest.mark.parametrize(("invalid", "message"), _INVALID)
def test_an_invalid_creation_is_refused_alone_with_kafkas_message(
    invalid: AclCreation, message: str
) -> None:
    h = secured_harness()
    response = create(h, [creation("before"), invalid, creation("after")])
    assert results(response) == [OK, (ErrorCode.INVALID_REQUEST, message), OK]
    assert {acl[1] for acl in stored(h)} == {"before", "after"}


def test_the_cluster_and_other_principal_types_are_accepted() -> None:
    h = secured_harness()
    creations = [
        creation("kafka-cluster", resource_type=CLUSTER, operation=AclOperation.ALTER),
        creation("ops", resource_type=GROUP, principal="Group:ops"),
        creation("*", principal="User:*"),
        creation("tx", resource_type=ResourceType.TRANSACTIONAL_ID, operation=AclOperation.ALL),
        creation("tok", resource_type=ResourceType.DELEGATION_TOKEN),
        creation("bob", resource_type=ResourceType.USER, operation=AclOperation.CREATE_TOKENS),
    ]
    assert results(create(h, creations)) == [OK] * len(creations)
    assert stored(h) == {acl_of(c) for c in creations}


def test_an_invalid_only_request_commits_nothing() -> None:
    h = secured_harness()
    outcome = handle_create_acls(
        h.state, header(CreateAclsRequest.API_KEY, 3), CreateAclsRequest(creations=[creation("")])
    )
    assert isinstance(outcome, Reply)


@pytest.mark.parametrize(
    "field", ["resource_type", "resource_pattern_type", "operation", "permission_type"]
)
def test_a_creation_naming_unknown_closes_the_connection(field: str) -> None:
    # Kafka's CreateAclsRequest refuses UNKNOWN (id 0) while parsing: the broker closes.
    h = secured_harness()
    bad = creation()
    setattr(bad, field, 0)
    outcome = handle_create_acls(
        h.state,
        header(CreateAclsRequest.API_KEY, 3),
        CreateAclsRequest(creations=[creation("fine"), bad]),
    )
    assert isinstance(outcome, NoReply)
    assert outcome.close_reason == "CreatableAcls contain unknown elements"
    assert h.image.acls == {}


def test_more_than_ten_thousand_new_acls_are_refused_whole() -> None:
    h = secured_harness()
    many = [creation(f"t{i}") for i in range(MAX_RECORDS_PER_REQUEST + 1)]
    response = create(h, [creation(""), *many])
    too_many = (ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
    # What the broker refused keeps its own error; the rest share the controller's.
    assert results(response)[0] == (ErrorCode.INVALID_REQUEST, "Invalid empty resource name")
    assert set(results(response)[1:]) == {too_many}
    assert h.committed == [] and h.image.acls == {}


def test_ten_thousand_new_acls_and_repeats_beyond_them_are_accepted() -> None:
    h = secured_harness()
    many = [creation(f"t{i}") for i in range(MAX_RECORDS_PER_REQUEST)]
    response = create(h, [*many, creation("t0"), creation("t1")])
    assert set(results(response)) == {OK}
    assert len(h.image.acls) == MAX_RECORDS_PER_REQUEST


# Describe ----------------------------------------------------------------------------

_SAMPLE = [
    creation("orders"),
    creation("orders", principal="User:bob", operation=WRITE),
    creation("orders", pattern=PREFIXED, permission=DENY),
    creation("ord", pattern=PREFIXED, host="10.0.0.1"),
    creation("*"),
    creation("payments", principal="User:bob"),
    creation("orders", resource_type=GROUP),
    creation("kafka-cluster", resource_type=CLUSTER, operation=AclOperation.DESCRIBE),
]


def sample() -> Harness:
    h = secured_harness()
    assert results(create(h, _SAMPLE)) == [OK] * len(_SAMPLE)
    return h


def test_describe_groups_acls_by_resource_pattern_in_a_stable_order() -> None:
    response = describe(sample())
    patterns = [(r.resource_type, r.resource_name, r.pattern_type) for r in response.resources]
    assert patterns == [
        (TOPIC, "*", LITERAL),
        (TOPIC, "ord", PREFIXED),
        (TOPIC, "orders", LITERAL),
        (TOPIC, "orders", PREFIXED),
        (TOPIC, "payments", LITERAL),
        (GROUP, "orders", LITERAL),
        (CLUSTER, "kafka-cluster", LITERAL),
    ]
    orders = response.resources[2]
    assert [(a.principal, a.operation) for a in orders.acls] == [
        ("User:alice", READ),
        ("User:bob", WRITE),
    ]


@pytest.mark.parametrize(
    ("fields", "names"),
    [
        pytest.param({}, None, id="everything"),
        pytest.param(
            {"resource_type_filter": TOPIC, "resource_name_filter": "orders"},
            [("orders", LITERAL), ("orders", PREFIXED)],
            id="name-any-pattern",
        ),
        pytest.param(
            {"resource_type_filter": TOPIC, "pattern_type_filter": LITERAL},
            [("*", LITERAL), ("orders", LITERAL), ("payments", LITERAL)],
            id="literal",
        ),
        pytest.param(
            {
                "resource_type_filter": TOPIC,
                "resource_name_filter": "orders",
                "pattern_type_filter": PatternType.MATCH,
            },
            # MATCH: what applies to the topic "orders": itself, the wildcard, prefixes.
            [("*", LITERAL), ("ord", PREFIXED), ("orders", LITERAL), ("orders", PREFIXED)],
            id="match",
        ),
        pytest.param(
            {"principal_filter": "User:bob"},
            [("orders", LITERAL), ("payments", LITERAL)],
            id="principal",
        ),
        pytest.param({"host_filter": "10.0.0.1"}, [("ord", PREFIXED)], id="host"),
        pytest.param({"operation": WRITE}, [("orders", LITERAL)], id="operation"),
        pytest.param({"permission_type": DENY}, [("orders", PREFIXED)], id="permission"),
        pytest.param({"resource_type_filter": GROUP}, [("orders", LITERAL)], id="group"),
        # Ids Kafka does not know are UNKNOWN once parsed, which matches nothing.
        pytest.param({"resource_type_filter": 42}, [], id="unknown-type"),
        pytest.param({"pattern_type_filter": 9}, [], id="unknown-pattern"),
        pytest.param({"operation": 99}, [], id="unknown-operation"),
    ],
)
def test_describe_returns_what_the_filter_matches(
    fields: dict[str, Any], names: list[tuple[str, int]] | None
) -> None:
    h = sample()
    got = described(describe(h, **fields))
    if names is None:
        assert sorted(got) == sorted(acl_of(c) for c in _SAMPLE)
    else:
        topics_and_groups = [(acl[1], acl[2]) for acl in got if acl[0] != CLUSTER]
        assert sorted(set(topics_and_groups)) == sorted(names)


def test_describe_with_no_acls_is_empty() -> None:
    assert describe(secured_harness()).resources == []


def test_describe_shows_one_binding_held_under_two_ids_once() -> None:
    h = secured_harness()
    record = AccessControlEntryRecord(
        id=uuid.UUID(int=0xA1),
        resource_type=TOPIC,
        resource_name="orders",
        pattern_type=LITERAL,
        principal="User:alice",
        host="*",
        operation=READ,
        permission_type=ALLOW,
    )
    other_id = dataclasses.replace(record, id=uuid.UUID(int=0xA2))
    h.replay([record, other_id])
    assert described(describe(h)) == [acl_of(creation())]


@pytest.mark.parametrize(
    "field", ["resource_type_filter", "pattern_type_filter", "operation", "permission_type"]
)
def test_a_describe_naming_unknown_closes_the_connection(field: str) -> None:
    h = secured_harness()
    outcome = handle_describe_acls(
        h.state,
        header(DescribeAclsRequest.API_KEY, 3),
        DescribeAclsRequest(**_everything({field: 0})),
    )
    assert outcome == NoReply(close_reason="DescribeAclsRequest contains UNKNOWN elements")


# Delete ------------------------------------------------------------------------------


def deleted(response: DeleteAclsResponse) -> list[tuple[int, str | None, list[Acl]]]:
    return [
        (
            r.error_code,
            r.error_message,
            [
                (
                    m.resource_type,
                    m.resource_name,
                    m.pattern_type,
                    m.principal,
                    m.host,
                    m.operation,
                    m.permission_type,
                )
                for m in r.matching_acls
            ],
        )
        for r in response.filter_results
    ]


def test_each_filter_deletes_and_answers_what_it_matches() -> None:
    h = sample()
    response = delete(
        h,
        [
            delete_filter(principal_filter="User:bob"),
            delete_filter(resource_type_filter=GROUP),
            delete_filter(resource_name_filter="nothing"),
        ],
    )
    bob = [acl_of(_SAMPLE[1]), acl_of(_SAMPLE[5])]
    assert deleted(response) == [
        (ErrorCode.NONE, None, bob),
        (ErrorCode.NONE, None, [acl_of(_SAMPLE[6])]),
        (ErrorCode.NONE, None, []),
    ]
    assert all(
        m.error_code == 0 and m.error_message is None
        for m in response.filter_results[0].matching_acls
    )
    [_, batch] = h.committed
    assert all(isinstance(r, RemoveAccessControlEntryRecord) for r in batch)
    assert len(batch) == 3
    assert stored(h) == {acl_of(c) for i, c in enumerate(_SAMPLE) if i not in (1, 5, 6)}


def test_an_acl_matched_by_two_filters_is_removed_once_and_reported_by_both() -> None:
    h = sample()
    response = delete(
        h,
        [
            delete_filter(resource_name_filter="payments"),
            delete_filter(principal_filter="User:bob", resource_name_filter="payments"),
        ],
    )
    payments = [acl_of(_SAMPLE[5])]
    assert deleted(response) == [(0, None, payments), (0, None, payments)]
    [_, batch] = h.committed
    assert batch == [RemoveAccessControlEntryRecord(id=batch[0].id)]


def test_a_match_filter_deletes_every_acl_that_applies_to_the_resource() -> None:
    h = sample()
    delete(
        h,
        [
            delete_filter(
                resource_type_filter=TOPIC,
                resource_name_filter="orders",
                pattern_type_filter=PatternType.MATCH,
            )
        ],
    )
    assert {(acl[0], acl[1], acl[2]) for acl in stored(h)} == {
        (TOPIC, "payments", LITERAL),
        (GROUP, "orders", LITERAL),
        (CLUSTER, "kafka-cluster", LITERAL),
    }


def test_a_filter_matching_nothing_commits_nothing() -> None:
    h = sample()
    committed = len(h.committed)
    response = delete(h, [delete_filter(principal_filter="User:nobody")])
    assert deleted(response) == [(0, None, [])]
    assert len(h.committed) == committed


def test_version_0_deletes_only_literal_acls() -> None:
    h = sample()
    delete(h, [delete_filter(resource_name_filter="orders")], 0)
    names = {(acl[0], acl[1], acl[2]) for acl in stored(h)}
    assert (TOPIC, "orders", PREFIXED) in names
    assert (TOPIC, "orders", LITERAL) not in names
    assert (GROUP, "orders", LITERAL) not in names


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        pytest.param({"resource_type_filter": 42}, "Unknown patternFilter.", id="resource-type"),
        pytest.param({"pattern_type_filter": 9}, "Unknown patternFilter.", id="pattern-type"),
        pytest.param({"operation": 99}, "Unknown entryFilter.", id="operation"),
        pytest.param({"permission_type": 7}, "Unknown entryFilter.", id="permission"),
    ],
)
def test_a_filter_with_an_unknown_id_is_refused_alone(fields: dict[str, Any], message: str) -> None:
    h = sample()
    response = delete(h, [delete_filter(**fields), delete_filter(resource_type_filter=GROUP)])
    assert deleted(response) == [
        (ErrorCode.INVALID_REQUEST, message, []),
        (ErrorCode.NONE, None, [acl_of(_SAMPLE[6])]),
    ]


@pytest.mark.parametrize(
    "field", ["resource_type_filter", "pattern_type_filter", "operation", "permission_type"]
)
def test_a_delete_naming_unknown_closes_the_connection(field: str) -> None:
    h = sample()
    outcome = handle_delete_acls(
        h.state,
        header(DeleteAclsRequest.API_KEY, 3),
        DeleteAclsRequest(filters=[delete_filter(), delete_filter(**{field: 0})]),
    )
    assert outcome == NoReply(close_reason="Filters contain UNKNOWN elements")
    assert len(h.image.acls) == len(_SAMPLE)


def _many_acls(h: Harness, count: int) -> None:
    # Straight into the image: replaying them one by one would copy the map each time.
    h.state.image.acls = {
        uuid.UUID(int=i + 16): AccessControlEntryRecord(
            id=uuid.UUID(int=i + 16),
            resource_type=TOPIC,
            resource_name=f"t{i}",
            pattern_type=LITERAL,
            principal="User:alice",
            host="*",
            operation=READ,
            permission_type=ALLOW,
        )
        for i in range(count)
    }


def test_a_filter_taking_the_request_past_ten_thousand_removals_removes_nothing() -> None:
    h = secured_harness()
    _many_acls(h, MAX_RECORDS_PER_REQUEST + 1)
    outcome = handle_delete_acls(
        h.state,
        header(DeleteAclsRequest.API_KEY, 3),
        DeleteAclsRequest(
            filters=[
                delete_filter(resource_name_filter="t0"),
                delete_filter(),
                delete_filter(resource_name_filter="t1"),
            ]
        ),
    )
    assert isinstance(outcome, CommitRecords)
    assert [type(r) for r in outcome.records] == [RemoveAccessControlEntryRecord] * 2
    response = outcome.then()
    assert isinstance(response, Reply)
    assert [(r.error_code, len(r.matching_acls)) for r in response.response.filter_results] == [
        (0, 1),
        (ErrorCode.UNKNOWN_SERVER_ERROR, 0),
        (0, 1),
    ]
    assert response.response.filter_results[1].error_message == (
        "Cannot remove more than 10000 acls in a single delete operation."
    )


def test_ten_thousand_removals_in_one_request_are_accepted() -> None:
    h = secured_harness()
    _many_acls(h, MAX_RECORDS_PER_REQUEST)
    response = delete(h, [delete_filter()])
    assert len(response.filter_results[0].matching_acls) == MAX_RECORDS_PER_REQUEST
    assert h.image.acls == {}
