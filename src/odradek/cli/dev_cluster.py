"""``odradek dev --nodes N`` for N >= 2: a local cluster of N node processes.

This module owns three things:

* the plan: each node's ports and ``server.properties`` (combined mode, node ``i`` in
  ``DIR/node-i``, its broker listener on ``P + 2(i-1)`` and its controller listener on
  the next port, every controller in ``controller.quorum.bootstrap.servers``);
* the first run: formatting every node with the whole voter set
  (``--initial-controllers``, KIP-853), as an operator would with ``kafka-storage``;
* the supervision: one ``odradek server --config`` process per node, one combined
  ``bootstrap.servers=`` line once every node serves, and a clean stop of them all on
  Ctrl-C or SIGTERM.

Each node is its own OS process, not a task in this one, so that the cluster behaves
like a real one: a node can be killed, stopped or restarted by itself, and its log
(``DIR/node-i/node.log``) is its own.

With ``--secure`` (:class:`SecureSettings`, which ``odradek verify --security sasl_ssl``
uses too) every listener is SASL_SSL: a CA and one certificate per node made here, PLAIN
for the nodes' own logins (user ``broker``), SCRAM-SHA-512 for clients (user ``admin``,
bootstrapped with ``--add-scram``), the StandardAuthorizer with both as super users, and
the client settings written next to the data.
"""

from __future__ import annotations

import os
import re
import secrets
import selectors
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from types import FrameType
from typing import IO, Final

import click
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from odradek.broker.server_config import ServerConfig
from odradek.cli.certificates import Issued, cn, issue, make_ca
from odradek.cli.ports import free_port
from odradek.core.errors import ConfigError, CorruptLogError
from odradek.core.kafka_uuid import to_kafka_str
from odradek.shell.format import format_node
from odradek.shell.real_fs import RealFileSystem
from odradek.storage.checkpoint import META_PROPERTIES
from odradek.storage.fs import join

START_TIMEOUT_S = 60.0
DEV_SETTINGS: Final = (
    "# As in Kafka's own server.properties for development: a new consumer group's first\n"
    "# members are not waited for (the production default waits 3 s for more to join).\n"
    "group.initial.rebalance.delay.ms=0\n"
)
"""What every ``odradek dev`` node runs with besides the defaults."""
STOP_TIMEOUT_S = 30.0
LOG_TAIL_LINES = 30
_BROKER_LISTENER = "PLAINTEXT"
SECURE_LISTENER = "SASL_SSL"
_CONTROLLER_LISTENER = "CONTROLLER"
_NODE_DIR = re.compile(r"node-(\d+)")
SECURITY_DIR = "security"
CLIENT_PROPERTIES = "client.properties"
CONTROLLER_PROPERTIES = "controller.properties"
LIBRDKAFKA_PROPERTIES = "librdkafka.properties"
NODE_USER = "broker"
ADMIN_USER = "admin"
CLIENT_MECHANISM = "SCRAM-SHA-512"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True)
class SecureSettings:
    """A secured cluster's keys and logins, kept in ``directory``: ``ca.pem`` (and its
    key), ``node-N.pem`` (each node's key and certificate), ``broker.password`` and
    ``admin.password``; read again on a later start, so the certificates and passwords
    stay those the data was formatted with."""

    directory: str
    broker_password: str
    admin_password: str

    @property
    def ca_path(self) -> str:
        return join(self.directory, "ca.pem")

    def keystore_path(self, node_id: int) -> str:
        return join(self.directory, f"node-{node_id}.pem")

    def server_properties(self, node_id: int) -> str:
        """The security keys of node ``node_id``, whose broker listener is named
        :data:`SECURE_LISTENER` and controller listener ``CONTROLLER``."""
        node_login = f'username="{NODE_USER}" password="{self.broker_password}"'
        broker_users = f'user_{NODE_USER}="{self.broker_password}"'
        # The controller listener takes PLAIN only (SCRAM's credentials are in the
        # metadata log it serves); admin logs in there too, for the quorum commands.
        controller_users = f'{broker_users} user_{ADMIN_USER}="{self.admin_password}"'
        broker = SECURE_LISTENER.lower()
        return (
            f"listener.security.protocol.map={SECURE_LISTENER}:SASL_SSL,"
            f"{_CONTROLLER_LISTENER}:SASL_SSL\n"
            f"inter.broker.listener.name={SECURE_LISTENER}\n"
            f"sasl.enabled.mechanisms=PLAIN,{CLIENT_MECHANISM}\n"
            f"listener.name.{_CONTROLLER_LISTENER.lower()}.sasl.enabled.mechanisms=PLAIN\n"
            "sasl.mechanism.inter.broker.protocol=PLAIN\n"
            "sasl.mechanism.controller.protocol=PLAIN\n"
            f"listener.name.{broker}.plain.sasl.jaas.config={_PLAIN_MODULE} required "
            f"{node_login} {broker_users};\n"
            f"listener.name.{_CONTROLLER_LISTENER.lower()}.plain.sasl.jaas.config="
            f"{_PLAIN_MODULE} required {node_login} {controller_users};\n"
            "ssl.keystore.type=PEM\n"
            f"ssl.keystore.location={self.keystore_path(node_id)}\n"
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.location={self.ca_path}\n"
            f"authorizer.class.name={AUTHORIZER}\n"
            f"super.users=User:{ADMIN_USER};User:{NODE_USER}\n"
        )

    def add_scram(self) -> str:
        """The ``--add-scram`` value that gives clients their login."""
        return f"{CLIENT_MECHANISM}=[name={ADMIN_USER},password={self.admin_password}]"

    def client_properties(self, bootstrap: str | None = None) -> str:
        """For ``--command-config`` (odradek's commands, Kafka's Java tools)."""
        return (
            "# Written by odradek dev --secure (or odradek verify): the admin's login.\n"
            + (f"bootstrap.servers={bootstrap}\n" if bootstrap else "")
            + "security.protocol=SASL_SSL\n"
            f"sasl.mechanism={CLIENT_MECHANISM}\n"
            f'sasl.jaas.config={_SCRAM_MODULE} required username="{ADMIN_USER}" '
            f'password="{self.admin_password}";\n'
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.location={self.ca_path}\n"
        )

    def controller_properties(self, bootstrap_controllers: str | None = None) -> str:
        """For the ``quorum`` commands, which reach the controller listener (PLAIN)."""
        return (
            "# Written by odradek dev --secure (or odradek verify): the admin's login to\n"
            "# the controller listener, for odradek quorum --command-config.\n"
            + (f"bootstrap.controllers={bootstrap_controllers}\n" if bootstrap_controllers else "")
            + "security.protocol=SASL_SSL\n"
            "sasl.mechanism=PLAIN\n"
            f'sasl.jaas.config={_PLAIN_MODULE} required username="{ADMIN_USER}" '
            f'password="{self.admin_password}";\n'
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.location={self.ca_path}\n"
        )

    def librdkafka(self) -> dict[str, str]:
        """The same login in librdkafka's keys (confluent-kafka, kcat ``-F``)."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": CLIENT_MECHANISM,
            "sasl.username": ADMIN_USER,
            "sasl.password": self.admin_password,
            "ssl.ca.location": self.ca_path,
        }


def secure_settings(directory: str, hosts: Mapping[int, tuple[str, ...]]) -> SecureSettings:
    """The settings kept in ``directory``, made (or completed) there first: a CA, a
    certificate for each node naming its ``hosts``, and the two passwords."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    ca_path, ca_key_path = join(directory, "ca.pem"), join(directory, "ca-key.pem")
    if os.path.exists(ca_path) and os.path.exists(ca_key_path):
        ca = _load_issued(ca_path, ca_key_path)
    else:
        ca = make_ca(cn("Odradek dev CA"))
        _write_secret(ca_key_path, ca.key_pem().decode())
        _write_atomically(ca_path, ca.cert_pem.decode())
    settings = SecureSettings(
        directory, _password(join(directory, "broker.password")),
        _password(join(directory, "admin.password")),
    )  # fmt: skip
    for node_id, names in hosts.items():
        path = settings.keystore_path(node_id)
        if not os.path.exists(path):
            node = issue(ca, cn(f"node-{node_id}"), hosts=names)
            _write_secret(path, (node.key_pem() + node.cert_pem).decode())
    return settings


def _load_issued(cert_path: str, key_path: str) -> Issued:
    try:
        with open(cert_path, "rb") as f:
            certificate = x509.load_pem_x509_certificate(f.read())
        with open(key_path, "rb") as f:
            key = serialization.load_pem_private_key(f.read(), password=None)
    except (OSError, ValueError) as e:
        raise ConfigError(f"cannot read the CA in {cert_path} and {key_path}: {e}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ConfigError(f"{key_path}: not an EC private key")
    return Issued(certificate, key)


def _password(path: str) -> str:
    """The password kept in ``path``, or a new random one written there."""
    try:
        with open(path, encoding="utf-8") as f:
            kept = f.read().strip()
    except FileNotFoundError:
        kept = ""
    if kept:
        return kept
    # URL-safe base64: nothing a JAAS value in quotes or --add-scram would misread.
    password = secrets.token_urlsafe(18)
    _write_secret(path, password + "\n")
    return password


def _write_secret(path: str, text: str) -> None:
    temporary = path + ".tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)


def check_security_matches(root: str, secure: bool, formatted: bool) -> None:
    """Refuse to start formatted data with other security than it was made with: a
    cluster formatted without ``--secure`` has no admin credential, one formatted with
    it keeps its listeners' names and logins."""
    made_secure = os.path.exists(join(root, SECURITY_DIR, "admin.password"))
    if formatted and secure and not made_secure:
        raise ConfigError(
            f"{root} was formatted without --secure (no admin credential in its metadata "
            "log); run without --secure or choose another --dir"
        )
    if formatted and not secure and made_secure:
        raise ConfigError(f"{root} was formatted with --secure; run with --secure")


def write_client_files(
    root: str, settings: SecureSettings, bootstrap: str | None, controllers: str | None
) -> list[str]:
    """Write the client settings into ``root``; the lines to print: the librdkafka
    settings as properties (``bootstrap.servers`` follows once the nodes serve)."""
    client = join(root, CLIENT_PROPERTIES)
    controller = join(root, CONTROLLER_PROPERTIES)
    librdkafka = join(root, LIBRDKAFKA_PROPERTIES)
    _write_secret(client, settings.client_properties(bootstrap))
    _write_secret(controller, settings.controller_properties(controllers))
    pairs = settings.librdkafka()
    if bootstrap:
        pairs = {"bootstrap.servers": bootstrap, **pairs}
    _write_secret(librdkafka, "".join(f"{k}={v}\n" for k, v in pairs.items()))
    return [
        "# odradek dev --secure: every listener SASL_SSL; clients log in as "
        f"{ADMIN_USER} ({CLIENT_MECHANISM}).",
        f"# odradek commands and Kafka's Java tools: --command-config {client}",
        f"# odradek quorum commands (controller listener, PLAIN): --command-config {controller}",
        f"# librdkafka (confluent-kafka; kcat -F {librdkafka}):",
        *(f"{k}={v}" for k, v in settings.librdkafka().items()),
    ]


@dataclass(frozen=True)
class NodePlan:
    """Where one node lives and listens."""

    node_id: int
    directory: str  # DIR/node-i: its config, its log and its only log dir
    host: str
    port: int  # the broker (PLAINTEXT, or SASL_SSL with --secure) listener
    controller_port: int  # the CONTROLLER listener, recorded in the quorum's voter set
    broker_listener: str = _BROKER_LISTENER

    @property
    def config_path(self) -> str:
        return join(self.directory, "server.properties")

    @property
    def log_path(self) -> str:
        return join(self.directory, "node.log")

    @property
    def controller_address(self) -> str:
        return _address(self.host, self.controller_port)

    def listeners(self) -> str:
        return (
            f"{self.broker_listener}://{_address(self.host, self.port)},"
            f"{_CONTROLLER_LISTENER}://{self.controller_address}"
        )


@dataclass(frozen=True)
class ClusterPlan:
    nodes: tuple[NodePlan, ...]
    formatted: bool  # every node's dir holds data from an earlier run
    security: SecureSettings | None = None  # --secure

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(_address(n.host, n.port) for n in self.nodes)

    @property
    def bootstrap_controllers(self) -> str:
        return ",".join(n.controller_address for n in self.nodes)

    def server_properties(self, node: NodePlan) -> str:
        """The node's ``server.properties``, the file ``odradek server --config`` takes."""
        bootstrap = ",".join(n.controller_address for n in self.nodes)
        secured = "" if self.security is None else self.security.server_properties(node.node_id)
        return (
            "# Written by odradek dev; odradek server --config takes the same file.\n"
            "process.roles=broker,controller\n"
            f"node.id={node.node_id}\n"
            f"listeners={node.listeners()}\n"
            f"controller.listener.names={_CONTROLLER_LISTENER}\n"
            f"controller.quorum.bootstrap.servers={bootstrap}\n"
            f"log.dirs={node.directory}\n" + DEV_SETTINGS + secured
        )

    def initial_controllers(self) -> str:
        """``--initial-controllers`` for a first format: every node, new directory ids."""
        return ",".join(
            f"{n.node_id}@{n.controller_address}:{to_kafka_str(uuid.uuid4())}" for n in self.nodes
        )


def plan_cluster(
    directory: str,
    nodes: int,
    host: str,
    port: int,
    pick_port: Callable[[str], int] = free_port,
    *,
    secure: bool = False,
) -> ClusterPlan:
    """Plan N nodes in ``directory``; refuse a plan that the data there contradicts.

    With ``port`` 0 the ports come from ``pick_port`` the first time and from each
    node's existing ``server.properties`` afterwards, because the controller ports are
    written into the quorum's voter set when the nodes are formatted and clients cache
    the broker ports: a restart must find everything where it was.
    """
    if nodes < 2:
        raise ValueError(f"a cluster plan needs two nodes or more, not {nodes}")
    root = os.path.abspath(directory)
    node_ids = range(1, nodes + 1)
    broker_listener = SECURE_LISTENER if secure else _BROKER_LISTENER
    existing = {i: _existing_listeners(join(root, f"node-{i}"), broker_listener) for i in node_ids}
    if port:
        if not 0 < port <= 65536 - 2 * nodes:
            last = port + 2 * nodes - 1
            raise ConfigError(f"--port {port}: {nodes} nodes need ports {port} to {last}")
        ports = {i: (port + 2 * (i - 1), port + 2 * (i - 1) + 1) for i in node_ids}
    else:
        ports = {i: (found[1], found[2]) for i, found in existing.items() if found is not None}
        taken = {p for pair in ports.values() for p in pair}
        for i in node_ids:
            if i not in ports:
                broker = _fresh_port(host, taken, pick_port)
                ports[i] = (broker, _fresh_port(host, taken, pick_port))
    plan = tuple(
        NodePlan(i, join(root, f"node-{i}"), host, *ports[i], broker_listener) for i in node_ids
    )
    formatted = _formatted_nodes(root)
    check_security_matches(root, secure, bool(formatted))
    if formatted and formatted != set(node_ids):
        listed = ", ".join(f"node-{i}" for i in sorted(formatted))
        raise ConfigError(
            f"{root} holds the data of a different cluster ({listed}); run with "
            f"--nodes {len(formatted)} or choose another --dir"
        )
    for node in plan if formatted else ():
        found = existing[node.node_id]
        if found is not None and found != (node.host, node.port, node.controller_port):
            # The voter set in the metadata log names the old controller addresses; nodes
            # started on new ones would never find each other.
            first = existing[1] or found
            raise ConfigError(
                f"{node.directory} was formatted to listen on {_address(found[0], found[1])} "
                f"and {_address(found[0], found[2])}; run with --host {first[0]} --port "
                f"{first[1]} (or --port 0) to reuse its data, or choose another --dir"
            )
    return ClusterPlan(plan, bool(formatted))


def _existing_listeners(
    node_dir: str, broker_listener: str = _BROKER_LISTENER
) -> tuple[str, int, int] | None:
    """(host, broker port, controller port) from an earlier run's server.properties."""
    path = join(node_dir, "server.properties")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}") from None
    try:
        listeners = {e.listener_name: e for e in ServerConfig.load(text).listeners}
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}; fix or delete it") from None
    broker = listeners.get(broker_listener)
    controller = listeners.get(_CONTROLLER_LISTENER)
    if broker is None or controller is None or not broker.port or not controller.port:
        return None  # not one of ours: plan this node afresh
    return (broker.host or "", broker.port, controller.port)


def _fresh_port(host: str, taken: set[int], pick_port: Callable[[str], int]) -> int:
    # Each picked port is released before the next pick, so the OS may hand one out
    # twice; a port recorded for another node is free now too, but not ours to take.
    while (chosen := pick_port(host)) in taken:
        pass
    taken.add(chosen)
    return chosen


def _formatted_nodes(root: str) -> set[int]:
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return set()
    return {
        int(match.group(1))
        for name in names
        if (match := _NODE_DIR.fullmatch(name))
        and os.path.exists(join(root, name, META_PROPERTIES))
    }


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def prepare(plan: ClusterPlan, add_scram: Sequence[str] = ()) -> None:
    """Write every node's server.properties and, the first time, format every node
    (with the ``--add-scram`` credentials, which only a first format writes)."""
    fs = RealFileSystem()
    configs: list[ServerConfig] = []
    # Every config is checked before anything is written, so a bad --host leaves no
    # half-formatted cluster behind.
    for node in plan.nodes:
        configs.append(ServerConfig.load(plan.server_properties(node)))
    # A secured node's file holds passwords: only its owner reads it.
    write = _write_atomically if plan.security is None else _write_secret
    for node in plan.nodes:
        fs.makedirs(node.directory)
        write(node.config_path, plan.server_properties(node))
    if plan.formatted:
        return
    cluster_id = to_kafka_str(uuid.uuid4())
    initial = plan.initial_controllers()
    now_ms = int(time.time() * 1000)
    for config in configs:
        lines = format_node(
            fs, config, cluster_id, initial_controllers=initial, add_scram=add_scram, now_ms=now_ms
        )
        for line in lines:
            click.echo(line, err=True)


def _write_atomically(path: str, text: str) -> None:
    # The file is the only record of ports picked with --port 0; a torn write would
    # lose them, and with them the way back to the data.
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)


class _NodeProcess:
    """One running node: its process, its log file and what it printed on stdout."""

    def __init__(self, plan: NodePlan) -> None:
        self.plan = plan
        self.bootstrap: str | None = None
        self._buffer = b""
        self._log: IO[str] = open(plan.log_path, "a", encoding="utf-8")  # noqa: SIM115
        self._log.write(f"--- odradek dev starts node {plan.node_id} at {time.ctime()}\n")
        self._log.flush()
        self._log_start = self._log.tell()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "odradek", "server", "--config", plan.config_path],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            # Its own process group: a Ctrl-C in the terminal reaches only this launcher,
            # which stops the nodes itself, rather than racing them into half-started
            # states with a SIGINT each.
            process_group=0,
        )

    @property
    def stdout(self) -> IO[bytes]:
        assert self.process.stdout is not None
        return self.process.stdout

    def take(self, chunk: bytes) -> None:
        """Read what the node printed; its first ``bootstrap.servers=`` line says it serves."""
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for raw in lines:
            line = raw.decode(errors="replace").strip()
            if line.startswith("bootstrap.servers=") and self.bootstrap is None:
                self.bootstrap = line.split("=", 1)[1]
            elif line:
                click.echo(f"node {self.plan.node_id}: {line}", err=True)

    def log_tail(self) -> str:
        """The end of what this node logged in this run."""
        self._log.flush()
        try:
            with open(self.plan.log_path, encoding="utf-8", errors="replace") as f:
                f.seek(self._log_start)
                lines = f.read().splitlines()
        except OSError as e:
            return f"(cannot read {self.plan.log_path}: {e.strerror})"
        tail = "\n".join(lines[-LOG_TAIL_LINES:])
        return f"--- last lines of {self.plan.log_path}:\n{tail or '(empty)'}"

    def close(self) -> None:
        self.stdout.close()
        self._log.close()


class _StopRequested:
    """SIGINT and SIGTERM to this launcher: remember them, stop the nodes in order."""

    def __init__(self) -> None:
        self.signal: int | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.signal = signum


@contextmanager
def _stop_on_signals() -> Iterator[_StopRequested]:
    stop = _StopRequested()
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class _NodeFailed(Exception):
    def __init__(self, message: str, nodes: list[_NodeProcess]) -> None:
        super().__init__(message)
        self.nodes = nodes


def certificate_hosts(host: str) -> tuple[str, ...]:
    """The names a dev node's certificate gives: its host, and loopback's."""
    # certificates.issue takes an IPv4 address or a DNS name; an IPv6 --host is left
    # out (clients checking the name then fail: use --host 127.0.0.1 or localhost).
    return tuple(dict.fromkeys(h for h in (host, "localhost", "127.0.0.1") if ":" not in h))


def secure_dev(
    root: str, node_ids: Sequence[int], host: str, add_scram: Sequence[str]
) -> tuple[SecureSettings, tuple[str, ...]]:
    """``--secure``'s keys and logins in ``DIR/security``, and the ``--add-scram``
    values a first format takes: the admin's credential and the user's."""
    names = certificate_hosts(host)
    settings = secure_settings(join(root, SECURITY_DIR), dict.fromkeys(node_ids, names))
    return settings, (settings.add_scram(), *add_scram)


def run_dev_cluster(
    directory: str,
    nodes: int,
    host: str,
    port: int,
    *,
    add_scram: Sequence[str] = (),
    secure: bool = False,
) -> None:
    """Run N nodes until Ctrl-C or SIGTERM; a node that fails stops them all."""
    settings: SecureSettings | None = None
    try:
        plan = plan_cluster(directory, nodes, host, port, secure=secure)
        if secure:
            root = os.path.abspath(directory)
            settings, add_scram = secure_dev(root, [n.node_id for n in plan.nodes], host, add_scram)
            plan = replace(plan, security=settings)
            lines = write_client_files(
                root, settings, plan.bootstrap_servers, plan.bootstrap_controllers
            )
            for line in lines:
                click.echo(line)
            sys.stdout.flush()
        prepare(plan, add_scram)
    except (ConfigError, CorruptLogError) as e:
        raise click.ClickException(str(e)) from None
    with _stop_on_signals() as stop:
        running: list[_NodeProcess] = []
        try:
            for node in plan.nodes:
                running.append(_NodeProcess(node))
                click.echo(f"node {node.node_id}: log in {node.log_path}", err=True)
            _supervise(running, stop)
        except _NodeFailed as e:
            _stop_all(running)
            tails = "\n".join(n.log_tail() for n in e.nodes)
            raise click.ClickException(f"{e}\n{tails}") from None
        finally:
            _stop_all(running)
            for process in running:
                process.close()


def _supervise(running: list[_NodeProcess], stop: _StopRequested) -> None:
    """Wait for every node to serve, announce the cluster, then watch until a signal."""
    with selectors.DefaultSelector() as selector:
        for node in running:
            selector.register(node.stdout, selectors.EVENT_READ, node)
        deadline = time.monotonic() + START_TIMEOUT_S
        while stop.signal is None and any(n.bootstrap is None for n in running):
            _check_alive(running, "before it served")
            if time.monotonic() > deadline:
                late = [n for n in running if n.bootstrap is None]
                names = ", ".join(str(n.plan.node_id) for n in late)
                limit = f"{START_TIMEOUT_S:.0f} s"
                raise _NodeFailed(f"node {names} did not start within {limit}", late)
            _pump(selector, 0.2)
        if stop.signal is not None:
            return
        servers = ",".join(n.bootstrap or "" for n in running)
        click.echo(f"bootstrap.servers={servers}")
        sys.stdout.flush()
        while stop.signal is None:
            _check_alive(running, "")
            _pump(selector, 0.5)


def _check_alive(running: list[_NodeProcess], when: str) -> None:
    for node in running:
        status = node.process.poll()
        if status is not None:
            how = f"exited with status {status}" if status >= 0 else f"died of signal {-status}"
            raise _NodeFailed(f"node {node.plan.node_id} {how} {when}".rstrip(), [node])


def _pump(selector: selectors.BaseSelector, timeout_s: float) -> None:
    """Read what the nodes print; a signal cuts the wait short by at most ``timeout_s``."""
    for key, _ in selector.select(timeout_s):
        node: _NodeProcess = key.data
        chunk = os.read(node.stdout.fileno(), 65536)
        if chunk:
            node.take(chunk)
        else:
            selector.unregister(key.fileobj)  # its stdout closed; poll() sees the exit


def _stop_all(running: list[_NodeProcess]) -> None:
    """SIGTERM every node at once (each stops cleanly), SIGKILL those still up after 30 s."""
    alive = [n for n in running if n.process.poll() is None]
    if not alive:
        return
    click.echo(f"stopping {len(alive)} node(s)", err=True)
    for node in alive:
        node.process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for node in alive:
        try:
            status = node.process.wait(max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            node.process.kill()
            node.process.wait()
            click.echo(
                f"node {node.plan.node_id} did not stop within {STOP_TIMEOUT_S:.0f} s; "
                f"killed it (see {node.plan.log_path})",
                err=True,
            )
            continue
        if status != 0:
            # A node signalled before it installed its handlers (still starting) ends at
            # once; it had served nothing yet, but say so.
            how = f"status {status}" if status > 0 else f"signal {-status}, still starting"
            click.echo(
                f"node {node.plan.node_id} stopped with {how} (see {node.plan.log_path})", err=True
            )
