"""``odradek quorum``: look at the controller quorum and change its voters (KIP-853).

Like ``kafka-metadata-quorum``: ``describe`` asks the first controller of
``--bootstrap-controller`` (a list, tried in turn) that answers and follows it to the
leader; ``add-controller`` reads the new controller's
server.properties and meta.properties for its id, directory id and listener, and asks
the leader to make it a voter (it must be running and caught up, as an observer);
``remove-controller`` removes a voter by id and directory id.
"""

from __future__ import annotations

import json
import time
from typing import Any

import click

from odradek.broker.server_config import ServerConfig
from odradek.cli.client import (
    DESCRIBE_QUORUM_VERSION,
    Address,
    ClusterClient,
    bootstrap_controller_option,
    command_config_option,
    connect,
    describe_quorum_request,
)
from odradek.core.errors import ConfigError, CorruptLogError
from odradek.core.kafka_uuid import from_kafka_str, to_kafka_str
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    AddRaftVoterRequest,
    RemoveRaftVoterRequest,
)
from odradek.protocol.messages import add_raft_voter_request as av
from odradek.shell.real_fs import RealFileSystem
from odradek.storage.checkpoint import META_PROPERTIES, read_meta_properties
from odradek.storage.fs import join

TIMEOUT_S = 10.0
CLIENT_NAME = "odradek-quorum"


async def _describe(client: ClusterClient) -> tuple[Any, Address]:
    """DescribeQuorum, from the leader: the response and the leader's address.

    The first controller that answers is asked (the bootstrap controllers in turn), then
    the leader it names, directly."""
    response = await client.request(describe_quorum_request(), DESCRIBE_QUORUM_VERSION, TIMEOUT_S)
    assert client.current is not None
    address = client.current
    for _ in range(3):
        partition = response.topics[0].partitions[0]
        if partition.error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER:
            return response, address
        leader = next((n for n in response.nodes if n.node_id == partition.leader_id), None)
        if leader is None or not leader.listeners:
            # No leader to ask: this controller's own view (voters, the stall alarm).
            return response, address
        address = (leader.listeners[0].host, leader.listeners[0].port)
        response = await client.request_to(
            address, describe_quorum_request(), DESCRIBE_QUORUM_VERSION, TIMEOUT_S
        )
    raise click.ClickException("could not reach the quorum leader")


def _replica(state: Any, now_ms: int, high_watermark: int) -> dict[str, Any]:
    lag = high_watermark - state.log_end_offset if state.log_end_offset >= 0 else None
    return {
        "id": state.replica_id,
        "directory_id": to_kafka_str(state.replica_directory_id),
        "log_end_offset": state.log_end_offset,
        "lag": lag,
        "last_fetch_ms_ago": (
            now_ms - state.last_fetch_timestamp if state.last_fetch_timestamp >= 0 else None
        ),
        "last_caught_up_ms_ago": (
            now_ms - state.last_caught_up_timestamp if state.last_caught_up_timestamp >= 0 else None
        ),
    }


def describe_as_dict(response: Any) -> dict[str, Any]:
    partition = response.topics[0].partitions[0]
    now = int(time.time() * 1000)
    hw = partition.high_watermark
    return {
        "leader_id": partition.leader_id,
        "leader_epoch": partition.leader_epoch,
        "high_watermark": hw,
        "alarm": partition.error_message or None,
        "voters": [_replica(v, now, hw) for v in partition.current_voters],
        "observers": [_replica(o, now, hw) for o in partition.observers],
        "voter_endpoints": {
            str(n.node_id): [f"{e.name}://{e.host}:{e.port}" for e in n.listeners]
            for n in response.nodes
        },
    }


@click.group()
def quorum() -> None:
    """Inspect the controller quorum and change its voters."""


@quorum.command()
@bootstrap_controller_option
@command_config_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def describe(bootstrap_controller: str | None, command_config: str | None, as_json: bool) -> None:
    """Leader, epoch, high watermark, and every voter and observer with its lag."""
    client = connect(bootstrap_controller, command_config, kind="controller", client_id=CLIENT_NAME)
    response, _ = client.run(lambda: _describe(client))
    info = describe_as_dict(response)
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    click.echo(f"LeaderId:       {info['leader_id']}")
    click.echo(f"LeaderEpoch:    {info['leader_epoch']}")
    click.echo(f"HighWatermark:  {info['high_watermark']}")
    click.echo(f"Alarm:          {info['alarm'] or 'none'}")
    header = f"{'NodeId':>6}  {'DirectoryId':<22}  {'LogEndOffset':>12}  {'Lag':>6}  "
    click.echo(header + f"{'LastFetch':>10}  {'LastCaughtUp':>12}  Status")
    for status, rows in (("Voter", info["voters"]), ("Observer", info["observers"])):
        for r in rows:
            leads = r["id"] == info["leader_id"] and status == "Voter"
            status_text = "Leader" if leads else status
            fetch = "-" if r["last_fetch_ms_ago"] is None else f"{r['last_fetch_ms_ago']} ms"
            caught = (
                "-" if r["last_caught_up_ms_ago"] is None else f"{r['last_caught_up_ms_ago']} ms"
            )
            lag = "-" if r["lag"] is None else str(r["lag"])
            click.echo(
                f"{r['id']:>6}  {r['directory_id']:<22}  {r['log_end_offset']:>12}  {lag:>6}  "
                f"{fetch:>10}  {caught:>12}  {status_text}"
            )


async def _to_leader(client: ClusterClient, body: Any, version: int, what: str) -> Any:
    _, leader = await _describe(client)
    # A voter change is never sent twice: asked again after it was made, the leader
    # would refuse it, and the operator would be told the opposite of what happened.
    return await client.request_to(
        leader,
        body,
        version,
        TIMEOUT_S + 5,
        at_most_once=f"{what} may or may not have been done; see odradek quorum describe",
    )


def _report(response: Any, what: str) -> None:
    if response.error_code != ErrorCode.NONE:
        name = ErrorCode(response.error_code).name
        detail = f": {response.error_message}" if response.error_message else ""
        raise click.ClickException(f"{what} failed with {name}{detail}")
    click.echo(f"{what}: done")


@quorum.command("add-controller")
@bootstrap_controller_option
@command_config_option
@click.option(
    "--config", "config_path", required=True, help="The new controller's server.properties."
)
def add_controller(
    bootstrap_controller: str | None, command_config: str | None, config_path: str
) -> None:
    """Make a running, caught-up controller (an observer now) a voter."""
    client = connect(bootstrap_controller, command_config, kind="controller", client_id=CLIENT_NAME)
    try:
        with open(config_path, encoding="utf-8") as f:
            config = ServerConfig.load(f.read())
        meta = read_meta_properties(
            RealFileSystem(), join(config.metadata_log_dir, META_PROPERTIES)
        )
    except (OSError, ConfigError, CorruptLogError) as e:
        raise click.ClickException(str(e)) from None
    names = config.controller_listener_names
    listeners = [
        av.Listener(name=e.listener_name, host=e.host or "localhost", port=e.port)
        for e in config.advertised_controller_listeners
    ]
    if not names or not listeners:
        raise click.ClickException(f"{config_path}: no controller listener")
    request = AddRaftVoterRequest(
        cluster_id=meta.cluster_id,
        timeout_ms=int(TIMEOUT_S * 1000),
        voter_id=config.node_id,
        voter_directory_id=meta.directory_id,
        listeners=listeners,
    )
    what = f"add controller {config.node_id}"
    response = client.run(lambda: _to_leader(client, request, 0, what))
    _report(response, what)


@quorum.command("remove-controller")
@bootstrap_controller_option
@command_config_option
@click.option("--controller-id", type=int, required=True, help="The voter's node id.")
@click.option("--controller-directory-id", required=True, help="The voter's directory id.")
def remove_controller(
    bootstrap_controller: str | None,
    command_config: str | None,
    controller_id: int,
    controller_directory_id: str,
) -> None:
    """Remove a voter (by node id and metadata directory id)."""
    client = connect(bootstrap_controller, command_config, kind="controller", client_id=CLIENT_NAME)
    try:
        directory = from_kafka_str(controller_directory_id)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    request = RemoveRaftVoterRequest(
        cluster_id=None, voter_id=controller_id, voter_directory_id=directory
    )
    what = f"remove controller {controller_id}"
    response = client.run(lambda: _to_leader(client, request, 0, what))
    _report(response, what)
