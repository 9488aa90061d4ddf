"""``odradek cluster health``: one look at whether the cluster keeps its promises.

This module owns the health check an operator runs before and after a change: which
partitions are offline (no leader), which have fewer in-sync replicas than their
``min.insync.replicas`` (``acks=all`` writes fail there), which are under-replicated,
whether the metadata quorum has raised its stall alarm, which unclean elections happened
and how many acknowledged records they lost (kept by the controller in the topic config
``odradek.unclean.elections`` until the operator acknowledges them with ``odradek cluster
acknowledge-unclean-elections``), which brokers' log dirs failed (kept by the controller
in the broker config ``odradek.log.dirs.offline`` until the broker registers again), and
which topics are configured
so that an acknowledged write can be lost (replication factor above 1 with
``min.insync.replicas=1``, or ``unclean.leader.election.enable=true``). The exit status
is 0 only when there is no alarm, so scripts and monitors can use it directly.

The verdict is :func:`evaluate`, a pure function of plain values, so that every rule is
tested without a broker; :func:`gather_health` is the only part that talks to one (Metadata,
DescribeConfigs from any broker that answers, then DescribeQuorum from that same broker,
through :class:`~odradek.cli.client.ClusterClient`).

Each partition is reported under its most severe alarm only (offline, then under
``min.insync.replicas``, then under-replicated): an operator gets one line per broken
partition, and the exit status does not depend on the grouping.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import click

from odradek.cli.client import (
    ClusterClient,
    ConnectionFailed,
    bootstrap_server_option,
    command_config_option,
    connect,
    describe_quorum_request,
)
from odradek.controller.image import CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC
from odradek.controller.offline_log_dirs import OFFLINE_LOG_DIRS_CONFIG
from odradek.controller.unclean_history import (
    UNCLEAN_ELECTIONS_CONFIG,
    UncleanElection,
    parse_history,
)
from odradek.protocol.error_codes import ErrorCode, error_name
from odradek.protocol.messages import (
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    MetadataRequest,
)
from odradek.protocol.messages import describe_configs_request as dcr
from odradek.protocol.messages import incremental_alter_configs_request as iac
from odradek.raft.wire import METADATA_PARTITION, METADATA_TOPIC

TIMEOUT_S: Final = 10.0
CLIENT_NAME: Final = "odradek-cluster-health"
# The newest versions the broker serves (broker/topics.py, broker/config_requests.py); the
# flexible versions carry a null topic list, which asks for every topic.
METADATA_VERSION: Final = 12
DESCRIBE_CONFIGS_VERSION: Final = 4
DESCRIBE_QUORUM_VERSION: Final = 2
INCREMENTAL_ALTER_CONFIGS_VERSION: Final = 1
_DELETE: Final = 1  # IncrementalAlterConfigs' DELETE operation

MIN_INSYNC_REPLICAS: Final = "min.insync.replicas"
UNCLEAN_LEADER_ELECTION: Final = "unclean.leader.election.enable"

QuorumStatus = Literal["ok", "stalled", "unknown"]


# ---------------------------------------------------------------------------------------
# Plain values and the verdict (no I/O)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionState:
    """One partition as the Metadata response shows it."""

    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class TopicSafety:
    """The two configs of a topic that decide whether acknowledged writes survive.

    ``min_insync_replicas`` is None when the broker reported no value (or one we could
    not read); ``problem`` says why the configs could not be read at all.
    """

    min_insync_replicas: int | None = None
    unclean_leader_election: bool = False
    problem: str | None = None
    unclean_elections: tuple[UncleanElection, ...] = ()
    """What the controller recorded: unclean elections not yet acknowledged."""


@dataclass(frozen=True, slots=True)
class QuorumHealth:
    status: QuorumStatus
    message: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionAlarm:
    partition: PartitionState
    min_insync_replicas: int | None


@dataclass(frozen=True, slots=True)
class HealthReport:
    offline: tuple[PartitionAlarm, ...]
    under_min_isr: tuple[PartitionAlarm, ...]
    under_replicated: tuple[PartitionAlarm, ...]
    quorum: QuorumHealth
    warnings: tuple[str, ...] = field(default_factory=tuple)
    unclean_elections: tuple[tuple[str, UncleanElection], ...] = ()
    """(topic, election), oldest first within a topic: an alarm until acknowledged,
    because acknowledged records may be gone."""
    offline_log_dirs: tuple[tuple[int, tuple[str, ...]], ...] = ()
    """(broker, directory ids): log dirs that failed, as the controller recorded them;
    an alarm until the broker registers again with its dirs."""

    @property
    def healthy(self) -> bool:
        # An unknown quorum is not an alarm: an older broker that cannot answer
        # DescribeQuorum should not make every check fail. It is shown, not hidden.
        return not (
            self.offline
            or self.under_min_isr
            or self.under_replicated
            or self.unclean_elections
            or self.offline_log_dirs
            or self.quorum.status == "stalled"
        )


def evaluate(
    partitions: Iterable[PartitionState],
    topics: Mapping[str, TopicSafety],
    quorum: QuorumHealth,
    topic_problems: Mapping[str, str] | None = None,
    offline_log_dirs: Mapping[int, Sequence[str]] | None = None,
) -> HealthReport:
    """The alarms and warnings for a cluster with these partitions, configs and quorum.

    ``topics`` maps a topic name to its safety configs; a topic missing there is
    checked for offline and under-replicated partitions only. ``topic_problems`` are
    topics whose metadata the broker would not give (named with the error).
    """
    offline: list[PartitionAlarm] = []
    under_min_isr: list[PartitionAlarm] = []
    under_replicated: list[PartitionAlarm] = []
    replication_factor: dict[str, int] = {}
    for p in sorted(partitions, key=lambda p: (p.topic, p.partition)):
        safety = topics.get(p.topic, TopicSafety())
        # Kafka lets partitions of one topic differ (explicit assignments); the widest
        # is the one whose promise min.insync.replicas=1 weakens most.
        replication_factor[p.topic] = max(replication_factor.get(p.topic, 0), len(p.replicas))
        alarm = PartitionAlarm(p, safety.min_insync_replicas)
        if p.leader < 0:
            offline.append(alarm)
        elif safety.min_insync_replicas is not None and len(p.isr) < safety.min_insync_replicas:
            under_min_isr.append(alarm)
        elif len(p.isr) < len(p.replicas):
            under_replicated.append(alarm)
    warnings: list[str] = []
    for topic, problem in sorted((topic_problems or {}).items()):
        warnings.append(f"topic {topic}: metadata not available ({problem})")
    for topic in sorted(replication_factor):
        warnings += _topic_warnings(topic, replication_factor[topic], topics.get(topic))
    return HealthReport(
        offline=tuple(offline),
        under_min_isr=tuple(under_min_isr),
        under_replicated=tuple(under_replicated),
        quorum=quorum,
        warnings=tuple(warnings),
        unclean_elections=tuple(
            (topic, election)
            for topic in sorted(topics)
            for election in topics[topic].unclean_elections
        ),
        offline_log_dirs=tuple(
            (broker, tuple(dirs)) for broker, dirs in sorted((offline_log_dirs or {}).items())
        ),
    )


def _topic_warnings(topic: str, replication_factor: int, safety: TopicSafety | None) -> list[str]:
    if safety is None:
        return [f"topic {topic}: configs not read; min.insync.replicas not checked"]
    if safety.problem is not None:
        return [f"topic {topic}: configs not read ({safety.problem}); safety not checked"]
    warnings: list[str] = []
    min_isr = safety.min_insync_replicas
    if replication_factor > 1 and min_isr == 1:
        warnings.append(
            f"topic {topic}: replication factor {replication_factor} with "
            f"{MIN_INSYNC_REPLICAS}=1: an acks=all write can be acknowledged by the leader "
            "alone and lost with it"
        )
    if min_isr is not None and min_isr > replication_factor:
        warnings.append(
            f"topic {topic}: {MIN_INSYNC_REPLICAS}={min_isr} exceeds the replication factor "
            f"{replication_factor}: every acks=all write fails"
        )
    if safety.unclean_leader_election:
        warnings.append(
            f"topic {topic}: {UNCLEAN_LEADER_ELECTION}=true: an out-of-sync replica can "
            "become leader and drop acknowledged records"
        )
    return warnings


# ---------------------------------------------------------------------------------------
# Responses to plain values (no I/O)
# ---------------------------------------------------------------------------------------


def partitions_from_metadata(response: Any) -> tuple[list[PartitionState], dict[str, str]]:
    """Every partition in a MetadataResponse, and the topics that came back with an error."""
    partitions: list[PartitionState] = []
    problems: dict[str, str] = {}
    for topic in response.topics:
        name = topic.name or str(topic.topic_id)
        if topic.error_code != ErrorCode.NONE:
            problems[name] = error_name(topic.error_code)
            continue
        for p in topic.partitions:
            # LEADER_NOT_AVAILABLE on a partition comes with leader -1: offline below.
            partitions.append(
                PartitionState(
                    topic=name,
                    partition=p.partition_index,
                    leader=p.leader_id,
                    replicas=tuple(p.replica_nodes),
                    isr=tuple(p.isr_nodes),
                )
            )
    return partitions, problems


def safety_from_configs(response: Any) -> dict[str, TopicSafety]:
    """The topics' safety configs from a DescribeConfigsResponse."""
    found: dict[str, TopicSafety] = {}
    for result in response.results:
        if result.resource_type != CONFIG_RESOURCE_TOPIC:
            continue
        if result.error_code != ErrorCode.NONE:
            detail = f": {result.error_message}" if result.error_message else ""
            found[result.resource_name] = TopicSafety(
                problem=error_name(result.error_code) + detail
            )
            continue
        values = {c.name: c.value for c in result.configs}
        min_isr: int | None
        try:
            raw = values.get(MIN_INSYNC_REPLICAS)
            min_isr = int(raw) if raw is not None else None
        except ValueError:
            min_isr = None
        unclean = (values.get(UNCLEAN_LEADER_ELECTION) or "false").strip().lower() == "true"
        found[result.resource_name] = TopicSafety(
            min_insync_replicas=min_isr,
            unclean_leader_election=unclean,
            unclean_elections=tuple(parse_history(values.get(UNCLEAN_ELECTIONS_CONFIG))),
        )
    return found


def offline_log_dirs_from_configs(response: Any) -> dict[int, list[str]]:
    """Each broker's failed log dirs, from a DescribeConfigsResponse for brokers."""
    found: dict[int, list[str]] = {}
    for result in response.results:
        if result.resource_type != CONFIG_RESOURCE_BROKER or result.error_code:
            continue
        for entry in result.configs:
            if entry.name == OFFLINE_LOG_DIRS_CONFIG and entry.value:
                found[int(result.resource_name)] = [d for d in entry.value.split(",") if d]
    return found


def quorum_from_response(response: Any) -> QuorumHealth:
    """The quorum's health from a DescribeQuorumResponse (this node's own view)."""
    if response.error_code != ErrorCode.NONE:
        return QuorumHealth("unknown", f"DescribeQuorum failed: {error_name(response.error_code)}")
    partition = next(
        (
            p
            for t in response.topics
            if t.topic_name == METADATA_TOPIC
            for p in t.partitions
            if p.partition_index == METADATA_PARTITION
        ),
        None,
    )
    if partition is None:
        return QuorumHealth("unknown", "DescribeQuorum named no metadata partition")
    message = partition.error_message or None
    # The stall alarm travels in error_message whatever the error code, so it wins.
    if message is not None and "stalled" in message:
        return QuorumHealth("stalled", message)
    if partition.error_code != ErrorCode.NONE:
        return QuorumHealth("unknown", f"DescribeQuorum: {error_name(partition.error_code)}")
    if partition.leader_id < 0:
        # Between elections; a quorum that stays leaderless raises the stall alarm.
        return QuorumHealth("unknown", "no quorum leader known to this node")
    return QuorumHealth(
        "ok",
        message
        or (
            f"leader {partition.leader_id}, epoch {partition.leader_epoch}, "
            f"high watermark {partition.high_watermark}"
        ),
    )


# ---------------------------------------------------------------------------------------
# Output (no I/O but click.echo in the command)
# ---------------------------------------------------------------------------------------


def _alarm_as_dict(alarm: PartitionAlarm) -> dict[str, Any]:
    p = alarm.partition
    return {
        "topic": p.topic,
        "partition": p.partition,
        "leader": p.leader,
        "replicas": list(p.replicas),
        "isr": list(p.isr),
        "min_insync_replicas": alarm.min_insync_replicas,
    }


def report_as_dict(report: HealthReport) -> dict[str, Any]:
    return {
        "offline_partitions": [_alarm_as_dict(a) for a in report.offline],
        "under_min_isr_partitions": [_alarm_as_dict(a) for a in report.under_min_isr],
        "under_replicated_partitions": [_alarm_as_dict(a) for a in report.under_replicated],
        "unclean_elections": [_election_as_dict(t, e) for t, e in report.unclean_elections],
        "offline_log_dirs": [
            {"broker": broker, "directories": list(dirs)}
            for broker, dirs in report.offline_log_dirs
        ],
        "metadata_quorum": {"status": report.quorum.status, "message": report.quorum.message},
        "warnings": list(report.warnings),
        "healthy": report.healthy,
    }


def _election_as_dict(topic: str, election: UncleanElection) -> dict[str, Any]:
    return {
        "topic": topic,
        "partition": election.partition,
        "leader": election.leader,
        "leader_epoch": election.leader_epoch,
        "time_ms": election.time_ms,
        "requested": election.requested,
        # null: no replica of the old ISR has come back and reported yet.
        "estimated_lost_records": election.estimated_lost,
        "acknowledged_lost_at_least": election.acknowledged_lost,
        "loss_reports": [
            {
                "broker": r.broker,
                "high_watermark": r.high_watermark,
                "truncated_to": r.truncated_to,
                "log_end": r.log_end,
            }
            for r in election.losses
        ],
    }


def _election_line(topic: str, e: UncleanElection) -> str:
    when = (
        datetime.datetime.fromtimestamp(e.time_ms / 1000, datetime.UTC).strftime(
            "%Y-%m-%d %H:%M:%S UTC"
        )
        if e.time_ms > 0
        else "time not recorded"
    )
    how = "by request (partitions recover)" if e.requested else "unclean.leader.election"
    leader = f"broker {e.leader}" if e.leader >= 0 else "a leader not on record"
    if e.estimated_lost is None:
        lost = "loss unknown until a replica of the old ISR returns"
    else:
        reporters = ",".join(str(b) for b in sorted({r.broker for r in e.losses}))
        lost = (
            f"{e.estimated_lost} records dropped, at least {e.acknowledged_lost} of them "
            f"acknowledged (reported by broker {reporters}; in their quarantine)"
        )
    return f"  {topic}-{e.partition}: {leader} in epoch {e.leader_epoch}, {when}, {how}: {lost}"


def _ids(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids) or "-"


def _section(title: str, alarms: Sequence[PartitionAlarm], with_min_isr: bool) -> list[str]:
    if not alarms:
        return [f"{title}: none"]
    width = max(len("PARTITION"), *(len(a.partition.name) for a in alarms))
    header = f"  {'PARTITION':<{width}}  {'LEADER':>6}  {'REPLICAS':<12}  ISR"
    lines = [f"{title}: {len(alarms)}", header + ("  (MIN ISR)" if with_min_isr else "")]
    for a in alarms:
        p = a.partition
        row = f"  {p.name:<{width}}  {p.leader:>6}  {_ids(p.replicas):<12}  {_ids(p.isr)}"
        if with_min_isr:
            row += f"  ({a.min_insync_replicas})"
        lines.append(row)
    return lines


def format_report(report: HealthReport) -> list[str]:
    lines = _section("offline partitions", report.offline, False)
    lines += _section("under min.insync.replicas", report.under_min_isr, True)
    lines += _section("under-replicated partitions", report.under_replicated, False)
    if report.unclean_elections:
        lines.append(
            f"unclean elections: {len(report.unclean_elections)} "
            "(odradek cluster acknowledge-unclean-elections --topic T, once handled)"
        )
        lines += [_election_line(t, e) for t, e in report.unclean_elections]
    else:
        lines.append("unclean elections: none")
    if report.offline_log_dirs:
        lines.append(
            f"offline log dirs: {len(report.offline_log_dirs)} broker(s) (the broker's log "
            "names the path; repair the disk and restart the broker)"
        )
        lines += [
            f"  broker {broker}: log dir {', '.join(dirs)} failed; its replicas are offline"
            for broker, dirs in report.offline_log_dirs
        ]
    else:
        lines.append("offline log dirs: none")
    quorum = report.quorum
    lines.append(
        f"metadata quorum: {quorum.status}" + (f" ({quorum.message})" if quorum.message else "")
    )
    if report.warnings:
        lines.append(f"warnings: {len(report.warnings)}")
        lines += [f"  {w}" for w in report.warnings]
    else:
        lines.append("warnings: none")
    lines.append("healthy" if report.healthy else "ALARM")
    return lines


# ---------------------------------------------------------------------------------------
# The broker conversation and the command
# ---------------------------------------------------------------------------------------


async def gather_health(client: ClusterClient) -> HealthReport:
    metadata = await client.request(
        MetadataRequest(topics=None, allow_auto_topic_creation=False),
        METADATA_VERSION,
        TIMEOUT_S,
    )
    partitions, problems = partitions_from_metadata(metadata)
    names = sorted({p.topic for p in partitions})
    safety: dict[str, TopicSafety] = {}
    if names:
        configs = await client.request(
            DescribeConfigsRequest(
                resources=[
                    dcr.DescribeConfigsResource(
                        resource_type=CONFIG_RESOURCE_TOPIC,
                        resource_name=name,
                        configuration_keys=[
                            MIN_INSYNC_REPLICAS,
                            UNCLEAN_LEADER_ELECTION,
                            UNCLEAN_ELECTIONS_CONFIG,
                        ],
                    )
                    for name in names
                ]
            ),
            DESCRIBE_CONFIGS_VERSION,
            TIMEOUT_S,
        )
        safety = safety_from_configs(configs)
    # Every broker the cluster knows of, also those that stopped (their replicas name
    # them): the controller's record of failed log dirs outlives the broker.
    brokers = sorted(
        {b.node_id for b in metadata.brokers} | {r for p in partitions for r in p.replicas}
    )
    offline_dirs = offline_log_dirs_from_configs(
        await client.request(
            DescribeConfigsRequest(
                resources=[
                    dcr.DescribeConfigsResource(
                        resource_type=CONFIG_RESOURCE_BROKER,
                        resource_name=str(broker),
                        configuration_keys=[OFFLINE_LOG_DIRS_CONFIG],
                    )
                    for broker in brokers
                ]
            ),
            DESCRIBE_CONFIGS_VERSION,
            TIMEOUT_S,
        )
    )
    # Last, and of the broker that answered: a broker without DescribeQuorum closes
    # the connection, which must not send the question round the whole cluster.
    quorum = await _quorum(client)
    return evaluate(partitions, safety, quorum, problems, offline_dirs)


async def _quorum(client: ClusterClient) -> QuorumHealth:
    assert client.current is not None  # the Metadata request was answered
    try:
        response = await client.request_to(
            client.current, describe_quorum_request(), DESCRIBE_QUORUM_VERSION, TIMEOUT_S
        )
    except ConnectionFailed as e:
        # An unsupported API closes the connection; the partitions are still worth a
        # report, so the quorum is "unknown" rather than the whole check failing.
        return QuorumHealth("unknown", f"DescribeQuorum not answered: {e.message}")
    return quorum_from_response(response)


@click.group()
def cluster() -> None:
    """Check the health of the whole cluster; add, remove and rebalance brokers."""


@cluster.command()
@bootstrap_server_option
@command_config_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def health(
    ctx: click.Context, bootstrap_server: str | None, command_config: str | None, as_json: bool
) -> None:
    """Offline, under-min-ISR and under-replicated partitions, unclean elections and their
    loss, the metadata quorum, and unsafe topic configs. Exit status 0 when there is no
    alarm, 1 when there is one, 2 when no broker can be asked."""
    client = connect(bootstrap_server, command_config, client_id=CLIENT_NAME)
    report = client.run(lambda: gather_health(client))
    if as_json:
        click.echo(json.dumps(report_as_dict(report), indent=2))
    else:
        for line in format_report(report):
            click.echo(line)
    ctx.exit(0 if report.healthy else 1)


@cluster.command("acknowledge-unclean-elections")
@bootstrap_server_option
@command_config_option
@click.option("--topic", "topics", required=True, multiple=True, help="A topic (repeatable).")
def acknowledge_unclean_elections(
    bootstrap_server: str | None, command_config: str | None, topics: tuple[str, ...]
) -> None:
    """Clear a topic's record of unclean elections once the loss has been dealt with
    (the dropped records are in the quarantine of the brokers that reported them:
    ``odradek quarantine list``). Deletes the topic config odradek.unclean.elections."""
    client = connect(bootstrap_server, command_config, client_id=CLIENT_NAME)
    failures = client.run(lambda: _acknowledge(client, topics))
    for topic in topics:
        if topic in failures:
            click.echo(f"{topic}: not acknowledged: {failures[topic]}", err=True)
        else:
            click.echo(f"{topic}: unclean elections acknowledged")
    if failures:
        raise SystemExit(1)


async def _acknowledge(client: ClusterClient, topics: Sequence[str]) -> dict[str, str]:
    # Deleting the config again is harmless, so the request may go to another broker.
    response = await client.request(
        IncrementalAlterConfigsRequest(
            resources=[
                iac.AlterConfigsResource(
                    resource_type=CONFIG_RESOURCE_TOPIC,
                    resource_name=topic,
                    configs=[
                        iac.AlterableConfig(
                            name=UNCLEAN_ELECTIONS_CONFIG, config_operation=_DELETE, value=None
                        )
                    ],
                )
                for topic in topics
            ]
        ),
        INCREMENTAL_ALTER_CONFIGS_VERSION,
        TIMEOUT_S,
    )
    return {
        r.resource_name: f"{error_name(r.error_code)} {r.error_message or ''}".strip()
        for r in response.responses
        if r.error_code != ErrorCode.NONE
    }


def _register_operations() -> None:
    # Grow, shrink and rebalance live in their own module; they are subcommands here.
    from odradek.cli.cluster_ops import COMMANDS

    for command in COMMANDS:
        cluster.add_command(command)


_register_operations()
