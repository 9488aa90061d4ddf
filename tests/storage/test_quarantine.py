"""Quarantine: truncated records are kept, byte for byte, with a manifest saying why.

An operator who lost records to a truncation goes to ``<partition>/quarantine/`` to get
them back; what is there must be exactly what was cut, listed oldest first, bounded by
``quarantine.max.bytes`` without ever dropping the entry just written.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from odradek.core.errors import CorruptLogError
from odradek.shell.real_fs import RealFileSystem
from odradek.storage import quarantine
from odradek.storage.fs import FileSystem, join
from odradek.storage.quarantine import QuarantineManifest
from odradek.testing.sim_disk import PowerLoss, SimDisk

PARTITION = "data/orders-0"
UNBOUNDED = 1 << 40


def new_disk(seed: int = 0) -> SimDisk:
    disk = SimDisk(random.Random(seed))
    disk.makedirs(PARTITION)
    disk.fsync_dir(PARTITION)
    disk.fsync_dir("data")
    disk.fsync_dir("")
    return disk


def manifest(when_ms: int, size_bytes: int, start_offset: int = 0) -> QuarantineManifest:
    return QuarantineManifest(
        name=f"{when_ms:015d}-{start_offset:020d}-0000",
        when_ms=when_ms,
        reason="follower truncation to the leader's epoch end offset",
        leader_epoch=4,
        start_offset=start_offset,
        end_offset=start_offset + 3,
        batch_count=1,
        record_count=3,
        size_bytes=size_bytes,
    )


def chunks_of(size: int, tag: int) -> list[bytes]:
    data = bytes((tag + i) % 256 for i in range(size))
    return [data[: size // 3], data[size // 3 :]]


def add(fs: FileSystem, entry: QuarantineManifest, max_bytes: int = UNBOUNDED) -> list[str]:
    evicted = quarantine.add(
        fs, PARTITION, chunks_of(entry.size_bytes, entry.when_ms), entry, max_bytes
    )
    return [e.name for e in evicted]


def names(fs: FileSystem) -> list[str]:
    return [e.name for e in quarantine.entries(fs, PARTITION)]


def test_add_writes_records_and_manifest_on_a_real_disk(tmp_path: Path) -> None:
    fs = RealFileSystem()
    partition = str(tmp_path / "orders-0")
    fs.makedirs(partition)
    entry = manifest(1_700_000_000_000, 300, start_offset=42)
    chunks = [b"batch-one|", memoryview(b"xxbatch-two|")[2:].tobytes(), b"", b"three"]
    assert quarantine.add(fs, partition, chunks, entry, UNBOUNDED) == []
    folder = tmp_path / "orders-0" / "quarantine" / entry.name
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.json", "records.log"]
    assert (folder / "records.log").read_bytes() == b"batch-one|batch-two|three"
    assert quarantine.records_path(partition, entry.name) == str(folder / "records.log")
    written = json.loads((folder / "manifest.json").read_text())
    assert written == {
        "name": entry.name,
        "when_ms": 1_700_000_000_000,
        "reason": "follower truncation to the leader's epoch end offset",
        "leader_epoch": 4,
        "start_offset": 42,
        "end_offset": 45,
        "batch_count": 1,
        "record_count": 3,
        "size_bytes": 300,
    }
    assert quarantine.entries(fs, partition) == [entry]


def test_no_quarantine_folder_means_no_entries() -> None:
    assert quarantine.entries(new_disk(), PARTITION) == []
    assert quarantine.entries(new_disk(), "data/never-created-0") == []


def test_entries_are_listed_oldest_first() -> None:
    disk = new_disk()
    for when in (300, 100, 200):
        add(disk, manifest(when, 10))
    assert [e.when_ms for e in quarantine.entries(disk, PARTITION)] == [100, 200, 300]


def test_an_entry_without_a_manifest_is_not_listed() -> None:
    # A crash between writing the records and the manifest leaves such a folder.
    disk = new_disk()
    add(disk, manifest(100, 10))
    partial = join(PARTITION, quarantine.QUARANTINE_DIR, manifest(200, 10).name)
    disk.makedirs(partial)
    handle = disk.open(join(partial, quarantine.RECORDS_FILE), create=True)
    handle.append(b"half of a batch")
    handle.close()
    add(disk, manifest(300, 10))
    assert names(disk) == [manifest(100, 10).name, manifest(300, 10).name]


def test_records_file_holds_exactly_the_bytes_given_even_over_a_partial_entry() -> None:
    # The same entry name retried after a crash: the longer leftover must not survive.
    disk = new_disk()
    entry = manifest(100, 6)
    folder = join(PARTITION, quarantine.QUARANTINE_DIR, entry.name)
    disk.makedirs(folder)
    handle = disk.open(join(folder, quarantine.RECORDS_FILE), create=True)
    handle.append(b"a much longer leftover from the attempt before the crash")
    handle.fsync()
    handle.close()
    quarantine.add(disk, PARTITION, [b"abc", b"def"], entry, UNBOUNDED)
    assert disk.read_file(quarantine.records_path(PARTITION, entry.name)) == b"abcdef"
    assert quarantine.entries(disk, PARTITION) == [entry]


def test_eviction_drops_the_oldest_entries_beyond_max_bytes() -> None:
    disk = new_disk()
    assert add(disk, manifest(100, 100), max_bytes=250) == []
    assert add(disk, manifest(200, 100), max_bytes=250) == []
    assert add(disk, manifest(300, 100), max_bytes=250) == [manifest(100, 100).name]
    assert names(disk) == [manifest(200, 100).name, manifest(300, 100).name]
    assert not disk.exists(join(PARTITION, quarantine.QUARANTINE_DIR, manifest(100, 100).name))


def test_eviction_stops_as_soon_as_the_rest_fits() -> None:
    disk = new_disk()
    for when in (100, 200, 300):
        add(disk, manifest(when, 100))
    # 300 + 150 = 450 bytes; dropping one 100-byte entry brings it to 350 <= 400.
    assert add(disk, manifest(400, 150), max_bytes=400) == [manifest(100, 100).name]
    assert len(names(disk)) == 3


def test_eviction_never_drops_the_entry_just_added() -> None:
    disk = new_disk()
    add(disk, manifest(100, 10))
    add(disk, manifest(200, 10))
    big = manifest(300, 1000)
    evicted = add(disk, big, max_bytes=100)
    assert evicted == [manifest(100, 10).name, manifest(200, 10).name]
    assert names(disk) == [big.name]
    assert disk.read_file(quarantine.records_path(PARTITION, big.name)) == b"".join(
        chunks_of(1000, 300)
    )


def test_zero_max_bytes_keeps_only_the_newest_entry() -> None:
    disk = new_disk()
    add(disk, manifest(100, 5), max_bytes=0)
    add(disk, manifest(200, 5), max_bytes=0)
    assert names(disk) == [manifest(200, 5).name]


@pytest.mark.parametrize("seed", range(5))
def test_an_added_entry_survives_a_power_loss(seed: int) -> None:
    # add() returns before the caller cuts its log: the records must be durable by then.
    disk = new_disk(seed)
    entry = manifest(100, 64)
    add(disk, entry)
    disk.crash()
    assert quarantine.entries(disk, PARTITION) == [entry]
    assert disk.read_file(quarantine.records_path(PARTITION, entry.name)) == b"".join(
        chunks_of(64, 100)
    )


@pytest.mark.parametrize("seed", range(5))
def test_an_eviction_survives_a_power_loss(seed: int) -> None:
    disk = new_disk(seed)
    add(disk, manifest(100, 100), max_bytes=150)
    add(disk, manifest(200, 100), max_bytes=150)
    disk.crash()
    assert names(disk) == [manifest(200, 100).name]


@pytest.mark.parametrize("seed", range(3))
def test_power_loss_at_every_step_of_add_never_lists_a_torn_entry(seed: int) -> None:
    old = manifest(100, 40)
    new = manifest(200, 40)
    probe = new_disk()
    add(probe, old)
    before = probe.operations
    add(probe, new, max_bytes=60)  # also evicts ``old``
    steps = probe.operations - before
    assert steps >= 8
    for step in range(steps):
        disk = new_disk(seed * 100 + step)
        add(disk, old)
        disk.schedule_power_loss(step)
        with pytest.raises(PowerLoss):
            add(disk, new, max_bytes=60)
        listed = quarantine.entries(disk, PARTITION)
        assert all(e in (old, new) for e in listed), f"step {step}"
        # Eviction happens only once the new entry is durable: never neither of them.
        assert listed, f"step {step}: both entries lost"
        for e in listed:
            expected = b"".join(chunks_of(e.size_bytes, e.when_ms))
            assert disk.read_file(quarantine.records_path(PARTITION, e.name)) == expected


def test_a_damaged_manifest_is_reported_as_corrupt_or_skipped() -> None:
    disk = new_disk()
    good, bad = manifest(100, 10), manifest(200, 10)
    add(disk, good)
    add(disk, bad)
    path = join(PARTITION, quarantine.QUARANTINE_DIR, bad.name, quarantine.MANIFEST_FILE)
    disk.flip_bit(path, 0, 1)  # '{' becomes 'y': no longer JSON
    try:
        listed = quarantine.entries(disk, PARTITION)
    except CorruptLogError as e:
        assert e.path == path
    else:
        assert listed == [good]
