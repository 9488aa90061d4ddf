"""Quarantine: where records removed by a truncation go, instead of being deleted.

A follower that truncates (a new leader's log diverges from its own), an unclean
election, or a recovery that finds a torn tail all remove records. Odradek never just
deletes them: the raw batches are copied into ``<partition>/quarantine/<entry>/``
with a ``manifest.json`` (when, why, leader epoch, offset range, counts), so an
operator can inspect them or publish them again. The folder is bounded by
``quarantine.max.bytes``: past it the oldest entries are dropped and an alarm says so.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass

from odradek.protocol.record_batch import (
    BatchHeader,
)
from odradek.storage.fs import FileSystem, join, write_file_atomically

QUARANTINE_DIR = "quarantine"
RECORDS_FILE = "records.log"
MANIFEST_FILE = "manifest.json"

log = logging.getLogger("odradek.storage")


@dataclass(frozen=True, slots=True)
class QuarantineManifest:
    name: str
    when_ms: int
    reason: str
    leader_epoch: int
    start_offset: int
    end_offset: int
    """One past the last offset removed."""
    batch_count: int
    record_count: int
    size_bytes: int


def entries(fs: FileSystem, partition_dir: str) -> list[QuarantineManifest]:
    """Every complete entry, oldest first (an entry without a manifest is incomplete)."""
    root = join(partition_dir, QUARANTINE_DIR)
    if not fs.is_dir(root):
        return []
    out = []
    for name in fs.listdir(root):
        manifest = join(root, name, MANIFEST_FILE)
        if not fs.exists(manifest):
            continue
        try:
            out.append(QuarantineManifest(**json.loads(fs.read_file(manifest))))
        except (ValueError, TypeError) as e:
            # A damaged manifest must not stop truncations: the records stay on disk
            # for the operator, the entry is just not listed.
            log.warning("skipping damaged quarantine manifest %s: %s", manifest, e)
    return out


def records_path(partition_dir: str, name: str) -> str:
    return join(partition_dir, QUARANTINE_DIR, name, RECORDS_FILE)


def add(
    fs: FileSystem,
    partition_dir: str,
    chunks: list[bytes],
    manifest: QuarantineManifest,
    max_bytes: int,
) -> list[QuarantineManifest]:
    """Store ``chunks`` durably under a new entry; return the entries evicted to fit.

    The records and the manifest are fsynced before this returns, so the caller may
    then cut its log: a crash in between leaves the records in both places, never in
    neither.
    """
    root = join(partition_dir, QUARANTINE_DIR)
    folder = join(root, manifest.name)
    fs.makedirs(folder)
    handle = fs.open(join(folder, RECORDS_FILE), create=True)
    try:
        handle.truncate(0)
        for chunk in chunks:
            handle.append(chunk)
        handle.fsync()
    finally:
        handle.close()
    write_file_atomically(fs, join(folder, MANIFEST_FILE), json.dumps(asdict(manifest)).encode())
    fs.fsync_dir(root)
    fs.fsync_dir(partition_dir)
    evicted: list[QuarantineManifest] = []
    present = entries(fs, partition_dir)
    total = sum(e.size_bytes for e in present)
    for old in present:
        if total <= max_bytes or old.name == manifest.name:
            break
        fs.rmtree(join(root, old.name))
        total -= old.size_bytes
        evicted.append(old)
    if evicted:
        fs.fsync_dir(root)
    return evicted


def move_aside(
    fs: FileSystem,
    partition_dir: str,
    chunks: list[bytes],
    start_offset: int,
    leader_epoch: int | None,
    now_ms: int,
    reason: str,
    headers: list[BatchHeader] | None,
    max_bytes: int,
) -> str | None:
    """Store the bytes a log is about to cut as a new entry, with its manifest and a log
    line; return the alarm to raise when older entries were dropped to fit
    ``max_bytes`` (``quarantine.max.bytes``), else None.

    ``headers`` are the batches of ``chunks`` when known (a truncation); without them (a
    torn tail, whose batches cannot be trusted) the manifest counts no batch.
    """
    size = sum(len(c) for c in chunks)
    if size == 0:
        return None
    if headers is None:
        headers = []
    end = headers[-1].next_offset if headers else start_offset
    sequence = len(entries(fs, partition_dir))
    manifest = QuarantineManifest(
        name=f"{now_ms:015d}-{start_offset:020d}-{sequence:04d}",
        when_ms=now_ms,
        reason=reason,
        leader_epoch=-1 if leader_epoch is None else leader_epoch,
        start_offset=start_offset,
        end_offset=end,
        batch_count=len(headers),
        record_count=sum(h.records_count for h in headers),
        size_bytes=size,
    )
    evicted = add(fs, partition_dir, chunks, manifest, max_bytes)
    log.warning(
        "%s: moved %d bytes (offsets %d..%d) to quarantine: %s",
        partition_dir,
        size,
        start_offset,
        end,
        reason,
    )
    if not evicted:
        return None
    alarm = (
        f"quarantine over quarantine.max.bytes={max_bytes}: "
        f"dropped {len(evicted)} oldest entries "
        f"({sum(e.size_bytes for e in evicted)} bytes)"
    )
    log.error("%s: %s", partition_dir, alarm)
    return alarm
