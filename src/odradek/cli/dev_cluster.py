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
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import IO

import click

from odradek.broker.server_config import ServerConfig
from odradek.cli.ports import free_port
from odradek.core.errors import ConfigError, CorruptLogError
from odradek.core.kafka_uuid import to_kafka_str
from odradek.shell.format import format_node
from odradek.shell.real_fs import RealFileSystem
from odradek.storage.checkpoint import META_PROPERTIES
from odradek.storage.fs import join

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
LOG_TAIL_LINES = 30
_BROKER_LISTENER = "PLAINTEXT"
_CONTROLLER_LISTENER = "CONTROLLER"
_NODE_DIR = re.compile(r"node-(\d+)")


@dataclass(frozen=True)
class NodePlan:
    """Where one node lives and listens."""

    node_id: int
    directory: str  # DIR/node-i: its config, its log and its only log dir
    host: str
    port: int  # the broker (PLAINTEXT) listener
    controller_port: int  # the CONTROLLER listener, recorded in the quorum's voter set

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
            f"{_BROKER_LISTENER}://{_address(self.host, self.port)},"
            f"{_CONTROLLER_LISTENER}://{self.controller_address}"
        )


@dataclass(frozen=True)
class ClusterPlan:
    nodes: tuple[NodePlan, ...]
    formatted: bool  # every node's dir holds data from an earlier run

    def server_properties(self, node: NodePlan) -> str:
        """The node's ``server.properties``, the file ``odradek server --config`` takes."""
        bootstrap = ",".join(n.controller_address for n in self.nodes)
        return (
            "# Written by odradek dev; odradek server --config takes the same file.\n"
            "process.roles=broker,controller\n"
            f"node.id={node.node_id}\n"
            f"listeners={node.listeners()}\n"
            f"controller.listener.names={_CONTROLLER_LISTENER}\n"
            f"controller.quorum.bootstrap.servers={bootstrap}\n"
            f"log.dirs={node.directory}\n"
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
    existing = {i: _existing_listeners(join(root, f"node-{i}")) for i in node_ids}
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
    plan = tuple(NodePlan(i, join(root, f"node-{i}"), host, *ports[i]) for i in node_ids)
    formatted = _formatted_nodes(root)
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


def _existing_listeners(node_dir: str) -> tuple[str, int, int] | None:
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
    broker = listeners.get(_BROKER_LISTENER)
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
    for node in plan.nodes:
        fs.makedirs(node.directory)
        _write_atomically(node.config_path, plan.server_properties(node))
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


def run_dev_cluster(
    directory: str, nodes: int, host: str, port: int, *, add_scram: Sequence[str] = ()
) -> None:
    """Run N nodes until Ctrl-C or SIGTERM; a node that fails stops them all."""
    try:
        plan = plan_cluster(directory, nodes, host, port)
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
