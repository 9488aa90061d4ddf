"""Three controllers as real processes on loopback: failover and online voter changes.

Each node is ``odradek server`` with ``process.roles=controller``, formatted with
``odradek storage format --initial-controllers`` (the dynamic quorum of KIP-853). The
tests read the quorum with ``odradek quorum describe --json`` as an operator would.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.cli.ports import free_port
from odradek.core.kafka_uuid import to_kafka_str
from tests.integration.cluster import CLUSTER_ID as CLUSTER
from tests.integration.cluster import ServerProcess, odradek

WAIT_S = 30.0


class Controller(ServerProcess):
    def __init__(self, root: Path, node_id: int, port: int, bootstrap: str) -> None:
        super().__init__(root / f"controller-{node_id}")
        self.node_id = node_id
        self.bootstrap = bootstrap
        self.configure(port)
        self.directory_id = uuid.uuid4()

    def configure(self, port: int) -> None:
        self.port = port
        bootstrap = self.bootstrap
        node_id = self.node_id
        self.config.write_text(
            "process.roles=controller\n"
            f"node.id={node_id}\n"
            f"listeners=CONTROLLER://127.0.0.1:{port}\n"
            "controller.listener.names=CONTROLLER\n"
            f"controller.quorum.bootstrap.servers={bootstrap}\n"
            f"log.dirs={self.dir / 'data'}\n"
            "controller.quorum.election.timeout.ms=500\n"
            "controller.quorum.fetch.timeout.ms=1000\n"
            "metadata.quorum.stall.alarm.ms=2000\n"
            # Snapshot often, so that a joining controller must fetch one.
            "metadata.log.max.record.bytes.between.snapshots=10\n"
        )

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def entry(self) -> str:
        return f"{self.node_id}@127.0.0.1:{self.port}:{to_kafka_str(self.directory_id)}"


def describe(address: str) -> dict[str, Any] | None:
    """``odradek quorum describe --json``, or None while no leader answers."""
    result = odradek("quorum", "describe", "--bootstrap-controller", address, "--json", check=False)
    if result.returncode != 0:
        return None
    info: dict[str, Any] = json.loads(result.stdout)
    return info


def wait_for(what: str, predicate: Callable[[], Any], timeout: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def quorum(tmp_path: Path) -> Iterator[tuple[list[Controller], Controller]]:
    ports = [free_port() for _ in range(4)]
    bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports[:3])
    controllers = [Controller(tmp_path, i + 1, ports[i], bootstrap) for i in range(3)]
    initial = ",".join(c.entry() for c in controllers)
    for c in controllers:
        odradek(
            "storage", "format", "--config", str(c.config), "--cluster-id", CLUSTER,
            "--initial-controllers", initial,
        )  # fmt: skip
        c.start()
    spare = Controller(tmp_path, 4, ports[3], bootstrap)
    yield controllers, spare
    for c in [*controllers, spare]:
        c.stop()


def leader_of(info: dict[str, Any]) -> int:
    leader: int = info["leader_id"]
    return leader


def high_watermark(info: dict[str, Any] | None) -> int:
    return -1 if info is None else int(info["high_watermark"])


def test_three_controllers_elect_fail_over_and_change_voters(
    quorum: tuple[list[Controller], Controller],
) -> None:
    controllers, spare = quorum
    by_id = {c.node_id: c for c in controllers}

    def elected() -> dict[str, Any] | None:
        # Before the first election a controller answers with its own view, leader -1.
        got = describe(controllers[0].address)
        return got if got and leader_of(got) != -1 else None

    info = wait_for("a leader", elected)
    first_leader = leader_of(info)
    assert first_leader in by_id
    assert sorted(v["id"] for v in info["voters"]) == [1, 2, 3]
    hw = high_watermark(info)
    # The leader's no-ops keep the high watermark moving.
    wait_for(
        "the high watermark to move",
        lambda: high_watermark(describe(controllers[0].address)) > hw,
    )

    # kill -9 the leader: the others elect a new one and keep committing.
    by_id[first_leader].kill()
    survivor = next(c for c in controllers if c.node_id != first_leader)

    def new_leader() -> dict[str, Any] | None:
        got = describe(survivor.address)
        return got if got and leader_of(got) not in (first_leader, -1) else None

    info = wait_for("a new leader", new_leader)
    hw = high_watermark(info)
    wait_for(
        "commits under the new leader", lambda: high_watermark(describe(survivor.address)) > hw
    )
    # The old leader comes back on another port and follows; it tells the leader its
    # new endpoint (UpdateRaftVoter) and the voter set changes to it.
    returning = by_id[first_leader]
    returning.configure(free_port())
    returning.start()

    def endpoint_updated() -> bool:
        got = describe(survivor.address)
        endpoints = got["voter_endpoints"].get(str(returning.node_id), []) if got else []
        return f"CONTROLLER://127.0.0.1:{returning.port}" in endpoints

    wait_for("the moved voter's new endpoint", endpoint_updated)

    # A fourth controller joins as an observer, then becomes a voter online.
    odradek(
        "storage", "format", "--config", str(spare.config), "--cluster-id", CLUSTER,
        "--no-initial-controllers",
    )  # fmt: skip
    spare.start()

    def observes() -> bool:
        got = describe(survivor.address)
        # A no-op lands every half second, so "caught up" is within a few offsets.
        return got is not None and any(
            o["id"] == 4 and o["lag"] is not None and o["lag"] <= 3 for o in got["observers"]
        )

    wait_for("the new controller to catch up as an observer", observes)
    # It joined after the log start moved past 0: it got there through a snapshot.
    snapshots = spare.dir.glob("data/__cluster_metadata-0/*.checkpoint")
    assert any(not p.name.startswith("00000000000000000000-") for p in snapshots)
    odradek("quorum", "add-controller", "--bootstrap-controller", survivor.address,
            "--config", str(spare.config))  # fmt: skip
    info = describe(survivor.address)
    assert info is not None
    assert sorted(v["id"] for v in info["voters"]) == [1, 2, 3, 4]

    # Remove one voter (not the leader); the quorum of three keeps committing.
    leader = leader_of(info)
    victim = next(c for c in controllers if c.node_id != leader)
    odradek(
        "quorum", "remove-controller", "--bootstrap-controller", survivor.address,
        "--controller-id", str(victim.node_id),
        "--controller-directory-id", to_kafka_str(victim.directory_id),
    )  # fmt: skip
    info = describe(survivor.address)
    assert info is not None
    voters = sorted(v["id"] for v in info["voters"])
    assert voters == sorted({1, 2, 3, 4} - {victim.node_id})
    victim.stop()
    hw = high_watermark(info)
    wait_for("commits after the removal", lambda: high_watermark(describe(spare.address)) > hw)

    # Lose two of the three voters: the survivor cannot commit and raises the alarm.
    remaining = [c for c in [*controllers, spare] if c is not victim]
    survivor = remaining[-1]
    for c in remaining[:2]:
        c.kill()

    def alarmed() -> dict[str, Any] | None:
        got = describe(survivor.address)
        return got if got is not None and got["alarm"] else None

    info = wait_for("the stall alarm", alarmed)
    assert "metadata quorum stalled" in info["alarm"]
    # One voter back: a majority again, progress resumes and the alarm clears.
    remaining[0].start()
    wait_for("the alarm to clear", lambda: (got := describe(survivor.address)) and not got["alarm"])
