"""The ``odradek`` command."""

from __future__ import annotations

import asyncio
import logging

import click

from odradek import __version__
from odradek.broker.router import Router
from odradek.shell.server import Server, serve_forever


@click.group()
@click.version_option(__version__, prog_name="odradek")
def main() -> None:
    """Odradek: a Kafka-compatible, partitioned, replicated commit log."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=9092, show_default=True, help="Port to listen on.")
def dev(host: str, port: int) -> None:
    """Run a local node for development.

    Today this is one node that speaks the Kafka framing and answers ApiVersions,
    advertising exactly what it implements; topics, produce and fetch come with the
    broker (see the README's status table).
    """
    asyncio.run(serve_forever(Server(Router(), host, port)))
