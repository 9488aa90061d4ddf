"""The disk-full and clock-jump faults of ``odradek verify`` and what the run makes of
their effects, without a cluster: their schedules, a node that ends by itself (the
fault's effect, or an anomaly), the metadata log's account of fencings, a real process
whose wall clock jumps, and a real tmpfs that fills (these two need libfaketime and
root, and are skipped without)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.cli.verify import clocks
from odradek.cli.verify.disks import FULL_MARGIN_BYTES, Disks, used_bytes
from odradek.cli.verify.nodes import NodeProcess
from odradek.cli.verify.runner import ExitBook
from odradek.cli.verify.workload import Recorder
from odradek.protocol.metadata.fence_broker_record import FenceBrokerRecord
from odradek.protocol.metadata.no_op_record import NoOpRecord
from odradek.protocol.metadata.partition_change_record import PartitionChangeRecord
from odradek.protocol.metadata.partition_record import PartitionRecord
from odradek.protocol.metadata.topic_record import TopicRecord
from odradek.protocol.metadata_record import MetadataRecord, encode_metadata_record
from odradek.protocol.record_codec import (
    Record,
    encode_batch,
)
from odradek.verify import nemesis
from odradek.verify.checker import judge
from odradek.verify.history import FAIL, INFO, INVOKE, OK, Op
from odradek.verify.metadata_log import summarize
from odradek.verify.report import recoveries
from odradek.verify.topology import BROKER_SESSION_TIMEOUT_MS, Node, Topology

# The schedules ----------------------------------------------------------------------


def test_a_full_disk_names_a_broker_by_id_and_lasts_long_enough_to_stop_it() -> None:
    topology = Topology.plan(3, 0)
    faults = [
        f for seed in range(30) for f in nemesis.schedule("disk-full", seed, 60.0, topology, 3)
    ]
    assert faults and {f.kind for f in faults} == {nemesis.DISK_FULL}
    broker_ids = {b.node_id for b in topology.brokers}
    # The disk goes under the node before it starts: a role resolved later cannot say which.
    assert {int(f.target.removeprefix("node:")) for f in faults} <= broker_ids
    assert all(f.end - f.start > nemesis.DISK_FULL_MIN_S - 1e-6 or f.end == 59.0 for f in faults)
    one_run = nemesis.schedule("disk-full", 1, 60.0, topology, 3)
    assert nemesis.disk_nodes(one_run) == {int(f.target[5:]) for f in one_run}
    assert nemesis.disk_nodes(nemesis.schedule("kill-leaders", 1, 60.0, topology, 3)) == set()
    # Separate controllers: only a broker's disk fills.
    separate = Topology.plan(3, 3)
    assert all(
        int(f.target[5:]) in {b.node_id for b in separate.brokers}
        for seed in range(30)
        for f in nemesis.schedule("disk-full", seed, 60.0, separate, 3)
    )


def test_a_clock_jump_moves_the_active_controller_past_its_broker_sessions() -> None:
    topology = Topology.plan(3, 0)
    faults = [
        f for seed in range(30) for f in nemesis.schedule("clock-jump", seed, 60.0, topology, 3)
    ]
    assert {f.kind for f in faults} == {nemesis.CLOCK_JUMP}
    assert {f.target for f in faults} == {"controller-leader"}
    assert all(f.jump_s >= 3 * BROKER_SESSION_TIMEOUT_MS / 1000 for f in faults)
    assert 3600 in {f.jump_s for f in faults}
    assert "+3600 s" in next(f for f in faults if f.jump_s == 3600).describe()
    # Only the scenarios that may jump a clock run their nodes under libfaketime.
    jumping = {name for name, s in nemesis.SCENARIOS.items() if s.jumps_clocks}
    assert jumping == {"clock-jump", "mixed"}


# A node that ends by itself ---------------------------------------------------------


def exit_op(process: str, type_: str) -> Op:
    return Op(5.0, process, type_, "exit", value="exit status 1; it logged: ...")


def sends() -> list[Op]:
    return [
        Op(1.0, "writer-0", INVOKE, "send", partition=0, value="a"),
        Op(1.1, "writer-0", OK, "send", partition=0, value="a", offset=0),
        Op(9.0, "final", OK, "read", value={"0": [[0, "a"]]}),
    ]


def test_a_node_that_ends_where_no_fault_stops_it_makes_the_run_invalid() -> None:
    verdict = judge([*sends(), exit_op("node-2", FAIL)], 0.0, 2.0)
    assert not verdict.valid
    assert verdict.unexpected_exits == ("node-2 at 5.0 s: exit status 1; it logged: ...",)
    assert verdict.to_json()["unexpected_exits"] == 1


def test_a_node_stopped_by_its_full_disk_is_reported_but_no_anomaly() -> None:
    verdict = judge([*sends(), exit_op("node-2", INFO)], 0.0, 2.0)
    assert verdict.valid and verdict.conclusive
    assert verdict.to_json()["expected_exits"] == 1
    assert verdict.to_json()["unexpected_exits"] == 0


def test_only_a_stop_for_its_failed_log_dir_while_its_disk_is_full_is_the_faults_effect() -> None:
    book = ExitBook()
    book.recorder = Recorder()
    proc = NodeProcess(Node(2, "broker,controller", "127.0.0.3"), Path("/nonexistent"))
    book.exited(proc, 1, "log dir /d failed (... No space left on device)")  # disk not full
    book.disk_full(2, True)
    book.exited(proc, 1, "")  # a crash while the disk is full: it logged no stop reason
    book.exited(proc, 1, "log dir /d failed (... No space left on device)")
    book.disk_full(2, False)
    book.exited(proc, 1, "log dir /d failed (... No space left on device)")
    kinds = [op.type for op in book.recorder.snapshot() if op.f == "exit"]
    assert kinds == [FAIL, FAIL, INFO, FAIL]


def test_an_end_is_reported_once_and_a_kill_by_the_run_not_at_all(tmp_path: Path) -> None:
    ended: list[tuple[int, int]] = []
    node = Node(7, "broker,controller", "127.0.0.8")
    proc = NodeProcess(node, tmp_path, lambda p, status, reason: ended.append((7, status)))
    # A config the server refuses: the process ends by itself at once.
    proc.config.write_text("process.roles=nonsense\n")
    proc.start()
    assert proc.process is not None
    proc.process.wait(60)
    proc.check_exit()
    proc.check_exit()
    assert len(ended) == 1 and ended[0][1] != 0
    proc.start()  # a new process; killed by the run, so not reported
    proc.kill()
    proc.check_exit()
    proc.stop_files()
    assert len(ended) == 1


# Recoveries -------------------------------------------------------------------------


def test_recoveries_say_how_long_each_took_or_that_it_did_not_happen() -> None:
    ops = [
        Op(12.0, "node-2", OK, "rejoin", value={"what": "back in every ISR", "after_s": 3.4}),
        Op(80.0, "cluster", FAIL, "healthy", value={"what": "healthy again"}),
    ]
    found = recoveries(ops)
    assert [r.to_json() for r in found] == [
        {"process": "node-2", "what": "back in every ISR", "after_s": 3.4},
        {"process": "cluster", "what": "healthy again", "after_s": None},
    ]
    assert "NOT healthy again" in found[1].describe()


# The metadata log's account ---------------------------------------------------------


def batch(base_offset: int, *records: MetadataRecord) -> bytes:
    return encode_batch(
        [
            Record(offset_delta=i, timestamp=1000, value=encode_metadata_record(r))
            for i, r in enumerate(records)
        ],
        base_offset=base_offset,
    )


def test_the_metadata_log_counts_fencings_isr_shrinks_and_leader_changes() -> None:
    topic = uuid.uuid4()
    segment_1 = batch(
        0,
        TopicRecord(name="verify", topic_id=topic),
        PartitionRecord(
            partition_id=0, topic_id=topic, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1
        ),
    )
    segment_2 = (
        batch(2, FenceBrokerRecord(id=1, epoch=5))
        + batch(3, PartitionChangeRecord(partition_id=0, topic_id=topic, isr=[2, 3], leader=2))
        + batch(4, PartitionChangeRecord(partition_id=0, topic_id=topic, isr=[1, 2, 3]))
        + batch(5, NoOpRecord(), FenceBrokerRecord(id=3, epoch=9))
    )
    torn = batch(7, FenceBrokerRecord(id=2, epoch=1))[:-5]  # a kill while writing
    summary = summarize([segment_1, segment_2 + torn])
    assert summary.fenced == (1, 3)
    assert summary.isr_shrinks == {"verify": 1}  # growing back is no shrink
    assert summary.leader_changes == {"verify": 1}
    assert summary.to_json()["brokers_fenced"] == 2
    assert summarize([]).to_json()["brokers_fenced"] == 0


# A real process whose wall clock jumps ----------------------------------------------


@pytest.mark.skipif(clocks.libfaketime() is None, reason="libfaketime is not installed")
def test_a_process_sees_its_wall_clock_jump_and_its_monotonic_clock_go_on(
    tmp_path: Path,
) -> None:
    rc_file = tmp_path / "faketime.rc"
    env = clocks.node_environment({**os.environ, "FAKETIME": "+1d"}, rc_file)
    assert "FAKETIME" not in env  # it would take precedence over the file
    probe = (
        "import time, threading\n"
        "for _ in range(60):\n"
        "    print(time.time(), time.monotonic(), flush=True)\n"
        "    threading.Event().wait(0.1)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", probe], env=env, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    try:
        first = [float(x) for x in child.stdout.readline().split()]
        assert abs(first[0] - time.time()) < 30
        clocks.set_offset(rc_file, 3600)
        # libfaketime reads the file again within a second (FAKETIME_CACHE_DURATION=1).
        for line in child.stdout:
            wall, monotonic = (float(x) for x in line.split())
            if wall - time.time() > 3000:
                break
        else:
            pytest.fail("the wall clock did not jump")
        assert 0 < monotonic - first[1] < 30  # the monotonic clock did not
        clocks.set_offset(rc_file, 0)
        for line in child.stdout:
            wall, _ = (float(x) for x in line.split())
            if abs(wall - time.time()) < 30:
                break
        else:
            pytest.fail("the wall clock did not come back")
    finally:
        child.kill()
        child.wait(10)


# A real disk that fills -------------------------------------------------------------


@pytest.fixture
def disks(tmp_path: Path) -> Iterator[Disks]:
    found = Disks()
    yield found
    for path in list(found.mounts.values()):
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("mount") is None, reason="mounting a tmpfs needs root"
)
def test_a_disk_fills_when_shrunk_takes_writes_when_repaired_and_keeps_its_files(
    tmp_path: Path, disks: Disks
) -> None:
    data = tmp_path / "node-1" / "data"
    disks.mount(1, data)
    (data / "before").write_bytes(b"x" * 100_000)
    size = disks.fill(1)
    assert size == used_bytes(data) + FULL_MARGIN_BYTES
    with pytest.raises(OSError) as full, open(data / "more", "wb") as f:
        for _ in range(64):
            f.write(b"y" * 65536)
            f.flush()
    assert full.value.errno == 28  # ENOSPC
    disks.repair(1)
    (data / "after").write_bytes(b"z" * 1_000_000)
    disks.release()
    assert disks.mounts == {}
    assert str(data) not in Path("/proc/self/mounts").read_text()
    # The files stay for the report, on the real disk.
    assert (data / "before").stat().st_size == 100_000
    assert (data / "after").stat().st_size == 1_000_000
