"""``odradek partitions recover`` on real processes: the operator's last resort.

Three controllers and three brokers. The followers of a partition are killed one after
the other, then its leader: the ISR and the eligible replicas are all gone. The first
follower killed comes back; it was out of sync when it died, so nothing elects it and
the partition stays offline. ``partitions recover --from-broker`` makes it the leader on
purpose and says what that gives up; when the old leader returns it truncates to the
new leader and the acknowledged records it drops are in its quarantine.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.cluster import Cluster, odradek
from tests.integration.test_min_insync import FAST, isr_of, leader


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, 3, extra=FAST, controllers=3)
    c.start()
    yield c
    c.kill()  # not a test of stopping: a clean stop is tested on its own


def produce(bootstrap: str, values: list[bytes]) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    acknowledged: list[bytes] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acknowledged.append(msg.value())

    for value in values:
        producer.produce("lost", value, callback=delivered)
    producer.flush(30)
    return acknowledged


def wait_until(what: str, check: Any, timeout: float = 40) -> Any:
    """The first truthy value of ``check()``."""
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)
    return value


def test_recover_elects_the_named_replica_and_the_loss_lands_in_quarantine(
    cluster: Cluster,
) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("lost", num_partitions=1, replication_factor=3)])["lost"].result(
        30
    )
    assert len(produce(cluster.bootstrap, [f"a{i}".encode() for i in range(20)])) == 20
    by_id = {node.node_id: node for node in cluster.nodes}
    first = leader(cluster.bootstrap, "lost")
    behind, eligible = sorted(set(by_id) - {first})
    by_id[behind].kill()
    wait_until("the ISR to shrink", lambda: len(isr_of(by_id[first].bootstrap, "lost")) == 2)
    # Acknowledged by the two left, never seen by `behind`.
    later = produce(by_id[first].bootstrap, [f"b{i}".encode() for i in range(10)])
    assert len(later) == 10
    by_id[eligible].kill()
    by_id[first].kill()
    by_id[behind].start()
    # Out of sync when it died: no automatic election makes it the leader.
    time.sleep(3)
    assert leader(by_id[behind].bootstrap, "lost") == -1
    bootstrap = by_id[behind].bootstrap
    refused = odradek(
        "partitions", "recover", "--bootstrap-server", bootstrap, "--topic", "lost",
        "--partition", "0", "--from-broker", str(first), "--yes", check=False,
    )  # fmt: skip
    assert refused.returncode == 1 and "not alive" in refused.stderr
    out = odradek(
        "partitions", "recover", "--bootstrap-server", bootstrap, "--topic", "lost",
        "--partition", "0", "--from-broker", str(behind), "--yes",
    ).stdout  # fmt: skip
    assert "NOT known to hold every acknowledged record" in out
    assert f"led by broker {behind} again; its log ends at offset 20" in out
    assert leader(bootstrap, "lost") == behind
    # The old leader returns, truncates to the new leader's log and quarantines the ten
    # acknowledged records only it and `eligible` held.
    by_id[first].start()
    log_dir = str(by_id[first].dir / "data")

    def quarantined() -> int:
        listing = odradek("quarantine", "list", "--log-dir", log_dir, "--json").stdout
        return sum(
            int(entry["record_count"]) for entry in json.loads(listing) if entry["topic"] == "lost"
        )

    wait_until("the dropped records in quarantine", lambda: quarantined() == 10)

    # The controller recorded the election, and the old leader's loss report reached it:
    # the health check shows both, as an alarm, until the operator acknowledges them.
    def health() -> dict[str, Any]:
        result = odradek(
            "cluster", "health", "--bootstrap-server", bootstrap, "--json", check=False
        )  # fmt: skip
        report: dict[str, Any] = json.loads(result.stdout)
        return report

    def unclean_elections() -> list[dict[str, Any]]:
        elections: list[dict[str, Any]] = health()["unclean_elections"]
        return elections

    # A replica that dropped records fetches again only once the controller recorded
    # its report: the one report that shows it back in the ISR (still under-replicated,
    # `eligible` is down) shows the loss too, with no wait for a heartbeat.
    def back_in_isr() -> dict[str, Any] | None:
        report = health()
        [lost] = [p for p in report["under_replicated_partitions"] if p["topic"] == "lost"]
        return report if first in lost["isr"] else None

    report = wait_until("the old leader back in the ISR", back_in_isr)
    [election] = report["unclean_elections"]
    assert election["estimated_lost_records"] == 10
    assert (election["topic"], election["partition"], election["leader"]) == ("lost", 0, behind)
    assert election["requested"] is True
    assert [r["broker"] for r in election["loss_reports"]] == [first]
    text = odradek("cluster", "health", "--bootstrap-server", bootstrap, check=False)
    assert text.returncode == 1
    assert "10 records dropped" in text.stdout
    odradek(
        "cluster", "acknowledge-unclean-elections", "--bootstrap-server", bootstrap,
        "--topic", "lost",
    )  # fmt: skip
    wait_until("the acknowledgement", lambda: unclean_elections() == [])
