"""Topic-level configuration: Kafka's topic config keys and how they resolve for one topic.

This module owns:

* :data:`TOPIC_CONFIG_DEF`, the topic keys under Kafka's names and types
  (``retention.ms``, ``segment.bytes``, ``cleanup.policy`` ...), and
  :data:`TOPIC_CONFIG_SYNONYMS`, the broker keys that give each one its default
  (``retention.ms`` <- ``log.retention.ms``, ``log.retention.minutes``,
  ``log.retention.hours``; ``max.message.bytes`` <- ``message.max.bytes`` ...), in
  Kafka's order of precedence;
* :func:`validate_topic_overrides`, the check CreateTopics and AlterConfigs need (a
  :class:`~odradek.core.errors.ConfigError` there is Kafka's INVALID_CONFIG);
* :func:`effective_topic_config`, the answer to DescribeConfigs for a topic: every key
  with its value, Kafka's source and the synonyms it was chosen from;
* :func:`to_log_config`, the storage engine's :class:`~odradek.storage.log.LogConfig`
  from a topic's effective configuration, and :func:`effective_log_config` /
  :func:`effective_topic_value`, the same resolved straight from the metadata image;
* :func:`effective_record_policy`, what the produce path checks a topic's records
  against (its timestamp type and bounds, keys on a compacted topic);
* :data:`DYNAMIC_BROKER_TOPIC_KEYS`, the broker keys that may be set at run time (those
  whose only effect is as a topic config's default), and
  :func:`validate_dynamic_broker_configs`, their check;

A value resolves in this order: the topic's own override, then each broker synonym in
turn (``log.retention.ms`` before ``log.retention.minutes`` before
``log.retention.hours``), each looked up as a dynamic per-broker value, a dynamic
cluster default and the static ``server.properties`` value, and finally the first
synonym that has a default. Kafka resolves the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from odradek.broker.cleaner_settings import LOG_CLEANER_KEYS, check_dynamic_cleaner_key
from odradek.broker.config_entries import ConfigEntry, ConfigSource, ConfigSynonym
from odradek.broker.record_validation import RecordPolicy
from odradek.broker.server_config import ServerConfig, majority
from odradek.broker.server_keys import COMPRESSION_TYPES, GIB, MIB, SERVER_CONFIG_DEF
from odradek.controller.image import CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC
from odradek.controller.unclean_history import UNCLEAN_ELECTIONS_CONFIG
from odradek.core.config_keys import (
    LONG_MAX,
    ConfigDef,
    ConfigKey,
    ConfigType,
    ConfigValue,
    Importance,
    OneOf,
    Range,
    Validator,
    ValidList,
)
from odradek.core.errors import ConfigError
from odradek.protocol.record_batch import (
    TimestampType,
)
from odradek.security.ssl_keys import dynamic_ssl_key
from odradek.storage.cleaner.plan import CleaningPolicy
from odradek.storage.log import LogConfig

__all__ = [
    "DYNAMIC_BROKER_TOPIC_KEYS",
    "REPLICATION_THROTTLE_KEYS",
    "TOPIC_CONFIG_DEF",
    "TOPIC_CONFIG_SYNONYMS",
    "BrokerSynonym",
    "ConfigEntry",
    "ConfigSource",
    "ConfigSynonym",
    "effective_log_config",
    "effective_record_policy",
    "effective_topic_config",
    "effective_topic_value",
    "to_log_config",
    "topic_log_config",
    "validate_dynamic_broker_configs",
    "validate_topic_overrides",
]

_HOUR_MS: Final = 3_600_000
_MINUTE_MS: Final = 60_000


@dataclass(frozen=True)
class BrokerSynonym:
    """A broker key that sets a topic key's default; multiply its value by ``factor``."""

    name: str
    factor: int = 1


class _ThrottledReplicasValidator(Validator):
    """Kafka's rule: ``*`` alone, or ``partition:broker`` pairs."""

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if not isinstance(value, list) or value == ["*"]:
            return
        for item in value:
            if not re.fullmatch(r"[0-9]+:[0-9]+", item):
                raise ConfigError(
                    f"Invalid value {','.join(value)!r} for configuration {name}: must be the "
                    "literal '*' or a list of replicas as partitionId:brokerId,..."
                )

    def __str__(self) -> str:
        return "[partitionId]:[brokerId],[partitionId]:[brokerId],..."


_M = Importance.MEDIUM


def _topic(
    name: str,
    config_type: ConfigType,
    default: ConfigValue,
    doc: str,
    synonyms: tuple[BrokerSynonym, ...],
    validator: Validator | None = None,
) -> tuple[ConfigKey, tuple[BrokerSynonym, ...]]:
    # Every topic config can be changed with AlterConfigs, hence dynamic=True.
    key = ConfigKey(name, config_type, default, validator, _M, doc, dynamic=True)
    return key, synonyms


def _same(name: str) -> tuple[BrokerSynonym, ...]:
    return (BrokerSynonym(name),)


# fmt: off
_TOPIC_KEYS: Final = [
    _topic("cleanup.policy", ConfigType.LIST, ["delete"],
           "What happens to old segments: delete, compact or both.",
           _same("log.cleanup.policy"), ValidList("compact", "delete")),
    _topic("compression.type", ConfigType.STRING, "producer",
           "Compression of stored batches; producer keeps what the producer sent.",
           _same("compression.type"), OneOf(*COMPRESSION_TYPES)),
    _topic("delete.retention.ms", ConfigType.LONG, 86_400_000,
           "How long delete tombstones stay in a compacted log.",
           _same("log.cleaner.delete.retention.ms"), Range.at_least(0)),
    _topic("file.delete.delay.ms", ConfigType.LONG, 60_000,
           "Wait before a deleted segment's files are removed.",
           _same("log.segment.delete.delay.ms"), Range.at_least(0)),
    _topic("flush.messages", ConfigType.LONG, LONG_MAX,
           "Records appended before a forced fsync of the log.",
           _same("log.flush.interval.messages"), Range.at_least(1)),
    _topic("flush.ms", ConfigType.LONG, LONG_MAX,
           "Longest a record stays unflushed before a forced fsync.",
           (BrokerSynonym("log.flush.interval.ms"),
            BrokerSynonym("log.flush.scheduler.interval.ms")), Range.at_least(0)),
    _topic("follower.replication.throttled.replicas", ConfigType.LIST, [],
           "Replicas whose follower fetches are throttled (partition:broker, or *).",
           (), _ThrottledReplicasValidator()),
    _topic("index.interval.bytes", ConfigType.INT, 4096,
           "Log bytes between two offset index entries.",
           _same("log.index.interval.bytes"), Range.at_least(0)),
    # Kafka's own, for tests only (Kafka 4 refuses segment.bytes below 1 MiB): when set it
    # replaces segment.bytes. Never a client's setting in production.
    _topic("internal.segment.bytes", ConfigType.INT, None,
           "Tests only: a segment size below segment.bytes' 1 MiB minimum.",
           (), Range.at_least(14)),
    _topic("leader.replication.throttled.replicas", ConfigType.LIST, [],
           "Replicas whose leader-side replication is throttled (partition:broker, or *).",
           (), _ThrottledReplicasValidator()),
    _topic("max.compaction.lag.ms", ConfigType.LONG, LONG_MAX,
           "Oldest an uncompacted record may become.",
           _same("log.cleaner.max.compaction.lag.ms"), Range.at_least(1)),
    _topic("max.message.bytes", ConfigType.INT, 1_048_588,
           "Largest record batch the topic accepts.",
           _same("message.max.bytes"), Range.at_least(0)),
    _topic("message.downconversion.enable", ConfigType.BOOLEAN, True,
           "Accepted for compatibility; batches are never down-converted.",
           _same("log.message.downconversion.enable")),
    _topic("message.timestamp.after.max.ms", ConfigType.LONG, 3_600_000,
           "How far after the broker's time a CreateTime record's timestamp may be.",
           _same("log.message.timestamp.after.max.ms"), Range.at_least(0)),
    _topic("message.timestamp.before.max.ms", ConfigType.LONG, LONG_MAX,
           "How far before the broker's time a CreateTime record's timestamp may be.",
           _same("log.message.timestamp.before.max.ms"), Range.at_least(0)),
    _topic("message.timestamp.type", ConfigType.STRING, "CreateTime",
           "Which timestamp records carry: the producer's or the append time.",
           _same("log.message.timestamp.type"), OneOf("CreateTime", "LogAppendTime")),
    _topic("min.cleanable.dirty.ratio", ConfigType.DOUBLE, 0.5,
           "Share of dirty log that makes the partition eligible for cleaning.",
           _same("log.cleaner.min.cleanable.ratio"), Range.between(0, 1)),
    _topic("min.compaction.lag.ms", ConfigType.LONG, 0,
           "Youngest a record may be and still be compacted.",
           _same("log.cleaner.min.compaction.lag.ms"), Range.at_least(0)),
    _topic("min.insync.replicas", ConfigType.INT, None,
           "In-sync replicas acks=all needs; unset means a majority of the replicas.",
           _same("min.insync.replicas"), Range.at_least(1)),
    _topic("preallocate", ConfigType.BOOLEAN, False,
           "Whether new segment files are preallocated.",
           _same("log.preallocate")),
    _topic("quarantine.max.bytes", ConfigType.LONG, GIB,
           "Bytes of truncated records kept aside per partition instead of deleted.",
           _same("quarantine.max.bytes"), Range.at_least(0)),
    _topic("retention.bytes", ConfigType.LONG, -1,
           "Size each partition's log is trimmed to (-1: no limit).",
           _same("log.retention.bytes")),
    _topic("retention.ms", ConfigType.LONG, 604_800_000,
           "Age after which segments are deleted (-1: forever).",
           (BrokerSynonym("log.retention.ms"),
            BrokerSynonym("log.retention.minutes", _MINUTE_MS),
            BrokerSynonym("log.retention.hours", _HOUR_MS)), Range.at_least(-1)),
    _topic("segment.bytes", ConfigType.INT, GIB,
           "Size at which the log rolls a new segment.",
           _same("log.segment.bytes"), Range.at_least(MIB)),
    _topic("segment.index.bytes", ConfigType.INT, 10 * MIB,
           "Largest offset or time index file of a segment.",
           _same("log.index.size.max.bytes"), Range.at_least(4)),
    _topic("segment.jitter.ms", ConfigType.LONG, 0,
           "Random jitter subtracted from the roll age.",
           (BrokerSynonym("log.roll.jitter.ms"),
            BrokerSynonym("log.roll.jitter.hours", _HOUR_MS)), Range.at_least(0)),
    _topic("segment.ms", ConfigType.LONG, 604_800_000,
           "Age at which the log rolls a new segment.",
           (BrokerSynonym("log.roll.ms"),
            BrokerSynonym("log.roll.hours", _HOUR_MS)), Range.at_least(1)),
    _topic("unclean.leader.election.enable", ConfigType.BOOLEAN, False,
           "Whether an out-of-sync replica may become leader, losing records.",
           _same("unclean.leader.election.enable")),
    # Odradek's own: the history of unclean elections, written by the controller only.
    _topic(UNCLEAN_ELECTIONS_CONFIG, ConfigType.STRING, "",
           "Unclean elections of this topic and the records they dropped "
           "(JSON, written by the controller; delete it to acknowledge them).", ()),
]
# fmt: on

TOPIC_CONFIG_DEF: Final = ConfigDef(key for key, _ in _TOPIC_KEYS)
TOPIC_CONFIG_SYNONYMS: Final[Mapping[str, tuple[BrokerSynonym, ...]]] = {
    key.name: synonyms for key, synonyms in _TOPIC_KEYS
}


def _check_synonyms() -> None:
    # A synonym that is not a server key would silently never apply; fail at import instead.
    for topic_name, synonyms in TOPIC_CONFIG_SYNONYMS.items():
        for synonym in synonyms:
            if synonym.name not in SERVER_CONFIG_DEF:
                raise ConfigError(f"{topic_name}: broker synonym {synonym.name} is not defined")


_check_synonyms()

# Kafka's DynamicLogConfig.ReconfigurableConfigs: the first (primary) broker synonym of
# each topic key. The unit variants (log.retention.hours ...) stay static, as in Kafka.
_DYNAMIC_TOPIC_OF: Final[Mapping[str, tuple[str, BrokerSynonym]]] = {
    synonyms[0].name: (topic_name, synonyms[0])
    for topic_name, synonyms in TOPIC_CONFIG_SYNONYMS.items()
    if synonyms
}
DYNAMIC_BROKER_TOPIC_KEYS: Final[frozenset[str]] = frozenset(_DYNAMIC_TOPIC_OF)
"""Broker keys that may be set dynamically, per broker or as the cluster default."""
REPLICATION_THROTTLE_KEYS: Final[frozenset[str]] = frozenset(
    {"follower.replication.throttled.rate"}
)
"""Dynamic broker keys that are not topic defaults: the reassignment throttle, which the
replica fetchers read from the image on every fetch."""


def _policy_items(value: str) -> list[str]:
    return [item.strip().lower() for item in value.split(",")]


def validate_dynamic_broker_configs(configs: Mapping[str, str]) -> dict[str, ConfigValue]:
    """Typed values of one broker resource's dynamic configs; :class:`ConfigError` names
    the first bad key.

    Each value is checked against its server key (type and range) and, as the default it
    becomes, against the topic key it feeds (``log.roll.ms`` 0 would be a ``segment.ms``
    of 0), so a dynamic value can never make a topic's storage settings invalid.
    """
    typed: dict[str, ConfigValue] = {}
    for name, raw in configs.items():
        if name in REPLICATION_THROTTLE_KEYS:
            typed[name] = SERVER_CONFIG_DEF.parse_value(name, raw)
            continue
        if name in LOG_CLEANER_KEYS:
            typed[name] = SERVER_CONFIG_DEF.parse_value(name, raw)
            check_dynamic_cleaner_key(name, typed[name])
            continue
        if dynamic_ssl_key(name) is not None:
            # A listener's key or trust store: checked by loading it (config_requests).
            typed[name] = raw
            continue
        target = _DYNAMIC_TOPIC_OF.get(name)
        if target is None:
            raise ConfigError(f"Cannot update these configs dynamically: {name}")
        value = SERVER_CONFIG_DEF.parse_value(name, raw)
        topic_name, synonym = target
        validator = TOPIC_CONFIG_DEF[topic_name].validator
        if validator is not None and value is not None:
            validator.ensure_valid(name, _convert(topic_name, synonym, value))
        typed[name] = value
    return typed


def validate_topic_overrides(
    overrides: Mapping[str, str], server: ServerConfig | None = None
) -> dict[str, ConfigValue]:
    """Typed values of a topic's overrides; :class:`ConfigError` names the first bad key.

    An unknown key or an invalid value is refused, as CreateTopics and AlterConfigs
    refuse them with INVALID_CONFIG. ``min.compaction.lag.ms`` may not exceed
    ``max.compaction.lag.ms``; the one not overridden comes from ``server`` when given,
    else from the topic default.
    """
    typed: dict[str, ConfigValue] = {}
    for name, raw in overrides.items():
        key = TOPIC_CONFIG_DEF.get(name)
        if key is None:
            raise ConfigError(f"Unknown topic config name: {name}")
        typed[name] = key.parse(raw)
    if "min.compaction.lag.ms" in typed or "max.compaction.lag.ms" in typed:
        lag_min = _resolved_int(typed, server, "min.compaction.lag.ms")
        lag_max = _resolved_int(typed, server, "max.compaction.lag.ms")
        if lag_min > lag_max:
            raise ConfigError(
                f"min.compaction.lag.ms ({lag_min}) must not exceed "
                f"max.compaction.lag.ms ({lag_max})"
            )
    return typed


def _resolved_int(typed: Mapping[str, ConfigValue], server: ServerConfig | None, name: str) -> int:
    value = typed.get(name)
    if value is None:
        value = (
            _resolve(name, server, {}, {})[0]
            if server is not None
            else TOPIC_CONFIG_DEF[name].default_value
        )
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"configuration {name} has no integer value")
    return value


def _convert(topic_name: str, synonym: BrokerSynonym, value: ConfigValue) -> ConfigValue:
    if synonym.factor != 1 and isinstance(value, int) and not isinstance(value, bool):
        value = value * synonym.factor
    # Kafka reads any negative broker retention time as "forever", which is -1.
    if topic_name == "retention.ms" and isinstance(value, int) and value < 0:
        value = -1
    return value


def _resolve(
    name: str,
    server: ServerConfig,
    dynamic_broker: Mapping[str, str],
    dynamic_default_broker: Mapping[str, str],
) -> tuple[ConfigValue, ConfigSource]:
    """A topic key's value and source from the broker side (no topic override)."""
    synonyms = TOPIC_CONFIG_SYNONYMS[name]
    # Synonym order comes first: a static log.retention.ms wins over a dynamic
    # log.retention.hours, because Kafka derives the value from the merged broker config.
    for synonym in synonyms:
        for layer, source in (
            (dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (dynamic_default_broker, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ):
            if synonym.name in layer:
                typed = SERVER_CONFIG_DEF.parse_value(synonym.name, layer[synonym.name])
                return _convert(name, synonym, typed), source
        if server.is_set(synonym.name):
            return _convert(name, synonym, server.get(synonym.name)), (
                ConfigSource.STATIC_BROKER_CONFIG
            )
    for synonym in synonyms:
        default = SERVER_CONFIG_DEF[synonym.name].default_value
        if default is not None:
            return _convert(name, synonym, default), ConfigSource.DEFAULT_CONFIG
    return TOPIC_CONFIG_DEF[name].default_value, ConfigSource.DEFAULT_CONFIG


def _broker_synonyms(
    name: str,
    server: ServerConfig,
    dynamic_broker: Mapping[str, str],
    dynamic_default_broker: Mapping[str, str],
) -> list[ConfigSynonym]:
    """Kafka's synonym list: by source first (dynamic, cluster default, static, default),
    then by synonym order; values are the broker keys' own strings, in their own units.
    """
    synonyms = TOPIC_CONFIG_SYNONYMS[name]
    result: list[ConfigSynonym] = []
    for layer, source in (
        (dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
        (dynamic_default_broker, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (server.originals, ConfigSource.STATIC_BROKER_CONFIG),
    ):
        for synonym in synonyms:
            if synonym.name in layer:
                result.append(ConfigSynonym(synonym.name, layer[synonym.name], source))
    for synonym in synonyms:
        key = SERVER_CONFIG_DEF[synonym.name]
        if key.default_value is not None:
            result.append(
                ConfigSynonym(
                    synonym.name, key.format(key.default_value), ConfigSource.DEFAULT_CONFIG
                )
            )
    return result


def effective_topic_config(
    server: ServerConfig,
    overrides: Mapping[str, str],
    *,
    dynamic_broker: Mapping[str, str] | None = None,
    dynamic_default_broker: Mapping[str, str] | None = None,
    replication_factor: int | None = None,
    include_synonyms: bool = True,
) -> list[ConfigEntry]:
    """Every topic config key with its effective value, as DescribeConfigs reports it.

    ``overrides`` are the topic's own configs (validated here; a bad one raises
    :class:`ConfigError`). ``dynamic_broker`` and ``dynamic_default_broker`` are the
    broker configs set at run time for this broker and for the whole cluster.
    ``min.insync.replicas`` with no value anywhere resolves to a majority of
    ``replication_factor`` when that is given (our default), else it is reported unset.
    Entries are sorted by name.

    One deliberate difference: Kafka builds a topic key's synonym list and then drops
    every synonym ahead of the first one named like the primary broker key
    (``log.retention.ms``); with only ``log.retention.hours`` in the file that leaves an
    empty list and a DEFAULT_CONFIG source for a value that came from the file. We keep
    the list whole and report the source of the synonym that supplied the value.
    """
    dynamic = dynamic_broker or {}
    dynamic_default = dynamic_default_broker or {}
    typed_overrides = validate_topic_overrides(overrides, server)
    entries: list[ConfigEntry] = []
    for key in sorted(TOPIC_CONFIG_DEF, key=lambda k: k.name):
        name = key.name
        synonyms = _broker_synonyms(name, server, dynamic, dynamic_default)
        if name in typed_overrides:
            value = typed_overrides[name]
            source = ConfigSource.DYNAMIC_TOPIC_CONFIG
            synonyms.insert(
                0, ConfigSynonym(name, key.format(value), ConfigSource.DYNAMIC_TOPIC_CONFIG)
            )
        else:
            value, source = _resolve(name, server, dynamic, dynamic_default)
        if value is None and name == "min.insync.replicas" and replication_factor is not None:
            value = majority(replication_factor)
        sensitive = key.type is ConfigType.PASSWORD
        entries.append(
            ConfigEntry(
                name=name,
                value=None if sensitive else key.format(value),
                source=source,
                is_default=source is ConfigSource.DEFAULT_CONFIG,
                read_only=not key.dynamic,
                sensitive=sensitive,
                synonyms=tuple(synonyms) if include_synonyms else (),
                config_type=key.type,
                documentation=key.doc,
            )
        )
    return entries


def _entry_value(values: Mapping[str, str | None], name: str) -> ConfigValue:
    """A topic key's parsed value from the entries, or its default."""
    raw = values.get(name)
    return (
        TOPIC_CONFIG_DEF[name].default_value
        if raw is None
        else TOPIC_CONFIG_DEF.parse_value(name, raw)
    )


def _entry_int(values: Mapping[str, str | None], name: str) -> int:
    value = _entry_value(values, name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"topic configuration {name} has no integer value")
    return value


def _entry_float(values: Mapping[str, str | None], name: str) -> float:
    value = _entry_value(values, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"topic configuration {name} has no number value")
    return float(value)


def to_log_config(effective: Iterable[ConfigEntry]) -> LogConfig:
    """The storage engine's settings from a topic's effective configuration.

    Entries that are missing take the topic defaults; values are checked again, so a
    hand-made entry cannot slip an invalid setting into the storage engine.
    """
    values = {entry.name: entry.value for entry in effective}
    policy = values.get("cleanup.policy")
    # Kafka deletes old segments by time and size only where the policy has "delete"; a
    # compacted-only log is cleaned by compaction alone.
    items = ["delete"] if policy is None else _policy_items(policy)
    deletes = "delete" in items
    internal_segment_bytes = values.get("internal.segment.bytes")
    return LogConfig(
        segment_bytes=(
            _entry_int(values, "segment.bytes")
            if internal_segment_bytes is None
            else _entry_int(values, "internal.segment.bytes")
        ),
        segment_ms=_entry_int(values, "segment.ms"),
        segment_index_bytes=_entry_int(values, "segment.index.bytes"),
        index_interval_bytes=_entry_int(values, "index.interval.bytes"),
        retention_ms=_entry_int(values, "retention.ms") if deletes else -1,
        retention_bytes=_entry_int(values, "retention.bytes") if deletes else -1,
        flush_messages=_entry_int(values, "flush.messages"),
        flush_ms=_entry_int(values, "flush.ms"),
        quarantine_max_bytes=_entry_int(values, "quarantine.max.bytes"),
        compact="compact" in items,
        cleaning=CleaningPolicy(
            min_cleanable_dirty_ratio=_entry_float(values, "min.cleanable.dirty.ratio"),
            min_compaction_lag_ms=_entry_int(values, "min.compaction.lag.ms"),
            max_compaction_lag_ms=_entry_int(values, "max.compaction.lag.ms"),
            delete_retention_ms=_entry_int(values, "delete.retention.ms"),
        ),
    )


def topic_log_config(server: ServerConfig, overrides: Mapping[str, str]) -> LogConfig:
    """Shorthand: :func:`to_log_config` of :func:`effective_topic_config`."""
    return to_log_config(effective_topic_config(server, overrides, include_synonyms=False))


def _image_layers(
    image_configs: Mapping[tuple[int, str], Mapping[str, str]], topic: str, node_id: int
) -> tuple[Mapping[str, str], Mapping[str, str], Mapping[str, str]]:
    """The topic's overrides, this broker's dynamic configs and the cluster defaults."""
    return (
        image_configs.get((CONFIG_RESOURCE_TOPIC, topic), {}),
        image_configs.get((CONFIG_RESOURCE_BROKER, str(node_id)), {}),
        image_configs.get((CONFIG_RESOURCE_BROKER, ""), {}),
    )


def effective_log_config(
    server: ServerConfig,
    image_configs: Mapping[tuple[int, str], Mapping[str, str]],
    topic: str,
    node_id: int,
) -> LogConfig:
    """The storage settings of ``topic`` on broker ``node_id``, from the image's configs.

    Each value comes from the topic's override, else this broker's dynamic config, else
    the dynamic cluster default, else ``server.properties``, else the default. A stored
    value this build does not accept raises :class:`ConfigError`.
    """
    overrides, dynamic_broker, dynamic_default = _image_layers(image_configs, topic, node_id)
    return to_log_config(
        effective_topic_config(
            server,
            overrides,
            dynamic_broker=dynamic_broker,
            dynamic_default_broker=dynamic_default,
            include_synonyms=False,
        )
    )


def effective_topic_value(
    server: ServerConfig,
    image_configs: Mapping[tuple[int, str], Mapping[str, str]],
    topic: str,
    node_id: int,
    name: str,
) -> ConfigValue:
    """One topic key's typed value for ``topic`` on broker ``node_id``.

    Same precedence as :func:`effective_log_config`. An unknown key or a stored value this
    build does not accept raises :class:`ConfigError`; ``min.insync.replicas`` set nowhere
    is ``None`` (a majority of the replicas, which the caller knows).
    """
    key = TOPIC_CONFIG_DEF.get(name)
    if key is None:
        raise ConfigError(f"Unknown topic config name: {name}")
    overrides, dynamic_broker, dynamic_default = _image_layers(image_configs, topic, node_id)
    if name in overrides:
        return key.parse(overrides[name])
    return _resolve(name, server, dynamic_broker, dynamic_default)[0]


def effective_record_policy(
    server: ServerConfig,
    image_configs: Mapping[tuple[int, str], Mapping[str, str]],
    topic: str,
    node_id: int,
) -> RecordPolicy:
    """What produced records of ``topic`` are checked against on broker ``node_id``:
    ``message.timestamp.type``, ``message.timestamp.before.max.ms`` and
    ``message.timestamp.after.max.ms``, and whether ``cleanup.policy`` includes
    ``compact`` (then every record needs a key). Same precedence as
    :func:`effective_log_config`; a stored value this build does not accept raises
    :class:`ConfigError`."""

    def value(name: str) -> ConfigValue:
        return effective_topic_value(server, image_configs, topic, node_id, name)

    timestamp_type = value("message.timestamp.type")
    before = value("message.timestamp.before.max.ms")
    after = value("message.timestamp.after.max.ms")
    cleanup = value("cleanup.policy")
    if not isinstance(before, int) or not isinstance(after, int):
        raise ConfigError(f"topic {topic}: timestamp bounds {before!r}, {after!r}")
    return RecordPolicy(
        timestamp_type=(
            TimestampType.LOG_APPEND_TIME
            if timestamp_type == "LogAppendTime"
            else TimestampType.CREATE_TIME
        ),
        timestamp_before_max_ms=before,
        timestamp_after_max_ms=after,
        keys_required=isinstance(cleanup, list) and "compact" in cleanup,
    )
