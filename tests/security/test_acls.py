"""The authorizer decides as Kafka's StandardAuthorizer does."""

from __future__ import annotations

import pytest

from odradek.security.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermission,
    Authorizer,
    PatternType,
    ResourceType,
    parse_principal,
    parse_super_users,
)
from odradek.security.principal import KafkaPrincipal

ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
T, G = ResourceType.TOPIC, ResourceType.GROUP
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermission.ALLOW, AclPermission.DENY
Op = AclOperation


def acl(
    name: str,
    operation: AclOperation,
    permission: AclPermission = ALLOW,
    principal: str = "User:alice",
    pattern: PatternType = LIT,
    host: str = "*",
    resource_type: ResourceType = T,
) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


def allowed(
    bindings: list[AclBinding], operation: AclOperation, name: str = "orders", **kw: object
) -> bool:
    authorizer = Authorizer(bindings, **kw)  # type: ignore[arg-type]
    return authorizer.authorize(ALICE, "10.0.0.1", operation, T, name)


def test_nothing_is_allowed_without_an_acl_by_default() -> None:
    assert not allowed([], Op.READ)
    assert allowed([], Op.READ, allow_everyone_if_no_acl_found=True)


def test_allow_everyone_applies_only_where_no_acl_names_the_resource() -> None:
    others = [acl("orders", Op.READ, principal="User:bob")]
    assert not allowed(others, Op.READ, allow_everyone_if_no_acl_found=True)
    assert allowed(others, Op.READ, name="payments", allow_everyone_if_no_acl_found=True)


def test_literal_wildcard_and_prefixed_acls_match_their_resources() -> None:
    assert allowed([acl("orders", Op.READ)], Op.READ)
    assert not allowed([acl("orders", Op.READ)], Op.READ, name="orders2")
    assert allowed([acl("*", Op.READ)], Op.READ, name="anything")
    assert allowed([acl("ord", Op.READ, pattern=PRE)], Op.READ, name="orders")
    assert not allowed([acl("pay", Op.READ, pattern=PRE)], Op.READ, name="orders")
    # A literal "*"-named topic is the wildcard; a prefixed "" matches every name too.
    assert allowed([acl("", Op.READ, pattern=PRE)], Op.READ)


def test_deny_wins_over_allow_wherever_it_is_written() -> None:
    assert not allowed([acl("*", Op.READ), acl("orders", Op.READ, DENY)], Op.READ)
    assert not allowed([acl("orders", Op.ALL), acl("ord", Op.READ, DENY, pattern=PRE)], Op.READ)
    assert not allowed(
        [acl("orders", Op.READ), acl("*", Op.ALL, DENY, principal="User:*")], Op.READ
    )


def test_principal_and_host_must_match() -> None:
    assert not allowed([acl("orders", Op.READ, principal="User:bob")], Op.READ)
    assert allowed([acl("orders", Op.READ, principal="User:*")], Op.READ)
    assert allowed([acl("orders", Op.READ, host="10.0.0.1")], Op.READ)
    assert not allowed([acl("orders", Op.READ, host="10.0.0.2")], Op.READ)


def test_allows_imply_describe_but_denies_imply_nothing() -> None:
    for operation in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert allowed([acl("orders", operation)], Op.DESCRIBE)
    assert not allowed([acl("orders", Op.CREATE)], Op.DESCRIBE)
    assert allowed([acl("orders", Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS)
    assert not allowed([acl("orders", Op.DESCRIBE)], Op.READ)
    # DENY READ does not deny DESCRIBE, which an ALLOW of WRITE implies.
    assert allowed([acl("orders", Op.WRITE), acl("orders", Op.READ, DENY)], Op.DESCRIBE)
    assert allowed([acl("orders", Op.ALL)], Op.ALTER_CONFIGS)


def test_super_users_may_do_anything_even_against_a_deny() -> None:
    supers = parse_super_users(" User:admin ; User:alice;")
    assert supers == {"User:admin", "User:alice"}
    assert allowed([acl("orders", Op.ALL, DENY)], Op.DELETE, super_users=supers)


def test_other_resource_types_do_not_count() -> None:
    assert not allowed([acl("orders", Op.READ, resource_type=G)], Op.READ)


def test_authorize_any_finds_an_allow_no_deny_covers() -> None:
    def any_write(bindings: list[AclBinding]) -> bool:
        return Authorizer(bindings).authorize_any(ALICE, "h", Op.WRITE, T)

    assert not any_write([])
    assert any_write([acl("orders", Op.WRITE)])
    assert not any_write([acl("orders", Op.WRITE), acl("*", Op.WRITE, DENY)])
    assert not any_write([acl("orders-eu", Op.WRITE), acl("orders", Op.WRITE, DENY, pattern=PRE)])
    assert any_write([acl("orders-eu", Op.WRITE), acl("payments", Op.WRITE, DENY, pattern=PRE)])
    assert not any_write([acl("orders", Op.WRITE, principal="User:bob")])


@pytest.mark.parametrize(
    ("selector", "names"),
    [
        (AclBindingFilter(), {"orders", "ord", "*"}),
        (AclBindingFilter(resource_name="orders"), {"orders"}),
        (
            AclBindingFilter(resource_name="orders", pattern_type=PatternType.MATCH),
            {"orders", "ord", "*"},
        ),
        (AclBindingFilter(pattern_type=PRE), {"ord"}),
        (AclBindingFilter(permission=DENY), {"*"}),
        (AclBindingFilter(operation=Op.WRITE), {"ord"}),
        (AclBindingFilter(principal="User:bob"), set()),
    ],
)
def test_filters_select_as_kafkas_do(selector: AclBindingFilter, names: set[str]) -> None:
    bindings = [
        acl("orders", Op.READ),
        acl("ord", Op.WRITE, pattern=PRE),
        acl("*", Op.READ, DENY),
    ]
    assert {b.resource_name for b in bindings if selector.matches(b)} == names


def test_principals_parse_from_acl_text() -> None:
    assert parse_principal("User:CN=alice,OU=eng") == KafkaPrincipal("User", "CN=alice,OU=eng")
    assert parse_principal("alice") is None
    assert parse_principal("User:") is None
    assert BOB != ALICE
