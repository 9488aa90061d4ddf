"""What TLS and SASL on the broker listener cost: librdkafka produce and consume MB/s,
one node on PLAINTEXT, one on SSL and one on SASL_SSL (PLAIN), taking turns in the same
session.

Each round starts a fresh one-node cluster (``odradek server``, broker and controller,
defaults, so ``acks=all`` waits for the fsync) for each listener type, produces
``--mb`` MB of 1 KiB records with confluent-kafka (acks=all, lz4 off, batch.size 1 MiB,
linger 5 ms) to a 4-partition topic, then reads them back with a consumer from the
start. Over TLS the broker cannot use sendfile: fetched records are read into memory
and encrypted on the event loop. The SSL node uses a P-256 certificate from a CA made
for the run; the client checks it, without a client certificate. On SASL_SSL each
connection also logs in with PLAIN once; after that every request passes the
connection's SASL gate (a two-byte look at its API key).

Figures: MB/s of record values, and the broker's CPU during each load in cores. Prints
figures; asserts nothing.

Run: .venv/bin/python bench/bench_tls.py [--rounds 3] [--mb 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli.certificates import cn, issue, make_ca
from odradek.cli.ports import free_port

CLUSTER_ID = "YmVuY2gtdGxzLWNsdXN0ZQ"
RECORD = 1024


def make_pki(root: Path) -> tuple[Path, Path]:
    """A CA and a broker certificate for 127.0.0.1: (broker key+chain PEM, CA PEM)."""
    ca = make_ca(cn("bench CA"), days=30)
    broker = issue(ca, cn("broker"), hosts=("127.0.0.1",), days=30)
    broker_file = root / "broker.pem"
    broker_file.write_bytes(broker.key_pem() + broker.cert_pem)
    ca_file = root / "ca.pem"
    ca_file.write_bytes(ca.cert_pem)
    return broker_file, ca_file


class Node:
    def __init__(self, root: Path, protocol: str, pki: tuple[Path, Path]) -> None:
        self.dir = root / f"node-{uuid.uuid4().hex[:6]}"
        self.dir.mkdir()
        self.port = free_port()
        controller = free_port()
        tls = pki if protocol in ("SSL", "SASL_SSL") else None
        lines = [
            "process.roles=broker,controller",
            "node.id=1",
            f"listeners={protocol}://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{controller}",
            f"listener.security.protocol.map={protocol}:{protocol},CONTROLLER:PLAINTEXT",
            f"inter.broker.listener.name={protocol}",
            "controller.listener.names=CONTROLLER",
            f"controller.quorum.voters=1@127.0.0.1:{controller}",
            f"log.dirs={self.dir / 'data'}",
        ]
        if tls:
            lines += [
                "ssl.keystore.type=PEM",
                f"ssl.keystore.location={tls[0]}",
            ]
        if protocol == "SASL_SSL":
            lines += [
                "sasl.enabled.mechanisms=PLAIN",
                "sasl.mechanism.inter.broker.protocol=PLAIN",
                "listener.name.sasl_ssl.plain.sasl.jaas.config="
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                'username="bench" password="bench-secret" user_bench="bench-secret";',
            ]
        config = self.dir / "server.properties"
        config.write_text("\n".join(lines) + "\n")
        odradek = [sys.executable, "-m", "odradek"]
        subprocess.run(
            [*odradek, "storage", "format", "--config", str(config), "--cluster-id", CLUSTER_ID],
            check=True,
            capture_output=True,
        )
        self.log = open(self.dir / "node.log", "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [*odradek, "server", "--config", str(config)],
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        assert self.process.stdout is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if line.startswith("bootstrap.servers=") or not line:
                break
        self.client: dict[str, str | int | float | bool] = {
            "bootstrap.servers": f"127.0.0.1:{self.port}"
        }
        if tls:
            self.client |= {"security.protocol": protocol, "ssl.ca.location": str(tls[1])}
        if protocol == "SASL_SSL":
            self.client |= {
                "sasl.mechanism": "PLAIN",
                "sasl.username": "bench",
                "sasl.password": "bench-secret",
            }

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.process.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(60)
        self.log.close()


def load(node: Node, megabytes: int) -> tuple[float, float, float, float]:
    """Produce then consume: (produce MB/s, its broker cores, consume MB/s, its cores)."""
    topic = "bench-tls"
    admin = AdminClient(node.client)
    admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)])[topic].result(30)
    count = megabytes * 1_000_000 // RECORD
    value = os.urandom(RECORD)
    producer = Producer({**node.client, "acks": "all", "linger.ms": 5, "batch.size": 1_048_576})
    cpu = node.cpu_seconds()
    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=i % 4)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    produce_s = time.perf_counter() - start
    produce_cpu = node.cpu_seconds() - cpu

    consumer = Consumer({**node.client, "group.id": "bench", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(4)])
    cpu = node.cpu_seconds()
    start = time.perf_counter()
    seen = 0
    while seen < count:
        for message in consumer.consume(10_000, 1.0):
            if message.error() is None:
                seen += 1
    consume_s = time.perf_counter() - start
    consume_cpu = node.cpu_seconds() - cpu
    consumer.close()
    mb = count * RECORD / 1e6
    return mb / produce_s, produce_cpu / produce_s, mb / consume_s, consume_cpu / consume_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mb", type=int, default=200)
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores; {args.mb} MB of {RECORD} B records per load")
    names = ["PLAINTEXT", "SSL", "SASL_SSL"]
    results: dict[str, list[tuple[float, float, float, float]]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory(prefix="bench-tls-") as tmp:
        root = Path(tmp)
        pki = make_pki(root)
        for round_number in range(args.rounds):
            # Each round starts with another protocol, so none always runs first.
            shift = round_number % len(names)
            for name in names[shift:] + names[:shift]:
                node = Node(root, name, pki)
                try:
                    figures = load(node, args.mb)
                finally:
                    node.stop()
                results[name].append(figures)
                print(
                    f"round {round_number + 1} {name:<10} produce {figures[0]:7.1f} MB/s "
                    f"({figures[1]:.2f} cores)  consume {figures[2]:7.1f} MB/s "
                    f"({figures[3]:.2f} cores)",
                    flush=True,
                )
    for name, rows in results.items():
        produce = statistics.median(r[0] for r in rows)
        consume = statistics.median(r[2] for r in rows)
        print(f"median {name:<10} produce {produce:7.1f} MB/s  consume {consume:7.1f} MB/s")

    def ratio(name: str, column: int) -> float:
        median = statistics.median(r[column] for r in results[name])
        return median / statistics.median(r[column] for r in results["PLAINTEXT"])

    for name in names[1:]:
        print(f"{name} / PLAINTEXT: produce {ratio(name, 0):.2f}x, consume {ratio(name, 2):.2f}x")


if __name__ == "__main__":
    main()
