"""How every ``odradek`` command that talks to a cluster reaches it.

This module owns the client side that the commands share, the way Kafka's tools share
their AdminClient:

* :func:`parse_addresses`: ``--bootstrap-server`` and ``--bootstrap-controller`` take a
  comma-separated list of ``HOST:PORT`` (an IPv6 address in brackets, ``[::1]:9092``),
  like Kafka's ``bootstrap.servers``;
* :func:`client_settings`: the flag, ``--command-config FILE`` (a Java-style client
  properties file, as Kafka's tools take) and the command's own defaults, resolved into
  one :class:`ClientSettings`. What the file may set is :data:`CLIENT_CONFIG`, with
  ``security.protocol`` and the ``ssl.*`` and ``sasl.*`` keys Kafka's clients take
  (refused with the key named when they do not fit the protocol or are not read); other
  keys the commands do not use are named in a warning, as Kafka's clients log them;
* :class:`ClusterClient`: requests with fail-over. Each address is tried in turn until
  one answers; the brokers a Metadata answer lists (the controllers a DescribeQuorum
  answer lists) are remembered, and when the connection is lost mid-command the request
  goes to another of them. A request that must not be sent twice (an unclean election, a
  voter change) is sent once, on a connection that has answered before, and a lost
  answer is reported as such.

Every failure to reach the cluster is :class:`ConnectionFailed`: one line, exit status 2,
never a traceback.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar

import click

from odradek.core.config_keys import ConfigDef, ConfigKey, ConfigType, Range
from odradek.core.errors import ConfigError
from odradek.core.properties import parse_properties
from odradek.protocol.api import Body
from odradek.protocol.messages import (
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    MetadataRequest,
    MetadataResponse,
)
from odradek.protocol.messages import describe_quorum_request as dqr
from odradek.raft.wire import METADATA_PARTITION, METADATA_TOPIC
from odradek.security.sasl_keys import (
    SASL_JAAS_CONFIG,
    SASL_MECHANISM,
    sasl_client_credentials,
)
from odradek.security.ssl_keys import SSL_KEYS
from odradek.shell.peer_client import PLAINTEXT, ClientSecurity, PeerConnection, PeerUnavailable
from odradek.shell.tls import client_context

Address = tuple[str, int]
Kind = Literal["broker", "controller"]
T = TypeVar("T")

CONNECT_TIMEOUT_S: Final = 1.0
"""How long one connection attempt may take unless ``socket.connection.setup.timeout.ms``
says otherwise. Kafka's clients wait 10 s; a command that tries several addresses in
turn moves on sooner, and every address it is given is tried."""
METADATA_VERSION: Final = 12
DESCRIBE_QUORUM_VERSION: Final = 2

BOOTSTRAP_SERVERS: Final = "bootstrap.servers"
BOOTSTRAP_CONTROLLERS: Final = "bootstrap.controllers"
CLIENT_ID: Final = "client.id"
REQUEST_TIMEOUT_MS: Final = "request.timeout.ms"
CONNECTION_SETUP_TIMEOUT_MS: Final = "socket.connection.setup.timeout.ms"
SECURITY_PROTOCOL: Final = "security.protocol"

CLIENT_CONFIG: Final = ConfigDef(
    [
        ConfigKey(
            BOOTSTRAP_SERVERS,
            ConfigType.LIST,
            None,
            doc="Brokers to ask when a command gets no --bootstrap-server.",
        ),
        ConfigKey(
            BOOTSTRAP_CONTROLLERS,
            ConfigType.LIST,
            None,
            doc="Controllers to ask, when a quorum command gets no --bootstrap-controller.",
        ),
        ConfigKey(CLIENT_ID, ConfigType.STRING, None, doc="The client id of every request."),
        ConfigKey(
            REQUEST_TIMEOUT_MS,
            ConfigType.INT,
            None,
            Range.at_least(1),
            doc="How long to wait for each answer; each command has its own default.",
        ),
        ConfigKey(
            CONNECTION_SETUP_TIMEOUT_MS,
            ConfigType.LONG,
            None,
            Range.at_least(1),
            doc="How long one connection attempt may take (default 1000 here).",
        ),
        ConfigKey(
            SECURITY_PROTOCOL,
            ConfigType.STRING,
            "PLAINTEXT",
            doc="PLAINTEXT, SSL (with the ssl.* keys), SASL_PLAINTEXT or SASL_SSL (with "
            "sasl.mechanism and sasl.jaas.config).",
        ),
    ]
)
"""The client properties an ``odradek`` command applies from ``--command-config``."""

_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_SASL_CLIENT_KEYS: Final = frozenset({SASL_MECHANISM, SASL_JAAS_CONFIG})
_BRACKETED: Final = re.compile(r"\[([^\[\]]*)\]:([0-9]+)")
_PORT: Final = re.compile(r"[0-9]+")


class ConnectionFailed(click.ClickException):
    """The cluster could not be reached, or the connection was lost and no other node
    answered. Exit status 2, like a usage error, so that a script or a monitor can tell
    "could not ask" from "asked, and the answer is bad" (status 1)."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        # One line, whatever the socket error said.
        super().__init__(" ".join(message.split()))


# ---------------------------------------------------------------------------------------
# Addresses
# ---------------------------------------------------------------------------------------


def parse_addresses(text: str, source: str) -> tuple[Address, ...]:
    """The ``(host, port)`` pairs of a comma-separated ``HOST:PORT`` list, in order and
    without repeats. ``source`` names the flag or key for the error message.

    Items are trimmed and empty ones skipped, as Kafka parses ``bootstrap.servers``. An
    IPv6 address goes in brackets; one without them is refused rather than split at its
    last colon (Kafka's reading), because ``fe80::1:9092`` may as well be an address
    whose port was forgotten.
    """
    found: list[Address] = []
    for item in text.split(","):
        item = item.strip()
        if item:
            found.append(_address(item, source))
    if not found:
        raise click.BadParameter("no HOST:PORT given", param_hint=source)
    return tuple(dict.fromkeys(found))


def _address(item: str, source: str) -> Address:
    bracketed = _BRACKETED.fullmatch(item)
    if bracketed is not None:
        host, port = bracketed.group(1), bracketed.group(2)
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise click.BadParameter(
                f"{item!r}: only an IPv6 address goes in brackets", param_hint=source
            ) from None
    else:
        host, separator, port = item.rpartition(":")
        if not separator or not host or not _PORT.fullmatch(port) or "[" in host or "]" in host:
            raise click.BadParameter(
                f"{item!r} is not HOST:PORT (an IPv6 address in brackets: [::1]:9092)",
                param_hint=source,
            )
        if ":" in host:
            raise click.BadParameter(
                f"{item!r}: write an IPv6 address in brackets, as [{host}]:{port}",
                param_hint=source,
            )
    number = int(port)
    if not 1 <= number <= 65535:
        raise click.BadParameter(f"{item!r}: port {number} is not 1 to 65535", param_hint=source)
    return host, number


def format_address(address: Address) -> str:
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# ---------------------------------------------------------------------------------------
# Settings: the flag, --command-config and the command's defaults
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClientSettings:
    addresses: tuple[Address, ...]
    client_id: str
    request_timeout_s: float | None = None
    """From ``request.timeout.ms``; None: each request waits its command's default."""
    connect_timeout_s: float = CONNECT_TIMEOUT_S
    security: ClientSecurity = PLAINTEXT
    """From ``security.protocol`` with the ``ssl.*`` keys (SSL, SASL_SSL) and
    ``sasl.mechanism`` / ``sasl.jaas.config`` (SASL_PLAINTEXT, SASL_SSL)."""


def read_command_config(path: str) -> dict[str, str]:
    """The properties of a ``--command-config`` file, checked against what this build can
    honour: the typed values of :data:`CLIENT_CONFIG` keys, as strings, and a warning on
    stderr naming every other key (the commands do not use it)."""
    hint = f"--command-config {path}"
    try:
        with open(path, encoding="latin-1") as f:
            # Java reads .properties as ISO-8859-1 with \\u escapes for the rest.
            raw = parse_properties(f.read())
    except OSError as e:
        raise click.BadParameter(f"cannot read it: {e.strerror}", param_hint=hint) from None
    except ConfigError as e:
        raise click.BadParameter(str(e), param_hint=hint) from None
    protocol = raw.get(SECURITY_PROTOCOL, "PLAINTEXT").strip().upper()
    if protocol not in _PROTOCOLS:
        raise click.BadParameter(
            f"{SECURITY_PROTOCOL}={protocol}: one of {', '.join(_PROTOCOLS)}",
            param_hint=hint,
        )
    tls_keys = {k: v for k, v in raw.items() if k in SSL_KEYS}
    if tls_keys and protocol not in ("SSL", "SASL_SSL"):
        raise click.BadParameter(
            f"{', '.join(sorted(tls_keys))} given with {SECURITY_PROTOCOL}={protocol}: "
            "set security.protocol=SSL or SASL_SSL to use them",
            param_hint=hint,
        )
    sasl_keys = [k for k in raw if k.startswith("sasl.")]
    if sasl_keys and not protocol.startswith("SASL_"):
        raise click.BadParameter(
            f"{', '.join(sorted(sasl_keys))} given with {SECURITY_PROTOCOL}={protocol}: "
            "set security.protocol=SASL_PLAINTEXT or SASL_SSL to use them",
            param_hint=hint,
        )
    unread = [k for k in sasl_keys if k not in _SASL_CLIENT_KEYS]
    if unread:
        raise click.BadParameter(
            f"{', '.join(sorted(unread))}: not supported; odradek commands log in with "
            f"{SASL_MECHANISM} and {SASL_JAAS_CONFIG} (a PlainLoginModule or "
            "ScramLoginModule with username and password)",
            param_hint=hint,
        )
    try:
        _, unknown = CLIENT_CONFIG.parse(
            {k: v for k, v in raw.items() if k not in SSL_KEYS and k not in _SASL_CLIENT_KEYS}
        )
    except ConfigError as e:
        raise click.BadParameter(str(e), param_hint=hint) from None
    if unknown:
        click.echo(
            f"warning: {hint}: ignoring {', '.join(unknown)} (not used by odradek commands)",
            err=True,
        )
    return {
        k: v
        for k, v in raw.items()
        if k in CLIENT_CONFIG or k in SSL_KEYS or k in _SASL_CLIENT_KEYS
    }


def _client_security(config: dict[str, str], protocol: str) -> ClientSecurity:
    """The TLS context and SASL login ``security.protocol`` asks for; ConfigError names
    the key of a problem."""
    tls = None
    if protocol in ("SSL", "SASL_SSL"):
        tls = client_context({k: v for k, v in config.items() if k in SSL_KEYS})
    credentials = None
    if protocol.startswith("SASL_"):
        credentials = sasl_client_credentials(config)
    return ClientSecurity(tls, credentials)


def client_settings(
    flag: str | None,
    command_config: str | None,
    *,
    kind: Kind,
    client_id: str,
) -> ClientSettings:
    """The settings of one command: the addresses from the flag, else from the file's
    ``bootstrap.servers`` (``bootstrap.controllers`` for the quorum commands), and the
    file's client id and timeouts over the command's defaults. The flag wins over the
    file, as in Kafka's tools."""
    option = "--bootstrap-server" if kind == "broker" else "--bootstrap-controller"
    key = BOOTSTRAP_SERVERS if kind == "broker" else BOOTSTRAP_CONTROLLERS
    config = read_command_config(command_config) if command_config is not None else {}
    typed, _ = CLIENT_CONFIG.parse({k: v for k, v in config.items() if k in CLIENT_CONFIG})
    try:
        security = _client_security(config, str(typed[SECURITY_PROTOCOL]).strip().upper())
    except ConfigError as e:
        hint = f"--command-config {command_config}"
        raise click.BadParameter(str(e), param_hint=hint) from None
    if flag is not None:
        addresses = parse_addresses(flag, option)
    elif typed[key]:
        addresses = parse_addresses(config[key], f"{key} in {command_config}")
    else:
        raise click.UsageError(f"give {option} HOST:PORT,... (or {key} in --command-config)")
    timeout_ms = typed[REQUEST_TIMEOUT_MS]
    connect_ms = typed[CONNECTION_SETUP_TIMEOUT_MS]
    named = typed[CLIENT_ID]
    return ClientSettings(
        addresses=addresses,
        client_id=named if isinstance(named, str) and named else client_id,
        request_timeout_s=timeout_ms / 1000 if isinstance(timeout_ms, int) else None,
        connect_timeout_s=connect_ms / 1000 if isinstance(connect_ms, int) else CONNECT_TIMEOUT_S,
        security=security,
    )


def bootstrap_server_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--bootstrap-server",
        default=None,
        metavar="HOST:PORT,...",
        help="Brokers to ask, tried in turn (or bootstrap.servers in --command-config).",
    )(f)


def bootstrap_controller_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--bootstrap-controller",
        default=None,
        metavar="HOST:PORT,...",
        help="Controllers to ask, tried in turn (or bootstrap.controllers in --command-config).",
    )(f)


def command_config_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--command-config",
        type=click.Path(exists=True, dir_okay=False),
        default=None,
        metavar="FILE",
        help="Client properties (bootstrap.servers, client.id, request.timeout.ms, ...).",
    )(f)


# ---------------------------------------------------------------------------------------
# The client
# ---------------------------------------------------------------------------------------


def _why(address: Address, error: BaseException, timeout_s: float) -> str:
    if isinstance(error, TimeoutError):
        return f"{format_address(address)}: no answer in {timeout_s:g} s"
    text = str(error).strip()
    # PeerUnavailable names the address first; an error without words says it was lost.
    if not text or text.endswith(":"):
        return f"{format_address(address)}: connection lost"
    return text


class ClusterClient:
    """Requests to a cluster through its bootstrap addresses, with fail-over.

    Connections belong to one event loop: run each part of a command that talks to the
    cluster through :meth:`run`, which closes them at its end. What the client has
    learnt (which address answered, the nodes the cluster lists) stays for the next
    part.
    """

    def __init__(self, settings: ClientSettings, kind: Kind = "broker") -> None:
        self.settings = settings
        self.kind = kind
        self.current: Address | None = None
        """The address that answered last, tried first."""
        self.resent = False
        """Whether the last :meth:`request` was sent again after an attempt that failed
        (an answer that says "already done" may then be the first attempt's doing)."""
        self._learnt: tuple[Address, ...] = ()
        self._peers: dict[Address, PeerConnection] = {}

    def run(self, work: Callable[[], Awaitable[T]]) -> T:
        """Run ``work()`` in a new event loop and close its connections afterwards."""

        async def main() -> T:
            try:
                return await work()
            finally:
                await self.close()

        # Connections of an earlier loop cannot be used in this one.
        self._peers.clear()
        return asyncio.run(main())

    async def close(self) -> None:
        peers, self._peers = list(self._peers.values()), {}
        for peer in peers:
            await peer.close()

    def timeout(self, default_s: float) -> float:
        """How long to wait for an answer: ``request.timeout.ms`` if set, else ``default_s``."""
        configured = self.settings.request_timeout_s
        return default_s if configured is None else configured

    def candidates(self) -> list[Address]:
        """Where to send a request, in order: the address that answered last, the
        bootstrap addresses, then the nodes the cluster itself listed."""
        first = [self.current] if self.current is not None else []
        return list(dict.fromkeys([*first, *self.settings.addresses, *self._learnt]))

    async def request(
        self,
        body: Body,
        version: int,
        timeout_s: float,
        *,
        at_most_once: str | None = None,
    ) -> Any:
        """Send ``body`` to the first address that answers, and return the answer.

        ``timeout_s`` is the command's default wait (``request.timeout.ms`` wins). A
        request that may be repeated goes to the next address when one does not answer.
        With ``at_most_once`` (what may have happened if the answer is lost) it is sent
        once, on a connection that has answered before, and a lost answer is reported
        with that text.
        """
        if at_most_once is not None:
            if self.current is None or self.current not in self._peers:
                # Find an address that answers, with a request that may be repeated, so
                # that the one that may not goes on a connection known to work.
                await self.request(self._probe(), self._probe_version(), timeout_s)
            assert self.current is not None
            return await self.request_to(
                self.current, body, version, timeout_s, at_most_once=at_most_once
            )
        wait_s = self.timeout(timeout_s)
        failures: list[str] = []
        lost = self.current
        self.resent = False
        for address in self.candidates():
            try:
                response = await self._attempt(address, body, version, wait_s)
            except (PeerUnavailable, TimeoutError) as e:
                failures.append(_why(address, e, wait_s))
                self.resent = True
                if address == self.current:
                    self.current = None
                continue
            self.current = address
            if len(failures) and lost is not None:
                click.echo(
                    f"lost the connection to {format_address(lost)}; "
                    f"carrying on through {format_address(address)}",
                    err=True,
                )
            return response
        tried = "; ".join(failures)
        if lost is not None:
            raise ConnectionFailed(
                f"lost the connection to {format_address(lost)} and no other "
                f"{self.kind} answered ({tried})"
            )
        raise ConnectionFailed(f"cannot reach any {self.kind} ({tried})")

    async def request_to(
        self,
        address: Address,
        body: Body,
        version: int,
        timeout_s: float,
        *,
        at_most_once: str | None = None,
    ) -> Any:
        """Send ``body`` to this one node (a leader, the node whose own view is wanted).

        With ``at_most_once``, a connection to the node that has not answered yet is
        opened with a request that may be repeated, so that a failure to connect is told
        apart from a lost answer.
        """
        wait_s = self.timeout(timeout_s)
        if at_most_once is not None and address not in self._peers:
            await self.request_to(address, self._probe(), self._probe_version(), timeout_s)
        try:
            return await self._attempt(address, body, version, wait_s)
        except (PeerUnavailable, TimeoutError) as e:
            if address == self.current:
                self.current = None
            if at_most_once is not None:
                raise ConnectionFailed(
                    f"lost the connection to {format_address(address)} before it answered "
                    f"({_why(address, e, wait_s)}): {at_most_once}"
                ) from None
            raise ConnectionFailed(f"{self.kind} {_why(address, e, wait_s)}") from None

    async def _attempt(self, address: Address, body: Body, version: int, wait_s: float) -> Any:
        peer = self._peers.get(address)
        if peer is None:
            peer = PeerConnection(
                *address,
                client_id=self.settings.client_id,
                connect_timeout_s=self.settings.connect_timeout_s,
                security=self.settings.security,
            )
            self._peers[address] = peer
        try:
            # The deadline is kept here: PeerConnection turns its own timeout into a
            # PeerUnavailable with no message (TimeoutError is an OSError), and the
            # operator should read "no answer in N s". Its own deadline, later, never
            # fires first.
            async with asyncio.timeout(wait_s):
                response = await peer.request(body, version, wait_s + 1)
        except (PeerUnavailable, TimeoutError):
            # A connection that failed once is not trusted again: the next request to
            # this address opens a new one (and an at-most-once request probes it first).
            del self._peers[address]
            await peer.close()
            raise
        self._learn(response)
        return response

    def _learn(self, response: Any) -> None:
        """Remember the nodes an answer lists, to fail over to when the connection is
        lost: Kafka's clients, too, use the bootstrap addresses only to find the cluster."""
        if isinstance(response, MetadataResponse) and self.kind == "broker":
            self._learnt = tuple((b.host, b.port) for b in response.brokers)
        elif isinstance(response, DescribeQuorumResponse) and self.kind == "controller":
            self._learnt = tuple(
                (n.listeners[0].host, n.listeners[0].port) for n in response.nodes if n.listeners
            )

    def _probe(self) -> Body:
        if self.kind == "broker":
            # No topics: only the brokers, which is also what fail-over needs.
            return MetadataRequest(topics=[], allow_auto_topic_creation=False)
        return describe_quorum_request()

    def _probe_version(self) -> int:
        return METADATA_VERSION if self.kind == "broker" else DESCRIBE_QUORUM_VERSION


def describe_quorum_request() -> DescribeQuorumRequest:
    return DescribeQuorumRequest(
        topics=[
            dqr.TopicData(
                topic_name=METADATA_TOPIC,
                partitions=[dqr.PartitionData(partition_index=METADATA_PARTITION)],
            )
        ]
    )


def connect(
    flag: str | None, command_config: str | None, *, kind: Kind = "broker", client_id: str
) -> ClusterClient:
    """The client of one command, from its flag and ``--command-config``."""
    return ClusterClient(
        client_settings(flag, command_config, kind=kind, client_id=client_id), kind
    )


def addresses_text(addresses: Sequence[Address]) -> str:
    return ",".join(format_address(a) for a in addresses)
