"""Producer snapshots at every segment roll, and producer state after a crash.

What an idempotent producer relies on: a batch retried after the broker crashed is
still recognised as a duplicate (never appended twice), whatever the moment of the
crash, a roll included; and the broker's restart replays only the batches after its
latest snapshot, which a roll or a clean stop writes (Kafka's behaviour). A follower
keeps the same state from the batches it replicates, so its snapshots are right and a
new leader recognises the duplicates of batches it only replicated.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from odradek.broker.partition import LocalPartition, load_producer_state
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.record_batch import (
    iter_batches,
)
from odradek.storage.log import LogConfig, PartitionLog
from odradek.storage.producer_snapshot import list_snapshots, read_snapshot
from odradek.testing.sim_disk import PowerLoss, SimDisk
from tests.broker.test_data_path import Harness, batch

# About three batches of three 100-byte records per segment.
ROLLING = LogConfig(segment_bytes=1_200)
PRODUCER = 7


def produce(h: Harness, sequence: int) -> tuple[int, int]:
    records = batch(3, b"x" * 100, producer_id=PRODUCER, producer_epoch=0, base_sequence=sequence)
    result = h.carry(h.produce("t", records)).responses[0].partition_responses[0]
    return result.error_code, result.base_offset


def rolling_harness(seed: int = 0) -> tuple[Harness, LocalPartition]:
    h = Harness()
    h.disk = SimDisk(random.Random(seed))
    h.disk.makedirs("data")
    h.disk.fsync_dir("")
    h.create("t")
    partition = h.state.partitions[("t", 0)]
    partition.log.config = ROLLING
    return h, partition


def restart(h: Harness, partition: LocalPartition) -> LocalPartition:
    """What a node does after a crash: open the log as a log dir does, load producers."""
    log = PartitionLog.open(
        h.disk,
        partition.log.directory,
        ROLLING,
        10_000,
        recovery_point=partition.log.recovery_point,
        validate_all=False,
    )
    restarted = LocalPartition(
        "t",
        0,
        partition.topic_id,
        log,
        partition.leader_epoch,
        producers=load_producer_state(log, 10_000),
    )
    h.state.partitions[("t", 0)] = restarted
    return restarted


def stored_sequences(log: PartitionLog) -> list[int]:
    out: list[int] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        found = log.read(offset, 1 << 20)
        assert found is not None
        for h in iter_batches(found.read()):
            out.append(h.base_sequence)
            offset = h.next_offset
    return out


def test_every_roll_writes_a_producer_snapshot_for_the_new_segment() -> None:
    h, partition = rolling_harness()
    for i in range(10):
        assert produce(h, 3 * i)[0] == ErrorCode.NONE
    log = partition.log
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 2
    snapshots = {s.offset: s.path for s in list_snapshots(h.disk, log.directory)}
    assert set(bases[1:]) <= set(snapshots)
    # Each holds the state of the batches below it: the producer's last batch there.
    for base in bases[1:]:
        (entry,) = read_snapshot(h.disk, snapshots[base])
        assert (entry.producer_id, entry.last_offset) == (PRODUCER, base - 1)


def test_a_restart_replays_only_the_batches_after_the_latest_snapshot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    h, partition = rolling_harness()
    for i in range(10):
        produce(h, 3 * i)
    h.disk.crash()
    replayed: list[int] = []
    original = PartitionLog.read_headers

    def counting(self: PartitionLog, offset: int, max_count: int) -> Any:
        headers = original(self, offset, max_count)
        replayed.extend(hd.base_offset for hd in headers)
        return headers

    monkeypatch.setattr(PartitionLog, "read_headers", counting)
    restarted = restart(h, partition)
    assert replayed and min(replayed) >= restarted.log.active.base_offset
    assert produce(h, 27) == (ErrorCode.NONE, 27)  # the last batch again: a duplicate


@pytest.mark.parametrize("seed", range(3))
def test_a_crash_at_any_point_of_a_rolling_append_loses_no_producer_state(seed: int) -> None:
    # The append that rolls writes the new segment, the snapshot and the batch, then the
    # flush syncs them; a power loss may come in place of any of those disk operations.
    h, partition = rolling_harness(seed)
    sequence = 0
    while len(partition.log.segments) == 1 or partition.log.active.size + 300 < 1_200:
        assert produce(h, sequence)[0] == ErrorCode.NONE
        sequence += 3
    # The next produce rolls. Count its disk operations once, on a copy of the story.
    probe_h, probe_partition = rolling_harness(seed)
    for s in range(0, sequence, 3):
        produce(probe_h, s)
    before = probe_h.disk.operations
    produce(probe_h, sequence)
    assert len(probe_partition.log.segments) == len(partition.log.segments) + 1
    steps = probe_h.disk.operations - before
    for crash_at in range(steps + 1):
        h, partition = rolling_harness(seed)
        for s in range(0, sequence, 3):
            produce(h, s)
        h.disk.schedule_power_loss(crash_at)
        acknowledged = False
        try:
            acknowledged = produce(h, sequence)[0] == ErrorCode.NONE
        except PowerLoss:
            pass
        else:
            h.disk.crash()
        restarted = restart(h, partition)
        # The producer retries the batch that may or may not have made it, then goes on.
        code, _ = produce(h, sequence)
        assert code == ErrorCode.NONE
        assert produce(h, sequence + 3)[0] == ErrorCode.NONE
        stored = stored_sequences(restarted.log)
        assert stored.count(sequence) == 1, (crash_at, stored)
        assert stored == list(range(0, sequence + 6, 3)), (crash_at, acknowledged, stored)


def test_a_follower_keeps_producer_state_and_its_snapshots_from_what_it_replicates() -> None:
    h, leader = rolling_harness()
    for i in range(8):
        produce(h, 3 * i)
    disk = SimDisk(random.Random(9))
    disk.makedirs("data")
    follower_log = PartitionLog.create(disk, "data/t-0", ROLLING, 0)
    follower = LocalPartition("t", 0, leader.topic_id, follower_log, 0, is_leader=False)
    offset = 0
    while offset < leader.log.log_end_offset:
        found = leader.log.read(offset, 400)
        assert found is not None
        data = found.read()
        follower.append_replicated(bytearray(data), 0)
        offset = follower_log.log_end_offset
    assert follower.producers.snapshot() == leader.producers.snapshot()
    leader_snapshots = [s.offset for s in list_snapshots(h.disk, leader.log.directory)]
    follower_snapshots = list_snapshots(disk, follower_log.directory)
    assert [s.offset for s in follower_snapshots] == leader_snapshots
    for snapshot in follower_snapshots:
        (stored,) = read_snapshot(disk, snapshot.path)
        assert stored.last_offset == snapshot.offset - 1
    # A truncation that drops the producer's batches rebuilds its state exactly.
    follower_log.truncate_to(6, 0, "test")
    follower.on_truncated(0)
    (kept,) = follower.producers.snapshot()
    assert kept.last_offset == 5


def test_a_replay_that_meets_a_corrupt_header_takes_the_log_offline_not_the_node(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Start-up does not validate below the recovery point; the producer-state replay
    # may be the first to read a damaged header there. That log goes offline (naming
    # the file and position) and the node goes on starting its other partitions.
    h, partition = rolling_harness()
    for i in range(10):
        produce(h, 3 * i)
    log = partition.log
    end = log.log_end_offset
    first = log.segments[0]
    second_batch = next(iter(first.headers_from(0, first.size))).end
    path = first.log_path
    log.close()
    for snapshot in list_snapshots(h.disk, log.directory):
        h.disk.remove(snapshot.path)
    h.disk.flip_bit(path, second_batch + 16, 0)  # the magic byte of the second batch
    reopened = PartitionLog.open(
        h.disk, log.directory, ROLLING, 10_000, recovery_point=end, validate_all=False
    )
    assert reopened.offline is None
    state = load_producer_state(reopened, 10_000)
    assert len(state) == 0
    assert reopened.offline is not None
    assert path in reopened.offline and f"position {second_batch}" in reopened.offline
