"""``odradek storage format`` with kafka-storage's dynamic-quorum flags (KIP-853)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from odradek.cli.main import main
from odradek.core.kafka_uuid import from_kafka_str, to_kafka_str
from odradek.raft.snapshot import decode_snapshot
from odradek.raft.voters import Voter, VoterEndpoint, VoterSet

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
CHECKPOINT = "__cluster_metadata-0/00000000000000000000-0000000000.checkpoint"
DYNAMIC = "controller.quorum.bootstrap.servers=127.0.0.1:9093\n"
STATIC = "controller.quorum.voters=1@127.0.0.1:9093\n"


def config(tmp_path: Path, quorum: str, roles: str = "broker,controller") -> Path:
    listeners = "PLAINTEXT://127.0.0.1:9092"
    if "controller" in roles:
        listeners += ",CONTROLLER://ctl.example:9093"
    path = tmp_path / "server.properties"
    path.write_text(
        f"process.roles={roles}\n"
        "node.id=1\n"
        f"listeners={listeners}\n"
        "controller.listener.names=CONTROLLER\n"
        f"log.dirs={tmp_path / 'logs'}\n"
        f"metadata.log.dir={tmp_path / 'meta'}\n" + quorum
    )
    return path


def run(path: Path, *flags: str) -> Result:
    args = ["storage", "format", "--config", str(path), "--cluster-id", CLUSTER, *flags]
    return CliRunner().invoke(main, args)


def directory_id(log_dir: Path) -> uuid.UUID:
    for line in (log_dir / "meta.properties").read_text().splitlines():
        if line.startswith("directory.id="):
            return from_kafka_str(line.split("=", 1)[1])
    raise AssertionError("no directory.id")


def voters_of(tmp_path: Path) -> VoterSet | None:
    return decode_snapshot((tmp_path / "meta" / CHECKPOINT).read_bytes()).voters


def test_standalone_makes_this_controller_the_only_voter(tmp_path: Path) -> None:
    result = run(config(tmp_path, DYNAMIC), "--standalone")
    assert result.exit_code == 0, result.output
    meta_dir_id = directory_id(tmp_path / "meta")
    assert voters_of(tmp_path) == VoterSet.of(
        [Voter(1, meta_dir_id, (VoterEndpoint("CONTROLLER", "ctl.example", 9093),))]
    )
    # Every log dir has its own identity.
    assert directory_id(tmp_path / "logs") != meta_dir_id
    assert decode_snapshot((tmp_path / "meta" / CHECKPOINT).read_bytes()).kraft_version == 1


def test_initial_controllers_give_the_whole_set_and_this_dirs_id(tmp_path: Path) -> None:
    ids = {n: uuid.uuid4() for n in (1, 2, 3)}
    flag = ",".join(f"{n}@c{n}.example:9093:{to_kafka_str(d)}" for n, d in ids.items())
    result = run(config(tmp_path, DYNAMIC), "--initial-controllers", flag)
    assert result.exit_code == 0, result.output
    assert directory_id(tmp_path / "meta") == ids[1]
    voters = voters_of(tmp_path)
    assert voters is not None
    assert [(v.node_id, v.directory_id) for v in voters] == sorted(ids.items())
    assert voters.get(3) == Voter(3, ids[3], (VoterEndpoint("CONTROLLER", "c3.example", 9093),))


def test_no_initial_controllers_bootstraps_no_voters(tmp_path: Path) -> None:
    result = run(config(tmp_path, DYNAMIC), "--no-initial-controllers")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "meta" / "meta.properties").exists()
    assert not (tmp_path / "meta" / CHECKPOINT).exists()


def test_a_dynamic_controller_must_say_who_votes(tmp_path: Path) -> None:
    result = run(config(tmp_path, DYNAMIC))
    assert result.exit_code != 0
    assert "--standalone, --initial-controllers or --no-initial-controllers" in result.output
    assert not (tmp_path / "meta").exists()


@pytest.mark.parametrize(
    "flags",
    [
        ["--standalone", "--no-initial-controllers"],
        ["--standalone", "--initial-controllers", "1@h:1:AAAAAAAAAAAAAAAAAAAAAA"],
    ],
)
def test_the_quorum_flags_exclude_each_other(tmp_path: Path, flags: list[str]) -> None:
    result = run(config(tmp_path, DYNAMIC), *flags)
    assert result.exit_code == 2 and "exclude each other" in result.output
    assert not (tmp_path / "meta").exists()


@pytest.mark.parametrize(
    "flags", [["--standalone"], ["--initial-controllers", "1@h:9093:AAAAAAAAAAAAAAAAAAAAAQ"]]
)
def test_static_voters_refuse_the_dynamic_flags(tmp_path: Path, flags: list[str]) -> None:
    result = run(config(tmp_path, STATIC), *flags)
    assert result.exit_code != 0 and "controller.quorum.voters" in result.output
    assert not (tmp_path / "meta").exists()


def test_static_voters_format_without_voters_in_the_log(tmp_path: Path) -> None:
    result = run(config(tmp_path, STATIC))
    assert result.exit_code == 0, result.output
    assert directory_id(tmp_path / "meta") != directory_id(tmp_path / "logs")
    assert not (tmp_path / "meta" / CHECKPOINT).exists()


def test_a_broker_carries_no_voters(tmp_path: Path) -> None:
    path = config(tmp_path, DYNAMIC, roles="broker")
    refused = run(path, "--standalone")
    assert refused.exit_code != 0 and "not a controller" in refused.output
    flag = f"1@h:9093:{to_kafka_str(uuid.uuid4())}"
    result = run(path, "--initial-controllers", flag)
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "meta" / CHECKPOINT).exists()


@pytest.mark.parametrize(
    "value",
    [
        "1@h:9093",
        "x@h:9093:AAAAAAAAAAAAAAAAAAAAAA",
        "1@h:9093:short",
        "1@h:1:AAAAAAAAAAAAAAAAAAAAAA,1@g:2:AAAAAAAAAAAAAAAAAAAAAQ",
    ],
)
def test_bad_initial_controllers_are_refused(tmp_path: Path, value: str) -> None:
    result = run(config(tmp_path, DYNAMIC), "--initial-controllers", value)
    assert result.exit_code != 0 and "--initial-controllers" in result.output
    assert not (tmp_path / "meta").exists()


def test_formatting_again_keeps_the_first_voters(tmp_path: Path) -> None:
    path = config(tmp_path, DYNAMIC)
    assert run(path, "--standalone").exit_code == 0
    first = (tmp_path / "meta" / CHECKPOINT).read_bytes()
    again = run(path, "--standalone")
    assert again.exit_code != 0 and "already formatted" in again.output
    tolerated = run(path, "--standalone", "--ignore-formatted")
    assert tolerated.exit_code == 0, tolerated.output
    assert (tmp_path / "meta" / CHECKPOINT).read_bytes() == first
