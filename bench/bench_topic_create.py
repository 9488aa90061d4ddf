"""How long a node stops answering while it creates and deletes a topic of many partitions.

A fresh single node (``python -m odradek dev``, a temporary data dir removed at the end)
is sent one CreateTopics request for a topic of ``--partitions`` partitions, all hosted
on it, then one DeleteTopics request for it. Meanwhile a probe thread sends an
ApiVersions request on its own connection every 5 ms and times each answer: ApiVersions
is answered straight from the event loop, so the longest probe round trip is the
longest time the loop was held by something else.

Printed for each of the two requests: the time until its answer, the time until the
node hosts every partition (each answers ListOffsets) or has removed every partition
directory, and the probe round trips during that window (the longest, the 99th
percentile, how many took over 100 ms); between the two, the same figures for 5 s of
the node idle with the topic, which is the floor: what the node's periodic work over
that many partitions costs by itself. Asserts nothing about time.

Each partition holds three open files (its log segment and two indexes), so a node
needs an open-file limit (``ulimit -n``) of more than three per hosted partition; the
script prints the limit and refuses a count that cannot fit under it.

Run: .venv/bin/python bench/bench_topic_create.py [--partitions 5000] [--keep-log PATH]
(with PYTHONASYNCIODEBUG=1 the node logs every callback that held its loop over 100 ms)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from odradek.protocol.api import RequestHeader, decode_response, encode_request
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    ApiVersionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    ListOffsetsRequest,
)
from odradek.protocol.messages.create_topics_request import CreatableTopic
from odradek.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic

LOOPBACK = "127.0.0.1"
TOPIC = "bench-many-partitions"
START_TIMEOUT_S = 60.0
PHASE_TIMEOUT_S = 600.0
PROBE_INTERVAL_S = 0.005
FILES_PER_PARTITION = 3
FILES_SPARE = 1_000
SLOW_MS = 100.0
IDLE_S = 5.0


@dataclass
class Probe:
    """ApiVersions round trips on one connection, in a thread: (sent at, took ms)."""

    port: int
    samples: list[tuple[float, float]] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(timeout=PHASE_TIMEOUT_S)

    def _run(self) -> None:
        with socket.create_connection((LOOPBACK, self.port)) as sock:
            correlation = 0
            while not self.stopping.is_set():
                correlation += 1
                began = time.monotonic()
                call(sock, ApiVersionsRequest(), 18, 0, correlation)
                self.samples.append((began, (time.monotonic() - began) * 1e3))
                time.sleep(PROBE_INTERVAL_S)

    def window(self, start: float, end: float) -> list[float]:
        return [ms for at, ms in self.samples if start <= at <= end]


def call(sock: socket.socket, body: Any, api_key: int, version: int, correlation: int) -> Any:
    header = RequestHeader(
        request_api_key=api_key,
        request_api_version=version,
        correlation_id=correlation,
        client_id="bench",
    )
    payload = encode_request(header, body)
    sock.sendall(struct.pack(">i", len(payload)) + payload)
    size = struct.unpack(">i", receive(sock, 4))[0]
    _, response = decode_response(receive(sock, size), api_key, version)
    return response


def receive(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("the node closed the connection")
        chunks += chunk
    return bytes(chunks)


def start_node(data_dir: str) -> tuple[subprocess.Popen[bytes], int]:
    log_file = open(os.path.join(data_dir, "node.log"), "wb")  # noqa: SIM115 - the child's
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "odradek", "dev"),
            *("--dir", data_dir, "--host", LOOPBACK, "--port", "0"),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=log_file,
    )
    log_file.close()
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        with contextlib.suppress(ValueError, OSError):
            for raw in iter(process.stdout.readline, b""):
                lines.put(raw.decode("utf-8", "replace").rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            continue
        if line is None:
            break
        if line.startswith("bootstrap.servers="):
            return process, int(line.rsplit(":", 1)[1])
    process.kill()
    raise RuntimeError("the node did not start; see node.log")


def stop_node(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=60)


def hosted(sock: socket.socket, indexes: range, correlation: int) -> bool:
    """Whether every partition of ``indexes`` answers ListOffsets (the node hosts it)."""
    request = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsTopic(
                name=TOPIC,
                partitions=[ListOffsetsPartition(partition_index=i, timestamp=-1) for i in indexes],
            )
        ],
    )
    response = call(sock, request, 2, 7, correlation)
    errors = [p.error_code for t in response.topics for p in t.partitions]
    return len(errors) == len(indexes) and all(e == ErrorCode.NONE for e in errors)


def wait_hosted(sock: socket.socket, partitions: int, start: float) -> None:
    """Until every partition is hosted. The node hosts them in order, so the last one is
    asked about often (a request for all of them is itself long work for the node) and
    all of them once it answers."""
    correlation = 100
    last = range(partitions - 1, partitions)
    while True:
        correlation += 1
        if hosted(sock, last, correlation) and hosted(sock, range(partitions), correlation):
            return
        if time.monotonic() - start > PHASE_TIMEOUT_S:
            sys.exit("the partitions were not all hosted in time")
        time.sleep(0.1)


def partition_dirs(data_dir: str) -> int:
    count = 0
    for root, dirs, _ in os.walk(data_dir):
        count += sum(1 for d in dirs if d.startswith(TOPIC))
        if root != data_dir:
            dirs[:] = []
    return count


def report(label: str, probe: Probe, start: float, answered: float, done: float) -> None:
    rtts = sorted(probe.window(start, done))
    longest = rtts[-1] if rtts else float("nan")
    p99 = rtts[int(len(rtts) * 0.99)] if rtts else float("nan")
    slow = sum(1 for ms in rtts if ms > SLOW_MS)
    print(
        f"{label}: answered after {answered - start:6.2f} s, done after {done - start:6.2f} s; "
        f"probe round trips: {len(rtts)}, longest {longest:8.1f} ms, p99 {p99:7.1f} ms, "
        f"{slow} over {SLOW_MS:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--partitions", type=int, default=5_000)
    parser.add_argument("--keep-log", metavar="PATH", help="copy the node's log there at the end")
    args = parser.parse_args()
    partitions: int = args.partitions
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = partitions * FILES_PER_PARTITION + FILES_SPARE
    print(f"{os.cpu_count()} cores; open-file limit {soft}; {partitions} partitions")
    if soft != resource.RLIM_INFINITY and needed > soft:
        sys.exit(f"{partitions} partitions need an open-file limit of about {needed}")
    data_dir = tempfile.mkdtemp(prefix="odradek-bench-topics-")
    process, port = start_node(data_dir)
    probe = Probe(port)
    try:
        probe.start()
        time.sleep(0.5)
        with socket.create_connection((LOOPBACK, port)) as sock:
            start = time.monotonic()
            created = call(
                sock,
                CreateTopicsRequest(
                    topics=[
                        CreatableTopic(name=TOPIC, num_partitions=partitions, replication_factor=1)
                    ],
                    timeout_ms=int(PHASE_TIMEOUT_S * 1000),
                ),
                19,
                7,
                1,
            )
            answered = time.monotonic()
            error = created.topics[0].error_code
            if error != ErrorCode.NONE:
                sys.exit(f"CreateTopics failed: {ErrorCode(error).name} {created.topics[0]}")
            wait_hosted(sock, partitions, start)
            report("create", probe, start, answered, time.monotonic())
            # The same node doing nothing but hosting them: the floor of the figures.
            start = time.monotonic()
            time.sleep(IDLE_S)
            report("idle  ", probe, start, start, time.monotonic())
            start = time.monotonic()
            deleted = call(
                sock, DeleteTopicsRequest(topic_names=[TOPIC], timeout_ms=60_000), 20, 4, 9
            )
            answered = time.monotonic()
            if deleted.responses[0].error_code != ErrorCode.NONE:
                sys.exit(f"DeleteTopics failed: {deleted.responses[0]}")
            while partition_dirs(data_dir):
                if time.monotonic() - start > PHASE_TIMEOUT_S:
                    sys.exit("the partition directories were not all removed in time")
                time.sleep(0.05)
            report("delete", probe, start, answered, time.monotonic())
    finally:
        probe.stop()
        stop_node(process)
        if args.keep_log:
            shutil.copyfile(os.path.join(data_dir, "node.log"), args.keep_log)
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
