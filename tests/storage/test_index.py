"""Offset and time indexes: Kafka's entry bytes, lookups against a brute-force model.

An index is only a hint, but a wrong hint makes a fetch start after the batch it was
asked for, and a file that Kafka's tools cannot read is no longer Kafka's format. So:
exact bytes, lookups that never overshoot, truncation to whole entries, and ``load``
that refuses anything it cannot trust.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.shell.real_fs import RealFileSystem
from odradek.storage.fs import FileHandle, FileSystem, join
from odradek.storage.index import OFFSET_ENTRY, TIME_ENTRY, OffsetIndex, TimeIndex
from odradek.testing.sim_disk import SimDisk

BASE = 1000


@dataclass
class Env:
    fs: FileSystem
    root: str

    def open(self, name: str) -> FileHandle:
        return self.fs.open(join(self.root, name), create=True)


@pytest.fixture(params=["real", "sim"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    if request.param == "real":
        yield Env(RealFileSystem(), str(tmp_path))
    else:
        disk = SimDisk(random.Random(0))
        disk.makedirs("data")
        yield Env(disk, "data")


def sim_handle() -> FileHandle:
    disk = SimDisk(random.Random(0))
    return disk.open("index", create=True)


def whole_file(handle: FileHandle) -> bytes:
    return handle.read(0, handle.size())


# --- On-disk entries ------------------------------------------------------------------


def test_entry_sizes_are_kafkas() -> None:
    assert OFFSET_ENTRY.size == 8
    assert TIME_ENTRY.size == 12


def test_offset_index_entry_is_big_endian_relative_offset_then_position(env: Env) -> None:
    handle = env.open("00000000000000001000.index")
    index = OffsetIndex(handle, BASE)
    index.append(BASE + 5, 0)
    index.append(BASE + 10, 4096)
    index.append(BASE + 0x01020304, 0x0A0B0C0D)
    assert whole_file(handle) == bytes.fromhex(
        "00000005 00000000  0000000a 00001000  01020304 0a0b0c0d"
    )
    assert len(index) == 3
    assert index.size_in_bytes() == 24
    handle.close()


def test_time_index_entry_is_big_endian_timestamp_then_relative_offset(env: Env) -> None:
    handle = env.open("00000000000000001000.timeindex")
    index = TimeIndex(handle, BASE)
    index.append(1_700_000_000_000, BASE + 5)
    index.append(1_700_000_000_001, BASE + 0x01020304)
    assert whole_file(handle) == bytes.fromhex(
        "0000018bcfe56800 00000005  0000018bcfe56801 01020304"
    )
    assert index.max_timestamp() == 1_700_000_000_001
    handle.close()


def test_offset_index_append_ignores_entries_that_do_not_increase() -> None:
    handle = sim_handle()
    index = OffsetIndex(handle, BASE)
    index.append(BASE + 10, 100)
    before = whole_file(handle)
    index.append(BASE + 10, 200)  # same offset
    index.append(BASE + 9, 200)  # lower offset
    index.append(BASE + 11, 100)  # same position
    index.append(BASE + 11, 50)  # lower position
    assert whole_file(handle) == before
    assert list(index.offsets) == [BASE + 10]
    assert list(index.positions) == [100]
    index.append(BASE + 11, 101)
    assert list(index.offsets) == [BASE + 10, BASE + 11]


def test_time_index_append_keeps_only_rising_timestamps() -> None:
    handle = sim_handle()
    index = TimeIndex(handle, BASE)
    index.append(500, BASE + 1)
    before = whole_file(handle)
    index.append(500, BASE + 2)  # same timestamp
    index.append(499, BASE + 3)  # lower timestamp
    assert whole_file(handle) == before
    assert list(index.timestamps) == [500]
    index.append(501, BASE + 3)
    assert list(index.offsets) == [BASE + 1, BASE + 3]


def test_empty_time_index_max_timestamp_is_minus_one() -> None:
    assert TimeIndex(sim_handle(), BASE).max_timestamp() == -1


def test_time_index_append_never_writes_what_load_rejects() -> None:
    handle = sim_handle()
    index = TimeIndex(handle, BASE)
    index.append(10, BASE + 50)
    index.append(20, BASE + 40)  # offset going backwards, timestamp rising
    loaded = TimeIndex.load(handle, BASE, next_offset=BASE + 100)
    assert loaded is not None
    assert list(loaded.offsets) == list(index.offsets)


# --- Lookups against a brute-force model ----------------------------------------------


@st.composite
def offset_entries(draw: st.DrawFn) -> list[tuple[int, int]]:
    """Strictly increasing (offset, position) pairs, as a segment appends them."""
    count = draw(st.integers(0, 30))
    offset, position = BASE - 1, -1
    out = []
    for _ in range(count):
        offset += draw(st.integers(1, 20))
        position += draw(st.integers(1, 500))
        out.append((offset, position))
    return out


def build_offset_index(entries: list[tuple[int, int]]) -> OffsetIndex:
    index = OffsetIndex(sim_handle(), BASE)
    for offset, position in entries:
        index.append(offset, position)
    return index


@settings(max_examples=150, deadline=None)
@given(offset_entries(), st.data())
def test_floor_position_matches_model(entries: list[tuple[int, int]], data: st.DataObject) -> None:
    index = build_offset_index(entries)
    last = entries[-1][0] if entries else BASE
    for offset in data.draw(st.lists(st.integers(BASE - 5, last + 5), max_size=20)):
        # An entry names a batch's last offset: the batch of an entry equal to the offset
        # holds it; otherwise the scan starts at the last batch that ends before it.
        exact = [p for o, p in entries if o == offset]
        expected = exact[0] if exact else max((p for o, p in entries if o < offset), default=0)
        assert index.floor_position(offset) == expected


@settings(max_examples=150, deadline=None)
@given(offset_entries(), st.data())
def test_floor_entry_by_position_matches_model(
    entries: list[tuple[int, int]], data: st.DataObject
) -> None:
    index = build_offset_index(entries)
    end = entries[-1][1] if entries else 0
    for position in data.draw(st.lists(st.integers(0, end + 10), max_size=20)):
        expected = max((p for _, p in entries if p <= position), default=0)
        assert index.floor_entry_by_position(position) == expected


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 5), st.integers(61, 300), st.booleans()), max_size=40),
    st.data(),
)
def test_floor_position_never_passes_the_batch_holding_the_offset(
    batches: list[tuple[int, int, bool]], data: st.DataObject
) -> None:
    """Index a log of batches sparsely; every lookup lands on a batch at or before it."""
    index = OffsetIndex(sim_handle(), BASE)
    starts: list[tuple[int, int, int]] = []  # (base offset, last offset, position)
    offset, position = BASE, 0
    for records, size, indexed in batches:
        starts.append((offset, offset + records - 1, position))
        if indexed:
            index.append(offset + records - 1, position)
        offset += records
        position += size
    if not starts:
        return
    boundaries = {p for _, _, p in starts}
    for target in data.draw(st.lists(st.integers(BASE, offset - 1), min_size=1, max_size=20)):
        holding = next(p for b, last, p in starts if b <= target <= last)
        found = index.floor_position(target)
        assert found in boundaries
        assert found <= holding


@st.composite
def time_entries(draw: st.DrawFn) -> list[tuple[int, int]]:
    """Strictly rising timestamps with non-decreasing offsets."""
    count = draw(st.integers(0, 30))
    timestamp, offset = draw(st.integers(0, 10**12)), BASE
    out = []
    for _ in range(count):
        timestamp += draw(st.integers(1, 1000))
        offset += draw(st.integers(0, 20))
        out.append((timestamp, offset))
    return out


@settings(max_examples=150, deadline=None)
@given(time_entries(), st.data())
def test_floor_offset_matches_model(entries: list[tuple[int, int]], data: st.DataObject) -> None:
    index = TimeIndex(sim_handle(), BASE)
    for timestamp, offset in entries:
        index.append(timestamp, offset)
    low = entries[0][0] - 5 if entries else 0
    high = entries[-1][0] + 5 if entries else 10
    for target in data.draw(st.lists(st.integers(low, high), max_size=20)):
        expected = max(((t, o) for t, o in entries if t < target), default=(0, BASE))[1]
        assert index.floor_offset(target) == expected


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=60), st.integers(-5, 10_010))
def test_floor_offset_never_passes_the_first_record_at_or_after_the_timestamp(
    timestamps: list[int], target: int
) -> None:
    """Index each record with the running maximum, as a segment does; look up any time."""
    index = TimeIndex(sim_handle(), BASE)
    highest = -1
    for i, timestamp in enumerate(timestamps):
        if timestamp > highest:
            highest = timestamp
            index.append(timestamp, BASE + i)
    first = next((BASE + i for i, t in enumerate(timestamps) if t >= target), None)
    found = index.floor_offset(target)
    assert BASE <= found < BASE + len(timestamps)
    if first is not None:
        assert found <= first


# --- Truncation -----------------------------------------------------------------------


OFFSETS = [(BASE + 9, 0), (BASE + 19, 100), (BASE + 29, 200), (BASE + 39, 300)]


@pytest.mark.parametrize(
    ("position", "kept"),
    [(0, 0), (1, 1), (100, 1), (150, 2), (200, 2), (300, 3), (301, 4), (10_000, 4)],
)
def test_truncate_to_position_keeps_whole_entries_before_it(
    env: Env, position: int, kept: int
) -> None:
    handle = env.open("index")
    index = OffsetIndex(handle, BASE)
    for offset, pos in OFFSETS:
        index.append(offset, pos)
    index.truncate_to_position(position)
    assert handle.size() == kept * OFFSET_ENTRY.size
    assert list(zip(index.offsets, index.positions, strict=True)) == OFFSETS[:kept]
    assert whole_file(handle) == b"".join(OFFSET_ENTRY.pack(o - BASE, p) for o, p in OFFSETS[:kept])
    # Appending after a truncation continues the file where it was cut.
    index.append(BASE + 100, 5000)
    loaded = OffsetIndex.load(handle, BASE, log_size=6000)
    assert loaded is not None
    assert list(loaded.offsets) == [o for o, _ in OFFSETS[:kept]] + [BASE + 100]
    handle.close()


TIMES = [(100, BASE + 0), (200, BASE + 5), (300, BASE + 5), (400, BASE + 12)]


@pytest.mark.parametrize(
    ("offset", "kept"),
    [(BASE, 0), (BASE + 1, 1), (BASE + 5, 1), (BASE + 6, 3), (BASE + 12, 3), (BASE + 13, 4)],
)
def test_truncate_to_offset_keeps_whole_entries_before_it(env: Env, offset: int, kept: int) -> None:
    handle = env.open("timeindex")
    index = TimeIndex(handle, BASE)
    for timestamp, off in TIMES:
        index.append(timestamp, off)
    index.truncate_to_offset(offset)
    assert handle.size() == kept * TIME_ENTRY.size
    assert list(zip(index.timestamps, index.offsets, strict=True)) == TIMES[:kept]
    assert index.max_timestamp() == (TIMES[kept - 1][0] if kept else -1)
    index.append(1000, BASE + 50)
    loaded = TimeIndex.load(handle, BASE, next_offset=BASE + 51)
    assert loaded is not None
    assert list(loaded.timestamps) == [t for t, _ in TIMES[:kept]] + [1000]
    handle.close()


def test_reset_empties_index_and_file() -> None:
    handle = sim_handle()
    index = OffsetIndex(handle, BASE)
    index.append(BASE + 1, 0)
    index.reset()
    assert len(index) == 0
    assert handle.size() == 0
    times = TimeIndex(handle, BASE)
    times.append(5, BASE)
    times.reset()
    assert len(times) == 0
    assert handle.size() == 0


# --- load -----------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(offset_entries())
def test_offset_index_load_round_trips(entries: list[tuple[int, int]]) -> None:
    index = build_offset_index(entries)
    log_size = entries[-1][1] + 1 if entries else 0
    loaded = OffsetIndex.load(index.handle, BASE, log_size)
    assert loaded is not None
    assert list(loaded.offsets) == [o for o, _ in entries]
    assert list(loaded.positions) == [p for _, p in entries]


@settings(max_examples=100, deadline=None)
@given(time_entries())
def test_time_index_load_round_trips(entries: list[tuple[int, int]]) -> None:
    index = TimeIndex(sim_handle(), BASE)
    for timestamp, offset in entries:
        index.append(timestamp, offset)
    next_offset = entries[-1][1] + 1 if entries else BASE
    loaded = TimeIndex.load(index.handle, BASE, next_offset)
    assert loaded is not None
    assert list(zip(loaded.timestamps, loaded.offsets, strict=True)) == entries


def raw_handle(data: bytes) -> FileHandle:
    handle = sim_handle()
    handle.append(data)
    return handle


def offset_file(*entries: tuple[int, int]) -> bytes:
    return b"".join(OFFSET_ENTRY.pack(rel, pos) for rel, pos in entries)


def time_file(*entries: tuple[int, int]) -> bytes:
    return b"".join(TIME_ENTRY.pack(ts, rel) for ts, rel in entries)


def test_empty_files_load_as_empty_indexes() -> None:
    offsets = OffsetIndex.load(raw_handle(b""), BASE, log_size=0)
    times = TimeIndex.load(raw_handle(b""), BASE, next_offset=BASE)
    assert offsets is not None and len(offsets) == 0
    assert times is not None and len(times) == 0


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(offset_file((1, 0)) + b"\x00\x00\x00", id="torn-entry"),
        pytest.param(b"\x00" * 7, id="shorter-than-one-entry"),
        pytest.param(offset_file((1, 0), (1, 100)), id="same-offset"),
        pytest.param(offset_file((5, 0), (3, 100)), id="offset-going-back"),
        pytest.param(offset_file((1, 100), (2, 100)), id="same-position"),
        pytest.param(offset_file((1, 100), (2, 50)), id="position-going-back"),
        pytest.param(offset_file((1, 0), (2, 1000)), id="position-at-log-end"),
        pytest.param(offset_file((1, 0), (2, 5000)), id="position-past-log-end"),
        pytest.param(offset_file((-1, 0)), id="negative-relative-offset"),
        pytest.param(offset_file((1, -8)), id="negative-position"),
    ],
)
def test_offset_index_load_refuses_an_index_it_cannot_trust(data: bytes) -> None:
    assert OffsetIndex.load(raw_handle(data), BASE, log_size=1000) is None


def test_offset_index_load_accepts_the_last_position_before_the_log_end() -> None:
    loaded = OffsetIndex.load(raw_handle(offset_file((1, 0), (2, 999))), BASE, log_size=1000)
    assert loaded is not None
    assert list(loaded.positions) == [0, 999]


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(time_file((10, 1)) + b"\x00" * 11, id="torn-entry"),
        pytest.param(time_file((10, 1), (10, 2)), id="same-timestamp"),
        pytest.param(time_file((10, 1), (9, 2)), id="timestamp-going-back"),
        pytest.param(time_file((10, 5), (20, 4)), id="offset-going-back"),
        pytest.param(time_file((10, 100)), id="offset-at-log-end"),
        pytest.param(time_file((10, 500)), id="offset-past-log-end"),
        pytest.param(time_file((10, -1)), id="negative-relative-offset"),
    ],
)
def test_time_index_load_refuses_an_index_it_cannot_trust(data: bytes) -> None:
    assert TimeIndex.load(raw_handle(data), BASE, next_offset=BASE + 100) is None


def test_time_index_load_accepts_the_same_offset_for_a_rising_timestamp() -> None:
    # Kafka allows it too: two entries for one batch whose records were indexed twice.
    loaded = TimeIndex.load(raw_handle(time_file((10, 5), (20, 5))), BASE, next_offset=BASE + 6)
    assert loaded is not None
    assert list(loaded.offsets) == [BASE + 5, BASE + 5]


def test_load_reads_entries_written_by_kafka(tmp_path: Path) -> None:
    # Kafka preallocates index files and trims them on close: what remains is entries only.
    path = tmp_path / "00000000000000001000.index"
    path.write_bytes(struct.pack(">iiii", 3, 0, 7, 4096))
    fs = RealFileSystem()
    handle = fs.open(str(path))
    loaded = OffsetIndex.load(handle, BASE, log_size=8192)
    assert loaded is not None
    assert list(loaded.offsets) == [BASE + 3, BASE + 7]
    assert list(loaded.positions) == [0, 4096]
    handle.close()
