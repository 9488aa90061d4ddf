"""The server's configuration: Kafka's ``server.properties`` keys, their types and defaults.

This module owns:

* :data:`SERVER_CONFIG_DEF`, the table of every server key we understand, under Kafka's
  names with Kafka's types and defaults, except where ours are safer (listed below);
* :class:`ServerConfig`, the typed, immutable view of one node's configuration, built
  from a properties file plus ``--override key=value`` entries, with the derived values
  Kafka derives (log directories, retention in ms, listeners, the security protocol
  map, the quorum voters);
* :meth:`ServerConfig.validate`, the cross-key rules Kafka's ``KafkaConfig`` enforces for
  KRaft (process roles, controller listeners, quorum voters, advertised listeners);
* :class:`ConfigEntry`, :class:`ConfigSynonym` and :class:`ConfigSource`, the shape of a
  DescribeConfigs answer, shared by broker and topic resources.

Where our defaults differ from Kafka's, and why:

* ``default.replication.factor``: Kafka 1; ours unset, meaning ``min(3, brokers)``. One
  copy of a partition is one disk failure from losing acknowledged data.
* ``min.insync.replicas``: Kafka 1; ours unset, meaning a majority of the replication
  factor (``rf // 2 + 1``), so that ``acks=all`` survives the loss of any minority.
* ``odradek.flush.before.ack`` (ours, true): ``acks=all`` is answered only after the
  leader and the in-sync followers have fsynced the batch. Kafka answers from the page
  cache and relies on replication alone; a correlated power loss then loses data.
* ``quarantine.max.bytes`` (ours, 1 GiB): records cut by truncation are moved aside,
  up to this many bytes per partition, instead of being deleted.
* ``queued.max.request.bytes``: Kafka -1 (unbounded); ours 256 MiB per listener, so
  that many connections sending large requests at once cannot exhaust the memory.
* ``odradek.connections.partial.request.timeout.ms`` (ours, 30 s): a connection whose
  request has been arriving this long without completing is closed (a slow-loris client
  that sends a byte now and then is never idle, so ``connections.max.idle.ms`` would
  keep it).

Keys we do not know are not an error (a Kafka file carries keys for features we lack):
:attr:`ServerConfig.unknown_keys` lists them for the server to report.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import Final

from odradek.core.config_keys import (
    REQUIRED,
    ConfigDef,
    ConfigKey,
    ConfigType,
    ConfigValue,
    Importance,
    OneOf,
    Range,
    Required,
    Validator,
    ValidList,
)
from odradek.core.errors import ConfigError
from odradek.core.properties import parse_properties

__all__ = [
    "SECURITY_PROTOCOLS",
    "SERVER_CONFIG_DEF",
    "ConfigEntry",
    "ConfigSource",
    "ConfigSynonym",
    "Endpoint",
    "HostPort",
    "ServerConfig",
    "Voter",
    "majority",
    "parse_listeners",
    "parse_overrides",
    "parse_per_ip_overrides",
]

INT_MAX: Final = 2**31 - 1
LONG_MAX: Final = 2**63 - 1
KIB: Final = 1024
MIB: Final = 1024 * KIB
GIB: Final = 1024 * MIB

SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
BROKER_ROLE: Final = "broker"
CONTROLLER_ROLE: Final = "controller"


# ---------------------------------------------------------------------------------------
# DescribeConfigs shapes
# ---------------------------------------------------------------------------------------


class ConfigSource(enum.IntEnum):
    """Where a config value came from: Kafka's DescribeConfigs ``ConfigSource`` ids."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


@dataclass(frozen=True)
class ConfigSynonym:
    """One place a value for a config could come from, as DescribeConfigs lists them."""

    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    """One row of a DescribeConfigs answer."""

    name: str
    value: str | None
    source: ConfigSource
    is_default: bool
    read_only: bool
    sensitive: bool
    synonyms: tuple[ConfigSynonym, ...] = ()
    config_type: ConfigType | None = None
    documentation: str = ""


# ---------------------------------------------------------------------------------------
# Addresses
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    """A listener: its (upper-case) name, security protocol, host and port.

    ``host`` is ``None`` when the listener was written with an empty host
    (``PLAINTEXT://:9092``), which Kafka reads as "every interface".
    """

    listener_name: str
    security_protocol: str
    host: str | None
    port: int

    def connection_string(self) -> str:
        host = self.host or ""
        if ":" in host:
            host = f"[{host}]"
        return f"{self.listener_name}://{host}:{self.port}"


@dataclass(frozen=True)
class HostPort:
    host: str
    port: int


@dataclass(frozen=True)
class Voter:
    """One entry of ``controller.quorum.voters``: ``{id}@{host}:{port}``."""

    node_id: int
    host: str
    port: int


# Kafka's listener syntax: NAME://host:port, with [..] around an IPv6 host.
_LISTENER = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")
_HOST_PORT = re.compile(r"\[?([0-9a-zA-Z\-%._:]*)\]?:([0-9]+)")
_NON_ROUTABLE: Final = "0.0.0.0"


def _port(key: str, entry: str, text: str) -> int:
    port = int(text)
    if not 0 <= port <= 65535:
        raise ConfigError(
            f"Invalid value {entry!r} for configuration {key}: port {port} is not in 0..65535"
        )
    return port


def _host_port(key: str, address: str, entry: str | None = None) -> HostPort:
    """``host:port`` (``[v6]:port``); errors show ``entry``, the whole list item."""
    shown = address if entry is None else entry
    match = _HOST_PORT.fullmatch(address.strip())
    if match is None or not match.group(1):
        form = "{host}:{port}" if entry is None else "{id}@{host}:{port}"
        raise ConfigError(
            f"Invalid value {shown!r} for configuration {key}: each entry must be in the form "
            + form
        )
    return HostPort(match.group(1), _port(key, shown, match.group(2)))


def _parse_voters(key: str, entries: Iterable[str]) -> tuple[Voter, ...]:
    voters: list[Voter] = []
    seen: set[int] = set()
    for entry in entries:
        node, at, address = entry.partition("@")
        if not at or "@" in address or not re.fullmatch(r"[+-]?[0-9]+", node.strip()):
            raise ConfigError(
                f"Invalid value {entry!r} for configuration {key}: "
                "each entry must be in the form {id}@{host}:{port}"
            )
        node_id = int(node)
        # Kafka keeps the last of two entries for one id; an ambiguous voter set is
        # refused here instead, because a quorum built on the wrong address loses votes.
        if node_id in seen:
            raise ConfigError(
                f"Invalid value {entry!r} for configuration {key}: voter {node_id} is listed twice"
            )
        seen.add(node_id)
        hp = _host_port(key, address, entry)
        voters.append(Voter(node_id, hp.host, hp.port))
    return tuple(voters)


# Kafka lets a listener have its own value of a few keys, under the listener's prefix.
LISTENER_MAX_CONNECTIONS: Final = "max.connections"
_LISTENER_KEY = re.compile(r"listener\.name\.([^.]+)\.(.+)")
_PER_LISTENER_KEYS: Final = frozenset({LISTENER_MAX_CONNECTIONS})


def _listener_key_name(key: str, suffix: str) -> str | None:
    """The (upper-case) listener name of ``listener.name.<name>.<suffix>``, else None."""
    match = _LISTENER_KEY.fullmatch(key)
    if match is None or match.group(2) != suffix:
        return None
    return match.group(1).upper()


def _listener_int(key: str, raw: str) -> int:
    text = raw.strip()
    if not re.fullmatch(r"[0-9]+", text) or int(text) > INT_MAX:
        raise ConfigError(
            f"Invalid value {raw!r} for configuration {key}: Value must be an integer "
            f"from 0 to {INT_MAX}"
        )
    return int(text)


def parse_per_ip_overrides(key: str, raw: str) -> dict[str, int]:
    """``host:count,...`` (``max.connections.per.ip.overrides``): the connections each
    host may have open. A host is a name or an IP address (an IPv6 one written bare, as
    the count follows its last colon)."""
    result: dict[str, int] = {}
    text = raw.strip()
    if not text:
        return result
    for entry in re.split(r"\s*,\s*", text):
        host, colon, count = entry.rpartition(":")
        host = host.strip().strip("[]")
        if not colon or not host or not re.fullmatch(r"[0-9]+", count.strip()):
            raise ConfigError(
                f"Invalid value {raw!r} for configuration {key}: entry {entry!r} is not in "
                "the form host:count with a count of 0 or more"
            )
        result[host] = int(count)
    return result


def _parse_protocol_map(key: str, raw: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` with names upper-cased, as Kafka's ``parseCsvMap`` reads it."""
    result: dict[str, str] = {}
    text = raw.strip()
    if not text:
        return result
    for entry in re.split(r"\s*,\s*", text):
        name, colon, protocol = entry.rpartition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not colon or not name:
            raise ConfigError(
                f"Invalid value {raw!r} for configuration {key}: "
                f"entry {entry!r} is not in the form LISTENER_NAME:SECURITY_PROTOCOL"
            )
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"Invalid value {raw!r} for configuration {key}: security protocol "
                f"{protocol!r} is not one of: {', '.join(SECURITY_PROTOCOLS)}"
            )
        result[name] = protocol
    return result


def parse_listeners(
    key: str,
    entries: Iterable[str],
    protocol_map: Mapping[str, str],
    *,
    require_distinct_ports: bool = True,
) -> tuple[Endpoint, ...]:
    """Listener entries (``NAME://host:port``) with Kafka's checks; errors name ``key``.

    Names must be unique and mapped in ``protocol_map``; ports are 0..65535 and, for
    ``listeners``, distinct (port 0, "any free port", may repeat; two listeners may share
    a port when one binds an IPv4 address and the other an IPv6 one, as Kafka allows).
    """
    endpoints: list[Endpoint] = []
    for entry in entries:
        match = _LISTENER.fullmatch(entry.strip())
        if match is None:
            raise ConfigError(
                f"Invalid value {entry!r} for configuration {key}: "
                "each listener must be in the form NAME://host:port"
            )
        name = match.group(1).strip().upper()
        if not name:
            raise ConfigError(
                f"Invalid value {entry!r} for configuration {key}: the listener name is empty"
            )
        protocol = protocol_map.get(name)
        if protocol is None:
            raise ConfigError(
                f"Invalid value {entry!r} for configuration {key}: no security protocol is "
                f"defined for listener {name}; map it in listener.security.protocol.map (a "
                "name in controller.listener.names gets PLAINTEXT while that map is unset)"
            )
        host = match.group(2) or None
        endpoints.append(Endpoint(name, protocol, host, _port(key, entry, match.group(3))))
    names = [e.listener_name for e in endpoints]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(
            f"Invalid value {','.join(entries)!r} for configuration {key}: each listener "
            f"must have a different name; {', '.join(duplicates)} appears more than once"
        )
    if require_distinct_ports:
        _check_distinct_ports(key, endpoints)
    return tuple(endpoints)


def _ip_version(host: str | None) -> int | None:
    if host is None:
        return None
    try:
        return ipaddress.ip_address(host).version
    except ValueError:
        return None


def _check_distinct_ports(key: str, endpoints: list[Endpoint]) -> None:
    by_port: dict[int, list[Endpoint]] = {}
    for endpoint in endpoints:
        if endpoint.port != 0:
            by_port.setdefault(endpoint.port, []).append(endpoint)
    for port, group in by_port.items():
        if len(group) == 1:
            continue
        versions = sorted(v for v in (_ip_version(e.host) for e in group) if v is not None)
        if len(group) == 2 and versions == [4, 6]:
            continue
        names = ", ".join(e.connection_string() for e in group)
        raise ConfigError(
            f"Invalid value for configuration {key}: each listener must have a different "
            f"port unless one binds an IPv4 and the other an IPv6 address; port {port} is "
            f"used by {names}"
        )


# ---------------------------------------------------------------------------------------
# Validators for address-shaped keys
# ---------------------------------------------------------------------------------------


class _VotersValidator(Validator):
    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if isinstance(value, list):
            _parse_voters(name, value)

    def __str__(self) -> str:
        return "list of {id}@{host}:{port}"


class _HostPortListValidator(Validator):
    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if isinstance(value, list):
            for entry in value:
                _host_port(name, entry)

    def __str__(self) -> str:
        return "list of {host}:{port}"


class _PerIpOverridesValidator(Validator):
    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if isinstance(value, str):
            parse_per_ip_overrides(name, value)

    def __str__(self) -> str:
        return "list of host:count"


class _ProtocolMapValidator(Validator):
    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if isinstance(value, str):
            _parse_protocol_map(name, value)

    def __str__(self) -> str:
        return "list of LISTENER_NAME:SECURITY_PROTOCOL"


# ---------------------------------------------------------------------------------------
# The key table
# ---------------------------------------------------------------------------------------

_B = ConfigType.BOOLEAN
_I = ConfigType.INT
_S = ConfigType.SHORT
_L = ConfigType.LONG
_D = ConfigType.DOUBLE
_STR = ConfigType.STRING
_LIST = ConfigType.LIST
_H = Importance.HIGH
_M = Importance.MEDIUM
_LOW = Importance.LOW
_POSITIVE = Range.at_least(1)
_NON_NEGATIVE = Range.at_least(0)
_COMPRESSION_TYPES: Final = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_DEFAULT_PROTOCOL_MAP: Final = ",".join(f"{p}:{p}" for p in SECURITY_PROTOCOLS)


def _key(
    name: str,
    config_type: ConfigType,
    default: ConfigValue | Required,
    doc: str,
    *,
    validator: Validator | None = None,
    importance: Importance = _M,
    dynamic: bool = False,
) -> ConfigKey:
    return ConfigKey(
        name=name,
        type=config_type,
        default=default,
        validator=validator,
        importance=importance,
        doc=doc,
        dynamic=dynamic,
    )


# fmt: off
_SERVER_KEYS: Final = [
    # --- Node identity and KRaft -------------------------------------------------------
    _key("node.id", _I, REQUIRED, "This node's id, unique in the cluster.",
         validator=_NON_NEGATIVE, importance=_H),
    _key("broker.id", _I, None, "Old name of node.id; when set it must equal node.id.",
         validator=_NON_NEGATIVE, importance=_H),
    _key("process.roles", _LIST, REQUIRED, "The roles this node plays: broker, controller or both.",
         validator=ValidList(BROKER_ROLE, CONTROLLER_ROLE, allow_empty=False), importance=_H),
    _key("broker.rack", _STR, None, "Rack of this broker, used to spread replicas.",
         importance=_M),
    _key("controller.listener.names", _LIST, [], "Listener names the controllers use.",
         validator=ValidList(), importance=_H),
    _key("controller.quorum.voters", _LIST, [],
         "Static controller quorum as {id}@{host}:{port} entries.",
         validator=_VotersValidator(), importance=_H),
    _key("controller.quorum.bootstrap.servers", _LIST, [],
         "Controllers to contact first, as {host}:{port} entries.",
         validator=_HostPortListValidator(), importance=_H),
    _key("controller.quorum.election.timeout.ms", _I, 1000,
         "How long a voter waits without a leader before it starts an election.",
         validator=_POSITIVE, importance=_H),
    _key("controller.quorum.fetch.timeout.ms", _I, 2000,
         "How long without a successful fetch before a voter suspects the leader.",
         validator=_POSITIVE, importance=_H),
    _key("controller.quorum.election.backoff.max.ms", _I, 1000,
         "Upper bound of the random back-off between failed elections.",
         validator=_POSITIVE, importance=_H),
    _key("controller.quorum.append.linger.ms", _I, 25,
         "How long the quorum leader gathers writes before it flushes them.",
         validator=_NON_NEGATIVE),
    _key("controller.quorum.request.timeout.ms", _I, 2000,
         "Timeout of one request between quorum members.", validator=_POSITIVE),
    _key("controller.quorum.retry.backoff.ms", _I, 20,
         "Pause before a failed quorum request is retried.", validator=_NON_NEGATIVE,
         importance=_LOW),
    _key("broker.session.timeout.ms", _I, 9000,
         "A broker without a heartbeat for this long is fenced by the controller.",
         validator=_POSITIVE),
    _key("broker.session.connection.loss.ms", _I, 500,
         "Odradek: when the connection a broker heartbeats on closes (its process died "
         "or its host reset the connection), the active controller fences it after this "
         "long without a new heartbeat, instead of waiting for broker.session.timeout.ms. "
         "-1 turns this off. A silent failure (a cut link, a paused process) still takes "
         "the session timeout.",
         validator=Range.at_least(-1), importance=_LOW),
    _key("broker.heartbeat.interval.ms", _I, 2000,
         "How often a broker sends a heartbeat to the controller.", validator=_POSITIVE),
    _key("initial.broker.registration.timeout.ms", _I, 60000,
         "How long a starting broker waits for its registration to be accepted.",
         validator=_POSITIVE),
    _key("metadata.log.dir", _STR, None,
         "Directory of the metadata log; the first log directory when unset.", importance=_H),
    _key("metadata.log.segment.bytes", _I, GIB, "Segment size of the metadata log.",
         validator=Range.at_least(12), importance=_H),
    _key("metadata.log.segment.ms", _L, 604_800_000,
         "Age after which the metadata log rolls a new segment.", validator=_POSITIVE,
         importance=_H),
    _key("metadata.max.retention.bytes", _L, 100 * MIB,
         "Metadata log size kept before old snapshots and segments are deleted."),
    _key("metadata.max.retention.ms", _L, 604_800_000,
         "Age of metadata log segments and snapshots kept before deletion."),
    _key("metadata.max.idle.interval.ms", _I, 500,
         "How often an idle controller appends a no-op record (0 turns this off).",
         validator=_NON_NEGATIVE, importance=_LOW),
    _key("metadata.quorum.stall.alarm.ms", _I, 10_000,
         "Odradek: raise the alarm 'metadata quorum stalled' when the metadata high "
         "watermark has not moved for this long (it moves at least every "
         "metadata.max.idle.interval.ms while the quorum works).",
         validator=_POSITIVE, importance=_LOW),
    _key("metadata.log.max.record.bytes.between.snapshots", _L, 20 * MIB,
         "Metadata bytes appended after which a new snapshot is written.",
         validator=_POSITIVE, importance=_H),
    _key("metadata.log.max.snapshot.interval.ms", _L, 3_600_000,
         "Longest time between metadata snapshots (0 turns the timer off).",
         validator=_NON_NEGATIVE, importance=_H),
    # --- Sockets and listeners ---------------------------------------------------------
    _key("listeners", _LIST, ["PLAINTEXT://:9092"],
         "Addresses this node listens on, as NAME://host:port.",
         validator=ValidList(allow_empty=False), importance=_H, dynamic=True),
    _key("advertised.listeners", _LIST, None,
         "Addresses given to clients and peers; the listeners when unset.",
         validator=ValidList(), importance=_H, dynamic=True),
    _key("listener.security.protocol.map", _STR, _DEFAULT_PROTOCOL_MAP,
         "Security protocol of each listener name, as NAME:PROTOCOL pairs.",
         validator=_ProtocolMapValidator(), importance=_LOW, dynamic=True),
    _key("inter.broker.listener.name", _STR, None,
         "Listener brokers use to talk to each other.", importance=_M),
    _key("inter.broker.security.protocol", _STR, "PLAINTEXT",
         "Protocol between brokers when inter.broker.listener.name is unset.",
         validator=OneOf(*SECURITY_PROTOCOLS)),
    _key("socket.send.buffer.bytes", _I, 100 * KIB,
         "SO_SNDBUF of server sockets (-1: the OS default).", importance=_H),
    _key("socket.receive.buffer.bytes", _I, 100 * KIB,
         "SO_RCVBUF of server sockets (-1: the OS default).", importance=_H),
    _key("socket.request.max.bytes", _I, 100 * MIB,
         "Largest request a client may send; larger frames close the connection.",
         validator=_POSITIVE, importance=_H),
    _key("socket.listen.backlog.size", _I, 50, "Backlog of pending connections per listener.",
         validator=_POSITIVE),
    _key("num.network.threads", _I, 3, "Accepted for compatibility; the event loop serves "
         "every connection.", validator=_POSITIVE, importance=_H, dynamic=True),
    _key("num.io.threads", _I, 8, "Accepted for compatibility; requests are handled on the "
         "event loop.", validator=_POSITIVE, importance=_H, dynamic=True),
    _key("background.threads", _I, 10, "Accepted for compatibility; background work is "
         "scheduled on the event loop.", validator=_POSITIVE, importance=_H, dynamic=True),
    _key("queued.max.requests", _I, 500, "Requests a listener's connections may have in "
         "progress beyond the first of each connection before it stops reading from them.",
         validator=_POSITIVE, importance=_H),
    _key("queued.max.request.bytes", _L, 256 * MIB, "Bytes of requests a listener holds "
         "(received, not yet answered) before it stops reading; -1: unbounded.",
         validator=Range.at_least(-1)),
    _key("max.connections", _I, INT_MAX, "Most connections each listener keeps open; over it "
         "a new connection is closed at once.", validator=_NON_NEGATIVE, dynamic=True),
    _key("max.connections.per.ip", _I, INT_MAX, "Most connections accepted from one address.",
         validator=_NON_NEGATIVE, dynamic=True),
    _key("max.connections.per.ip.overrides", _STR, "", "Per-address limits as host:count "
         "pairs, in place of max.connections.per.ip.", validator=_PerIpOverridesValidator(),
         dynamic=True),
    _key("connections.max.idle.ms", _L, 600_000,
         "Idle connections are closed after this long."),
    _key("request.timeout.ms", _I, 30000,
         "How long the node waits for a reply to its own requests to peers.",
         validator=_NON_NEGATIVE),
    # --- Logs --------------------------------------------------------------------------
    _key("log.dirs", _LIST, None, "Directories that hold partition logs; wins over log.dir.",
         validator=ValidList(allow_empty=False, unique=True), importance=_H),
    _key("log.dir", _LIST, ["/tmp/kafka-logs"],
         "Directory that holds partition logs when log.dirs is unset.",
         validator=ValidList(allow_empty=False, unique=True), importance=_H),
    _key("num.partitions", _I, 1, "Partitions of a topic created without a count.",
         validator=_POSITIVE),
    _key("default.replication.factor", _I, None,
         "Replicas of a topic created without a factor; unset means min(3, brokers).",
         validator=_POSITIVE),
    _key("min.insync.replicas", _I, None,
         "In-sync replicas acks=all needs; unset means a majority of the replicas.",
         validator=_POSITIVE, importance=_H, dynamic=True),
    _key("unclean.leader.election.enable", _B, False,
         "Whether an out-of-sync replica may become leader, losing records.",
         importance=_H, dynamic=True),
    _key("auto.create.topics.enable", _B, True,
         "Whether a Metadata request for a missing topic creates it.", importance=_H),
    _key("auto.leader.rebalance.enable", _B, True,
         "Whether leadership moves back to preferred replicas on its own.", importance=_H),
    _key("leader.imbalance.per.broker.percentage", _I, 10,
         "Imbalance of leaders per broker tolerated before a rebalance.", importance=_H),
    _key("leader.imbalance.check.interval.seconds", _L, 300,
         "How often leader balance is checked.", validator=_POSITIVE, importance=_H),
    _key("delete.topic.enable", _B, True, "Whether topics may be deleted.", importance=_H),
    _key("compression.type", _STR, "producer",
         "Compression of stored batches; producer keeps what the producer sent.",
         validator=OneOf(*_COMPRESSION_TYPES), importance=_H, dynamic=True),
    _key("message.max.bytes", _I, 1_048_588,
         "Largest record batch a topic accepts (topic config max.message.bytes).",
         validator=_NON_NEGATIVE, importance=_H, dynamic=True),
    _key("log.segment.bytes", _I, GIB, "Size at which a log rolls a new segment.",
         validator=Range.at_least(MIB), importance=_H, dynamic=True),
    _key("log.roll.ms", _L, None, "Age at which a log rolls a new segment; wins over hours.",
         importance=_H, dynamic=True),
    _key("log.roll.hours", _I, 168, "Age in hours at which a log rolls a new segment.",
         validator=_POSITIVE, importance=_H),
    _key("log.roll.jitter.ms", _L, None, "Random jitter subtracted from the roll age.",
         importance=_H, dynamic=True),
    _key("log.roll.jitter.hours", _I, 0, "Random jitter in hours subtracted from the roll age.",
         validator=_NON_NEGATIVE, importance=_H),
    _key("log.retention.ms", _L, None,
         "Age after which segments are deleted (-1: forever); wins over minutes and hours.",
         importance=_H, dynamic=True),
    _key("log.retention.minutes", _I, None,
         "Retention age in minutes; wins over hours.", importance=_H),
    _key("log.retention.hours", _I, 168, "Retention age in hours.", importance=_H),
    _key("log.retention.bytes", _L, -1,
         "Size a partition's log is trimmed to (-1: no limit).", importance=_H, dynamic=True),
    _key("log.retention.check.interval.ms", _L, 300_000,
         "How often logs are checked for segments to delete.", validator=_POSITIVE),
    _key("log.cleanup.policy", _LIST, ["delete"],
         "What happens to old segments: delete, compact or both.",
         validator=ValidList("compact", "delete"), dynamic=True),
    _key("log.cleaner.enable", _B, True, "Whether the log cleaner runs (compacted topics)."),
    _key("log.cleaner.threads", _I, 1, "Log cleaner threads.", validator=_NON_NEGATIVE,
         dynamic=True),
    _key("log.cleaner.delete.retention.ms", _L, 86_400_000,
         "How long delete tombstones stay in a compacted log.", validator=_NON_NEGATIVE,
         dynamic=True),
    _key("log.cleaner.min.compaction.lag.ms", _L, 0,
         "Youngest a record may be and still be compacted.", validator=_NON_NEGATIVE,
         dynamic=True),
    _key("log.cleaner.max.compaction.lag.ms", _L, LONG_MAX,
         "Oldest an uncompacted record may become.", validator=_POSITIVE, dynamic=True),
    _key("log.cleaner.min.cleanable.ratio", _D, 0.5,
         "Share of dirty log that makes a partition eligible for cleaning.",
         validator=Range.between(0, 1), dynamic=True),
    _key("log.cleaner.dedupe.buffer.size", _L, 128 * MIB,
         "Memory for the cleaner's key index, across all cleaner threads.", dynamic=True),
    _key("log.cleaner.io.buffer.size", _I, 512 * KIB, "Cleaner I/O buffer size.",
         validator=_NON_NEGATIVE, dynamic=True),
    _key("log.cleaner.backoff.ms", _L, 15_000, "Pause when there is nothing to clean.",
         validator=_NON_NEGATIVE, dynamic=True),
    _key("log.index.size.max.bytes", _I, 10 * MIB, "Largest offset or time index file.",
         validator=Range.at_least(4), dynamic=True),
    _key("log.index.interval.bytes", _I, 4096, "Log bytes between two offset index entries.",
         validator=_NON_NEGATIVE, dynamic=True),
    _key("log.flush.interval.messages", _L, LONG_MAX,
         "Records appended before a forced fsync of the log.", validator=_POSITIVE,
         importance=_H, dynamic=True),
    _key("log.flush.interval.ms", _L, None,
         "Longest a record stays unflushed; the scheduler interval when unset.",
         importance=_H, dynamic=True),
    _key("log.flush.scheduler.interval.ms", _L, LONG_MAX,
         "How often logs are checked for a due flush.", importance=_H),
    _key("log.flush.offset.checkpoint.interval.ms", _I, 60_000,
         "How often the recovery point checkpoint is written.", validator=_NON_NEGATIVE,
         importance=_H),
    _key("log.flush.start.offset.checkpoint.interval.ms", _I, 60_000,
         "How often the log start offset checkpoint is written.", validator=_NON_NEGATIVE,
         importance=_H),
    _key("log.segment.delete.delay.ms", _L, 60_000,
         "Wait before a deleted segment's files are removed.", validator=_NON_NEGATIVE,
         dynamic=True),
    _key("log.preallocate", _B, False, "Whether new segment files are preallocated.",
         dynamic=True),
    _key("log.message.timestamp.type", _STR, "CreateTime",
         "Which timestamp records carry: the producer's or the append time.",
         validator=OneOf("CreateTime", "LogAppendTime"), dynamic=True),
    _key("log.message.timestamp.before.max.ms", _L, LONG_MAX,
         "How far before the broker's time a CreateTime record's timestamp may be.",
         validator=_NON_NEGATIVE, dynamic=True),
    _key("log.message.timestamp.after.max.ms", _L, 3_600_000,
         "How far after the broker's time a CreateTime record's timestamp may be.",
         validator=_NON_NEGATIVE, dynamic=True),
    _key("log.message.downconversion.enable", _B, True,
         "Accepted for compatibility; batches are never down-converted.", dynamic=True),
    _key("num.recovery.threads.per.data.dir", _I, 2,
         "Accepted for compatibility; recovery runs on the event loop.",
         validator=_POSITIVE, importance=_H, dynamic=True),
    # --- Replication -------------------------------------------------------------------
    _key("replica.lag.time.max.ms", _L, 30_000,
         "A follower that has not caught up for this long leaves the ISR.", importance=_H),
    _key("replica.fetch.max.bytes", _I, MIB, "Bytes a follower fetches per partition.",
         validator=_NON_NEGATIVE),
    _key("follower.replication.throttled.rate", _L, LONG_MAX,
         "Bytes per second a broker fetches for the replicas a reassignment is adding "
         "(odradek cluster add-brokers --throttle sets it and removes it when done).",
         validator=_POSITIVE, dynamic=True),
    _key("replica.fetch.min.bytes", _I, 1, "Bytes a follower's fetch waits for.",
         importance=_H),
    _key("replica.fetch.wait.max.ms", _I, 500, "Longest a follower's fetch waits for data."),
    _key("replica.fetch.response.max.bytes", _I, 10 * MIB,
         "Bytes a follower fetches per request.", validator=_NON_NEGATIVE),
    _key("replica.fetch.backoff.ms", _I, 1000, "Pause after a follower's fetch fails.",
         validator=_NON_NEGATIVE),
    _key("replica.socket.timeout.ms", _I, 30_000, "Socket timeout of follower fetches."),
    _key("replica.socket.receive.buffer.bytes", _I, 64 * KIB,
         "SO_RCVBUF of follower connections."),
    _key("num.replica.fetchers", _I, 1, "Fetcher connections per source broker.",
         dynamic=True),
    _key("max.incremental.fetch.session.cache.slots", _I, 1000,
         "Incremental fetch sessions (KIP-227) a broker keeps; 0 turns them off.",
         validator=_NON_NEGATIVE),
    _key("replica.high.watermark.checkpoint.interval.ms", _L, 5000,
         "How often the high watermark checkpoint is written."),
    # --- Groups and offsets ------------------------------------------------------------
    _key("group.min.session.timeout.ms", _I, 6000, "Shortest session a group member may ask."),
    _key("group.max.session.timeout.ms", _I, 1_800_000,
         "Longest session a group member may ask."),
    _key("group.initial.rebalance.delay.ms", _I, 3000,
         "Wait for more members before the first rebalance of a new group."),
    _key("group.max.size", _I, INT_MAX, "Most members one group may have.",
         validator=_POSITIVE),
    _key("offsets.topic.num.partitions", _I, 50,
         "Partitions of the committed offsets topic (fixed once created).",
         validator=_POSITIVE, importance=_H),
    _key("offsets.topic.replication.factor", _S, 3,
         "Replicas of the committed offsets topic.", validator=_POSITIVE, importance=_H),
    _key("offsets.topic.segment.bytes", _I, 100 * MIB,
         "Segment size of the committed offsets topic.", validator=_POSITIVE, importance=_H),
    _key("offsets.retention.minutes", _I, 10080,
         "How long the committed offsets of an empty group are kept.",
         validator=_POSITIVE, importance=_H),
    _key("offsets.retention.check.interval.ms", _L, 600_000,
         "How often expired committed offsets are looked for.", validator=_POSITIVE,
         importance=_H),
    _key("offsets.commit.timeout.ms", _I, 5000,
         "How long an offset commit waits for its replicas.", validator=_POSITIVE,
         importance=_H),
    _key("offsets.load.buffer.size", _I, 5 * MIB,
         "Read size when a coordinator loads committed offsets.", validator=_POSITIVE,
         importance=_H),
    _key("offset.metadata.max.bytes", _I, 4096, "Largest metadata string of one commit.",
         importance=_H),
    # --- Transactions and producer ids ----------------------------------------------------
    _key("transaction.state.log.num.partitions", _I, 50,
         "Partitions of the transaction state topic.", validator=_POSITIVE, importance=_H),
    _key("transaction.state.log.replication.factor", _S, 3,
         "Replicas of the transaction state topic.", validator=_POSITIVE, importance=_H),
    _key("transaction.state.log.min.isr", _I, 2,
         "min.insync.replicas of the transaction state topic.", validator=_POSITIVE,
         importance=_H),
    _key("transaction.state.log.segment.bytes", _I, 100 * MIB,
         "Segment size of the transaction state topic.", validator=_POSITIVE, importance=_H),
    _key("transaction.state.log.load.buffer.size", _I, 5 * MIB,
         "Read size when a coordinator loads transaction state.", validator=_POSITIVE),
    _key("transactional.id.expiration.ms", _I, 604_800_000,
         "Idle time after which a transactional id is forgotten.", validator=_POSITIVE,
         importance=_H),
    _key("transaction.max.timeout.ms", _I, 900_000,
         "Longest transaction timeout a producer may ask.", validator=_POSITIVE,
         importance=_H),
    _key("transaction.abort.timed.out.transaction.cleanup.interval.ms", _I, 10_000,
         "How often timed-out transactions are looked for.", validator=_POSITIVE,
         importance=_LOW),
    _key("transaction.remove.expired.transaction.cleanup.interval.ms", _I, 3_600_000,
         "How often expired transactional ids are removed.", validator=_POSITIVE,
         importance=_LOW),
    _key("producer.id.expiration.ms", _I, 86_400_000,
         "Idle time after which an idempotent producer's state is dropped.",
         validator=_NON_NEGATIVE, importance=_LOW, dynamic=True),
    _key("producer.id.expiration.check.interval.ms", _I, 600_000,
         "How often idle producers' state is looked for and dropped.",
         validator=_POSITIVE, importance=_LOW),
    _key("share.coordinator.state.topic.replication.factor", _S, 3,
         "Accepted for compatibility; share groups are not supported.", validator=_POSITIVE),
    _key("share.coordinator.state.topic.min.isr", _S, 2,
         "Accepted for compatibility; share groups are not supported.", validator=_POSITIVE),
    # --- Odradek's own ---------------------------------------------------------------------
    _key("quarantine.max.bytes", _L, GIB,
         "Bytes of truncated records kept aside per partition instead of deleted.",
         validator=_NON_NEGATIVE, dynamic=True),
    _key("odradek.flush.before.ack", _B, True,
         "acks=all is answered only after the in-sync replicas have fsynced the batch.",
         importance=_H),
    _key("odradek.connections.partial.request.timeout.ms", _L, 30_000,
         "A connection whose request has been arriving this long without completing (not "
         "counting time the node did not read from it) is closed.", validator=_POSITIVE),
    _key("odradek.log.scrub.bytes.per.second", _L, 64 * MIB,
         "How fast the background scrub validates the log bytes below the recovery "
         "points, which start-up no longer reads (ADR 0016).", validator=_POSITIVE),
]
# fmt: on

SERVER_CONFIG_DEF: Final = ConfigDef(_SERVER_KEYS)


def parse_overrides(entries: Iterable[str]) -> dict[str, str]:
    """``--override key=value`` entries as a mapping; the value may itself contain ``=``.

    Kafka's launcher refuses a value with ``=`` in it; we split on the first ``=`` only,
    which accepts everything Kafka accepts.
    """
    result: dict[str, str] = {}
    for entry in entries:
        key, equals, value = entry.partition("=")
        key = key.strip()
        if not equals or not key:
            raise ConfigError(f"Invalid override {entry!r}: expected key=value")
        result[key] = value
    return result


# ---------------------------------------------------------------------------------------
# The typed view
# ---------------------------------------------------------------------------------------


class ServerConfig:
    """One node's configuration: typed values, the strings they came from, unknown keys.

    Build it with :meth:`from_properties` (a mapping) or :meth:`load` (the text of a
    ``server.properties`` and ``--override`` entries); both validate. The object is
    immutable; derived values are computed once, on first use.
    """

    _values: Mapping[str, ConfigValue]
    _originals: Mapping[str, str]
    _unknown_keys: tuple[str, ...]

    def __init__(
        self,
        values: Mapping[str, ConfigValue],
        originals: Mapping[str, str],
        unknown_keys: Iterable[str] = (),
    ) -> None:
        # object.__setattr__ because __setattr__ below refuses every assignment.
        object.__setattr__(self, "_values", MappingProxyType(dict(values)))
        object.__setattr__(self, "_originals", MappingProxyType(dict(originals)))
        object.__setattr__(self, "_unknown_keys", tuple(unknown_keys))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ServerConfig is immutable; cannot set {name}")

    # -- construction ----------------------------------------------------------------

    @classmethod
    def from_properties(
        cls,
        properties: Mapping[str, str],
        overrides: Mapping[str, str] | None = None,
        *,
        validate: bool = True,
    ) -> ServerConfig:
        """Parse ``properties`` with ``overrides`` on top (an override wins over the file)."""
        merged = {**properties, **(overrides or {})}
        values, unknown = SERVER_CONFIG_DEF.parse(merged)
        # Per-listener values of the keys that have them are known keys, checked here.
        for suffix in _PER_LISTENER_KEYS:
            for key in [k for k in unknown if _listener_key_name(k, suffix) is not None]:
                _listener_int(key, merged[key])
                unknown.remove(key)
        config = cls(values, merged, unknown)
        if validate:
            config.validate()
        return config

    @classmethod
    def load(cls, text: str, overrides: Iterable[str] = ()) -> ServerConfig:
        """Parse the text of a ``server.properties`` and ``key=value`` override entries."""
        return cls.from_properties(parse_properties(text), parse_overrides(overrides))

    # -- raw access ------------------------------------------------------------------

    @property
    def values(self) -> Mapping[str, ConfigValue]:
        """Typed value of every defined key (defaults filled in)."""
        return self._values

    @property
    def originals(self) -> Mapping[str, str]:
        """The strings as given, file and overrides merged, unknown keys included."""
        return self._originals

    @property
    def unknown_keys(self) -> list[str]:
        """Given keys that are not in :data:`SERVER_CONFIG_DEF`, in the order given."""
        return list(self._unknown_keys)

    def get(self, name: str) -> ConfigValue:
        """The typed value of a defined key; an unknown name is a :class:`ConfigError`."""
        if name not in SERVER_CONFIG_DEF:
            raise ConfigError(f"Unknown configuration {name}")
        return self.values[name]

    def is_set(self, name: str) -> bool:
        """Whether ``name`` was given explicitly (in the file or as an override)."""
        return name in self.originals

    def _int(self, name: str) -> int:
        value = self.get(name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"configuration {name} has no integer value")
        return value

    def _opt_int(self, name: str) -> int | None:
        value = self.get(name)
        return None if value is None else self._int(name)

    def _bool(self, name: str) -> bool:
        value = self.get(name)
        if not isinstance(value, bool):
            raise ConfigError(f"configuration {name} has no boolean value")
        return value

    def _str(self, name: str) -> str | None:
        value = self.get(name)
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"configuration {name} has no string value")
        return value

    def _list(self, name: str) -> list[str] | None:
        value = self.get(name)
        if value is not None and not isinstance(value, list):
            raise ConfigError(f"configuration {name} has no list value")
        return value

    # -- identity and roles ----------------------------------------------------------

    @property
    def node_id(self) -> int:
        return self._int("node.id")

    @cached_property
    def process_roles(self) -> frozenset[str]:
        return frozenset(self._list("process.roles") or ())

    @property
    def is_broker(self) -> bool:
        return BROKER_ROLE in self.process_roles

    @property
    def is_controller(self) -> bool:
        return CONTROLLER_ROLE in self.process_roles

    @property
    def broker_rack(self) -> str | None:
        return self._str("broker.rack")

    # -- listeners -------------------------------------------------------------------

    @cached_property
    def controller_listener_names(self) -> tuple[str, ...]:
        return tuple(n.strip().upper() for n in self._list("controller.listener.names") or ())

    @cached_property
    def listener_security_protocol_map(self) -> Mapping[str, str]:
        """Kafka's effective map: when the key is not set and nothing uses SSL or SASL,
        each controller listener name maps to PLAINTEXT, so a minimal KRaft file works.
        """
        raw = self._str("listener.security.protocol.map") or ""
        mapping = _parse_protocol_map("listener.security.protocol.map", raw)
        if not self.is_set("listener.security.protocol.map"):
            used = [*self.controller_listener_names, *self._listener_names("listeners")]
            if not any(n in ("SSL", "SASL_PLAINTEXT", "SASL_SSL") for n in used):
                for name in self.controller_listener_names:
                    mapping.setdefault(name, "PLAINTEXT")
        return MappingProxyType(mapping)

    def _listener_names(self, key: str) -> list[str]:
        return [e.split("://", 1)[0].strip().upper() for e in self._list(key) or ()]

    @cached_property
    def listeners(self) -> tuple[Endpoint, ...]:
        return parse_listeners(
            "listeners", self._list("listeners") or (), self.listener_security_protocol_map
        )

    @cached_property
    def advertised_listeners(self) -> tuple[Endpoint, ...]:
        """``advertised.listeners`` when set, else ``listeners`` (controller ones included)."""
        raw = self._list("advertised.listeners")
        if raw is None:
            return self.listeners
        return parse_listeners(
            "advertised.listeners",
            raw,
            self.listener_security_protocol_map,
            require_distinct_ports=False,
        )

    @property
    def controller_listeners(self) -> tuple[Endpoint, ...]:
        """The listeners this node binds for the controller quorum."""
        names = set(self.controller_listener_names)
        return tuple(e for e in self.listeners if e.listener_name in names)

    @property
    def advertised_broker_listeners(self) -> tuple[Endpoint, ...]:
        """What the broker registers for clients: advertised listeners minus controller ones."""
        names = set(self.controller_listener_names)
        return tuple(e for e in self.advertised_listeners if e.listener_name not in names)

    @property
    def advertised_controller_listeners(self) -> tuple[Endpoint, ...]:
        """One endpoint per controller listener name, as Kafka chooses them.

        The advertised entry when there is one, else the bound listener; a wildcard
        ``0.0.0.0`` host becomes ``None`` (resolved to the host's name by the shell).
        """
        advertised: dict[str, Endpoint] = {}
        if self._list("advertised.listeners") is not None:
            advertised = {e.listener_name: e for e in self.advertised_listeners}
        bound = {e.listener_name: e for e in self.listeners}
        result: list[Endpoint] = []
        for name in self.controller_listener_names:
            if name in advertised:
                result.append(advertised[name])
            elif name in bound:
                endpoint = bound[name]
                if endpoint.host == _NON_ROUTABLE:
                    endpoint = Endpoint(name, endpoint.security_protocol, None, endpoint.port)
                result.append(endpoint)
        return tuple(result)

    @property
    def inter_broker_listener_name(self) -> str:
        """``inter.broker.listener.name``, or the name of ``inter.broker.security.protocol``."""
        name = self._str("inter.broker.listener.name")
        if name:
            return name.strip().upper()
        return (self._str("inter.broker.security.protocol") or "PLAINTEXT").upper()

    # -- quorum ------------------------------------------------------------------------

    @cached_property
    def controller_quorum_voters(self) -> tuple[Voter, ...]:
        return _parse_voters(
            "controller.quorum.voters", self._list("controller.quorum.voters") or ()
        )

    @cached_property
    def controller_quorum_bootstrap_servers(self) -> tuple[HostPort, ...]:
        key = "controller.quorum.bootstrap.servers"
        return tuple(_host_port(key, e) for e in self._list(key) or ())

    @property
    def controller_quorum_election_timeout_ms(self) -> int:
        return self._int("controller.quorum.election.timeout.ms")

    @property
    def controller_quorum_fetch_timeout_ms(self) -> int:
        return self._int("controller.quorum.fetch.timeout.ms")

    @property
    def controller_quorum_election_backoff_max_ms(self) -> int:
        return self._int("controller.quorum.election.backoff.max.ms")

    @property
    def controller_quorum_request_timeout_ms(self) -> int:
        return self._int("controller.quorum.request.timeout.ms")

    @property
    def controller_quorum_retry_backoff_ms(self) -> int:
        return self._int("controller.quorum.retry.backoff.ms")

    @property
    def broker_session_timeout_ms(self) -> int:
        return self._int("broker.session.timeout.ms")

    @property
    def broker_session_connection_loss_ms(self) -> int:
        return self._int("broker.session.connection.loss.ms")

    @property
    def broker_heartbeat_interval_ms(self) -> int:
        return self._int("broker.heartbeat.interval.ms")

    @property
    def metadata_max_idle_interval_ms(self) -> int:
        return self._int("metadata.max.idle.interval.ms")

    @property
    def metadata_log_max_record_bytes_between_snapshots(self) -> int:
        return self._int("metadata.log.max.record.bytes.between.snapshots")

    @property
    def metadata_log_max_snapshot_interval_ms(self) -> int:
        return self._int("metadata.log.max.snapshot.interval.ms")

    @property
    def offsets_commit_timeout_ms(self) -> int:
        return self._int("offsets.commit.timeout.ms")

    @property
    def replica_fetch_backoff_ms(self) -> int:
        return self._int("replica.fetch.backoff.ms")

    @property
    def metadata_quorum_stall_alarm_ms(self) -> int:
        return self._int("metadata.quorum.stall.alarm.ms")

    # -- logs --------------------------------------------------------------------------

    @property
    def log_dirs(self) -> tuple[str, ...]:
        """``log.dirs`` when set, else ``log.dir`` (Kafka's precedence)."""
        dirs = self._list("log.dirs")
        if dirs is None:
            dirs = self._list("log.dir") or []
        return tuple(dirs)

    @property
    def metadata_log_dir(self) -> str:
        """``metadata.log.dir``, else the first log directory."""
        return self._str("metadata.log.dir") or self.log_dirs[0]

    @property
    def metadata_log_segment_bytes(self) -> int:
        return self._int("metadata.log.segment.bytes")

    @property
    def num_partitions(self) -> int:
        return self._int("num.partitions")

    @property
    def default_replication_factor(self) -> int | None:
        """The explicit ``default.replication.factor``; see :meth:`replication_factor_for`."""
        return self._opt_int("default.replication.factor")

    def replication_factor_for(self, broker_count: int) -> int:
        """Replication factor of a topic created without one, in a cluster of ``broker_count``.

        The explicit setting when there is one; else ``min(3, broker_count)`` (at least 1),
        our safer default in place of Kafka's 1.
        """
        explicit = self.default_replication_factor
        if explicit is not None:
            return explicit
        return max(1, min(3, broker_count))

    @property
    def min_insync_replicas(self) -> int | None:
        """The explicit ``min.insync.replicas``; see :meth:`min_insync_replicas_for`."""
        return self._opt_int("min.insync.replicas")

    def min_insync_replicas_for(self, replication_factor: int) -> int:
        """The broker-wide ``min.insync.replicas`` for a partition of ``replication_factor``.

        The explicit setting when there is one; else a majority, ``rf // 2 + 1``, our
        safer default in place of Kafka's 1.
        """
        explicit = self.min_insync_replicas
        if explicit is not None:
            return explicit
        return majority(replication_factor)

    @property
    def unclean_leader_election_enable(self) -> bool:
        return self._bool("unclean.leader.election.enable")

    @property
    def auto_create_topics_enable(self) -> bool:
        return self._bool("auto.create.topics.enable")

    @property
    def leader_imbalance_check_interval_seconds(self) -> int:
        return self._int("leader.imbalance.check.interval.seconds")

    @property
    def leader_imbalance_per_broker_percentage(self) -> int:
        return self._int("leader.imbalance.per.broker.percentage")

    @property
    def auto_leader_rebalance_enable(self) -> bool:
        return self._bool("auto.leader.rebalance.enable")

    @property
    def log_segment_bytes(self) -> int:
        return self._int("log.segment.bytes")

    @property
    def log_roll_ms(self) -> int:
        """``log.roll.ms`` when set, else ``log.roll.hours`` in ms."""
        explicit = self._opt_int("log.roll.ms")
        return explicit if explicit is not None else self._int("log.roll.hours") * 3_600_000

    @property
    def log_retention_ms(self) -> int:
        """Retention in ms: ``.ms`` over ``.minutes`` over ``.hours``; any negative is -1."""
        millis = self._opt_int("log.retention.ms")
        if millis is None:
            minutes = self._opt_int("log.retention.minutes")
            if minutes is not None:
                millis = minutes * 60_000
            else:
                millis = self._int("log.retention.hours") * 3_600_000
        return -1 if millis < 0 else millis

    @property
    def log_retention_bytes(self) -> int:
        return self._int("log.retention.bytes")

    @property
    def log_index_interval_bytes(self) -> int:
        return self._int("log.index.interval.bytes")

    @property
    def log_index_size_max_bytes(self) -> int:
        return self._int("log.index.size.max.bytes")

    @property
    def log_flush_interval_messages(self) -> int:
        return self._int("log.flush.interval.messages")

    @property
    def log_flush_interval_ms(self) -> int:
        """``log.flush.interval.ms`` when set, else ``log.flush.scheduler.interval.ms``."""
        explicit = self._opt_int("log.flush.interval.ms")
        if explicit is not None:
            return explicit
        return self._int("log.flush.scheduler.interval.ms")

    @property
    def log_retention_check_interval_ms(self) -> int:
        return self._int("log.retention.check.interval.ms")

    @property
    def log_flush_offset_checkpoint_interval_ms(self) -> int:
        return self._int("log.flush.offset.checkpoint.interval.ms")

    @property
    def log_flush_start_offset_checkpoint_interval_ms(self) -> int:
        return self._int("log.flush.start.offset.checkpoint.interval.ms")

    # -- replication ----------------------------------------------------------------------

    @property
    def replica_high_watermark_checkpoint_interval_ms(self) -> int:
        return self._int("replica.high.watermark.checkpoint.interval.ms")

    @property
    def producer_id_expiration_ms(self) -> int:
        return self._int("producer.id.expiration.ms")

    @property
    def producer_id_expiration_check_interval_ms(self) -> int:
        return self._int("producer.id.expiration.check.interval.ms")

    @property
    def replica_lag_time_max_ms(self) -> int:
        return self._int("replica.lag.time.max.ms")

    @property
    def replica_fetch_max_bytes(self) -> int:
        return self._int("replica.fetch.max.bytes")

    @property
    def follower_replication_throttled_rate(self) -> int:
        return self._int("follower.replication.throttled.rate")

    @property
    def replica_fetch_wait_max_ms(self) -> int:
        return self._int("replica.fetch.wait.max.ms")

    @property
    def max_incremental_fetch_session_cache_slots(self) -> int:
        return self._int("max.incremental.fetch.session.cache.slots")

    @property
    def num_replica_fetchers(self) -> int:
        return self._int("num.replica.fetchers")

    @property
    def message_max_bytes(self) -> int:
        return self._int("message.max.bytes")

    @property
    def socket_request_max_bytes(self) -> int:
        return self._int("socket.request.max.bytes")

    @property
    def connections_max_idle_ms(self) -> int:
        return self._int("connections.max.idle.ms")

    @property
    def max_connections(self) -> int:
        return self._int("max.connections")

    def listener_max_connections(self, listener_name: str) -> int:
        """``max.connections`` for one listener: ``listener.name.<name>.max.connections``
        when set (it may only lower the limit, as Kafka applies both), else the
        node-wide value."""
        own = self._listener_ints(LISTENER_MAX_CONNECTIONS).get(listener_name.upper())
        return self.max_connections if own is None else min(own, self.max_connections)

    @property
    def max_connections_per_ip(self) -> int:
        return self._int("max.connections.per.ip")

    @cached_property
    def max_connections_per_ip_overrides(self) -> Mapping[str, int]:
        raw = self._str("max.connections.per.ip.overrides") or ""
        return MappingProxyType(parse_per_ip_overrides("max.connections.per.ip.overrides", raw))

    @property
    def queued_max_requests(self) -> int:
        return self._int("queued.max.requests")

    @property
    def queued_max_request_bytes(self) -> int:
        """``queued.max.request.bytes``; -1 (or 0, as Kafka reads it) for no bound."""
        return self._int("queued.max.request.bytes")

    @property
    def partial_request_timeout_ms(self) -> int:
        return self._int("odradek.connections.partial.request.timeout.ms")

    def _listener_ints(self, suffix: str) -> dict[str, int]:
        """The ``listener.name.<name>.<suffix>`` entries given, by upper-case name."""
        found: dict[str, int] = {}
        for key, raw in self.originals.items():
            name = _listener_key_name(key, suffix)
            if name is not None:
                found[name] = _listener_int(key, raw)
        return found

    @property
    def request_timeout_ms(self) -> int:
        return self._int("request.timeout.ms")

    # -- groups, offsets, transactions ---------------------------------------------------

    @property
    def offsets_topic_num_partitions(self) -> int:
        return self._int("offsets.topic.num.partitions")

    @property
    def offsets_topic_replication_factor(self) -> int:
        return self._int("offsets.topic.replication.factor")

    @property
    def offsets_retention_minutes(self) -> int:
        return self._int("offsets.retention.minutes")

    @property
    def group_initial_rebalance_delay_ms(self) -> int:
        return self._int("group.initial.rebalance.delay.ms")

    @property
    def group_min_session_timeout_ms(self) -> int:
        return self._int("group.min.session.timeout.ms")

    @property
    def group_max_session_timeout_ms(self) -> int:
        return self._int("group.max.session.timeout.ms")

    @property
    def transaction_state_log_num_partitions(self) -> int:
        return self._int("transaction.state.log.num.partitions")

    @property
    def transaction_state_log_replication_factor(self) -> int:
        return self._int("transaction.state.log.replication.factor")

    @property
    def transaction_state_log_min_isr(self) -> int:
        return self._int("transaction.state.log.min.isr")

    # -- ours --------------------------------------------------------------------------

    @property
    def quarantine_max_bytes(self) -> int:
        return self._int("quarantine.max.bytes")

    @property
    def flush_before_ack(self) -> bool:
        return self._bool("odradek.flush.before.ack")

    @property
    def log_scrub_bytes_per_second(self) -> int:
        return self._int("odradek.log.scrub.bytes.per.second")

    # -- cross-key rules ---------------------------------------------------------------

    def validate(self) -> list[str]:
        """Check the rules that span keys, as Kafka's ``KafkaConfig`` does for KRaft.

        Raises :class:`ConfigError` naming the keys for a configuration Kafka refuses;
        returns warnings (as text) for one Kafka accepts but that is probably a mistake.
        """
        warnings: list[str] = []
        node_id = self.node_id
        broker_id = self._opt_int("broker.id")
        if broker_id is not None and broker_id != node_id:
            raise ConfigError(
                f"broker.id ({broker_id}) and node.id ({node_id}) must be equal when both are set"
            )
        if self.log_roll_ms < 1:
            raise ConfigError("log.roll.ms (or log.roll.hours) must be at least 1 ms")
        if self.log_retention_ms == 0:
            raise ConfigError(
                "log.retention.ms (or log.retention.minutes / log.retention.hours) must be "
                "-1 (unlimited) or at least 1 ms; it is 0"
            )
        if not self.log_dirs:
            raise ConfigError("at least one log directory must be set in log.dirs or log.dir")
        self._validate_replica_fetch()
        if self.broker_heartbeat_interval_ms * 2 > self.broker_session_timeout_ms:
            warnings.append(
                f"broker.heartbeat.interval.ms ({self.broker_heartbeat_interval_ms}) should be "
                f"at most half of broker.session.timeout.ms ({self.broker_session_timeout_ms}), "
                "or brokers lose their lease after one late heartbeat"
            )
        self._validate_inter_broker_listener()
        self._validate_connection_limits()
        # Parse both listener keys now, so that a bad entry fails at start-up, not at bind time.
        _ = self.listeners, self.advertised_listeners
        self._validate_quorum()
        roles = self.process_roles
        if roles == {BROKER_ROLE}:
            self._validate_broker_only()
        elif roles == {CONTROLLER_ROLE}:
            self._validate_controller_only()
        else:
            self._validate_combined()
        if self.is_broker:
            self._validate_broker_listeners()
        for endpoint in (*self.advertised_broker_listeners, *self.advertised_controller_listeners):
            if endpoint.host == _NON_ROUTABLE:
                raise ConfigError(
                    f"advertised.listeners cannot use the non-routable address {_NON_ROUTABLE} "
                    f"({endpoint.connection_string()}); advertise an address peers can reach"
                )
        warnings.extend(self._safety_warnings())
        return warnings

    def _validate_connection_limits(self) -> None:
        """Kafka's rules for the socket server's limits (``KafkaConfig``)."""
        queued = self.queued_max_request_bytes
        if queued > 0 and queued < self.socket_request_max_bytes:
            raise ConfigError(
                f"queued.max.request.bytes ({queued}) must be -1 (unbounded) or at least "
                f"socket.request.max.bytes ({self.socket_request_max_bytes}), or the "
                "largest request could never be read"
            )
        if self.max_connections_per_ip == 0 and not self.max_connections_per_ip_overrides:
            raise ConfigError(
                "max.connections.per.ip can be set to zero only if "
                "max.connections.per.ip.overrides is set"
            )

    def _validate_replica_fetch(self) -> None:
        wait = self.replica_fetch_wait_max_ms
        socket_timeout = self._int("replica.socket.timeout.ms")
        if wait > socket_timeout:
            raise ConfigError(
                f"replica.fetch.wait.max.ms ({wait}) must not exceed replica.socket.timeout.ms "
                f"({socket_timeout}), or follower fetches time out while waiting"
            )
        if wait > self.replica_lag_time_max_ms:
            raise ConfigError(
                f"replica.fetch.wait.max.ms ({wait}) must not exceed replica.lag.time.max.ms "
                f"({self.replica_lag_time_max_ms}), or followers drop out of the ISR while waiting"
            )

    def _validate_inter_broker_listener(self) -> None:
        if self.is_set("inter.broker.listener.name"):
            if self.is_set("inter.broker.security.protocol"):
                raise ConfigError(
                    "only one of inter.broker.listener.name and inter.broker.security.protocol "
                    "may be set"
                )
            name = self.inter_broker_listener_name
            if name not in self.listener_security_protocol_map:
                raise ConfigError(
                    f"inter.broker.listener.name {name} is not in listener.security.protocol.map"
                )

    def _validate_quorum(self) -> None:
        voters = self.controller_quorum_voters
        bootstrap = self.controller_quorum_bootstrap_servers
        if not voters and not bootstrap:
            raise ConfigError(
                "either controller.quorum.bootstrap.servers must list the bootstrap controllers "
                "or controller.quorum.voters must list the voters"
            )
        for voter in voters:
            if voter.host == _NON_ROUTABLE:
                raise ConfigError(
                    f"controller.quorum.voters: voter {voter.node_id} uses the non-routable "
                    f"address {_NON_ROUTABLE}"
                )

    def _voter_ids(self) -> set[int]:
        return {v.node_id for v in self.controller_quorum_voters}

    def _validate_node_in_voters(self) -> None:
        ids = self._voter_ids()
        if ids and self.node_id not in ids:
            raise ConfigError(
                f"process.roles contains controller, so node.id {self.node_id} must be one of "
                f"the voters in controller.quorum.voters ({sorted(ids)})"
            )

    def _validate_controller_listeners(self) -> None:
        if not self.advertised_controller_listeners:
            raise ConfigError(
                "controller.listener.names must name at least one listener of listeners when "
                "process.roles contains controller"
            )
        bound = {e.listener_name for e in self.listeners}
        missing = [n for n in self.controller_listener_names if n not in bound]
        if missing:
            raise ConfigError(
                f"controller.listener.names must only name listeners of listeners when "
                f"process.roles contains controller; {', '.join(missing)} is not in listeners"
            )

    def _validate_broker_only(self) -> None:
        ids = self._voter_ids()
        if self.node_id in ids:
            raise ConfigError(
                f"process.roles is just broker, so node.id {self.node_id} must not be one of "
                f"the voters in controller.quorum.voters ({sorted(ids)})"
            )
        if not self.controller_listener_names:
            raise ConfigError(
                "controller.listener.names must name the controllers' listener when "
                "process.roles is just broker"
            )
        bound = {e.listener_name for e in self.listeners}
        clash = [n for n in self.controller_listener_names if n in bound]
        if clash:
            raise ConfigError(
                f"controller.listener.names must not name a listener of listeners when "
                f"process.roles is just broker; {', '.join(clash)} is in listeners"
            )
        for name in self.controller_listener_names:
            if name not in self.listener_security_protocol_map:
                raise ConfigError(
                    f"controller listener {name} (controller.listener.names) has no entry in "
                    "listener.security.protocol.map"
                )

    def _validate_controller_only(self) -> None:
        names = set(self.controller_listener_names)
        others = [e.listener_name for e in self.listeners if e.listener_name not in names]
        if others:
            raise ConfigError(
                f"listeners must only contain controller listeners (controller.listener.names) "
                f"when process.roles is just controller; {', '.join(others)} is not one"
            )
        if self.is_set("inter.broker.listener.name") and self.inter_broker_listener_name in names:
            raise ConfigError(
                "controller.listener.names must not contain inter.broker.listener.name "
                "when process.roles is just controller"
            )
        self._validate_node_in_voters()
        self._validate_controller_listeners()

    def _validate_combined(self) -> None:
        self._validate_node_in_voters()
        self._validate_controller_listeners()

    def _validate_broker_listeners(self) -> None:
        advertised = {e.listener_name for e in self.advertised_broker_listeners}
        if not advertised:
            raise ConfigError(
                "there must be at least one broker listener in advertised.listeners (or "
                "listeners); perhaps every listener is named in controller.listener.names?"
            )
        name = self.inter_broker_listener_name
        if name not in advertised:
            raise ConfigError(
                f"inter.broker.listener.name {name} must be a listener of advertised.listeners; "
                f"the broker listeners are {', '.join(sorted(advertised))}"
            )
        bound = {e.listener_name for e in self.listeners}
        extra = sorted(advertised - bound)
        if extra:
            raise ConfigError(
                f"advertised.listeners names must be among those of listeners; "
                f"{', '.join(extra)} is not in listeners ({', '.join(sorted(bound))})"
            )

    def _safety_warnings(self) -> list[str]:
        warnings: list[str] = []
        rf, isr = self.default_replication_factor, self.min_insync_replicas
        if rf is not None and isr is not None and isr > rf:
            warnings.append(
                f"min.insync.replicas ({isr}) exceeds default.replication.factor ({rf}): "
                "acks=all writes to such topics always fail with NOT_ENOUGH_REPLICAS"
            )
        tx_rf = self.transaction_state_log_replication_factor
        tx_isr = self.transaction_state_log_min_isr
        if tx_isr > tx_rf:
            warnings.append(
                f"transaction.state.log.min.isr ({tx_isr}) exceeds "
                f"transaction.state.log.replication.factor ({tx_rf}): transactions cannot commit"
            )
        if self.unclean_leader_election_enable:
            warnings.append(
                "unclean.leader.election.enable is true: an out-of-sync replica may become "
                "leader and acknowledged records may be lost (they are quarantined, not deleted)"
            )
        return warnings


def majority(replication_factor: int) -> int:
    """The smallest majority of ``replication_factor`` replicas (at least 1)."""
    return max(1, replication_factor // 2 + 1)
