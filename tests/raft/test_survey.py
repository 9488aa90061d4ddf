"""Surveying a stopped node's metadata log reads it and changes nothing."""

from __future__ import annotations

import random
import uuid

from odradek.protocol.record_batch import (
    ControlType,
)
from odradek.raft.disk_log import DiskRaftLog
from odradek.raft.log import Entry, SnapshotId
from odradek.raft.quorum_file import QuorumStateFile, StoredQuorumState
from odradek.raft.snapshot import encode_snapshot
from odradek.raft.survey import survey
from odradek.raft.voters import Voter, VoterSet
from odradek.testing.sim_disk import SimDisk

DIR = "meta/__cluster_metadata-0"


def voters(*ids: int) -> VoterSet:
    return VoterSet.of(Voter(i, uuid.UUID(int=i)) for i in ids)


def written_log() -> SimDisk:
    disk = SimDisk(random.Random(0))
    disk.makedirs(DIR)
    disk.fsync_dir("meta")
    log = DiskRaftLog.open(disk, DIR, 0)
    log.append(
        [
            Entry(0, 1, (b"leader",), ControlType.LEADER_CHANGE),
            Entry(1, 1, (voters(1, 2, 3).encode(),), ControlType.VOTERS),
            Entry(2, 1, (b"a", b"b")),
            Entry(4, 2, (voters(1, 2).encode(),), ControlType.VOTERS),
            Entry(5, 3, (b"c",)),
        ]
    )
    log.flush()
    log.close()
    QuorumStateFile(disk, DIR).write(StoredQuorumState(3, 2, 2, uuid.UUID(int=2)))
    return disk


def test_the_survey_reads_ends_epochs_voters_and_quorum_state() -> None:
    disk = written_log()
    found = survey(disk, DIR)
    assert (found.start_offset, found.end_offset, found.last_epoch) == (0, 6, 3)
    assert found.voters == voters(1, 2) and found.voters_offset == 4
    assert found.quorum_state == StoredQuorumState(3, 2, 2, uuid.UUID(int=2))
    assert found.problem is None


def test_a_snapshot_gives_the_start_and_the_voters_below_it() -> None:
    disk = SimDisk(random.Random(0))
    disk.makedirs(DIR)
    log = DiskRaftLog.open(disk, DIR, 0)
    snapshot = SnapshotId(10, 4)
    log.write_snapshot(snapshot, encode_snapshot(snapshot, [], voters(4, 5, 6), 0))
    log.reset_to_snapshot(snapshot)
    log.append([Entry(10, 5, (b"x",))])
    log.flush()
    log.close()
    found = survey(disk, DIR)
    assert found.latest_snapshot == snapshot
    assert (found.start_offset, found.end_offset, found.last_epoch) == (10, 11, 5)
    assert found.voters == voters(4, 5, 6) and found.voters_offset == -1


def test_a_torn_tail_is_reported_and_left_on_disk() -> None:
    disk = written_log()
    segment = f"{DIR}/00000000000000000000.log"
    tail = b"\x00\x00\x00\x00\x00\x00\x00\x06\x00\x00\x01"  # half a batch header
    disk.open(segment).append(tail)
    torn = disk.read_file(segment)
    found = survey(disk, DIR)
    assert found.end_offset == 6
    assert found.problem is not None and "torn tail of 11 bytes" in found.problem
    assert disk.read_file(segment) == torn, "the survey changed the log"


def test_no_log_at_all() -> None:
    disk = SimDisk(random.Random(0))
    found = survey(disk, DIR)
    assert (found.end_offset, found.voters, found.quorum_state) == (0, None, None)
