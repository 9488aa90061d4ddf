"""The ``odradek`` command."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
import time
import uuid

import click

from odradek import __version__
from odradek.broker.server_config import ServerConfig
from odradek.cli.acls import acls
from odradek.cli.cluster import cluster
from odradek.cli.dev_cluster import run_dev_cluster
from odradek.cli.extras import missing_extra
from odradek.cli.partitions import partitions
from odradek.cli.quarantine import quarantine
from odradek.cli.quorum import quorum
from odradek.cli.quotas import quotas
from odradek.cli.recover_quorum import recover_quorum
from odradek.cli.users import users
from odradek.cli.verify import verify
from odradek.core.errors import ConfigError, CorruptLogError
from odradek.core.kafka_uuid import from_kafka_str, to_kafka_str
from odradek.shell.boot import node_config
from odradek.shell.format import format_node
from odradek.shell.node import NodeConfig, run_node
from odradek.shell.real_fs import RealFileSystem
from odradek.storage.checkpoint import META_PROPERTIES, read_meta_properties
from odradek.storage.fs import join


class _Odradek(click.Group):
    """The ``odradek`` group: a command that imports a module of an extra that is not
    installed ends in one line naming the extra (see :mod:`odradek.cli.extras`), whichever
    command it is; commands that know they need one say so themselves first."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except ModuleNotFoundError as e:
            command = " ".join(filter(None, ["odradek", ctx.invoked_subcommand]))
            missing = missing_extra(e, command)
            if missing is None:
                raise
            raise missing from None


@click.group(cls=_Odradek)
@click.version_option(__version__, prog_name="odradek")
def main() -> None:
    """Odradek: a Kafka-compatible, partitioned, replicated commit log."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")


@main.command()
@click.option(
    "--nodes", default=1, show_default=True, help="Number of nodes; above 1, one process each."
)
@click.option(
    "--dir",
    "directory",
    default="data/dev",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where the nodes keep their data; reused on the next run.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=9092, show_default=True, help="Port of the first node (0: any).")
@click.option(
    "--add-scram",
    "add_scram",
    multiple=True,
    metavar="MECHANISM=[name=...,password=...]",
    help="A SCRAM credential to start with, as for storage format (first run only).",
)
@click.option(
    "--secure",
    is_flag=True,
    help="Every listener SASL_SSL (a CA made in the data dir), SCRAM-SHA-512 logins for "
    "clients as admin, PLAIN for the nodes, the StandardAuthorizer; prints the client "
    "settings and writes them into the data dir.",
)
def dev(
    nodes: int, directory: str, host: str, port: int, add_scram: tuple[str, ...], secure: bool
) -> None:
    """Run a local cluster for development, formatting its data dir the first time.

    Writes each node's server.properties into its data dir (the same file
    `odradek server --config` takes), prints ``bootstrap.servers=HOST:PORT,...`` once
    every node serves. Ctrl-C stops it cleanly; running it again restarts it from its
    data. One node runs in this process; more run as one `odradek server` process each.
    With --secure the client settings come first (client.properties in the data dir).
    """
    if nodes < 1:
        raise click.UsageError("--nodes must be 1 or more")
    if nodes > 1:
        run_dev_cluster(directory, nodes, host, port, add_scram=add_scram, secure=secure)
        return
    from odradek.cli import dev_cluster

    fs = RealFileSystem()
    root = os.path.abspath(directory)
    node_dir = join(root, "node-1")
    fs.makedirs(node_dir)
    meta_path = join(node_dir, META_PROPERTIES)
    # The controller listener is recorded in the voter set, so it stays the same from
    # run to run: the one of the last run, else the next port, else any free one.
    controller_port = _previous_controller_port(join(node_dir, "server.properties"))
    if controller_port is None:
        controller_port = port + 1 if port else _free_port(host)
    broker_listener, secured = "PLAINTEXT", ""
    if secure:
        broker_listener = dev_cluster.SECURE_LISTENER
    try:
        dev_cluster.check_security_matches(root, secure, fs.exists(meta_path))
        if secure:
            settings, add_scram = dev_cluster.secure_dev(root, [1], host, add_scram)
            secured = settings.server_properties(1)
            address = f"[{host}]" if ":" in host else host
            lines = dev_cluster.write_client_files(
                root, settings, f"{address}:{port}" if port else None,
                f"{address}:{controller_port}",
            )  # fmt: skip
            for line in lines:
                click.echo(line)
    except ConfigError as e:
        raise click.ClickException(str(e)) from None
    text = (
        "# Written by odradek dev; odradek server --config takes the same file.\n"
        "process.roles=broker,controller\n"
        "node.id=1\n"
        f"listeners={broker_listener}://{host}:{port},CONTROLLER://{host}:{controller_port}\n"
        "controller.listener.names=CONTROLLER\n"
        f"controller.quorum.bootstrap.servers={host}:{controller_port}\n"
        f"log.dirs={node_dir}\n" + dev_cluster.DEV_SETTINGS + secured
    )
    with open(join(node_dir, "server.properties"), "w", encoding="utf-8") as f:
        if secure:  # the file holds passwords: only its owner reads it
            os.fchmod(f.fileno(), 0o600)
        f.write(text)
    try:
        server_config = ServerConfig.load(text)
    except ConfigError as e:
        raise click.ClickException(str(e)) from None
    try:
        if not fs.exists(meta_path):
            cluster_id = to_kafka_str(uuid.uuid4())
            # A dynamic quorum with this node as its only voter (kafka-storage --standalone).
            for line in format_node(
                fs,
                server_config,
                cluster_id,
                standalone=True,
                add_scram=add_scram,
                now_ms=int(time.time() * 1000),
            ):
                click.echo(line, err=True)
        config = _node_config(fs, server_config)
    except (ConfigError, CorruptLogError) as e:
        raise click.ClickException(str(e)) from None
    try:
        status = asyncio.run(run_node(config))
    except ConfigError as e:  # found at start: a dir in use, say
        raise click.ClickException(str(e)) from None
    if status:
        sys.exit(status)


def _node_config(fs: RealFileSystem, server_config: ServerConfig) -> NodeConfig:
    """The node's configuration, with the identity its formatted dirs hold."""
    log_dir = server_config.log_dirs[0]
    meta = read_meta_properties(fs, join(log_dir, META_PROPERTIES))
    if meta.node_id != server_config.node_id:
        raise ConfigError(
            f"{log_dir} belongs to node {meta.node_id}, not node.id={server_config.node_id}"
        )
    metadata_meta = read_meta_properties(fs, join(server_config.metadata_log_dir, META_PROPERTIES))
    return node_config(server_config, meta.cluster_id, metadata_meta.directory_id)


def _previous_controller_port(path: str) -> int | None:
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        try:
            config = ServerConfig.load(f.read())
        except ConfigError:
            return None
    listeners = config.controller_listeners
    return listeners[0].port if listeners and listeners[0].port else None


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _load_config(path: str, overrides: tuple[str, ...]) -> ServerConfig:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise click.ClickException(f"cannot read {path}: {e.strerror}") from None
    try:
        return ServerConfig.load(text, overrides)
    except ConfigError as e:
        raise click.ClickException(str(e)) from None


@main.command()
@click.option("--config", "config_path", required=True, help="A Kafka-style server.properties.")
@click.option(
    "--override",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set a configuration key, overriding the file (repeatable).",
)
def server(config_path: str, overrides: tuple[str, ...]) -> None:
    """Run one node from a server.properties file (Kafka's keys)."""
    config = _load_config(config_path, overrides)
    fs = RealFileSystem()
    log_dir = config.log_dirs[0]
    meta_path = join(log_dir, META_PROPERTIES)
    if not fs.exists(meta_path):
        raise click.ClickException(
            f"{log_dir} is not formatted: run `odradek storage format --config {config_path} "
            "--cluster-id $(odradek storage random-uuid)` first"
        )
    try:
        node = _node_config(fs, config)
    except (ConfigError, CorruptLogError) as e:
        raise click.ClickException(str(e)) from None
    try:
        status = asyncio.run(run_node(node))
    except ConfigError as e:  # found at start: a dir in use, say
        raise click.ClickException(str(e)) from None
    if status:
        sys.exit(status)


@main.group()
def storage() -> None:
    """Prepare and inspect log directories."""


@storage.command("random-uuid")
def random_uuid() -> None:
    """Print a new random id in Kafka's form (for --cluster-id)."""
    click.echo(to_kafka_str(uuid.uuid4()))


@storage.command("format")
@click.option("--config", "config_path", required=True, help="A Kafka-style server.properties.")
@click.option("--cluster-id", required=True, help="The cluster id (odradek storage random-uuid).")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a key.")
@click.option(
    "--ignore-formatted", is_flag=True, help="Succeed when the dirs are already formatted."
)
@click.option(
    "--standalone", is_flag=True, help="Dynamic quorum: this controller is the only voter."
)
@click.option(
    "--initial-controllers",
    metavar="ID@HOST:PORT:DIRID,...",
    help="Dynamic quorum: the first voters, each with its metadata directory id.",
)
@click.option(
    "--no-initial-controllers",
    is_flag=True,
    help="Dynamic quorum: no voters yet; this controller joins an existing quorum.",
)
@click.option(
    "--add-scram",
    "add_scram",
    multiple=True,
    metavar="MECHANISM=[name=...,password=...]",
    help=(
        "A SCRAM credential the cluster starts with (repeatable), e.g. "
        "'SCRAM-SHA-512=[name=admin,password=admin-secret]'; also iterations=N, "
        "salt=BASE64, saltedpassword=BASE64 (with salt, instead of password)."
    ),
)
def format_storage(
    config_path: str,
    cluster_id: str,
    overrides: tuple[str, ...],
    ignore_formatted: bool,
    standalone: bool,
    initial_controllers: str | None,
    no_initial_controllers: bool,
    add_scram: tuple[str, ...],
) -> None:
    """Write meta.properties into every log dir, the first voters of a dynamic quorum and
    the SCRAM credentials the cluster starts with."""
    _check_one_quorum_flag(standalone, initial_controllers, no_initial_controllers)
    config = _load_config(config_path, overrides)
    try:
        from_kafka_str(cluster_id)
    except ValueError as e:
        raise click.ClickException(f"--cluster-id: {e}") from None
    try:
        lines = format_node(
            RealFileSystem(),
            config,
            cluster_id,
            standalone=standalone,
            initial_controllers=initial_controllers,
            no_initial_controllers=no_initial_controllers,
            ignore_formatted=ignore_formatted,
            add_scram=add_scram,
            now_ms=int(time.time() * 1000),
        )
    except (ConfigError, CorruptLogError) as e:
        raise click.ClickException(str(e)) from None
    for line in lines:
        click.echo(line)


def _check_one_quorum_flag(
    standalone: bool, initial_controllers: str | None, no_initial_controllers: bool
) -> None:
    # kafka-storage puts the three in one mutually exclusive group; so do we.
    given = [standalone, initial_controllers is not None, no_initial_controllers]
    if sum(given) > 1:
        raise click.UsageError(
            "--standalone, --initial-controllers and --no-initial-controllers exclude each other"
        )


main.add_command(quorum)
main.add_command(cluster)
main.add_command(quarantine)
main.add_command(partitions)
main.add_command(recover_quorum)
main.add_command(verify)
main.add_command(acls)
main.add_command(users)
main.add_command(quotas)
