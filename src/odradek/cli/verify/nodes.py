"""The node processes of a verify run: format, start, kill, pause, restart, stop.

Each node is an ``odradek server --config`` process in its own process group (a Ctrl-C
reaches only the runner, which then stops everything itself), its stderr in
``node-N/node.log`` of the report folder. A node that ends without being killed here
(it stopped itself, or crashed) is reported once to the set's ``on_exit``, with the
reason it logged, before anything starts it again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO

from odradek.broker.server_config import ServerConfig
from odradek.cli.dev_cluster import SECURE_LISTENER, SecureSettings
from odradek.cli.verify.clocks import node_environment
from odradek.cli.verify.disks import Disks
from odradek.core.kafka_uuid import to_kafka_str
from odradek.shell.format import format_node
from odradek.shell.real_fs import RealFileSystem
from odradek.verify.topology import Node, Topology

START_TIMEOUT_S = 90.0
CLUSTER_ID_PREFIX = "verify"


def odradek(*args: str, timeout_s: float = 30.0) -> subprocess.CompletedProcess[str]:
    """An ``odradek`` subcommand, as an operator would run it."""
    return subprocess.run(
        [sys.executable, "-m", "odradek", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


ExitHandler = Callable[["NodeProcess", int, str], None]
"""Called with the node, its exit status and the reason it logged (or "")."""


class NodeProcess:
    def __init__(self, node: Node, directory: Path, on_exit: ExitHandler | None = None) -> None:
        self.node = node
        self.dir = directory
        self.config = directory / "server.properties"
        self.clock_file: Path | None = None
        """Set when the node runs with a wall clock the nemesis moves (``clocks``)."""
        self.process: subprocess.Popen[bytes] | None = None
        self.paused = False
        self.on_exit = on_exit
        self._out: IO[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._killed = False
        self._exit_noted = False
        self._exit_lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        # The previous process's end is reported before this one replaces it.
        self.check_exit()
        self.stop_files()
        self._out = open(self.dir / "stdout.txt", "wb")  # noqa: SIM115 - closed in stop_files
        self._log = open(self.dir / "node.log", "ab")  # noqa: SIM115
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if self.clock_file is not None:
            env = node_environment(env, self.clock_file)
        with self._exit_lock:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "odradek", "server", "--config", str(self.config)],
                stdin=subprocess.DEVNULL,
                stdout=self._out,
                stderr=self._log,
                env=env,
                process_group=0,
            )
            self._killed = self._exit_noted = False
        self.paused = False

    def check_exit(self) -> None:
        """Report the process's end to ``on_exit`` once, unless this set killed it."""
        with self._exit_lock:
            if self.process is None or self._killed or self._exit_noted:
                return
            status = self.process.poll()
            if status is None:
                return
            self._exit_noted = True
        if self.on_exit is not None:
            self.on_exit(self, status, self.stop_reason())

    def stop_reason(self) -> str:
        """The reason the node logged when it stopped itself (``node N stopped: ...``),
        or "" when it logged none (it crashed)."""
        marker = f"node {self.node.node_id} stopped: "
        try:
            text = (self.dir / "node.log").read_text(errors="replace")[-20000:]
        except OSError:
            return ""
        lines = [line for line in text.splitlines() if marker in line]
        return lines[-1].split(marker, 1)[1].strip() if lines else ""

    def serving(self) -> bool:
        """A broker prints ``bootstrap.servers=`` once it serves; a controller nothing."""
        if not self.node.is_broker:
            return self.running
        try:
            return b"bootstrap.servers=" in (self.dir / "stdout.txt").read_bytes()
        except OSError:
            return False

    def signal(self, signum: int) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signum)

    def kill(self) -> None:
        with self._exit_lock:
            if self.process is not None and self.process.poll() is None:
                self._killed = True
                self.process.send_signal(signal.SIGKILL)
        self.check_exit()  # it had ended by itself before
        if self.process is not None:
            self.process.wait(30)
        self.paused = False

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self.signal(signal.SIGCONT)
        self.paused = False

    def stop_files(self) -> None:
        for f in (self._out, self._log):
            if f is not None:
                f.close()
        self._out = self._log = None


class NodeSet:
    """Every node of the run, formatted in ``root`` (one folder per node)."""

    def __init__(
        self,
        topology: Topology,
        root: Path,
        unsafe: bool,
        *,
        disks: Disks | None = None,
        disk_nodes: frozenset[int] = frozenset(),
        moving_clocks: bool = False,
        on_exit: ExitHandler | None = None,
        security: SecureSettings | None = None,
        controller_config: Path | None = None,
    ) -> None:
        """``disk_nodes`` get their data dir on a disk of ``disks`` (mounted here, before
        they are formatted); with ``moving_clocks`` every node's wall clock can jump.
        With ``security`` every listener is SASL_SSL (``--security sasl_ssl``), the
        controllers formatted with the clients' SCRAM credential, and the quorum
        commands log in with ``controller_config``."""
        self.topology = topology
        self.controller_config = controller_config
        self.procs = {n.node_id: NodeProcess(n, root / n.name, on_exit) for n in topology.nodes}
        self.directory_ids = {n.node_id: to_kafka_str(uuid.uuid4()) for n in topology.controllers}
        cluster_id = to_kafka_str(uuid.uuid4())
        fs = RealFileSystem()
        initial = topology.initial_controllers(self.directory_ids)
        for proc in self.procs.values():
            proc.dir.mkdir(parents=True, exist_ok=True)
            if moving_clocks:
                proc.clock_file = proc.dir / "faketime.rc"
            if proc.node.node_id in disk_nodes:
                if disks is None:
                    raise ValueError("disk_nodes without disks")
                disks.mount(proc.node.node_id, proc.dir / "data")
            text = topology.server_properties(proc.node, str(proc.dir / "data"), unsafe)
            add_scram: tuple[str, ...] = ()
            if security is not None:
                text = secured_properties(text, proc.node, security)
                add_scram = (security.add_scram(),) if proc.node.is_controller else ()
            proc.config.write_text(text)
            config = ServerConfig.load(text)
            format_node(
                fs, config, cluster_id, now_ms=int(time.time() * 1000),
                initial_controllers=initial if proc.node.is_controller else None,
                add_scram=add_scram,
            )  # fmt: skip

    def start_all(self) -> None:
        for proc in self.procs.values():
            proc.start()
        self.wait_serving(list(self.procs))

    def wait_serving(self, node_ids: list[int], timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for node_id in node_ids:
                proc = self.procs[node_id]
                if proc.process is not None and proc.process.poll() is not None:
                    tail = (proc.dir / "node.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"{proc.node.name} exited at start:\n{tail}")
            if all(self.procs[i].serving() for i in node_ids):
                return
            time.sleep(0.2)
        raise RuntimeError(f"nodes {node_ids} did not serve within {timeout_s:.0f} s")

    def check_exits(self) -> None:
        for proc in self.procs.values():
            proc.check_exit()

    def kill_all(self) -> None:
        for proc in self.procs.values():
            proc.kill()
            proc.stop_files()

    def controller_leader(self) -> int | None:
        """The active controller, asked of any controller that answers."""
        for node in self.topology.controllers:
            proc = self.procs[node.node_id]
            if not proc.running or proc.paused:
                continue
            result = odradek(
                "quorum", "describe", "--bootstrap-controller", node.controller_endpoint, "--json",
                *self._login(), timeout_s=15,
            )  # fmt: skip
            if result.returncode == 0:
                leader = json.loads(result.stdout).get("leader_id")
                if isinstance(leader, int) and leader >= 0:
                    return leader
        return None

    def _login(self) -> tuple[str, ...]:
        """The quorum commands' ``--command-config`` on a secured run."""
        config = self.controller_config
        return () if config is None else ("--command-config", str(config))

    def _via(self, avoid: int) -> str:
        """A controller other than ``avoid`` to send a voter change to (it follows the
        request to the leader)."""
        others = [n for n in self.topology.controllers if n.node_id != avoid]
        return others[0].controller_endpoint

    def remove_voter(self, node_id: int) -> str | None:
        """Remove ``node_id`` from the voters; None when done, else the error."""
        result = odradek(
            "quorum", "remove-controller", "--bootstrap-controller",
            self._via(node_id), "--controller-id", str(node_id),
            "--controller-directory-id", self.directory_ids[node_id], *self._login(),
        )  # fmt: skip
        return None if result.returncode == 0 else (result.stderr or result.stdout).strip()

    def add_voter(self, node_id: int) -> str | None:
        result = odradek(
            "quorum", "add-controller", "--bootstrap-controller",
            self._via(node_id), "--config", str(self.procs[node_id].config), *self._login(),
        )  # fmt: skip
        return None if result.returncode == 0 else (result.stderr or result.stdout).strip()


def secured_properties(text: str, node: Node, security: SecureSettings) -> str:
    """``text`` (the topology's ``server.properties`` of ``node``) with its broker
    listener SASL_SSL and the security keys of ``security`` added."""
    plain = f"PLAINTEXT://{node.bootstrap}"
    if node.is_broker:
        if text.count(plain) != 1:
            raise ValueError(f"{node.name}: no {plain} listener to secure in:\n{text}")
        text = text.replace(plain, f"{SECURE_LISTENER}://{node.bootstrap}")
    return text + security.server_properties(node.node_id)
