"""The client side every cluster command shares: bootstrap lists and --command-config."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from odradek.cli.client import (
    CONNECT_TIMEOUT_S,
    client_settings,
    parse_addresses,
    read_command_config,
)

# --- Address lists --------------------------------------------------------------------


def test_a_bootstrap_list_is_every_host_port_in_order_once() -> None:
    assert parse_addresses("b1:9092, b2:9093 ,,b1:9092,", "--bootstrap-server") == (
        ("b1", 9092),
        ("b2", 9093),
    )


def test_ipv6_addresses_go_in_brackets() -> None:
    assert parse_addresses("[::1]:9092,[fe80::1%eth0]:9093,10.0.0.1:9094", "x") == (
        ("::1", 9092),
        ("fe80::1%eth0", 9093),
        ("10.0.0.1", 9094),
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("nowhere", "is not HOST:PORT"),
        ("host:", "is not HOST:PORT"),
        (":9092", "is not HOST:PORT"),
        ("host:90x2", "is not HOST:PORT"),
        ("host:0", "port 0 is not 1 to 65535"),
        ("host:65536", "port 65536 is not 1 to 65535"),
        # Split at its last colon, this could be ::1 port 9092 or an address without a
        # port: refused with the bracketed form to write instead.
        ("::1:9092", "as [::1]:9092"),
        ("[broker]:9092", "only an IPv6 address goes in brackets"),
        (" , ", "no HOST:PORT given"),
    ],
)
def test_a_bad_address_is_named_with_the_option(text: str, says: str) -> None:
    with pytest.raises(click.BadParameter) as caught:
        parse_addresses(text, "--bootstrap-server")
    assert says in caught.value.message
    assert caught.value.param_hint == "--bootstrap-server"


# --- --command-config -------------------------------------------------------------------


def config_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "client.properties"
    path.write_text(text, encoding="latin-1")
    return str(path)


def test_a_java_properties_file_is_read_as_java_reads_it(tmp_path: Path) -> None:
    path = config_file(
        tmp_path,
        "# a comment\n"
        "! another comment\n"
        "bootstrap.servers: b1:9092,\\\n"
        "    b2:9092\n"
        "client.id = ops\\u00e9\\:night\n"
        "request.timeout.ms=2500\n",
    )
    settings = client_settings(None, path, kind="broker", client_id="default-id")
    assert settings.addresses == (("b1", 9092), ("b2", 9092))
    assert settings.client_id == "ops\u00e9:night"
    assert settings.request_timeout_s == 2.5
    assert settings.connect_timeout_s == CONNECT_TIMEOUT_S


def test_the_flag_wins_over_the_file_and_defaults_fill_the_rest(tmp_path: Path) -> None:
    path = config_file(
        tmp_path, "bootstrap.servers=b1:9092\nsocket.connection.setup.timeout.ms=4000\n"
    )
    settings = client_settings("flag:1", path, kind="broker", client_id="default-id")
    assert settings.addresses == (("flag", 1),)
    assert settings.client_id == "default-id"
    assert settings.request_timeout_s is None
    assert settings.connect_timeout_s == 4.0


def test_quorum_commands_take_bootstrap_controllers_from_the_file(tmp_path: Path) -> None:
    path = config_file(tmp_path, "bootstrap.servers=b1:9092\nbootstrap.controllers=c1:9093\n")
    settings = client_settings(None, path, kind="controller", client_id="q")
    assert settings.addresses == (("c1", 9093),)
    with pytest.raises(click.UsageError, match="--bootstrap-controller"):
        client_settings(
            None, config_file(tmp_path, "bootstrap.servers=b1:9092\n"), kind="controller",
            client_id="q",
        )  # fmt: skip


def test_no_address_anywhere_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(click.UsageError, match="--bootstrap-server"):
        client_settings(None, None, kind="broker", client_id="x")
    with pytest.raises(click.UsageError, match=r"bootstrap\.servers"):
        client_settings(None, config_file(tmp_path, "client.id=a\n"), kind="broker", client_id="x")


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("security.protocol=KERBEROS", "security.protocol=KERBEROS"),
        # SASL keys without a SASL protocol would be silently unused.
        ("sasl.mechanism=PLAIN", "set security.protocol=SASL_PLAINTEXT or SASL_SSL"),
        ("sasl.jaas.config=x required;", "sasl.jaas.config"),
        (
            "security.protocol=SASL_SSL\nsasl.kerberos.service.name=kafka",
            "sasl.kerberos.service.name: not supported",
        ),
        # TLS keys without security.protocol=SSL would be silently unused.
        ("ssl.truststore.location=/etc/t.pem", "set security.protocol=SSL"),
    ],
)
def test_security_settings_not_served_are_refused_with_the_key_named(
    tmp_path: Path, line: str, named: str
) -> None:
    path = config_file(tmp_path, f"bootstrap.servers=b1:9092\n{line}\n")
    with pytest.raises(click.BadParameter) as caught:
        read_command_config(path)
    assert named in caught.value.message


@pytest.mark.parametrize(
    ("lines", "named"),
    [
        ("", "sasl.mechanism is GSSAPI"),
        ("sasl.mechanism=PLAIN", "sasl.jaas.config must be set"),
        (
            "sasl.mechanism=PLAIN\nsasl.jaas.config="
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="a" '
            'password="b";',
            "PLAIN takes org.apache.kafka.common.security.plain.PlainLoginModule",
        ),
        (
            "sasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config="
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="a";',
            "needs username and password",
        ),
    ],
)
def test_a_sasl_client_without_a_usable_login_is_refused(
    tmp_path: Path, lines: str, named: str
) -> None:
    path = config_file(
        tmp_path, f"bootstrap.servers=b1:9092\nsecurity.protocol=SASL_PLAINTEXT\n{lines}\n"
    )
    with pytest.raises(click.BadParameter) as caught:
        client_settings(None, path, kind="broker", client_id="x")
    assert named in caught.value.message


def test_sasl_settings_give_a_login(tmp_path: Path) -> None:
    path = config_file(
        tmp_path,
        "bootstrap.servers=b1:9092\nsecurity.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config="
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" '
        'password="admin-secret";\n',
    )
    settings = client_settings(None, path, kind="broker", client_id="x")
    login = settings.security.sasl
    assert login is not None and settings.security.tls is None
    assert (login.mechanism, login.username, login.password) == (
        "SCRAM-SHA-512",
        "admin",
        "admin-secret",
    )
    assert "admin-secret" not in repr(login)


def test_ssl_settings_give_a_tls_client(tmp_path: Path) -> None:
    path = config_file(
        tmp_path,
        "bootstrap.servers=b1:9092\nsecurity.protocol=ssl\n"
        "ssl.endpoint.identification.algorithm=\n",
    )
    settings = client_settings(None, path, kind="broker", client_id="x")
    tls = settings.security.tls
    assert tls is not None and not tls.check_hostname
    bad = config_file(
        tmp_path, "bootstrap.servers=b1:9092\nsecurity.protocol=SSL\nssl.keystore.type=BKS\n"
    )
    with pytest.raises(click.BadParameter, match=r"ssl\.keystore\.type"):
        client_settings(None, bad, kind="broker", client_id="x")


def test_plaintext_is_what_the_commands_speak(tmp_path: Path) -> None:
    path = config_file(tmp_path, "security.protocol=plaintext\nbootstrap.servers=b:1\n")
    assert client_settings(None, path, kind="broker", client_id="x").addresses == (("b", 1),)


@pytest.mark.parametrize(
    "line",
    ["request.timeout.ms=soon", "request.timeout.ms=0", "socket.connection.setup.timeout.ms=-1"],
)
def test_a_bad_value_names_the_key_and_the_file(tmp_path: Path, line: str) -> None:
    path = config_file(tmp_path, line + "\n")
    with pytest.raises(click.BadParameter) as caught:
        read_command_config(path)
    assert line.split("=")[0] in caught.value.message
    assert caught.value.param_hint is not None and path in caught.value.param_hint


def test_keys_the_commands_do_not_use_are_named_in_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config_file(tmp_path, "bootstrap.servers=b:1\nretries=5\nacks=all\n")
    assert read_command_config(path) == {"bootstrap.servers": "b:1"}
    warning = capsys.readouterr().err
    assert "ignoring retries, acks" in warning and path in warning
