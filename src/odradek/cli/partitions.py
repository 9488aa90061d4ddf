"""``odradek partitions recover``: bring back a partition no eligible replica can lead.

The last resort after the ISR and every eligible leader replica are gone for good:
make one surviving out-of-sync replica the leader on purpose (ElectLeaders, UNCLEAN,
with the chosen broker in :data:`~odradek.broker.elect_leaders.RECOVER_FROM_TAG`).
Acknowledged records that only the lost replicas held are given up; the command says
so before it acts, asks for confirmation, and afterwards prints the new leader's log
end. Replicas of the old ISR that come back truncate to the new leader and move what
they drop into their quarantine (``odradek quarantine list`` on them), from where
``odradek quarantine republish`` can write it to the partition again.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Final

import click

from odradek.broker.elect_leaders import RECOVER_FROM_TAG
from odradek.cli.client import (
    Address,
    ClientSettings,
    ClusterClient,
    bootstrap_server_option,
    command_config_option,
    connect,
)
from odradek.controller.preferred import UNCLEAN
from odradek.protocol.error_codes import ErrorCode, error_name
from odradek.protocol.messages import ElectLeadersRequest, ListOffsetsRequest, MetadataRequest
from odradek.protocol.messages import elect_leaders_request as elr
from odradek.protocol.messages import list_offsets_request as lor
from odradek.protocol.messages import metadata_request as mr
from odradek.shell.peer_client import PeerConnection, PeerUnavailable

TIMEOUT_S: Final = 10.0
METADATA_VERSION: Final = 12
ELECT_LEADERS_VERSION: Final = 2
LIST_OFFSETS_VERSION: Final = 7
LATEST: Final = -1


@dataclass(frozen=True, slots=True)
class PartitionView:
    """What Metadata says about the partition and the live brokers."""

    leader: int
    replicas: list[int]
    isr: list[int]
    live: dict[int, tuple[str, int]]


class RecoverRefused(click.ClickException):
    exit_code = 1


async def _view(client: ClusterClient, topic: str, partition: int) -> PartitionView:
    response: Any = await client.request(
        MetadataRequest(
            topics=[mr.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
        ),
        METADATA_VERSION,
        TIMEOUT_S,
    )
    live = {b.node_id: (b.host, b.port) for b in response.brokers}
    found = response.topics[0] if response.topics else None
    if found is None or found.error_code not in (
        ErrorCode.NONE,
        ErrorCode.LEADER_NOT_AVAILABLE,
    ):
        code = found.error_code if found is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        raise RecoverRefused(f"topic {topic}: {error_name(code)}")
    for p in found.partitions:
        if p.partition_index == partition:
            return PartitionView(p.leader_id, list(p.replica_nodes), list(p.isr_nodes), live)
    raise RecoverRefused(f"{topic} has no partition {partition}")


async def _elect(client: ClusterClient, topic: str, partition: int, broker: int) -> int:
    request = ElectLeadersRequest(
        election_type=UNCLEAN,
        topic_partitions=[elr.TopicPartitions(topic=topic, partitions=[partition])],
        timeout_ms=int(TIMEOUT_S * 1000),
        unknown_tagged_fields=[(RECOVER_FROM_TAG, broker.to_bytes(4, "big", signed=True))],
    )
    # Never sent twice: a lost answer leaves the operator to look, not the tool to guess.
    response: Any = await client.request(
        request,
        ELECT_LEADERS_VERSION,
        TIMEOUT_S,
        at_most_once=f"broker {broker} may or may not have been elected; see odradek "
        "cluster health before running this again",
    )
    if response.error_code != ErrorCode.NONE:
        return int(response.error_code)
    return int(response.replica_election_results[0].partition_result[0].error_code)


async def _log_end(
    address: Address, settings: ClientSettings, topic: str, partition: int
) -> int | None:
    peer = PeerConnection(
        *address,
        client_id=settings.client_id,
        connect_timeout_s=settings.connect_timeout_s,
        security=settings.security,
    )
    try:
        response: Any = await peer.request(
            ListOffsetsRequest(
                replica_id=-1,
                isolation_level=0,
                topics=[
                    lor.ListOffsetsTopic(
                        name=topic,
                        partitions=[
                            lor.ListOffsetsPartition(partition_index=partition, timestamp=LATEST)
                        ],
                    )
                ],
            ),
            LIST_OFFSETS_VERSION,
            settings.request_timeout_s or TIMEOUT_S,
        )
    except (PeerUnavailable, TimeoutError):
        return None
    finally:
        await peer.close()
    answer = response.topics[0].partitions[0]
    return int(answer.offset) if answer.error_code == ErrorCode.NONE else None


async def _recover(
    client: ClusterClient, topic: str, partition: int, broker: int, confirm: bool
) -> None:
    view = await _view(client, topic, partition)
    name = f"{topic}-{partition}"
    if view.leader >= 0:
        raise RecoverRefused(f"{name} has a leader (broker {view.leader}): nothing to recover")
    if broker not in view.replicas:
        raise RecoverRefused(f"broker {broker} is not a replica of {name} ({view.replicas})")
    if broker not in view.live:
        raise RecoverRefused(f"broker {broker} is not alive (live: {sorted(view.live)})")
    lost_holders = [r for r in view.isr if r != broker]
    click.echo(f"{name}: no leader; replicas {view.replicas}, last ISR {view.isr}")
    click.echo(
        f"Electing broker {broker}, which is NOT known to hold every acknowledged record.\n"
        f"Given up: acknowledged records beyond broker {broker}'s log end that only "
        f"{lost_holders or 'the lost replicas'} held. How many cannot be known while "
        "those replicas are gone; if one comes back it moves exactly those records "
        "to its quarantine (odradek quarantine list on that broker)."
    )
    if confirm and not click.confirm("Elect it and accept that loss?", default=False):
        raise RecoverRefused("not confirmed; nothing changed")
    error = await _elect(client, topic, partition, broker)
    if error != ErrorCode.NONE:
        raise RecoverRefused(f"election refused: {error_name(error)}")
    deadline = time.monotonic() + TIMEOUT_S
    while (view := await _view(client, topic, partition)).leader != broker:
        if time.monotonic() > deadline:
            raise RecoverRefused(f"broker {broker} was elected but does not lead yet")
        await asyncio.sleep(0.2)
    end = await _log_end(view.live[broker], client.settings, topic, partition)
    where = "unknown" if end is None else str(end)
    click.echo(f"{name} is led by broker {broker} again; its log ends at offset {where}.")


@click.group()
def partitions() -> None:
    """Partition-level operations."""


@partitions.command()
@bootstrap_server_option
@command_config_option
@click.option("--topic", required=True)
@click.option("--partition", required=True, type=int)
@click.option(
    "--from-broker", "broker", required=True, type=int, help="The surviving replica to elect."
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def recover(
    bootstrap_server: str | None,
    command_config: str | None,
    topic: str,
    partition: int,
    broker: int,
    yes: bool,
) -> None:
    """Make a surviving out-of-sync replica the leader of a partition that no in-sync
    or eligible replica can lead, accepting the loss of what only the others held."""
    client = connect(bootstrap_server, command_config, client_id="odradek-partitions-recover")
    client.run(lambda: _recover(client, topic, partition, broker, not yes))
