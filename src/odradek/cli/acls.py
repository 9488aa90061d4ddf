"""``odradek acls list|add|remove``: the cluster's ACLs, as Kafka's ``kafka-acls`` keeps them.

The three commands send Kafka's DescribeAcls, CreateAcls and DeleteAcls (version 3, the
highest the broker serves, :mod:`odradek.broker.acl_requests`) through the shared client
(:mod:`odradek.cli.client`), so that they reach a secured listener with
``--command-config`` and end a cluster that cannot be reached with one line and exit
status 2. An answer that says no (no authorizer, a principal that may not, an ACL the
controller refuses) is exit status 1.

The names of resource types, pattern types and operations are taken in any of the
spellings Kafka's tools and docs use (``read``, ``READ``, ``Read``; ``cluster-action``,
``CLUSTER_ACTION``, ``ClusterAction``) and printed as Kafka prints them (``READ``).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Final, TypeVar

import click

from odradek.cli.client import (
    ClusterClient,
    bootstrap_server_option,
    command_config_option,
    connect,
)
from odradek.protocol.error_codes import ErrorCode, error_name
from odradek.protocol.messages import (
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
)
from odradek.protocol.messages.create_acls_request import AclCreation
from odradek.protocol.messages.delete_acls_request import DeleteAclsFilter
from odradek.security.acls import (
    CLUSTER_NAME,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
    parse_principal,
)

__all__ = [
    "ACL_VERSION",
    "Acl",
    "AclFilter",
    "Refused",
    "acls",
    "answer_error",
    "format_table",
]

ACL_VERSION: Final = 3
"""CreateAcls, DescribeAcls and DeleteAcls: the highest version the broker serves."""
TIMEOUT_S: Final = 10.0
CLIENT_ID: Final = "odradek-acls"

E = TypeVar("E", bound=IntEnum)


class Refused(click.ClickException):
    """The cluster answered, and the answer is no: exit status 1."""

    exit_code = 1


# ---------------------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------------------


def _key(text: str) -> str:
    return text.replace("-", "").replace("_", "").lower()


def label(cls: type[E], code: int) -> str:
    """Kafka's name of ``code`` in ``cls``; ``UNKNOWN(<id>)`` for an id this build does
    not know (a newer cluster's)."""
    try:
        return cls(code).name
    except ValueError:
        return f"UNKNOWN({code})"


class EnumName(click.Choice[str]):
    """One of ``members`` by name, in Kafka's spellings; converts to the member."""

    def __init__(self, members: Iterable[IntEnum]) -> None:
        self.members = {_key(m.name): m for m in members}
        super().__init__([m.name.lower().replace("_", "-") for m in self.members.values()])

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, IntEnum):
            return value
        member = self.members.get(_key(str(value)))
        if member is None:
            super().convert(value, param, ctx)  # fails, with click's message
            self.fail(f"{value!r} is not one of {', '.join(self.choices)}", param, ctx)
        return member


_TYPES: Final = [t for t in ResourceType if t != ResourceType.UNKNOWN]
_CREATABLE_TYPES: Final = [t for t in _TYPES if t != ResourceType.ANY]
_PATTERNS: Final = [PatternType.LITERAL, PatternType.PREFIXED, PatternType.MATCH, PatternType.ANY]
_CREATABLE_PATTERNS: Final = [PatternType.LITERAL, PatternType.PREFIXED]
_OPERATIONS: Final = [o for o in AclOperation if o != AclOperation.UNKNOWN]
_CREATABLE_OPERATIONS: Final = [o for o in _OPERATIONS if o != AclOperation.ANY]


# ---------------------------------------------------------------------------------------
# ACLs and filters, as the requests carry them
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class Acl:
    """One ACL (Kafka's ``AclBinding``) with Kafka's ids, as an answer carries it."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def as_dict(self) -> dict[str, str]:
        return {
            "resource_type": label(ResourceType, self.resource_type),
            "resource_name": self.resource_name,
            "pattern_type": label(PatternType, self.pattern_type),
            "principal": self.principal,
            "host": self.host,
            "operation": label(AclOperation, self.operation),
            "permission": label(AclPermission, self.permission),
        }

    def text(self) -> str:
        d = self.as_dict()
        return (
            f"{d['permission']} {d['principal']} {d['operation']} on {d['resource_type']} "
            f"{d['resource_name']!r} ({d['pattern_type']}) from host {d['host']}"
        )

    def creation(self) -> AclCreation:
        return AclCreation(
            resource_type=self.resource_type,
            resource_name=self.resource_name,
            resource_pattern_type=self.pattern_type,
            principal=self.principal,
            host=self.host,
            operation=self.operation,
            permission_type=self.permission,
        )


@dataclass(frozen=True, slots=True)
class AclFilter:
    """What DescribeAcls and DeleteAcls select (Kafka's ``AclBindingFilter``): None and
    ANY match everything."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermission = AclPermission.ANY

    def describe_request(self) -> DescribeAclsRequest:
        return DescribeAclsRequest(
            resource_type_filter=self.resource_type,
            resource_name_filter=self.resource_name,
            pattern_type_filter=self.pattern_type,
            principal_filter=self.principal,
            host_filter=self.host,
            operation=self.operation,
            permission_type=self.permission,
        )

    def delete_filter(self) -> DeleteAclsFilter:
        return DeleteAclsFilter(
            resource_type_filter=self.resource_type,
            resource_name_filter=self.resource_name,
            pattern_type_filter=self.pattern_type,
            principal_filter=self.principal,
            host_filter=self.host,
            operation=self.operation,
            permission_type=self.permission,
        )


def answer_error(
    code: int, message: str | None, action: str, needs: str, client: ClusterClient
) -> str:
    """One line for an error an answer carries, ``action`` being what was asked
    ("describe ACLs") and ``needs`` the cluster operation it takes ("DESCRIBE")."""
    if code == ErrorCode.SECURITY_DISABLED:
        return (
            f"cannot {action}: the cluster has no authorizer (authorizer.class.name is not "
            "set), so it keeps no ACLs (SECURITY_DISABLED)"
        )
    if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        login = client.settings.security.sasl
        who = f"user {login.username!r}" if login is not None else "this client's principal"
        return (
            f"not authorized to {action}: {who} needs {needs} on the cluster "
            "(a super user, or an ACL granting it) (CLUSTER_AUTHORIZATION_FAILED)"
        )
    return error_text(code, message)


def error_text(code: int, message: str | None) -> str:
    """``NAME: message``, the server's message else the code's description."""
    if not message:
        try:
            message = ErrorCode(code).message
        except ValueError:
            message = "an error code this build does not know"
    return f"{error_name(code)}: {message}"


# ---------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------

_COLUMNS: Final = (
    ("RESOURCE TYPE", "resource_type"),
    ("NAME", "resource_name"),
    ("PATTERN", "pattern_type"),
    ("PRINCIPAL", "principal"),
    ("HOST", "host"),
    ("OPERATION", "operation"),
    ("PERMISSION", "permission"),
)


def format_table(found: Sequence[Acl]) -> list[str]:
    """The lines of a table of ``found``, its columns as wide as their widest cell."""
    rows = [[title for title, _ in _COLUMNS]]
    rows += [[acl.as_dict()[key] for _, key in _COLUMNS] for acl in found]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def _sorted(found: Iterable[Acl]) -> list[Acl]:
    return sorted(set(found))


# ---------------------------------------------------------------------------------------
# Options
# ---------------------------------------------------------------------------------------

_SHORTCUTS: Final = (
    ("topic", "--topic", ResourceType.TOPIC),
    ("group", "--group", ResourceType.GROUP),
    ("transactional_id", "--transactional-id", ResourceType.TRANSACTIONAL_ID),
)


def _resource_options(*, creatable: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    types = _CREATABLE_TYPES if creatable else _TYPES
    patterns = _CREATABLE_PATTERNS if creatable else _PATTERNS
    pattern_help = (
        "How the name is read (default literal)."
        if creatable
        else "literal, prefixed: ACLs of that pattern; match: every ACL that applies to the "
        "named resource (literal, '*' and prefixes); any: both patterns, the name as given. "
    )
    options = [
        click.option("--topic", metavar="NAME", help="A topic."),
        click.option("--group", metavar="NAME", help="A consumer group."),
        click.option("--cluster", "cluster", is_flag=True, help=f"The cluster ({CLUSTER_NAME})."),
        click.option("--transactional-id", metavar="ID", help="A transactional id."),
        click.option(
            "--resource-type",
            type=EnumName(types),
            default=None,
            help="The resource type, with --resource-name: instead of --topic etc."
            + ("" if creatable else " (default any)"),
        ),
        click.option("--resource-name", metavar="NAME", default=None, help="The resource name."),
        click.option(
            "--resource-pattern-type",
            "--pattern",
            "pattern",
            type=EnumName(patterns),
            default=None,
            help=pattern_help,
        ),
    ]

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            f = option(f)
        return f

    return decorate


def _resource(
    topic: str | None,
    group: str | None,
    cluster: bool,
    transactional_id: str | None,
    resource_type: ResourceType | None,
    resource_name: str | None,
) -> tuple[ResourceType | None, str | None]:
    """The resource type and name the options select; (None, None) when none is named."""
    given = {"topic": topic, "group": group, "transactional_id": transactional_id}
    named = [(flag, kind, given[key]) for key, flag, kind in _SHORTCUTS if given[key] is not None]
    if cluster:
        named.append(("--cluster", ResourceType.CLUSTER, CLUSTER_NAME))
    if len(named) > 1:
        flags = " and ".join(flag for flag, _, _ in named)
        raise click.UsageError(f"{flags} exclude each other: one resource at a time")
    if named and (resource_type is not None or resource_name is not None):
        raise click.UsageError(
            f"{named[0][0]} and --resource-type/--resource-name exclude each other"
        )
    if named:
        _, kind, name = named[0]
        if not name:
            raise click.UsageError(f"{named[0][0]}: the name must not be empty")
        return kind, name
    if resource_type == ResourceType.CLUSTER and resource_name is None:
        resource_name = CLUSTER_NAME
    return resource_type, resource_name


def _principal(text: str, option: str) -> str:
    if parse_principal(text) is None:
        raise click.BadParameter(
            f"{text!r} is not TYPE:NAME (User:alice, User:*)", param_hint=option
        )
    return text


def _principal_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option(
        "--deny-principal",
        "deny_principals",
        multiple=True,
        metavar="TYPE:NAME",
        help="A principal the ACLs deny (repeatable), User:alice or User:*.",
    )(f)
    return click.option(
        "--allow-principal",
        "allow_principals",
        multiple=True,
        metavar="TYPE:NAME",
        help="A principal the ACLs allow (repeatable), User:alice or User:*.",
    )(f)


def _who(
    allow: Sequence[str], deny: Sequence[str], anyone: Sequence[str] = ()
) -> list[tuple[str, AclPermission]]:
    who = [(_principal(p, "--allow-principal"), AclPermission.ALLOW) for p in allow]
    who += [(_principal(p, "--deny-principal"), AclPermission.DENY) for p in deny]
    who += [(_principal(p, "--principal"), AclPermission.ANY) for p in anyone]
    return list(dict.fromkeys(who))


def build_filters(
    resource_type: ResourceType | None,
    resource_name: str | None,
    pattern: PatternType | None,
    who: Sequence[tuple[str, AclPermission]],
    hosts: Sequence[str],
    operations: Sequence[AclOperation],
    *,
    default_pattern: PatternType,
) -> list[AclFilter]:
    """Every combination of the principals, hosts and operations given, each left out
    matching anything."""
    pattern_type = pattern if pattern is not None else default_pattern
    principals: list[tuple[str | None, AclPermission]] = list(who) or [(None, AclPermission.ANY)]
    host_list: list[str | None] = list(dict.fromkeys(hosts)) or [None]
    filters = [
        AclFilter(
            resource_type=resource_type if resource_type is not None else ResourceType.ANY,
            resource_name=resource_name,
            pattern_type=pattern_type,
            principal=principal,
            host=host,
            operation=operation,
            permission=permission,
        )
        for (principal, permission), host, operation in itertools.product(
            principals,
            host_list,
            list(dict.fromkeys(operations)) or [AclOperation.ANY],
        )
    ]
    return list(dict.fromkeys(filters))


# ---------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------


async def describe(client: ClusterClient, filters: Sequence[AclFilter]) -> list[Acl]:
    """The ACLs any of ``filters`` matches (one DescribeAcls each), sorted, once each."""
    found: list[Acl] = []
    for acl_filter in filters:
        response: Any = await client.request(acl_filter.describe_request(), ACL_VERSION, TIMEOUT_S)
        if response.error_code != ErrorCode.NONE:
            raise Refused(
                answer_error(
                    response.error_code, response.error_message, "describe ACLs", "DESCRIBE",
                    client,
                )
            )  # fmt: skip
        for resource in response.resources:
            found += [
                Acl(
                    resource.resource_type,
                    resource.resource_name,
                    resource.pattern_type,
                    a.principal,
                    a.host,
                    a.operation,
                    a.permission_type,
                )
                for a in resource.acls
            ]
    return _sorted(found)


async def create(client: ClusterClient, wanted: Sequence[Acl]) -> list[tuple[Acl, int, str | None]]:
    """CreateAcls for ``wanted``: each with its error code and message. Sending it again
    after a lost answer is harmless (an ACL the cluster holds succeeds, unchanged)."""
    response: Any = await client.request(
        CreateAclsRequest(creations=[acl.creation() for acl in wanted]), ACL_VERSION, TIMEOUT_S
    )
    if len(response.results) != len(wanted):
        raise Refused(f"the broker answered {len(response.results)} results for {len(wanted)} ACLs")
    return [
        (acl, r.error_code, r.error_message)
        for acl, r in zip(wanted, response.results, strict=True)
    ]


async def delete(
    client: ClusterClient, filters: Sequence[AclFilter]
) -> tuple[list[Acl], list[str]]:
    """DeleteAcls with ``filters``: the ACLs removed, and one line per filter that
    failed. A resend after a lost answer removes nothing the first attempt removed, so
    it only says less."""
    response: Any = await client.request(
        DeleteAclsRequest(filters=[f.delete_filter() for f in filters]), ACL_VERSION, TIMEOUT_S
    )
    removed: list[Acl] = []
    failures: list[str] = []
    for result in response.filter_results:
        if result.error_code != ErrorCode.NONE:
            if result.error_code in (
                ErrorCode.SECURITY_DISABLED,
                ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            ):
                raise Refused(
                    answer_error(
                        result.error_code, result.error_message, "delete ACLs", "ALTER", client
                    )
                )
            failures.append(error_text(result.error_code, result.error_message))
            continue
        removed += [
            Acl(
                m.resource_type,
                m.resource_name,
                m.pattern_type,
                m.principal,
                m.host,
                m.operation,
                m.permission_type,
            )
            for m in result.matching_acls
            if m.error_code == ErrorCode.NONE
        ]
        failures += [
            error_text(m.error_code, m.error_message)
            for m in result.matching_acls
            if m.error_code != ErrorCode.NONE
        ]
    return _sorted(removed), failures


# ---------------------------------------------------------------------------------------
# The commands
# ---------------------------------------------------------------------------------------


@click.group()
def acls() -> None:
    """List, add and remove ACLs (Kafka's kafka-acls); the cluster needs an authorizer
    (authorizer.class.name)."""


def _filter_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option(
        "--operation",
        "operations",
        multiple=True,
        type=EnumName(_OPERATIONS),
        help="Only ACLs of this operation (repeatable; default any).",
    )(f)
    f = click.option(
        "--host", "hosts", multiple=True, help="Only ACLs for this host (repeatable; default any)."
    )(f)
    f = click.option(
        "--principal",
        "principals",
        multiple=True,
        metavar="TYPE:NAME",
        help="Only ACLs of this principal, allowing or denying (repeatable).",
    )(f)
    f = _principal_options(f)
    return _resource_options(creatable=False)(f)


@acls.command("list")
@bootstrap_server_option
@command_config_option
@_filter_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def list_acls(
    bootstrap_server: str | None,
    command_config: str | None,
    topic: str | None,
    group: str | None,
    cluster: bool,
    transactional_id: str | None,
    resource_type: ResourceType | None,
    resource_name: str | None,
    pattern: PatternType | None,
    allow_principals: tuple[str, ...],
    deny_principals: tuple[str, ...],
    principals: tuple[str, ...],
    hosts: tuple[str, ...],
    operations: tuple[AclOperation, ...],
    as_json: bool,
) -> None:
    """The ACLs that match the filter (DescribeAcls): by default every one. Needs
    DESCRIBE on the cluster."""
    kind, name = _resource(topic, group, cluster, transactional_id, resource_type, resource_name)
    who = _who(allow_principals, deny_principals, principals)
    filters = build_filters(
        kind, name, pattern, who, hosts, operations, default_pattern=PatternType.ANY
    )
    client = connect(bootstrap_server, command_config, client_id=CLIENT_ID)
    found = client.run(lambda: describe(client, filters))
    if as_json:
        click.echo(json.dumps([acl.as_dict() for acl in found], indent=2))
    elif not found:
        click.echo("No ACL matches.", err=True)
    else:
        for line in format_table(found):
            click.echo(line)


@acls.command("add")
@bootstrap_server_option
@command_config_option
@_resource_options(creatable=True)
@_principal_options
@click.option(
    "--host",
    "hosts",
    multiple=True,
    help="A host the principals connect from (repeatable; default *, every host).",
)
@click.option(
    "--operation",
    "operations",
    multiple=True,
    required=True,
    type=EnumName(_CREATABLE_OPERATIONS),
    help="An operation (repeatable).",
)
def add_acls(
    bootstrap_server: str | None,
    command_config: str | None,
    topic: str | None,
    group: str | None,
    cluster: bool,
    transactional_id: str | None,
    resource_type: ResourceType | None,
    resource_name: str | None,
    pattern: PatternType | None,
    allow_principals: tuple[str, ...],
    deny_principals: tuple[str, ...],
    hosts: tuple[str, ...],
    operations: tuple[AclOperation, ...],
) -> None:
    """Add an ACL for every principal, host and operation given, on one resource
    (CreateAcls). Needs ALTER on the cluster. Exit status 1 if any is refused."""
    wanted = build_acls(
        _resource(topic, group, cluster, transactional_id, resource_type, resource_name),
        pattern,
        _who(allow_principals, deny_principals),
        hosts,
        operations,
    )
    client = connect(bootstrap_server, command_config, client_id=CLIENT_ID)
    results = client.run(lambda: create(client, wanted))
    refusal = next(
        (
            (code, message)
            for _, code, message in results
            if code in (ErrorCode.SECURITY_DISABLED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        ),
        None,
    )
    if refusal is not None:
        raise Refused(answer_error(*refusal, "create ACLs", "ALTER", client))
    added = [acl for acl, code, _ in results if code == ErrorCode.NONE]
    if added:
        plural = "s" if len(added) != 1 else ""
        click.echo(f"Added {len(added)} ACL{plural} (any already held is unchanged):")
        for line in format_table(added):
            click.echo(line)
    failed = [(acl, code, message) for acl, code, message in results if code != ErrorCode.NONE]
    for acl, code, message in failed:
        click.echo(f"not added: {acl.text()}: {error_text(code, message)}", err=True)
    if failed:
        raise SystemExit(1)


def build_acls(
    resource: tuple[ResourceType | None, str | None],
    pattern: PatternType | None,
    who: Sequence[tuple[str, AclPermission]],
    hosts: Sequence[str],
    operations: Sequence[AclOperation],
) -> list[Acl]:
    """The ACLs ``acls add`` asks for: every principal, host and operation on the one
    resource."""
    kind, name = resource
    if kind is None:
        raise click.UsageError(
            "name the resource: --topic, --group, --cluster, --transactional-id, or "
            "--resource-type with --resource-name"
        )
    if not name:
        raise click.UsageError("--resource-type needs --resource-name")
    if not who:
        raise click.UsageError("give --allow-principal or --deny-principal (or both)")
    return list(
        dict.fromkeys(
            Acl(
                kind,
                name,
                pattern if pattern is not None else PatternType.LITERAL,
                principal,
                host,
                operation,
                permission,
            )
            for (principal, permission), host, operation in itertools.product(
                who, list(dict.fromkeys(hosts)) or ["*"], dict.fromkeys(operations)
            )
        )
    )


@acls.command("remove")
@bootstrap_server_option
@command_config_option
@_filter_options
@click.option("--yes", is_flag=True, help="Do not ask before removing ACLs of every resource name.")
def remove_acls(
    bootstrap_server: str | None,
    command_config: str | None,
    topic: str | None,
    group: str | None,
    cluster: bool,
    transactional_id: str | None,
    resource_type: ResourceType | None,
    resource_name: str | None,
    pattern: PatternType | None,
    allow_principals: tuple[str, ...],
    deny_principals: tuple[str, ...],
    principals: tuple[str, ...],
    hosts: tuple[str, ...],
    operations: tuple[AclOperation, ...],
    yes: bool,
) -> None:
    """Remove every ACL the filter matches (DeleteAcls) and list them. What is left out
    matches anything, except the pattern type: literal when a resource is named (as
    for add), else any. A filter that names no resource first lists what it matches and
    asks for confirmation, unless --yes. Needs ALTER on the cluster."""
    kind, name = _resource(topic, group, cluster, transactional_id, resource_type, resource_name)
    who = _who(allow_principals, deny_principals, principals)
    filters = build_filters(
        kind,
        name,
        pattern,
        who,
        hosts,
        operations,
        default_pattern=PatternType.ANY if name is None else PatternType.LITERAL,
    )
    client = connect(bootstrap_server, command_config, client_id=CLIENT_ID)
    if name is None and not yes:
        matched = client.run(lambda: describe(client, filters))
        if not matched:
            click.echo("No ACL matches; nothing removed.")
            return
        click.echo(f"The filter names no resource; it matches {len(matched)} ACLs:")
        for line in format_table(matched):
            click.echo(line)
        if not click.confirm("Remove them?", default=False):
            raise Refused("not confirmed; nothing removed (--yes to skip the question)")
    removed, failures = client.run(lambda: delete(client, filters))
    if removed:
        click.echo(f"Removed {len(removed)} ACL{'s' if len(removed) != 1 else ''}:")
        for line in format_table(removed):
            click.echo(line)
    elif client.resent:
        click.echo(
            "No ACL matches now; the request was sent again after a lost answer, so the "
            "first attempt may have removed them."
        )
    else:
        click.echo("No ACL matched; nothing removed.")
    for failure in failures:
        click.echo(f"not removed: {failure}", err=True)
    if failures:
        raise SystemExit(1)
