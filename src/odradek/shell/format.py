"""``odradek storage format``: give each log dir its identity and the metadata log its voters.

As ``kafka-storage format`` (Kafka 3.9) does it:

* every log dir gets a ``meta.properties`` with the cluster id, the node id and a new
  random ``directory.id``;
* a controller of a dynamic quorum (``controller.quorum.bootstrap.servers``, KIP-853)
  must say who the first voters are: ``--standalone`` (this node alone),
  ``--initial-controllers`` (the whole set, each with its directory id) or
  ``--no-initial-controllers`` (none: the node joins an existing quorum later). With a
  voter set, the bootstrap checkpoint ``00000000000000000000-0000000000.checkpoint``
  holding it is written into ``<metadata.log.dir>/__cluster_metadata-0``, and this
  node's metadata dir takes the directory id its voter entry names, so the voter set
  and the disk agree;
* with static ``controller.quorum.voters`` the voters come from the configuration and
  those flags are refused; broker-only nodes never carry voters. No checkpoint is
  written then, as Kafka writes none (a node reads a missing checkpoint as "no voters").
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from odradek.broker.server_config import ServerConfig
from odradek.core.errors import ConfigError
from odradek.core.kafka_uuid import from_kafka_str, to_kafka_str
from odradek.raft.disk_log import metadata_log_directory
from odradek.raft.snapshot import BOOTSTRAP_SNAPSHOT_ID, bootstrap_snapshot, snapshot_file_name
from odradek.raft.voters import Voter, VoterEndpoint, VoterSet
from odradek.storage.checkpoint import META_PROPERTIES, MetaProperties, read_meta_properties
from odradek.storage.fs import FileSystem, join, write_file_atomically
from odradek.storage.log_dir import format_log_dir

# ID@HOST:PORT:DIRID, the host possibly an [IPv6] literal.
_INITIAL_CONTROLLER = re.compile(r"(-?\d+)@(\[[^\]]+\]|[^:@\[\]]+):(\d+):([A-Za-z0-9_-]+)")


@dataclass(frozen=True)
class InitialController:
    node_id: int
    host: str
    port: int
    directory_id: uuid.UUID


def parse_initial_controllers(text: str) -> list[InitialController]:
    """Parse ``--initial-controllers``; a bad entry raises :class:`ConfigError`."""
    found: list[InitialController] = []
    for entry in (e.strip() for e in text.split(",")):
        match = _INITIAL_CONTROLLER.fullmatch(entry)
        if match is None:
            raise ConfigError(
                f"--initial-controllers: {entry!r} is not in the form ID@HOST:PORT:DIRECTORY_ID"
            )
        node, host, port, directory = match.groups()
        try:
            directory_id = from_kafka_str(directory)
        except ValueError as e:
            raise ConfigError(f"--initial-controllers: {entry!r}: {e}") from None
        if int(node) < 0 or not 0 < int(port) < 65536:
            raise ConfigError(f"--initial-controllers: {entry!r}: bad node id or port")
        found.append(InitialController(int(node), host.strip("[]"), int(port), directory_id))
    ids = [c.node_id for c in found]
    if len(ids) != len(set(ids)):
        raise ConfigError(f"--initial-controllers lists a node twice: {ids}")
    directories = [c.directory_id for c in found]
    if len(directories) != len(set(directories)):
        raise ConfigError("--initial-controllers gives two voters the same directory id")
    return found


def format_node(
    fs: FileSystem,
    config: ServerConfig,
    cluster_id: str,
    *,
    standalone: bool = False,
    initial_controllers: str | None = None,
    no_initial_controllers: bool = False,
    ignore_formatted: bool = False,
    now_ms: int = 0,
) -> list[str]:
    """Format every log dir of this node; return what was done, one line each.

    Nothing is written unless every dir can be formatted (or, with
    ``ignore_formatted``, already is): a refusal leaves the disks as they were.
    """
    voters, own_directory = _initial_voters(
        config, standalone, initial_controllers, no_initial_controllers
    )
    dirs = list(dict.fromkeys([*config.log_dirs, config.metadata_log_dir]))
    pending = [d for d in dirs if not _already_formatted(fs, d, cluster_id, config.node_id)]
    done = [f"{d} is already formatted" for d in dirs if d not in pending]
    if done and not ignore_formatted:
        raise ConfigError(
            f"{', '.join(d for d in dirs if d not in pending)} is already formatted; "
            "use --ignore-formatted to accept that"
        )
    for directory in pending:
        metadata = directory == config.metadata_log_dir
        directory_id = own_directory if metadata and own_directory else uuid.uuid4()
        if metadata and voters is not None:
            # Standalone: the voter is this dir, whose id is only chosen now.
            voters = _with_directory(voters, config.node_id, directory_id, standalone)
            done.append(_write_bootstrap(fs, directory, voters, now_ms))
        format_log_dir(fs, directory, MetaProperties(cluster_id, config.node_id, directory_id))
        done.append(f"formatted {directory} (cluster {cluster_id}, node {config.node_id})")
    return done


def _already_formatted(fs: FileSystem, directory: str, cluster_id: str, node_id: int) -> bool:
    path = join(directory, META_PROPERTIES)
    if not fs.exists(path):
        return False
    existing = read_meta_properties(fs, path)
    if existing.cluster_id != cluster_id or existing.node_id != node_id:
        raise ConfigError(
            f"{directory} is already formatted for cluster {existing.cluster_id}, "
            f"node {existing.node_id}"
        )
    return True


def _initial_voters(
    config: ServerConfig,
    standalone: bool,
    initial_controllers: str | None,
    no_initial_controllers: bool,
) -> tuple[VoterSet | None, uuid.UUID | None]:
    """The voter set to bootstrap with (None: none) and this node's metadata dir id."""
    chosen = [
        flag
        for flag, given in [
            ("--standalone", standalone),
            ("--initial-controllers", initial_controllers is not None),
            ("--no-initial-controllers", no_initial_controllers),
        ]
        if given
    ]
    if len(chosen) > 1:
        raise ValueError(f"{' and '.join(chosen)} exclude each other")
    if chosen and config.controller_quorum_voters:
        raise ConfigError(
            f"{chosen[0]} is for a dynamic quorum, but controller.quorum.voters fixes the "
            "voters; remove controller.quorum.voters and set "
            "controller.quorum.bootstrap.servers to use a dynamic quorum"
        )
    if standalone and not config.is_controller:
        raise ConfigError("--standalone makes this node a voter, but it is not a controller")
    if not config.is_controller or config.controller_quorum_voters:
        return None, None  # static voters or broker only: nothing to bootstrap
    if not chosen:
        raise ConfigError(
            "controller.quorum.voters is not set on this controller, so the first voters "
            "must be given: use --standalone, --initial-controllers or "
            "--no-initial-controllers"
        )
    if standalone:
        return _standalone_voter(config), None
    if initial_controllers is None:
        return None, None
    return _initial_controller_voters(config, initial_controllers)


def _listener_name(config: ServerConfig) -> str:
    names = config.controller_listener_names
    if not names:
        raise ConfigError("controller.listener.names must name this controller's listener")
    return names[0]


def _standalone_voter(config: ServerConfig) -> VoterSet:
    listeners = config.advertised_controller_listeners
    if not listeners:
        raise ConfigError("--standalone: this node has no controller listener in listeners")
    # Kafka's choice: the first controller listener; a wildcard host means this host.
    first = listeners[0]
    endpoint = VoterEndpoint(_listener_name(config), first.host or "localhost", first.port)
    # The directory id is a placeholder until the metadata dir's own id is chosen.
    return VoterSet.of([Voter(config.node_id, uuid.UUID(int=0), (endpoint,))])


def _initial_controller_voters(
    config: ServerConfig, text: str
) -> tuple[VoterSet, uuid.UUID | None]:
    name = _listener_name(config)
    controllers = parse_initial_controllers(text)
    voters = VoterSet.of(
        Voter(c.node_id, c.directory_id, (VoterEndpoint(name, c.host, c.port),))
        for c in controllers
    )
    own = voters.get(config.node_id)
    return voters, None if own is None else own.directory_id


def _with_directory(
    voters: VoterSet, node_id: int, directory_id: uuid.UUID, standalone: bool
) -> VoterSet:
    own = voters.get(node_id)
    if not standalone or own is None:
        return voters
    return voters.replaced(Voter(node_id, directory_id, own.endpoints))


def _write_bootstrap(fs: FileSystem, metadata_dir: str, voters: VoterSet, now_ms: int) -> str:
    """Write the bootstrap checkpoint durably, before meta.properties marks the dir done.

    In that order a crash in between leaves an unformatted dir, which a second run
    formats whole, rather than a formatted dir without its voters.
    """
    partition_dir = metadata_log_directory(metadata_dir)
    fs.makedirs(partition_dir)
    path = join(partition_dir, snapshot_file_name(BOOTSTRAP_SNAPSHOT_ID))
    data = bootstrap_snapshot(voters, last_contained_log_timestamp_ms=now_ms)
    write_file_atomically(fs, path, data)
    fs.fsync_dir(metadata_dir)
    listed = ", ".join(
        f"{v.node_id}@{e.host}:{e.port}:{to_kafka_str(v.directory_id)}"
        for v in voters
        for e in v.endpoints[:1]
    )
    return f"wrote the bootstrap checkpoint {path} with voters {listed}"
