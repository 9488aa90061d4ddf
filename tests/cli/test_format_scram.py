"""``odradek storage format --add-scram`` (KIP-900): the credentials a cluster starts with.

The option's grammar and refusals, the bootstrap file format writes, and that a
credential read back from it authenticates with its password.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from odradek.cli.main import main
from odradek.controller.image import MetadataImage
from odradek.core.errors import ConfigError
from odradek.protocol.metadata import UserScramCredentialRecord
from odradek.protocol.metadata_record import decode_metadata_record
from odradek.security import scram
from odradek.shell.format import BOOTSTRAP_RECORDS_FILE, parse_add_scram, read_bootstrap_records
from odradek.shell.real_fs import RealFileSystem

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
SALT = b"a fixed salt for the test"
SALT_TEXT = base64.b64encode(SALT).decode()


def config(tmp_path: Path, roles: str = "broker,controller") -> Path:
    listeners = "PLAINTEXT://127.0.0.1:9092"
    if "controller" in roles:
        listeners += ",CONTROLLER://127.0.0.1:9093"
    path = tmp_path / "server.properties"
    path.write_text(
        f"process.roles={roles}\n"
        "node.id=1\n"
        f"listeners={listeners}\n"
        "controller.listener.names=CONTROLLER\n"
        "controller.quorum.bootstrap.servers=127.0.0.1:9093\n"
        f"log.dirs={tmp_path / 'logs'}\n"
        f"metadata.log.dir={tmp_path / 'meta'}\n"
    )
    return path


def run(path: Path, *flags: str) -> Result:
    args = ["storage", "format", "--config", str(path), "--cluster-id", CLUSTER, *flags]
    return CliRunner().invoke(main, args)


def authenticates(record: UserScramCredentialRecord, password: str) -> bool:
    mechanism = scram.mechanism_by_type(record.mechanism)
    assert mechanism is not None
    stored = scram.ScramCredential(
        record.salt, record.stored_key, record.server_key, record.iterations
    )
    client = scram.ScramClient(mechanism, record.name, password)
    server = scram.ScramServer(mechanism, lambda user: stored if user == record.name else None)
    try:
        client.verify(server.evaluate(client.final(server.evaluate(client.first()))))
    except scram.ScramError:
        return False
    return server.complete


# The option's grammar -------------------------------------------------------------


def test_a_name_and_password_give_a_credential_that_authenticates() -> None:
    record = parse_add_scram("SCRAM-SHA-512=[name=admin,password=admin-secret]")
    assert (record.name, record.mechanism, record.iterations) == ("admin", 2, 4096)
    assert len(record.salt) >= 16  # a random salt, not an empty or fixed one
    assert authenticates(record, "admin-secret")
    assert not authenticates(record, "admin-secre")
    # Two runs salt differently, so equal passwords do not show as equal keys.
    again = parse_add_scram("SCRAM-SHA-512=[name=admin,password=admin-secret]")
    assert again.salt != record.salt and again.stored_key != record.stored_key


def test_iterations_and_salt_are_taken_as_given() -> None:
    text = f'SCRAM-SHA-256=[name=alice,password=pw,iterations=8192,salt="{SALT_TEXT}"]'
    record = parse_add_scram(text)
    assert (record.mechanism, record.iterations, record.salt) == (1, 8192, SALT)
    expected = scram.credential_from_password(scram.MECHANISMS["SCRAM-SHA-256"], "pw", 8192, SALT)
    assert (record.stored_key, record.server_key) == (expected.stored_key, expected.server_key)


def test_a_salted_password_gives_the_same_credential_as_its_password() -> None:
    mechanism = scram.MECHANISMS["SCRAM-SHA-512"]
    salted = base64.b64encode(scram.salted_password(mechanism, "pw", SALT, 4096)).decode()
    from_salted = parse_add_scram(
        f"SCRAM-SHA-512=[name=bob,salt={SALT_TEXT},saltedpassword={salted}]"
    )
    from_password = parse_add_scram(f"SCRAM-SHA-512=[name=bob,salt={SALT_TEXT},password=pw]")
    assert from_salted == from_password
    assert authenticates(from_salted, "pw")


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("SCRAM-SHA-512", "expected MECHANISM=["),
        ("SCRAM-SHA-1=[name=a,password=b]", "mechanism 'SCRAM-SHA-1' is not supported"),
        ("SCRAM-SHA-512=name=a,password=b", "enclosed in [ ]"),
        ("SCRAM-SHA-512=[password=b]", "'name' must be given"),
        ("SCRAM-SHA-512=[name=,password=b]", "'name' must be given"),
        ("SCRAM-SHA-512=[name=a]", "one of 'password' or 'saltedpassword'"),
        ("SCRAM-SHA-512=[name=a,password=b,saltedpassword=Yg==]", "one of 'password'"),
        ("SCRAM-SHA-512=[name=a,saltedpassword=Yg==]", "needs 'salt'"),
        ("SCRAM-SHA-512=[name=a,password=b,iterations=4095]", "from 4096 to 16384"),
        ("SCRAM-SHA-512=[name=a,password=b,iterations=16385]", "from 4096 to 16384"),
        ("SCRAM-SHA-512=[name=a,password=b,iterations=many]", "is not a number"),
        ("SCRAM-SHA-512=[name=a,password=b,salt=not*base64]", "salt 'not*base64' is not base64"),
        ("SCRAM-SHA-512=[name=a,password=b,salt=]", "'salt' must not be empty"),
        ("SCRAM-SHA-512=[name=a,password=b,user=c]", "unknown setting 'user'"),
        ("SCRAM-SHA-512=[name=a,password=b,name=c]", "'name' is given twice"),
        ("SCRAM-SHA-512=[name=a,password]", "'password' is not key=value"),
    ],
)
def test_bad_input_is_refused_naming_the_option(text: str, complaint: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_add_scram(text)
    assert str(raised.value).startswith("--add-scram")
    assert complaint in str(raised.value)


# storage format -------------------------------------------------------------------


def test_format_writes_the_credentials_into_the_metadata_dir(tmp_path: Path) -> None:
    result = run(
        config(tmp_path),
        "--standalone",
        "--add-scram",
        "SCRAM-SHA-512=[name=admin,password=admin-secret]",
        "--add-scram",
        "SCRAM-SHA-256=[name=admin,password=admin-secret,iterations=8192]",
    )
    assert result.exit_code == 0, result.output
    assert "SCRAM credentials for admin (SCRAM-SHA-512), admin (SCRAM-SHA-256)" in result.output
    path = tmp_path / "meta" / BOOTSTRAP_RECORDS_FILE
    assert path.exists()
    assert b"admin-secret" not in path.read_bytes()
    values = read_bootstrap_records(RealFileSystem(), str(tmp_path / "meta"))
    records = [decode_metadata_record(v)[0] for v in values]
    assert all(isinstance(r, UserScramCredentialRecord) for r in records)
    image = MetadataImage()
    for offset, record in enumerate(records):
        image.replay(record, offset)
    assert {k: c.iterations for k, c in image.scram_credentials.items()} == {
        (2, "admin"): 4096,
        (1, "admin"): 8192,
    }
    assert all(authenticates(r, "admin-secret") for r in records)  # type: ignore[arg-type]


def test_a_bad_add_scram_formats_nothing(tmp_path: Path) -> None:
    result = run(config(tmp_path), "--standalone", "--add-scram", "SCRAM-SHA-512=[name=admin]")
    assert result.exit_code != 0
    assert "--add-scram" in result.output
    assert not (tmp_path / "meta" / "meta.properties").exists()
    assert not (tmp_path / "meta" / BOOTSTRAP_RECORDS_FILE).exists()


def test_the_same_user_and_mechanism_twice_is_refused(tmp_path: Path) -> None:
    result = run(
        config(tmp_path),
        "--standalone",
        "--add-scram",
        "SCRAM-SHA-512=[name=admin,password=one]",
        "--add-scram",
        "SCRAM-SHA-512=[name=admin,password=two]",
    )
    assert result.exit_code != 0
    assert "two credentials for one mechanism" in result.output
    assert not (tmp_path / "meta" / "meta.properties").exists()


def test_without_add_scram_there_is_no_bootstrap_file(tmp_path: Path) -> None:
    assert run(config(tmp_path), "--standalone").exit_code == 0
    assert not (tmp_path / "meta" / BOOTSTRAP_RECORDS_FILE).exists()
    assert read_bootstrap_records(RealFileSystem(), str(tmp_path / "meta")) == []


def test_a_broker_only_node_says_add_scram_belongs_on_the_controllers(tmp_path: Path) -> None:
    result = run(
        config(tmp_path, roles="broker"), "--add-scram", "SCRAM-SHA-512=[name=a,password=b]"
    )
    assert result.exit_code == 0, result.output
    assert "not a controller" in result.output
    assert not (tmp_path / "meta" / BOOTSTRAP_RECORDS_FILE).exists()


def test_a_damaged_bootstrap_file_is_refused_naming_it(tmp_path: Path) -> None:
    flags = ("--standalone", "--add-scram", "SCRAM-SHA-512=[name=a,password=b]")
    assert run(config(tmp_path), *flags).exit_code == 0
    path = tmp_path / "meta" / BOOTSTRAP_RECORDS_FILE
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ConfigError, match=BOOTSTRAP_RECORDS_FILE):
        read_bootstrap_records(RealFileSystem(), str(tmp_path / "meta"))
