"""Produce with and without the log cleaner running, and the offsets topic after many
commits, on one real node.

1. **Produce while cleaning**: a compacted topic (``internal.segment.bytes`` of 1 MiB,
   ``min.cleanable.dirty.ratio=0.01``, 1,000 keys) takes ``--seconds`` of librdkafka
   produce (acks=all, 1 KiB values, ``linger.ms=5``) on a node with the cleaner on
   (``log.cleaner.backoff.ms=200``) and on one with ``log.cleaner.enable=false``, in
   alternating runs (``--runs``). Prints MB/s acknowledged and the p50/p99 of the
   delivery latency of each, and how many passes the cleaner committed (from the node's
   log).
2. **Offsets topic**: one group commits ``--commits`` times (synchronous commits of one
   partition, ``offsets.topic.num.partitions=1``, ``offsets.topic.segment.bytes`` of
   1 MiB); prints the bytes of ``__consumer_offsets-0`` on disk once the cleaner has
   settled, against the bytes the commits were (``--commits 0``: not run).

Prints figures, asserts nothing. Run: .venv/bin/python bench/bench_compaction.py
[--seconds S] [--runs R] [--commits N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

if TYPE_CHECKING:
    from tests.integration.cluster import Cluster

ROOT = Path(__file__).resolve().parents[1]


def cluster_class() -> type[Cluster]:
    """The integration tests' ``Cluster`` (the repository root is not on sys.path when
    this runs as a script)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.integration.cluster import Cluster

    return Cluster


def read_topic() -> Callable[[str, str], dict[int, tuple[bytes | None, bytes | None]]]:
    """The integration tests' reader of a partition (kafka-python), as ``cluster_class``."""
    cluster_class()  # puts the repository root on sys.path
    from tests.integration.topic_reads import read_with_kafka_python

    return read_with_kafka_python


def produce_run(root: Path, cleaner: bool, seconds: float) -> tuple[float, float, float, int]:
    """MB/s, p50 ms, p99 ms, committed cleaner passes."""
    settings = "log.cleaner.backoff.ms=200\n" + ("" if cleaner else "log.cleaner.enable=false\n")
    cluster = cluster_class()(root, 1, extra=settings)
    cluster.start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        configs = {
            "cleanup.policy": "compact",
            "internal.segment.bytes": str(1 << 20),
            "min.cleanable.dirty.ratio": "0.01",
        }
        admin.create_topics([NewTopic("table", 1, 1, config=configs)])["table"].result(30)
        latencies: list[float] = []
        acked = 0

        def delivered(error: object, message: object) -> None:
            nonlocal acked
            if error is None:
                acked += 1
                latencies.append(message.latency())  # type: ignore[attr-defined]

        producer = Producer({
            "bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5,
            "queue.buffering.max.messages": 20000,
        })  # fmt: skip
        value = b"v" * 1024
        start = time.monotonic()
        sent = 0
        while time.monotonic() - start < seconds:
            try:
                producer.produce("table", key=b"key-%d" % (sent % 1000), value=value,
                                 on_delivery=delivered)  # fmt: skip
                sent += 1
            except BufferError:
                producer.poll(0.01)
            producer.poll(0)
        producer.flush(60)
        elapsed = time.monotonic() - start
        passes = (root / "node-1" / "node.log").read_text().count("odradek.cleaner cleaned")
        latencies.sort()
        return (
            acked * 1024 / elapsed / 1e6,
            latencies[len(latencies) // 2] * 1000,
            latencies[int(len(latencies) * 0.99)] * 1000,
            passes,
        )
    finally:
        cluster.kill()


def offsets_run(root: Path, commits: int) -> tuple[int, int]:
    """Bytes of __consumer_offsets-0 on disk and the records it holds, once cleaned."""
    settings = (
        "log.cleaner.backoff.ms=200\noffsets.topic.num.partitions=1\n"
        f"offsets.topic.segment.bytes={1 << 20}\n"
    )
    cluster = cluster_class()(root, 1, extra=settings)
    cluster.start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("events", 1, 1)])["events"].result(30)
        consumer = Consumer({
            "bootstrap.servers": cluster.bootstrap, "group.id": "bench",
            "enable.auto.commit": False,
        })  # fmt: skip
        started = time.monotonic()
        for offset in range(1, commits + 1):
            consumer.commit(offsets=[TopicPartition("events", 0, offset)], asynchronous=False)
        print(f"{commits:,} commits in {time.monotonic() - started:.0f} s")
        consumer.close()
        folder = root / "node-1" / "data" / "__consumer_offsets-0"
        time.sleep(5)  # the cleaner's last passes
        return sum(p.stat().st_size for p in folder.glob("*.log")), len(
            read_topic()(cluster.bootstrap, "__consumer_offsets")
        )
    finally:
        cluster.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--commits", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-compaction-") as tmp:
        root = Path(tmp)
        figures: dict[bool, list[tuple[float, float, float, int]]] = {True: [], False: []}
        for run in range(args.runs):
            for cleaner in (True, False):
                figures[cleaner].append(
                    produce_run(root / f"produce-{run}-{cleaner}", cleaner, args.seconds)
                )
        if args.runs > 0:
            print_produce(figures, args.seconds, args.runs)
        if args.commits <= 0:
            return
        size, records = offsets_run(root / "offsets", args.commits)
        print(f"__consumer_offsets-0 after {args.commits:,} commits of one group: "
              f"{size / 1e6:.3f} MB on disk, {records:,} records")  # fmt: skip


def print_produce(
    figures: dict[bool, list[tuple[float, float, float, int]]], seconds: float, runs: int
) -> None:
    print(f"produce, 1 KiB values over 1,000 keys, acks=all, {seconds:.0f} s a run, "
          f"{runs} alternating runs")  # fmt: skip
    for cleaner, label in ((True, "cleaner on "), (False, "cleaner off")):
        each = figures[cleaner]
        print(
            f"  {label}  {statistics.median(r[0] for r in each):6.1f} MB/s  "
            f"p50 {statistics.median(r[1] for r in each):6.1f} ms  "
            f"p99 {statistics.median(r[2] for r in each):6.1f} ms  "
            f"passes {[r[3] for r in each]}"
        )


if __name__ == "__main__":
    main()
