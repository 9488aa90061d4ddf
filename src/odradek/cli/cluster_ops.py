"""``odradek cluster add-brokers / remove-brokers / cancel-reassignments / unregister-broker``.

This module owns the operator's side of growing and shrinking a cluster (the seed's
"alter cluster add brokers / remove brokers"): read the assignment from Metadata and
the partition sizes from DescribeLogDirs, plan with the pure
:func:`~odradek.controller.rebalance.plan_rebalance`, and run the plan through
AlterPartitionReassignments with Kafka's semantics (KIP-455: new replicas join and catch
up, then the old ones leave). While it runs it prints progress (bytes copied to the new
replicas and partitions done), optionally throttles the catch-up fetches
(``follower.replication.throttled.rate``, removed when done), and on Ctrl-C cancels
what is still moving. When every move is done it elects the new preferred leaders, so
that leadership is balanced too.

Bytes are the partitions' sizes on disk as their leaders report them in DescribeLogDirs
(one copy per moved replica); the progress counts what DescribeLogDirs reports on the
new replicas while they catch up.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import click

from odradek.cli.client import (
    Address,
    ClientSettings,
    ClusterClient,
    bootstrap_server_option,
    command_config_option,
    connect,
)
from odradek.controller.image import CONFIG_RESOURCE_BROKER
from odradek.controller.rebalance import RebalancePlan, plan_rebalance
from odradek.protocol.error_codes import ErrorCode, error_name
from odradek.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    DescribeLogDirsRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    ListPartitionReassignmentsRequest,
    MetadataRequest,
    UnregisterBrokerRequest,
)
from odradek.protocol.messages import alter_partition_reassignments_request as apr
from odradek.protocol.messages import elect_leaders_request as elr
from odradek.protocol.messages import incremental_alter_configs_request as iac
from odradek.replication.throttle import FOLLOWER_REPLICATION_THROTTLED_RATE
from odradek.shell.peer_client import PeerConnection, PeerUnavailable

TIMEOUT_S: Final = 30.0
CLIENT_NAME: Final = "odradek-cluster-ops"
METADATA_VERSION: Final = 12
DESCRIBE_LOG_DIRS_VERSION: Final = 4
ELECT_LEADERS_VERSION: Final = 2
INCREMENTAL_ALTER_CONFIGS_VERSION: Final = 1
POLL_S: Final = 0.5
_SET, _DELETE = 0, 1
_PREFERRED = 0

Key = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ClusterView:
    brokers: dict[int, tuple[str, int]]
    """The live brokers and their addresses."""
    replicas: dict[Key, list[int]]
    leaders: dict[Key, int]


class OperationFailed(click.ClickException):
    exit_code = 1


def parse_brokers(text: str) -> list[int]:
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not a list of broker ids", param_hint="--brokers"
        ) from None
    if not ids:
        raise click.BadParameter("no broker id given", param_hint="--brokers")
    return sorted(set(ids))


def _mb(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"


# ---------------------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------------------


async def cluster_view(client: ClusterClient) -> ClusterView:
    response = await client.request(
        MetadataRequest(topics=None, allow_auto_topic_creation=False), METADATA_VERSION, TIMEOUT_S
    )
    brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
    replicas: dict[Key, list[int]] = {}
    leaders: dict[Key, int] = {}
    for topic in response.topics:
        if topic.error_code != ErrorCode.NONE or not topic.name:
            continue
        for p in topic.partitions:
            replicas[(topic.name, p.partition_index)] = list(p.replica_nodes)
            leaders[(topic.name, p.partition_index)] = p.leader_id
    return ClusterView(brokers, replicas, leaders)


async def broker_sizes(address: Address, settings: ClientSettings) -> dict[Key, int]:
    """The size of every partition hosted on one broker (DescribeLogDirs, which each
    broker answers for its own disks only: no fail-over)."""
    peer = PeerConnection(
        *address,
        client_id=settings.client_id,
        connect_timeout_s=settings.connect_timeout_s,
        security=settings.security,
    )
    try:
        response = await peer.request(
            DescribeLogDirsRequest(topics=None),
            DESCRIBE_LOG_DIRS_VERSION,
            settings.request_timeout_s or TIMEOUT_S,
        )
    finally:
        await peer.close()
    return {
        (topic.name, p.partition_index): p.partition_size
        for result in response.results
        for topic in result.topics
        for p in topic.partitions
    }


async def partition_sizes(view: ClusterView, settings: ClientSettings) -> dict[Key, int]:
    """Each partition's size on its leader (on any replica that answers when the leader
    cannot: a copy on a follower is at most a fetch behind)."""
    sizes: dict[Key, int] = {}
    by_broker: dict[int, dict[Key, int]] = {}
    for broker, address in sorted(view.brokers.items()):
        with contextlib.suppress(PeerUnavailable, TimeoutError):
            by_broker[broker] = await broker_sizes(address, settings)
    for key, replicas in view.replicas.items():
        leader = view.leaders.get(key, -1)
        if key in by_broker.get(leader, {}):
            sizes[key] = by_broker[leader][key]
        else:
            sizes[key] = max((by_broker.get(b, {}).get(key, 0) for b in replicas), default=0)
    return sizes


async def ongoing(client: ClusterClient) -> dict[Key, tuple[list[int], list[int], list[int]]]:
    response = await client.request(ListPartitionReassignmentsRequest(topics=None), 0, TIMEOUT_S)
    if response.error_code != ErrorCode.NONE:
        raise OperationFailed(
            f"ListPartitionReassignments: {error_name(response.error_code)} "
            f"{response.error_message or ''}"
        )
    return {
        (topic.name, p.partition_index): (
            list(p.replicas),
            list(p.adding_replicas),
            list(p.removing_replicas),
        )
        for topic in response.topics
        for p in topic.partitions
    }


async def alter(client: ClusterClient, targets: Mapping[Key, Sequence[int] | None]) -> list[str]:
    """AlterPartitionReassignments; the problems, one line per refused partition.

    Sent again through another broker when the answer is lost: the same target a second
    time is taken against the same original replicas, so it changes nothing more, and a
    second cancel is refused with NO_REASSIGNMENT_IN_PROGRESS, which is reported."""
    by_topic: dict[str, list[apr.ReassignablePartition]] = {}
    for (topic, index), replicas in sorted(targets.items()):
        by_topic.setdefault(topic, []).append(
            apr.ReassignablePartition(
                partition_index=index, replicas=None if replicas is None else list(replicas)
            )
        )
    response = await client.request(
        AlterPartitionReassignmentsRequest(
            topics=[apr.ReassignableTopic(name=t, partitions=ps) for t, ps in by_topic.items()]
        ),
        0,
        TIMEOUT_S,
    )
    problems = []
    if response.error_code != ErrorCode.NONE:
        problems.append(f"{error_name(response.error_code)}: {response.error_message or ''}")
    for topic in response.responses:
        for p in topic.partitions:
            if p.error_code != ErrorCode.NONE:
                problems.append(
                    f"{topic.name}-{p.partition_index}: {error_name(p.error_code)} "
                    f"{p.error_message or ''}".rstrip()
                )
    return problems


async def set_throttle(client: ClusterClient, rate: int | None) -> None:
    """Set (or, with None, remove) the cluster-wide catch-up throttle."""
    operation = (
        iac.AlterableConfig(
            name=FOLLOWER_REPLICATION_THROTTLED_RATE, config_operation=_DELETE, value=None
        )
        if rate is None
        else iac.AlterableConfig(
            name=FOLLOWER_REPLICATION_THROTTLED_RATE, config_operation=_SET, value=str(rate)
        )
    )
    response = await client.request(
        IncrementalAlterConfigsRequest(
            resources=[
                iac.AlterConfigsResource(
                    resource_type=CONFIG_RESOURCE_BROKER, resource_name="", configs=[operation]
                )
            ]
        ),
        INCREMENTAL_ALTER_CONFIGS_VERSION,
        TIMEOUT_S,
    )
    for result in response.responses:
        if result.error_code != ErrorCode.NONE:
            raise OperationFailed(
                f"cannot set {FOLLOWER_REPLICATION_THROTTLED_RATE}: "
                f"{error_name(result.error_code)} {result.error_message or ''}"
            )


async def elect_preferred(client: ClusterClient, keys: Sequence[Key]) -> None:
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(keys):
        by_topic.setdefault(topic, []).append(index)
    if not by_topic:
        return
    # A preferred election asked twice finds the leaders in place the second time.
    await client.request(
        ElectLeadersRequest(
            election_type=_PREFERRED,
            topic_partitions=[
                elr.TopicPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()
            ],
        ),
        ELECT_LEADERS_VERSION,
        TIMEOUT_S,
    )


async def unregister(client: ClusterClient, broker_id: int) -> tuple[int, str | None]:
    response = await client.request(UnregisterBrokerRequest(broker_id=broker_id), 0, TIMEOUT_S)
    if response.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED and client.resent:
        # Sent again after a lost answer: the first attempt unregistered it.
        return ErrorCode.NONE, None
    return response.error_code, response.error_message


# ---------------------------------------------------------------------------------------
# Planning and running
# ---------------------------------------------------------------------------------------


def format_plan(plan: RebalancePlan, current: Mapping[Key, Sequence[int]]) -> list[str]:
    lines = []
    moved_keys = {key for key, _, _ in plan.moves}
    for key in sorted(plan.assignments):
        what = "move" if key in moved_keys else "leader order"
        lines.append(
            f"  {key[0]}-{key[1]}: {list(current[key])} -> {plan.assignments[key]} ({what})"
        )
    lines.append(
        f"{plan.moved_replicas} replica(s) move (the fewest that balance the cluster: "
        f"{plan.minimum_moves}), {_mb(plan.bytes_to_move)} to copy "
        f"({plan.bytes_to_move} bytes, from the leaders' DescribeLogDirs sizes)"
    )
    lines.append(
        "replicas per broker after: "
        + ", ".join(f"{b}: {c}" for b, c in sorted(plan.replica_counts.items()))
    )
    lines.append(
        "preferred leaders per broker after: "
        + ", ".join(f"{b}: {c}" for b, c in sorted(plan.leader_counts.items()))
    )
    return lines


async def _plan(
    client: ClusterClient, adding: list[int], removing: list[int]
) -> tuple[ClusterView, RebalancePlan, dict[Key, int]]:
    view = await cluster_view(client)
    running = await ongoing(client)
    if running:
        raise OperationFailed(
            f"{len(running)} partition reassignment(s) in progress; wait for them or run "
            "odradek cluster cancel-reassignments"
        )
    missing = [b for b in adding if b not in view.brokers]
    if missing:
        raise OperationFailed(f"broker(s) {missing} are not registered and alive; start them first")
    holding = {b for replicas in view.replicas.values() for b in replicas}
    # Brokers that hold replicas keep their share even while briefly fenced: only the
    # brokers named in --brokers of remove-brokers give theirs up.
    targets = sorted((set(view.brokers) | holding | set(adding)) - set(removing))
    sizes = await partition_sizes(view, client.settings)
    try:
        plan = plan_rebalance(view.replicas, targets, sizes)
    except ValueError as e:
        raise OperationFailed(str(e)) from None
    return view, plan, sizes


async def _progress(
    client: ClusterClient,
    view: ClusterView,
    plan: RebalancePlan,
    sizes: Mapping[Key, int],
    timeout_s: float,
) -> None:
    """Poll until every partition of the plan is done; print a progress line on change."""
    keys = set(plan.assignments)
    deadline = time.monotonic() + timeout_s
    last = ""
    tty = sys.stdout.isatty()
    while True:
        running = {k: v for k, v in (await ongoing(client)).items() if k in keys}
        # Done means the replicas are the target, not only that none is listed as moving:
        # the broker answering may not have applied the reassignment yet (it lists
        # nothing just after the alter), and the partitions would pass for done at once.
        current = await cluster_view(client)
        for key, target in plan.assignments.items():
            if key not in running and current.replicas.get(key) != list(target):
                running[key] = (list(target), [], [])
        done_bytes = sum(sizes.get(k, 0) for k, _, _ in plan.moves if k not in running)
        adding_brokers = {b for _, (_, adding, _) in running.items() for b in adding}
        for broker in sorted(adding_brokers):
            address = view.brokers.get(broker)
            if address is None:
                continue
            try:
                copied = await broker_sizes(address, client.settings)
            except (PeerUnavailable, TimeoutError):
                continue
            for key, (_, adding, _) in running.items():
                if broker in adding:
                    done_bytes += min(copied.get(key, 0), sizes.get(key, 0))
        line = (
            f"moved {_mb(done_bytes)} of {_mb(plan.bytes_to_move)}, "
            f"partitions {len(keys) - len(running)}/{len(keys)} done"
        )
        if line != last:
            click.echo(("\r" + line) if tty else line, nl=not tty)
            last = line
        if not running:
            if tty:
                click.echo()
            return
        if time.monotonic() > deadline:
            raise OperationFailed(
                f"not done after {timeout_s:g} s; the reassignment goes on (odradek cluster "
                "cancel-reassignments stops it)"
            )
        await asyncio.sleep(POLL_S)


async def _run(
    client: ClusterClient,
    view: ClusterView,
    plan: RebalancePlan,
    sizes: Mapping[Key, int],
    throttle: int | None,
    timeout_s: float,
) -> None:
    if throttle is not None:
        await set_throttle(client, throttle)
    problems = await alter(client, plan.assignments)
    if problems:
        raise OperationFailed("reassignment refused:\n" + "\n".join(problems))
    await _progress(client, view, plan, sizes, timeout_s)
    if throttle is not None:
        await set_throttle(client, None)
    await elect_preferred(client, sorted(plan.assignments))


async def _cancel(client: ClusterClient, keys: set[Key] | None, throttle: bool) -> int:
    """Cancel the reassignments of ``keys`` (all when None); how many were cancelled."""
    running = await ongoing(client)
    wanted = {k: None for k in running if keys is None or k in keys}
    problems = await alter(client, wanted) if wanted else []
    for problem in problems:
        # NO_REASSIGNMENT_IN_PROGRESS: it completed between the listing and now.
        click.echo(problem, err=True)
    if throttle:
        await set_throttle(client, None)
    return len(wanted) - len(problems)


def _execute(
    client: ClusterClient,
    adding: list[int],
    removing: list[int],
    dry_run: bool,
    throttle: int | None,
    timeout_s: float,
) -> RebalancePlan:
    view, plan, sizes = client.run(lambda: _plan(client, adding, removing))
    for line in format_plan(plan, view.replicas):
        click.echo(line)
    if dry_run or not plan.assignments:
        if not plan.assignments:
            click.echo("already balanced: nothing to move")
        return plan
    try:
        client.run(lambda: _run(client, view, plan, sizes, throttle, timeout_s))
    except KeyboardInterrupt:
        click.echo("\ninterrupted: cancelling the moves still in progress", err=True)
        cancelled = client.run(lambda: _cancel(client, set(plan.assignments), throttle is not None))
        click.echo(f"cancelled {cancelled} partition reassignment(s)", err=True)
        raise SystemExit(130) from None
    click.echo(f"done: {plan.moved_replicas} replica(s) moved")
    return plan


async def _unregister_when_stopped(
    client: ClusterClient, broker_ids: list[int], wait_s: float
) -> None:
    """Wait for each emptied broker to leave the live brokers, then unregister it.

    The operator stops these brokers now, and the one the command was talking to may be
    among them: the client then carries on through another broker that the cluster
    listed (or another bootstrap address)."""
    deadline = time.monotonic() + wait_s
    told: set[int] = set()
    for broker in broker_ids:
        while True:
            view = await cluster_view(client)
            if broker not in view.brokers:
                break
            if broker not in told:
                click.echo(
                    f"broker {broker} holds no replicas now; stop it (a running broker "
                    "registers again), then it is unregistered"
                )
                told.add(broker)
            if time.monotonic() > deadline:
                raise OperationFailed(
                    f"broker {broker} still runs after {wait_s:g} s; stop it and run "
                    f"odradek cluster unregister-broker --broker {broker}"
                )
            await asyncio.sleep(POLL_S)
        error, message = await unregister(client, broker)
        if error != ErrorCode.NONE:
            raise OperationFailed(
                f"unregistering broker {broker}: {error_name(error)} {message or ''}"
            )
        click.echo(f"broker {broker} unregistered")


# ---------------------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------------------


def _bootstrap(f: Any) -> Any:
    return bootstrap_server_option(command_config_option(f))


_dry_run = click.option(
    "--dry-run", is_flag=True, help="Print the plan and its bytes; move nothing."
)
_throttle = click.option(
    "--throttle",
    type=click.IntRange(min=1),
    default=None,
    metavar="BYTES_PER_SEC",
    help="Limit the new replicas' catch-up fetches (follower.replication.throttled.rate); "
    "removed when done.",
)
_timeout = click.option(
    "--timeout",
    "timeout_s",
    type=float,
    default=3600.0,
    show_default=True,
    help="Seconds to wait for the moves before giving up (they go on).",
)


@click.command("add-brokers")
@_bootstrap
@click.option("--brokers", required=True, help="Comma-separated ids of the brokers that joined.")
@_dry_run
@_throttle
@_timeout
def add_brokers(
    bootstrap_server: str | None,
    command_config: str | None,
    brokers: str,
    dry_run: bool,
    throttle: int | None,
    timeout_s: float,
) -> None:
    """Move replicas onto new brokers until replicas and preferred leaders are balanced
    (each broker within one of the mean), moving as few replicas as possible."""
    adding = parse_brokers(brokers)
    client = connect(bootstrap_server, command_config, client_id=CLIENT_NAME)
    _execute(client, adding, [], dry_run, throttle, timeout_s)


@click.command("remove-brokers")
@_bootstrap
@click.option("--brokers", required=True, help="Comma-separated ids of the brokers to empty.")
@_dry_run
@_throttle
@_timeout
@click.option(
    "--stop-timeout",
    "stop_timeout_s",
    type=float,
    default=600.0,
    show_default=True,
    help="Seconds to wait for the emptied brokers to be stopped before unregistering them.",
)
def remove_brokers(
    bootstrap_server: str | None,
    command_config: str | None,
    brokers: str,
    dry_run: bool,
    throttle: int | None,
    timeout_s: float,
    stop_timeout_s: float,
) -> None:
    """Move every replica off the brokers (keeping the placement balanced and every
    partition at its replication factor), then unregister them once they are stopped."""
    removing = parse_brokers(brokers)
    client = connect(bootstrap_server, command_config, client_id=CLIENT_NAME)
    _execute(client, [], removing, dry_run, throttle, timeout_s)
    if dry_run:
        return
    client.run(lambda: _unregister_when_stopped(client, removing, stop_timeout_s))


@click.command("cancel-reassignments")
@_bootstrap
def cancel_reassignments(bootstrap_server: str | None, command_config: str | None) -> None:
    """Cancel every partition reassignment in progress (the replicas go back to the
    original ones) and remove the catch-up throttle."""
    client = connect(bootstrap_server, command_config, client_id=CLIENT_NAME)
    cancelled = client.run(lambda: _cancel(client, None, True))
    click.echo(f"cancelled {cancelled} partition reassignment(s)")


@click.command("unregister-broker")
@_bootstrap
@click.option("--broker", "broker_id", type=int, required=True, help="The broker's id.")
def unregister_broker(
    bootstrap_server: str | None, command_config: str | None, broker_id: int
) -> None:
    """Remove a stopped broker's registration (refused while it holds replicas)."""
    client = connect(bootstrap_server, command_config, client_id=CLIENT_NAME)
    error, message = client.run(lambda: unregister(client, broker_id))
    if error != ErrorCode.NONE:
        raise OperationFailed(f"{error_name(error)}: {message or ''}")
    click.echo(f"broker {broker_id} unregistered")


COMMANDS: Final[tuple[Any, ...]] = (
    add_brokers,
    remove_brokers,
    cancel_reassignments,
    unregister_broker,
)
