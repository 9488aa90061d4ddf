"""A log dir: its identity, its partitions, its checkpoints, across restarts and crashes.

What an operator relies on: a dir formatted for one cluster and node is never opened by
another; every ``<topic>-<partition>`` folder comes back after a restart with the log
start offset that DeleteRecords set; a deleted partition stays deleted even when the
deletion was cut short by a crash.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import random
import uuid
from pathlib import Path

import pytest

from odradek.core.errors import ConfigError, CorruptLogError, LogOfflineError
from odradek.protocol.record_codec import (
    Record,
    encode_batch,
)
from odradek.shell.real_fs import RealFileSystem
from odradek.storage.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_CHECKPOINT,
    META_PROPERTIES,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    MetaProperties,
    read_meta_properties,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from odradek.storage.fs import FileSystem, join, write_file_atomically
from odradek.storage.log import LogConfig, PartitionLog
from odradek.storage.log_dir import LogDir, format_log_dir
from odradek.storage.segment import segment_name
from odradek.testing.sim_disk import PowerLoss, SimDisk
from tests.storage.helpers import scrub

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qk"
NODE_ID = 1
META = MetaProperties(CLUSTER_ID, NODE_ID, uuid.UUID(int=0xD1))
ROOT = "data/kafka-logs"
CONFIG = LogConfig()
SMALL_SEGMENTS = LogConfig(segment_bytes=300)


def new_disk(seed: int = 0) -> SimDisk:
    disk = SimDisk(random.Random(seed))
    disk.makedirs("data")
    disk.fsync_dir("")
    return disk


def formatted_disk(seed: int = 0) -> SimDisk:
    disk = new_disk(seed)
    assert format_log_dir(disk, ROOT, META)
    return disk


def open_dir(
    fs: FileSystem,
    path: str = ROOT,
    *,
    cluster_id: str | None = CLUSTER_ID,
    node_id: int = NODE_ID,
    config: LogConfig = CONFIG,
    topics_seen: list[str] | None = None,
) -> LogDir:
    def config_for(topic: str) -> LogConfig:
        if topics_seen is not None:
            topics_seen.append(topic)
        return config

    return LogDir.open(
        fs, path, cluster_id=cluster_id, node_id=node_id, config_for=config_for, now_ms=10_000
    )


def batch(records: int = 1, value: bytes = b"v" * 50) -> memoryview:
    encoded = encode_batch(
        [Record(offset_delta=i, timestamp=1_000 + i, value=value) for i in range(records)]
    )
    return memoryview(bytearray(encoded))


def fill(log: PartitionLog, batches: int, records: int = 1) -> None:
    for i in range(batches):
        log.append_as_leader(batch(records), leader_epoch=1, now_ms=1_000 + i)
    log.flush(2_000)


def checkpoint_path(name: str) -> str:
    return join(ROOT, name)


# --- format -----------------------------------------------------------------------------


def test_format_writes_meta_properties() -> None:
    disk = new_disk()
    assert format_log_dir(disk, ROOT, META) is True
    assert disk.is_dir(ROOT)
    assert read_meta_properties(disk, join(ROOT, META_PROPERTIES)) == META


def test_format_on_a_real_disk(tmp_path: Path) -> None:
    path = str(tmp_path / "kafka-logs")
    assert format_log_dir(RealFileSystem(), path, META)
    text = (tmp_path / "kafka-logs" / "meta.properties").read_text()
    assert f"cluster.id={CLUSTER_ID}\n" in text
    assert "node.id=1\n" in text
    assert "version=1\n" in text


def test_format_is_idempotent_for_the_same_identity() -> None:
    disk = formatted_disk()
    before = disk.read_file(join(ROOT, META_PROPERTIES))
    assert format_log_dir(disk, ROOT, META) is False
    assert disk.read_file(join(ROOT, META_PROPERTIES)) == before


def test_format_again_never_changes_the_directory_id() -> None:
    # ``storage format`` makes a new random directory id on every run; running it again
    # on a formatted dir must keep the id the controller already knows.
    disk = formatted_disk()
    again = MetaProperties(CLUSTER_ID, NODE_ID, uuid.UUID(int=0xD2))
    with contextlib.suppress(ConfigError):  # refusing would be fine too
        assert format_log_dir(disk, ROOT, again) is False
    assert read_meta_properties(disk, join(ROOT, META_PROPERTIES)) == META


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(
            MetaProperties("another-cluster-id-xyz", NODE_ID, META.directory_id), id="cluster"
        ),
        pytest.param(MetaProperties(CLUSTER_ID, NODE_ID + 1, META.directory_id), id="node"),
    ],
)
def test_format_refuses_a_dir_of_another_cluster_or_node(other: MetaProperties) -> None:
    disk = formatted_disk()
    before = disk.read_file(join(ROOT, META_PROPERTIES))
    with pytest.raises(ConfigError) as info:
        format_log_dir(disk, ROOT, other)
    assert ROOT in str(info.value)
    assert disk.read_file(join(ROOT, META_PROPERTIES)) == before


@pytest.mark.parametrize("seed", range(4))
def test_format_survives_a_power_loss(seed: int) -> None:
    disk = formatted_disk(seed)
    disk.crash()
    assert read_meta_properties(disk, join(ROOT, META_PROPERTIES)) == META


# --- open: identity checks --------------------------------------------------------------


def test_open_refuses_an_unformatted_dir() -> None:
    disk = new_disk()
    disk.makedirs(ROOT)
    with pytest.raises(ConfigError) as info:
        open_dir(disk)
    assert ROOT in str(info.value)
    assert "format" in str(info.value)


def test_open_refuses_a_missing_dir() -> None:
    with pytest.raises(ConfigError) as info:
        open_dir(new_disk())
    assert ROOT in str(info.value)


def test_open_refuses_another_nodes_dir() -> None:
    with pytest.raises(ConfigError) as info:
        open_dir(formatted_disk(), node_id=NODE_ID + 1)
    assert ROOT in str(info.value)
    assert str(NODE_ID) in str(info.value)


def test_open_refuses_another_clusters_dir() -> None:
    with pytest.raises(ConfigError) as info:
        open_dir(formatted_disk(), cluster_id="another-cluster-id-xyz")
    assert ROOT in str(info.value)
    assert CLUSTER_ID in str(info.value)


def test_open_without_a_cluster_id_accepts_the_dirs_own() -> None:
    log_dir = open_dir(formatted_disk(), cluster_id=None)
    assert log_dir.meta == META
    assert log_dir.logs == {}


def test_open_reports_a_corrupt_meta_properties() -> None:
    disk = formatted_disk()
    path = join(ROOT, META_PROPERTIES)
    write_file_atomically(disk, path, b"version=1\nnode.id=1\n")
    with pytest.raises(CorruptLogError) as info:
        open_dir(disk)
    assert info.value.path == path


# --- open: partitions -------------------------------------------------------------------

PARTITIONS = [("orders", 0), ("orders", 1), ("my-topic", 3), ("a-b-c", 10), ("audit-delete", 0)]


def test_open_finds_every_partition_folder_including_topics_with_dashes() -> None:
    disk = formatted_disk()
    log_dir = open_dir(disk)
    for i, (topic, partition) in enumerate(PARTITIONS):
        fill(log_dir.create_log(topic, partition, CONFIG, now_ms=0), batches=i + 1)
    # Things that are not partitions: a file, Kafka's future and stray folders, lost+found.
    write_file_atomically(disk, join(ROOT, "cleaner-offset-checkpoint"), b"0\n0\n")
    write_file_atomically(disk, join(ROOT, "orders-7"), b"a file, not a folder")
    disk.makedirs(join(ROOT, "orders-1.0123456789abcdef-future"))
    disk.makedirs(join(ROOT, "orders-2.0123456789abcdef-stray"))
    disk.makedirs(join(ROOT, "lost+found"))
    log_dir.checkpoint()
    log_dir.close()

    topics_seen: list[str] = []
    reopened = open_dir(disk, topics_seen=topics_seen)
    assert sorted(reopened.logs) == sorted(PARTITIONS)
    assert sorted(topics_seen) == sorted(t for t, _ in PARTITIONS)
    for i, key in enumerate(PARTITIONS):
        log = reopened.logs[key]
        assert (log.topic, log.partition) == key
        assert log.log_end_offset == i + 1
        assert log.offline is None
    reopened.close()


def test_open_passes_each_topics_config() -> None:
    disk = formatted_disk()
    log_dir = open_dir(disk)
    fill(log_dir.create_log("small", 0, SMALL_SEGMENTS, 0), batches=6)
    log_dir.close()
    configs = {"small": SMALL_SEGMENTS}
    reopened = LogDir.open(
        disk,
        ROOT,
        cluster_id=CLUSTER_ID,
        node_id=NODE_ID,
        config_for=lambda topic: configs[topic],
        now_ms=0,
    )
    assert reopened.logs[("small", 0)].config == SMALL_SEGMENTS
    reopened.close()


@pytest.mark.parametrize("seed", range(3))
def test_open_applies_the_log_start_offset_checkpoint(seed: int) -> None:
    disk = formatted_disk(seed)
    log_dir = open_dir(disk)
    log = log_dir.create_log("orders", 0, CONFIG, 0)
    fill(log, batches=10)
    other = log_dir.create_log("orders", 1, CONFIG, 0)
    fill(other, batches=3)
    assert log.delete_records_before(4) == 4
    log_dir.checkpoint()
    log_dir.close()
    disk.crash()
    reopened = open_dir(disk)
    assert reopened.logs[("orders", 0)].log_start_offset == 4
    assert reopened.logs[("orders", 0)].log_end_offset == 10
    assert reopened.logs[("orders", 1)].log_start_offset == 0
    reopened.close()


def test_without_a_checkpoint_the_log_starts_at_its_first_segment() -> None:
    # The counterpart of the test above: the 4 there came from the checkpoint file.
    disk = formatted_disk()
    log_dir = open_dir(disk)
    log = log_dir.create_log("orders", 0, CONFIG, 0)
    fill(log, batches=10)
    log.delete_records_before(4)
    log_dir.close()
    assert open_dir(disk).logs[("orders", 0)].log_start_offset == 0


def corrupt_second_batch(disk: SimDisk) -> None:
    """Flip a bit inside the second batch of the first segment (under its CRC)."""
    log_file = join(ROOT, "orders-0", segment_name(0, ".log"))
    first_batch_size = len(batch())
    disk.flip_bit(log_file, first_batch_size + 80, 3)


def test_open_applies_the_recovery_point_checkpoint(caplog: pytest.LogCaptureFixture) -> None:
    # Below the recovery point the data was known durable: damage there is corruption,
    # and the partition must go offline rather than silently lose acknowledged records.
    # Start-up does not read below the recovery point (ADR 0016): the scrub finds it.
    disk = formatted_disk()
    log_dir = open_dir(disk, config=SMALL_SEGMENTS)
    fill(log_dir.create_log("orders", 0, SMALL_SEGMENTS, 0), batches=6)
    fill(log_dir.create_log("orders", 1, SMALL_SEGMENTS, 0), batches=6)
    log_dir.checkpoint()
    assert read_offset_checkpoint(disk, checkpoint_path(RECOVERY_POINT_CHECKPOINT)) == {
        ("orders", 0): 6,
        ("orders", 1): 6,
    }
    log_dir.close()
    corrupt_second_batch(disk)
    reopened = open_dir(disk, config=SMALL_SEGMENTS)
    assert reopened.offline_logs() == {}
    caplog.set_level(logging.ERROR, logger="odradek.storage")
    for log in reopened.logs.values():
        scrub(log)
    assert reopened.logs[("orders", 1)].offline is None
    assert reopened.offline_logs().keys() == {("orders", 0)}
    first_segment = join(ROOT, "orders-0", segment_name(0, ".log"))
    line = next(r.getMessage() for r in caplog.records if "offline" in r.getMessage())
    assert first_segment in line and "BAD_CRC at position" in line
    reopened.checkpoint()
    reopened.close()
    # The corruption found is not forgotten by a restart: the log is validated whole.
    again = open_dir(disk, config=SMALL_SEGMENTS)
    assert again.offline_logs().keys() == {("orders", 0)}
    again.close()


def test_past_the_recovery_point_a_damaged_tail_is_cut() -> None:
    # The same damage with no recovery point: an unflushed tail, cut at the bad batch.
    disk = formatted_disk()
    log_dir = open_dir(disk, config=SMALL_SEGMENTS)
    fill(log_dir.create_log("orders", 0, SMALL_SEGMENTS, 0), batches=6)
    log_dir.close()
    write_offset_checkpoint(disk, checkpoint_path(RECOVERY_POINT_CHECKPOINT), {})
    corrupt_second_batch(disk)
    reopened = open_dir(disk, config=SMALL_SEGMENTS)
    log = reopened.logs[("orders", 0)]
    assert log.offline is None
    assert log.log_end_offset == 1
    reopened.close()


# --- checkpoints ------------------------------------------------------------------------


def test_checkpoint_writes_each_online_logs_recovery_point_and_log_start() -> None:
    disk = formatted_disk()
    log_dir = open_dir(disk)
    orders = log_dir.create_log("orders", 0, CONFIG, 0)
    fill(orders, batches=5, records=2)
    orders.delete_records_before(3)
    orders.append_as_leader(batch(), 1, 3_000)  # not flushed: the recovery point stays 10
    events = log_dir.create_log("my-events", 2, CONFIG, 0)
    fill(events, batches=1)
    log_dir.checkpoint()
    assert disk.read_file(checkpoint_path(RECOVERY_POINT_CHECKPOINT)) == (
        b"0\n2\nmy-events 2 1\norders 0 10\n"
    )
    assert disk.read_file(checkpoint_path(LOG_START_CHECKPOINT)) == (
        b"0\n2\nmy-events 2 0\norders 0 3\n"
    )
    log_dir.close()


def test_checkpoints_stop_when_the_dir_fails_and_keep_their_last_values() -> None:
    """An I/O error takes the whole dir offline: nothing more is written to it, and the
    checkpoints keep what they held, the durable values of before the failure."""
    disk = formatted_disk()
    log_dir = open_dir(disk)
    fill(log_dir.create_log("orders", 0, CONFIG, 0), batches=2)
    broken = log_dir.create_log("orders", 1, CONFIG, 0)
    fill(broken, batches=2)
    log_dir.checkpoint()
    before = read_offset_checkpoint(disk, checkpoint_path(RECOVERY_POINT_CHECKPOINT))
    assert before == {("orders", 0): 2, ("orders", 1): 2}
    disk.fail_next("append", path=join(ROOT, "orders-1"))
    with pytest.raises(LogOfflineError):
        broken.append_as_leader(batch(), 1, 3_000)
    log_dir.checkpoint()
    assert read_offset_checkpoint(disk, checkpoint_path(RECOVERY_POINT_CHECKPOINT)) == before
    assert log_dir.offline_logs().keys() == {("orders", 0), ("orders", 1)}
    log_dir.close()


def test_an_offline_log_keeps_its_log_start_offset_across_a_restart() -> None:
    disk = formatted_disk()
    log_dir = open_dir(disk)
    log = log_dir.create_log("orders", 0, CONFIG, 0)
    fill(log, batches=10)
    log.delete_records_before(4)
    log_dir.checkpoint()
    disk.fail_next("append", path=join(ROOT, "orders-0"))
    with pytest.raises(LogOfflineError):
        log.append_as_leader(batch(), 1, 3_000)
    log_dir.checkpoint()  # the periodic checkpoint runs while the log is offline
    log_dir.close()
    assert open_dir(disk).logs[("orders", 0)].log_start_offset == 4


def test_high_watermark_checkpoint_round_trips() -> None:
    disk = formatted_disk()
    log_dir = open_dir(disk)
    assert log_dir.high_watermarks() == {}
    log_dir.checkpoint_high_watermarks({("orders", 1): 7, ("orders", 0): 12})
    assert disk.read_file(checkpoint_path(REPLICATION_CHECKPOINT)) == (
        b"0\n2\norders 0 12\norders 1 7\n"
    )
    assert log_dir.high_watermarks() == {("orders", 0): 12, ("orders", 1): 7}
    disk.crash()
    assert open_dir(disk).high_watermarks() == {("orders", 0): 12, ("orders", 1): 7}


@pytest.mark.parametrize("name", [RECOVERY_POINT_CHECKPOINT, LOG_START_CHECKPOINT])
def test_a_damaged_offset_checkpoint_means_recovery_from_the_start(name: str) -> None:
    disk = formatted_disk()
    log_dir = open_dir(disk)
    fill(log_dir.create_log("orders", 0, CONFIG, 0), batches=3)
    log_dir.checkpoint()
    log_dir.close()
    write_file_atomically(disk, checkpoint_path(name), b"0\n1\norders 0\n")
    reopened = open_dir(disk)
    log = reopened.logs[("orders", 0)]
    assert log.offline is None
    assert (log.log_start_offset, log.log_end_offset) == (0, 3)


@pytest.mark.parametrize("content", [b"0\n2\n5 0\n3 10\n", b"0\n1\n-1 0\n"])
def test_a_damaged_leader_epoch_checkpoint_does_not_stop_the_broker(content: bytes) -> None:
    disk = formatted_disk()
    log_dir = open_dir(disk)
    fill(log_dir.create_log("orders", 0, CONFIG, 0), batches=3)
    log_dir.close()
    path = join(ROOT, "orders-0", LEADER_EPOCH_CHECKPOINT)
    write_file_atomically(disk, path, content)
    try:
        reopened = open_dir(disk)
    except CorruptLogError as e:
        assert e.path == path
    else:
        assert ("orders", 0) in reopened.logs


# --- create and delete ------------------------------------------------------------------


def test_create_log_refuses_an_existing_partition() -> None:
    log_dir = open_dir(formatted_disk())
    log_dir.create_log("orders", 0, CONFIG, 0)
    with pytest.raises(ValueError, match="orders-0"):
        log_dir.create_log("orders", 0, CONFIG, 0)


def test_delete_log_removes_the_folder_and_the_partition_stays_gone() -> None:
    disk = formatted_disk()
    log_dir = open_dir(disk)
    fill(log_dir.create_log("orders", 0, CONFIG, 0), batches=3)
    fill(log_dir.create_log("orders", 1, CONFIG, 0), batches=2)
    log_dir.delete_log("orders", 0)
    assert ("orders", 0) not in log_dir.logs
    assert [n for n in disk.listdir(ROOT) if not n.endswith("checkpoint")] == [
        META_PROPERTIES,
        "orders-1",
    ]
    log_dir.checkpoint()
    log_dir.close()
    disk.crash()
    reopened = open_dir(disk)
    assert sorted(reopened.logs) == [("orders", 1)]
    assert reopened.logs[("orders", 1)].log_end_offset == 2
    assert not any(name.startswith("orders-0") for name in disk.listdir(ROOT))
    # The partition can be created again, empty.
    assert reopened.create_log("orders", 0, CONFIG, 0).log_end_offset == 0


def test_a_recreated_partition_does_not_inherit_the_deleted_ones_offsets() -> None:
    disk = formatted_disk()
    log_dir = open_dir(disk)
    old = log_dir.create_log("orders", 0, CONFIG, 0)
    fill(old, batches=10)
    old.delete_records_before(4)
    log_dir.checkpoint()
    log_dir.delete_log("orders", 0)  # DeleteTopics, then CreateTopics with the same name
    fill(log_dir.create_log("orders", 0, CONFIG, 0), batches=2)
    log_dir.close()  # a restart before the next periodic checkpoint
    log = open_dir(disk).logs[("orders", 0)]
    assert (log.log_start_offset, log.log_end_offset) == (0, 2)


@pytest.mark.parametrize("seed", range(3))
def test_power_loss_at_every_step_of_create_log(seed: int) -> None:
    topic_id = uuid.UUID(int=0x7091C)

    def setup(disk_seed: int) -> tuple[SimDisk, LogDir]:
        disk = formatted_disk(disk_seed)
        log_dir = open_dir(disk)
        fill(log_dir.create_log("orders", 1, CONFIG, 0), batches=2)
        return disk, log_dir

    probe, probe_dir = setup(0)
    before = probe.operations
    probe_dir.create_log("orders", 0, CONFIG, 0, topic_id)
    steps = probe.operations - before
    assert steps >= 5
    for step in range(steps):
        disk, log_dir = setup(seed * 100 + step)
        disk.schedule_power_loss(step)
        with pytest.raises(PowerLoss):
            log_dir.create_log("orders", 0, CONFIG, 0, topic_id)
        reopened = open_dir(disk)
        assert reopened.logs[("orders", 1)].log_end_offset == 2
        if ("orders", 0) in reopened.logs:
            log = reopened.logs[("orders", 0)]
            assert (log.offline, log.log_end_offset) == (None, 0), step
            assert log.topic_id in (None, topic_id)
        reopened.close()


def test_open_finishes_an_interrupted_deletion() -> None:
    disk = formatted_disk()
    log_dir = open_dir(disk)
    fill(log_dir.create_log("orders", 0, CONFIG, 0), batches=3)
    fill(log_dir.create_log("orders", 1, CONFIG, 0), batches=1)
    log_dir.close()
    # What delete_log leaves when the process dies between the rename and the rmtree.
    aside = join(ROOT, "orders-0.2c6f1e0a9d8b4f3e8a7b6c5d4e3f2a1b-delete")
    disk.rename(join(ROOT, "orders-0"), aside)
    disk.fsync_dir(ROOT)
    reopened = open_dir(disk)
    assert sorted(reopened.logs) == [("orders", 1)]
    assert not disk.exists(aside)
    reopened.close()
    disk.crash()
    assert [n for n in disk.listdir(ROOT) if not n.endswith("checkpoint")] == [
        META_PROPERTIES,
        "orders-1",
    ]


# The longest legal topic name: its folder "<name>-0" fits in a file name, but the
# folder it is renamed to while deleted would not without shortening.
LONGEST_TOPIC = "t" * 249


@pytest.mark.parametrize("topic", ["orders", LONGEST_TOPIC])
@pytest.mark.parametrize("seed", range(3))
def test_power_loss_at_every_step_of_delete_log(seed: int, topic: str) -> None:
    def setup(disk_seed: int) -> tuple[SimDisk, LogDir]:
        disk = formatted_disk(disk_seed)
        log_dir = open_dir(disk)
        fill(log_dir.create_log(topic, 0, CONFIG, 0), batches=3)
        fill(log_dir.create_log(topic, 1, CONFIG, 0), batches=2)
        log_dir.checkpoint()
        return disk, log_dir

    probe, probe_dir = setup(0)
    before = probe.operations
    probe_dir.delete_log(topic, 0)
    steps = probe.operations - before
    assert steps >= 3
    for step in range(steps + 1):
        disk, log_dir = setup(seed * 100 + step)
        disk.schedule_power_loss(step)
        try:
            log_dir.delete_log(topic, 0)
            disk.crash()  # the power loss comes after the last step
        except PowerLoss:
            pass
        reopened = open_dir(disk)
        assert not any(name.endswith("-delete") for name in disk.listdir(ROOT)), step
        assert reopened.logs[(topic, 1)].log_end_offset == 2
        if (topic, 0) in reopened.logs:
            # The deletion never became durable: the partition is back, whole.
            assert reopened.logs[(topic, 0)].log_end_offset == 3
            assert reopened.logs[(topic, 0)].offline is None
        reopened.close()


@pytest.mark.parametrize("seed", range(3))
def test_power_loss_at_every_step_of_deleting_several_logs(seed: int) -> None:
    doomed = [("orders", 0), (LONGEST_TOPIC, 0), (LONGEST_TOPIC, 1)]

    def setup(disk_seed: int) -> tuple[SimDisk, LogDir]:
        disk = formatted_disk(disk_seed)
        log_dir = open_dir(disk)
        for i, (topic, partition) in enumerate(doomed):
            fill(log_dir.create_log(topic, partition, CONFIG, 0), batches=i + 1)
        fill(log_dir.create_log("orders", 1, CONFIG, 0), batches=2)
        log_dir.checkpoint()
        return disk, log_dir

    probe, probe_dir = setup(0)
    before = probe.operations
    probe_dir.delete_logs(doomed)
    assert sorted(probe_dir.logs) == [("orders", 1)]
    # One directory fsync and one checkpoint for the three.
    steps = probe.operations - before
    for step in range(steps + 1):
        disk, log_dir = setup(seed * 100 + step)
        disk.schedule_power_loss(step)
        try:
            log_dir.delete_logs(doomed)
            disk.crash()
        except PowerLoss:
            pass
        reopened = open_dir(disk)
        assert not any(name.endswith("-delete") for name in disk.listdir(ROOT)), step
        assert reopened.logs[("orders", 1)].log_end_offset == 2
        for i, key in enumerate(doomed):
            if key in reopened.logs:
                # That deletion never became durable: the partition is back, whole.
                assert reopened.logs[key].log_end_offset == i + 1, (step, key)
        reopened.close()


def test_deleting_several_logs_shares_one_checkpoint() -> None:
    disk = formatted_disk()
    log_dir = open_dir(disk)
    for partition in range(10):
        log_dir.create_log("orders", partition, CONFIG, 0)
    log_dir.checkpoint()
    fsyncs = disk.dir_fsyncs
    log_dir.delete_logs([("orders", p) for p in range(9)])
    # The renames' directory fsync, and one for each of the two checkpoint files.
    assert disk.dir_fsyncs - fsyncs == 3
    assert read_offset_checkpoint(disk, checkpoint_path(RECOVERY_POINT_CHECKPOINT)) == {
        ("orders", 9): 0
    }
    assert [n for n in disk.listdir(ROOT) if not n.endswith("checkpoint")] == [
        META_PROPERTIES,
        "orders-9",
    ]


@pytest.mark.parametrize("partition", [0, 99_999])
def test_a_topic_with_the_longest_legal_name_is_created_and_deleted(
    tmp_path: Path, partition: int
) -> None:
    # On the real filesystem, whose file names are limited to 255 bytes.
    fs = RealFileSystem()
    root = str(tmp_path / "kafka-logs")
    assert format_log_dir(fs, root, META)
    log_dir = open_dir(fs, root)
    fill(log_dir.create_log(LONGEST_TOPIC, partition, CONFIG, 0), batches=2)
    log_dir.delete_log(LONGEST_TOPIC, partition)
    assert (LONGEST_TOPIC, partition) not in log_dir.logs
    assert sorted(p.name for p in (tmp_path / "kafka-logs").iterdir()) == [
        LOG_START_CHECKPOINT,
        META_PROPERTIES,
        RECOVERY_POINT_CHECKPOINT,
    ]
    # The name is free again: the topic can be created anew, empty.
    assert log_dir.create_log(LONGEST_TOPIC, partition, CONFIG, 0).log_end_offset == 0
    log_dir.close()


def test_a_real_log_dir_round_trip(tmp_path: Path) -> None:
    fs = RealFileSystem()
    root = str(tmp_path / "kafka-logs")
    assert format_log_dir(fs, root, META)
    log_dir = open_dir(fs, root)
    fill(log_dir.create_log("my-topic", 3, CONFIG, 0), batches=4)
    log_dir.checkpoint()
    log_dir.checkpoint_high_watermarks({("my-topic", 3): 4})
    log_dir.close()
    assert (tmp_path / "kafka-logs" / RECOVERY_POINT_CHECKPOINT).read_bytes() == (
        b"0\n1\nmy-topic 3 4\n"
    )
    assert sorted(p.name for p in (tmp_path / "kafka-logs").iterdir()) == [
        LOG_START_CHECKPOINT,
        META_PROPERTIES,
        "my-topic-3",
        RECOVERY_POINT_CHECKPOINT,
        REPLICATION_CHECKPOINT,
    ]
    reopened = open_dir(fs, root)
    assert reopened.logs[("my-topic", 3)].log_end_offset == 4
    assert reopened.high_watermarks() == {("my-topic", 3): 4}
    reopened.delete_log("my-topic", 3)
    assert not (tmp_path / "kafka-logs" / "my-topic-3").exists()
    reopened.close()
    assert open_dir(fs, root).logs == {}


# --- a failed dir -------------------------------------------------------------------------


def test_an_io_error_in_one_log_takes_the_whole_dir_offline_and_tells_its_owner() -> None:
    """Kafka's log dir failure: one failed write says the disk may fail the others, so
    every log of the dir stops serving at once, and the owner hears of it once."""
    disk = formatted_disk()
    log_dir = open_dir(disk)
    failures: list[str] = []
    log_dir.on_failure = failures.append
    logs = [log_dir.create_log("t", i, CONFIG, 0) for i in range(3)]
    fill(logs[0], 2)
    disk.fail_next("append", errno.ENOSPC, count=None)  # the disk is full now
    with pytest.raises(LogOfflineError):
        logs[1].append_as_leader(batch(), leader_epoch=1, now_ms=0)
    assert log_dir.offline is not None and "t-1" in log_dir.offline
    assert all(log.offline is not None for log in logs)
    with pytest.raises(LogOfflineError):
        logs[0].read(0, 100)  # the records it held stop being served here too
    with pytest.raises(LogOfflineError):
        log_dir.create_log("t", 3, CONFIG, 0)
    with pytest.raises(LogOfflineError):
        logs[2].append_as_leader(batch(), leader_epoch=1, now_ms=0)
    assert len(failures) == 1


def test_a_failed_checkpoint_takes_the_dir_offline() -> None:
    disk = formatted_disk()
    log_dir = open_dir(disk)
    failures: list[str] = []
    log_dir.on_failure = failures.append
    log = log_dir.create_log("t", 0, CONFIG, 0)
    disk.fail_next("rename", errno.ENOSPC)
    with pytest.raises(LogOfflineError):
        log_dir.checkpoint()
    assert log.offline is not None and len(failures) == 1
    log_dir.checkpoint()  # nothing more is written to a failed dir, and no error
