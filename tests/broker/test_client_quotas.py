"""DescribeClientQuotas and AlterClientQuotas handlers: quotas set go into the metadata
log as ClientQuotaRecords and come back from Describe by filter; each refused entity
carries Kafka's error code and message on its own; validate_only writes nothing; a bad
describe filter fails the whole request; the cluster check answers each API's shape."""

from __future__ import annotations

from typing import Any

import pytest

from odradek.broker.authorization import Authorization, cluster_guarded
from odradek.broker.client_quotas import (
    ALTER_VERSIONS,
    DESCRIBE_VERSIONS,
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    handle_alter_client_quotas,
    handle_describe_client_quotas,
)
from odradek.broker.cluster_rules import CLUSTER_RULES
from odradek.broker.effects import Reply
from odradek.broker.router import Request
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from odradek.protocol.messages import alter_client_quotas_request as ar
from odradek.protocol.messages.describe_client_quotas_request import ComponentData
from odradek.protocol.metadata import ClientQuotaRecord
from odradek.protocol.metadata.client_quota_record import EntityData
from odradek.security.acls import AclOperation
from odradek.security.principal import KafkaPrincipal
from tests.broker.harness import Harness, new_harness, versions

Entity = list[tuple[str, str | None]]
Op = tuple[str, float | None]  # None: remove


def entry(entity: Entity, *ops: Op) -> ar.EntryData:
    return ar.EntryData(
        entity=[ar.EntityData(entity_type=t, entity_name=n) for t, n in entity],
        ops=[ar.OpData(key=k, value=0.0 if v is None else v, remove=v is None) for k, v in ops],
    )


def alter(
    h: Harness, entries: list[ar.EntryData], version: int = 1, validate_only: bool = False
) -> list[tuple[Entity, int, str | None]]:
    response: AlterClientQuotasResponse = h.through_router(
        AlterClientQuotasRequest.API_KEY,
        ALTER_VERSIONS,
        lambda hd, body: handle_alter_client_quotas(h.state, hd, body),
        AlterClientQuotasRequest(entries=entries, validate_only=validate_only),
        version,
    )
    return [
        ([(e.entity_type, e.entity_name) for e in r.entity], r.error_code, r.error_message)
        for r in response.entries
    ]


def describe(
    h: Harness,
    components: list[tuple[str, int, str | None]],
    strict: bool = False,
    version: int = 1,
) -> DescribeClientQuotasResponse:
    response: DescribeClientQuotasResponse = h.through_router(
        DescribeClientQuotasRequest.API_KEY,
        DESCRIBE_VERSIONS,
        lambda hd, body: handle_describe_client_quotas(h.state, hd, body),
        DescribeClientQuotasRequest(
            components=[
                ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in components
            ],
            strict=strict,
        ),
        version,
    )
    return response


def found(response: DescribeClientQuotasResponse) -> list[tuple[Entity, dict[str, float]]]:
    assert response.error_code == 0, response.error_message
    assert response.entries is not None
    return [
        (
            [(e.entity_type, e.entity_name) for e in r.entity],
            {v.key: v.value for v in r.values},
        )
        for r in response.entries
    ]


ALICE: Entity = [("user", "alice")]
ALICE_APP: Entity = [("user", "alice"), ("client-id", "app")]
DEFAULT_USER: Entity = [("user", None)]
APP: Entity = [("client-id", "app")]
DEFAULT_CLIENT: Entity = [("client-id", None)]


def populated() -> Harness:
    h = new_harness()
    results = alter(
        h,
        [
            entry(ALICE, ("producer_byte_rate", 1024), ("request_percentage", 50.5)),
            entry(ALICE_APP, ("consumer_byte_rate", 2048)),
            entry(DEFAULT_USER, ("producer_byte_rate", 512)),
            entry(APP, ("controller_mutation_rate", 2.5)),
            entry(DEFAULT_CLIENT, ("consumer_byte_rate", 100)),
            entry([("ip", "10.0.0.1")], ("connection_creation_rate", 10)),
            entry([("ip", None)], ("connection_creation_rate", 5)),
        ],
    )
    assert all(code == 0 and message is None for _, code, message in results)
    return h


@pytest.mark.parametrize("version", versions(ALTER_VERSIONS))
def test_alter_writes_records_and_describe_finds_them(version: int) -> None:
    h = new_harness()
    results = alter(
        h, [entry(ALICE_APP, ("producer_byte_rate", 1024), ("consumer_byte_rate", 2048))], version
    )
    assert results == [(ALICE_APP, 0, None)]
    assert len(h.committed) == 1
    assert {r.key: r.value for r in h.committed[0]} == {
        "producer_byte_rate": 1024,
        "consumer_byte_rate": 2048,
    }
    key = (("client-id", "app"), ("user", "alice"))
    assert h.image.client_quotas == {
        key: {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}
    }
    for dversion in versions(DESCRIBE_VERSIONS):
        assert found(describe(h, [], version=dversion)) == [
            (
                [("client-id", "app"), ("user", "alice")],
                {"consumer_byte_rate": 2048.0, "producer_byte_rate": 1024.0},
            )
        ]


def test_remove_and_unchanged_values_write_only_what_changes() -> None:
    h = populated()
    h.committed.clear()
    # Same value again and removal of a missing key: nothing to write, still success.
    assert alter(h, [entry(ALICE, ("producer_byte_rate", 1024), ("consumer_byte_rate", None))]) == [
        (ALICE, 0, None)
    ]
    assert h.committed == []
    alter(h, [entry(ALICE, ("producer_byte_rate", None), ("request_percentage", None))])
    assert [r.remove for r in h.committed[0]] == [True, True]
    assert (("user", "alice"),) not in h.image.client_quotas


def test_validate_only_checks_but_writes_nothing() -> None:
    h = new_harness()
    results = alter(
        h,
        [entry(ALICE, ("producer_byte_rate", 10)), entry(APP, ("producer_byte_rate", -1))],
        validate_only=True,
    )
    assert results == [
        (ALICE, 0, None),
        (APP, ErrorCode.INVALID_REQUEST, "Quota producer_byte_rate must be greater than 0"),
    ]
    assert h.committed == []
    assert h.image.client_quotas == {}


REFUSALS = [
    pytest.param(
        [], [("producer_byte_rate", 1.0)], "Invalid empty client quota entity", id="empty"
    ),
    pytest.param(
        [("group", "g")],
        [("producer_byte_rate", 1.0)],
        "Unhandled client quota entity type: group",
        id="unknown-type",
    ),
    pytest.param(
        [("user", "")], [("producer_byte_rate", 1.0)], "Empty user not supported", id="empty-name"
    ),
    pytest.param(
        [("user", "a"), ("user", "b")],
        [("producer_byte_rate", 1.0)],
        "Invalid client quota entity, duplicate entity entry user",
        id="type-twice",
    ),
    pytest.param(
        [("user", "a"), ("ip", "10.0.0.1")],
        [("connection_creation_rate", 1.0)],
        "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
        id="ip-with-user",
    ),
    pytest.param(
        [("ip", "not an address")],
        [("connection_creation_rate", 1.0)],
        "not an address is not a valid IP or resolvable host.",
        id="bad-ip",
    ),
    pytest.param(
        [("ip", "10.0.0.1")],
        [("producer_byte_rate", 1.0)],
        "Invalid configuration key producer_byte_rate",
        id="ip-takes-only-connections",
    ),
    pytest.param(
        [("user", "a")],
        [("connection_creation_rate", 1.0)],
        "Invalid configuration key connection_creation_rate",
        id="user-takes-no-connections",
    ),
    pytest.param(
        [("user", "a")],
        [("bogus", 1.0)],
        "Invalid configuration key bogus",
        id="unknown-key",
    ),
    pytest.param(
        [("user", "a")],
        [("producer_byte_rate", 0.0)],
        "Quota producer_byte_rate must be greater than 0",
        id="zero-bytes",
    ),
    pytest.param(
        [("client-id", "c")],
        [("request_percentage", 0.0)],
        "Quota request_percentage must be greater than 0",
        id="zero-request-percentage",
    ),
    pytest.param(
        [("user", "a")],
        [("request_percentage", float("nan"))],
        "Quota request_percentage must be greater than 0",
        id="nan",
    ),
    pytest.param(
        [("user", "a")],
        [("controller_mutation_rate", -1.0)],
        "Quota controller_mutation_rate must be 0 or more",
        id="negative-mutations",
    ),
    pytest.param(
        [("user", "a")],
        [("consumer_byte_rate", 10.5)],
        "consumer_byte_rate cannot be a fractional value.",
        id="fractional-bytes",
    ),
    pytest.param(
        [("user", "a")],
        [("producer_byte_rate", 1e19)],
        "Proposed value for producer_byte_rate is too large for a LONG.",
        id="too-large-long",
    ),
    pytest.param(
        [("ip", None)],
        [("connection_creation_rate", 2.0**31)],
        "Proposed value for connection_creation_rate is too large for an INT.",
        id="too-large-int",
    ),
    pytest.param(
        [("user", "a")],
        [("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)],
        "Ignoring duplicate entity ClientQuotaEntity(entries={user=a})",
        id="key-twice",
    ),
]


@pytest.mark.parametrize(("entity", "ops", "message"), REFUSALS)
def test_refusals_carry_kafkas_message_and_leave_the_others(
    entity: Entity, ops: list[Op], message: str
) -> None:
    h = new_harness()
    results = alter(h, [entry(entity, *ops), entry(APP, ("producer_byte_rate", 7))])
    assert results == [(entity, ErrorCode.INVALID_REQUEST, message), (APP, 0, None)]
    assert h.image.client_quotas == {(("client-id", "app"),): {"producer_byte_rate": 7.0}}


def test_accepted_edge_values() -> None:
    h = new_harness()
    results = alter(
        h,
        [
            entry(ALICE, ("controller_mutation_rate", 0.0), ("request_percentage", 0.001)),
            entry([("ip", "::1")], ("connection_creation_rate", 3)),
            entry(APP, ("producer_byte_rate", 5.0000001)),  # within Kafka's 1e-6
        ],
    )
    assert [code for _, code, _ in results] == [0, 0, 0]


def test_an_entity_altered_twice_is_refused_whole() -> None:
    h = new_harness()
    results = alter(
        h,
        [
            entry(ALICE_APP, ("producer_byte_rate", 1)),
            entry(ALICE, ("producer_byte_rate", 2)),
            # The same entity, its types in the other order.
            entry([("client-id", "app"), ("user", "alice")], ("consumer_byte_rate", 3)),
        ],
    )
    text = "Ignoring duplicate entity ClientQuotaEntity(entries={client-id=app, user=alice})"
    assert results == [(ALICE_APP, ErrorCode.INVALID_REQUEST, text), (ALICE, 0, None)]
    assert h.image.client_quotas == {(("user", "alice"),): {"producer_byte_rate": 2.0}}


def test_describe_match_types() -> None:
    h = populated()
    exact = found(describe(h, [("user", MATCH_EXACT, "alice")]))
    assert [e for e, _ in exact] == [[("client-id", "app"), ("user", "alice")], ALICE]
    strict = found(describe(h, [("user", MATCH_EXACT, "alice")], strict=True))
    assert strict == [(ALICE, {"producer_byte_rate": 1024.0, "request_percentage": 50.5})]
    assert [e for e, _ in found(describe(h, [("user", MATCH_DEFAULT, None)]))] == [DEFAULT_USER]
    specified = found(describe(h, [("user", MATCH_SPECIFIED, None)]))
    assert [e for e, _ in specified] == [
        [("client-id", "app"), ("user", "alice")],
        DEFAULT_USER,
        ALICE,
    ]
    clients = found(describe(h, [("client-id", MATCH_SPECIFIED, None)], strict=True))
    assert [e for e, _ in clients] == [DEFAULT_CLIENT, APP]
    ips = found(describe(h, [("ip", MATCH_SPECIFIED, None)]))
    assert [e for e, _ in ips] == [[("ip", None)], [("ip", "10.0.0.1")]]
    assert found(describe(h, [("user", MATCH_EXACT, "bob")])) == []
    assert len(found(describe(h, []))) == 7
    assert found(describe(h, [], strict=True)) == []


BAD_FILTERS = [
    pytest.param([("", MATCH_EXACT, "a")], ErrorCode.INVALID_REQUEST, "Invalid empty entity type."),
    pytest.param(
        [("user", MATCH_EXACT, "a"), ("user", MATCH_DEFAULT, None)],
        ErrorCode.INVALID_REQUEST,
        "Entity type user cannot appear more than once in the filter.",
    ),
    pytest.param(
        [("group", MATCH_EXACT, "a")],
        ErrorCode.UNSUPPORTED_VERSION,
        "Unsupported entity type group",
    ),
    pytest.param(
        [("ip", MATCH_SPECIFIED, None), ("client-id", MATCH_DEFAULT, None)],
        ErrorCode.INVALID_REQUEST,
        "Invalid entity filter component combination. IP filter component should not be "
        "used with user or clientId filter component.",
    ),
    pytest.param([("user", 7, None)], ErrorCode.INVALID_REQUEST, "Unexpected match type: 7"),
    pytest.param(
        [("user", MATCH_EXACT, None)],
        ErrorCode.INVALID_REQUEST,
        "Missing name for an exact match of user",
    ),
]


@pytest.mark.parametrize(("components", "code", "message"), BAD_FILTERS)
def test_a_bad_filter_fails_the_whole_describe(
    components: list[tuple[str, int, str | None]], code: int, message: str
) -> None:
    for version in versions(DESCRIBE_VERSIONS):
        response = describe(populated(), components, version=version)
        assert (response.error_code, response.error_message) == (code, message)
        assert not response.entries


def test_the_cluster_rules_need_describe_configs_and_alter_configs() -> None:
    describe_rule = CLUSTER_RULES[DescribeClientQuotasRequest.API_KEY]
    alter_rule = CLUSTER_RULES[AlterClientQuotasRequest.API_KEY]
    assert describe_rule.operation == AclOperation.DESCRIBE_CONFIGS
    assert alter_rule.operation == AclOperation.ALTER_CONFIGS
    denied: Any = describe_rule.denied(DescribeClientQuotasRequest())
    assert denied.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert denied.entries is None
    for version in versions(DESCRIBE_VERSIONS):
        denied.encode(version)
    body = AlterClientQuotasRequest(entries=[entry(ALICE, ("producer_byte_rate", 1))])
    refused: Any = alter_rule.denied(body)
    assert [
        (e.error_code, [(d.entity_type, d.entity_name) for d in e.entity]) for e in refused.entries
    ] == [(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ALICE)]
    for version in versions(ALTER_VERSIONS):
        refused.encode(version)


def test_denied_without_the_acl_when_the_authorizer_is_on() -> None:
    h = new_harness()
    h.state.authorization = Authorization(frozenset(), False)
    guarded = cluster_guarded(
        h.state,
        lambda hd, body: handle_alter_client_quotas(h.state, hd, body),
        CLUSTER_RULES[AlterClientQuotasRequest.API_KEY],
    )
    outcome = guarded(
        Request(49, 1, 7, "test", principal=KafkaPrincipal("User", "alice"), host="10.0.0.1"),
        AlterClientQuotasRequest(entries=[entry(ALICE, ("producer_byte_rate", 1))]),
    )
    assert isinstance(outcome, Reply)
    assert outcome.response.entries[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert h.image.client_quotas == {}


def test_replayed_records_from_any_writer_are_described() -> None:
    h = new_harness()
    h.replay(
        [ClientQuotaRecord(entity=[EntityData("user", "zed")], key="producer_byte_rate", value=3.0)]
    )
    assert found(describe(h, [("user", MATCH_EXACT, "zed")])) == [
        ([("user", "zed")], {"producer_byte_rate": 3.0})
    ]
