"""Stream processors that keep their state in compacted changelog topics, as their users
run them: quix-streams (a stateful count restored after a restart) and faust-streaming
(a Table that survives a worker restart). Both create their changelog topics with
``cleanup.policy=compact`` and restore from them; the log cleaner cleans them between
the runs, so the restore reads only what cleaning left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as Assigned
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from quixstreams import Application

from tests.integration.cluster import Cluster
from tests.integration.topic_reads import read_with_librdkafka

pytestmark = pytest.mark.clients
ROOT = Path(__file__).resolve().parents[2]

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon"]
# Time rolls make the changelog topics' segments cleanable within a test (Kafka's
# segment.bytes is at least 1 MiB; these logs hold kilobytes).
SETTINGS = "log.cleaner.backoff.ms=200\nlog.roll.ms=300\noffsets.topic.num.partitions=1\n"


def produce_words(bootstrap: str, rounds: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for _ in range(rounds):
        for word in WORDS:
            producer.produce("words", key=word.encode(), value=word.encode())
    assert producer.flush(30) == 0


def records_in(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    """Every record of every partition of ``topic``, read from the start."""
    return [
        r for records in read_with_librdkafka(bootstrap, topic).values() for r in records.values()
    ]


def topic_config(bootstrap: str, topic: str, name: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.describe_configs([ConfigResource("topic", topic)]).values()
    value: str = future.result(30)[name].value
    return value


def wait_cleaned(bootstrap: str, topic: str, at_most: int) -> int:
    """Wait (up to 30 s) until ``topic`` holds at most ``at_most`` records; how many."""
    deadline = time.monotonic() + 30
    held = len(records_in(bootstrap, topic))
    while held > at_most and time.monotonic() < deadline:
        time.sleep(0.5)
        held = len(records_in(bootstrap, topic))
    return held


# --- quix-streams -------------------------------------------------------------------


def quix_counts(bootstrap: str, state_dir: Path, count: int) -> dict[str, int]:
    """Run a quix-streams app counting each word in its state until it has processed
    ``count`` messages; the last count it produced for each word."""
    app = Application(
        broker_address=bootstrap, consumer_group="counter", auto_offset_reset="earliest",
        state_dir=state_dir, loglevel="WARNING", commit_every=5,
    )  # fmt: skip
    words = app.topic("words", key_deserializer="str", value_deserializer="str")

    def count_word(value: str, state: Any) -> dict[str, Any]:
        n = state.get("n", 0) + 1
        state.set("n", n)
        return {"word": value, "n": n}

    app.dataframe(words).apply(count_word, stateful=True)  # the app tracks it
    rows = app.run(count=count, timeout=60)  # runs sdf, which the app tracks
    last: dict[str, int] = {}
    for row in rows:
        last[row["word"]] = row["n"]
    return last


def test_quix_streams_restores_its_counts_from_a_cleaned_changelog(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, 1, extra=SETTINGS)
    cluster.start()
    try:
        bootstrap = cluster.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("words", 1, 1)])["words"].result(30)
        for run in range(1, 5):  # four runs on one state dir, the changelog rolling between
            produce_words(bootstrap, 10)
            counts = quix_counts(bootstrap, tmp_path / "state-1", 50)
            assert counts == dict.fromkeys(WORDS, 10 * run)
            time.sleep(0.4)  # past log.roll.ms
        changelog = next(
            t for t in admin.list_topics(timeout=10).topics if t.startswith("changelog__")
        )
        assert topic_config(bootstrap, changelog, "cleanup.policy") == "compact"
        # 200 state updates: the cleaner leaves one a word of the first 150, and the last
        # run's 50 in the active segment, which is never cleaned.
        held = wait_cleaned(bootstrap, changelog, 55)
        assert held <= 55, f"{held} changelog records left of 200"
        # A new instance with no local state restores it from the changelog.
        produce_words(bootstrap, 1)
        second = quix_counts(bootstrap, tmp_path / "state-2", 5)
        assert second == dict.fromkeys(WORDS, 41)
    finally:
        cluster.kill()


# --- faust-streaming ---------------------------------------------------------------


def start_faust(bootstrap: str, folder: Path) -> subprocess.Popen[bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    log = (folder / "worker.log").open("ab")
    return subprocess.Popen(
        [sys.executable, "-m", "faust", "-A", "tests.integration.apps.faust_counter",
         "worker", "-l", "warn"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
        env={**os.environ, "BOOTSTRAP": bootstrap, "FAUST_DATA": str(folder / "data")},
    )  # fmt: skip


def wait_counts(bootstrap: str, wanted: int, worker: subprocess.Popen[bytes], log: Path) -> None:
    """Wait (up to 90 s) until the worker has written a count of at least ``wanted`` for
    every word. Faust is at least once: a rebalance may count a word again."""
    deadline = time.monotonic() + 90
    latest: dict[str, int] = {}
    while time.monotonic() < deadline:
        assert worker.poll() is None, log.read_text()[-3000:]
        if "counts" in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics:
            latest = {}
            for _key, value in records_in(bootstrap, "counts"):
                word, n = (value or b"").decode().split("=")
                latest[word] = int(n)
            if all(latest.get(word, 0) >= wanted for word in WORDS):
                return
        time.sleep(1)
    raise AssertionError(
        f"no count of {wanted} for every word (last: {latest}):\n{log.read_text()[-3000:]}"
    )


def wait_committed(bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            [committed] = consumer.committed([Assigned(topic, 0)], timeout=10)
            if committed.offset >= offset:
                return
            time.sleep(0.5)
    finally:
        consumer.close()
    raise AssertionError(f"{group} did not commit {topic} up to {offset}")


def test_faust_restores_a_table_from_its_cleaned_changelog(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, 1, extra=SETTINGS)
    cluster.start()
    worker: subprocess.Popen[bytes] | None = None
    try:
        bootstrap = cluster.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("words", 1, 1)])["words"].result(30)
        log = tmp_path / "faust" / "worker.log"
        worker = start_faust(bootstrap, tmp_path / "faust")
        for run in range(1, 4):  # the changelog rolls between the rounds
            produce_words(bootstrap, 10)
            wait_counts(bootstrap, 10 * run, worker, log)
            time.sleep(0.4)
        changelog = "counter-counts-changelog"
        assert topic_config(bootstrap, changelog, "cleanup.policy") == "compact"
        # Faust is at least once: a worker stopped before it committed its input offsets
        # would count those words again after the restart.
        wait_committed(bootstrap, "counter", "words", 150)
        worker.send_signal(signal.SIGTERM)
        worker.wait(60)
        # One record a word is left of the first two rounds, and the last round's 50 in
        # the active segment, which is never cleaned.
        held = wait_cleaned(bootstrap, changelog, 55)
        assert held <= 55, f"{held} changelog records left of 150"
        # A restarted worker (in-memory store: nothing local) restores the Table: its
        # counts go on from 30, where without the changelog they would start again at 1.
        worker = start_faust(bootstrap, tmp_path / "faust")
        produce_words(bootstrap, 1)
        wait_counts(bootstrap, 31, worker, log)
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
        cluster.kill()
