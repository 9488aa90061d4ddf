"""Server configuration: Kafka's keys and defaults, precedence, listeners, KRaft rules."""

from __future__ import annotations

import pytest

from odradek.broker.endpoints import Endpoint, HostPort, Voter
from odradek.broker.server_config import ServerConfig, parse_overrides
from odradek.broker.server_keys import SERVER_CONFIG_DEF, ServerKeys
from odradek.coordinator.group_config import GroupConfig
from odradek.core.config_keys import ConfigValue, Setting
from odradek.core.errors import ConfigError

COMBINED = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.quorum.voters": "1@localhost:9093",
    "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
    "advertised.listeners": "PLAINTEXT://localhost:9092",
    "controller.listener.names": "CONTROLLER",
}

BROKER_ONLY = {
    "process.roles": "broker",
    "node.id": "4",
    "controller.quorum.bootstrap.servers": "c1:9093,c2:9093,c3:9093",
    "listeners": "PLAINTEXT://:9092",
    "advertised.listeners": "PLAINTEXT://broker4.example:9092",
    "controller.listener.names": "CONTROLLER",
}

CONTROLLER_ONLY = {
    "process.roles": "controller",
    "node.id": "1",
    "controller.quorum.voters": "1@c1:9093,2@c2:9093,3@c3:9093",
    "listeners": "CONTROLLER://:9093",
    "controller.listener.names": "CONTROLLER",
}


def config(base: dict[str, str], **changes: str | None) -> ServerConfig:
    """``base`` with keys changed (``a_b`` stands for ``a.b``; ``None`` removes a key)."""
    props = dict(base)
    for name, value in changes.items():
        key = name.replace("_", ".")
        if value is None:
            props.pop(key, None)
        else:
            props[key] = value
    return ServerConfig.from_properties(props)


# --- the stock Kafka files --------------------------------------------------------------

# The KRaft combined-mode file that ships with Kafka 3.x (comments shortened).
KAFKA_3_SERVER_PROPERTIES = """\
############################# Server Basics #############################
# The role of this server. Setting this puts us in KRaft mode
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093

############################# Socket Server Settings #############################
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,\\
    SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600

############################# Log Basics #############################
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
#log.flush.interval.messages=10000
#log.flush.interval.ms=1000
log.retention.hours=168
#log.retention.bytes=1073741824
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""

# The Kafka 4.x file: a dynamic quorum found through bootstrap servers.
KAFKA_4_SERVER_PROPERTIES = """\
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,\
SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


@pytest.mark.parametrize("text", [KAFKA_3_SERVER_PROPERTIES, KAFKA_4_SERVER_PROPERTIES])
def test_kafkas_own_server_properties_load_unchanged(text: str) -> None:
    cfg = ServerConfig.load(text)
    assert cfg.unknown_keys == []
    assert cfg.node_id == 1
    assert cfg.process_roles == {"broker", "controller"}
    assert cfg.log_dirs == ("/tmp/kraft-combined-logs",)
    assert cfg.listeners == (
        Endpoint("PLAINTEXT", "PLAINTEXT", None, 9092),
        Endpoint("CONTROLLER", "PLAINTEXT", None, 9093),
    )
    assert cfg.advertised_broker_listeners == (
        Endpoint("PLAINTEXT", "PLAINTEXT", "localhost", 9092),
    )
    assert cfg.offsets_topic_replication_factor == 1
    assert cfg.log_retention_ms == 168 * 3_600_000
    assert cfg.validate() == []


def test_kafka_3_file_has_static_voters_and_kafka_4_file_bootstrap_servers() -> None:
    three = ServerConfig.load(KAFKA_3_SERVER_PROPERTIES)
    four = ServerConfig.load(KAFKA_4_SERVER_PROPERTIES)
    assert three.controller_quorum_voters == (Voter(1, "localhost", 9093),)
    assert three.controller_quorum_bootstrap_servers == ()
    assert four.controller_quorum_voters == ()
    assert four.controller_quorum_bootstrap_servers == (HostPort("localhost", 9093),)
    assert four.advertised_controller_listeners == (
        Endpoint("CONTROLLER", "PLAINTEXT", "localhost", 9093),
    )


# --- defaults ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "kafka_default"),
    [
        ("listeners", ["PLAINTEXT://:9092"]),
        ("controller.quorum.election.timeout.ms", 1000),
        ("controller.quorum.fetch.timeout.ms", 2000),
        ("controller.quorum.election.backoff.max.ms", 1000),
        ("controller.quorum.request.timeout.ms", 2000),
        ("controller.quorum.retry.backoff.ms", 20),
        ("broker.session.timeout.ms", 9000),
        ("broker.heartbeat.interval.ms", 2000),
        ("metadata.max.idle.interval.ms", 500),
        ("log.dir", ["/tmp/kafka-logs"]),
        ("num.partitions", 1),
        ("unclean.leader.election.enable", False),
        ("auto.create.topics.enable", True),
        ("auto.leader.rebalance.enable", True),
        ("log.segment.bytes", 1_073_741_824),
        ("log.roll.hours", 168),
        ("log.retention.hours", 168),
        ("log.retention.bytes", -1),
        ("log.index.interval.bytes", 4096),
        ("log.index.size.max.bytes", 10_485_760),
        ("log.retention.check.interval.ms", 300_000),
        ("log.flush.offset.checkpoint.interval.ms", 60_000),
        ("log.flush.start.offset.checkpoint.interval.ms", 60_000),
        ("log.flush.interval.messages", 2**63 - 1),
        ("replica.high.watermark.checkpoint.interval.ms", 5000),
        ("replica.lag.time.max.ms", 30_000),
        ("replica.fetch.max.bytes", 1_048_576),
        ("replica.fetch.wait.max.ms", 500),
        ("num.replica.fetchers", 1),
        ("message.max.bytes", 1_048_588),
        ("socket.request.max.bytes", 104_857_600),
        ("connections.max.idle.ms", 600_000),
        ("max.connections", 2**31 - 1),
        ("max.connections.per.ip", 2**31 - 1),
        ("queued.max.requests", 500),
        ("request.timeout.ms", 30_000),
        ("offsets.topic.num.partitions", 50),
        ("offsets.topic.replication.factor", 3),
        ("offsets.retention.minutes", 10080),
        ("group.initial.rebalance.delay.ms", 3000),
        ("group.min.session.timeout.ms", 6000),
        ("group.max.session.timeout.ms", 1_800_000),
        ("transaction.state.log.num.partitions", 50),
        ("transaction.state.log.replication.factor", 3),
        ("transaction.state.log.min.isr", 2),
        ("compression.type", "producer"),
        ("log.cleanup.policy", ["delete"]),
    ],
)
def test_kafka_defaults(key: str, kafka_default: ConfigValue) -> None:
    assert SERVER_CONFIG_DEF[key].default_value == kafka_default
    if key not in COMBINED:
        assert config(COMBINED).get(key) == kafka_default


def test_our_safer_defaults() -> None:
    cfg = config(COMBINED)
    assert cfg.default_replication_factor is None
    assert cfg.min_insync_replicas is None
    assert cfg.flush_before_ack is True
    assert cfg.quarantine_max_bytes == 1024**3
    # Kafka: -1 (unbounded); ours bounds what many large requests at once can hold.
    assert cfg.queued_max_request_bytes == 256 * 1024**2
    assert cfg.partial_request_timeout_ms == 30_000


@pytest.mark.parametrize(("brokers", "expected"), [(1, 1), (2, 2), (3, 3), (7, 3), (0, 1)])
def test_replication_factor_defaults_to_min_of_three_and_brokers(
    brokers: int, expected: int
) -> None:
    assert config(COMBINED).replication_factor_for(brokers) == expected
    assert config(COMBINED, default_replication_factor="2").replication_factor_for(brokers) == 2


@pytest.mark.parametrize(("rf", "expected"), [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3)])
def test_min_insync_replicas_defaults_to_a_majority(rf: int, expected: int) -> None:
    assert config(COMBINED).min_insync_replicas_for(rf) == expected
    assert config(COMBINED, min_insync_replicas="1").min_insync_replicas_for(rf) == 1


def test_required_keys() -> None:
    with pytest.raises(ConfigError, match=r"Missing required configuration node.id"):
        config(COMBINED, node_id=None)
    with pytest.raises(ConfigError, match=r"Missing required configuration process.roles"):
        config(COMBINED, process_roles=None)


@pytest.mark.parametrize(
    ("key", "value", "needle"),
    [
        ("node.id", "-1", "at least 0"),
        ("node.id", "one", "INT"),
        ("process.roles", "broker,worker", "'worker' is not one of"),
        ("process.roles", "", "must not be empty"),
        ("num.partitions", "0", "at least 1"),
        ("log.segment.bytes", "1024", "at least 1048576"),
        ("log.segment.bytes", "4294967296", "INT"),
        ("unclean.leader.election.enable", "yes", "true or false"),
        ("compression.type", "brotli", "one of"),
        ("offsets.topic.replication.factor", "40000", "SHORT"),
        ("inter.broker.security.protocol", "TLS", "one of"),
        ("log.cleaner.min.cleanable.ratio", "2", "no more than 1"),
        ("log.dirs", "/a,/a", "more than once"),
        ("controller.quorum.voters", "1@localhost", "{id}@{host}:{port}"),
        ("controller.quorum.voters", "x@localhost:9093", "{id}@{host}:{port}"),
        ("controller.quorum.voters", "1@h:9093,1@g:9093", "voter 1 is listed twice"),
        ("controller.quorum.bootstrap.servers", "localhost", "{host}:{port}"),
        ("listener.security.protocol.map", "PLAINTEXT:TLS", "'TLS' is not one of"),
        ("listener.security.protocol.map", "PLAINTEXT", "LISTENER_NAME:SECURITY_PROTOCOL"),
    ],
)
def test_invalid_values_name_the_key(key: str, value: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        ServerConfig.from_properties({**COMBINED, key: value})
    assert key in str(info.value)
    assert needle in str(info.value)


def test_unknown_keys_are_reported_in_order_not_refused() -> None:
    cfg = ServerConfig.from_properties(
        {**COMBINED, "zookeeper.connect": "zk:2181", "sasl.kerberos.service.name": "kafka"}
    )
    assert cfg.unknown_keys == ["zookeeper.connect", "sasl.kerberos.service.name"]
    assert cfg.originals["zookeeper.connect"] == "zk:2181"
    with pytest.raises(ConfigError, match=r"Unknown configuration zookeeper.connect"):
        cfg.get("zookeeper.connect")


def test_config_is_immutable() -> None:
    cfg = config(COMBINED)
    with pytest.raises(AttributeError):
        cfg.node_id = 2  # type: ignore[assignment]
    with pytest.raises(TypeError):
        cfg.values["node.id"] = 2  # type: ignore[index]


# --- precedence -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "expected_ms"),
    [
        ({}, 168 * 3_600_000),
        ({"log.retention.hours": "24"}, 24 * 3_600_000),
        ({"log.retention.hours": "24", "log.retention.minutes": "30"}, 30 * 60_000),
        (
            {"log.retention.hours": "24", "log.retention.minutes": "30", "log.retention.ms": "5"},
            5,
        ),
        ({"log.retention.ms": "5", "log.retention.hours": "1"}, 5),
        ({"log.retention.ms": "-1"}, -1),
        ({"log.retention.minutes": "-7"}, -1),
        ({"log.retention.hours": "-1"}, -1),
    ],
)
def test_retention_ms_over_minutes_over_hours(settings: dict[str, str], expected_ms: int) -> None:
    assert ServerConfig.from_properties({**COMBINED, **settings}).log_retention_ms == expected_ms


def test_zero_retention_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"log\.retention\.ms.*-1 \(unlimited\) or at least 1"):
        config(COMBINED, log_retention_minutes="0")


def test_roll_ms_over_hours() -> None:
    assert config(COMBINED).log_roll_ms == 168 * 3_600_000
    assert config(COMBINED, log_roll_hours="2").log_roll_ms == 2 * 3_600_000
    assert config(COMBINED, log_roll_hours="2", log_roll_ms="1000").log_roll_ms == 1000


def test_flush_interval_ms_falls_back_to_the_scheduler_interval() -> None:
    assert config(COMBINED).log_flush_interval_ms == 2**63 - 1
    assert config(COMBINED, log_flush_scheduler_interval_ms="9").log_flush_interval_ms == 9
    cfg = config(COMBINED, log_flush_scheduler_interval_ms="9", log_flush_interval_ms="4")
    assert cfg.log_flush_interval_ms == 4


def test_log_dirs_wins_over_log_dir() -> None:
    assert config(COMBINED).log_dirs == ("/tmp/kafka-logs",)
    assert config(COMBINED, log_dir="/one").log_dirs == ("/one",)
    assert config(COMBINED, log_dir="/one", log_dirs="/a, /b").log_dirs == ("/a", "/b")


def test_metadata_log_dir_defaults_to_the_first_log_dir() -> None:
    assert config(COMBINED, log_dirs="/a,/b").metadata_log_dir == "/a"
    assert config(COMBINED, log_dirs="/a,/b", metadata_log_dir="/m").metadata_log_dir == "/m"


def test_overrides_win_over_the_file() -> None:
    text = "\n".join(f"{k}={v}" for k, v in COMBINED.items()) + "\nnum.partitions=3\n"
    assert ServerConfig.load(text).num_partitions == 3
    cfg = ServerConfig.load(text, ["num.partitions=6", "log.dirs=/data/a,/data/b"])
    assert cfg.num_partitions == 6
    assert cfg.log_dirs == ("/data/a", "/data/b")
    assert cfg.originals["num.partitions"] == "6"


def test_parse_overrides() -> None:
    assert parse_overrides(["a=1", " b =x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}
    with pytest.raises(ConfigError, match=r"'novalue'"):
        parse_overrides(["novalue"])
    with pytest.raises(ConfigError, match=r"'=1'"):
        parse_overrides(["=1"])


# --- listeners --------------------------------------------------------------------------


def test_listener_hosts_names_and_ipv6() -> None:
    cfg = config(
        COMBINED,
        listeners="plaintext://0.0.0.0:9092,CONTROLLER://[::1]:9093,INTERNAL://host-a.lan:9094",
        listener_security_protocol_map="PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,"
        "internal:plaintext",
        advertised_listeners="PLAINTEXT://a.example:9092,INTERNAL://host-a.lan:9094",
        inter_broker_listener_name="internal",
    )
    assert cfg.listeners == (
        Endpoint("PLAINTEXT", "PLAINTEXT", "0.0.0.0", 9092),
        Endpoint("CONTROLLER", "PLAINTEXT", "::1", 9093),
        Endpoint("INTERNAL", "PLAINTEXT", "host-a.lan", 9094),
    )
    assert cfg.inter_broker_listener_name == "INTERNAL"
    assert cfg.controller_listeners == (Endpoint("CONTROLLER", "PLAINTEXT", "::1", 9093),)
    assert cfg.listeners[1].connection_string() == "CONTROLLER://[::1]:9093"


def test_advertised_listeners_default_to_listeners() -> None:
    cfg = config(COMBINED, advertised_listeners=None)
    assert cfg.advertised_listeners == cfg.listeners
    assert cfg.advertised_broker_listeners == (Endpoint("PLAINTEXT", "PLAINTEXT", None, 9092),)


def test_a_wildcard_controller_listener_is_advertised_without_host() -> None:
    cfg = config(COMBINED, listeners="PLAINTEXT://:9092,CONTROLLER://0.0.0.0:9093")
    assert cfg.advertised_controller_listeners == (Endpoint("CONTROLLER", "PLAINTEXT", None, 9093),)


def test_protocol_map_default_maps_controller_names_to_plaintext() -> None:
    cfg = config(COMBINED)
    assert cfg.listener_security_protocol_map["CONTROLLER"] == "PLAINTEXT"
    assert cfg.listener_security_protocol_map["SASL_SSL"] == "SASL_SSL"


def test_explicit_protocol_map_must_cover_every_listener() -> None:
    with pytest.raises(ConfigError) as info:
        config(COMBINED, listener_security_protocol_map="PLAINTEXT:PLAINTEXT")
    message = str(info.value)
    assert "listeners" in message
    assert "CONTROLLER" in message
    assert "listener.security.protocol.map" in message


@pytest.mark.parametrize(
    ("listeners", "needle"),
    [
        ("PLAINTEXT://:9092,PLAINTEXT://:9093,CONTROLLER://:9094", "different name"),
        ("PLAINTEXT://:9092,CONTROLLER://:9092", "different port"),
        ("PLAINTEXT://10.0.0.1:9092,CONTROLLER://10.0.0.2:9092", "different port"),
        ("PLAINTEXT://:70000,CONTROLLER://:9093", "port 70000 is not in 0..65535"),
        ("PLAINTEXT://:-1,CONTROLLER://:9093", "port -1"),
        ("PLAINTEXT:9092,CONTROLLER://:9093", "NAME://host:port"),
        ("PLAINTEXT://host,CONTROLLER://:9093", "NAME://host:port"),
        ("://:9092,CONTROLLER://:9093", "listener name is empty"),
        ("PLAINTEXT://:9092,NOPE://:9093", "no security protocol is defined for listener NOPE"),
        ("PLAINTEXT://:9092,NOPE://:9093", "listener.security.protocol.map"),
    ],
)
def test_listener_errors_name_the_key(listeners: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        config(COMBINED, listeners=listeners)
    assert "listeners" in str(info.value)
    assert needle in str(info.value)


def test_port_zero_may_repeat_and_ipv4_ipv6_may_share_a_port() -> None:
    cfg = config(
        COMBINED,
        listeners="PLAINTEXT://:0,CONTROLLER://:0",
        advertised_listeners="PLAINTEXT://localhost:9092",
    )
    assert [e.port for e in cfg.listeners] == [0, 0]
    cfg = config(
        COMBINED,
        listeners="PLAINTEXT://127.0.0.1:9092,V6://[::1]:9092,CONTROLLER://:9093",
        listener_security_protocol_map="PLAINTEXT:PLAINTEXT,V6:PLAINTEXT,CONTROLLER:PLAINTEXT",
    )
    assert {e.port for e in cfg.listeners} == {9092, 9093}


def test_advertised_listeners_may_share_a_port_but_not_use_0_0_0_0() -> None:
    cfg = config(
        COMBINED,
        listeners="PLAINTEXT://:9092,EXTERNAL://:9094,CONTROLLER://:9093",
        listener_security_protocol_map="PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT,"
        "CONTROLLER:PLAINTEXT",
        advertised_listeners="PLAINTEXT://lb.example:443,EXTERNAL://lb.example:443",
    )
    assert [e.port for e in cfg.advertised_broker_listeners] == [443, 443]
    with pytest.raises(ConfigError, match=r"advertised.listeners.*0\.0\.0\.0"):
        config(COMBINED, advertised_listeners="PLAINTEXT://0.0.0.0:9092")


# --- KRaft cross-key rules --------------------------------------------------------------


@pytest.mark.parametrize("base", [COMBINED, BROKER_ONLY, CONTROLLER_ONLY])
def test_valid_layouts_pass(base: dict[str, str]) -> None:
    assert config(base).validate() == []


def test_both_voters_and_bootstrap_servers_are_accepted_as_kafka_does() -> None:
    cfg = config(COMBINED, controller_quorum_bootstrap_servers="localhost:9093")
    assert cfg.validate() == []


@pytest.mark.parametrize(
    ("base", "changes", "keys"),
    [
        (
            COMBINED,
            {"controller.quorum.voters": None},
            ["controller.quorum.bootstrap.servers", "controller.quorum.voters"],
        ),
        (
            BROKER_ONLY,
            {"controller.quorum.bootstrap.servers": None},
            ["controller.quorum.bootstrap.servers", "controller.quorum.voters"],
        ),
        (COMBINED, {"controller.quorum.voters": "2@h:9093"}, ["node.id", "controller.quorum"]),
        (
            CONTROLLER_ONLY,
            {"node.id": "9"},
            ["node.id", "controller.quorum.voters"],
        ),
        (
            COMBINED,
            {"controller.quorum.voters": "1@0.0.0.0:9093"},
            ["controller.quorum.voters", "0.0.0.0"],
        ),
        (COMBINED, {"controller.listener.names": None}, ["controller.listener.names"]),
        (
            COMBINED,
            {
                "controller.listener.names": None,
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            },
            ["controller.listener.names must name at least one listener"],
        ),
        (
            COMBINED,
            {"controller.listener.names": "CONTROLLER,OTHER"},
            ["controller.listener.names", "OTHER"],
        ),
        (
            BROKER_ONLY,
            {"controller.quorum.voters": "4@h:9093", "controller.quorum.bootstrap.servers": None},
            ["node.id", "controller.quorum.voters"],
        ),
        (BROKER_ONLY, {"controller.listener.names": None}, ["controller.listener.names"]),
        (
            BROKER_ONLY,
            {"listeners": "PLAINTEXT://:9092,CONTROLLER://:9093"},
            ["controller.listener.names", "listeners"],
        ),
        (
            BROKER_ONLY,
            {
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT",
            },
            ["CONTROLLER", "listener.security.protocol.map"],
        ),
        (
            CONTROLLER_ONLY,
            {"listeners": "CONTROLLER://:9093,PLAINTEXT://:9092"},
            ["listeners", "PLAINTEXT"],
        ),
        (
            CONTROLLER_ONLY,
            {"inter.broker.listener.name": "CONTROLLER"},
            ["controller.listener.names", "inter.broker.listener.name"],
        ),
        (
            COMBINED,
            {"inter.broker.listener.name": "CONTROLLER"},
            ["inter.broker.listener.name", "advertised.listeners"],
        ),
        (
            COMBINED,
            {"advertised.listeners": "PLAINTEXT://localhost:9092,SSL://localhost:9095"},
            ["advertised.listeners", "SSL"],
        ),
        (
            COMBINED,
            {"listeners": "CONTROLLER://:9093", "advertised.listeners": None},
            ["broker listener"],
        ),
        (
            COMBINED,
            {"inter.broker.listener.name": "PLAINTEXT", "inter.broker.security.protocol": "SSL"},
            ["inter.broker.listener.name", "inter.broker.security.protocol"],
        ),
        (COMBINED, {"broker.id": "2"}, ["broker.id", "node.id"]),
        (
            COMBINED,
            {"replica.fetch.wait.max.ms": "40000"},
            ["replica.fetch.wait.max.ms", "replica.socket.timeout.ms"],
        ),
        (
            COMBINED,
            {"replica.fetch.wait.max.ms": "20000", "replica.lag.time.max.ms": "10000"},
            ["replica.fetch.wait.max.ms", "replica.lag.time.max.ms"],
        ),
    ],
)
def test_cross_key_rules_name_the_keys(
    base: dict[str, str], changes: dict[str, str | None], keys: list[str]
) -> None:
    props = dict(base)
    for key, value in changes.items():
        if value is None:
            props.pop(key, None)
        else:
            props[key] = value
    with pytest.raises(ConfigError) as info:
        ServerConfig.from_properties(props)
    for key in keys:
        assert key in str(info.value)
    # The same properties are accepted when the caller defers validation.
    ServerConfig.from_properties(props, validate=False)


def test_broker_id_equal_to_node_id_is_fine() -> None:
    assert config(COMBINED, broker_id="1").validate() == []


def test_warnings_for_risky_but_legal_settings() -> None:
    warnings = config(
        COMBINED,
        broker_heartbeat_interval_ms="5000",
        default_replication_factor="2",
        min_insync_replicas="3",
        unclean_leader_election_enable="true",
        transaction_state_log_min_isr="4",
    ).validate()
    text = "\n".join(warnings)
    assert len(warnings) == 4
    assert "broker.heartbeat.interval.ms" in text
    assert "min.insync.replicas (3) exceeds default.replication.factor (2)" in text
    assert "transaction.state.log.min.isr" in text
    assert "unclean.leader.election.enable" in text


# --- the table itself -------------------------------------------------------------------


def test_every_key_has_a_one_line_doc() -> None:
    for key in SERVER_CONFIG_DEF:
        assert key.doc, key.name
        assert "\n" not in key.doc, key.name
        assert key.doc.endswith("."), key.name


def test_cluster_id_is_not_a_server_key() -> None:
    assert "cluster.id" not in SERVER_CONFIG_DEF
    assert config(COMBINED, cluster_id="abc").unknown_keys == ["cluster.id"]


def test_connection_limits_per_listener_and_per_address() -> None:
    props = {
        **COMBINED,
        "max.connections": "1000",
        "listener.name.controller.max.connections": "50",
        "listener.name.plaintext.max.connections": "5000",
        "max.connections.per.ip": "20",
        "max.connections.per.ip.overrides": "10.0.0.1:0, broker7.example:200,::1:3",
    }
    cfg = ServerConfig.from_properties(props)
    # A listener's own value is a known key, and may only lower the node-wide one.
    assert cfg.unknown_keys == []
    assert cfg.listener_max_connections("CONTROLLER") == 50
    assert cfg.listener_max_connections("PLAINTEXT") == 1000
    assert cfg.listener_max_connections("OTHER") == 1000
    assert cfg.max_connections_per_ip == 20
    assert dict(cfg.max_connections_per_ip_overrides) == {
        "10.0.0.1": 0,
        "broker7.example": 200,
        "::1": 3,
    }


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"listener.name.controller.max.connections": "-1"}, "listener.name.controller"),
        ({"max.connections.per.ip.overrides": "10.0.0.1"}, "host:count"),
        ({"max.connections.per.ip.overrides": "10.0.0.1:many"}, "host:count"),
        ({"max.connections.per.ip": "0"}, "only if max.connections.per.ip.overrides"),
        ({"queued.max.request.bytes": "1048576"}, "at least socket.request.max.bytes"),
    ],
)
def test_connection_limits_kafka_refuses(changes: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ServerConfig.from_properties({**COMBINED, **changes})


def test_queued_bytes_may_be_unbounded_or_at_least_the_largest_request() -> None:
    assert config(COMBINED, queued_max_request_bytes="-1").queued_max_request_bytes == -1
    small = ServerConfig.from_properties(
        {**COMBINED, "socket.request.max.bytes": "1048576", "queued.max.request.bytes": "1048576"}
    )
    assert small.queued_max_request_bytes == 1048576
    zero_per_ip = ServerConfig.from_properties(
        {**COMBINED, "max.connections.per.ip": "0", "max.connections.per.ip.overrides": "h:5"}
    )
    assert zero_per_ip.max_connections_per_ip == 0


# --- one declaration per key --------------------------------------------------------------


def _declarations() -> list[Setting[object]]:
    return [s for s in vars(ServerKeys).values() if isinstance(s, Setting)]


def test_every_server_key_is_declared_once_and_the_table_is_those_declarations() -> None:
    declarations = _declarations()
    assert [s.name for s in declarations] == SERVER_CONFIG_DEF.names()
    for setting in declarations:
        assert SERVER_CONFIG_DEF[setting.name] is setting.key


def test_each_declared_attribute_reads_its_key_as_parsed() -> None:
    cfg = config(
        COMBINED,
        log_retention_minutes="90",
        log_segment_bytes="2097152",
        broker_rack="r1",
        log_dirs="/a,/b",
        log_cleaner_min_cleanable_ratio="0.25",
        compression_type="lz4",
        unclean_leader_election_enable="true",
    )
    for setting in _declarations():
        assert getattr(cfg, setting.attribute) == cfg.values[setting.name], setting.name
    assert cfg.log_segment_bytes == 2097152 and cfg.broker_rack == "r1"
    assert cfg.log_cleaner_min_cleanable_ratio == 0.25
    assert cfg.unclean_leader_election_enable is True


def test_a_key_read_through_a_derived_value_is_declared_private() -> None:
    # The public attribute of those names is what Kafka derives, not the raw key.
    cfg = config(COMBINED, log_retention_minutes="90")
    assert cfg.log_retention_ms == 90 * 60_000
    assert ServerKeys._log_retention_ms.name == "log.retention.ms"
    assert cfg.listeners == (
        Endpoint("PLAINTEXT", "PLAINTEXT", None, 9092),
        Endpoint("CONTROLLER", "PLAINTEXT", None, 9093),
    )
    assert ServerKeys._listeners.name == "listeners"


def test_the_group_coordinators_defaults_are_the_server_keys_defaults() -> None:
    # GroupConfig cannot import the broker's table (the layers), so it repeats Kafka's
    # defaults; this keeps the two from drifting apart.
    assert GroupConfig.from_values(SERVER_CONFIG_DEF.default_values()) == GroupConfig()


def test_tls_keys_are_known_and_a_listener_s_own_win() -> None:
    cfg = ServerConfig.from_properties(
        {
            **COMBINED,
            "ssl.keystore.location": "/all.p12",
            "ssl.client.auth": "required",
            "listener.name.external.ssl.keystore.location": "/external.p12",
            "listener.name.external.ssl.unheard.of": "x",
        }
    )
    assert cfg.unknown_keys == ["listener.name.external.ssl.unheard.of"]
    assert cfg.ssl_config("EXTERNAL") == {
        "ssl.keystore.location": "/external.p12",
        "ssl.client.auth": "required",
    }
    assert cfg.ssl_config("INTERNAL") == {
        "ssl.keystore.location": "/all.p12",
        "ssl.client.auth": "required",
    }
