"""Apache Kafka Connect's distributed worker (the Connect 4.x jars) on Odradek: it keeps
its connectors, source offsets and statuses in compacted topics (it refuses topics that
are not compact-only), and a restarted worker finds its connector and resumes from its
committed offset after the cleaner has cleaned its offsets topic."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)

from tests.integration.cluster import Cluster
from tests.integration.test_java_client import JARS
from tests.integration.topic_reads import read_with_kafka_python, read_with_librdkafka

CONNECT_JARS = JARS / "connect"
WORKER = Path(__file__).parent / "java" / "ConnectWorker.java"
GROUP = "connect-test"
TOPIC = "lines"

pytestmark = [
    pytest.mark.clients,
    pytest.mark.skipif(
        shutil.which("java") is None or not list(CONNECT_JARS.glob("connect-runtime-*.jar")),
        reason="Java or Kafka Connect's jars are missing (make java-clients)",
    ),
]


class ConnectWorker:
    """``java/ConnectWorker.java``: a running distributed worker with its connector."""

    def __init__(self, bootstrap: str, source: Path, log: Path, *, put: bool) -> None:
        self.process = subprocess.Popen(
            ["java", "-cp", f"{CONNECT_JARS}/*", str(WORKER), bootstrap, GROUP, str(source),
             TOPIC, *(["put"] if put else [])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log.open("a"), text=True,
        )  # fmt: skip
        assert self.process.stdout is not None
        # The worker gives up by itself (and says so) if its connector does not run.
        for line in self.process.stdout:
            if line.startswith("running"):
                return
            assert not line.startswith("not running"), log.read_text()[-5000:]
        raise AssertionError(f"the worker ended:\n{log.read_text()[-5000:]}")

    def stop(self) -> None:
        """A clean stop: the worker commits its source offsets and leaves its group."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        assert self.process.stdout.read().strip() == "stopped"
        assert self.process.wait(60) == 0

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)


def wait_for_lines(bootstrap: str, count: int) -> list[bytes]:
    deadline = time.monotonic() + 60
    while True:
        read = read_with_librdkafka(bootstrap, TOPIC)[0]
        values = [value for _offset, (_key, value) in sorted(read.items()) if value is not None]
        if len(values) >= count or time.monotonic() > deadline:
            return values
        time.sleep(0.3)


def lines(start: int, end: int) -> str:
    return "".join(f"line-{i}\n" for i in range(start, end))


def expected(start: int, end: int) -> list[bytes]:
    return [f"line-{i}".encode() for i in range(start, end)]


def test_connects_worker_keeps_its_state_in_compacted_topics_across_a_restart(
    tmp_path: Path,
) -> None:
    cluster = Cluster(tmp_path, 1, extra="log.cleaner.backoff.ms=200\n")
    cluster.start()
    source, log = tmp_path / "input.txt", tmp_path / "connect.log"
    source.write_text(lines(0, 100))
    worker = ConnectWorker(cluster.bootstrap, source, log, put=True)
    try:
        assert wait_for_lines(cluster.bootstrap, 100) == expected(0, 100)
        # Connect made its three topics compact-only, as it requires, and we report it.
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        internal = [f"{GROUP}-{kind}" for kind in ("configs", "offsets", "status")]
        described = admin.describe_configs([ConfigResource("topic", t) for t in internal])
        for future in described.values():
            assert future.result(30)["cleanup.policy"].value == "compact"
        # Its offsets topic made to roll small segments, so that the cleaner cleans the
        # source offsets the worker commits every 200 ms while it runs.
        offsets = ConfigResource("topic", f"{GROUP}-offsets", incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in (("internal.segment.bytes", "1024"), ("min.cleanable.dirty.ratio", "0.01"))
        ])  # fmt: skip
        admin.incremental_alter_configs([offsets])[offsets].result(30)
        for chunk in range(100, 300, 10):
            with source.open("a") as f:
                f.write(lines(chunk, chunk + 10))
            time.sleep(0.3)
        assert wait_for_lines(cluster.bootstrap, 300) == expected(0, 300)
        deadline = time.monotonic() + 30
        while 0 in (committed := read_with_kafka_python(cluster.bootstrap, f"{GROUP}-offsets")):
            assert time.monotonic() < deadline, "the offsets topic was not cleaned"
            time.sleep(0.5)
        assert len(committed) < max(committed)  # superseded source offsets are gone
        worker.stop()

        # While the worker is down the file grows; a new worker, told nothing, finds its
        # connector in the config topic and resumes from the last committed offset.
        with source.open("a") as f:
            f.write(lines(300, 400))
        worker = ConnectWorker(cluster.bootstrap, source, log, put=False)
        assert wait_for_lines(cluster.bootstrap, 400) == expected(0, 400)
        worker.stop()
    finally:
        worker.kill()
        cluster.kill()
