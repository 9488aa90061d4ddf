"""What a stopped node's metadata log holds, read without changing a byte.

The first step of recovering a lost controller quorum (the seed's procedure, issue 8):
for every surviving node, controller or broker, how far its copy of the metadata log
goes (end offset, last epoch), where it starts (the latest snapshot), which voter set it
believes in, and its quorum state. Unlike opening the log for serving, nothing is
recovered here: a torn or damaged tail is reported, not cut, so the survey can be run on
every disk before anyone decides which log to keep.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.core.errors import CorruptLogError, DecodeError, InvalidRecordBatchError
from odradek.protocol.record_batch import (
    ControlType,
    iter_batches,
)
from odradek.raft.audit import AUDIT_HEADER
from odradek.raft.batches import decode_entry
from odradek.raft.log import SnapshotId
from odradek.raft.quorum_file import QuorumStateFile, StoredQuorumState
from odradek.raft.snapshot import decode_snapshot, parse_snapshot_file_name, snapshot_file_name
from odradek.raft.voters import VoterSet
from odradek.storage.fs import FileSystem, join


@dataclass(frozen=True, slots=True)
class MetadataLogSurvey:
    directory: str
    start_offset: int
    end_offset: int
    last_epoch: int
    latest_snapshot: SnapshotId | None
    voters: VoterSet | None
    """The voter set in force at the end of this copy (the last VotersRecord, else the
    latest snapshot's); None when the log names none (a static quorum)."""
    voters_offset: int | None
    """Where that VotersRecord is (-1: from the snapshot)."""
    quorum_state: StoredQuorumState | None
    problem: str | None
    """A damaged tail, or a file that could not be read: where the survey stopped."""
    epochs: tuple[tuple[int, int], ...] = ()
    """(epoch, first offset) of every epoch among the entries held, oldest first: what
    tells whether another copy is a prefix of this one (Raft's log matching)."""
    audits: tuple[tuple[int, str], ...] = ()
    """(offset, JSON) of every recovery audit record held (``recover-quorum apply``)."""


def survey(fs: FileSystem, directory: str) -> MetadataLogSurvey:
    """Survey the metadata log in ``directory`` (``<metadata.log.dir>/__cluster_metadata-0``)."""
    problem: str | None = None
    snapshot, voters = _latest_snapshot(fs, directory)
    start = snapshot.end_offset if snapshot is not None else 0
    end, last_epoch = start, snapshot.epoch if snapshot is not None else 0
    voters_offset = -1 if voters is not None else None
    epochs: list[tuple[int, int]] = []
    audits: list[tuple[int, str]] = []
    names = fs.listdir(directory) if fs.exists(directory) else []
    for name in sorted(n for n in names if n.endswith(".log")):
        data = fs.read_file(join(directory, name))
        batches = iter_batches(data)
        try:
            for header in batches:
                entry = decode_entry(data, header.position)
                if entry.next_offset <= end:
                    continue  # below the snapshot: the snapshot holds it
                if entry.offset != end:
                    raise DecodeError(f"offset {entry.offset} where {end} was expected")
                if not epochs or epochs[-1][0] != entry.epoch:
                    epochs.append((entry.epoch, entry.offset))
                end, last_epoch = entry.next_offset, entry.epoch
                for name, value in entry.headers:
                    if name == AUDIT_HEADER:
                        audits.append((entry.offset, value.decode("utf-8", "replace")))
                if entry.control == ControlType.VOTERS:
                    voters = VoterSet.decode(entry.records[0])
                    voters_offset = entry.offset
        except (DecodeError, InvalidRecordBatchError) as e:
            problem = f"{name}: stopped at offset {end}: {e}"
            break
        if batches.position < len(data):
            problem = (
                f"{name}: a torn tail of {len(data) - batches.position} bytes after offset {end}"
            )
            break
    try:
        quorum_state = QuorumStateFile(fs, directory).read()
    except CorruptLogError as e:
        quorum_state = None
        problem = problem or f"quorum-state: {e}"
    return MetadataLogSurvey(
        directory,
        start,
        end,
        last_epoch,
        snapshot,
        voters,
        voters_offset,
        quorum_state,
        problem,
        tuple(epochs),
        tuple(audits),
    )


def _latest_snapshot(fs: FileSystem, directory: str) -> tuple[SnapshotId | None, VoterSet | None]:
    if not fs.exists(directory):
        return None, None
    ids = sorted(
        found
        for name in fs.listdir(directory)
        if (found := parse_snapshot_file_name(name)) is not None
    )
    for snapshot in reversed(ids):
        try:
            from_file = decode_snapshot(fs.read_file(join(directory, snapshot_file_name(snapshot))))
        except DecodeError:
            continue  # a damaged snapshot: an older one, or the log alone, says more
        return snapshot, from_file.voters
    return None, None
