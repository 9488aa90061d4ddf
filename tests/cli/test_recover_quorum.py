"""`odradek recover-quorum survey` over the metadata dirs of stopped nodes."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from click.testing import CliRunner

from odradek.cli.main import main
from odradek.protocol.record_batch import ControlType
from odradek.raft.disk_log import DiskRaftLog, metadata_log_directory
from odradek.raft.log import Entry
from odradek.raft.voters import Voter, VoterSet
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
