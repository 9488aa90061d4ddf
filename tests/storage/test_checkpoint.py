"""The small text files of a log dir: Kafka's exact formats, strict parsing, atomic writes.

An operator moving a log dir between Kafka and Odradek, or reading one with ``cat``,
relies on the bytes being Kafka's. Every malformed variant must raise
:class:`CorruptLogError` naming the file, and a power loss during a write must leave
the old or the new content, never a file that does not parse.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.core.errors import CorruptLogError
from odradek.core.kafka_uuid import to_kafka_str
from odradek.shell.real_fs import RealFileSystem
from odradek.storage.checkpoint import (
    MetaProperties,
    TopicPartition,
    read_leader_epoch_checkpoint,
    read_meta_properties,
    read_offset_checkpoint,
    read_partition_metadata,
    write_leader_epoch_checkpoint,
    write_meta_properties,
    write_offset_checkpoint,
    write_partition_metadata,
)
from odradek.storage.fs import FileSystem, join, write_file_atomically
from odradek.testing.sim_disk import PowerLoss, SimDisk

TOPIC_ID = uuid.UUID(bytes=bytes(range(16)))
TOPIC_ID_TEXT = "AAECAwQFBgcICQoLDA0ODw"  # Kafka's Uuid.toString() of the same 16 bytes
DIRECTORY_ID = uuid.UUID(int=0x0123456789ABCDEF0123456789ABCDEF)
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qk"


@dataclass
class Env:
    fs: FileSystem
    root: str

    def path(self, name: str) -> str:
        return join(self.root, name)

    def put(self, name: str, data: bytes) -> str:
        path = self.path(name)
        write_file_atomically(self.fs, path, data)
        return path


@pytest.fixture(params=["real", "sim"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    if request.param == "real":
        yield Env(RealFileSystem(), str(tmp_path))
    else:
        yield Env(new_disk(), "data")


def new_disk(seed: int = 0) -> SimDisk:
    disk = SimDisk(random.Random(seed))
    disk.makedirs("data")
    disk.fsync_dir("")
    return disk


def assert_corrupt(read: Callable[[FileSystem, str], object], env: Env, data: bytes) -> None:
    path = env.put("checkpoint", data)
    with pytest.raises(CorruptLogError) as info:
        read(env.fs, path)
    assert info.value.path == path
    assert path in str(info.value)


# --- Offset checkpoints ----------------------------------------------------------------


def test_offset_checkpoint_bytes_are_kafkas_sorted_by_topic_then_partition(env: Env) -> None:
    path = env.path("recovery-point-offset-checkpoint")
    offsets: dict[TopicPartition, int] = {
        ("orders", 10): 7,
        ("my-topic", 0): 5,
        ("orders", 2): 3,
        ("orders", 0): 0,
    }
    write_offset_checkpoint(env.fs, path, offsets)
    # Partition 2 before partition 10: the sort is numeric, as an operator reads it.
    assert env.fs.read_file(path) == b"0\n4\nmy-topic 0 5\norders 0 0\norders 2 3\norders 10 7\n"
    assert read_offset_checkpoint(env.fs, path) == offsets


def test_empty_offset_checkpoint_is_version_and_zero_count(env: Env) -> None:
    path = env.path("log-start-offset-checkpoint")
    write_offset_checkpoint(env.fs, path, {})
    assert env.fs.read_file(path) == b"0\n0\n"
    assert read_offset_checkpoint(env.fs, path) == {}


def test_absent_offset_checkpoint_is_empty(env: Env) -> None:
    assert read_offset_checkpoint(env.fs, env.path("replication-offset-checkpoint")) == {}


def test_offset_checkpoint_written_by_kafka_is_read(env: Env) -> None:
    # Kafka writes partitions in hash-map order, not sorted: the order must not matter.
    path = env.put(
        "replication-offset-checkpoint", b"0\n3\nt 1 20\n__consumer_offsets 7 0\nt 0 9\n"
    )
    assert read_offset_checkpoint(env.fs, path) == {
        ("t", 1): 20,
        ("__consumer_offsets", 7): 0,
        ("t", 0): 9,
    }


def test_rewrite_replaces_the_whole_offset_checkpoint(env: Env) -> None:
    path = env.path("recovery-point-offset-checkpoint")
    write_offset_checkpoint(env.fs, path, {("a", 0): 1, ("b", 0): 2, ("c", 0): 3})
    write_offset_checkpoint(env.fs, path, {("b", 0): 20})
    assert env.fs.read_file(path) == b"0\n1\nb 0 20\n"
    assert not env.fs.exists(path + ".tmp")


TOPICS = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
    min_size=1,
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.tuples(TOPICS, st.integers(0, 2**31 - 1)), st.integers(0, 2**63 - 1), max_size=20
    )
)
def test_offset_checkpoint_round_trips(offsets: dict[TopicPartition, int]) -> None:
    disk = new_disk()
    write_offset_checkpoint(disk, "data/cp", offsets)
    assert read_offset_checkpoint(disk, "data/cp") == offsets
    lines = disk.read_file("data/cp").decode().split("\n")
    assert lines[:2] == ["0", str(len(offsets))]
    assert lines[-1] == ""
    assert lines[2:-1] == [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"", id="empty-file"),
        pytest.param(b"0\n", id="no-count"),
        pytest.param(b"1\n0\n", id="version-1"),
        pytest.param(b"x\n0\n", id="version-not-a-number"),
        pytest.param(b"0\nx\n", id="count-not-a-number"),
        pytest.param(b"0\n2\nt 0 1\n", id="count-above-entries"),
        pytest.param(b"0\n0\nt 0 1\n", id="count-below-entries"),
        pytest.param(b"0\n-1\n", id="negative-count"),
        pytest.param(b"0\n1\nt 0\n", id="two-fields"),
        pytest.param(b"0\n1\nt 0 1 2\n", id="four-fields"),
        pytest.param(b"0\n1\nt x 1\n", id="partition-not-an-integer"),
        pytest.param(b"0\n1\nt 0 1.5\n", id="offset-not-an-integer"),
        pytest.param(b"0\n1\nt 0 \n", id="offset-missing"),
        pytest.param(b"\xff\xfe0\n0\n", id="not-utf8"),
        pytest.param(b"0\n1\n\xc3 0 1\n", id="not-utf8-in-topic"),
    ],
)
def test_malformed_offset_checkpoint_raises_corrupt_log_error(env: Env, data: bytes) -> None:
    assert_corrupt(read_offset_checkpoint, env, data)


# --- Leader-epoch checkpoint -----------------------------------------------------------


def test_leader_epoch_checkpoint_bytes_are_kafkas(env: Env) -> None:
    path = env.path("leader-epoch-checkpoint")
    write_leader_epoch_checkpoint(env.fs, path, [(0, 0), (3, 100), (7, 250)])
    assert env.fs.read_file(path) == b"0\n3\n0 0\n3 100\n7 250\n"
    assert read_leader_epoch_checkpoint(env.fs, path) == [(0, 0), (3, 100), (7, 250)]


def test_empty_leader_epoch_checkpoint(env: Env) -> None:
    path = env.path("leader-epoch-checkpoint")
    write_leader_epoch_checkpoint(env.fs, path, [])
    assert env.fs.read_file(path) == b"0\n0\n"
    assert read_leader_epoch_checkpoint(env.fs, path) == []


def test_absent_leader_epoch_checkpoint_is_empty(env: Env) -> None:
    assert read_leader_epoch_checkpoint(env.fs, env.path("leader-epoch-checkpoint")) == []


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1)), max_size=20).map(
        lambda entries: sorted(set(entries))
    )
)
def test_leader_epoch_checkpoint_round_trips_in_file_order(entries: list[tuple[int, int]]) -> None:
    disk = new_disk()
    write_leader_epoch_checkpoint(disk, "data/lec", entries)
    assert read_leader_epoch_checkpoint(disk, "data/lec") == entries


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"", id="empty-file"),
        pytest.param(b"1\n0\n", id="version-1"),
        pytest.param(b"0\n", id="no-count"),
        pytest.param(b"0\ntwo\n0 0\n1 5\n", id="count-not-a-number"),
        pytest.param(b"0\n3\n0 0\n1 5\n", id="count-above-entries"),
        pytest.param(b"0\n1\n0 0\n1 5\n", id="count-below-entries"),
        pytest.param(b"0\n1\n0\n", id="one-field"),
        pytest.param(b"0\n1\nt 0 5\n", id="three-fields"),
        pytest.param(b"0\n1\nx 5\n", id="epoch-not-an-integer"),
        pytest.param(b"0\n1\n0 5x\n", id="offset-not-an-integer"),
        pytest.param(b"0\n1\n0 \x80\n", id="not-utf8"),
    ],
)
def test_malformed_leader_epoch_checkpoint_raises_corrupt_log_error(env: Env, data: bytes) -> None:
    assert_corrupt(read_leader_epoch_checkpoint, env, data)


# --- partition.metadata -----------------------------------------------------------------


def test_partition_metadata_bytes_are_kafkas(env: Env) -> None:
    path = env.path("partition.metadata")
    write_partition_metadata(env.fs, path, TOPIC_ID)
    assert env.fs.read_file(path) == f"version: 0\ntopic_id: {TOPIC_ID_TEXT}\n".encode()
    assert read_partition_metadata(env.fs, path) == TOPIC_ID


@settings(max_examples=50, deadline=None)
@given(st.uuids())
def test_partition_metadata_topic_id_is_22_base64url_characters(topic_id: uuid.UUID) -> None:
    disk = new_disk()
    write_partition_metadata(disk, "data/pm", topic_id)
    version, topic_line, end = disk.read_file("data/pm").decode().split("\n")
    assert (version, end) == ("version: 0", "")
    key, _, text = topic_line.partition(": ")
    assert key == "topic_id"
    assert len(text) == 22
    assert set(text) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert read_partition_metadata(disk, "data/pm") == topic_id


def test_partition_metadata_written_by_kafka_is_read(env: Env) -> None:
    # Kafka's PartitionMetadata.encode() ends without a newline.
    path = env.put("partition.metadata", f"version: 0\ntopic_id: {TOPIC_ID_TEXT}".encode())
    assert read_partition_metadata(env.fs, path) == TOPIC_ID


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"", id="empty-file"),
        pytest.param(f"topic_id: {TOPIC_ID_TEXT}\n".encode(), id="no-version"),
        pytest.param(f"version: 1\ntopic_id: {TOPIC_ID_TEXT}\n".encode(), id="version-1"),
        pytest.param(b"version: 0\n", id="no-topic-id"),
        pytest.param(b"version: 0\ntopic_id: AAECAwQFBgcICQoLDA0O\n", id="uuid-too-short"),
        pytest.param(b"version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw==\n", id="uuid-padded"),
        pytest.param(b"version: 0\ntopic_id: !!!!!!!!!!!!!!!!!!!!!!\n", id="uuid-not-base64"),
        pytest.param(
            b"version: 0\ntopic_id: 00010203-0405-0607-0809-0a0b0c0d0e0f\n", id="uuid-dashed"
        ),
        pytest.param(b"version: 0\ntopic_id\n", id="line-without-separator"),
        pytest.param(b"version: 0\ntopic_id: \xff\xff\n", id="not-utf8"),
    ],
)
def test_malformed_partition_metadata_raises_corrupt_log_error(env: Env, data: bytes) -> None:
    assert_corrupt(read_partition_metadata, env, data)


# --- meta.properties --------------------------------------------------------------------


META = MetaProperties(cluster_id=CLUSTER_ID, node_id=3, directory_id=DIRECTORY_ID)


def test_meta_properties_has_kafkas_keys(env: Env) -> None:
    path = env.path("meta.properties")
    write_meta_properties(env.fs, path, META)
    lines = env.fs.read_file(path).decode().splitlines()
    assert all(line.startswith("#") for line in lines if "=" not in line)
    assert sorted(line for line in lines if not line.startswith("#")) == [
        f"cluster.id={CLUSTER_ID}",
        f"directory.id={to_kafka_str(DIRECTORY_ID)}",
        "node.id=3",
        "version=1",
    ]
    assert read_meta_properties(env.fs, path) == META


def test_meta_properties_written_by_kafka_is_read(env: Env) -> None:
    # Java's Properties.store: a comment, a date comment, keys in hash order.
    text = (
        "#\n#Mon Nov 30 12:00:00 UTC 2026\n"
        f"node.id=3\ndirectory.id={to_kafka_str(DIRECTORY_ID)}\n"
        f"version=1\ncluster.id={CLUSTER_ID}\n"
    )
    path = env.put("meta.properties", text.encode())
    assert read_meta_properties(env.fs, path) == META


@settings(max_examples=40, deadline=None)
@given(
    st.text(
        alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1
    ),
    st.integers(0, 2**31 - 1),
    st.uuids(),
)
def test_meta_properties_round_trips(
    cluster_id: str, node_id: int, directory_id: uuid.UUID
) -> None:
    disk = new_disk()
    meta = MetaProperties(cluster_id, node_id, directory_id)
    write_meta_properties(disk, "data/meta.properties", meta)
    assert read_meta_properties(disk, "data/meta.properties") == meta


GOOD_META_LINES = {
    "cluster.id": f"cluster.id={CLUSTER_ID}",
    "directory.id": f"directory.id={to_kafka_str(DIRECTORY_ID)}",
    "node.id": "node.id=3",
    "version": "version=1",
}


def meta_text(**replace: str | None) -> bytes:
    lines = dict(GOOD_META_LINES)
    for key, line in replace.items():
        name = key.replace("_", ".")
        if line is None:
            del lines[name]
        else:
            lines[name] = line
    return ("\n".join(lines.values()) + "\n").encode()


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"", id="empty-file"),
        pytest.param(meta_text(version="version=0"), id="version-0"),
        pytest.param(meta_text(version=None), id="missing-version"),
        pytest.param(meta_text(cluster_id=None), id="missing-cluster-id"),
        pytest.param(meta_text(node_id=None), id="missing-node-id"),
        pytest.param(meta_text(directory_id=None), id="missing-directory-id"),
        pytest.param(meta_text(node_id="node.id=three"), id="node-id-not-an-integer"),
        pytest.param(meta_text(directory_id="directory.id=short"), id="bad-directory-id"),
        pytest.param(meta_text(version="version 1"), id="line-without-separator"),
        pytest.param(meta_text() + b"comment=caf\xe9\n", id="not-utf8"),
    ],
)
def test_malformed_meta_properties_raises_corrupt_log_error(env: Env, data: bytes) -> None:
    assert_corrupt(read_meta_properties, env, data)


# --- Atomic replacement -----------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """One checkpoint file type: how to write an old and a new value and read one back."""

    name: str
    write: Callable[[FileSystem, str, object], None]
    read: Callable[[FileSystem, str], object]
    old: object
    new: object
    absent: object = None


KINDS = [
    Kind(
        "offsets",
        lambda fs, p, v: write_offset_checkpoint(fs, p, v),  # type: ignore[arg-type]
        read_offset_checkpoint,
        {("t", 0): 10, ("t", 1): 20},
        {("t", 0): 15, ("t", 1): 25, ("u", 0): 3},
        absent={},
    ),
    Kind(
        "leader-epochs",
        lambda fs, p, v: write_leader_epoch_checkpoint(fs, p, v),  # type: ignore[arg-type]
        read_leader_epoch_checkpoint,
        [(0, 0), (1, 50)],
        [(0, 0), (1, 50), (4, 90)],
        absent=[],
    ),
    Kind(
        "partition-metadata",
        lambda fs, p, v: write_partition_metadata(fs, p, v),  # type: ignore[arg-type]
        read_partition_metadata,
        TOPIC_ID,
        uuid.UUID(int=7),
    ),
    Kind(
        "meta-properties",
        lambda fs, p, v: write_meta_properties(fs, p, v),  # type: ignore[arg-type]
        read_meta_properties,
        META,
        MetaProperties("other-cluster", 4, uuid.UUID(int=9)),
    ),
]

PATH = "data/cp"


def read_after_crash(kind: Kind, disk: SimDisk) -> object:
    if kind.absent is None and not disk.exists(PATH):
        return None
    return kind.read(disk, PATH)


def count_mutations(kind: Kind, with_old: bool) -> int:
    disk = new_disk()
    if with_old:
        kind.write(disk, PATH, kind.old)
    before = disk.operations
    kind.write(disk, PATH, kind.new)
    return disk.operations - before


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
@pytest.mark.parametrize("seed", range(4))
def test_power_loss_at_every_step_leaves_old_or_new_content(kind: Kind, seed: int) -> None:
    steps = count_mutations(kind, with_old=True)
    assert steps >= 4  # at least: create the temporary, append, fsync, rename, fsync the dir
    for step in range(steps):
        disk = new_disk(seed * 1000 + step)
        kind.write(disk, PATH, kind.old)
        disk.schedule_power_loss(step)
        with pytest.raises(PowerLoss):
            kind.write(disk, PATH, kind.new)
        assert disk.exists(PATH), f"power loss at step {step} lost the old file"
        assert kind.read(disk, PATH) in (kind.old, kind.new), f"step {step}"
        # The next write after the restart works despite any leftover temporary file.
        kind.write(disk, PATH, kind.new)
        assert kind.read(disk, PATH) == kind.new


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
@pytest.mark.parametrize("seed", range(4))
def test_power_loss_during_first_write_leaves_no_file_or_the_new_one(kind: Kind, seed: int) -> None:
    steps = count_mutations(kind, with_old=False)
    for step in range(steps):
        disk = new_disk(seed * 1000 + step)
        disk.schedule_power_loss(step)
        with pytest.raises(PowerLoss):
            kind.write(disk, PATH, kind.new)
        assert read_after_crash(kind, disk) in (kind.absent, kind.new), f"step {step}"


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
@pytest.mark.parametrize("seed", range(4))
def test_completed_write_survives_power_loss(kind: Kind, seed: int) -> None:
    disk = new_disk(seed)
    kind.write(disk, PATH, kind.old)
    kind.write(disk, PATH, kind.new)
    disk.crash()
    assert kind.read(disk, PATH) == kind.new
    assert not disk.exists(PATH + ".tmp")


def test_stale_temporary_file_from_a_crash_is_replaced(env: Env) -> None:
    # A torn ``.tmp`` left by an earlier crash must not leak into the next checkpoint.
    stale = env.put("recovery-point-offset-checkpoint.tmp", b"0\n9\ngarbage that is longer")
    path = env.path("recovery-point-offset-checkpoint")
    write_offset_checkpoint(env.fs, path, {("t", 0): 1})
    assert env.fs.read_file(path) == b"0\n1\nt 0 1\n"
    assert not env.fs.exists(stale)
