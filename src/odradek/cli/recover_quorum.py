"""``odradek recover-quorum``: restore service when the controller quorum is lost for good.

The seed's procedure as a supported tool (see docs/recover-quorum.md):

* ``survey`` reads every surviving node's copy of the metadata log without changing it;
* ``plan`` picks the longest copy, refuses when that would move a survivor backwards,
  says what is given up and prints the exact steps;
* ``apply`` edits one stopped controller's log offline: copies the chosen log there if
  a broker held it, appends VotersRecords demoting every other voter in a new epoch,
  and an audit record (also written to ``recover-quorum-audit.json`` beside the log);
* ``audit`` shows the audit records a node's log and directory hold.

The decisions are pure (:mod:`odradek.raft.recovery`); this module reads the disks,
checks that nothing is running that should not be, and writes.
"""

from __future__ import annotations

import datetime
import getpass
import json
import os
import shutil
import socket
import time
from dataclasses import dataclass
from typing import Any

import click

from odradek import __version__
from odradek.broker.server_config import ServerConfig
from odradek.core.errors import ConfigError, CorruptLogError
from odradek.core.kafka_uuid import to_kafka_str
from odradek.raft.audit import AUDIT_FILE
from odradek.raft.disk_log import METADATA_PARTITION_DIR, DiskRaftLog, metadata_log_directory
from odradek.raft.quorum_file import QUORUM_STATE, QuorumStateFile, StoredQuorumState
from odradek.raft.recovery import (
    RecoveryPlan,
    Survivor,
    plan_recovery,
    recovery_entries,
    voter_json,
)
from odradek.raft.survey import MetadataLogSurvey, survey
from odradek.raft.voters import Voter, VoterEndpoint
from odradek.shell.dir_lock import DirLock
from odradek.shell.real_fs import RealFileSystem
from odradek.storage.checkpoint import META_PROPERTIES, MetaProperties, read_meta_properties
from odradek.storage.fs import join, write_file_atomically

#: How long a voter's controller listener gets to accept a connection before it counts
#: as unreachable.
CONNECT_TIMEOUT_S = 1.0


@click.group("recover-quorum")
def recover_quorum() -> None:
    """Recover from the permanent loss of a majority of the controller quorum."""


# --- Reading the survivors ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Node:
    """A surviving node as given on the command line."""

    name: str
    metadata_log_dir: str
    config: ServerConfig | None
    meta: MetaProperties | None


def _load_config(path: str) -> ServerConfig:
    try:
        with open(path, encoding="utf-8") as f:
            return ServerConfig.load(f.read())
    except (OSError, ConfigError) as e:
        raise click.ClickException(f"{path}: {e}") from None


def _node(name: str, metadata_log_dir: str, config: ServerConfig | None) -> _Node:
    fs = RealFileSystem()
    meta: MetaProperties | None = None
    meta_path = join(metadata_log_dir, META_PROPERTIES)
    try:
        if fs.exists(meta_path):
            meta = read_meta_properties(fs, meta_path)
    except CorruptLogError:
        meta = None
    return _Node(name, metadata_log_dir, config, meta)


def _nodes(configs: tuple[str, ...], directories: tuple[str, ...]) -> list[_Node]:
    if not configs and not directories:
        raise click.UsageError("give --config or --metadata-log-dir at least once")
    found = [_node(d, d, None) for d in directories]
    for path in configs:
        config = _load_config(path)
        found.append(_node(path, config.metadata_log_dir, config))
    return found


def _survivor(node: _Node) -> Survivor:
    log = survey(RealFileSystem(), metadata_log_directory(node.metadata_log_dir))
    return Survivor(
        node.name,
        node.meta.node_id if node.meta is not None else None,
        node.meta.directory_id if node.meta is not None else None,
        node.config.is_controller if node.config is not None else None,
        log,
    )


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
        "voters": None if voters is None else [voter_json(v) for v in voters],
        "voters_offset": found.voters_offset,
        "quorum_state": (
            None
            if state is None
            else {"epoch": state.epoch, "leader": state.leader_id, "voted": state.voted_id}
        ),
        "problem": found.problem,
        "audit_records": [_audit_json(text) for _, text in found.audits],
    }


_options = [
    click.option(
        "--config",
        "configs",
        multiple=True,
        help="A stopped node's server.properties (repeat for every surviving node).",
    ),
    click.option(
        "--metadata-log-dir",
        "directories",
        multiple=True,
        help="A metadata.log.dir to survey directly (repeatable).",
    ),
    click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text."),
]


def _survey_inputs(f: Any) -> Any:
    for option in reversed(_options):
        f = option(f)
    return f


@recover_quorum.command("survey")
@_survey_inputs
def survey_command(configs: tuple[str, ...], directories: tuple[str, ...], as_json: bool) -> None:
    """For every surviving node: the metadata log's end offset, last epoch, latest snapshot,
    the voter set it believes in and its quorum state. Nothing is written."""
    survivors = [_survivor(n) for n in _nodes(configs, directories)]
    rows = [_row(s.node_id, s.log) for s in survivors]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(
        f"{'Node':>5}  {'EndOffset':>10}  {'LastEpoch':>9}  {'Snapshot':>12}  "
        f"{'Voters (at offset)':<24}  {'QuorumEpoch':>11}  Directory"
    )
    for r in sorted(rows, key=lambda r: (-r["last_epoch"], -r["end_offset"])):
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
        for audit in r["audit_records"]:
            click.echo(f"       recovered before: {_audit_line(audit)}")
    longest = max(rows, key=lambda r: (r["last_epoch"], r["end_offset"]))
    click.echo(
        f"longest log: node {longest['node_id']} (end offset {longest['end_offset']}, "
        f"last epoch {longest['last_epoch']}); offsets that existed only on lost disks "
        "cannot be known"
    )


# --- plan --------------------------------------------------------------------------------


def _given_up(plan: RecoveryPlan) -> str:
    assert plan.chosen is not None
    lost = ",".join(str(v.node_id) for v in plan.lost_voters) or "none"
    return (
        f"Everything the lost voters (nodes {lost}) held past offset "
        f"{plan.chosen.log.end_offset} (epoch {plan.chosen.log.last_epoch}) is given up. "
        "Which offsets existed there cannot be known: only the lost disks held them, so "
        "metadata changes committed there (topics, configs, partition leaders and ISRs) "
        "may be gone for good, and the producers and admins that saw them succeed are "
        "not told."
    )


def _steps(plan: RecoveryPlan, nodes: dict[str, _Node]) -> list[str]:
    assert plan.chosen is not None
    lost = ", ".join(str(v.node_id) for v in plan.lost_voters)
    target = plan.target
    steps = [
        f"Make sure the lost voters (nodes {lost}) can never come back with their old "
        "disks: this recovery is for voters lost for good.",
    ]
    if target is None:
        steps.append(
            "No surviving controller: format a new controller (process.roles=controller) with "
            "`odradek storage format --config C --cluster-id ID --no-initial-controllers`, "
            "keep it stopped, and use its server.properties below as C."
        )
        apply_node, apply_config = "ID_OF_C", "C"
    else:
        apply_node = str(target.node_id)
        target_node = nodes[target.name]
        apply_config = target.name if target_node.config is not None else "C"
    source = plan.copy_from.name if plan.copy_from is not None else None
    if plan.copy_from is None and target is None:
        source = plan.chosen.name
    steps.append(
        "Stop every surviving controller"
        + (f" and the node holding the chosen log ({source})" if source else "")
        + "; `apply` refuses to run on a live controller."
    )
    command = (
        f"odradek recover-quorum apply --node {apply_node} --config {apply_config}"
        + (f" --from {source}" if source else "")
        + f" --min-epoch {plan.recovery_epoch}"
    )
    steps.append(
        f"Run: {command}"
        + (f" (copies the longest log from {source})" if source else "")
        + f"; it demotes {', '.join(str(v.node_id) for v in plan.demoted)} in epoch "
        f"{plan.recovery_epoch} and writes the audit record."
    )
    steps.append(
        f"Start only node {apply_node}: `odradek server --config {apply_config}`; as the sole "
        "voter it elects itself (check: `odradek quorum describe --bootstrap-controller "
        "HOST:PORT`)."
    )
    steps.append(
        "Start the other surviving nodes: they replicate the new voter set and carry on as "
        "observers (a demoted controller included)."
    )
    steps.append(
        "Restore the target quorum size: for each replacement controller, `odradek storage "
        "format --config C2 --cluster-id ID --no-initial-controllers`, start it, wait until "
        "it is caught up, then `odradek quorum add-controller --bootstrap-controller "
        "HOST:PORT --config C2`."
    )
    steps.append(f"Check what was done: `odradek recover-quorum audit --config {apply_config}`.")
    return steps


def _plan_json(plan: RecoveryPlan, nodes: dict[str, _Node]) -> dict[str, Any]:
    def who(s: Survivor | None) -> dict[str, Any] | None:
        if s is None:
            return None
        return {
            "name": s.name,
            "node_id": s.node_id,
            "controller": s.is_controller,
            "end_offset": s.log.end_offset,
            "last_epoch": s.log.last_epoch,
        }

    ok = plan.ok
    return {
        "ok": ok,
        "refusals": list(plan.refusals),
        "chosen": who(plan.chosen),
        "target": who(plan.target),
        "copy_from": who(plan.copy_from),
        "recovery_epoch": plan.recovery_epoch,
        "voters": None if plan.voters is None else [voter_json(v) for v in plan.voters],
        "demoted": [voter_json(v) for v in plan.demoted],
        "lost_voters": [voter_json(v) for v in plan.lost_voters],
        "given_up": _given_up(plan) if plan.chosen is not None else None,
        "notes": list(plan.notes),
        "steps": _steps(plan, nodes) if ok else [],
    }


@recover_quorum.command("plan")
@_survey_inputs
@click.option("--node", type=int, help="The controller to recover on (default: chosen for you).")
def plan_command(
    configs: tuple[str, ...], directories: tuple[str, ...], as_json: bool, node: int | None
) -> None:
    """Pick the longest surviving log and print the recovery steps; refuse a plan that
    would move a surviving node backwards. Nothing is written."""
    nodes = _nodes(configs, directories)
    plan = plan_recovery([_survivor(n) for n in nodes], node)
    info = _plan_json(plan, {n.name: n for n in nodes})
    if as_json:
        click.echo(json.dumps(info, indent=2))
    else:
        _print_plan(info)
    if not plan.ok:
        raise SystemExit(1)


def _print_plan(info: dict[str, Any]) -> None:
    chosen = info["chosen"]
    if chosen is not None:
        click.echo(
            f"Longest log: {chosen['name']} (node {chosen['node_id']}, end offset "
            f"{chosen['end_offset']}, last epoch {chosen['last_epoch']})"
        )
    if info["voters"] is not None:
        click.echo(f"Voters in that log: {', '.join(str(v['id']) for v in info['voters'])}")
        click.echo(f"Lost voters: {', '.join(str(v['id']) for v in info['lost_voters'])}")
    for note in info["notes"]:
        click.echo(f"Note: {note}")
    if info["refusals"]:
        for refusal in info["refusals"]:
            click.echo(f"REFUSED: {refusal}")
        return
    click.echo(f"Given up: {info['given_up']}")
    click.echo("Steps:")
    for i, step in enumerate(info["steps"], 1):
        click.echo(f"  {i}. {step}")


# --- apply -------------------------------------------------------------------------------


def _host(host: str | None) -> str:
    return "127.0.0.1" if host in (None, "", "0.0.0.0", "::") else str(host)


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            return True
    except OSError:
        return False


def _running_server(config_path: str, config: ServerConfig) -> str | None:
    """Why the node of ``config_path`` looks alive, or None.

    Three checks: a process holds the lock of its metadata log dir, a process whose
    command line runs ``server`` with this very config file, or any of its listeners
    accepts connections.
    """
    lock = DirLock(config.metadata_log_dir)
    try:
        lock.acquire()
    except ConfigError:
        return f"a process holds the lock of {config.metadata_log_dir}"
    except OSError:
        pass  # no such dir (yet): the other checks decide
    else:
        lock.release()
    wanted = os.path.realpath(config_path)
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        pids = []
    for pid in pids:
        if int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().decode("utf-8", "replace").split("\0")
        except OSError:
            continue
        if "server" not in argv:
            continue
        for i, arg in enumerate(argv[:-1]):
            if arg == "--config" and os.path.realpath(argv[i + 1]) == wanted:
                return f"process {pid} runs `{' '.join(a for a in argv if a)}`"
    for endpoint in config.listeners:
        if _accepts(_host(endpoint.host), endpoint.port):
            return f"something accepts connections on its listener {endpoint.connection_string()}"
    return None


def _reachable_voters(voters: list[Voter]) -> list[int]:
    found = []
    for voter in voters:
        if any(_accepts(e.host, e.port) for e in voter.endpoints):
            found.append(voter.node_id)
    return found


def _source_dir(value: str) -> str:
    """The metadata.log.dir named by ``--from``: a directory, or a server.properties."""
    if os.path.isdir(value):
        return value
    return _load_config(value).metadata_log_dir


def _own_voter(config: ServerConfig, meta: MetaProperties) -> Voter:
    endpoints = tuple(
        VoterEndpoint(e.listener_name, e.host or "localhost", e.port)
        for e in config.advertised_controller_listeners
    )
    return Voter(config.node_id, meta.directory_id, endpoints)


def _copy_log(source_dir: str, target_dir: str, stamp: str) -> str:
    """Put a copy of the source's metadata partition in place of the target's; the
    target's old copy is kept beside it (renamed so no node loads it), never deleted."""
    source = metadata_log_directory(source_dir)
    target = metadata_log_directory(target_dir)
    kept = join(target_dir, f"{METADATA_PARTITION_DIR}.before-recovery.{stamp}")
    staging = join(target_dir, f"{METADATA_PARTITION_DIR}.recovering.{stamp}")
    # The quorum state is the source node's votes, not ours; apply writes ours anew.
    shutil.copytree(source, staging, ignore=shutil.ignore_patterns(QUORUM_STATE))
    if os.path.exists(target):
        os.rename(target, kept)
    os.rename(staging, target)
    fd = os.open(target_dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return kept


@recover_quorum.command("apply")
@click.option("--node", "node_id", type=int, required=True, help="The controller to recover on.")
@click.option("--config", "config_path", required=True, help="That controller's server.properties.")
@click.option(
    "--from",
    "source",
    help="The metadata.log.dir (or server.properties) holding the longest log, when it is "
    "not this controller's own (a broker's, say).",
)
@click.option(
    "--min-epoch",
    type=int,
    default=0,
    help="The recovery epoch is at least this (`plan` gives it: above every survivor's).",
)
@click.option(
    "--i-understand-split-brain",
    "force",
    is_flag=True,
    help="Apply even though a majority of the old voters may be alive: two quorums could "
    "then commit conflicting metadata.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the audit record as JSON.")
def apply_command(
    node_id: int,
    config_path: str,
    source: str | None,
    min_epoch: int,
    force: bool,
    as_json: bool,
) -> None:
    """Make this stopped controller the only voter of the log (offline), in a new epoch,
    and record who did it. Refuses on a running node and while a majority may be alive."""
    fs = RealFileSystem()
    config = _load_config(config_path)
    if config.node_id != node_id:
        raise click.ClickException(f"{config_path} is node {config.node_id}, not {node_id}")
    if not config.is_controller:
        raise click.ClickException(f"{config_path}: node {node_id} is not a controller")
    meta_path = join(config.metadata_log_dir, META_PROPERTIES)
    try:
        meta = read_meta_properties(fs, meta_path)
    except (CorruptLogError, OSError) as e:
        raise click.ClickException(f"{meta_path}: {e}; format the node first") from None
    running = _running_server(config_path, config)
    if running is not None:
        raise click.ClickException(f"node {node_id} is running ({running}): stop it first")
    own = _survivor(_node(config_path, config.metadata_log_dir, config))
    survivors = [own]
    source_dir = config.metadata_log_dir
    if source is not None:
        source_dir = _source_dir(source)
        if os.path.realpath(source_dir) != os.path.realpath(config.metadata_log_dir):
            survivors.append(_survivor(_node(source, source_dir, None)))
    # Only this node and the source are seen here: whether the quorum is really lost is
    # asked of the network below, not of the disks.
    plan = plan_recovery(survivors, node_id, min_epoch, whole_survey=False)
    chosen = plan.chosen
    assert chosen is not None
    if plan.refusals:
        raise click.ClickException("refused: " + "; ".join(plan.refusals))
    voters = plan.voters
    assert voters is not None
    others = [v for v in voters if v.node_id != node_id]
    alive = _reachable_voters(others)
    can_form = len(alive) + (1 if voters.get(node_id) is not None else 0) >= voters.majority
    if can_form and not force:
        raise click.ClickException(
            f"a majority of the voters {sorted(voters.ids)} may be alive (controller "
            f"listeners accepting: {alive}): restart node {node_id} normally instead. If "
            "they are lost for good and something else answers on their ports, pass "
            "--i-understand-split-brain"
        )
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S%fZ")
    kept: str | None = None
    if chosen is not own:
        kept = _copy_log(source_dir, config.metadata_log_dir, stamp)
    directory = metadata_log_directory(config.metadata_log_dir)
    # The epoch first: a crash before the records are appended leaves a harmless bump,
    # while records in an epoch above the stored one could have the node lead a lower
    # epoch than its log's last. The node restarts unattached in the recovery epoch: it
    # cannot have voted in it, and as the only voter it elects itself in the next one.
    QuorumStateFile(fs, directory).write(StoredQuorumState(plan.recovery_epoch, None, None))
    # A torn tail (the survey stopped there) is cut now: recovery point 0 re-checks it all.
    log = DiskRaftLog.open(fs, directory, int(time.time() * 1000), recovery_point=0)
    try:
        end, last_epoch = log.end_offset(), log.last_epoch()
        present = voters.get(node_id)
        keep = (
            present
            if present is not None and present.key == (_own_voter(config, meta).key)
            else _own_voter(config, meta)
        )
        audit: dict[str, Any] = {
            "action": "recover-quorum apply",
            "tool_version": __version__,
            "user": getpass.getuser(),
            "host": socket.gethostname(),
            "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "node_id": node_id,
            "directory_id": to_kafka_str(meta.directory_id),
            "log": {
                "from": source or config_path,
                "copied": chosen is not own,
                "end_offset": end,
                "last_epoch": last_epoch,
            },
            "recovery_epoch": plan.recovery_epoch,
            "voters_before": [voter_json(v) for v in voters],
            "demoted": [voter_json(v) for v in voters if v != keep],
            "voters_after": [voter_json(keep)],
            "majority_reachable": alive,
            "forced": can_form,
            "given_up": (
                f"offsets past {end} that existed only on the lost voters' disks (unknowable)"
            ),
        }
        entries = recovery_entries(voters, keep, end, plan.recovery_epoch, audit)
        log.append(entries)
        log.flush()
        final_end = log.end_offset()
    finally:
        log.close()
    audit["log"] = {**audit["log"], "recovery_records": [end, final_end]}
    _append_audit_file(fs, config.metadata_log_dir, audit)
    if as_json:
        click.echo(json.dumps(audit, indent=2))
        return
    if kept is not None:
        click.echo(f"copied the metadata log from {source}; the old copy is kept at {kept}")
    click.echo(
        f"node {node_id} is now the only voter: demoted "
        f"{', '.join(str(v['id']) for v in audit['demoted'])} at offsets {end}..{final_end - 1} "
        f"in epoch {plan.recovery_epoch}"
    )
    click.echo(
        f"audit record written to the log and to {join(config.metadata_log_dir, AUDIT_FILE)}"
    )
    click.echo(
        f"next: start node {node_id} alone, then the other survivors, then add controllers "
        "with `odradek quorum add-controller`"
    )


def _append_audit_file(fs: RealFileSystem, metadata_log_dir: str, audit: dict[str, Any]) -> None:
    path = join(metadata_log_dir, AUDIT_FILE)
    records: list[Any] = []
    if fs.exists(path):
        try:
            loaded = json.loads(fs.read_file(path))
            records = loaded if isinstance(loaded, list) else [loaded]
        except json.JSONDecodeError:
            # Keep the damaged file's text rather than drop a past audit record.
            records = [{"unreadable": fs.read_file(path).decode("utf-8", "replace")}]
    records.append(audit)
    write_file_atomically(fs, path, json.dumps(records, indent=2).encode("utf-8"))


# --- audit -------------------------------------------------------------------------------


def _audit_json(text: str) -> dict[str, Any]:
    """An audit header's JSON; a damaged one is shown as it is rather than dropped."""
    try:
        found = json.loads(text)
    except json.JSONDecodeError:
        return {"unreadable": text}
    return found if isinstance(found, dict) else {"unreadable": text}


def _audit_line(audit: dict[str, Any]) -> str:
    demoted = ",".join(str(v["id"]) for v in audit.get("demoted", []))
    log = audit.get("log", {})
    return (
        f"{audit.get('time')} by {audit.get('user')}@{audit.get('host')}: node "
        f"{audit.get('node_id')} made sole voter in epoch {audit.get('recovery_epoch')}, "
        f"demoted {demoted}, from {log.get('from')} (end offset {log.get('end_offset')}, "
        f"epoch {log.get('last_epoch')}{', copied' if log.get('copied') else ''}), "
        f"odradek {audit.get('tool_version')}"
    )


@recover_quorum.command("audit")
@_survey_inputs
def audit_command(configs: tuple[str, ...], directories: tuple[str, ...], as_json: bool) -> None:
    """The recovery audit records in each node's metadata log and beside it."""
    fs = RealFileSystem()
    found: list[dict[str, Any]] = []
    for node in _nodes(configs, directories):
        log = survey(fs, metadata_log_directory(node.metadata_log_dir))
        for offset, text in log.audits:
            found.append(
                {"node": node.name, "where": f"log offset {offset}", "audit": _audit_json(text)}
            )
        path = join(node.metadata_log_dir, AUDIT_FILE)
        if fs.exists(path):
            stored = json.loads(fs.read_file(path))
            for audit in stored if isinstance(stored, list) else [stored]:
                found.append({"node": node.name, "where": path, "audit": audit})
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    if not found:
        click.echo("no recovery audit record")
    for item in found:
        click.echo(f"{item['node']} ({item['where']}): {_audit_line(item['audit'])}")
