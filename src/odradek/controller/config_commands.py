"""Config commands: AlterConfigs and IncrementalAlterConfigs of a topic or a broker, as
ConfigRecords.

This module owns the controller's side of changing a topic's or a broker's dynamic
configs: the checks on the resource (a legal, existing topic; a broker named by an
integer id, or "" for the cluster-wide default), on the request entry (no key twice, no null
value where one is not allowed, a known operation) and the computation of the new set of
overrides, which is then validated as a whole. What comes out is a Kafka error, or the
:class:`~odradek.protocol.metadata.ConfigRecord` records that make the change once they
are committed and replayed (a null value deletes a key).

Pure: the image, the request entry and a :class:`ConfigSchema` go in. The schema comes
from the broker, which owns the table of topic configs; the controller layer cannot
import it, and does not need to know more of it than these two things.

The rules are Kafka's (``ConfigurationControlManager``, ``ConfigAdminManager.preprocess``
and ``ControllerConfigurationValidator``):

* AlterConfigs (the legacy API) replaces the whole set: keys not named are deleted.
* IncrementalAlterConfigs applies SET, DELETE, APPEND and SUBTRACT key by key. APPEND and
  SUBTRACT are for LIST keys only and start from the key's default when it is not set;
  APPEND skips items already present, SUBTRACT removes every item named.
* For a broker resource a null value in AlterConfigs deletes the key, as Kafka allows;
  which broker keys may be set at all is the caller's policy, checked before.
* ``odradek.unclean.elections`` (the history of unclean elections) is the controller's:
  a request may delete it (the operator's acknowledgement), never set it, and the legacy
  API's replacement keeps it.
* Only keys whose value changes get a record; the resulting set is validated as a whole,
  so deleting an unknown key is a harmless no-op while setting one is INVALID_CONFIG.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from odradek.controller.image import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_TOPIC,
    MetadataImage,
)
from odradek.controller.topics import topic_name_problem
from odradek.controller.unclean_history import UNCLEAN_ELECTIONS_CONFIG
from odradek.core.errors import ConfigError
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.metadata import ConfigRecord

__all__ = [
    "ConfigOutcome",
    "ConfigSchema",
    "OpType",
    "alter_broker_configs",
    "alter_topic_configs",
    "check_broker_resource",
    "check_topic_resource",
    "incremental_alter_broker_configs",
    "incremental_alter_topic_configs",
]


class OpType(enum.IntEnum):
    """IncrementalAlterConfigs operations (Kafka's ``AlterConfigOp.OpType`` ids)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class ConfigSchema:
    """What the commands need to know of a resource type's keys."""

    validate: Callable[[dict[str, str]], object]
    """Checks a resource's whole set of overrides; raises ConfigError naming the key."""
    list_defaults: Mapping[str, str]
    """Each LIST-typed key and its default as text ("" for none); APPEND and SUBTRACT
    apply to these keys only and start from the default when the key is not set."""
    validate_changes: Callable[[dict[str, str]], object] = lambda changes: None
    """Checks only the keys a request sets to a new value; raises ConfigError naming the
    key. For values this build refuses to take although it keeps reading them where they
    are already stored (a value an older build or the broker itself wrote)."""


@dataclass(frozen=True, slots=True)
class ConfigOutcome:
    error_code: int
    error_message: str | None = None
    records: list[ConfigRecord] = field(default_factory=list)


def _error(code: ErrorCode, message: str) -> ConfigOutcome:
    return ConfigOutcome(error_code=code, error_message=message)


def check_topic_resource(image: MetadataImage, name: str) -> ConfigOutcome | None:
    """The error for a topic config resource that cannot be changed, or None.

    An empty name would be a cluster-wide topic default, which Kafka refuses for topics.
    """
    if not name:
        return _error(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
    problem = topic_name_problem(name)
    if problem is not None:
        return _error(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
    if name not in image.topics_by_name:
        return _error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    return None


def check_broker_resource(name: str) -> ConfigOutcome | None:
    """The error for a broker config resource name that is not "" or an integer, or None."""
    if name == "":
        return None
    try:
        int(name)
    except ValueError:
        return _error(ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}")
    return None


def _duplicate_keys(names: Sequence[str]) -> ConfigOutcome | None:
    if len(set(names)) != len(names):
        repeated = sorted({n for n in names if names.count(n) > 1})
        return _error(
            ErrorCode.INVALID_REQUEST,
            f"Error due to duplicate config keys: {', '.join(repeated)}",
        )
    return None


def _records_for(
    resource: tuple[int, str],
    current: Mapping[str, str],
    wanted: Mapping[str, str | None],
    schema: ConfigSchema,
) -> ConfigOutcome:
    """Validate the set ``current`` becomes with ``wanted`` applied; records for the changes."""
    result = dict(current)
    for key, value in wanted.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    changes = {key: value for key, value in result.items() if current.get(key) != value}
    try:
        schema.validate(result)
        schema.validate_changes(changes)
    except ConfigError as e:
        return _error(ErrorCode.INVALID_CONFIG, str(e))
    kind, name = resource
    records = [
        ConfigRecord(resource_type=kind, resource_name=name, name=key, value=value)
        for key, value in sorted(wanted.items())
        if current.get(key) != value
    ]
    return ConfigOutcome(error_code=ErrorCode.NONE, records=records)


def alter_topic_configs(
    image: MetadataImage,
    name: str,
    configs: Sequence[tuple[str, str | None]],
    schema: ConfigSchema,
) -> ConfigOutcome:
    """AlterConfigs for one topic: its overrides become exactly ``configs``."""
    problem = check_topic_resource(image, name)
    if problem is not None:
        return problem
    duplicate = _duplicate_keys([key for key, _ in configs])
    if duplicate is not None:
        return duplicate
    nulls = [key for key, value in configs if value is None]
    if nulls:
        # Kafka's ControllerConfigurationValidator: a null in the legacy API is a bad config.
        return _error(
            ErrorCode.INVALID_CONFIG,
            f"Null value not supported for topic configs: {','.join(nulls)}",
        )
    if any(key == UNCLEAN_ELECTIONS_CONFIG for key, _ in configs):
        return _controller_owned()
    resource = (CONFIG_RESOURCE_TOPIC, name)
    history = image.configs.get(resource, {}).get(UNCLEAN_ELECTIONS_CONFIG)
    if history is not None:
        configs = [*configs, (UNCLEAN_ELECTIONS_CONFIG, history)]  # not the caller's to drop
    return _replace(image, resource, configs, schema)


def _controller_owned() -> ConfigOutcome:
    return _error(
        ErrorCode.INVALID_CONFIG,
        f"{UNCLEAN_ELECTIONS_CONFIG} is written by the controller; it can only be deleted "
        "(IncrementalAlterConfigs DELETE), which acknowledges the unclean elections it lists",
    )


def _replace(
    image: MetadataImage,
    resource: tuple[int, str],
    configs: Sequence[tuple[str, str | None]],
    schema: ConfigSchema,
) -> ConfigOutcome:
    """The legacy API's whole-set replacement: keys not named (or null) are deleted."""
    current = image.configs.get(resource, {})
    wanted: dict[str, str | None] = dict(configs)
    for key in current:
        wanted.setdefault(key, None)
    return _records_for(resource, current, wanted, schema)


def alter_broker_configs(
    image: MetadataImage,
    name: str,
    configs: Sequence[tuple[str, str | None]],
    schema: ConfigSchema,
) -> ConfigOutcome:
    """AlterConfigs for broker ``name`` ("" is the cluster default): its dynamic configs
    become exactly ``configs``; a null value deletes its key."""
    problem = check_broker_resource(name)
    if problem is not None:
        return problem
    duplicate = _duplicate_keys([key for key, _ in configs])
    if duplicate is not None:
        return duplicate
    return _replace(image, (CONFIG_RESOURCE_BROKER, name), configs, schema)


def _parts(value: str) -> list[str]:
    # Kafka splits on bare commas and drops empty items (ConfigurationControlManager.getParts).
    return [part for part in value.split(",") if part]


def incremental_alter_topic_configs(
    image: MetadataImage,
    name: str,
    operations: Sequence[tuple[str, int, str | None]],
    schema: ConfigSchema,
) -> ConfigOutcome:
    """IncrementalAlterConfigs for one topic: ``(key, operation, value)`` entries."""
    problem = check_topic_resource(image, name)
    if problem is not None:
        return problem
    if any(key == UNCLEAN_ELECTIONS_CONFIG and op != OpType.DELETE for key, op, _ in operations):
        return _controller_owned()
    return _apply(image, (CONFIG_RESOURCE_TOPIC, name), operations, schema)


def incremental_alter_broker_configs(
    image: MetadataImage,
    name: str,
    operations: Sequence[tuple[str, int, str | None]],
    schema: ConfigSchema,
) -> ConfigOutcome:
    """IncrementalAlterConfigs for broker ``name`` ("" is the cluster default)."""
    problem = check_broker_resource(name)
    if problem is not None:
        return problem
    return _apply(image, (CONFIG_RESOURCE_BROKER, name), operations, schema)


def _apply(
    image: MetadataImage,
    resource: tuple[int, str],
    operations: Sequence[tuple[str, int, str | None]],
    schema: ConfigSchema,
) -> ConfigOutcome:
    """The incremental operations on one resource's current configs."""
    duplicate = _duplicate_keys([key for key, _, _ in operations])
    if duplicate is not None:
        return duplicate
    known = {op.value for op in OpType}
    unknown_ops = [op for _, op, _ in operations if op not in known]
    if unknown_ops:
        return _error(ErrorCode.INVALID_REQUEST, f"Unknown operation type {unknown_ops[0]}")
    nulls = [key for key, op, value in operations if op != OpType.DELETE and value is None]
    if nulls:
        return _error(
            ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}"
        )
    current = image.configs.get(resource, {})
    wanted: dict[str, str | None] = {}
    for key, op_id, value in operations:
        op = OpType(op_id)
        if op is OpType.SET:
            wanted[key] = value
        elif op is OpType.DELETE:
            wanted[key] = None
        else:
            if key not in schema.list_defaults:
                return _error(
                    ErrorCode.INVALID_CONFIG,
                    f"Can't {op.name} to key {key} because its type is not LIST.",
                )
            assert value is not None  # nulls were refused above
            start = current.get(key)
            items = _parts(schema.list_defaults[key] if start is None else start)
            if op is OpType.APPEND:
                items += [item for item in dict.fromkeys(value.split(",")) if item not in items]
            else:
                removed = set(value.split(","))
                items = [item for item in items if item not in removed]
            wanted[key] = ",".join(items)
    return _records_for(resource, current, wanted, schema)
