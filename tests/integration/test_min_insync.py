"""min.insync.replicas on real processes: with too few replicas, nothing is acknowledged.

Three controllers and three brokers (separate roles, so the controller quorum outlives
the brokers). With two of three brokers stopped, the controller fences them, the ISR
shrinks to the survivor, and acks=all produce is refused with NOT_ENOUGH_REPLICAS
(min.insync.replicas defaults to a majority of the replication factor, 2 of 3). Once a
broker is back in the ISR, produce succeeds again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.cluster import Cluster

FAST = (
    "broker.session.timeout.ms=2000\n"
    "broker.heartbeat.interval.ms=200\n"
    "replica.lag.time.max.ms=2000\n"
)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, 3, extra=FAST, controllers=3)
    c.start()
    yield c
    c.stop()


def produce_one(bootstrap: str, value: bytes) -> Any:
    """Produce with acks=all; the delivery error (None when acknowledged)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "message.timeout.ms": 6000,
            "retry.backoff.ms": 200,
        }
    )
    outcome: list[Any] = []
    producer.produce("safe", value, callback=lambda err, msg: outcome.append(err))
    producer.flush(20)
    return outcome[0] if outcome else "no delivery report"


def isr(bootstrap: str) -> list[int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    meta: Any = admin.list_topics(topic="safe", timeout=10).topics["safe"]
    return sorted(meta.partitions[0].isrs)


def test_acks_all_is_refused_below_min_insync_replicas(cluster: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("safe", num_partitions=1, replication_factor=3)])["safe"].result(
        30
    )
    assert produce_one(cluster.bootstrap, b"with three") is None
    survivor, *others = cluster.nodes
    for node in others:
        node.stop()
    deadline = time.monotonic() + 30
    while isr(survivor.bootstrap) != [survivor.node_id]:
        assert time.monotonic() < deadline, "the ISR never shrank to the survivor"
        time.sleep(0.3)
    error = produce_one(survivor.bootstrap, b"with one")
    assert error is not None, "acknowledged with one in-sync replica of three"
    assert error.code() in (KafkaError.NOT_ENOUGH_REPLICAS, KafkaError._MSG_TIMED_OUT), error
    others[0].start()
    deadline = time.monotonic() + 30
    while len(isr(survivor.bootstrap)) < 2:
        assert time.monotonic() < deadline, "the restarted broker never rejoined the ISR"
        time.sleep(0.3)
    assert produce_one(survivor.bootstrap, b"with two") is None
