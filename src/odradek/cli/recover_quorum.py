"""``odradek recover-quorum``: restore service when the controller quorum is lost for good.

``survey`` is the first step of the seed's procedure: for every surviving node
(controller or broker, stopped), what its copy of the metadata log holds, read without
changing it. ``plan`` and ``apply`` come next.
"""

from __future__ import annotations

import json
from typing import Any

import click

from odradek.broker.config import ServerConfig
from odradek.core.errors import ConfigError, CorruptLogError
from odradek.core.kafka_uuid import to_kafka_str
from odradek.raft.disk_log import metadata_log_directory
from odradek.raft.survey import MetadataLogSurvey, survey
from odradek.shell.real_fs import RealFileSystem
from odradek.storage.checkpoint import META_PROPERTIES, read_meta_properties
from odradek.storage.fs import join


@click.group("recover-quorum")
def recover_quorum() -> None:
    """Recover from the permanent loss of a majority of the controller quorum."""


def _row(node_id: int | None, found: MetadataLogSurvey) -> dict[str, Any]:
    voters = found.voters
    state = found.quorum_state
    return {
        "node_id": node_id,
        "metadata_log": found.directory,
        "start_offset": found.start_offset,
        "end_offset": found.end_offset,
        "last_epoch": found.last_epoch,
        "latest_snapshot": (
            None
            if found.latest_snapshot is None
            else {
                "end_offset": found.latest_snapshot.end_offset,
                "epoch": found.latest_snapshot.epoch,
            }
        ),
        "voters": (
            None
            if voters is None
            else [{"id": v.node_id, "directory_id": to_kafka_str(v.directory_id)} for v in voters]
        ),
        "voters_offset": found.voters_offset,
        "quorum_state": (
            None
            if state is None
            else {"epoch": state.epoch, "leader": state.leader_id, "voted": state.voted_id}
        ),
        "problem": found.problem,
    }


@recover_quorum.command("survey")
@click.option(
    "--config",
    "configs",
    multiple=True,
    help="A stopped node's server.properties (repeat for every surviving node).",
)
@click.option(
    "--metadata-log-dir",
    "directories",
    multiple=True,
    help="A metadata.log.dir to survey directly (repeatable).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def survey_command(configs: tuple[str, ...], directories: tuple[str, ...], as_json: bool) -> None:
    """For every surviving node: the metadata log's end offset, last epoch, latest snapshot,
    the voter set it believes in and its quorum state. Nothing is written."""
    if not configs and not directories:
        raise click.UsageError("give --config or --metadata-log-dir at least once")
    fs = RealFileSystem()
    targets: list[str] = list(directories)
    for path in configs:
        try:
            with open(path, encoding="utf-8") as f:
                targets.append(ServerConfig.load(f.read()).metadata_log_dir)
        except (OSError, ConfigError) as e:
            raise click.ClickException(f"{path}: {e}") from None
    rows = []
    for directory in targets:
        node_id: int | None = None
        meta_path = join(directory, META_PROPERTIES)
        try:
            if fs.exists(meta_path):
                node_id = read_meta_properties(fs, meta_path).node_id
        except CorruptLogError:
            node_id = None
        rows.append(_row(node_id, survey(fs, metadata_log_directory(directory))))
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(
        f"{'Node':>5}  {'EndOffset':>10}  {'LastEpoch':>9}  {'Snapshot':>12}  "
        f"{'Voters (at offset)':<24}  {'QuorumEpoch':>11}  Directory"
    )
    for r in sorted(rows, key=lambda r: (-r["end_offset"], -r["last_epoch"])):
        snap = r["latest_snapshot"]
        voters = (
            "static/none" if r["voters"] is None else ",".join(str(v["id"]) for v in r["voters"])
        )
        if r["voters_offset"] is not None:
            voters += f" (@{r['voters_offset']})"
        state = r["quorum_state"]
        click.echo(
            f"{r['node_id'] if r['node_id'] is not None else '?':>5}  {r['end_offset']:>10}  "
            f"{r['last_epoch']:>9}  "
            f"{(str(snap['end_offset']) + '-' + str(snap['epoch'])) if snap else '-':>12}  "
            f"{voters:<24}  {state['epoch'] if state else '-':>11}  {r['metadata_log']}"
        )
        if r["problem"]:
            click.echo(f"       ! {r['problem']}")
    longest = max(rows, key=lambda r: (r["last_epoch"], r["end_offset"]))
    click.echo(
        f"longest log: node {longest['node_id']} (end offset {longest['end_offset']}, "
        f"last epoch {longest['last_epoch']}); offsets that existed only on lost disks "
        "cannot be known"
    )
