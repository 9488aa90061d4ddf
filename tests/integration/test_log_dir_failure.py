"""A broker whose disk fills up: its log dir goes offline, leadership moves to an
in-sync replica, the failed replica leaves the ISR, `cluster health` names the broker
and the dir, nothing acknowledged is lost, and the partition stays writable.

Three nodes, replication factor 3, node 3's data on a small tmpfs (mounting one needs
root, as `odradek verify` does); an acks=all producer writes until node 3's
disk is full and the node stops itself. Two layouts: the metadata log on its own
healthy disk (the broker reports the dir in a heartbeat, KIP-858), and the metadata log
in the failed dir itself (the node leaves the metadata quorum at once and reports the dir
to whichever controller leads; ADR 0013).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.core.kafka_uuid import to_kafka_str
from odradek.shell.real_fs import RealFileSystem
from odradek.storage.checkpoint import META_PROPERTIES, read_meta_properties
from tests.integration.cluster import Cluster, odradek

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("mount") is None, reason="mounting a tmpfs needs root"
)

TOPIC = "filled"
PARTITIONS = 3
TMPFS_BYTES = 12 * 1024 * 1024
# Far above what filling 12 MiB and moving leadership take; the broker of the bug never
# stopped at all.
FILL_DEADLINE_S = 90.0


def mount_tmpfs(path: Path, size: int) -> None:
    """Put ``path`` (formatted already) on a tmpfs of ``size`` bytes, keeping its files."""
    saved = path.with_name(path.name + ".saved")
    shutil.copytree(path, saved)
    shutil.rmtree(path)
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    shutil.copytree(saved, path, dirs_exist_ok=True)
    shutil.rmtree(saved)


@pytest.fixture(params=["metadata-apart", "metadata-in-the-dir"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path, separate_metadata_dir=request.param == "metadata-apart")
    data = cluster.nodes[2].dir / "data"
    mount_tmpfs(data, TMPFS_BYTES)
    try:
        cluster.start()
        yield cluster
    finally:
        for node in cluster.nodes:
            node.kill()
        subprocess.run(["umount", "-l", str(data)], check=False)


def write_until_node_3_stops(cluster: Cluster) -> dict[int, set[int]]:
    """acks=all writes until node 3 exits; the acknowledged offsets. (Not idempotent:
    librdkafka's idempotent producer may give up with a fatal error when the batches it
    must retry after KAFKA_STORAGE_ERROR cannot be rebuilt as they were; duplicates do not
    matter here, lost acknowledged records do.)"""
    acknowledged: dict[int, set[int]] = {p: set() for p in range(PARTITIONS)}

    def delivered(error: object, message: object) -> None:
        if error is None:
            acknowledged[message.partition()].add(message.offset())  # type: ignore[attr-defined]

    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 30_000,
        }
    )
    node_3 = cluster.nodes[2]
    assert node_3.process is not None
    deadline = time.monotonic() + FILL_DEADLINE_S
    value = b"v" * 1000
    i = 0
    while node_3.process.poll() is None and time.monotonic() < deadline:
        try:
            producer.produce(TOPIC, value, partition=i % PARTITIONS, on_delivery=delivered)
            i += 1
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert node_3.process.poll() == 1, "node 3 did not stop itself after its disk filled"
    return acknowledged


def read_offsets(bootstrap: str, ends: dict[int, int]) -> dict[int, set[int]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in ends])
    seen: dict[int, set[int]] = {p: set() for p in ends}
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and any(len(seen[p]) < ends[p] for p in ends):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen[int(message.partition() or 0)].add(int(message.offset() or 0))
    finally:
        consumer.close()
    return seen


def test_a_full_disk_moves_leadership_and_loses_nothing_acknowledged(cluster: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, replication_factor=3)])[TOPIC].result(30)
    acknowledged = write_until_node_3_stops(cluster)
    assert sum(len(offsets) for offsets in acknowledged.values()) > 0
    log = (cluster.nodes[2].dir / "node.log").read_text()
    assert "No space left on device" in log and "is offline" in log
    assert "node 3 stopped: log dir" in log  # it stopped itself, all the way

    survivors = ",".join(n.bootstrap for n in cluster.nodes[:2])
    health = json.loads(
        odradek("cluster", "health", "--bootstrap-server", cluster.nodes[0].bootstrap,
                "--json", check=False).stdout
    )  # fmt: skip
    directory = read_meta_properties(
        RealFileSystem(), str(cluster.nodes[2].dir / "data" / META_PROPERTIES)
    ).directory_id
    assert {"broker": 3, "directories": [to_kafka_str(directory)]} in health["offline_log_dirs"]
    for p in health["under_replicated_partitions"] + health["under_min_isr_partitions"]:
        assert p["leader"] in (1, 2) and 3 not in p["isr"]
    assert health["offline_partitions"] == []

    # Still writable with the other two (min.insync.replicas=2 of 3).
    producer = Producer({"bootstrap.servers": survivors, "acks": "all"})
    for p in range(PARTITIONS):
        producer.produce(TOPIC, b"after", partition=p)
    assert producer.flush(30) == 0

    # Every acknowledged record reads back.
    ends = {p: max(offsets, default=-1) + 1 for p, offsets in acknowledged.items()}
    seen = read_offsets(survivors, ends)
    for p, offsets in acknowledged.items():
        missing = offsets - seen[p]
        assert not missing, f"partition {p}: {len(missing)} acknowledged records missing"
