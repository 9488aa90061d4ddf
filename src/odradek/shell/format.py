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
* ``--add-scram`` (repeatable, Kafka 3.5+, KIP-900) gives a SCRAM credential the cluster
  starts with, so that brokers and clients can authenticate before anyone could run
  AlterUserScramCredentials: ``SCRAM-SHA-512=[name=admin,password=admin-secret]``, or
  with ``iterations=8192``, ``salt=<base64>`` and, instead of the password,
  ``saltedpassword=<base64>`` (which needs ``salt``). A controller's metadata dir gets
  ``bootstrap.checkpoint`` (Kafka's name) holding one ``UserScramCredentialRecord`` each,
  in the snapshot file format; the active controller appends them to the metadata log
  when it first becomes active on a log without metadata records
  (:mod:`odradek.shell.controller_service`). Only the salt and derived keys are stored,
  never the password.
"""

from __future__ import annotations

import base64
import binascii
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from odradek.broker.server_config import ServerConfig
from odradek.core.errors import ConfigError, DecodeError
from odradek.core.kafka_uuid import from_kafka_str, to_kafka_str
from odradek.protocol.metadata import UserScramCredentialRecord
from odradek.protocol.metadata_record import encode_metadata_record
from odradek.raft.disk_log import metadata_log_directory
from odradek.raft.snapshot import (
    BOOTSTRAP_SNAPSHOT_ID,
    bootstrap_snapshot,
    decode_snapshot,
    encode_snapshot,
    snapshot_file_name,
)
from odradek.raft.voters import Voter, VoterEndpoint, VoterSet
from odradek.security.scram import (
    MECHANISMS,
    credential_from_password,
    credential_from_salted_password,
    mechanism_by_type,
)
from odradek.storage.checkpoint import META_PROPERTIES, MetaProperties, read_meta_properties
from odradek.storage.fs import FileSystem, join, write_file_atomically
from odradek.storage.log_dir import format_log_dir

BOOTSTRAP_RECORDS_FILE = "bootstrap.checkpoint"
"""In the metadata log dir: the metadata records the first active controller appends."""

_SCRAM_KEYS = ("name", "password", "saltedpassword", "salt", "iterations")
_DEFAULT_ITERATIONS = 4096

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


def parse_add_scram(text: str, salt: bytes | None = None) -> UserScramCredentialRecord:
    """The credential record one ``--add-scram`` value stands for; ConfigError if bad.

    ``MECHANISM=[key=value,...]`` as Kafka's ``ScramParser`` reads it: keys ``name``
    (required), ``password`` or ``saltedpassword`` (base64, needs ``salt``), ``salt``
    (base64; random when not given, or ``salt`` here for tests) and ``iterations``
    (4096 unless given, within the mechanism's bounds). A value may be in double quotes.
    A comma cannot be part of a value, as in Kafka.
    """
    mechanism_name, equals, rest = text.strip().partition("=")
    if not equals:
        raise ConfigError(f"--add-scram {text!r}: expected MECHANISM=[name=...,password=...]")
    mechanism = MECHANISMS.get(mechanism_name)
    if mechanism is None:
        raise ConfigError(
            f"--add-scram: the mechanism {mechanism_name!r} is not supported "
            f"(use {' or '.join(MECHANISMS)})"
        )
    if not (rest.startswith("[") and rest.endswith("]")):
        raise ConfigError(f"--add-scram {text!r}: the settings must be enclosed in [ ]")
    values: dict[str, str] = {}
    for item in rest[1:-1].split(","):
        key, equals, value = item.partition("=")
        if not equals:
            raise ConfigError(f"--add-scram: {item!r} is not key=value")
        if key not in _SCRAM_KEYS:
            raise ConfigError(
                f"--add-scram: unknown setting {key!r} (known: {', '.join(_SCRAM_KEYS)})"
            )
        if key in values:
            raise ConfigError(f"--add-scram: {key!r} is given twice")
        if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
            value = value[1:-1]
        values[key] = value
    name = values.get("name")
    if not name:
        raise ConfigError("--add-scram: 'name' must be given and not empty")
    iterations = _DEFAULT_ITERATIONS
    if "iterations" in values:
        try:
            iterations = int(values["iterations"])
        except ValueError:
            raise ConfigError(
                f"--add-scram: iterations {values['iterations']!r} is not a number"
            ) from None
    if not mechanism.min_iterations <= iterations <= mechanism.max_iterations:
        raise ConfigError(
            f"--add-scram: iterations must be from {mechanism.min_iterations} to "
            f"{mechanism.max_iterations} for {mechanism.name}, not {iterations}"
        )
    if "salt" in values:
        salt = _base64(values["salt"], "salt")
    if salt is not None and not salt:
        raise ConfigError("--add-scram: 'salt' must not be empty")
    if ("password" in values) == ("saltedpassword" in values):
        raise ConfigError("--add-scram: give one of 'password' or 'saltedpassword'")
    if "password" in values:
        credential = credential_from_password(mechanism, values["password"], iterations, salt)
    else:
        if salt is None:
            raise ConfigError("--add-scram: 'saltedpassword' needs 'salt' with it")
        salted = _base64(values["saltedpassword"], "saltedpassword")
        if not salted:
            raise ConfigError("--add-scram: 'saltedpassword' must not be empty")
        credential = credential_from_salted_password(mechanism, salted, salt, iterations)
    return UserScramCredentialRecord(
        name=name,
        mechanism=mechanism.kafka_type,
        salt=credential.salt,
        stored_key=credential.stored_key,
        server_key=credential.server_key,
        iterations=credential.iterations,
    )


def _base64(text: str, key: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise ConfigError(f"--add-scram: {key} {text!r} is not base64") from None


def read_bootstrap_records(fs: FileSystem, metadata_log_dir: str) -> list[bytes]:
    """The metadata records ``storage format`` left for the first active controller
    (encoded, as the log holds them); none when there is no bootstrap file. A file that
    does not parse raises :class:`~odradek.core.errors.ConfigError` naming it."""
    path = join(metadata_log_dir, BOOTSTRAP_RECORDS_FILE)
    if not fs.exists(path):
        return []
    try:
        return decode_snapshot(fs.read_file(path)).records
    except DecodeError as e:
        # Starting without them would leave the cluster without its first users.
        raise ConfigError(f"{path} is damaged ({e}); format this node again") from None


def format_node(
    fs: FileSystem,
    config: ServerConfig,
    cluster_id: str,
    *,
    standalone: bool = False,
    initial_controllers: str | None = None,
    no_initial_controllers: bool = False,
    ignore_formatted: bool = False,
    add_scram: Sequence[str] = (),
    now_ms: int = 0,
) -> list[str]:
    """Format every log dir of this node; return what was done, one line each.

    Nothing is written unless every dir can be formatted (or, with
    ``ignore_formatted``, already is): a refusal leaves the disks as they were.
    """
    voters, own_directory = _initial_voters(
        config, standalone, initial_controllers, no_initial_controllers
    )
    scram_records = _scram_records(add_scram)
    dirs = list(dict.fromkeys([*config.log_dirs, config.metadata_log_dir]))
    pending = [d for d in dirs if not _already_formatted(fs, d, cluster_id, config.node_id)]
    done = [f"{d} is already formatted" for d in dirs if d not in pending]
    if done and not ignore_formatted:
        raise ConfigError(
            f"{', '.join(d for d in dirs if d not in pending)} is already formatted; "
            "use --ignore-formatted to accept that"
        )
    if scram_records and not config.is_controller:
        done.append(
            "this node is not a controller, so --add-scram has nothing to do here: "
            "give it when formatting the controllers"
        )
    elif scram_records and config.metadata_log_dir not in pending:
        done.append(
            f"{config.metadata_log_dir} was formatted before: --add-scram changed nothing "
            "(use AlterUserScramCredentials on a running cluster)"
        )
    for directory in pending:
        metadata = directory == config.metadata_log_dir
        directory_id = own_directory if metadata and own_directory else uuid.uuid4()
        if metadata and voters is not None:
            # Standalone: the voter is this dir, whose id is only chosen now.
            voters = _with_directory(voters, config.node_id, directory_id, standalone)
            done.append(_write_bootstrap(fs, directory, voters, now_ms))
        if metadata and scram_records and config.is_controller:
            done.append(_write_bootstrap_records(fs, directory, scram_records, now_ms))
        format_log_dir(fs, directory, MetaProperties(cluster_id, config.node_id, directory_id))
        done.append(f"formatted {directory} (cluster {cluster_id}, node {config.node_id})")
    return done


def _scram_records(values: Sequence[str]) -> list[UserScramCredentialRecord]:
    records = [parse_add_scram(value) for value in values]
    seen: set[tuple[int, str]] = set()
    for record in records:
        key = (record.mechanism, record.name)
        if key in seen:
            # Kafka would keep the last; two passwords for one user is a typo to report.
            raise ConfigError(
                f"--add-scram gives user {record.name!r} two credentials for one mechanism"
            )
        seen.add(key)
    return records


def _write_bootstrap_records(
    fs: FileSystem, metadata_dir: str, records: Sequence[UserScramCredentialRecord], now_ms: int
) -> str:
    """Write ``bootstrap.checkpoint`` durably, before meta.properties marks the dir done
    (a crash in between leaves a dir that a second run formats whole)."""
    fs.makedirs(metadata_dir)
    path = join(metadata_dir, BOOTSTRAP_RECORDS_FILE)
    # The snapshot format gives every batch a CRC, so a damaged file is refused at start
    # instead of bootstrapping a cluster with garbage credentials.
    data = encode_snapshot(
        BOOTSTRAP_SNAPSHOT_ID,
        [encode_metadata_record(record) for record in records],
        None,
        now_ms,
    )
    write_file_atomically(fs, path, data)
    fs.fsync_dir(metadata_dir)
    users = ", ".join(f"{record.name} ({_mechanism_name(record.mechanism)})" for record in records)
    return f"wrote {path} with SCRAM credentials for {users}"


def _mechanism_name(kafka_type: int) -> str:
    mechanism = mechanism_by_type(kafka_type)
    return str(kafka_type) if mechanism is None else mechanism.name


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
