"""``odradek quotas describe|alter``: client quotas (KIP-546), the ones Kafka's
``kafka-configs --entity-type users|clients|ips --describe|--alter --add-config/--delete-config``
keeps.

The two commands send DescribeClientQuotas and AlterClientQuotas at the highest version
the broker serves (:mod:`odradek.broker.client_quotas`) through the shared client
(:mod:`odradek.cli.client`), so that they reach a secured listener with
``--command-config`` and end with one line and exit status 2 when the cluster cannot
be reached. An entity is a user, a client id, or both (a user's quota for one client),
or an ip alone; ``--user-default``, ``--client-default`` and ``--ip-default`` name
Kafka's default entity of the type, shown as ``<default>``. The quota keys are the
broker's own lists (:data:`~odradek.broker.client_quotas.CLIENT_QUOTA_KEYS`, and
``IP_QUOTA_KEYS`` for an ip).

What is cheap is checked here, before anything is sent, as a usage error (exit status
2): the entity options, an unknown key, a value that is not a number, a key given twice
or both added and deleted. The value's range (above 0, a whole number of bytes) is left
to the broker, whose rules are the ones that count; an answer that refuses, like any
error the broker gives for the entity, is exit status 1 with Kafka's error name and
message.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import click

from odradek.broker.client_quotas import (
    ALTER_VERSIONS,
    CLIENT_QUOTA_KEYS,
    DESCRIBE_VERSIONS,
    IP_QUOTA_KEYS,
    MATCH_DEFAULT,
    MATCH_EXACT,
)
from odradek.cli.acls import Refused, answer_error
from odradek.cli.client import (
    ClusterClient,
    bootstrap_server_option,
    command_config_option,
    connect,
)
from odradek.controller.image import CLIENT_QUOTA_ENTITY_TYPES
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import AlterClientQuotasRequest, DescribeClientQuotasRequest
from odradek.protocol.messages import alter_client_quotas_request as alter_request
from odradek.protocol.messages.describe_client_quotas_request import ComponentData

__all__ = [
    "ALTER_VERSION",
    "DESCRIBE_VERSION",
    "Entity",
    "entity_text",
    "ordered",
    "parse_additions",
    "parse_deletions",
    "quotas",
    "value_text",
]

DESCRIBE_VERSION: Final = max(DESCRIBE_VERSIONS)
ALTER_VERSION: Final = max(ALTER_VERSIONS)
TIMEOUT_S: Final = 10.0
CLIENT_ID: Final = "odradek-quotas"

USER, CLIENT, IP = CLIENT_QUOTA_ENTITY_TYPES[:3]
DEFAULT_NAME: Final = "<default>"
"""How Kafka's tools show the default entity of a type (a null name on the wire)."""

Entity = list[tuple[str, str | None]]
"""An entity's ``(entity type, name)`` pairs, user first; a None name is the default."""


# ---------------------------------------------------------------------------------------
# Entities, keys and values as the operator writes them
# ---------------------------------------------------------------------------------------


def ordered(entity: Iterable[tuple[str, str | None]]) -> Entity:
    """``entity`` with its types in Kafka's order (user, client-id, ip), whatever order
    an answer gives them in; a type this build does not know goes last."""

    def rank(pair: tuple[str, str | None]) -> tuple[int, str]:
        kind = pair[0]
        known = kind in CLIENT_QUOTA_ENTITY_TYPES
        return (
            CLIENT_QUOTA_ENTITY_TYPES.index(kind) if known else len(CLIENT_QUOTA_ENTITY_TYPES),
            kind,
        )

    return sorted(entity, key=rank)


def entity_text(entity: Iterable[tuple[str, str | None]]) -> str:
    """``user=alice, client-id=<default>``, as Kafka's tools name an entity."""
    return ", ".join(
        f"{kind}={DEFAULT_NAME if name is None else name}" for kind, name in ordered(entity)
    )


def value_text(value: float) -> str:
    """A quota value as the operator wrote it: Kafka keeps doubles, and a byte rate of
    1048576 reads better without the ``.0``."""
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def _entity(
    user: str | None,
    user_default: bool,
    client_id: str | None,
    client_default: bool,
    ip: str | None = None,
    ip_default: bool = False,
) -> Entity:
    """The entity the options name, user first; empty when they name none. An ip
    entity stands alone, as Kafka's does."""
    entity: Entity = []
    for kind, flag, name, default, default_flag in (
        (USER, "--user", user, user_default, "--user-default"),
        (CLIENT, "--client-id", client_id, client_default, "--client-default"),
        (IP, "--ip", ip, ip_default, "--ip-default"),
    ):
        if name is not None and default:
            raise click.UsageError(f"{flag} and {default_flag} exclude each other")
        if name == "":
            # The broker refuses an empty name; the default entity has a flag of its own.
            raise click.BadParameter(
                f"must not be empty ({default_flag} is the default {kind})", param_hint=flag
            )
        if name is not None or default:
            entity.append((kind, name))
    if len(entity) > 1 and any(kind == IP for kind, _ in entity):
        raise click.UsageError(
            "an ip entity stands alone: --ip or --ip-default without --user or --client-id"
        )
    return entity


def _is_ip(entity: Entity) -> bool:
    return any(kind == IP for kind, _ in entity)


def _items(values: Sequence[str]) -> list[str]:
    """Each option value split at its commas, as Kafka's ``--add-config a=1,b=2`` is."""
    return [item.strip() for value in values for item in value.split(",") if item.strip()]


def _known_key(key: str, option: str, ip: bool) -> str:
    keys = IP_QUOTA_KEYS if ip else CLIENT_QUOTA_KEYS
    if key in keys:
        return key
    what = "an ip" if ip else "a user or client-id"
    # A key of the other kind of entity is a real quota key, only not one of this one.
    hint = ""
    if not ip and key in IP_QUOTA_KEYS:
        hint = " (a quota of ip entities: --ip ADDRESS or --ip-default)"
    elif ip and key in CLIENT_QUOTA_KEYS:
        hint = " (a quota of users and client ids)"
    raise click.BadParameter(
        f"{key!r} is not a quota key of {what}{hint}: one of {', '.join(sorted(keys))}",
        param_hint=option,
    )


def parse_additions(values: Sequence[str], ip: bool = False) -> dict[str, float]:
    """``--add KEY=VALUE`` (repeatable, or comma-separated): each key known and given
    once, each value a finite number."""
    added: dict[str, float] = {}
    for item in _items(values):
        key, equals, text = (part.strip() for part in item.partition("="))
        if not equals or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--add")
        _known_key(key, "--add", ip)
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise click.BadParameter(f"{key}={text}: {text!r} is not a number", param_hint="--add")
        if key in added:
            raise click.BadParameter(f"{key} is given twice", param_hint="--add")
        added[key] = value
    return added


def parse_deletions(values: Sequence[str], ip: bool = False) -> list[str]:
    """``--delete KEY`` (repeatable, or comma-separated): each key known; a repeat is
    harmless and dropped."""
    return list(dict.fromkeys(_known_key(key, "--delete", ip) for key in _items(values)))


# ---------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------


def describe_request(entity: Entity, strict: bool) -> DescribeClientQuotasRequest:
    """A filter component for each type named: that name, or the default entity."""
    return DescribeClientQuotasRequest(
        components=[
            ComponentData(entity_type=kind, match_type=MATCH_EXACT, match=name)
            if name is not None
            else ComponentData(entity_type=kind, match_type=MATCH_DEFAULT, match=None)
            for kind, name in entity
        ],
        strict=strict,
    )


def alter_request_for(
    entity: Entity, added: dict[str, float], deleted: Sequence[str], validate_only: bool
) -> AlterClientQuotasRequest:
    ops = [alter_request.OpData(key=key, value=value) for key, value in added.items()]
    ops += [alter_request.OpData(key=key, remove=True) for key in deleted]
    return AlterClientQuotasRequest(
        entries=[
            alter_request.EntryData(
                entity=[
                    alter_request.EntityData(entity_type=kind, entity_name=name)
                    for kind, name in entity
                ],
                ops=ops,
            )
        ],
        validate_only=validate_only,
    )


async def _describe(client: ClusterClient, request: DescribeClientQuotasRequest) -> Any:
    response: Any = await client.request(request, DESCRIBE_VERSION, TIMEOUT_S)
    if response.error_code != ErrorCode.NONE:
        raise Refused(
            answer_error(
                response.error_code,
                response.error_message,
                "describe client quotas",
                "DESCRIBE_CONFIGS",
                client,
            )
        )
    return response


async def _alter(client: ClusterClient, request: AlterClientQuotasRequest) -> Any:
    # Sent again after a lost answer, the same change is harmless: a value the entity
    # holds already and the removal of a key it no longer has both succeed unchanged.
    response: Any = await client.request(request, ALTER_VERSION, TIMEOUT_S)
    return response.entries[0] if len(response.entries) == 1 else None


# ---------------------------------------------------------------------------------------
# The commands
# ---------------------------------------------------------------------------------------


@click.group()
def quotas() -> None:
    """Describe and alter client quotas of users, client ids and ips (Kafka's
    kafka-configs --entity-type users|clients|ips, KIP-546)."""


def _entity_options(f: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option(
            "--user",
            metavar="NAME",
            default=None,
            help="The user (the principal's name: alice, not User:alice).",
        ),
        click.option("--user-default", is_flag=True, help="The default user."),
        click.option("--client-id", metavar="ID", default=None, help="The client id."),
        click.option("--client-default", is_flag=True, help="The default client id."),
        click.option(
            "--ip",
            metavar="ADDRESS",
            default=None,
            help="A client address (connection_creation_rate, KIP-612); alone.",
        ),
        click.option("--ip-default", is_flag=True, help="The default ip."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


@quotas.command("describe")
@bootstrap_server_option
@command_config_option
@_entity_options
@click.option(
    "--strict",
    is_flag=True,
    help="Only entities of exactly the types named (--user alice: not alice's quotas "
    "for a client id).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def describe_quotas(
    bootstrap_server: str | None,
    command_config: str | None,
    user: str | None,
    user_default: bool,
    client_id: str | None,
    client_default: bool,
    ip: str | None,
    ip_default: bool,
    strict: bool,
    as_json: bool,
) -> None:
    """The quotas of every entity that matches (DescribeClientQuotas): by default every
    one; --user and --client-id narrow it down (an entity with other types too matches
    unless --strict). Needs DESCRIBE_CONFIGS on the cluster."""
    entity = _entity(user, user_default, client_id, client_default, ip, ip_default)
    if strict and not entity:
        # The broker would answer, with nothing: no entity has no type.
        raise click.UsageError(
            "--strict needs --user/--user-default or --client-id/--client-default"
        )
    client = connect(bootstrap_server, command_config, client_id=CLIENT_ID)
    response = client.run(lambda: _describe(client, describe_request(entity, strict)))
    found = [
        ([(e.entity_type, e.entity_name) for e in entry.entity], entry.values)
        for entry in response.entries or []
    ]
    if as_json:
        rows = [
            {"entity": dict(ordered(pairs)), "quotas": {v.key: v.value for v in values}}
            for pairs, values in found
        ]
        click.echo(json.dumps(rows, indent=2))
    elif not found:
        click.echo("No client quotas match.", err=True)
    else:
        for pairs, values in found:
            held = ", ".join(f"{v.key}={value_text(v.value)}" for v in values)
            click.echo(f"{entity_text(pairs)}: {held}")


@quotas.command("alter")
@bootstrap_server_option
@command_config_option
@_entity_options
@click.option(
    "--add",
    "additions",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set a quota (repeatable, or comma-separated): "
    f"{', '.join(sorted(CLIENT_QUOTA_KEYS))}; for an ip, {', '.join(sorted(IP_QUOTA_KEYS))}.",
)
@click.option(
    "--delete",
    "deletions",
    multiple=True,
    metavar="KEY",
    help="Remove a quota (repeatable, or comma-separated).",
)
@click.option(
    "--validate-only", is_flag=True, help="Ask the cluster to check the change, not make it."
)
def alter_quotas(
    bootstrap_server: str | None,
    command_config: str | None,
    user: str | None,
    user_default: bool,
    client_id: str | None,
    client_default: bool,
    ip: str | None,
    ip_default: bool,
    additions: tuple[str, ...],
    deletions: tuple[str, ...],
    validate_only: bool,
) -> None:
    """Set and remove quotas of one entity (AlterClientQuotas): a user, a client id, or
    a user's quotas for one client id. Removing a quota the entity does not have
    succeeds. Needs ALTER_CONFIGS on the cluster; exit status 1 when the cluster refuses
    the change."""
    entity = _entity(user, user_default, client_id, client_default, ip, ip_default)
    if not entity:
        raise click.UsageError(
            "name the entity: --user NAME or --user-default, and/or --client-id ID or "
            "--client-default; or --ip ADDRESS or --ip-default"
        )
    added = parse_additions(additions, _is_ip(entity))
    deleted = parse_deletions(deletions, _is_ip(entity))
    if not added and not deleted:
        raise click.UsageError("nothing to alter: give --add KEY=VALUE or --delete KEY")
    both = [key for key in deleted if key in added]
    if both:
        raise click.UsageError(f"{', '.join(both)}: both added and deleted")
    client = connect(bootstrap_server, command_config, client_id=CLIENT_ID)
    request = alter_request_for(entity, added, deleted, validate_only)
    result = client.run(lambda: _alter(client, request))
    name = entity_text(entity)
    if result is None:
        raise Refused(f"{name}: the broker's answer has no result for the entity")
    if result.error_code != ErrorCode.NONE:
        raise Refused(
            f"{name}: not altered: "
            + answer_error(
                result.error_code,
                result.error_message,
                "alter client quotas",
                "ALTER_CONFIGS",
                client,
            )
        )
    parts = []
    if added:
        parts.append("set " + ", ".join(f"{k}={value_text(v)}" for k, v in added.items()))
    if deleted:
        parts.append("deleted " + ", ".join(deleted))
    change = "; ".join(parts)
    if validate_only:
        click.echo(f"{name}: valid, nothing changed (--validate-only): {change}")
    else:
        click.echo(f"{name}: {change}")
