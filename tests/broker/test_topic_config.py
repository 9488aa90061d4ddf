"""Topic configs: validation, DescribeConfigs values, sources and synonyms, LogConfig."""

from __future__ import annotations

import dataclasses
import re

import pytest

from odradek.broker.groups import OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIGS
from odradek.broker.server_config import ServerConfig
from odradek.broker.server_keys import SERVER_CONFIG_DEF
from odradek.broker.topic_config import (
    DYNAMIC_BROKER_TOPIC_KEYS,
    TOPIC_CONFIG_DEF,
    TOPIC_CONFIG_SYNONYMS,
    ConfigEntry,
    ConfigSource,
    ConfigSynonym,
    effective_log_config,
    effective_record_policy,
    effective_topic_config,
    effective_topic_value,
    to_log_config,
    topic_log_config,
    validate_dynamic_broker_configs,
    validate_topic_overrides,
)
from odradek.controller.image import CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC
from odradek.core.errors import ConfigError
from odradek.protocol.record_batch import (
    TimestampType,
)
from odradek.storage.log import LogConfig

BASE = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.quorum.voters": "1@localhost:9093",
    "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
    "controller.listener.names": "CONTROLLER",
}

S = ConfigSource


def server(**settings: str) -> ServerConfig:
    return ServerConfig.from_properties(
        {**BASE, **{k.replace("_", "."): v for k, v in settings.items()}}
    )


def by_name(entries: list[ConfigEntry]) -> dict[str, ConfigEntry]:
    return {e.name: e for e in entries}


def synonyms(entry: ConfigEntry) -> list[tuple[str, str | None, ConfigSource]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


# --- validation -------------------------------------------------------------------------


def test_valid_overrides_come_back_typed() -> None:
    assert validate_topic_overrides(
        {
            "retention.ms": "-1",
            "cleanup.policy": "compact, delete",
            "min.insync.replicas": "2",
            "unclean.leader.election.enable": "FALSE",
            "min.cleanable.dirty.ratio": "0.1",
            "leader.replication.throttled.replicas": "0:1,1:2",
            "follower.replication.throttled.replicas": "*",
        }
    ) == {
        "retention.ms": -1,
        "cleanup.policy": ["compact", "delete"],
        "min.insync.replicas": 2,
        "unclean.leader.election.enable": False,
        "min.cleanable.dirty.ratio": 0.1,
        "leader.replication.throttled.replicas": ["0:1", "1:2"],
        "follower.replication.throttled.replicas": ["*"],
    }


def test_unknown_topic_key_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match=r"Unknown topic config name: retention.hours"):
        validate_topic_overrides({"retention.hours": "1"})
    # A broker key is not a topic key, though it is its synonym.
    with pytest.raises(ConfigError, match=r"Unknown topic config name: log.retention.ms"):
        validate_topic_overrides({"log.retention.ms": "1"})


@pytest.mark.parametrize(
    ("key", "value", "needle"),
    [
        ("retention.ms", "-2", "at least -1"),
        ("retention.ms", "1h", "LONG"),
        ("segment.bytes", "1000", "at least 1048576"),
        ("segment.ms", "0", "at least 1"),
        ("cleanup.policy", "purge", "'purge' is not one of"),
        ("compression.type", "brotli", "one of"),
        ("min.insync.replicas", "0", "at least 1"),
        ("message.timestamp.type", "createtime", "one of"),
        ("message.timestamp.after.max.ms", "-1", "at least 0"),
        ("message.timestamp.before.max.ms", "-5", "at least 0"),
        ("unclean.leader.election.enable", "maybe", "true or false"),
        ("min.cleanable.dirty.ratio", "1.5", "no more than 1"),
        ("max.message.bytes", "99999999999", "INT"),
        ("leader.replication.throttled.replicas", "1-2", "partitionId:brokerId"),
        ("flush.messages", "0", "at least 1"),
    ],
)
def test_bad_values_name_key_and_value(key: str, value: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate_topic_overrides({key: value})
    message = str(info.value)
    assert key in message
    assert value in message
    assert needle in message


def test_min_compaction_lag_may_not_exceed_max() -> None:
    validate_topic_overrides({"min.compaction.lag.ms": "5", "max.compaction.lag.ms": "5"})
    with pytest.raises(ConfigError, match=r"min.compaction.lag.ms \(6\).*max.compaction.lag.ms"):
        validate_topic_overrides({"min.compaction.lag.ms": "6", "max.compaction.lag.ms": "5"})
    # The side not overridden comes from the broker when it is known.
    strict = server(log_cleaner_max_compaction_lag_ms="100")
    validate_topic_overrides({"min.compaction.lag.ms": "100"}, strict)
    with pytest.raises(ConfigError, match=r"max.compaction.lag.ms \(100\)"):
        validate_topic_overrides({"min.compaction.lag.ms": "101"}, strict)


# --- DescribeConfigs --------------------------------------------------------------------


def test_topic_without_overrides_on_a_default_broker() -> None:
    entries = effective_topic_config(server(), {})
    assert [e.name for e in entries] == sorted(TOPIC_CONFIG_DEF.names())
    assert all(e.source is S.DEFAULT_CONFIG and e.is_default for e in entries)
    assert not any(e.read_only or e.sensitive for e in entries)
    values = {e.name: e.value for e in entries}
    assert values["retention.ms"] == "604800000"
    assert values["segment.bytes"] == "1073741824"
    assert values["segment.ms"] == "604800000"
    assert values["max.message.bytes"] == "1048588"
    assert values["cleanup.policy"] == "delete"
    assert values["unclean.leader.election.enable"] == "false"
    assert values["min.cleanable.dirty.ratio"] == "0.5"
    # Ours: no broker-wide min.insync.replicas, and no replication factor given.
    assert values["min.insync.replicas"] is None
    retention = by_name(entries)["retention.ms"]
    # Only the synonym with a default is listed, in the broker key's own unit (hours).
    assert synonyms(retention) == [("log.retention.hours", "168", S.DEFAULT_CONFIG)]


def test_topic_override_comes_first() -> None:
    entries = by_name(effective_topic_config(server(), {"retention.ms": "1000"}))
    retention = entries["retention.ms"]
    assert retention.value == "1000"
    assert retention.source is S.DYNAMIC_TOPIC_CONFIG
    assert not retention.is_default
    assert synonyms(retention) == [
        ("retention.ms", "1000", S.DYNAMIC_TOPIC_CONFIG),
        ("log.retention.hours", "168", S.DEFAULT_CONFIG),
    ]
    assert entries["segment.bytes"].source is S.DEFAULT_CONFIG


def test_static_broker_value_in_minutes_becomes_ms() -> None:
    retention = by_name(effective_topic_config(server(log_retention_minutes="30"), {}))[
        "retention.ms"
    ]
    assert retention.value == str(30 * 60_000)
    assert retention.source is S.STATIC_BROKER_CONFIG
    assert synonyms(retention) == [
        ("log.retention.minutes", "30", S.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", S.DEFAULT_CONFIG),
    ]


def test_broker_ms_wins_over_hours_and_both_are_listed() -> None:
    cfg = server(log_retention_hours="2", log_retention_ms="1234")
    retention = by_name(effective_topic_config(cfg, {}))["retention.ms"]
    assert retention.value == "1234"
    assert synonyms(retention) == [
        ("log.retention.ms", "1234", S.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "2", S.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", S.DEFAULT_CONFIG),
    ]


def test_negative_broker_retention_means_forever() -> None:
    retention = by_name(effective_topic_config(server(log_retention_hours="-5"), {}))[
        "retention.ms"
    ]
    assert retention.value == "-1"


def test_dynamic_broker_and_cluster_default_sources() -> None:
    cfg = server(log_segment_bytes="2097152", message_max_bytes="2000000")
    entries = by_name(
        effective_topic_config(
            cfg,
            {},
            dynamic_broker={"log.segment.bytes": "4194304"},
            dynamic_default_broker={"log.segment.bytes": "3145728", "message.max.bytes": "7"},
        )
    )
    segment = entries["segment.bytes"]
    assert segment.value == "4194304"
    assert segment.source is S.DYNAMIC_BROKER_CONFIG
    assert synonyms(segment) == [
        ("log.segment.bytes", "4194304", S.DYNAMIC_BROKER_CONFIG),
        ("log.segment.bytes", "3145728", S.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.segment.bytes", "2097152", S.STATIC_BROKER_CONFIG),
        ("log.segment.bytes", "1073741824", S.DEFAULT_CONFIG),
    ]
    max_message = entries["max.message.bytes"]
    assert max_message.value == "7"
    assert max_message.source is S.DYNAMIC_DEFAULT_BROKER_CONFIG


def test_a_static_higher_synonym_wins_over_a_dynamic_lower_one() -> None:
    retention = by_name(
        effective_topic_config(
            server(log_retention_ms="5000"), {}, dynamic_broker={"log.retention.hours": "1"}
        )
    )["retention.ms"]
    assert retention.value == "5000"
    assert retention.source is S.STATIC_BROKER_CONFIG


def test_invalid_dynamic_broker_value_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"log.segment.bytes"):
        effective_topic_config(server(), {}, dynamic_broker={"log.segment.bytes": "12"})


def test_broker_key_with_another_name() -> None:
    entries = by_name(effective_topic_config(server(message_max_bytes="500000"), {}))
    assert entries["max.message.bytes"].value == "500000"
    assert synonyms(entries["max.message.bytes"])[0] == (
        "message.max.bytes",
        "500000",
        S.STATIC_BROKER_CONFIG,
    )


@pytest.mark.parametrize(("rf", "expected"), [(1, "1"), (3, "2"), (5, "3")])
def test_min_insync_replicas_is_a_majority_of_the_replication_factor(
    rf: int, expected: str
) -> None:
    entry = by_name(effective_topic_config(server(), {}, replication_factor=rf))[
        "min.insync.replicas"
    ]
    assert entry.value == expected
    assert entry.source is S.DEFAULT_CONFIG


def test_explicit_min_insync_replicas_wins_over_the_majority() -> None:
    broker_set = by_name(
        effective_topic_config(server(min_insync_replicas="1"), {}, replication_factor=5)
    )["min.insync.replicas"]
    assert (broker_set.value, broker_set.source) == ("1", S.STATIC_BROKER_CONFIG)
    topic_set = by_name(
        effective_topic_config(
            server(min_insync_replicas="1"), {"min.insync.replicas": "4"}, replication_factor=5
        )
    )["min.insync.replicas"]
    assert (topic_set.value, topic_set.source) == ("4", S.DYNAMIC_TOPIC_CONFIG)


def test_bad_override_is_refused_when_describing() -> None:
    with pytest.raises(ConfigError, match=r"segment.bytes"):
        effective_topic_config(server(), {"segment.bytes": "1"})


def test_synonyms_may_be_left_out() -> None:
    entries = effective_topic_config(server(), {"retention.ms": "1"}, include_synonyms=False)
    assert all(e.synonyms == () for e in entries)


def test_entries_carry_type_and_documentation() -> None:
    retention = by_name(effective_topic_config(server(), {}))["retention.ms"]
    assert retention.config_type is not None
    assert retention.config_type.name == "LONG"
    assert retention.documentation


# --- the tables agree -------------------------------------------------------------------


def test_every_synonym_is_a_server_key() -> None:
    for name, broker_synonyms in TOPIC_CONFIG_SYNONYMS.items():
        for synonym in broker_synonyms:
            assert synonym.name in SERVER_CONFIG_DEF, (name, synonym.name)


def test_topic_defaults_equal_the_converted_broker_defaults() -> None:
    """A topic on a default broker gets the topic key's own default, for every key."""
    described = by_name(effective_topic_config(server(), {}))
    for key in TOPIC_CONFIG_DEF:
        assert described[key.name].value == key.format(key.default_value), key.name


# --- LogConfig --------------------------------------------------------------------------


def test_log_config_of_a_default_topic_matches_the_storage_defaults() -> None:
    assert to_log_config(effective_topic_config(server(), {})) == LogConfig()


def test_log_config_takes_overrides_and_broker_values() -> None:
    cfg = server(log_retention_minutes="10", log_index_interval_bytes="8192")
    log_config = topic_log_config(
        cfg,
        {
            "segment.bytes": "2097152",
            "segment.ms": "60000",
            "segment.index.bytes": "4096",
            "retention.bytes": "1000000",
            "flush.messages": "1",
            "flush.ms": "100",
            "quarantine.max.bytes": "0",
        },
    )
    assert log_config == LogConfig(
        segment_bytes=2_097_152,
        segment_ms=60_000,
        segment_index_bytes=4096,
        index_interval_bytes=8192,
        retention_ms=600_000,
        retention_bytes=1_000_000,
        flush_messages=1,
        flush_ms=100,
        quarantine_max_bytes=0,
    )


@pytest.mark.parametrize("policy", ["compact", "compact,delete", "delete"])
def test_retention_deletes_only_where_the_policy_has_delete(policy: str) -> None:
    # As in Kafka, time and size retention apply to a log whose policy has "delete"; a
    # compacted-only log (compaction being absent here) keeps every record.
    cfg = server(log_retention_bytes="1000", log_retention_ms="60000")
    log_config = topic_log_config(cfg, {"cleanup.policy": policy})
    deletes = "delete" in policy
    assert log_config.retention_ms == (60_000 if deletes else -1)
    assert log_config.retention_bytes == (1000 if deletes else -1)


def test_the_offsets_topic_keeps_every_record_whatever_the_broker_retention() -> None:
    # __consumer_offsets holds the only copy of the groups' committed offsets; a broker-wide
    # log.retention.bytes must not trim it.
    cfg = server(log_retention_bytes="1000", log_retention_ms="60000")
    configs = {(CONFIG_RESOURCE_TOPIC, OFFSETS_TOPIC): dict(OFFSETS_TOPIC_CONFIGS)}
    log_config = effective_log_config(cfg, configs, OFFSETS_TOPIC, 1)
    assert (log_config.retention_ms, log_config.retention_bytes) == (-1, -1)


@pytest.mark.parametrize(
    ("policy", "compact", "deletes"),
    [("compact", True, False), ("compact,delete", True, True), (" compact ", True, False),
     ("delete", False, True)],
)  # fmt: skip
def test_the_cleanup_policy_gives_the_log_its_cleaner_settings(
    policy: str, compact: bool, deletes: bool
) -> None:
    cfg = server(log_cleaner_min_cleanable_ratio="0.2", log_retention_ms="60000")
    log_config = topic_log_config(
        cfg, {"cleanup.policy": policy, "delete.retention.ms": "5000", "min.compaction.lag.ms": "7"}
    )
    assert log_config.compact is compact
    assert log_config.retention_ms == (60000 if deletes else -1)
    cleaning = log_config.cleaning
    assert cleaning.min_cleanable_dirty_ratio == 0.2  # the broker default's synonym
    assert (cleaning.delete_retention_ms, cleaning.min_compaction_lag_ms) == (5000, 7)


def test_internal_segment_bytes_replaces_segment_bytes_for_tests() -> None:
    cfg = server()
    assert topic_log_config(cfg, {"internal.segment.bytes": "4096"}).segment_bytes == 4096
    assert topic_log_config(cfg, {}).segment_bytes == 1024**3
    with pytest.raises(ConfigError, match=r"segment\.bytes"):
        validate_topic_overrides({"segment.bytes": "4096"}, cfg)


def test_log_config_from_partial_or_hand_made_entries() -> None:
    def entry(name: str, value: str | None) -> ConfigEntry:
        return ConfigEntry(name, value, S.DYNAMIC_TOPIC_CONFIG, False, False, False)

    assert to_log_config([entry("retention.ms", "5")]) == dataclasses.replace(
        LogConfig(), retention_ms=5
    )
    with pytest.raises(ConfigError, match=r"segment.bytes"):
        to_log_config([entry("segment.bytes", "10")])
    synonym = ConfigSynonym("retention.ms", "5", S.DYNAMIC_TOPIC_CONFIG)
    assert synonym.source == 1


# --- Dynamic broker keys and the image-based helpers -----------------------------------------


def test_dynamic_broker_keys_are_the_primary_synonyms() -> None:
    assert {"log.retention.ms", "log.segment.bytes", "message.max.bytes"} <= (
        DYNAMIC_BROKER_TOPIC_KEYS
    )
    assert {"min.insync.replicas", "log.cleanup.policy", "compression.type"} <= (
        DYNAMIC_BROKER_TOPIC_KEYS
    )
    # Unit variants and keys with other effects stay static, as in Kafka.
    assert not {"log.retention.hours", "log.roll.hours", "log.flush.scheduler.interval.ms"} & (
        DYNAMIC_BROKER_TOPIC_KEYS
    )
    assert "num.partitions" not in DYNAMIC_BROKER_TOPIC_KEYS
    assert len(DYNAMIC_BROKER_TOPIC_KEYS) == sum(1 for s in TOPIC_CONFIG_SYNONYMS.values() if s)


def test_dynamic_broker_values_come_back_typed() -> None:
    typed = validate_dynamic_broker_configs(
        {"log.retention.ms": "5000", "log.cleanup.policy": "compact,delete"}
    )
    assert typed == {"log.retention.ms": 5000, "log.cleanup.policy": ["compact", "delete"]}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("log.segment.bytes", "12"),
        ("log.retention.bytes", "x"),
        ("log.roll.ms", "0"),
        ("log.flush.interval.ms", "-1"),
        ("num.partitions", "3"),
    ],
)
def test_bad_dynamic_broker_values_name_the_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(key)):
        validate_dynamic_broker_configs({key: value})


def image_configs(
    topic: dict[str, str] | None = None,
    broker: dict[str, str] | None = None,
    default: dict[str, str] | None = None,
) -> dict[tuple[int, str], dict[str, str]]:
    return {
        (CONFIG_RESOURCE_TOPIC, "t"): topic or {},
        (CONFIG_RESOURCE_BROKER, "1"): broker or {},
        (CONFIG_RESOURCE_BROKER, ""): default or {},
        # Another broker's and another topic's configs never apply.
        (CONFIG_RESOURCE_BROKER, "2"): {"log.retention.ms": "2", "message.max.bytes": "2"},
        (CONFIG_RESOURCE_TOPIC, "u"): {"retention.ms": "3", "max.message.bytes": "3"},
    }


@pytest.mark.parametrize(
    ("layers", "expected"),
    [
        ({}, 604_800_000),  # default
        ({"static": "10"}, 10 * 3_600_000),  # log.retention.hours in server.properties
        ({"static": "10", "default": "500"}, 500),
        ({"static": "10", "default": "500", "broker": "700"}, 700),
        ({"static": "10", "default": "500", "broker": "700", "topic": "900"}, 900),
        ({"topic": "900"}, 900),
        ({"default": "500", "topic": "900"}, 900),
        ({"broker": "700", "default": "500"}, 700),
    ],
)
def test_effective_values_follow_the_four_layers(layers: dict[str, str], expected: int) -> None:
    srv = server(log_retention_hours=layers["static"]) if "static" in layers else server()
    configs = image_configs(
        topic={"retention.ms": layers["topic"]} if "topic" in layers else None,
        broker={"log.retention.ms": layers["broker"]} if "broker" in layers else None,
        default={"log.retention.ms": layers["default"]} if "default" in layers else None,
    )
    assert effective_topic_value(srv, configs, "t", 1, "retention.ms") == expected
    assert effective_log_config(srv, configs, "t", 1).retention_ms == expected


def test_effective_log_config_mixes_layers_key_by_key() -> None:
    srv = server(log_segment_bytes=str(4 << 20), log_flush_interval_messages="5")
    configs = image_configs(
        topic={"segment.bytes": str(3 << 20)},
        broker={"log.retention.bytes": "1000"},
        default={"log.retention.bytes": "2000", "log.index.interval.bytes": "8192"},
    )
    log = effective_log_config(srv, configs, "t", 1)
    assert log.segment_bytes == 3 << 20  # topic
    assert log.retention_bytes == 1000  # this broker
    assert log.index_interval_bytes == 8192  # cluster default
    assert log.flush_messages == 5  # static
    assert log.segment_ms == 7 * 24 * 3_600_000  # default
    # Seen from broker 2, its own dynamic value applies instead.
    assert effective_log_config(srv, configs, "t", 2).retention_ms == 2
    # A topic with no configs at all takes the broker side only.
    assert effective_log_config(srv, {}, "t", 1) == topic_log_config(srv, {})


def test_effective_topic_value_for_max_message_bytes_and_errors() -> None:
    srv = server(message_max_bytes="4000")
    assert effective_topic_value(srv, {}, "t", 1, "max.message.bytes") == 4000
    configs = image_configs(default={"message.max.bytes": "5000"})
    assert effective_topic_value(srv, configs, "t", 1, "max.message.bytes") == 5000
    configs = image_configs(
        broker={"message.max.bytes": "6000"}, default={"message.max.bytes": "5000"}
    )
    assert effective_topic_value(srv, configs, "t", 1, "max.message.bytes") == 6000
    configs = image_configs(topic={"max.message.bytes": "7000"}, broker={"message.max.bytes": "1"})
    assert effective_topic_value(srv, configs, "t", 1, "max.message.bytes") == 7000
    # Unset everywhere: None, the caller's majority.
    assert effective_topic_value(srv, {}, "t", 1, "min.insync.replicas") is None
    with pytest.raises(ConfigError, match=r"no\.such\.key"):
        effective_topic_value(srv, {}, "t", 1, "no.such.key")
    with pytest.raises(ConfigError, match=r"max\.message\.bytes"):
        effective_topic_value(
            srv, image_configs(topic={"max.message.bytes": "x"}), "t", 1, "max.message.bytes"
        )


def test_timestamp_bounds_have_kafka_4_defaults_and_broker_synonyms() -> None:
    entries = by_name(effective_topic_config(server(), {}))
    # Kafka 4: a record may be up to an hour ahead of the broker, and any age.
    assert entries["message.timestamp.after.max.ms"].value == "3600000"
    assert entries["message.timestamp.before.max.ms"].value == str(2**63 - 1)
    assert TOPIC_CONFIG_SYNONYMS["message.timestamp.after.max.ms"][0].name == (
        "log.message.timestamp.after.max.ms"
    )
    assert TOPIC_CONFIG_SYNONYMS["message.timestamp.before.max.ms"][0].name == (
        "log.message.timestamp.before.max.ms"
    )
    assert "log.message.timestamp.after.max.ms" in DYNAMIC_BROKER_TOPIC_KEYS
    assert "log.message.timestamp.before.max.ms" in DYNAMIC_BROKER_TOPIC_KEYS


def test_record_policy_of_a_default_topic() -> None:
    policy = effective_record_policy(server(), {}, "t", 1)
    assert policy.timestamp_type == TimestampType.CREATE_TIME
    assert (policy.timestamp_before_max_ms, policy.timestamp_after_max_ms) == (
        2**63 - 1,
        3_600_000,
    )
    assert not policy.keys_required


def test_record_policy_follows_topic_broker_and_static_layers() -> None:
    srv = server(
        log_message_timestamp_type="LogAppendTime",
        log_message_timestamp_after_max_ms="1000",
    )
    policy = effective_record_policy(srv, {}, "t", 1)
    assert policy.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert policy.timestamp_after_max_ms == 1000
    configs = image_configs(
        topic={"message.timestamp.type": "CreateTime", "cleanup.policy": "compact,delete"},
        default={"log.message.timestamp.before.max.ms": "60000"},
    )
    policy = effective_record_policy(srv, configs, "t", 1)
    assert policy.timestamp_type == TimestampType.CREATE_TIME  # the topic's own
    assert policy.timestamp_before_max_ms == 60_000  # the cluster default
    assert policy.timestamp_after_max_ms == 1000  # server.properties
    assert policy.keys_required  # compact: every record needs a key
    with pytest.raises(ConfigError, match=r"message\.timestamp\.after\.max\.ms"):
        effective_record_policy(
            srv, image_configs(topic={"message.timestamp.after.max.ms": "soon"}), "t", 1
        )
