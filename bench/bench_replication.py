"""A 3-node cluster with replication factor 3: acks=all throughput, latency, failover, memory.

The cluster is ``tests/integration/cluster.py``'s ``Cluster``: three combined (broker
and controller) ``odradek server`` processes on loopback, formatted together, data in a
fresh temporary directory (removed at the end unless ``--keep``). Every configuration
key keeps its default; the session, election and replica timeouts in force are read back
from a node's configuration and printed. With ``odradek.flush.before.ack=true`` an
``acks=all`` Produce is answered once the leader and the in-sync followers have fsynced
the batch.

Figures, each measurement run ``--runs`` times (every run, the best and the spread):

1. **Produce, acks=all**: a confluent-kafka ``Producer`` (librdkafka; ``linger.ms``,
   ``batch.size``, no compression, no idempotence) sends fixed values of 100 B and 1 KiB
   as fast as it takes them (``produce_batch``, 1,000 records a call, partitions in
   turn) to a fresh topic of 3 partitions, replication factor 3. A warm-up is produced
   and flushed first; then the clock runs from the first record of the measured window
   to the end of its ``flush``. MB/s are 10^6 bytes of record values per second.
2. **Consume**: a ``Consumer`` assigned to every partition from offset 0 reads back the
   topic of load 1 (warm-up included), timed from ``assign`` to the last record.
3. **End-to-end latency** at a fixed rate (10 MB/s of 1 KiB values by default, linger.ms
   5): the producer stamps ``time.monotonic_ns()`` into each value just before
   ``produce``; a consumer thread of this process (``poll``, assigned from offset 0)
   computes now - stamp. Records stamped during the warm-up are not counted. The
   produce -> acknowledgement time (librdkafka's ``Message.latency()``) is shown too.
4. **Failover**: a producer sends acks=all at a modest rate (500 records/s of 1 KiB) to
   a topic of 1 partition, replication factor 3, with a delivery report for every
   record. The partition leader (from Metadata) is SIGKILLed; the figures are the time
   from the kill to the first successful delivery report after it, and to the first
   Metadata answer (polled every 50 ms) naming another leader. librdkafka keeps its
   defaults for retries and metadata refresh. The killed node is restarted and the time
   until it is back in the ISR is printed; the next round kills the new leader.
5. **Memory**: resident memory (VmRSS, from /proc) of each node, sampled every 0.5 s
   (peak) and at the end, and VmHWM (a restarted node's counts from its restart).

The CPU of the nodes (and the kernel's share of it), of this process (librdkafka threads
and Python) and of everything else on the machine during each window is printed in
cores: everything shares this machine's cores. The core count, the Python version and
the load average are printed. Prints figures; asserts nothing about time. The default
run takes about 3 minutes and writes a few GB to a temporary directory.

Run: .venv/bin/python bench/bench_replication.py [--quick] [--runs N] [--duration S]
     [--skip produce,latency,failover] [--keep]; see --help.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import platform
import shutil
import signal
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.broker.server_config import ServerConfig

if TYPE_CHECKING:
    from tests.integration.cluster import Cluster, ClusterNode

ROOT = Path(__file__).resolve().parents[1]
KiB = 1024
REPLICATION_FACTOR = 3
NODES = 3
TOPIC_PARTITIONS = 3
_STAMP = struct.Struct(">q")
_CLK_TCK = os.sysconf("SC_CLK_TCK")
TIMEOUT_KEYS = (
    "broker.session.timeout.ms",
    "broker.heartbeat.interval.ms",
    "controller.quorum.election.timeout.ms",
    "controller.quorum.fetch.timeout.ms",
    "controller.quorum.request.timeout.ms",
    "replica.lag.time.max.ms",
    "min.insync.replicas",
    "odradek.flush.before.ack",
)


def load_cluster_class() -> type[Cluster]:
    """The integration tests' ``Cluster``; the repository root is not on sys.path when
    this script runs as ``python bench/bench_replication.py``."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.integration.cluster import Cluster

    return Cluster


# --------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------


def process_cpu_split(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of a process (all its threads), from /proc."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            data = f.read()
    except OSError:
        return 0.0, 0.0
    fields = data[data.rindex(")") + 2 :].split()
    return int(fields[11]) / _CLK_TCK, int(fields[12]) / _CLK_TCK


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads); 0 if gone."""
    return sum(process_cpu_split(pid))


def process_memory_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process in KiB, from /proc; empty if the process is gone."""
    found: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    found[key] = int(value.split()[0])
    except OSError:
        pass
    return found


def live_pid(node: ClusterNode) -> int | None:
    process = node.process
    if process is None or process.poll() is not None:
        return None
    return process.pid


class MemorySampler:
    """Samples every node's VmRSS twice a second and keeps each node's peak."""

    def __init__(self, nodes: Sequence[ClusterNode]) -> None:
        self.nodes = nodes
        self.peak_kib: dict[int, int] = {n.node_id: 0 for n in nodes}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for node in self.nodes:
                pid = live_pid(node)
                if pid is not None:
                    rss = process_memory_kib(pid).get("VmRSS", 0)
                    self.peak_kib[node.node_id] = max(self.peak_kib[node.node_id], rss)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def machine_busy_seconds() -> float:
    """CPU time all cores spent busy since boot (everything but idle and iowait)."""
    with open("/proc/stat", encoding="ascii") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / _CLK_TCK


class CpuWindow:
    """CPU seconds that each node and this process use between start() and stop()."""

    def __init__(self, nodes: Sequence[ClusterNode]) -> None:
        self.nodes = nodes
        self._pids: dict[int, int] = {}
        self._began: dict[int, float] = {}
        self._sys_began: dict[int, float] = {}
        self.node_sys_share = 0.0
        self.other_cores = 0.0
        self._machine_began = 0.0
        self._self_began = 0.0
        self._wall_began = 0.0
        self.node_cores: dict[int, float] = {}
        self.client_cores = 0.0

    def start(self) -> None:
        self._pids = {n.node_id: pid for n in self.nodes if (pid := live_pid(n)) is not None}
        self._began = {i: process_cpu_seconds(pid) for i, pid in self._pids.items()}
        self._sys_began = {i: process_cpu_split(pid)[1] for i, pid in self._pids.items()}
        self._self_began = time.process_time()
        self._machine_began = machine_busy_seconds()
        self._wall_began = time.perf_counter()

    def stop(self) -> None:
        wall = max(time.perf_counter() - self._wall_began, 1e-9)
        self.node_cores = {
            i: (process_cpu_seconds(pid) - self._began[i]) / wall for i, pid in self._pids.items()
        }
        self.client_cores = (time.process_time() - self._self_began) / wall
        used = sum(self.node_cores.values()) * wall
        system = sum(process_cpu_split(p)[1] - self._sys_began[i] for i, p in self._pids.items())
        self.node_sys_share = system / used if used > 0 else 0.0
        machine = (machine_busy_seconds() - self._machine_began) / wall
        self.other_cores = max(0.0, machine - used / wall - self.client_cores)


# --------------------------------------------------------------------------------------
# Topics
# --------------------------------------------------------------------------------------


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


def partition_state(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int]]]:
    """Partition -> (leader, isr) from Metadata; empty if the topic is not there (yet)."""
    metadata = admin_client(bootstrap).list_topics(topic, timeout=10)
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        return {}
    return {p.id: (p.leader, list(p.isrs)) for p in found.partitions.values()}


def wait_for_full_isr(bootstrap: str, topic: str, partitions: int, timeout_s: float) -> float:
    """Seconds until every partition has a leader and an ISR of all replicas."""
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:
        with contextlib.suppress(Exception):
            state = partition_state(bootstrap, topic)
            if len(state) == partitions and all(
                leader >= 0 and len(isr) == REPLICATION_FACTOR for leader, isr in state.values()
            ):
                return time.monotonic() - began
        time.sleep(0.1)
    raise RuntimeError(f"topic {topic}: ISR not whole after {timeout_s:.0f} s")


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = admin_client(bootstrap)
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=REPLICATION_FACTOR)],
        operation_timeout=60,
        request_timeout=120,
    )
    for future in futures.values():
        future.result(120)
    wait_for_full_isr(bootstrap, name, partitions, 60)


def delete_topic(bootstrap: str, name: str) -> None:
    """Delete a topic to free disk; failures are only reported."""
    admin = admin_client(bootstrap)
    for future in admin.delete_topics([name], operation_timeout=30, request_timeout=60).values():
        try:
            future.result(60)
        except Exception as e:
            print(f"  (could not delete topic {name}: {e})", flush=True)


# --------------------------------------------------------------------------------------
# Loads
# --------------------------------------------------------------------------------------


@dataclass
class Throughput:
    records: int = 0
    value_bytes: int = 0
    seconds: float = 0.0
    node_cores: dict[int, float] = field(default_factory=dict)
    node_sys_share: float = 0.0
    client_cores: float = 0.0
    other_cores: float = 0.0
    errors: list[str] = field(default_factory=list)

    @property
    def mb_s(self) -> float:
        return self.value_bytes / 1e6 / self.seconds if self.seconds else 0.0

    @property
    def records_s(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0


def _produce_for(
    producer: Producer,
    topic: str,
    partitions: int,
    value: bytes,
    seconds: float,
    limit: int,
    on_delivery: Callable[[KafkaError | None, Message], None],
) -> int:
    """Produce ``value`` as fast as librdkafka takes it, for ``seconds`` or ``limit``.

    ``produce_batch`` queues 1,000 records per call, to one partition after another:
    half the Python cost per record of ``produce`` (about 0.5 us against 1.1 us here),
    which leaves more of the shared cores to the nodes at 100 B records.
    """
    messages: list[dict[str, object]] = [{"value": value} for _ in range(1000)]
    deadline = time.perf_counter() + seconds
    sent = 0
    partition = 0
    while sent < limit:
        try:
            queued = producer.produce_batch(
                topic, messages, partition=partition, on_delivery=on_delivery
            )
        except BufferError:
            queued = 0
        sent += queued
        partition = (partition + 1) % partitions
        if queued < len(messages):
            # The local queue is full: the records not taken carry an '_error' each.
            for message in messages:
                message.pop("_error", None)
            producer.poll(0.005)
        else:
            producer.poll(0)
        if time.perf_counter() >= deadline:
            break
    return sent


def run_produce(
    bootstrap: str,
    nodes: Sequence[ClusterNode],
    topic: str,
    partitions: int,
    value_bytes: int,
    warmup_s: float,
    duration_s: float,
    max_bytes: int,
    linger_ms: int,
    batch_bytes: int,
) -> Throughput:
    result = Throughput()

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            result.errors.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": linger_ms,
            "batch.size": batch_bytes,
            "compression.type": "none",
            "enable.idempotence": False,
            "queue.buffering.max.kbytes": 262_144,
            "queue.buffering.max.messages": 1_000_000,
            "delivery.report.only.error": True,
            "log_level": 3,
        }
    )
    value = os.urandom(value_bytes)
    limit = max(1, max_bytes // value_bytes)
    _produce_for(producer, topic, partitions, value, warmup_s, limit, on_delivery)
    warm_left = producer.flush(60)
    window = CpuWindow(nodes)
    window.start()
    began = time.perf_counter()
    sent = _produce_for(producer, topic, partitions, value, duration_s, limit, on_delivery)
    left = producer.flush(60)
    result.seconds = time.perf_counter() - began
    window.stop()
    delivered = sent - left - len(result.errors)
    result.records = delivered
    result.value_bytes = delivered * value_bytes
    result.node_cores = window.node_cores
    result.node_sys_share = window.node_sys_share
    result.other_cores = window.other_cores
    result.client_cores = window.client_cores
    if left or warm_left:
        result.errors.append(f"{left + warm_left} records still queued after flush")
    return result


def topic_record_count(bootstrap: str, topic: str, partitions: int) -> int:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-replication-count", "log_level": 3}
    )
    try:
        total = 0
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            total += high - low
        return total
    finally:
        consumer.close()


def run_consume(
    bootstrap: str,
    nodes: Sequence[ClusterNode],
    topic: str,
    partitions: int,
    value_bytes: int,
    timeout_s: float,
) -> Throughput:
    result = Throughput()
    expected = topic_record_count(bootstrap, topic, partitions)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-replication-unused",  # assign() only: no group is joined
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            # librdkafka's default (1000 ms) pauses fetching for a second whenever its
            # local queue is full, which caps small records far below the broker's rate.
            "fetch.queue.backoff.ms": 10,
            "log_level": 3,
        }
    )
    try:
        window = CpuWindow(nodes)
        window.start()
        began = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = began + timeout_s
        got = 0
        while got < expected and time.perf_counter() < deadline:
            for message in consumer.consume(num_messages=10_000, timeout=0.2):
                err = message.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        result.errors.append(str(err))
                else:
                    got += 1
        result.seconds = time.perf_counter() - began
        window.stop()
        result.records = got
        result.value_bytes = got * value_bytes
        result.node_cores = window.node_cores
        result.node_sys_share = window.node_sys_share
        result.other_cores = window.other_cores
        result.client_cores = window.client_cores
        if got < expected:
            result.errors.append(f"time limit: read {got:,} of {expected:,} records")
    finally:
        consumer.close()
    return result


@dataclass
class Latency:
    samples_ms: list[float]
    acked_ms: list[float]
    sent: int
    received: int
    achieved_mb_s: float
    errors: list[str]
    node_cores: dict[int, float]

    def percentile(self, q: float) -> float:
        """End to end: produce() to the consumer's hand."""
        return percentile(self.samples_ms, q)

    def ack_percentile(self, q: float) -> float:
        """produce() to the delivery report (the acks=all answer), librdkafka's figure."""
        return percentile(self.acked_ms, q)


def percentile(samples: Sequence[float], q: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))
    return ordered[index]


def run_latency(
    bootstrap: str,
    nodes: Sequence[ClusterNode],
    topic: str,
    partitions: int,
    rate_mb_s: float,
    value_bytes: int,
    warmup_s: float,
    duration_s: float,
    linger_ms: int,
) -> Latency:
    """Produce at a fixed rate with a stamp in each value; a consumer thread measures."""
    samples: list[float] = []
    errors: list[str] = []
    received = [0]
    measure_from = [1 << 62]  # monotonic ns; set once the warm-up ends
    measure_to = [1 << 62]
    done = threading.Event()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-replication-latency",  # assign() only
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "log_level": 3,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])

    def consume() -> None:
        # poll() returns as soon as one record is there; consume(num_messages=N) would
        # wait for N records or its whole timeout, which adds to every latency.
        while not done.is_set():
            message = consumer.poll(0.05)
            if message is None:
                continue
            now = time.monotonic_ns()
            err = message.error()
            value = message.value()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    errors.append(str(err))
                continue
            if value is None:
                continue
            (stamp,) = _STAMP.unpack_from(value)
            if measure_from[0] <= stamp < measure_to[0]:
                samples.append((now - stamp) / 1e6)
                received[0] += 1

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()

    acked_ms: list[float] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(str(err))
            return
        value = msg.value()
        seconds = msg.latency()
        if value is not None and seconds is not None:
            (stamp,) = _STAMP.unpack_from(value)
            if measure_from[0] <= stamp < measure_to[0]:
                acked_ms.append(seconds * 1000)

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": linger_ms,
            "compression.type": "none",
            "enable.idempotence": False,
            "log_level": 3,
        }
    )
    padding = os.urandom(max(0, value_bytes - _STAMP.size))
    per_second = rate_mb_s * 1e6 / value_bytes
    began = time.monotonic()
    measured_sent = 0
    sent = 0
    measuring = False
    measure_began = began
    window = CpuWindow(nodes)
    try:
        while True:
            now = time.monotonic()
            elapsed = now - began
            if elapsed >= warmup_s + duration_s:
                break
            if not measuring and elapsed >= warmup_s:
                measuring = True
                window.start()
                measure_from[0] = time.monotonic_ns()
                measured_sent = 0
                measure_began = now
            due = int(elapsed * per_second)
            while sent < due:
                producer.produce(
                    topic,
                    value=_STAMP.pack(time.monotonic_ns()) + padding,
                    on_delivery=on_delivery,
                )
                sent += 1
                measured_sent += measuring
            producer.poll(0)
            time.sleep(0.0005)
        measure_to[0] = time.monotonic_ns()
        window.stop()
        achieved = measured_sent * value_bytes / 1e6 / max(time.monotonic() - measure_began, 1e-9)
        producer.flush(30)
        deadline = time.monotonic() + 15
        while received[0] < measured_sent and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        done.set()
        reader.join(timeout=5)
        consumer.close()
    return Latency(
        samples, acked_ms, measured_sent, received[0], achieved, errors, window.node_cores
    )


def watch_leader(
    bootstrap: str,
    topic: str,
    old_leader: int,
    since: float,
    timeout_s: float,
    found: list[float],
) -> None:
    """Poll Metadata (a bootstrap list that names every node) every 50 ms until
    partition 0 of ``topic`` has a leader other than ``old_leader``; note when."""
    admin = admin_client(bootstrap)
    while time.monotonic() - since < timeout_s:
        with contextlib.suppress(Exception):
            metadata = admin.list_topics(topic, timeout=1)
            partition = metadata.topics[topic].partitions[0]
            if partition.leader >= 0 and partition.leader != old_leader:
                found.append(time.monotonic())
                return
        time.sleep(0.05)


@dataclass
class Failover:
    leader_in_metadata_s: float | None
    killed: int
    was_controller_leader: bool
    seconds: float | None
    new_leader: int
    longest_gap_s: float
    failed: int
    rejoin_s: float | None


def run_failover_round(
    cluster: Cluster,
    topic: str,
    rate: float,
    value_bytes: int,
    before_s: float,
    after_s: float,
    timeout_s: float,
) -> Failover:
    """Produce at ``rate`` records/s; SIGKILL the partition leader; time the first ack."""
    bootstrap = cluster.bootstrap
    by_id = {n.node_id: n for n in cluster.nodes}
    leader, _isr = partition_state(bootstrap, topic)[0]
    victim = by_id[leader]
    try:
        controller_leader = cluster.controller_leader()
    except Exception:
        controller_leader = -1
    acks: list[float] = []
    failures: list[str] = []

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        if err is None:
            acks.append(time.monotonic())
        else:
            failures.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 1,
            "enable.idempotence": False,
            "log_level": 2,
        }
    )
    value = os.urandom(value_bytes)
    elected: list[float] = []
    watcher: threading.Thread | None = None
    began = time.monotonic()
    kill_at: float | None = None
    first_after: float | None = None
    sent = 0
    while True:
        now = time.monotonic()
        if kill_at is None and now - began >= before_s:
            producer.poll(0)  # reports for responses already received come before the kill
            pid = live_pid(victim)
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            kill_at = time.monotonic()
            watcher = threading.Thread(
                target=watch_leader,
                args=(bootstrap, topic, victim.node_id, kill_at, timeout_s, elected),
                daemon=True,
            )
            watcher.start()
        if kill_at is not None:
            if first_after is None:
                first_after = next((t for t in acks if t > kill_at), None)
            if first_after is not None and now - first_after >= after_s:
                break
            if now - kill_at >= timeout_s:
                break
        due = int((now - began) * rate)
        while sent < due:
            with contextlib.suppress(BufferError):
                producer.produce(topic, value=value, on_delivery=on_delivery)
            sent += 1
        producer.poll(0.001)
    producer.flush(30)
    if watcher is not None:
        watcher.join(timeout_s)
    assert victim.process is not None
    victim.process.wait(30)
    gaps = [b - a for a, b in itertools.pairwise(acks)]
    state = partition_state(bootstrap, topic)
    new_leader = state[0][0] if state else -1
    # Bring the node back and wait until it is in the ISR again, for the next round.
    restarted = time.monotonic()
    rejoin_s: float | None
    try:
        victim.start(wait=True)
        wait_for_full_isr(bootstrap, topic, 1, 120)
        rejoin_s = time.monotonic() - restarted
    except Exception as e:
        print(f"  (node {victim.node_id} did not rejoin the ISR: {e})", flush=True)
        rejoin_s = None
    return Failover(
        leader_in_metadata_s=elected[0] - kill_at if elected and kill_at is not None else None,
        killed=victim.node_id,
        was_controller_leader=controller_leader == victim.node_id,
        seconds=None if first_after is None or kill_at is None else first_after - kill_at,
        new_leader=new_leader,
        longest_gap_s=max(gaps, default=0.0),
        failed=len(failures),
        rejoin_s=rejoin_s,
    )


# --------------------------------------------------------------------------------------
# Printing
# --------------------------------------------------------------------------------------


def size_label(n: int) -> str:
    return f"{n // KiB} KiB" if n % KiB == 0 else f"{n} B"


def spread_row(label: str, values: Sequence[float], fmt: str, higher_is_better: bool) -> str:
    """One table row: every run, the best run and the spread (max - min) over the best."""
    runs = " / ".join(format(v, fmt) for v in values)
    clean = [v for v in values if v == v]  # drop NaN
    if not clean:
        return f"| {label} | {runs} | - | - |"
    best = max(clean) if higher_is_better else min(clean)
    spread = (max(clean) - min(clean)) / best * 100 if best else 0.0
    return f"| {label} | {runs} | {format(best, fmt)} | {spread:.0f}% |"


def cores_text(t: Throughput) -> str:
    nodes = " ".join(f"n{i}={c:.2f}" for i, c in sorted(t.node_cores.items()))
    return (
        f"cores: nodes {nodes} ({t.node_sys_share:.0%} in the kernel); "
        f"client {t.client_cores:.2f}; everything else on the machine {t.other_cores:.2f}"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="short run: 3 s windows, 1 run each")
    p.add_argument("--runs", type=int, help="runs of each measurement (default 2; quick 1)")
    p.add_argument("--duration", type=float, help="seconds per measured window (10; quick 3)")
    p.add_argument("--warmup", type=float, help="seconds of warm-up (2; quick 1)")
    p.add_argument("--record-sizes", default="100,1024", help="value bytes (100,1024)")
    p.add_argument("--linger-ms", type=int, default=5, help="throughput linger.ms (5)")
    p.add_argument("--batch-bytes", type=int, default=1_000_000, help="batch.size (1000000)")
    p.add_argument("--max-mb", type=float, default=2000.0, help="MB of values per run (2000)")
    p.add_argument("--latency-mb-s", type=float, default=10.0, help="latency rate (10 MB/s)")
    p.add_argument("--latency-linger-ms", type=int, default=5, help="latency linger.ms (5)")
    p.add_argument("--failover-rate", type=float, default=500.0, help="records/s (500)")
    p.add_argument("--failover-rounds", type=int, help="leader kills (default 2; quick 1)")
    p.add_argument("--keep", action="store_true", help="keep the data dir and node logs")
    p.add_argument("--skip", default="", help="comma list of: produce,latency,failover")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a server.properties line for every node (repeatable), to compare settings",
    )
    args = p.parse_args(argv)
    args.runs = args.runs or (1 if args.quick else 2)
    args.duration = args.duration or (3.0 if args.quick else 10.0)
    args.warmup = args.warmup or (1.0 if args.quick else 2.0)
    args.failover_rounds = args.failover_rounds or (1 if args.quick else 2)
    args.sizes = [int(x) for x in args.record_sizes.split(",") if x.strip()]
    args.skip = {x.strip() for x in args.skip.split(",") if x.strip()}
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    cluster_class = load_cluster_class()
    cores = os.cpu_count() or 0
    print("Replication: 3 combined nodes, replication factor 3, acks=all")
    print(
        f"machine: {cores} cores (nodes, librdkafka and this script share them); "
        f"Python {platform.python_version()}; 1-minute load average before the run: "
        f"{os.getloadavg()[0]:.2f}"
    )
    root = Path(tempfile.mkdtemp(prefix="odradek-bench-replication-"))
    rows: list[str] = []
    notes: list[str] = []
    try:
        extra = "".join(f"{line}\n" for line in args.set)
        cluster = cluster_class(root, size=NODES, extra=extra)
        config = ServerConfig.load(cluster.nodes[0].config.read_text())
        shown = {k: config.get(k) for k in TIMEOUT_KEYS}
        if shown.get("min.insync.replicas") is None:
            shown["min.insync.replicas"] = "unset (a majority: 2)"
        label = "configuration (all defaults)" if not args.set else "configuration"
        print(f"{label}: " + ", ".join(f"{k}={v}" for k, v in shown.items()))
        if args.set:
            print("set on every node: " + ", ".join(args.set))
        print(
            f"runs per measurement: {args.runs}; measured window {args.duration:g} s after "
            f"{args.warmup:g} s warm-up; producer linger.ms={args.linger_ms}, "
            f"batch.size={args.batch_bytes}",
            flush=True,
        )
        started = time.monotonic()
        cluster.start()
        print(f"cluster started in {time.monotonic() - started:.1f} s", flush=True)
        sampler = MemorySampler(cluster.nodes)
        sampler.start()
        try:
            if "produce" not in args.skip:
                produce_phase(args, cluster, rows, notes)
            if "latency" not in args.skip:
                latency_phase(args, cluster, rows, notes)
            if "failover" not in args.skip:
                failover_phase(args, cluster, rows, notes)
        finally:
            sampler.stop()
            for node in cluster.nodes:
                pid = live_pid(node)
                memory = process_memory_kib(pid) if pid is not None else {}
                rows.append(
                    f"| node {node.node_id} resident memory MiB: end VmRSS / sampled peak / "
                    f"VmHWM | {memory.get('VmRSS', 0) / 1024:.0f} / "
                    f"{sampler.peak_kib[node.node_id] / 1024:.0f} / "
                    f"{memory.get('VmHWM', 0) / 1024:.0f} | | |"
                )
            cluster.stop()
    finally:
        if args.keep:
            print(f"data and node logs kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print()
    print("| Figure | runs | best | spread |")
    print("|---|---|---|---|")
    for row in rows:
        print(row)
    for note in notes:
        print(note)
    print(f"1-minute load average after the run: {os.getloadavg()[0]:.2f}")


def produce_phase(
    args: argparse.Namespace, cluster: Cluster, rows: list[str], notes: list[str]
) -> None:
    bootstrap = cluster.bootstrap
    for size in args.sizes:
        produced: list[Throughput] = []
        consumed: list[Throughput] = []
        for run in range(args.runs):
            topic = f"bench-rf3-{size}-{run}"
            create_topic(bootstrap, topic, TOPIC_PARTITIONS)
            p = run_produce(
                bootstrap,
                cluster.nodes,
                topic,
                TOPIC_PARTITIONS,
                size,
                args.warmup,
                args.duration,
                int(args.max_mb * 1e6),
                args.linger_ms,
                args.batch_bytes,
            )
            print(
                f"produce {size_label(size)} run {run + 1}: {p.mb_s:.1f} MB/s, "
                f"{p.records_s:,.0f} rec/s over {p.seconds:.1f} s; {cores_text(p)}"
                + (f"; {len(p.errors)} error(s), first: {p.errors[0]}" if p.errors else ""),
                flush=True,
            )
            c = run_consume(bootstrap, cluster.nodes, topic, TOPIC_PARTITIONS, size, 60)
            print(
                f"consume {size_label(size)} run {run + 1}: {c.mb_s:.1f} MB/s, "
                f"{c.records_s:,.0f} rec/s, {c.records:,} records in {c.seconds:.1f} s; "
                f"{cores_text(c)}"
                + (f"; {len(c.errors)} error(s), first: {c.errors[0]}" if c.errors else ""),
                flush=True,
            )
            produced.append(p)
            consumed.append(c)
            delete_topic(bootstrap, topic)
        label = size_label(size)
        rows.append(spread_row(f"produce acks=all {label}, MB/s", [p.mb_s for p in produced],
                               ".1f", True))  # fmt: skip
        rows.append(spread_row(f"produce acks=all {label}, records/s",
                               [p.records_s for p in produced], ",.0f", True))  # fmt: skip
        rows.append(spread_row(f"consume {label}, MB/s", [c.mb_s for c in consumed], ".1f",
                               True))  # fmt: skip
        rows.append(spread_row(f"consume {label}, records/s", [c.records_s for c in consumed],
                               ",.0f", True))  # fmt: skip


def latency_phase(
    args: argparse.Namespace, cluster: Cluster, rows: list[str], notes: list[str]
) -> None:
    bootstrap = cluster.bootstrap
    results: list[Latency] = []
    for run in range(args.runs):
        topic = f"bench-latency-{run}"
        create_topic(bootstrap, topic, TOPIC_PARTITIONS)
        result = run_latency(
            bootstrap,
            cluster.nodes,
            topic,
            TOPIC_PARTITIONS,
            args.latency_mb_s,
            KiB,
            args.warmup,
            args.duration,
            args.latency_linger_ms,
        )
        print(
            f"latency run {run + 1}: {result.achieved_mb_s:.1f} MB/s offered, "
            f"{result.received:,} of {result.sent:,} measured records read; p50 "
            f"{result.percentile(50):.2f} ms, p99 {result.percentile(99):.2f} ms, p99.9 "
            f"{result.percentile(99.9):.2f} ms, max {result.percentile(100):.2f} ms; "
            f"produce -> ack p50 {result.ack_percentile(50):.2f} ms, p99 "
            f"{result.ack_percentile(99):.2f} ms; node cores "
            + " ".join(f"n{i}={c:.2f}" for i, c in sorted(result.node_cores.items()))
            + (f"; {len(result.errors)} error(s): {result.errors[0]}" if result.errors else ""),
            flush=True,
        )
        results.append(result)
        delete_topic(bootstrap, topic)
    rate = f"{args.latency_mb_s:g} MB/s of 1 KiB"
    for q, name in ((50, "p50"), (99, "p99"), (99.9, "p99.9")):
        rows.append(spread_row(f"end-to-end latency {name} at {rate}, ms",
                               [r.percentile(q) for r in results], ".2f", False))  # fmt: skip
    for q, name in ((50, "p50"), (99, "p99")):
        rows.append(spread_row(f"produce -> acks=all answer {name} at {rate}, ms",
                               [r.ack_percentile(q) for r in results], ".2f", False))  # fmt: skip
    notes.append(
        f"Latency: producer linger.ms={args.latency_linger_ms}, acks=all, "
        f"{TOPIC_PARTITIONS} partitions; consumer with librdkafka's fetch defaults, in a "
        "thread of the producing process; stamp taken just before produce()."
    )


def failover_phase(
    args: argparse.Namespace, cluster: Cluster, rows: list[str], notes: list[str]
) -> None:
    bootstrap = cluster.bootstrap
    topic = "bench-failover"
    create_topic(bootstrap, topic, 1)
    rounds: list[Failover] = []
    for round_index in range(args.failover_rounds):
        f = run_failover_round(cluster, topic, args.failover_rate, KiB, 3.0, 1.0, 60.0)
        seconds = "no ack within 60 s" if f.seconds is None else f"{f.seconds:.2f} s"
        elected = "-" if f.leader_in_metadata_s is None else f"{f.leader_in_metadata_s:.2f} s"
        rejoin = "-" if f.rejoin_s is None else f"{f.rejoin_s:.1f} s"
        print(
            f"failover round {round_index + 1}: killed node {f.killed} "
            f"({'also' if f.was_controller_leader else 'not'} the active controller); "
            f"new leader in Metadata after {elected}; first ack after {seconds}; "
            f"new leader {f.new_leader}; longest gap between "
            f"acks {f.longest_gap_s:.2f} s; {f.failed} failed deliveries; restarted node "
            f"back in the ISR after {rejoin}",
            flush=True,
        )
        rounds.append(f)
    rows.append(spread_row("failover: SIGKILL leader -> new leader in Metadata, s",
                           [float("nan") if f.leader_in_metadata_s is None
                            else f.leader_in_metadata_s for f in rounds],
                           ".2f", False))  # fmt: skip
    rows.append(spread_row("failover: SIGKILL leader -> first ack, s",
                           [float("nan") if f.seconds is None else f.seconds for f in rounds],
                           ".2f", False))  # fmt: skip
    both = [str(i + 1) for i, f in enumerate(rounds) if f.was_controller_leader]
    notes.append(
        f"Failover: {args.failover_rate:g} records/s of 1 KiB, acks=all, 1 partition, RF 3, "
        "librdkafka defaults otherwise; rounds where the killed node was also the active "
        f"controller: {', '.join(both) or 'none'}"
    )


if __name__ == "__main__":
    main()
