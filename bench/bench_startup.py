"""Start-up of one node after a clean stop and after SIGKILL, as its log grows.

For each case (a number of partitions, a log size, a segment size) the script:

1. formats a single combined node (``tests/integration/cluster.py``'s ``Cluster`` of
   size 1, every key at its default but ``log.segment.bytes``), starts it, creates the
   topic ``bench`` and stops it cleanly. The time from ``Popen`` to the
   ``bootstrap.servers=`` line of this node with an empty topic, after a clean stop and
   after a SIGKILL, is the **baseline** (the process, the metadata quorum, the broker's
   registration: what start-up costs whatever the log);
2. fills the partitions offline through the storage engine (``LogDir.open`` and
   ``PartitionLog.append_as_leader`` on the real filesystem, 16 KiB batches of 1 KiB
   records in the leader epoch the node gave each partition, a producer snapshot at
   every roll as a node writes it, a flush, the checkpoints and a clean close), so that
   the node finds what a clean stop of a node that wrote this log leaves;
3. **clean**: starts the node and times it from ``Popen`` to ``bootstrap.servers=``;
   the node's own line "log dir ... opened ... in N ms" gives the part spent opening the
   log dir, and the bytes it validated then;
4. **SIGKILL**: produces ``--tail-mib`` more with librdkafka (acks=all) and SIGKILLs the
   node at once, before its recovery-point checkpoint (every
   ``log.flush.offset.checkpoint.interval.ms``, 60 s) covers them; then times the next
   start the same way. What lies past the recovery point is about the tail.

Each start is measured ``--runs`` times (the node is stopped cleanly, or the tail
produced and the node killed again, between runs) and the best is printed with the
spread. Prints figures, asserts nothing. Cases: ``--cases P:GiB:SEGMENT_MiB,...``; the
default covers 1 and 1,000 partitions at 0.5, 2 and 8 GiB with 1 GiB segments, and 8 GiB
in 16 MiB segments (512 segments) and, over 1,000 partitions, in 1 MiB segments (8,000
segments), so that the growth with the number of segments shows. It needs the largest
log's size free on the filesystem of ``--dir`` (a temporary directory by default),
which it removes at the end unless ``--keep``.

Run: .venv/bin/python bench/bench_startup.py [--cases 1:0.5:1024,...] [--runs N]
     [--tail-mib M] [--dir D] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol.record_codec import (
    Record,
    encode_batch,
)
from odradek.shell.real_fs import RealFileSystem
from odradek.storage.log import LogConfig
from odradek.storage.log_dir import LogDir

if TYPE_CHECKING:
    from tests.integration.cluster import Cluster, ClusterNode

ROOT = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024
GIB = 1024 * MIB
DEFAULT_CASES = "1:0.5:1024,1:2:1024,1:8:1024,1:8:16,1000:0.5:1024,1000:2:1024,1000:8:1024,1000:8:1"


def load_cluster_class() -> type[Cluster]:
    """The integration tests' ``Cluster``; the repository root is not on sys.path when
    this script runs as ``python bench/bench_startup.py``."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.integration.cluster import Cluster

    return Cluster


@dataclass
class Start:
    seconds: float
    """From ``Popen`` to the ``bootstrap.servers=`` line."""
    node_seconds: float | None
    """From the node's first log line of this start (the interpreter and the imports are
    done by then) to "serving clients"."""
    log_dir_ms: int | None
    validated: int | None
    segments: int | None


def _stamp(line: str) -> float:
    clock = line.split()[1]
    hours, minutes, seconds = clock.replace(",", ".").split(":")
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def timed_start(node: ClusterNode) -> Start:
    """Start the node; the time to its ``bootstrap.servers=`` line, and what it logged."""
    log_path = node.dir / "node.log"
    offset = log_path.stat().st_size if log_path.exists() else 0
    began = time.monotonic()
    node.start()
    seconds = time.monotonic() - began
    text = log_path.read_text()[offset:]
    lines = [line for line in text.splitlines() if line[:2].isdigit()]
    serving = [line for line in lines if "serving clients" in line]
    node_seconds = _stamp(serving[-1]) - _stamp(lines[0]) if serving and lines else None
    found = re.search(
        r"log dir \S+ opened after a [a-z ]+ in (\d+) ms: \d+ partitions, (\d+) segments, "
        r"(\d+) bytes validated",
        text,
    )
    if found is None:
        return Start(seconds, node_seconds, None, None, None)
    return Start(
        seconds, node_seconds, int(found.group(1)), int(found.group(3)), int(found.group(2))
    )


def create_topic(bootstrap: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic("bench", num_partitions=partitions, replication_factor=1)
    for future in admin.create_topics([topic]).values():
        future.result(60)


def wait_hosted(node: ClusterNode, partitions: int, timeout_s: float = 120.0) -> None:
    """Wait until the node has a log for every partition: a node creates the logs of a
    new topic in slices after the controller has created it, and ``fill`` writes only
    into logs that exist."""
    data = node.dir / "data"
    deadline = time.monotonic() + timeout_s
    while len(list(data.glob("bench-*"))) < partitions:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the node hosts fewer than {partitions} partitions")
        time.sleep(0.1)


def fill(node: ClusterNode, partitions: int, total_bytes: int, segment_bytes: int) -> int:
    """Write ``total_bytes`` of 16 KiB batches into the stopped node's partitions, as the
    storage engine writes them; the bytes written."""
    config = LogConfig(segment_bytes=segment_bytes)
    arguments: dict[str, Any] = {
        "cluster_id": None,
        "node_id": node.node_id,
        "config_for": lambda topic: config,
        "now_ms": int(time.time() * 1000),
        "skip": ("__cluster_metadata-0",),
    }
    try:
        log_dir = LogDir.open(
            RealFileSystem(), str(node.dir / "data"), clean_shutdown=True, **arguments
        )
    except TypeError:  # a build before ADR 0016, measured for comparison
        log_dir = LogDir.open(RealFileSystem(), str(node.dir / "data"), **arguments)
    template = bytearray(
        encode_batch(
            [
                Record(offset_delta=i, timestamp=int(time.time() * 1000), value=b"v" * 1000)
                for i in range(16)
            ]
        )
    )
    per_partition = total_bytes // partitions
    written = 0
    for (topic, _), partition_log in sorted(log_dir.logs.items()):
        if topic != "bench":
            continue
        # As a node does: a producer snapshot at each roll (no idempotent producer here).
        stage = getattr(partition_log, "stage_producer_snapshot", None)
        partition_log.producer_snapshot = list
        epoch = max(partition_log.epochs.latest_epoch(), 0)
        size = 0
        while size < per_partition:
            partition_log.append_as_leader(memoryview(bytearray(template)), epoch, 0)
            size += len(template)
        partition_log.flush(0)
        if stage is not None:
            stage(partition_log.log_end_offset)
        written += size
    log_dir.checkpoint()
    log_dir.close()
    return written


def produce_tail(bootstrap: str, partitions: int, tail_bytes: int) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000}
    )
    value = b"t" * 1024
    for i in range(tail_bytes // len(value)):
        while True:
            try:
                producer.produce("bench", value=value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(300)


def kill(node: ClusterNode) -> None:
    assert node.process is not None
    node.process.send_signal(signal.SIGKILL)
    node.process.wait(30)


def spread(values: list[float]) -> str:
    return f"{min(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


def run_case(
    root: Path,
    partitions: int,
    gib: float,
    segment_mib: int,
    runs: int,
    tail_mib: int,
    keep: bool = False,
) -> dict[str, object]:
    cluster_class = load_cluster_class()
    case_dir = Path(tempfile.mkdtemp(prefix=f"startup-{partitions}p-{gib}g-", dir=root))
    try:
        cluster = cluster_class(case_dir, size=1, extra=f"log.segment.bytes={segment_mib * MIB}\n")
        node = cluster.nodes[0]
        node.start()
        create_topic(node.bootstrap, partitions)
        wait_hosted(node, partitions)
        node.stop()
        baseline: list[Start] = []
        baseline_kill: list[Start] = []
        for _ in range(runs):
            baseline.append(timed_start(node))
            kill(node)
            baseline_kill.append(timed_start(node))
            node.stop()
        filling = time.monotonic()
        written = fill(node, partitions, int(gib * GIB), segment_mib * MIB)
        fill_s = time.monotonic() - filling
        subprocess.run(["sync"], check=False)
        clean: list[Start] = []
        for _ in range(runs):
            clean.append(timed_start(node))
            node.stop()
        crash: list[Start] = []
        for _ in range(runs):
            node.start()
            produce_tail(node.bootstrap, partitions, tail_mib * MIB)
            kill(node)
            crash.append(timed_start(node))
            node.stop()
        result: dict[str, object] = {
            "partitions": partitions,
            "log_bytes": written,
            "segment_bytes": segment_mib * MIB,
            "segments": clean[0].segments,
            "fill_s": round(fill_s, 1),
            "baseline_s": [round(s.seconds, 3) for s in baseline],
            "baseline_node_s": [s.node_seconds for s in baseline],
            "baseline_sigkill_s": [round(s.seconds, 3) for s in baseline_kill],
            "baseline_sigkill_node_s": [s.node_seconds for s in baseline_kill],
            "clean_s": [round(s.seconds, 3) for s in clean],
            "clean_node_s": [s.node_seconds for s in clean],
            "clean_log_dir_ms": [s.log_dir_ms for s in clean],
            "clean_validated_bytes": [s.validated for s in clean],
            "sigkill_s": [round(s.seconds, 3) for s in crash],
            "sigkill_node_s": [s.node_seconds for s in crash],
            "sigkill_log_dir_ms": [s.log_dir_ms for s in crash],
            "sigkill_validated_bytes": [s.validated for s in crash],
        }
        print(
            f"{partitions:>5} partitions {written / GIB:5.2f} GiB "
            f"{clean[0].segments or 0:>6} segments: "
            f"empty: clean {spread([s.seconds for s in baseline])} "
            f"(node {min(s.node_seconds or 0 for s in baseline):.2f} s), "
            f"SIGKILL {spread([s.seconds for s in baseline_kill])} "
            f"(node {min(s.node_seconds or 0 for s in baseline_kill):.2f} s); "
            f"filled: clean {spread([s.seconds for s in clean])} "
            f"(node {min(s.node_seconds or 0 for s in clean):.2f} s, "
            f"log dir {min(s.log_dir_ms or 0 for s in clean)} ms, "
            f"{min(s.validated or 0 for s in clean) / MIB:.1f} MiB validated), "
            f"after SIGKILL {spread([s.seconds for s in crash])} "
            f"(node {min(s.node_seconds or 0 for s in crash):.2f} s, "
            f"log dir {min(s.log_dir_ms or 0 for s in crash)} ms, "
            f"{min(s.validated or 0 for s in crash) / MIB:.1f} MiB validated)",
            flush=True,
        )
        return result
    finally:
        from tests.integration.cluster import ServerProcess

        for process in ServerProcess.created:
            process.kill()
        ServerProcess.created.clear()
        if not keep:
            shutil.rmtree(case_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=DEFAULT_CASES, help="P:GiB:SEGMENT_MiB,...")
    parser.add_argument("--runs", type=int, default=3, help="starts measured per figure")
    parser.add_argument("--tail-mib", type=int, default=256, help="produced before SIGKILL")
    parser.add_argument("--dir", default=None, help="where the logs are written")
    parser.add_argument("--json", default=None, help="write every measurement there")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    args = parser.parse_args()
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-startup-"))
    root.mkdir(parents=True, exist_ok=True)
    print(
        f"cpus {os.cpu_count()}, python {sys.version.split()[0]}, load "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}, data in {root} "
        f"({shutil.disk_usage(root).free / GIB:.0f} GiB free), tail {args.tail_mib} MiB",
        flush=True,
    )
    results = []
    try:
        for case in args.cases.split(","):
            partitions, gib, segment_mib = case.split(":")
            case_args = (int(partitions), float(gib), int(segment_mib), args.runs, args.tail_mib)
            results.append(run_case(root, *case_args, keep=args.keep))
    finally:
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
        if not args.keep and not args.dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
