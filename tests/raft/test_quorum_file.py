"""The quorum-state file: the election state a voter must not forget across a crash."""

from __future__ import annotations

import json
import random
import uuid

import pytest

from odradek.core.errors import StorageError
from odradek.core.kafka_uuid import to_kafka_str
from odradek.raft.quorum_file import QuorumStateFile, StoredQuorumState
from odradek.testing.sim_disk import PowerLoss, SimDisk

DIR = "meta/__cluster_metadata-0"
PATH = f"{DIR}/quorum-state"


def new_disk(seed: int = 0) -> SimDisk:
    disk = SimDisk(random.Random(seed))
    disk.makedirs(DIR)
    disk.fsync_dir("")
    disk.fsync_dir("meta")
    return disk


def test_no_file_means_no_state() -> None:
    assert QuorumStateFile(new_disk(), DIR).read() is None


@pytest.mark.parametrize(
    "state",
    [
        StoredQuorumState(epoch=0, leader_id=None, voted_id=None),
        StoredQuorumState(epoch=5, leader_id=2, voted_id=None),
        StoredQuorumState(epoch=6, leader_id=None, voted_id=3, voted_directory_id=uuid.uuid4()),
        StoredQuorumState(epoch=7, leader_id=3, voted_id=3),
    ],
)
def test_round_trip(state: StoredQuorumState) -> None:
    disk = new_disk()
    QuorumStateFile(disk, DIR).write(state)
    assert QuorumStateFile(disk, DIR).read() == state


def test_the_file_is_the_json_kafka_writes() -> None:
    disk = new_disk()
    directory = uuid.UUID(int=7)
    QuorumStateFile(disk, DIR).write(StoredQuorumState(9, None, 4, directory))
    assert json.loads(disk.read_file(PATH)) == {
        "leaderId": -1,
        "leaderEpoch": 9,
        "votedId": 4,
        "votedDirectoryId": to_kafka_str(directory),
        "data_version": 1,
    }


def test_a_kafka_version_0_file_is_read() -> None:
    disk = new_disk()
    handle = disk.open(PATH, create=True)
    handle.append(
        b'{"clusterId":"","leaderId":1,"leaderEpoch":3,"votedId":-1,"appliedOffset":0,'
        b'"currentVoters":[{"voterId":1}],"data_version":0}'
    )
    handle.close()
    assert QuorumStateFile(disk, DIR).read() == StoredQuorumState(3, 1, None, None)


@pytest.mark.parametrize("crash_at", range(6))
def test_a_crash_during_a_write_leaves_the_old_or_the_new_state(crash_at: int) -> None:
    disk = new_disk(crash_at)
    store = QuorumStateFile(disk, DIR)
    old, new = StoredQuorumState(4, 1, None), StoredQuorumState(5, None, 2)
    store.write(old)
    disk.schedule_power_loss(crash_at)
    try:
        store.write(new)
        disk.crash()
    except PowerLoss:
        pass
    assert QuorumStateFile(disk, DIR).read() in (old, new)


def test_a_write_is_durable_when_it_returns() -> None:
    disk = new_disk()
    QuorumStateFile(disk, DIR).write(StoredQuorumState(8, None, 1))
    disk.crash()
    assert QuorumStateFile(disk, DIR).read() == StoredQuorumState(8, None, 1)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1]", "not a JSON object"),
        (b'{"leaderId":1,"leaderEpoch":3,"votedId":-1}', "data_version"),
        (b'{"leaderId":1,"leaderEpoch":3,"votedId":-1,"data_version":7}', "data_version 7"),
        (b'{"leaderId":1,"leaderEpoch":"3","votedId":-1,"data_version":1}', "leaderEpoch"),
        (b'{"leaderId":1,"leaderEpoch":-4,"votedId":-1,"data_version":1}', "impossible"),
        (
            b'{"leaderId":1,"leaderEpoch":3,"votedId":-1,"votedDirectoryId":"xyz","data_version":1}',
            "votedDirectoryId",
        ),
    ],
)
def test_a_corrupt_file_is_a_storage_error_naming_the_file(content: bytes, message: str) -> None:
    disk = new_disk()
    handle = disk.open(PATH, create=True)
    handle.append(content)
    handle.close()
    with pytest.raises(StorageError, match=message) as raised:
        QuorumStateFile(disk, DIR).read()
    assert PATH in str(raised.value)
