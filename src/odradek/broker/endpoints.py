"""Listener, voter and address syntax of the server's config keys, with Kafka's checks.

This module owns:

* :class:`Endpoint` (a listener: name, security protocol, host, port), :class:`HostPort`
  and :class:`Voter` (an entry of ``controller.quorum.voters``);
* the parsers of the keys that hold them, each raising
  :class:`~odradek.core.errors.ConfigError` that names the key and the entry:
  :func:`parse_listeners` (``listeners``, ``advertised.listeners``),
  :func:`parse_voters`, :func:`host_port` (``controller.quorum.bootstrap.servers``),
  :func:`parse_protocol_map` (``listener.security.protocol.map``) and
  :func:`parse_per_ip_overrides` (``max.connections.per.ip.overrides``);
* the per-listener keys (``listener.name.<name>.max.connections``):
  :func:`listener_key_name` and :func:`listener_int`;
* the validators that put these parsers on the declarations of
  :mod:`odradek.broker.server_keys`, so that a bad entry fails when the file is read.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from odradek.core.config_keys import INT_MAX, ConfigValue, Validator
from odradek.core.errors import ConfigError

__all__ = [
    "LISTENER_MAX_CONNECTIONS",
    "NON_ROUTABLE",
    "PER_LISTENER_KEYS",
    "SECURITY_PROTOCOLS",
    "SECURITY_PROTOCOL_IDS",
    "Endpoint",
    "HostPort",
    "HostPortListValidator",
    "PerIpOverridesValidator",
    "ProtocolMapValidator",
    "Voter",
    "VotersValidator",
    "host_port",
    "listener_int",
    "listener_key_name",
    "parse_listeners",
    "parse_per_ip_overrides",
    "parse_protocol_map",
    "parse_voters",
]

SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Kafka's SecurityProtocol ids, as registrations carry them.
SECURITY_PROTOCOL_IDS: Final = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


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
NON_ROUTABLE: Final = "0.0.0.0"


def _port(key: str, entry: str, text: str) -> int:
    port = int(text)
    if not 0 <= port <= 65535:
        raise ConfigError(
            f"Invalid value {entry!r} for configuration {key}: port {port} is not in 0..65535"
        )
    return port


def host_port(key: str, address: str, entry: str | None = None) -> HostPort:
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


def parse_voters(key: str, entries: Iterable[str]) -> tuple[Voter, ...]:
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
        hp = host_port(key, address, entry)
        voters.append(Voter(node_id, hp.host, hp.port))
    return tuple(voters)


# Kafka lets a listener have its own value of a few keys, under the listener's prefix.
LISTENER_MAX_CONNECTIONS: Final = "max.connections"
_LISTENER_KEY = re.compile(r"listener\.name\.([^.]+)\.(.+)")
PER_LISTENER_KEYS: Final = frozenset({LISTENER_MAX_CONNECTIONS})


def listener_key_name(key: str, suffix: str) -> str | None:
    """The (upper-case) listener name of ``listener.name.<name>.<suffix>``, else None."""
    match = _LISTENER_KEY.fullmatch(key)
    if match is None or match.group(2) != suffix:
        return None
    return match.group(1).upper()


def listener_int(key: str, raw: str) -> int:
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


def parse_protocol_map(key: str, raw: str) -> dict[str, str]:
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


class VotersValidator(Validator):
    """``controller.quorum.voters``: each entry ``{id}@{host}:{port}``, no id twice."""

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if isinstance(value, list):
            parse_voters(name, value)

    def __str__(self) -> str:
        return "list of {id}@{host}:{port}"


class HostPortListValidator(Validator):
    """``controller.quorum.bootstrap.servers``: each entry ``{host}:{port}``."""

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if isinstance(value, list):
            for entry in value:
                host_port(name, entry)

    def __str__(self) -> str:
        return "list of {host}:{port}"


class PerIpOverridesValidator(Validator):
    """``max.connections.per.ip.overrides``: ``host:count`` pairs."""

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if isinstance(value, str):
            parse_per_ip_overrides(name, value)

    def __str__(self) -> str:
        return "list of host:count"


class ProtocolMapValidator(Validator):
    """``listener.security.protocol.map``: ``NAME:PROTOCOL`` pairs of known protocols."""

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if isinstance(value, str):
            parse_protocol_map(name, value)

    def __str__(self) -> str:
        return "list of LISTENER_NAME:SECURITY_PROTOCOL"
