"""Three combined nodes: metadata writes reach the active controller from any broker.

A client's CreateTopics sent to a node that is not the active controller is forwarded
there (Envelope, KIP-590); every node then serves the same metadata, with each
partition's leader and replicas as the controller placed them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.cluster import Cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, 3)
    c.start()
    yield c
    c.kill()  # not a test of stopping: a clean stop is tested on its own


def topic_metadata(bootstrap: str, topic: str) -> Any:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.list_topics(topic=topic, timeout=10).topics.get(topic)


def test_create_topic_through_a_non_controller_node(cluster: Cluster) -> None:
    leader = cluster.controller_leader()
    other = next(n for n in cluster.nodes if n.node_id != leader)
    admin = AdminClient({"bootstrap.servers": other.bootstrap})
    futures = admin.create_topics([NewTopic("forwarded", num_partitions=6, replication_factor=3)])
    futures["forwarded"].result(timeout=30)
    # Every node learns it from the metadata log.
    for node in cluster.nodes:
        deadline = time.monotonic() + 10
        while True:
            meta = topic_metadata(node.bootstrap, "forwarded")
            if meta is not None and len(meta.partitions) == 6:
                break
            assert time.monotonic() < deadline, f"node {node.node_id} never saw the topic"
            time.sleep(0.2)
        leaders = {p.leader for p in meta.partitions.values()}
        assert leaders == {1, 2, 3}, "leadership is spread over the brokers"
        for p in meta.partitions.values():
            assert sorted(p.replicas) == [1, 2, 3]
