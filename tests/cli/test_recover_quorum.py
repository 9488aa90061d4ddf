"""`odradek recover-quorum`: survey, plan, apply and audit over the dirs of stopped nodes."""

from __future__ import annotations

import dataclasses
import json
import socket
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from odradek.cli.main import main
from odradek.cli.ports import free_port
from odradek.protocol.record_batch import (
    ControlType,
)
from odradek.raft.disk_log import DiskRaftLog, metadata_log_directory
from odradek.raft.log import Entry
from odradek.raft.quorum_file import QuorumStateFile, StoredQuorumState
from odradek.raft.voters import Voter, VoterEndpoint, VoterSet
from odradek.shell.real_fs import RealFileSystem
from odradek.storage.checkpoint import MetaProperties
from odradek.storage.log_dir import format_log_dir

CLUSTER = "q2R5VnVhRkqzh1m3qC8n1w"


def node_dir(root: Path, node_id: int, entries: int) -> str:
    """A formatted metadata dir whose log holds the voter set {1, 2, 3} and ``entries``
    more batches (epoch = node id, so the longest and newest logs differ)."""
    fs = RealFileSystem()
    directory = str(root / f"node-{node_id}")
    format_log_dir(fs, directory, MetaProperties(CLUSTER, node_id, uuid.uuid4()))
    log = DiskRaftLog.open(fs, metadata_log_directory(directory), 0)
    voters = VoterSet.of(Voter(i, uuid.UUID(int=i)) for i in (1, 2, 3))
    log.append(
        [
            Entry(0, 1, (b"lc",), ControlType.LEADER_CHANGE),
            Entry(1, 1, (voters.encode(),), ControlType.VOTERS),
        ]
    )
    log.append([Entry(2 + i, node_id, (b"r",)) for i in range(entries)])
    log.flush()
    log.close()
    return directory


def test_survey_lists_every_node_and_names_the_longest_log(tmp_path: Path) -> None:
    short = node_dir(tmp_path, 1, 2)
    long = node_dir(tmp_path, 2, 5)
    runner = CliRunner()
    args = ["recover-quorum", "survey", "--metadata-log-dir", short, "--metadata-log-dir", long]
    result = runner.invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["node_id"]: r for r in json.loads(result.output)}
    assert (rows[1]["end_offset"], rows[1]["last_epoch"]) == (4, 1)
    assert (rows[2]["end_offset"], rows[2]["last_epoch"]) == (7, 2)
    assert [v["id"] for v in rows[2]["voters"]] == [1, 2, 3] and rows[2]["voters_offset"] == 1
    table = runner.invoke(main, args)
    assert table.exit_code == 0
    assert "longest log: node 2 (end offset 7, last epoch 2)" in table.output


def test_survey_needs_something_to_survey() -> None:
    result = CliRunner().invoke(main, ["recover-quorum", "survey"])
    assert result.exit_code == 2 and "--config or --metadata-log-dir" in result.output


# --- plan, apply, audit -------------------------------------------------------------------


def recovery_node(
    root: Path, node_id: int, epochs: list[int], roles: str = "controller", port: int = 0
) -> tuple[Path, uuid.UUID]:
    """A stopped node (config and formatted dir) whose log holds the voter set {1, 2, 3}
    (voter 1 has this node's directory id when node_id is 1) and a batch per epoch."""
    fs = RealFileSystem()
    directory = root / f"node-{node_id}"
    directory_id = uuid.uuid4() if node_id != 1 else DIR1
    format_log_dir(fs, str(directory), MetaProperties(CLUSTER, node_id, directory_id))
    log = DiskRaftLog.open(fs, metadata_log_directory(str(directory)), 0)
    log.append(
        [
            Entry(0, 1, (b"lc",), ControlType.LEADER_CHANGE),
            Entry(1, 1, (RECOVERY_VOTERS.encode(),), ControlType.VOTERS),
        ]
    )
    log.append([Entry(2 + i, epoch, (b"r",)) for i, epoch in enumerate(epochs)])
    log.flush()
    log.close()
    QuorumStateFile(fs, metadata_log_directory(str(directory))).write(
        StoredQuorumState(max(epochs, default=1), 2, None)
    )
    config = root / f"node-{node_id}.properties"
    listener = (
        f"CONTROLLER://127.0.0.1:{port or free_port()}"
        if "controller" in roles
        else f"PLAINTEXT://127.0.0.1:{port or free_port()}"
    )
    config.write_text(
        f"process.roles={roles}\nnode.id={node_id}\nlisteners={listener}\n"
        "controller.listener.names=CONTROLLER\n"
        "controller.quorum.bootstrap.servers=127.0.0.1:1\n"
        f"log.dirs={directory}\n"
    )
    return config, directory_id


DIR1 = uuid.UUID(int=0x11)
# Voters 2 and 3 on ports nothing listens on (port 1 is privileged and unused).
RECOVERY_VOTERS = VoterSet.of(
    [
        Voter(1, DIR1, (VoterEndpoint("CONTROLLER", "127.0.0.1", 1),)),
        Voter(2, uuid.UUID(int=0x22), (VoterEndpoint("CONTROLLER", "127.0.0.1", 1),)),
        Voter(3, uuid.UUID(int=0x33), (VoterEndpoint("CONTROLLER", "127.0.0.1", 1),)),
    ]
)


def read_log(directory: Path) -> list[Entry]:
    log = DiskRaftLog.open(RealFileSystem(), metadata_log_directory(str(directory)), 0)
    try:
        return log.entries_from(0, 1000)
    finally:
        log.close()


def test_plan_picks_the_broker_log_and_prints_the_steps(tmp_path: Path) -> None:
    controller, _ = recovery_node(tmp_path, 1, [2, 2])
    broker, _ = recovery_node(tmp_path, 4, [2, 2, 2, 2], roles="broker")
    runner = CliRunner()
    args = ["recover-quorum", "plan", "--config", str(controller), "--config", str(broker)]
    result = runner.invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["ok"] and info["chosen"]["node_id"] == 4 and info["target"]["node_id"] == 1
    assert info["copy_from"]["name"] == str(broker)
    assert [v["id"] for v in info["lost_voters"]] == [2, 3]
    assert "cannot be known" in info["given_up"]
    apply = next(s for s in info["steps"] if s.startswith("Run: "))
    assert f"--node 1 --config {controller} --from {broker} --min-epoch 3" in apply
    table = runner.invoke(main, args)
    assert "Given up:" in table.output and "Steps:" in table.output


def test_plan_refuses_a_survivor_that_would_go_backwards(tmp_path: Path) -> None:
    controller, _ = recovery_node(tmp_path, 1, [2, 2, 2, 2, 2])  # epoch 2 up to offset 7
    broker, _ = recovery_node(tmp_path, 4, [2, 3], roles="broker")  # epoch 3 from offset 3
    result = CliRunner().invoke(
        main, ["recover-quorum", "plan", "--config", str(controller), "--config", str(broker)]
    )
    assert result.exit_code == 1
    assert "REFUSED" in result.output and "would move backwards" in result.output


def test_apply_copies_the_longest_log_demotes_the_lost_voters_and_audits(
    tmp_path: Path,
) -> None:
    controller, _ = recovery_node(tmp_path, 1, [2, 2])
    broker, _ = recovery_node(tmp_path, 4, [2, 2, 2, 2], roles="broker")
    runner = CliRunner()
    result = runner.invoke(
        main,
        [
            "recover-quorum", "apply", "--node", "1", "--config", str(controller),
            "--from", str(broker), "--min-epoch", "3", "--json",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    audit = json.loads(result.output)
    assert audit["log"]["copied"] and audit["log"]["end_offset"] == 6
    assert [v["id"] for v in audit["demoted"]] == [2, 3]
    assert audit["recovery_epoch"] == 3 and audit["user"] and audit["host"]
    entries = read_log(tmp_path / "node-1")
    assert [e.offset for e in entries][-3:] == [6, 7, 8]
    assert all(e.epoch == 3 for e in entries[-3:])  # a new epoch, above everyone's
    assert [sorted(VoterSet.decode(e.records[0]).ids) for e in entries[-3:-1]] == [[1, 2], [1]]
    meta_dir = metadata_log_directory(str(tmp_path / "node-1"))
    state = QuorumStateFile(RealFileSystem(), meta_dir).read()
    assert state == StoredQuorumState(3, None, None)
    # The node's old copy is kept, under a name no node loads.
    assert any(".before-recovery." in p.name for p in (tmp_path / "node-1").iterdir())
    # The survey and the audit command show what was done, from the log and the file.
    shown = runner.invoke(main, ["recover-quorum", "audit", "--config", str(controller), "--json"])
    records = json.loads(shown.output)
    assert [r["where"].split(" ")[0] for r in records] == [
        "log",
        str(tmp_path / "node-1" / "recover-quorum-audit.json"),
    ]
    assert all(r["audit"]["demoted"] == audit["demoted"] for r in records)
    surveyed = runner.invoke(main, ["recover-quorum", "survey", "--config", str(controller)])
    assert "recovered before:" in surveyed.output


def test_apply_refuses_a_running_node(tmp_path: Path) -> None:
    port = free_port()
    controller, _ = recovery_node(tmp_path, 1, [2], port=port)
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", port))
        listening.listen()
        result = CliRunner().invoke(
            main, ["recover-quorum", "apply", "--node", "1", "--config", str(controller)]
        )
    assert result.exit_code == 1
    assert "is running" in result.output
    assert len(read_log(tmp_path / "node-1")) == 3  # nothing appended


def test_apply_refuses_while_a_majority_may_be_alive_unless_forced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    controller, _ = recovery_node(tmp_path, 1, [2])
    with socket.socket() as voter2:
        voter2.bind(("127.0.0.1", 0))
        voter2.listen()
        port = voter2.getsockname()[1]
        alive = VoterSet.of(
            [v if v.node_id != 2 else Voter(2, v.directory_id,
             (VoterEndpoint("CONTROLLER", "127.0.0.1", port),)) for v in RECOVERY_VOTERS]
        )  # fmt: skip
        monkeypatch.setattr(
            "odradek.cli.recover_quorum.plan_recovery",
            _with_voters(alive),
        )
        args = ["recover-quorum", "apply", "--node", "1", "--config", str(controller)]
        refused = CliRunner().invoke(main, args)
        assert refused.exit_code == 1
        assert "a majority of the voters [1, 2, 3] may be alive" in refused.output
        forced = CliRunner().invoke(main, [*args, "--i-understand-split-brain", "--json"])
    assert forced.exit_code == 0, forced.output
    assert json.loads(forced.output)["forced"] is True


def _with_voters(voters: VoterSet) -> Any:
    from odradek.raft import recovery

    def plan(*args: Any, **kwargs: Any) -> recovery.RecoveryPlan:
        found = recovery.plan_recovery(*args, **kwargs)
        return dataclasses.replace(found, voters=voters)

    return plan
