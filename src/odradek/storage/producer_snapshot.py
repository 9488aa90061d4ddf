"""Producer state snapshot files: Kafka's ``<offset>.snapshot`` in a partition dir.

This module owns the bytes and the names of those files, nothing of their meaning: the
rules for producer state live in ``odradek.replication.producer_state``, and the broker
carries entries between the two (both take any tuple of the eight ints below, so the
entries pass across unchanged). A snapshot named for offset ``N`` holds the producer
state of the log's batches below ``N``; a restart loads the latest one at or below the
log end and replays the log from ``N``.

The format is Kafka's (``ProducerStateManager.writeSnapshot`` / ``readSnapshot``),
big-endian, so a partition dir moves between Kafka and Odradek::

    version             int16    0   always 1
    crc                 uint32   2   CRC32C of bytes [6, end of file)
    entry count         int32    6   Kafka's ARRAY: a count, then the entries
    entries             46 bytes each:
        producer_id               int64
        epoch                     int16
        last_sequence             int32   -1 when the producer has no batch
        last_offset               int64   -1 when the producer has no batch
        offset_delta              int32   last_offset - first offset of that batch
        timestamp                 int64   the producer's last batch timestamp
        coordinator_epoch         int32
        current_txn_first_offset  int64   -1 when no transaction is open

A file name is the offset in 20 zero-padded digits plus ``.snapshot``, like a segment's.
Writes go through :func:`~odradek.storage.fs.write_file_atomically`, so a crash leaves
the old file, the new one, or (for a new offset) none, plus at most a ``.tmp`` that
``PartitionLog.open`` removes; Kafka itself writes in place and relies on the CRC.
A file that fails a check raises :class:`~odradek.core.errors.CorruptLogError` naming
it: bad version, CRC, or a length that is not the header plus whole entries. Stricter
than Kafka in one way: entries that Kafka could never have written (a negative producer
id, an impossible offset, a repeated producer id) are refused as corruption too.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import crc32c

from odradek.core.errors import CorruptLogError, InvariantError
from odradek.storage.fs import FileSystem, join, write_file_atomically

__all__ = [
    "ENTRY_SIZE",
    "HEADER_SIZE",
    "SNAPSHOT_SUFFIX",
    "SNAPSHOT_VERSION",
    "LoadedSnapshot",
    "ProducerSnapshotEntry",
    "SnapshotFields",
    "SnapshotFile",
    "decode_snapshot",
    "delete_snapshots_after",
    "delete_snapshots_before",
    "delete_snapshots_of_deleted_segments",
    "encode_snapshot",
    "list_snapshots",
    "load_latest_snapshot",
    "read_snapshot",
    "snapshot_file_name",
    "snapshot_offset",
    "write_snapshot",
]

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1

_HEADER = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")
_CRC = struct.Struct(">I")
_CRC_OFFSET = 2
_CRC_START = 6
"""The CRC covers everything after itself: the entry count and the entries."""

HEADER_SIZE = _HEADER.size
ENTRY_SIZE = _ENTRY.size


class ProducerSnapshotEntry(NamedTuple):
    """One entry of a snapshot file, fields in the file's order."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


SnapshotFields = tuple[int, int, int, int, int, int, int, int]
"""A :class:`ProducerSnapshotEntry` or any tuple of the same eight ints."""


@dataclass(frozen=True, slots=True)
class SnapshotFile:
    offset: int
    path: str


@dataclass(frozen=True, slots=True)
class LoadedSnapshot:
    """What :func:`load_latest_snapshot` found."""

    offset: int | None
    """The loaded snapshot's offset; None when there is none, so replay from the log
    start with an empty state."""
    entries: list[ProducerSnapshotEntry] = field(default_factory=list)
    corrupt: list[CorruptLogError] = field(default_factory=list)
    """Newer snapshots that failed to read and were deleted, for the log."""


# Names ---------------------------------------------------------------------------


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_offset(name: str) -> int | None:
    """The offset a snapshot file name stands for, or None if it is not one."""
    if not name.endswith(SNAPSHOT_SUFFIX):
        return None
    stem = name[: -len(SNAPSHOT_SUFFIX)]
    # isdigit() alone would take Unicode digits that int() reads but Kafka never writes.
    if not stem or not stem.isascii() or not stem.isdigit():
        return None
    return int(stem)


def list_snapshots(fs: FileSystem, directory: str) -> list[SnapshotFile]:
    """The snapshot files in ``directory``, by offset. Temporary files are not listed."""
    found = []
    for name in fs.listdir(directory):
        offset = snapshot_offset(name)
        if offset is not None:
            found.append(SnapshotFile(offset, join(directory, name)))
    found.sort(key=lambda snapshot: snapshot.offset)
    return found


# Bytes ---------------------------------------------------------------------------


def encode_snapshot(entries: Iterable[SnapshotFields]) -> bytes:
    """The file content for ``entries``, in the order given."""
    rows = list(entries)
    out = bytearray(HEADER_SIZE + ENTRY_SIZE * len(rows))
    try:
        _HEADER.pack_into(out, 0, SNAPSHOT_VERSION, 0, len(rows))
        for i, row in enumerate(rows):
            _ENTRY.pack_into(out, HEADER_SIZE + i * ENTRY_SIZE, *row)
    except struct.error as e:
        raise InvariantError(f"producer snapshot entry out of range: {e}") from None
    _CRC.pack_into(out, _CRC_OFFSET, crc32c.crc32c(memoryview(out)[_CRC_START:]))
    return bytes(out)


def decode_snapshot(data: bytes, path: str) -> list[ProducerSnapshotEntry]:
    """The entries of a snapshot file's content; CorruptLogError naming ``path``."""
    size = len(data)
    if size < HEADER_SIZE:
        raise CorruptLogError(path, 0, f"{size} bytes, too short for a snapshot header")
    version, stored_crc, count = _HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptLogError(path, 0, f"unknown snapshot version {version}")
    computed = int(crc32c.crc32c(memoryview(data)[_CRC_START:]))
    if computed != stored_crc:
        raise CorruptLogError(
            path, _CRC_OFFSET, f"stored crc 0x{stored_crc:08x}, computed 0x{computed:08x}"
        )
    expected = HEADER_SIZE + ENTRY_SIZE * count
    if count < 0 or expected != size:
        raise CorruptLogError(
            path, _CRC_START, f"{count} entries need {expected} bytes, the file has {size}"
        )
    entries: list[ProducerSnapshotEntry] = []
    seen: set[int] = set()
    for i in range(count):
        position = HEADER_SIZE + i * ENTRY_SIZE
        entry = ProducerSnapshotEntry._make(_ENTRY.unpack_from(data, position))
        problem = _entry_problem(entry, seen)
        if problem is not None:
            raise CorruptLogError(path, position, f"entry {i}: {problem}")
        seen.add(entry.producer_id)
        entries.append(entry)
    return entries


def _entry_problem(entry: ProducerSnapshotEntry, seen: set[int]) -> str | None:
    """Why Kafka could not have written ``entry``, or None. The replication layer
    relies on these, so a file that passes its CRC but breaks them is still refused."""
    if entry.producer_id < 0:
        return f"producer id {entry.producer_id}"
    if entry.producer_id in seen:
        return f"producer id {entry.producer_id} appears twice"
    if entry.last_offset < -1:
        return f"last offset {entry.last_offset}"
    if entry.last_offset >= 0 and not 0 <= entry.offset_delta <= entry.last_offset:
        return f"offset delta {entry.offset_delta} with last offset {entry.last_offset}"
    if entry.last_sequence < -1 or (entry.last_offset >= 0 and entry.last_sequence < 0):
        return f"last sequence {entry.last_sequence} with last offset {entry.last_offset}"
    return None


# Files ---------------------------------------------------------------------------


def read_snapshot(fs: FileSystem, path: str) -> list[ProducerSnapshotEntry]:
    return decode_snapshot(fs.read_file(path), path)


def write_snapshot(
    fs: FileSystem, directory: str, offset: int, entries: Iterable[SnapshotFields]
) -> str:
    """Write (or replace) the snapshot for ``offset`` atomically; return its path."""
    path = join(directory, snapshot_file_name(offset))
    write_file_atomically(fs, path, encode_snapshot(entries))
    return path


def _delete(fs: FileSystem, directory: str, doomed: list[SnapshotFile]) -> list[int]:
    for snapshot in doomed:
        fs.remove(snapshot.path)
    if doomed:
        # One directory fsync for the lot; a crash before it may bring some back, which
        # is why loading ignores snapshots above the log end.
        fs.fsync_dir(directory)
    return [snapshot.offset for snapshot in doomed]


def delete_snapshots_after(fs: FileSystem, directory: str, offset: int) -> list[int]:
    """Delete snapshots above ``offset`` (the log end after a truncation); return their
    offsets. A snapshot exactly at ``offset`` describes the log below it and stays."""
    return _delete(fs, directory, [s for s in list_snapshots(fs, directory) if s.offset > offset])


def delete_snapshots_before(fs: FileSystem, directory: str, offset: int) -> list[int]:
    """Delete snapshots below ``offset`` (Kafka's ``deleteSnapshotsBefore``, used as the
    log start moves up); return their offsets."""
    return _delete(fs, directory, [s for s in list_snapshots(fs, directory) if s.offset < offset])


def delete_snapshots_of_deleted_segments(
    fs: FileSystem, directory: str, first_offset: int
) -> list[int]:
    """Delete the snapshots of segments that retention deleted, those below
    ``first_offset`` (the base offset of the log's first segment now), as Kafka deletes
    each deleted segment's snapshot; return their offsets. The newest snapshot stays,
    whatever its offset, as it is the state the next load starts from."""
    snapshots = list_snapshots(fs, directory)
    return _delete(fs, directory, [s for s in snapshots[:-1] if s.offset < first_offset])


def load_latest_snapshot(fs: FileSystem, directory: str, max_offset: int) -> LoadedSnapshot:
    """The newest readable snapshot at or below ``max_offset`` (the log end).

    A snapshot that fails to read is deleted and the next older one tried, as Kafka's
    ``loadFromSnapshot`` does: it is derived data that a replay of the log rebuilds.
    Snapshots above ``max_offset`` are left alone; :func:`delete_snapshots_after`
    removes them.
    """
    corrupt: list[CorruptLogError] = []
    candidates = [s for s in list_snapshots(fs, directory) if s.offset <= max_offset]
    for snapshot in reversed(candidates):
        try:
            entries = read_snapshot(fs, snapshot.path)
        except CorruptLogError as e:
            corrupt.append(e)
            fs.remove(snapshot.path)
            fs.fsync_dir(directory)
            continue
        return LoadedSnapshot(snapshot.offset, entries, corrupt)
    return LoadedSnapshot(None, [], corrupt)
