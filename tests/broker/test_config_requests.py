"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs handlers: per-resource errors,
values, sources and synonyms, fields per version, commits and validate_only."""

from __future__ import annotations

from typing import Any

import pytest

from odradek.broker.config_entries import ConfigSource
from odradek.broker.config_requests import (
    ALTER_CONFIGS_VERSIONS,
    DESCRIBE_CONFIGS_VERSIONS,
    INCREMENTAL_ALTER_CONFIGS_VERSIONS,
    handle_alter_configs,
    handle_describe_configs,
    handle_incremental_alter_configs,
)
from odradek.broker.effects import CommitRecords, Reply
from odradek.broker.server_keys import SERVER_CONFIG_DEF
from odradek.broker.topic_config import DYNAMIC_BROKER_TOPIC_KEYS, REPLICATION_THROTTLE_KEYS
from odradek.core.config_keys import ConfigType
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from odradek.protocol.messages import alter_configs_request as legacy
from odradek.protocol.messages import incremental_alter_configs_request as incremental
from odradek.protocol.messages.describe_configs_request import DescribeConfigsResource
from odradek.protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResult,
)
from odradek.protocol.metadata import ConfigRecord
from odradek.security.sasl_keys import SASL_KEYS
from odradek.security.ssl_keys import SSL_KEYS
from tests.broker.harness import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    Harness,
    header,
    new_harness,
    roundtrip,
    versions,
)

DESCRIBE = DescribeConfigsRequest.API_KEY
ALTER = AlterConfigsRequest.API_KEY
INCREMENTAL = IncrementalAlterConfigsRequest.API_KEY
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@pytest.fixture
def h() -> Harness:
    harness = new_harness(properties={"num.partitions": "3", "log.retention.hours": "24"})
    harness.add_topic("orders", [[1], [1]], {"retention.ms": "1000"})
    harness.add_topic("plain", [[1, 2, 3]])
    return harness


def describe(
    h: Harness,
    resources: list[tuple[int, str, list[str] | None]],
    version: int = 4,
    *,
    synonyms: bool = False,
    documentation: bool = False,
) -> DescribeConfigsResponse:
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(resource_type=t, resource_name=n, configuration_keys=k)
            for t, n, k in resources
        ],
        include_synonyms=synonyms,
        include_documentation=documentation,
    )
    outcome = handle_describe_configs(h.state, h.server, header(DESCRIBE, version), request)
    assert isinstance(outcome, Reply)
    response = roundtrip(outcome.response, version)
    assert isinstance(response, DescribeConfigsResponse)
    return response


def only(response: DescribeConfigsResponse) -> DescribeConfigsResult:
    assert len(response.results) == 1
    return response.results[0]


def entries(result: DescribeConfigsResult) -> dict[str, DescribeConfigsResourceResult]:
    return {c.name: c for c in result.configs}


def synonyms_of(entry: DescribeConfigsResourceResult) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


# --- DescribeConfigs: topics ----------------------------------------------------------------


def test_topic_values_sources_and_synonyms(h: Harness) -> None:
    result = only(describe(h, [(TOPIC_RESOURCE, "orders", None)], synonyms=True))
    assert (result.error_code, result.error_message) == (ErrorCode.NONE, None)
    assert (result.resource_type, result.resource_name) == (TOPIC_RESOURCE, "orders")
    found = entries(result)
    retention = found["retention.ms"]
    assert retention.value == "1000"
    assert retention.config_source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert not retention.read_only and not retention.is_sensitive
    assert synonyms_of(retention) == [
        ("retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    segment = found["segment.bytes"]
    assert (segment.value, segment.config_source) == (str(1 << 30), ConfigSource.DEFAULT_CONFIG)
    # Every topic key is listed, sorted.
    assert list(found) == sorted(found) and len(found) > 20


def test_a_topic_without_overrides_takes_the_broker_values(h: Harness) -> None:
    found = entries(only(describe(h, [(TOPIC_RESOURCE, "plain", None)])))
    retention = found["retention.ms"]
    assert (retention.value, retention.config_source) == (
        str(24 * 3_600_000),
        ConfigSource.STATIC_BROKER_CONFIG,
    )
    # Our default for min.insync.replicas: a majority of the topic's 3 replicas.
    assert found["min.insync.replicas"].value == "2"
    # Synonyms were not asked for.
    assert all(not e.synonyms for e in found.values())


def test_dynamic_broker_configs_in_the_image_are_reported_as_such(h: Harness) -> None:
    h.set_config(BROKER_RESOURCE, "", "log.retention.ms", "5000")
    retention = entries(only(describe(h, [(TOPIC_RESOURCE, "plain", None)])))["retention.ms"]
    assert (retention.value, retention.config_source) == (
        "5000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    h.set_config(BROKER_RESOURCE, "1", "log.retention.ms", "7000")
    retention = entries(only(describe(h, [(TOPIC_RESOURCE, "plain", None)])))["retention.ms"]
    assert (retention.value, retention.config_source) == (
        "7000",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
    )


@pytest.mark.parametrize("keys", [["retention.ms", "no.such.key", "cleanup.policy"]])
def test_configuration_keys_select_entries(h: Harness, keys: list[str]) -> None:
    found = entries(only(describe(h, [(TOPIC_RESOURCE, "orders", keys)])))
    assert sorted(found) == ["cleanup.policy", "retention.ms"]
    # An empty list, like null, means every key (Kafka's createResponseConfig).
    everything = entries(only(describe(h, [(TOPIC_RESOURCE, "orders", [])])))
    assert len(everything) > 20


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("bad name", ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("", ErrorCode.INVALID_TOPIC_EXCEPTION),
    ],
)
@pytest.mark.parametrize("version", versions(DESCRIBE_CONFIGS_VERSIONS))
def test_topic_errors_are_per_resource(
    h: Harness, name: str, code: ErrorCode, version: int
) -> None:
    response = describe(
        h, [(TOPIC_RESOURCE, name, None), (TOPIC_RESOURCE, "orders", ["retention.ms"])], version
    )
    bad, good = response.results
    assert (bad.error_code, bad.resource_type, bad.resource_name) == (code, TOPIC_RESOURCE, name)
    assert bad.error_message and bad.configs == []
    assert good.error_code == ErrorCode.NONE
    assert [c.value for c in good.configs] == ["1000"]


# --- DescribeConfigs: fields per version ----------------------------------------------------


@pytest.mark.parametrize("version", versions(DESCRIBE_CONFIGS_VERSIONS))
@pytest.mark.parametrize("asked", [False, True])
def test_each_version_carries_exactly_its_fields(h: Harness, version: int, asked: bool) -> None:
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(
                resource_type=TOPIC_RESOURCE,
                resource_name="orders",
                configuration_keys=["retention.ms", "segment.bytes"],
            ),
            DescribeConfigsResource(resource_type=BROKER_RESOURCE, resource_name="1"),
        ],
        include_synonyms=asked and version >= 1,
        include_documentation=asked and version >= 3,
    )
    # Through the router: the request is decoded from a frame at this version, and the
    # reply is encoded with Router.encode and decoded as a client would.
    response = h.through_router(
        DESCRIBE,
        DESCRIBE_CONFIGS_VERSIONS,
        lambda hd, body: handle_describe_configs(h.state, h.server, hd, body),
        request,
        version,
    )
    assert isinstance(response, DescribeConfigsResponse)
    topic, broker = response.results
    retention, segment = topic.configs
    assert retention.value == "1000"
    if version == 0:
        # v0 has is_default and no source, synonyms, type or documentation.
        assert (retention.is_default, segment.is_default) == (False, True)
        assert retention.config_source == -1
    else:
        assert retention.is_default is False and segment.is_default is False
        assert (retention.config_source, segment.config_source) == (
            ConfigSource.DYNAMIC_TOPIC_CONFIG,
            ConfigSource.DEFAULT_CONFIG,
        )
    if asked and version >= 1:
        assert retention.synonyms[0].name == "retention.ms"
    else:
        assert retention.synonyms == []
    if version >= 3:
        assert retention.config_type == ConfigType.LONG
        assert segment.config_type == ConfigType.INT
        assert (retention.documentation is not None) == asked
        if asked:
            assert "deleted" in (retention.documentation or "")
    assert broker.error_code == ErrorCode.NONE and broker.configs


# --- DescribeConfigs: brokers ---------------------------------------------------------------


def test_this_broker_reports_its_server_config(h: Harness) -> None:
    found = entries(only(describe(h, [(BROKER_RESOURCE, "1", None)], synonyms=True)))
    partitions = found["num.partitions"]
    assert (partitions.value, partitions.config_source) == ("3", ConfigSource.STATIC_BROKER_CONFIG)
    assert partitions.read_only
    assert synonyms_of(partitions) == [
        ("num.partitions", "3", ConfigSource.STATIC_BROKER_CONFIG),
        ("num.partitions", "1", ConfigSource.DEFAULT_CONFIG),
    ]
    node = found["node.id"]
    assert (node.value, node.config_source) == ("1", ConfigSource.STATIC_BROKER_CONFIG)
    compression = found["compression.type"]
    assert (compression.value, compression.config_source) == (
        "producer",
        ConfigSource.DEFAULT_CONFIG,
    )
    # A topic config's broker default can be changed at run time; other keys cannot.
    assert not compression.read_only
    assert not found["log.retention.ms"].read_only
    assert found["log.retention.hours"].read_only
    assert {name for name, e in found.items() if not e.read_only} == (
        DYNAMIC_BROKER_TOPIC_KEYS | REPLICATION_THROTTLE_KEYS
    )
    rack = found["broker.rack"]
    assert (rack.value, rack.config_source, rack.synonyms) == (
        None,
        ConfigSource.DEFAULT_CONFIG,
        [],
    )
    assert list(found) == sorted(found)


def test_tls_and_sasl_keys_are_listed_and_their_secrets_never_shown() -> None:
    h = new_harness(
        properties={
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": "/etc/odradek/broker.p12",
            "ssl.keystore.password": "hunter2",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        }
    )
    found = entries(only(describe(h, [(BROKER_RESOURCE, "1", None)], synonyms=True)))
    location = found["ssl.keystore.location"]
    assert (location.value, location.config_source) == (
        "/etc/odradek/broker.p12",
        ConfigSource.STATIC_BROKER_CONFIG,
    )
    secret = found["ssl.keystore.password"]
    assert secret.is_sensitive and secret.value is None
    assert all(s.value is None for s in secret.synonyms)
    assert found["ssl.key.password"].is_sensitive
    assert found["sasl.enabled.mechanisms"].value == "SCRAM-SHA-512"
    assert found["ssl.client.auth"].value == "none"
    assert "hunter2" not in repr(found)


def test_broker_synonyms_follow_kafkas_order_and_cut(h: Harness) -> None:
    found = entries(only(describe(h, [(BROKER_RESOURCE, "1", None)], synonyms=True)))
    hours = found["log.retention.hours"]
    assert (hours.value, hours.config_source) == ("24", ConfigSource.STATIC_BROKER_CONFIG)
    assert synonyms_of(hours) == [
        ("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    # log.retention.ms is not set anywhere and has no default: Kafka reports null with
    # DEFAULT_CONFIG and no synonyms, since the list is cut before the first of its name.
    millis = found["log.retention.ms"]
    assert (millis.value, millis.config_source, millis.synonyms) == (
        None,
        ConfigSource.DEFAULT_CONFIG,
        [],
    )


def test_a_dynamic_value_wins_in_the_broker_description(h: Harness) -> None:
    h.set_config(BROKER_RESOURCE, "1", "log.retention.ms", "60000")
    found = entries(only(describe(h, [(BROKER_RESOURCE, "1", None)], synonyms=True)))
    millis = found["log.retention.ms"]
    assert (millis.value, millis.config_source) == ("60000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert synonyms_of(millis)[:2] == [
        ("log.retention.ms", "60000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG),
    ]
    # Describing log.retention.hours cuts the dynamic log.retention.ms that precedes it.
    hours = found["log.retention.hours"]
    assert (hours.value, hours.config_source) == ("24", ConfigSource.STATIC_BROKER_CONFIG)
    assert [s.name for s in hours.synonyms] == ["log.retention.hours", "log.retention.hours"]


def test_the_cluster_default_resource_lists_only_dynamic_defaults(h: Harness) -> None:
    assert only(describe(h, [(BROKER_RESOURCE, "", None)])).configs == []
    h.set_config(BROKER_RESOURCE, "", "log.retention.ms", "5000")
    h.set_config(BROKER_RESOURCE, "1", "log.retention.ms", "7000")
    h.set_config(BROKER_RESOURCE, "", "some.secret", "hunter2")
    found = entries(only(describe(h, [(BROKER_RESOURCE, "", None)], synonyms=True)))
    assert sorted(found) == ["log.retention.ms", "some.secret"]
    millis = found["log.retention.ms"]
    assert (millis.value, millis.config_source) == (
        "5000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    # Only the cluster default's own layer is listed (Kafka's ConfigHelper).
    assert synonyms_of(millis) == [
        ("log.retention.ms", "5000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    ]
    # A key we cannot type might be a secret: value and synonym values are null.
    secret = found["some.secret"]
    assert secret.is_sensitive and secret.value is None
    assert [s.value for s in secret.synonyms] == [None]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("2", "Unexpected broker id, expected 1 or empty string, but received 2"),
        ("one", "Broker id must be an integer, but it is: one"),
    ],
)
def test_another_brokers_resource_is_an_invalid_request(
    h: Harness, name: str, message: str
) -> None:
    result = only(describe(h, [(BROKER_RESOURCE, name, None)]))
    assert (result.error_code, result.error_message) == (ErrorCode.INVALID_REQUEST, message)
    assert result.configs == []


@pytest.mark.parametrize("resource_type", [0, 8, 16, 99])
def test_unsupported_resource_types_are_invalid_requests(h: Harness, resource_type: int) -> None:
    result = only(describe(h, [(resource_type, "x", None)]))
    assert result.error_code == ErrorCode.INVALID_REQUEST
    assert result.error_message


# --- AlterConfigs ----------------------------------------------------------------------------


def alter(
    h: Harness,
    resources: list[tuple[int, str, list[tuple[str, str | None]]]],
    *,
    validate_only: bool = False,
    version: int = 2,
) -> Any:
    request = AlterConfigsRequest(
        resources=[
            legacy.AlterConfigsResource(
                resource_type=t,
                resource_name=n,
                configs=[legacy.AlterableConfig(name=k, value=v) for k, v in c],
            )
            for t, n, c in resources
        ],
        validate_only=validate_only,
    )
    return handle_alter_configs(h.state, h.server, header(ALTER, version), request)


def codes(response: Any) -> list[tuple[int, str, int]]:
    return [(r.resource_type, r.resource_name, r.error_code) for r in response.responses]


def topic_configs(h: Harness, topic: str) -> dict[str, str]:
    return h.image.configs.get((TOPIC_RESOURCE, topic), {})


def test_alter_configs_commits_then_answers(h: Harness) -> None:
    outcome = alter(h, [(TOPIC_RESOURCE, "orders", [("segment.ms", "60000")])])
    # The answer waits for the commit: nothing has changed yet.
    assert isinstance(outcome, CommitRecords)
    assert topic_configs(h, "orders") == {"retention.ms": "1000"}
    assert [(r.name, r.value) for r in outcome.records] == [
        ("retention.ms", None),
        ("segment.ms", "60000"),
    ]
    response = h.carry(outcome)
    assert codes(response) == [(TOPIC_RESOURCE, "orders", ErrorCode.NONE)]
    assert response.responses[0].error_message is None
    assert topic_configs(h, "orders") == {"segment.ms": "60000"}
    described = entries(only(describe(h, [(TOPIC_RESOURCE, "orders", None)])))
    assert described["segment.ms"].value == "60000"
    assert described["retention.ms"].config_source == ConfigSource.STATIC_BROKER_CONFIG


COMPACT_POLICIES = ["compact", "delete,compact", "compact, delete"]


@pytest.mark.parametrize("policy", COMPACT_POLICIES)
@pytest.mark.parametrize("validate_only", [False, True])
def test_alter_configs_takes_compaction(h: Harness, policy: str, validate_only: bool) -> None:
    outcome = alter(
        h, [(TOPIC_RESOURCE, "orders", [("cleanup.policy", policy)])], validate_only=validate_only
    )
    response = h.carry(outcome)
    assert codes(response) == [(TOPIC_RESOURCE, "orders", ErrorCode.NONE)]
    described = entries(only(describe(h, [(TOPIC_RESOURCE, "orders", ["cleanup.policy"])])))
    # DescribeConfigs reports the policy the log is cleaned by.
    assert described["cleanup.policy"].value == (
        "delete" if validate_only else policy.replace(" ", "")
    )


@pytest.mark.parametrize("policy", COMPACT_POLICIES)
def test_incremental_alter_configs_takes_compaction(h: Harness, policy: str) -> None:
    response = h.carry(
        incremental_alter(h, [(TOPIC_RESOURCE, "orders", [("cleanup.policy", SET, policy)])])
    )
    assert codes(response) == [(TOPIC_RESOURCE, "orders", ErrorCode.NONE)]
    assert topic_configs(h, "orders") == {"retention.ms": "1000", "cleanup.policy": policy}
    response = h.carry(
        incremental_alter(h, [(BROKER_RESOURCE, "", [("log.cleanup.policy", SET, policy)])])
    )
    assert codes(response) == [(BROKER_RESOURCE, "", ErrorCode.NONE)]
    assert broker_configs(h, "") == {"log.cleanup.policy": policy}


def test_a_stored_compact_policy_stays_readable_and_can_be_left(h: Harness) -> None:
    # Written by an older build (or, for __consumer_offsets, by the broker itself).
    h.set_config(TOPIC_RESOURCE, "orders", "cleanup.policy", "compact,delete")
    described = entries(only(describe(h, [(TOPIC_RESOURCE, "orders", ["cleanup.policy"])])))
    assert described["cleanup.policy"].value == "compact,delete"
    # Other keys of the topic can still be changed; the stored value is no new request.
    response = h.carry(
        incremental_alter(h, [(TOPIC_RESOURCE, "orders", [("segment.ms", SET, "60000")])])
    )
    assert codes(response) == [(TOPIC_RESOURCE, "orders", ErrorCode.NONE)]
    response = h.carry(
        alter(
            h,
            [
                (
                    TOPIC_RESOURCE,
                    "orders",
                    [("cleanup.policy", "compact,delete"), ("retention.ms", "1000")],
                )
            ],
        )
    )
    assert codes(response) == [(TOPIC_RESOURCE, "orders", ErrorCode.NONE)]
    # And compaction can be given up.
    response = h.carry(
        incremental_alter(
            h, [(TOPIC_RESOURCE, "orders", [("cleanup.policy", SUBTRACT, "compact")])]
        )
    )
    assert codes(response) == [(TOPIC_RESOURCE, "orders", ErrorCode.NONE)]
    assert topic_configs(h, "orders") == {"cleanup.policy": "delete", "retention.ms": "1000"}


def test_alter_configs_validate_only_checks_and_changes_nothing(h: Harness) -> None:
    good = alter(h, [(TOPIC_RESOURCE, "orders", [("retention.ms", "5")])], validate_only=True)
    assert isinstance(good, Reply)
    assert codes(good.response) == [(TOPIC_RESOURCE, "orders", ErrorCode.NONE)]
    bad = alter(h, [(TOPIC_RESOURCE, "orders", [("retention.ms", "x")])], validate_only=True)
    assert isinstance(bad, Reply)
    assert codes(bad.response) == [(TOPIC_RESOURCE, "orders", ErrorCode.INVALID_CONFIG)]
    assert topic_configs(h, "orders") == {"retention.ms": "1000"}


def test_alter_configs_errors_are_per_resource(h: Harness) -> None:
    outcome = alter(
        h,
        [
            (TOPIC_RESOURCE, "orders", [("segment.bytes", "12")]),
            (TOPIC_RESOURCE, "plain", [("max.message.bytes", "2000")]),
            (TOPIC_RESOURCE, "missing", [("retention.ms", "1")]),
            (TOPIC_RESOURCE, "twice", []),
            (TOPIC_RESOURCE, "twice", []),
            (BROKER_RESOURCE, "1", [("num.partitions", "4"), ("log.retention.ms", "1")]),
            (BROKER_RESOURCE, "2", [("log.retention.ms", "1")]),
            (BROKER_RESOURCE, "", []),
            (8, "1", [("root", "DEBUG")]),
        ],
    )
    response = h.carry(outcome)
    assert codes(response) == [
        (TOPIC_RESOURCE, "orders", ErrorCode.INVALID_CONFIG),
        (TOPIC_RESOURCE, "plain", ErrorCode.NONE),
        (TOPIC_RESOURCE, "missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (TOPIC_RESOURCE, "twice", ErrorCode.INVALID_REQUEST),
        (TOPIC_RESOURCE, "twice", ErrorCode.INVALID_REQUEST),
        (BROKER_RESOURCE, "1", ErrorCode.POLICY_VIOLATION),
        (BROKER_RESOURCE, "2", ErrorCode.INVALID_REQUEST),
        (BROKER_RESOURCE, "", ErrorCode.NONE),
        (8, "1", ErrorCode.INVALID_REQUEST),
    ]
    messages = [r.error_message for r in response.responses]
    assert "segment.bytes" in messages[0]
    assert messages[3] == "Each resource must appear at most once."
    assert "num.partitions" in messages[5] and "server.properties" in messages[5]
    assert "log.retention.ms" not in messages[5]
    assert messages[6] == "Unexpected node id. Expected 1, but received 2"
    assert "BROKER_LOGGER" in messages[8]
    # Only the good topic changed, in one commit.
    assert topic_configs(h, "plain") == {"max.message.bytes": "2000"}
    assert topic_configs(h, "orders") == {"retention.ms": "1000"}
    assert len(h.committed) == 1
    assert all(isinstance(r, ConfigRecord) for r in h.committed[0])


@pytest.mark.parametrize("version", versions(ALTER_CONFIGS_VERSIONS))
def test_alter_configs_answers_encode_at_every_version(h: Harness, version: int) -> None:
    request = AlterConfigsRequest(
        resources=[
            legacy.AlterConfigsResource(
                resource_type=TOPIC_RESOURCE,
                resource_name="plain",
                configs=[legacy.AlterableConfig(name="retention.ms", value="99")],
            ),
            legacy.AlterConfigsResource(resource_type=TOPIC_RESOURCE, resource_name="missing"),
        ]
    )
    response = h.through_router(
        ALTER,
        ALTER_CONFIGS_VERSIONS,
        lambda hd, body: handle_alter_configs(h.state, h.server, hd, body),
        request,
        version,
    )
    assert isinstance(response, AlterConfigsResponse)
    assert codes(response) == [
        (TOPIC_RESOURCE, "plain", ErrorCode.NONE),
        (TOPIC_RESOURCE, "missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert response.responses[1].error_message == "The topic 'missing' does not exist."
    assert topic_configs(h, "plain") == {"retention.ms": "99"}


# --- IncrementalAlterConfigs ------------------------------------------------------------------


def incremental_request(
    resources: list[tuple[int, str, list[tuple[str, int, str | None]]]],
    validate_only: bool = False,
) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(
        resources=[
            incremental.AlterConfigsResource(
                resource_type=t,
                resource_name=n,
                configs=[
                    incremental.AlterableConfig(name=k, config_operation=op, value=v)
                    for k, op, v in c
                ],
            )
            for t, n, c in resources
        ],
        validate_only=validate_only,
    )


def incremental_alter(
    h: Harness,
    resources: list[tuple[int, str, list[tuple[str, int, str | None]]]],
    validate_only: bool = False,
) -> Any:
    request = incremental_request(resources, validate_only)
    return handle_incremental_alter_configs(h.state, h.server, header(INCREMENTAL, 1), request)


def test_incremental_operations_end_to_end(h: Harness) -> None:
    response = h.carry(
        incremental_alter(
            h,
            [
                (
                    TOPIC_RESOURCE,
                    "orders",
                    [
                        ("leader.replication.throttled.replicas", APPEND, "0:1,1:1"),
                        ("retention.ms", DELETE, None),
                        ("segment.bytes", SET, str(1 << 21)),
                    ],
                )
            ],
        )
    )
    assert codes(response) == [(TOPIC_RESOURCE, "orders", ErrorCode.NONE)]
    assert topic_configs(h, "orders") == {
        "leader.replication.throttled.replicas": "0:1,1:1",
        "segment.bytes": str(1 << 21),
    }
    key = "leader.replication.throttled.replicas"
    h.carry(incremental_alter(h, [(TOPIC_RESOURCE, "orders", [(key, SUBTRACT, "0:1")])]))
    assert topic_configs(h, "orders")[key] == "1:1"
    described = entries(only(describe(h, [(TOPIC_RESOURCE, "orders", [key])])))
    assert described[key].value == "1:1"


def test_incremental_refusals_name_the_key(h: Harness) -> None:
    outcome = incremental_alter(
        h,
        [
            (TOPIC_RESOURCE, "orders", [("retention.ms", APPEND, "5")]),
            (TOPIC_RESOURCE, "plain", [("min.insync.replicas", SET, "0")]),
            (BROKER_RESOURCE, "1", [("num.partitions", SET, "4")]),
            (BROKER_RESOURCE, "x", [("num.partitions", SET, "4")]),
        ],
    )
    assert isinstance(outcome, Reply)
    response = outcome.response
    assert codes(response) == [
        (TOPIC_RESOURCE, "orders", ErrorCode.INVALID_CONFIG),
        (TOPIC_RESOURCE, "plain", ErrorCode.INVALID_CONFIG),
        (BROKER_RESOURCE, "1", ErrorCode.POLICY_VIOLATION),
        (BROKER_RESOURCE, "x", ErrorCode.INVALID_REQUEST),
    ]
    messages = [r.error_message or "" for r in response.responses]
    assert "retention.ms" in messages[0] and "LIST" in messages[0]
    assert "min.insync.replicas" in messages[1]
    assert "num.partitions" in messages[2]
    assert messages[3] == "Node id must be an integer, but it is: x"


def test_incremental_validate_only_commits_nothing(h: Harness) -> None:
    outcome = incremental_alter(
        h, [(TOPIC_RESOURCE, "orders", [("retention.ms", SET, "5")])], validate_only=True
    )
    assert isinstance(outcome, Reply)
    assert codes(outcome.response) == [(TOPIC_RESOURCE, "orders", ErrorCode.NONE)]
    assert topic_configs(h, "orders") == {"retention.ms": "1000"}


@pytest.mark.parametrize("version", versions(INCREMENTAL_ALTER_CONFIGS_VERSIONS))
def test_incremental_answers_encode_at_every_version(h: Harness, version: int) -> None:
    request = incremental_request(
        [
            (TOPIC_RESOURCE, "plain", [("retention.ms", SET, "42")]),
            (TOPIC_RESOURCE, "plain", [("retention.ms", SET, "43")]),
            (TOPIC_RESOURCE, "orders", [("flush.ms", SET, "-5")]),
        ]
    )
    response = h.through_router(
        INCREMENTAL,
        INCREMENTAL_ALTER_CONFIGS_VERSIONS,
        lambda hd, body: handle_incremental_alter_configs(h.state, h.server, hd, body),
        request,
        version,
    )
    assert isinstance(response, IncrementalAlterConfigsResponse)
    assert codes(response) == [
        (TOPIC_RESOURCE, "plain", ErrorCode.INVALID_REQUEST),
        (TOPIC_RESOURCE, "plain", ErrorCode.INVALID_REQUEST),
        (TOPIC_RESOURCE, "orders", ErrorCode.INVALID_CONFIG),
    ]
    assert "flush.ms" in (response.responses[2].error_message or "")
    assert h.committed == []


# --- Dynamic broker configs -------------------------------------------------------------------


def broker_configs(h: Harness, name: str) -> dict[str, str]:
    return h.image.configs.get((BROKER_RESOURCE, name), {})


def test_alter_broker_configs_at_both_scopes_then_describe(h: Harness) -> None:
    outcome = alter(
        h,
        [
            (BROKER_RESOURCE, "", [("log.retention.ms", "5000"), ("log.segment.bytes", "2097152")]),
            (BROKER_RESOURCE, "1", [("log.retention.ms", "7000")]),
        ],
    )
    # Answered after the commit, like topic configs.
    assert isinstance(outcome, CommitRecords)
    assert broker_configs(h, "") == {}
    assert sorted((r.resource_type, r.resource_name, r.name, r.value) for r in outcome.records) == [
        (BROKER_RESOURCE, "", "log.retention.ms", "5000"),
        (BROKER_RESOURCE, "", "log.segment.bytes", "2097152"),
        (BROKER_RESOURCE, "1", "log.retention.ms", "7000"),
    ]
    response = h.carry(outcome)
    assert codes(response) == [
        (BROKER_RESOURCE, "", ErrorCode.NONE),
        (BROKER_RESOURCE, "1", ErrorCode.NONE),
    ]
    assert broker_configs(h, "") == {"log.retention.ms": "5000", "log.segment.bytes": "2097152"}
    assert broker_configs(h, "1") == {"log.retention.ms": "7000"}

    mine = entries(only(describe(h, [(BROKER_RESOURCE, "1", None)], synonyms=True)))
    millis = mine["log.retention.ms"]
    assert (millis.value, millis.config_source) == ("7000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert synonyms_of(millis) == [
        ("log.retention.ms", "7000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.retention.ms", "5000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    segment = mine["log.segment.bytes"]
    assert (segment.value, segment.config_source) == (
        "2097152",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    assert synonyms_of(segment) == [
        ("log.segment.bytes", "2097152", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.segment.bytes", str(1 << 30), ConfigSource.DEFAULT_CONFIG),
    ]
    default = entries(only(describe(h, [(BROKER_RESOURCE, "", None)], synonyms=True)))
    assert sorted(default) == ["log.retention.ms", "log.segment.bytes"]
    assert default["log.retention.ms"].value == "5000"
    assert not default["log.retention.ms"].read_only

    # Topics without overrides follow: per-broker wins over the cluster default.
    plain = entries(only(describe(h, [(TOPIC_RESOURCE, "plain", None)], synonyms=True)))
    assert (plain["retention.ms"].value, plain["retention.ms"].config_source) == (
        "7000",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
    )
    assert (plain["segment.bytes"].value, plain["segment.bytes"].config_source) == (
        "2097152",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    # A topic override still wins.
    assert (
        entries(only(describe(h, [(TOPIC_RESOURCE, "orders", None)])))["retention.ms"].value
        == "1000"
    )


def test_legacy_alter_replaces_the_set_and_null_deletes(h: Harness) -> None:
    h.set_config(BROKER_RESOURCE, "1", "log.retention.ms", "7000")
    h.set_config(BROKER_RESOURCE, "1", "log.roll.ms", "9000")
    h.set_config(BROKER_RESOURCE, "1", "message.max.bytes", "2000")
    outcome = alter(
        h,
        [(BROKER_RESOURCE, "1", [("log.retention.ms", None), ("log.roll.ms", "9000")])],
    )
    assert isinstance(outcome, CommitRecords)
    # The null and the key not named are deleted; the unchanged key gets no record.
    assert [(r.name, r.value) for r in outcome.records] == [
        ("log.retention.ms", None),
        ("message.max.bytes", None),
    ]
    assert codes(h.carry(outcome)) == [(BROKER_RESOURCE, "1", ErrorCode.NONE)]
    assert broker_configs(h, "1") == {"log.roll.ms": "9000"}
    millis = entries(only(describe(h, [(BROKER_RESOURCE, "1", ["log.retention.ms"])])))
    assert millis["log.retention.ms"].config_source == ConfigSource.DEFAULT_CONFIG


def test_incremental_broker_set_delete_and_append(h: Harness) -> None:
    h.set_config(BROKER_RESOURCE, "", "message.max.bytes", "2000")
    response = h.carry(
        incremental_alter(
            h,
            [
                (
                    BROKER_RESOURCE,
                    "",
                    [
                        ("message.max.bytes", DELETE, None),
                        ("log.cleanup.policy", APPEND, "delete"),
                        ("min.insync.replicas", SET, "2"),
                    ],
                ),
                (BROKER_RESOURCE, "1", [("unclean.leader.election.enable", SET, "true")]),
            ],
        )
    )
    assert codes(response) == [
        (BROKER_RESOURCE, "", ErrorCode.NONE),
        (BROKER_RESOURCE, "1", ErrorCode.NONE),
    ]
    # APPEND started from the server default, "delete", which already held the item.
    assert broker_configs(h, "") == {
        "log.cleanup.policy": "delete",
        "min.insync.replicas": "2",
    }
    assert broker_configs(h, "1") == {"unclean.leader.election.enable": "true"}
    plain = entries(only(describe(h, [(TOPIC_RESOURCE, "plain", None)])))
    assert plain["cleanup.policy"].value == "delete"
    assert plain["max.message.bytes"].config_source == ConfigSource.DEFAULT_CONFIG
    assert plain["unclean.leader.election.enable"].value == "true"


@pytest.mark.parametrize("api", ["legacy", "incremental"])
def test_other_broker_keys_are_a_policy_violation_naming_them(h: Harness, api: str) -> None:
    keys: list[tuple[str, str | None]] = [
        ("log.retention.ms", "5"),
        ("num.partitions", "4"),
        ("log.retention.hours", "1"),
    ]
    if api == "legacy":
        outcome = alter(h, [(BROKER_RESOURCE, "", keys)])
    else:
        outcome = incremental_alter(h, [(BROKER_RESOURCE, "", [(k, SET, v) for k, v in keys])])
    assert isinstance(outcome, Reply)
    assert codes(outcome.response) == [(BROKER_RESOURCE, "", ErrorCode.POLICY_VIOLATION)]
    message = outcome.response.responses[0].error_message or ""
    assert "log.retention.hours, num.partitions" in message
    assert "log.retention.ms" not in message
    assert broker_configs(h, "") == {}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("log.segment.bytes", "12"),  # below the server key's range
        ("log.retention.bytes", "lots"),  # not a long
        ("log.roll.ms", "0"),  # segment.ms must be at least 1
        ("compression.type", "brotli"),
        ("min.insync.replicas", "0"),
    ],
)
@pytest.mark.parametrize("api", ["legacy", "incremental"])
def test_invalid_broker_values_are_invalid_config_naming_the_key(
    h: Harness, api: str, key: str, value: str
) -> None:
    if api == "legacy":
        outcome = alter(h, [(BROKER_RESOURCE, "1", [(key, value)])])
    else:
        outcome = incremental_alter(h, [(BROKER_RESOURCE, "1", [(key, SET, value)])])
    assert isinstance(outcome, Reply)
    assert codes(outcome.response) == [(BROKER_RESOURCE, "1", ErrorCode.INVALID_CONFIG)]
    assert key in (outcome.response.responses[0].error_message or "")
    assert broker_configs(h, "1") == {}


def test_broker_validate_only_changes_nothing(h: Harness) -> None:
    legacy_outcome = alter(
        h, [(BROKER_RESOURCE, "", [("log.retention.ms", "5000")])], validate_only=True
    )
    assert isinstance(legacy_outcome, Reply)
    assert codes(legacy_outcome.response) == [(BROKER_RESOURCE, "", ErrorCode.NONE)]
    incremental_outcome = incremental_alter(
        h, [(BROKER_RESOURCE, "1", [("log.retention.ms", SET, "5000")])], validate_only=True
    )
    assert isinstance(incremental_outcome, Reply)
    assert codes(incremental_outcome.response) == [(BROKER_RESOURCE, "1", ErrorCode.NONE)]
    bad = alter(h, [(BROKER_RESOURCE, "1", [("log.retention.ms", "x")])], validate_only=True)
    assert isinstance(bad, Reply)
    assert codes(bad.response) == [(BROKER_RESOURCE, "1", ErrorCode.INVALID_CONFIG)]
    assert broker_configs(h, "") == {} and broker_configs(h, "1") == {}
    assert h.committed == []


def test_the_reassignment_throttle_is_a_dynamic_broker_key(h: Harness) -> None:
    rate = "follower.replication.throttled.rate"
    response = h.carry(incremental_alter(h, [(BROKER_RESOURCE, "", [(rate, SET, "5000")])]))
    assert codes(response) == [(BROKER_RESOURCE, "", ErrorCode.NONE)]
    assert broker_configs(h, "") == {rate: "5000"}
    # Bytes per second must be positive; the bad value is refused and nothing changes.
    response = h.carry(incremental_alter(h, [(BROKER_RESOURCE, "", [(rate, SET, "0")])]))
    assert codes(response) == [(BROKER_RESOURCE, "", ErrorCode.INVALID_CONFIG)]
    assert broker_configs(h, "") == {rate: "5000"}
    response = h.carry(incremental_alter(h, [(BROKER_RESOURCE, "", [(rate, DELETE, None)])]))
    assert codes(response) == [(BROKER_RESOURCE, "", ErrorCode.NONE)]
    assert broker_configs(h, "") == {}


def test_a_listeners_key_store_is_set_per_broker_and_loaded_before_it_is_committed(
    h: Harness,
) -> None:
    key = "listener.name.ssl.ssl.keystore.location"
    default = alter(h, [(BROKER_RESOURCE, "", [(key, "/etc/new.pem")])])
    assert codes(default.response) == [(BROKER_RESOURCE, "", ErrorCode.POLICY_VIOLATION)]
    assert "per broker" in (default.response.responses[0].error_message or "")
    tried: list[tuple[str, dict[str, str]]] = []

    def load(listener: str, dynamic: dict[str, str]) -> str | None:
        tried.append((listener, dict(dynamic)))
        return None if dynamic[key] == "/etc/good.pem" else f"{key}: cannot read it"

    h.state.validate_listener_tls = load
    bad = alter(h, [(BROKER_RESOURCE, "1", [(key, "/etc/bad.pem")])])
    assert codes(bad.response) == [(BROKER_RESOURCE, "1", ErrorCode.INVALID_CONFIG)]
    assert isinstance(bad, Reply)  # nothing to commit
    good = alter(h, [(BROKER_RESOURCE, "1", [(key, "/etc/good.pem")])])
    assert codes(h.carry(good)) == [(BROKER_RESOURCE, "1", ErrorCode.NONE)]
    assert h.image.configs[(BROKER_RESOURCE, "1")] == {key: "/etc/good.pem"}
    assert tried == [("ssl", {key: "/etc/bad.pem"}), ("ssl", {key: "/etc/good.pem"})]


def test_the_tls_and_sasl_keys_read_are_the_ones_declared() -> None:
    # The security modules read the keys as text; DescribeConfigs lists the declared ones.
    declared = set(SERVER_CONFIG_DEF.names())
    assert declared >= SSL_KEYS
    assert declared >= SASL_KEYS
