"""The small text files of a log dir, in Kafka's formats, replaced atomically.

* Offset checkpoints (``recovery-point-offset-checkpoint``,
  ``replication-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``cleaner-offset-checkpoint``): a version line
  ``0``, a count line, then ``<topic> <partition> <offset>`` lines.
* ``leader-epoch-checkpoint`` (one per partition): ``0``, a count, ``<epoch> <offset>``.
* ``partition.metadata``: ``version: 0`` and ``topic_id: <kafka uuid>``.
* ``meta.properties``: Java properties with ``version=1``, ``cluster.id``, ``node.id``,
  ``directory.id``.

Every write goes through :func:`~odradek.storage.fs.write_file_atomically` (write,
fsync, rename, fsync dir). A file that does not parse raises
:class:`~odradek.core.errors.CorruptLogError` naming the file and line: callers decide
whether that is fatal (meta.properties) or means "recover from the start" (a recovery
point).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from odradek.core.errors import CorruptLogError
from odradek.core.kafka_uuid import from_kafka_str, to_kafka_str
from odradek.storage.fs import FileSystem, write_file_atomically

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
META_PROPERTIES = "meta.properties"

TopicPartition = tuple[str, int]


def _lines(fs: FileSystem, path: str) -> list[str]:
    try:
        text = fs.read_file(path).decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptLogError(path, 0, "not UTF-8 text") from None
    return text.splitlines()


def _versioned_entries(fs: FileSystem, path: str, fields: int) -> list[list[str]]:
    lines = _lines(fs, path)
    if len(lines) < 2 or lines[0].strip() != "0":
        raise CorruptLogError(path, 0, "expected version 0 and a count")
    try:
        count = int(lines[1])
    except ValueError:
        raise CorruptLogError(path, 1, f"bad count {lines[1]!r}") from None
    entries = [line.split() for line in lines[2:] if line.strip()]
    if count != len(entries):
        raise CorruptLogError(path, 1, f"count {count} but {len(entries)} entries")
    for i, entry in enumerate(entries):
        if len(entry) != fields:
            raise CorruptLogError(path, i + 2, f"expected {fields} fields: {' '.join(entry)!r}")
    return entries


def _int(path: str, line: int, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise CorruptLogError(path, line, f"not an integer: {text!r}") from None


def read_offset_checkpoint(fs: FileSystem, path: str) -> dict[TopicPartition, int]:
    """Offsets by partition; an absent file is empty."""
    if not fs.exists(path):
        return {}
    out: dict[TopicPartition, int] = {}
    for i, (topic, partition, offset) in enumerate(_versioned_entries(fs, path, 3)):
        out[(topic, _int(path, i + 2, partition))] = _int(path, i + 2, offset)
    return out


def write_offset_checkpoint(fs: FileSystem, path: str, offsets: dict[TopicPartition, int]) -> None:
    lines = ["0", str(len(offsets))]
    lines += [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
    write_file_atomically(fs, path, ("\n".join(lines) + "\n").encode())


def read_leader_epoch_checkpoint(fs: FileSystem, path: str) -> list[tuple[int, int]]:
    """``(epoch, start offset)`` entries in file order; an absent file is empty."""
    if not fs.exists(path):
        return []
    return [
        (_int(path, i + 2, e), _int(path, i + 2, o))
        for i, (e, o) in enumerate(_versioned_entries(fs, path, 2))
    ]


def write_leader_epoch_checkpoint(
    fs: FileSystem, path: str, entries: list[tuple[int, int]], *, sync: bool = True
) -> None:
    lines = ["0", str(len(entries))] + [f"{e} {o}" for e, o in entries]
    write_file_atomically(fs, path, ("\n".join(lines) + "\n").encode(), sync=sync)


def _properties(fs: FileSystem, path: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for i, raw in enumerate(_lines(fs, path)):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        sep = min((p for p in (line.find("="), line.find(":")) if p >= 0), default=-1)
        if sep < 0:
            raise CorruptLogError(path, i, f"not key=value: {line!r}")
        props[line[:sep].strip()] = line[sep + 1 :].strip()
    return props


def read_partition_metadata(fs: FileSystem, path: str) -> uuid.UUID:
    props = _properties(fs, path)
    if props.get("version") != "0" or "topic_id" not in props:
        raise CorruptLogError(path, 0, "expected version: 0 and topic_id")
    try:
        return from_kafka_str(props["topic_id"])
    except ValueError as e:
        raise CorruptLogError(path, 1, str(e)) from None


def write_partition_metadata(fs: FileSystem, path: str, topic_id: uuid.UUID) -> None:
    write_file_atomically(fs, path, f"version: 0\ntopic_id: {to_kafka_str(topic_id)}\n".encode())


@dataclass(frozen=True, slots=True)
class MetaProperties:
    """The identity of a log dir: which cluster and node it belongs to, and its own id."""

    cluster_id: str
    node_id: int
    directory_id: uuid.UUID


def read_meta_properties(fs: FileSystem, path: str) -> MetaProperties:
    props = _properties(fs, path)
    if props.get("version") != "1":
        raise CorruptLogError(
            path, 0, f"unsupported meta.properties version {props.get('version')!r}"
        )
    missing = [k for k in ("cluster.id", "node.id", "directory.id") if k not in props]
    if missing:
        raise CorruptLogError(path, 0, f"missing {', '.join(missing)}")
    try:
        directory_id = from_kafka_str(props["directory.id"])
    except ValueError as e:
        raise CorruptLogError(path, 0, str(e)) from None
    return MetaProperties(props["cluster.id"], _int(path, 0, props["node.id"]), directory_id)


def write_meta_properties(fs: FileSystem, path: str, meta: MetaProperties) -> None:
    text = (
        "#\n# Written by odradek storage format; do not edit.\n"
        f"cluster.id={meta.cluster_id}\n"
        f"directory.id={to_kafka_str(meta.directory_id)}\n"
        f"node.id={meta.node_id}\n"
        "version=1\n"
    )
    write_file_atomically(fs, path, text.encode())
