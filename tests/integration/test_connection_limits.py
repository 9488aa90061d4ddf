"""Connection and request limits on real node processes: ``max.connections`` refuses the
connections over it and a real client is served again once some close; a slow-loris
client is closed after ``odradek.connections.partial.request.timeout.ms``; many
connections sending large requests at once hold no more than ``queued.max.request.bytes``
in the node; a client flood on the controller listener never keeps a broker out.

The nodes listen on 127.0.0.5 and up, so that their own connections to each other (which
leave from their listener address) come from addresses of their own, and the test's
connections, made from 127.0.0.1, are a client's.
"""

from __future__ import annotations

import contextlib
import resource
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from odradek.cli.ports import free_port
from odradek.core.kafka_uuid import to_kafka_str
from tests.integration.cluster import CLUSTER_ID, ServerProcess, odradek

pytestmark = pytest.mark.clients

NODE_HOST = "127.0.0.5"
FLOOD = 1500
MAX_CONNECTIONS = 1000
PARTIAL_TIMEOUT_MS = 2000


def raise_open_files(wanted: int) -> None:
    """The test holds more sockets than a default soft limit of 1024 allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            pytest.skip(f"needs {wanted} open files; the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


class Node(ServerProcess):
    """One node process on its own loopback address, formatted on creation."""

    def __init__(
        self,
        root: Path,
        node_id: int,
        host: str,
        roles: str,
        bootstrap: str | None = None,
        extra: str = "",
    ) -> None:
        super().__init__(root / f"node-{node_id}")
        self.host = host
        self.port = free_port()
        self.controller_port = free_port()
        listeners = []
        if "broker" in roles:
            listeners.append(f"PLAINTEXT://{host}:{self.port}")
        if "controller" in roles:
            listeners.append(f"CONTROLLER://{host}:{self.controller_port}")
        self.quorum = bootstrap or f"{host}:{self.controller_port}"
        self.is_broker = "broker" in roles
        self.config.write_text(
            f"process.roles={roles}\n"
            f"node.id={node_id}\n"
            f"listeners={','.join(listeners)}\n"
            "controller.listener.names=CONTROLLER\n"
            f"controller.quorum.bootstrap.servers={self.quorum}\n"
            f"log.dirs={self.dir / 'data'}\n"
            "offsets.topic.replication.factor=1\n" + extra
        )
        flags: list[str] = []
        if "controller" in roles:
            directory = to_kafka_str(uuid.uuid4())
            flags = ["--initial-controllers", f"{node_id}@{self.quorum}:{directory}"]
        odradek(
            "storage", "format", "--config", str(self.config), "--cluster-id", CLUSTER_ID, *flags
        )

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    raise_open_files(4 * FLOOD)
    process = Node(
        tmp_path,
        1,
        NODE_HOST,
        "broker,controller",
        extra=(
            f"max.connections={MAX_CONNECTIONS}\n"
            f"odradek.connections.partial.request.timeout.ms={PARTIAL_TIMEOUT_MS}\n"
            # Small enough for a test to fill: 40 connections of 9 MiB would hold 360 MiB.
            "socket.request.max.bytes=10485760\n"
            "queued.max.request.bytes=10485760\n"
        ),
    )
    process.start(wait_for_clients=True)
    yield process
    process.kill()


_API_VERSIONS_V0 = 18


def api_versions(correlation_id: int) -> bytes:
    """An ApiVersions v0 request, framed (header v1 with a null client id, empty body)."""
    payload = struct.pack(">hhih", _API_VERSIONS_V0, 0, correlation_id, -1)
    return struct.pack(">i", len(payload)) + payload


def served(sock: socket.socket, correlation_id: int) -> bool:
    """Whether the node answers an ApiVersions request on ``sock`` (False: it closed)."""
    try:
        sock.sendall(api_versions(correlation_id))
        head = _read_exactly(sock, 8)
    except OSError:
        return False
    if head is None:
        return False
    size, answered_id = struct.unpack(">ii", head)
    rest = _read_exactly(sock, size - 4)
    assert answered_id == correlation_id and rest is not None
    return True


def closed_by_node(sock: socket.socket, timeout_s: float = 60.0) -> bool:
    """Wait for the node to close ``sock``; False if it is still open after the wait."""
    sock.settimeout(timeout_s)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def connect(node: Node, timeout_s: float = 30.0) -> socket.socket:
    return socket.create_connection((node.host, node.port), timeout=timeout_s)


def test_max_connections_refuses_the_excess_and_a_client_is_served_once_some_close(
    node: Node,
) -> None:
    sockets = [connect(node) for _ in range(FLOOD)]
    try:
        answered = [s for i, s in enumerate(sockets) if served(s, i)]
        # Every connection was either served or closed by the node; no more than the
        # limit were served, and the limit was not lower than configured.
        assert len(answered) == MAX_CONNECTIONS

        # While the listener is full, a real client is refused too.
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=3)

        for s in answered[:100]:
            s.close()
        producer = Producer({"bootstrap.servers": node.bootstrap, "acks": "all"})
        producer.produce("after-the-flood", b"served")
        assert producer.flush(30) == 0
        consumer = Consumer(
            {"bootstrap.servers": node.bootstrap, "group.id": "g", "enable.auto.commit": False}
        )
        consumer.assign([TopicPartition("after-the-flood", 0, 0)])
        message = None
        deadline = time.monotonic() + 30
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
        consumer.close()
        assert message is not None and message.error() is None
        assert message.value() == b"served"
        # The connections that stayed open are still served.
        assert all(served(s, 10_000 + i) for i, s in enumerate(answered[100:110]))
    finally:
        for s in sockets:
            s.close()


def test_a_request_that_does_not_complete_within_the_partial_request_timeout_is_closed(
    node: Node,
) -> None:
    quiet = connect(node)  # connected, sends nothing: idle, not a partial request
    answered = connect(node)
    assert served(answered, 1)
    stalled = []
    for _ in range(5):
        s = connect(node)
        s.sendall(struct.pack(">i", 100) + b"x" * 10)  # 10 of the 100 bytes announced
        stalled.append(s)
    # A byte now and then: never idle, yet the request takes far too long to arrive.
    dribbling = connect(node)
    dribbling.sendall(struct.pack(">i", 1000))
    stop = threading.Event()

    def dribble() -> None:
        with contextlib.suppress(OSError):
            while not stop.wait(0.2):
                dribbling.send(b"x")

    thread = threading.Thread(target=dribble, daemon=True)
    thread.start()
    try:
        assert all(closed_by_node(s) for s in stalled)
        assert closed_by_node(dribbling)
        # Opened before them and still open: silence alone is connections.max.idle.ms's.
        assert served(quiet, 2)
        assert served(answered, 3)
    finally:
        stop.set()
        thread.join(5)
        for s in [quiet, answered, dribbling, *stalled]:
            s.close()


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_large_requests_arriving_at_once_hold_no_more_than_the_queued_bytes(node: Node) -> None:
    connections = 40
    announced = 9 * 1024 * 1024  # under socket.request.max.bytes, as a large produce's
    arriving = 8 * 1024 * 1024  # sent of each: the requests stay incomplete, held
    sockets = [connect(node) for _ in range(connections)]
    before = rss_bytes(node.pid)
    sent = [0] * connections
    chunk = b"x" * 65536
    for s in sockets:
        s.setblocking(False)
        s.send(struct.pack(">i", announced))
    # Send until every request has arrived as far as it will, or the node stopped
    # reading (2 s without progress: it waits for its budget, the kernel's buffers full).
    # The node admits two requests at a time and closes each stalled one after the
    # partial-request timeout: a connection it closed is done.
    last_progress = start = time.monotonic()
    while time.monotonic() - last_progress < 2.0 and time.monotonic() - start < 20.0:
        if min(sent) >= arriving:
            break
        for i, s in enumerate(sockets):
            if sent[i] >= arriving:
                continue
            try:
                sent[i] += s.send(chunk[: arriving - sent[i]])
                last_progress = time.monotonic()
            except BlockingIOError:
                pass
            except OSError:
                sent[i] = arriving
    time.sleep(2.0)  # what the kernel still buffers is read by now, where it is read
    grown = rss_bytes(node.pid) - before
    try:
        # Unbounded, the node holds what arrived: 40 x 8 MiB (320 MiB). Bounded, it holds
        # the requests it admitted (two of 9 MiB) plus a read per connection.
        assert grown < 120 * 1024 * 1024, f"node grew by {grown >> 20} MiB"
    finally:
        for s in sockets:
            s.close()
    # The node serves on.
    s = connect(node)
    assert served(s, 1)
    s.close()


def test_a_client_flood_on_the_controller_listener_does_not_keep_a_broker_out(
    tmp_path: Path,
) -> None:
    raise_open_files(4 * FLOOD)
    limit = 50
    controller = Node(
        tmp_path,
        101,
        "127.0.0.5",
        "controller",
        extra=f"listener.name.controller.max.connections={limit}\n",
    )
    broker = Node(tmp_path, 1, "127.0.0.6", "broker", bootstrap=controller.quorum)
    controller.start()
    broker.start(wait_for_clients=True)
    broker.stop()  # registered once: the controller knows its address from now on
    flood: list[socket.socket] = []
    try:
        flood = [
            socket.create_connection(("127.0.0.5", controller.controller_port), timeout=30)
            for _ in range(2 * limit)
        ]
        answered = [s for i, s in enumerate(flood) if served(s, i)]
        assert len(answered) <= limit
        # The stopped broker's own connections may still hold slots while the flood
        # arrives (the controller frees one when it reads the close, later on a loaded
        # machine): take what they free, so the listener is full of clients.
        deadline = time.monotonic() + 30
        while len(answered) < limit and time.monotonic() < deadline:
            address = ("127.0.0.5", controller.controller_port)
            flood.append(socket.create_connection(address, timeout=30))
            if served(flood[-1], len(flood)):
                answered.append(flood[-1])
            else:
                time.sleep(0.1)
        assert len(answered) == limit
        # The listener is full: a client is refused.
        with socket.create_connection(("127.0.0.5", controller.controller_port)) as late:
            assert not served(late, 1)
        # The broker comes back to the full listener: registration, heartbeats and the
        # metadata fetch come from its own address, which the controller knows.
        broker.start(wait_for_clients=True)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        assert 1 in admin.list_topics(timeout=30).brokers
        # And clients are still refused.
        with socket.create_connection(("127.0.0.5", controller.controller_port)) as late:
            assert not served(late, 2)
    finally:
        for s in flood:
            s.close()
        broker.kill()
        controller.kill()
