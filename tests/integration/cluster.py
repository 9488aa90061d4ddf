"""A cluster of combined (broker and controller) node processes for integration tests.

Each node is ``odradek server`` on two loopback ports (PLAINTEXT and CONTROLLER), all
formatted together with ``--initial-controllers``; a node counts as started when it
prints ``bootstrap.servers=`` (registered and unfenced).
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from odradek.cli.ports import free_port
from odradek.core.kafka_uuid import to_kafka_str
from odradek.protocol.api import RequestHeader, decode_response, encode_request

T = TypeVar("T")

START_TIMEOUT_S = 60.0
CLUSTER_ID = "q2R5VnVhRkqzh1m3qC8n1w"


def odradek(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the ``odradek`` command; with ``check``, fail the test when it fails."""
    result = subprocess.run(
        [sys.executable, "-m", "odradek", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"odradek {' '.join(args)}: {result.stdout}\n{result.stderr}")
    return result


class ServerProcess:
    """One ``odradek server --config DIR/server.properties`` process, its log in
    ``DIR/node.log``. A broker prints ``bootstrap.servers=`` once it serves clients."""

    # Every process of the running test, so that a failure can show their logs.
    created: ClassVar[list[ServerProcess]] = []

    def __init__(self, directory: Path) -> None:
        ServerProcess.created.append(self)
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = self.dir / "server.properties"
        self.process: subprocess.Popen[str] | None = None

    def start(self, wait_for_clients: bool = False) -> None:
        log = open(self.dir / "node.log", "a")  # noqa: SIM115 - closed with the process
        self.process = subprocess.Popen(
            [sys.executable, "-m", "odradek", "server", "--config", str(self.config)],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        if wait_for_clients:
            self.wait_for_clients()

    def wait_for_clients(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if line.startswith("bootstrap.servers="):
                return
            if not line:
                break
        tail = (self.dir / "node.log").read_text()[-3000:]
        raise AssertionError(f"{self.dir.name} did not start:\n{tail}")

    def kill(self) -> None:
        """SIGKILL: no flush, no checkpoint, no controlled shutdown."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)

    def stop(self) -> None:
        """SIGTERM and wait: a clean stop (SIGKILL after 30 s)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(30)


class ClusterNode(ServerProcess):
    def __init__(
        self,
        root: Path,
        node_id: int,
        extra: str,
        roles: str = "broker,controller",
        separate_metadata_dir: bool = False,
        *,
        broker_protocol: str = "PLAINTEXT",
        controller_protocol: str = "PLAINTEXT",
        external_protocol: str | None = None,
    ) -> None:
        """``external_protocol``: a second broker listener, ``EXTERNAL``, for clients
        (the first stays the inter-broker one)."""
        super().__init__(root / f"node-{node_id}")
        self.broker_protocol = broker_protocol
        self.controller_protocol = controller_protocol
        self.external_protocol = external_protocol
        self.external_port = free_port() if external_protocol else 0
        self.node_id = node_id
        self.separate_metadata_dir = separate_metadata_dir
        self.roles = roles
        self.port = free_port()
        self.controller_port = free_port()
        self.directory_id = uuid.uuid4()
        self.extra = extra

    def write_config(self, bootstrap: str) -> None:
        listeners = []
        if "broker" in self.roles:
            listeners.append(f"{self.broker_protocol}://127.0.0.1:{self.port}")
            if self.external_protocol:
                listeners.append(f"EXTERNAL://127.0.0.1:{self.external_port}")
        if (
            self.broker_protocol != "PLAINTEXT"
            or self.controller_protocol != "PLAINTEXT"
            or self.external_protocol
        ):
            # The broker listener is the inter-broker one: followers fetch over it too.
            protocols = (
                f"{self.broker_protocol}:{self.broker_protocol},"
                f"CONTROLLER:{self.controller_protocol}"
            )
            if self.external_protocol:
                protocols += f",EXTERNAL:{self.external_protocol}"
            listeners_extra = (
                f"inter.broker.listener.name={self.broker_protocol}\n"
                f"listener.security.protocol.map={protocols}\n"
            )
        else:
            listeners_extra = ""
        if "controller" in self.roles:
            listeners.append(f"CONTROLLER://127.0.0.1:{self.controller_port}")
        self.config.write_text(
            f"process.roles={self.roles}\n"
            f"node.id={self.node_id}\n"
            f"listeners={','.join(listeners)}\n"
            "controller.listener.names=CONTROLLER\n"
            f"controller.quorum.bootstrap.servers={bootstrap}\n"
            f"log.dirs={self.dir / 'data'}\n"
            + (f"metadata.log.dir={self.dir / 'metadata'}\n" if self.separate_metadata_dir else "")
            + listeners_extra
            # As odradek dev: a group's first members are not waited for (3 s each).
            + "group.initial.rebalance.delay.ms=0\n"
            + self.extra
        )

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    def start(self, wait: bool = True) -> None:
        super().start(wait_for_clients=wait and self.is_broker)

    def wait_started(self) -> None:
        if self.is_broker:  # a controller prints no bootstrap line
            self.wait_for_clients()


class Cluster:
    """``size`` combined nodes; or, with ``controllers``, that many controller-only nodes
    (ids 101, 102, ...) and ``size`` broker-only nodes (ids 1..size)."""

    def __init__(
        self,
        root: Path,
        size: int = 3,
        extra: str = "",
        controllers: int = 0,
        separate_metadata_dir: bool = False,
        broker_protocol: str = "PLAINTEXT",
        controller_protocol: str = "PLAINTEXT",
        format_args: Sequence[str] = (),
        external_protocol: str | None = None,
    ) -> None:
        """``format_args`` go to every node's ``storage format`` (``--add-scram ...``);
        ``external_protocol`` gives the brokers a second listener (see ClusterNode)."""
        if controllers:
            self.controllers = [
                ClusterNode(
                    root,
                    101 + i,
                    extra,
                    "controller",
                    broker_protocol=broker_protocol,
                    controller_protocol=controller_protocol,
                )
                for i in range(controllers)
            ]
            self.nodes = [
                ClusterNode(
                    root,
                    i + 1,
                    extra,
                    "broker",
                    broker_protocol=broker_protocol,
                    controller_protocol=controller_protocol,
                )
                for i in range(size)
            ]
        else:
            self.nodes = [
                ClusterNode(
                    root,
                    i + 1,
                    extra,
                    separate_metadata_dir=separate_metadata_dir,
                    broker_protocol=broker_protocol,
                    controller_protocol=controller_protocol,
                    external_protocol=external_protocol,
                )
                for i in range(size)
            ]
            self.controllers = list(self.nodes)
        everyone = list(dict.fromkeys([*self.controllers, *self.nodes]))
        self.everyone = everyone
        bootstrap = ",".join(f"127.0.0.1:{n.controller_port}" for n in self.controllers)
        initial = ",".join(
            f"{n.node_id}@127.0.0.1:{n.controller_port}:{to_kafka_str(n.directory_id)}"
            for n in self.controllers
        )
        for n in everyone:
            n.write_config(bootstrap)
            flags = ["--initial-controllers", initial] if "controller" in n.roles else []
            odradek(
                "storage", "format", "--config", str(n.config), "--cluster-id", CLUSTER_ID,
                *flags, *format_args,
            )  # fmt: skip

    def start(self) -> None:
        for n in self.everyone:
            n.start(wait=False)
        for n in self.everyone:
            n.wait_started()

    def stop(self) -> None:
        for n in self.everyone:
            n.stop()

    def kill(self) -> None:
        """SIGKILL every node: the end of a test that is not about stopping (a clean
        stop takes seconds per node and is tested on its own)."""
        for n in self.everyone:
            n.kill()

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def controller_leader(self, command_config: Path | None = None) -> int:
        """The active controller's id; ``command_config``: the client properties that
        reach a secured controller listener."""
        import json

        security = ["--command-config", str(command_config)] if command_config else []
        for n in self.controllers:
            if n.process is None or n.process.poll() is not None:
                continue
            out = odradek(
                "quorum", "describe", "--bootstrap-controller",
                f"127.0.0.1:{n.controller_port}", "--json", *security,
            ).stdout  # fmt: skip
            leader: int = json.loads(out)["leader_id"]
            return leader
        raise AssertionError("no node running")


def ask(node: ClusterNode, request: Any, version: int) -> Any:
    """``request`` sent to ``node`` alone, on a connection of its own; the response body.
    A client picks a broker of its own choosing: only this shows what each node holds."""
    api_key: int = type(request).API_KEY
    header = RequestHeader(
        request_api_key=api_key, request_api_version=version, correlation_id=1, client_id="test"
    )
    payload = encode_request(header, request)
    with socket.create_connection(("127.0.0.1", node.port), timeout=30) as conn:
        conn.sendall(struct.pack(">i", len(payload)) + payload)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = conn.recv(65536)
            assert chunk, "the node closed the connection"
            data += chunk
    _, body = decode_response(data[4:], api_key, version)
    return body


def wait_everywhere(
    cluster: Cluster, listing: Callable[[ClusterNode], T], expected: T, timeout_s: float = 15
) -> None:
    """Until every broker's ``listing`` is ``expected``: each node applies the metadata
    log on its own, a moment behind the controller's commit."""
    for node in cluster.nodes:
        deadline = time.monotonic() + timeout_s
        while (seen := listing(node)) != expected:
            assert time.monotonic() < deadline, f"node {node.node_id} lists {seen}"
            time.sleep(0.2)
