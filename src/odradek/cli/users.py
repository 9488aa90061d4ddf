"""``odradek users list|add|remove``: SCRAM credentials, as Kafka's ``kafka-configs
--entity-type users --alter --add-config 'SCRAM-SHA-512=[...]'`` sets them (KIP-554).

DescribeUserScramCredentials and AlterUserScramCredentials, version 0 (the one the broker
serves, :mod:`odradek.broker.scram_credentials`). ``add`` salts the password here (a
random 32-byte salt) and sends only the salted password
(:func:`~odradek.security.scram.salted_password`), as Kafka's admin client does: the
password never leaves the command, and is never printed.
"""

from __future__ import annotations

import json
import secrets
from typing import Any, Final, TextIO

import click

from odradek.cli.acls import Refused, answer_error, error_text
from odradek.cli.client import (
    ClusterClient,
    bootstrap_server_option,
    command_config_option,
    connect,
)
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
)
from odradek.protocol.messages.alter_user_scram_credentials_request import (
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from odradek.protocol.messages.describe_user_scram_credentials_request import UserName
from odradek.security.scram import MECHANISMS, ScramMechanism, mechanism_by_type, salted_password

__all__ = ["SALT_BYTES", "SCRAM_VERSION", "upsertion", "users"]

SCRAM_VERSION: Final = 0
"""DescribeUserScramCredentials and AlterUserScramCredentials: the version served."""
SALT_BYTES: Final = 32
DEFAULT_ITERATIONS: Final = 4096
TIMEOUT_S: Final = 10.0
CLIENT_ID: Final = "odradek-users"


def mechanism_name(kafka_type: int) -> str:
    mechanism = mechanism_by_type(kafka_type)
    return mechanism.name if mechanism is not None else f"UNKNOWN({kafka_type})"


def upsertion(
    name: str, mechanism: ScramMechanism, password: str, iterations: int, salt: bytes | None = None
) -> ScramCredentialUpsertion:
    """The upsertion that sets ``name``'s credential: salted here, with a new random salt
    unless one is given."""
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    return ScramCredentialUpsertion(
        name=name,
        mechanism=mechanism.kafka_type,
        iterations=iterations,
        salt=salt,
        salted_password=salted_password(mechanism, password, salt, iterations),
    )


class _Mechanism(click.Choice[str]):
    """A SCRAM mechanism, in any case, shown as Kafka names it."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return super().convert(str(value).upper(), param, ctx)


_MECHANISM_OPTION: Final = click.option(
    "--mechanism", required=True, type=_Mechanism(sorted(MECHANISMS)), help="The SCRAM mechanism."
)


@click.group()
def users() -> None:
    """List, add and remove SCRAM users (credentials in the metadata log)."""


async def _describe(client: ClusterClient, names: tuple[str, ...]) -> Any:
    request = DescribeUserScramCredentialsRequest(
        users=[UserName(name=n) for n in names] if names else None
    )
    response: Any = await client.request(request, SCRAM_VERSION, TIMEOUT_S)
    if response.error_code != ErrorCode.NONE:
        raise Refused(
            answer_error(
                response.error_code,
                response.error_message,
                "describe SCRAM credentials",
                "DESCRIBE",
                client,
            )
        )
    return response


@users.command("list")
@bootstrap_server_option
@command_config_option
@click.argument("names", nargs=-1, metavar="[NAME]...")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def list_users(
    bootstrap_server: str | None,
    command_config: str | None,
    names: tuple[str, ...],
    as_json: bool,
) -> None:
    """Every user with a SCRAM credential, or the users named: mechanism and iterations
    (never a salt or a key). Needs DESCRIBE on the cluster; exit status 1 when a named
    user has no credential."""
    client = connect(bootstrap_server, command_config, client_id=CLIENT_ID)
    response = client.run(lambda: _describe(client, names))
    rows = [
        {"user": r.user, "mechanism": mechanism_name(c.mechanism), "iterations": c.iterations}
        for r in response.results
        if r.error_code == ErrorCode.NONE
        for c in r.credential_infos
    ]
    failed = [r for r in response.results if r.error_code != ErrorCode.NONE]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    elif rows:
        width = max(len("USER"), *(len(row["user"]) for row in rows))
        click.echo(f"{'USER':<{width}}  {'MECHANISM':<13}  ITERATIONS")
        for row in rows:
            click.echo(f"{row['user']:<{width}}  {row['mechanism']:<13}  {row['iterations']}")
    elif not failed:
        click.echo("No SCRAM credentials.", err=True)
    for r in failed:
        if r.error_code == ErrorCode.RESOURCE_NOT_FOUND:
            click.echo(f"{r.user}: no SCRAM credential", err=True)
        else:
            click.echo(f"{r.user}: {error_text(r.error_code, r.error_message)}", err=True)
    if failed:
        raise SystemExit(1)


def _password(name: str, password: str | None, password_file: TextIO | None) -> str:
    if password is not None and password_file is not None:
        raise click.UsageError("--password and --password-file exclude each other")
    if password_file is not None:
        text = password_file.read()
        # One line ending, as `echo secret > file` leaves it; the rest is the password.
        for ending in ("\r\n", "\n"):
            if text.endswith(ending):
                text = text[: -len(ending)]
                break
        if not text:
            raise click.BadParameter("the file is empty", param_hint="--password-file")
        return text
    if password is None:
        password = click.prompt(
            f"Password for {name}", hide_input=True, confirmation_prompt=True, type=str
        )
    if not password:
        raise click.BadParameter("the password must not be empty", param_hint="--password")
    return password


async def _alter(client: ClusterClient, request: AlterUserScramCredentialsRequest) -> Any:
    response: Any = await client.request(request, SCRAM_VERSION, TIMEOUT_S)
    return response.results[0] if response.results else None


@users.command("add")
@bootstrap_server_option
@command_config_option
@click.argument("name")
@_MECHANISM_OPTION
@click.option(
    "--iterations",
    type=int,
    default=DEFAULT_ITERATIONS,
    show_default=True,
    help="PBKDF2 iterations (4096 to 16384).",
)
@click.option(
    "--password",
    default=None,
    help="The password (seen in the process list; prefer --password-file or the prompt).",
)
@click.option(
    "--password-file",
    type=click.File("r", encoding="utf-8"),
    default=None,
    help="A file holding the password ('-': standard input); one line ending is dropped.",
)
def add_user(
    bootstrap_server: str | None,
    command_config: str | None,
    name: str,
    mechanism: str,
    iterations: int,
    password: str | None,
    password_file: TextIO | None,
) -> None:
    """Set NAME's SCRAM credential for one mechanism (AlterUserScramCredentials), new or
    replacing the one it has. Without --password or --password-file the password is
    asked for, hidden. Needs ALTER on the cluster."""
    scram = MECHANISMS[mechanism]
    if not name:
        raise click.BadParameter("must not be empty", param_hint="NAME")
    if not scram.min_iterations <= iterations <= scram.max_iterations:
        raise click.BadParameter(
            f"{iterations}: {scram.name} takes {scram.min_iterations} to {scram.max_iterations}",
            param_hint="--iterations",
        )
    secret = _password(name, password, password_file)
    client = connect(bootstrap_server, command_config, client_id=CLIENT_ID)
    request = AlterUserScramCredentialsRequest(
        upsertions=[upsertion(name, scram, secret, iterations)]
    )
    # Setting the same credential twice is harmless: it may be sent again.
    result = client.run(lambda: _alter(client, request))
    _check(result, client, name, "set")
    click.echo(f"{name}: {scram.name} credential set ({iterations} iterations)")


@users.command("remove")
@bootstrap_server_option
@command_config_option
@click.argument("name")
@_MECHANISM_OPTION
def remove_user(
    bootstrap_server: str | None, command_config: str | None, name: str, mechanism: str
) -> None:
    """Delete NAME's SCRAM credential for one mechanism (AlterUserScramCredentials).
    Needs ALTER on the cluster; exit status 1 when NAME has no such credential."""
    scram = MECHANISMS[mechanism]
    client = connect(bootstrap_server, command_config, client_id=CLIENT_ID)
    request = AlterUserScramCredentialsRequest(
        deletions=[ScramCredentialDeletion(name=name, mechanism=scram.kafka_type)]
    )
    result = client.run(lambda: _alter(client, request))
    if result is not None and result.error_code == ErrorCode.RESOURCE_NOT_FOUND:
        if client.resent:
            # Sent again after a lost answer: the first attempt removed it.
            click.echo(f"{name}: {scram.name} credential removed")
            return
        raise Refused(f"{name} has no {scram.name} credential: nothing removed")
    _check(result, client, name, "removed")
    click.echo(f"{name}: {scram.name} credential removed")


def _check(result: Any, client: ClusterClient, name: str, done: str) -> None:
    if result is None:
        raise Refused(f"{name}: the broker's answer has no result for the user")
    if result.error_code != ErrorCode.NONE:
        raise Refused(
            f"{name}: not {done}: "
            + answer_error(
                result.error_code,
                result.error_message,
                "alter SCRAM credentials",
                "ALTER",
                client,
            )
        )
