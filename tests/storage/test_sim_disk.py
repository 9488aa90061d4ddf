"""SimDisk's crash and fault model: what survives a power loss, and what faults look like.

The storage engine's crash tests are only as good as this disk, so each rule of the
model in ``odradek.testing.sim_disk`` has a test here, and the model-based test at the
end is shown to catch a disk that keeps too much.
"""

from __future__ import annotations

import errno
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from odradek.storage.fs import FileSystem, write_file_atomically
from odradek.testing.sim_disk import PowerLoss, SimDisk

SEEDS = range(60)


def new_disk(seed: int = 0, **options: int) -> SimDisk:
    """A disk with a durable ``/d`` directory, the way a broker's log dir starts."""
    disk = SimDisk(random.Random(seed), **options)
    disk.makedirs("/d")
    disk.fsync_dir("/")
    return disk


def write(disk: SimDisk, path: str, data: bytes, *, sync: bool) -> None:
    handle = disk.open(path, create=True)
    handle.append(data)
    if sync:
        handle.fsync()
    handle.close()


def survivors_of_unsynced_appends(seed: int) -> bytes:
    disk = new_disk(seed)
    write(disk, "/d/log", b"synced|", sync=True)
    disk.fsync_dir("/d")
    handle = disk.open("/d/log")
    for chunk in (b"one,", b"two,", b"three"):
        handle.append(chunk)
    disk.crash()
    return disk.read_file("/d/log")


# -- what a crash keeps -------------------------------------------------------------------


def test_fsynced_data_survives_every_crash() -> None:
    for seed in SEEDS:
        disk = new_disk(seed)
        write(disk, "/d/log", b"acknowledged", sync=True)
        disk.fsync_dir("/d")
        for _ in range(3):
            disk.crash()
            content = disk.read_file("/d/log")
            assert content == b"acknowledged", seed


def test_unsynced_appends_are_lost_kept_or_torn_but_never_invented_or_reordered() -> None:
    unsynced = b"one,two,three"
    kept: list[int] = []
    for seed in SEEDS:
        content = survivors_of_unsynced_appends(seed)
        assert content.startswith(b"synced|"), seed
        tail = content[len(b"synced|") :]
        assert unsynced.startswith(tail), (seed, tail)
        kept.append(len(tail))
    # None, all and a torn cut are each picked with probability 1/3, so with 60 seeds
    # each of "nothing kept" and "everything kept" happens far more often than 10 times
    # (about 21); a disk that rarely loses unsynced data would test little.
    assert kept.count(0) >= 10
    assert kept.count(len(unsynced)) >= 10
    assert any(0 < n < len(unsynced) for n in kept)


def test_a_crash_is_replayed_by_its_seed() -> None:
    outcomes = [survivors_of_unsynced_appends(seed) for seed in SEEDS]
    assert outcomes == [survivors_of_unsynced_appends(seed) for seed in SEEDS]
    assert len(set(outcomes)) > 2


def test_survivors_of_a_crash_are_durable() -> None:
    for seed in SEEDS:
        disk = new_disk(seed)
        write(disk, "/d/log", b"synced|", sync=True)
        disk.fsync_dir("/d")
        write(disk, "/d/log", b"maybe", sync=False)
        disk.crash()
        after_first = disk.read_file("/d/log")
        disk.crash()
        assert disk.read_file("/d/log") == after_first, seed


def test_an_unsynced_truncation_may_be_lost_or_kept_with_a_prefix_of_later_appends() -> None:
    seen = set()
    for seed in SEEDS:
        disk = new_disk(seed)
        write(disk, "/d/log", b"abcdef", sync=True)
        disk.fsync_dir("/d")
        handle = disk.open("/d/log")
        handle.truncate(2)
        handle.append(b"XY")
        assert handle.read(0, 10) == b"abXY"
        disk.crash()
        seen.add(disk.read_file("/d/log"))
    # Lost (the durable content), kept alone, kept with a torn or a whole append; never
    # a mix such as b"abXYef" or b"abcdXY".
    assert seen == {b"abcdef", b"ab", b"abX", b"abXY"}


def test_a_synced_truncation_survives() -> None:
    for seed in SEEDS:
        disk = new_disk(seed)
        write(disk, "/d/log", b"abcdef", sync=True)
        disk.fsync_dir("/d")
        handle = disk.open("/d/log")
        handle.truncate(2)
        handle.fsync()
        handle.append(b"XY")
        disk.crash()
        assert disk.read_file("/d/log") in (b"ab", b"abX", b"abXY"), seed


def test_an_unsynced_create_vanishes_even_if_its_content_was_fsynced() -> None:
    disk = new_disk()
    write(disk, "/d/new", b"data", sync=True)
    disk.crash()
    assert not disk.exists("/d/new")
    assert disk.listdir("/d") == []


def test_a_create_survives_once_its_directory_is_fsynced() -> None:
    disk = new_disk()
    write(disk, "/d/new", b"data", sync=True)
    disk.fsync_dir("/d")
    disk.crash()
    assert disk.read_file("/d/new") == b"data"


def test_fsync_dir_covers_one_directory_only() -> None:
    disk = new_disk()
    disk.makedirs("/d/topic-0/sub")
    disk.fsync_dir("/d/topic-0")  # its own entry in /d is not made durable by this
    disk.crash()
    assert disk.listdir("/d") == []
    disk.makedirs("/d/topic-0/sub")
    disk.fsync_dir("/d/topic-0")
    disk.fsync_dir("/d")
    disk.crash()
    assert disk.listdir("/d/topic-0") == ["sub"]


def test_an_unsynced_rename_reverts() -> None:
    disk = new_disk()
    write(disk, "/d/target", b"old", sync=True)
    write(disk, "/d/target.tmp", b"new", sync=True)
    disk.fsync_dir("/d")
    disk.rename("/d/target.tmp", "/d/target")
    assert disk.read_file("/d/target") == b"new"
    disk.crash()
    assert disk.read_file("/d/target") == b"old"
    assert disk.read_file("/d/target.tmp") == b"new"


def test_a_rename_survives_once_its_directory_is_fsynced() -> None:
    disk = new_disk()
    write(disk, "/d/target", b"old", sync=True)
    write(disk, "/d/target.tmp", b"new", sync=True)
    disk.fsync_dir("/d")
    disk.rename("/d/target.tmp", "/d/target")
    disk.fsync_dir("/d")
    disk.crash()
    assert disk.listdir("/d") == ["target"]
    assert disk.read_file("/d/target") == b"new"


def test_unsynced_remove_and_rmtree_revert() -> None:
    disk = new_disk()
    disk.makedirs("/d/topic-0")
    write(disk, "/d/topic-0/0.log", b"records", sync=True)
    write(disk, "/d/checkpoint", b"42", sync=True)
    disk.fsync_dir("/d/topic-0")
    disk.fsync_dir("/d")
    disk.rmtree("/d/topic-0")
    disk.remove("/d/checkpoint")
    disk.crash()
    assert disk.read_file("/d/topic-0/0.log") == b"records"
    assert disk.read_file("/d/checkpoint") == b"42"
    disk.rmtree("/d/topic-0")
    disk.fsync_dir("/d")
    disk.crash()
    assert disk.listdir("/d") == ["checkpoint"]


def test_a_rename_between_directories_needs_both_fsynced() -> None:
    disk = new_disk()
    disk.makedirs("/e")
    disk.fsync_dir("/")
    write(disk, "/d/f", b"data", sync=True)
    disk.fsync_dir("/d")
    disk.rename("/d/f", "/e/f")
    disk.fsync_dir("/d")  # the source side only: the file is durable under no name
    disk.crash()
    assert not disk.exists("/d/f") and not disk.exists("/e/f")


def test_a_directory_durable_under_two_names_comes_back_once() -> None:
    disk = new_disk()
    disk.makedirs("/e")
    disk.makedirs("/d/x")
    disk.fsync_dir("/")
    disk.fsync_dir("/d")
    disk.rename("/d/x", "/e/x")
    disk.fsync_dir("/e")  # /d still durably holds x, and now /e does too
    disk.crash()
    assert [disk.exists("/d/x"), disk.exists("/e/x")] == [True, False]


def test_a_durable_cycle_of_directories_is_cut() -> None:
    # Per-directory durability can record a cycle that no single moment had:
    # /A durably holds B, and B (moved to /B, then /A moved into it) durably holds A.
    disk = new_disk()
    disk.makedirs("/A/B")
    disk.fsync_dir("/")
    disk.fsync_dir("/A")
    disk.rename("/A/B", "/B")
    disk.rename("/A", "/B/A")
    disk.fsync_dir("/B")
    disk.crash()
    assert disk.listdir("/A") == ["B"]
    assert disk.listdir("/A/B") == []


def test_handles_from_before_a_crash_fail_with_eio() -> None:
    disk = new_disk()
    handle = disk.open("/d/log", create=True)
    disk.fsync_dir("/d")
    disk.crash()
    for use in (lambda: handle.append(b"x"), lambda: handle.read(0, 1), handle.fsync, handle.size):
        with pytest.raises(OSError) as info:
            use()
        assert info.value.errno == errno.EIO
    handle.close()  # closing still works, so cleanup code can run
    assert disk.open("/d/log").size() == 0


# -- crash at every step of a sequence ------------------------------------------------------


def replace_naively(fs: FileSystem, path: str, data: bytes) -> None:
    """Overwrite in place: the mistake ``write_file_atomically`` exists to avoid."""
    handle = fs.open(path, create=True)
    handle.truncate(0)
    handle.append(data)
    handle.fsync()
    handle.close()


def outcomes_of_crashing_at_every_step(
    replace: Callable[[FileSystem, str, bytes], None], *, old: bytes | None
) -> set[bytes | None]:
    """Every content of ``/d/checkpoint`` a crash at any step of ``replace`` can leave."""

    def prepared(seed: int) -> SimDisk:
        disk = new_disk(seed)
        if old is not None:
            write(disk, "/d/checkpoint", old, sync=True)
            disk.fsync_dir("/d")
        return disk

    probe = prepared(0)
    start = probe.operations
    replace(probe, "/d/checkpoint", b"new content")
    steps = probe.operations - start
    assert steps >= 4  # the sequence really has steps to crash between

    seen: set[bytes | None] = set()
    for step in range(steps + 1):
        for seed in range(8):
            disk = prepared(seed)
            disk.schedule_power_loss(after=step)
            try:
                replace(disk, "/d/checkpoint", b"new content")
            except PowerLoss:
                assert step < steps
            else:
                assert step == steps
                disk.crash()
            seen.add(disk.read_file("/d/checkpoint") if disk.exists("/d/checkpoint") else None)
    return seen


def test_write_file_atomically_leaves_old_or_new_at_every_crash_point() -> None:
    seen = outcomes_of_crashing_at_every_step(write_file_atomically, old=b"old content")
    assert seen == {b"old content", b"new content"}


def test_write_file_atomically_of_a_new_file_leaves_nothing_or_new() -> None:
    seen = outcomes_of_crashing_at_every_step(write_file_atomically, old=None)
    assert seen == {None, b"new content"}


def test_crashing_at_every_step_catches_an_in_place_overwrite() -> None:
    # The same check on a naive overwrite must find an empty or torn checkpoint.
    seen = outcomes_of_crashing_at_every_step(replace_naively, old=b"old content")
    assert seen - {b"old content", b"new content"}


def test_power_loss_is_not_an_exception_the_engine_can_swallow() -> None:
    disk = new_disk()
    handle = disk.open("/d/log", create=True)
    disk.schedule_power_loss(after=1)
    handle.append(b"runs")
    with pytest.raises(PowerLoss):
        try:
            handle.fsync()
        except Exception:  # what a careless engine might write
            pytest.fail("PowerLoss was caught by except Exception")
    assert disk.crashes == 1
    assert not disk.exists("/d/log")  # the fsync_dir never happened


def test_a_manual_crash_cancels_a_scheduled_power_loss() -> None:
    disk = new_disk()
    disk.schedule_power_loss(after=0)
    disk.crash()
    write(disk, "/d/log", b"runs", sync=True)  # would raise PowerLoss if still armed
    assert disk.crashes == 1


# -- injected faults -------------------------------------------------------------------------


def test_injected_eio_on_append_writes_nothing_and_passes() -> None:
    disk = new_disk()
    handle = disk.open("/d/log", create=True)
    handle.append(b"before")
    rule = disk.fail_next("append", errno.EIO)
    with pytest.raises(OSError) as info:
        handle.append(b"lost")
    assert info.value.errno == errno.EIO
    assert handle.read(0, 100) == b"before"
    handle.append(b"+after")  # count=1: only the next call fails
    assert handle.read(0, 100) == b"before+after"
    assert rule.fired == 1


def test_injected_enospc_and_count() -> None:
    disk = new_disk()
    handle = disk.open("/d/log", create=True)
    disk.fail_next("fsync", errno.ENOSPC, count=2)
    for _ in range(2):
        with pytest.raises(OSError) as info:
            handle.fsync()
        assert info.value.errno == errno.ENOSPC
    handle.fsync()
    assert disk.fsyncs == 1


def test_a_failed_fsync_makes_nothing_durable() -> None:
    lost = 0
    for seed in SEEDS:
        disk = new_disk(seed)
        handle = disk.open("/d/log", create=True)
        disk.fsync_dir("/d")
        handle.append(b"not acknowledged")
        disk.fail_next("fsync", errno.EIO)
        with pytest.raises(OSError):
            handle.fsync()
        disk.crash()
        lost += disk.read_file("/d/log") != b"not acknowledged"
    assert lost > 0


def test_faults_are_scoped_to_a_path_and_everything_under_it() -> None:
    disk = new_disk()
    disk.makedirs("/d/topic-0")
    disk.makedirs("/d/topic-1")
    disk.fail_next("open", errno.EIO, path="/d/topic-0", count=None)
    for _ in range(3):
        with pytest.raises(OSError):
            disk.open("/d/topic-0/0.log", create=True)
    disk.open("/d/topic-1/0.log", create=True).close()
    assert disk.listdir("/d/topic-0") == []
    disk.clear_faults()
    disk.open("/d/topic-0/0.log", create=True).close()


def test_a_rename_fault_matches_either_side() -> None:
    disk = new_disk()
    write(disk, "/d/a", b"A", sync=False)
    disk.fail_next("rename", errno.EIO, path="/d/b")
    with pytest.raises(OSError):
        disk.rename("/d/a", "/d/b")
    assert disk.listdir("/d") == ["a"]


def test_every_operation_can_fail() -> None:
    disk = new_disk()
    write(disk, "/d/log", b"x", sync=True)
    handle = disk.open("/d/log")
    calls: dict[str, Callable[[], object]] = {
        "open": lambda: disk.open("/d/log"),
        "append": lambda: handle.append(b"y"),
        "read": lambda: handle.read(0, 1),
        "fsync": handle.fsync,
        "truncate": lambda: handle.truncate(0),
        "listdir": lambda: disk.listdir("/d"),
        "makedirs": lambda: disk.makedirs("/d/new"),
        "remove": lambda: disk.remove("/d/log"),
        "rmtree": lambda: disk.rmtree("/d"),
        "rename": lambda: disk.rename("/d/log", "/d/other"),
        "fsync_dir": lambda: disk.fsync_dir("/d"),
        "read_file": lambda: disk.read_file("/d/log"),
    }
    for operation, call in calls.items():
        disk.fail_next(operation, errno.EIO)
        with pytest.raises(OSError) as info:
            call()
        assert info.value.errno == errno.EIO, operation
    assert disk.listdir("/d") == ["log"]
    assert disk.read_file("/d/log") == b"x"
    disk.fail_next("*", errno.EIO)
    with pytest.raises(OSError):
        disk.listdir("/d")


def test_an_unknown_operation_name_is_rejected() -> None:
    with pytest.raises(ValueError):
        new_disk().fail_next("apend", errno.EIO)


def test_probabilistic_faults_are_replayed_by_the_seed() -> None:
    def pattern(seed: int) -> list[bool]:
        disk = new_disk(seed)
        handle = disk.open("/d/log", create=True)
        disk.fail_next("append", errno.EIO, count=None, probability=0.5)
        failed = []
        for _ in range(40):
            try:
                handle.append(b"x")
            except OSError:
                failed.append(True)
            else:
                failed.append(False)
        return failed

    assert pattern(7) == pattern(7)
    assert 5 < sum(pattern(7)) < 35
    assert pattern(7) != pattern(8)


def test_capacity_raises_enospc_and_writes_nothing() -> None:
    disk = new_disk(capacity_bytes=10)
    handle = disk.open("/d/log", create=True)
    handle.append(b"12345678")
    with pytest.raises(OSError) as info:
        handle.append(b"abc")
    assert info.value.errno == errno.ENOSPC
    assert handle.read(0, 100) == b"12345678"
    handle.append(b"90")
    with pytest.raises(OSError):
        disk.open("/d/other", create=True).append(b"x")
    handle.truncate(4)  # freeing space makes room again
    disk.open("/d/other", create=True).append(b"xyz")
    disk.remove("/d/log")
    disk.open("/d/third", create=True).append(b"1234567")


def test_a_bit_flip_is_visible_on_read_and_survives_a_crash() -> None:
    disk = new_disk()
    write(disk, "/d/log", b"\x00\x00\x00\x00", sync=True)
    disk.fsync_dir("/d")
    disk.flip_bit("/d/log", 2, 7)
    assert disk.read_file("/d/log") == b"\x00\x00\x80\x00"
    disk.crash()
    assert disk.read_file("/d/log") == b"\x00\x00\x80\x00"


def test_a_bit_flip_reaches_the_durable_copy_behind_a_truncation() -> None:
    seen = set()
    for seed in range(20):
        disk = new_disk(seed)
        write(disk, "/d/log", b"abcd", sync=True)
        disk.fsync_dir("/d")
        disk.open("/d/log").truncate(1)
        disk.flip_bit("/d/log", 3, 0)  # beyond the visible end, inside the durable content
        with pytest.raises(ValueError):
            disk.flip_bit("/d/log", 4, 0)
        disk.crash()
        seen.add(disk.read_file("/d/log"))
    # The durable content comes back flipped when the crash loses the truncation.
    assert seen == {b"abce", b"a"}


def test_counters() -> None:
    disk = new_disk()
    handle = disk.open("/d/log", create=True)
    handle.append(b"abc")
    handle.append(memoryview(b"defg"))
    handle.fsync()
    handle.fsync()
    disk.fsync_dir("/d")
    disk.crash()
    assert (disk.bytes_written, disk.fsyncs, disk.dir_fsyncs, disk.crashes) == (7, 2, 2, 1)


# -- a model-based test: SimDisk against a plain model of the contract ------------------------

NAMES = st.sampled_from(["a", "b", "c"])


@dataclass
class ModelFile:
    visible: bytes = b""
    durable: bytes = b""
    # The smallest size since the last fsync: a crash leaves the durable content or
    # visible[:k] for some k >= low (a prefix of the operations, the last append torn).
    low: int = 0


@dataclass
class Model:
    files: dict[int, ModelFile] = field(default_factory=dict)
    visible: dict[str, int] = field(default_factory=dict)
    durable: dict[str, int] = field(default_factory=dict)
    next_id: int = 0


class DiskAgainstModel(RuleBasedStateMachine):
    """Random operations and crashes on one directory, checked against ``Model``."""

    make_disk: Callable[[random.Random], SimDisk] = SimDisk

    def __init__(self) -> None:
        super().__init__()
        self.model = Model()
        self.disk: SimDisk = SimDisk(random.Random(0))

    @initialize(seed=st.integers(0, 2**32))
    def start(self, seed: int) -> None:
        self.disk = type(self).make_disk(random.Random(seed))
        self.disk.makedirs("/d")
        self.disk.fsync_dir("/")

    def path(self, name: str) -> str:
        return f"/d/{name}"

    @rule(name=NAMES)
    def create(self, name: str) -> None:
        self.disk.open(self.path(name), create=True).close()
        if name not in self.model.visible:
            self.model.visible[name] = self.model.next_id
            self.model.files[self.model.next_id] = ModelFile()
            self.model.next_id += 1

    @precondition(lambda self: self.model.visible)
    @rule(name=NAMES, data=st.binary(min_size=1, max_size=6))
    def append(self, name: str, data: bytes) -> None:
        if name not in self.model.visible:
            with pytest.raises(FileNotFoundError):
                self.disk.open(self.path(name))
            return
        handle = self.disk.open(self.path(name))
        handle.append(data)
        handle.close()
        self.model.files[self.model.visible[name]].visible += data

    @precondition(lambda self: self.model.visible)
    @rule(name=NAMES)
    def fsync(self, name: str) -> None:
        if name in self.model.visible:
            handle = self.disk.open(self.path(name))
            handle.fsync()
            handle.close()
            file = self.model.files[self.model.visible[name]]
            file.durable = file.visible
            file.low = len(file.visible)

    @precondition(lambda self: self.model.visible)
    @rule(name=NAMES, fraction=st.floats(0, 1))
    def truncate(self, name: str, fraction: float) -> None:
        if name in self.model.visible:
            file = self.model.files[self.model.visible[name]]
            size = int(len(file.visible) * fraction)
            handle = self.disk.open(self.path(name))
            handle.truncate(size)
            handle.close()
            file.visible = file.visible[:size]
            file.low = min(file.low, size)

    @rule(src=NAMES, dst=NAMES)
    def rename(self, src: str, dst: str) -> None:
        if src not in self.model.visible:
            with pytest.raises(FileNotFoundError):
                self.disk.rename(self.path(src), self.path(dst))
            return
        self.disk.rename(self.path(src), self.path(dst))
        self.model.visible[dst] = self.model.visible.pop(src)

    @rule(name=NAMES)
    def remove(self, name: str) -> None:
        if name not in self.model.visible:
            with pytest.raises(FileNotFoundError):
                self.disk.remove(self.path(name))
            return
        self.disk.remove(self.path(name))
        del self.model.visible[name]

    @rule()
    def fsync_dir(self) -> None:
        self.disk.fsync_dir("/d")
        self.model.durable = dict(self.model.visible)

    @rule()
    def crash(self) -> None:
        self.disk.crash()
        self.model.visible = dict(self.model.durable)
        assert self.disk.listdir("/d") == sorted(self.model.visible)
        for name, file_id in self.model.visible.items():
            file = self.model.files[file_id]
            actual = self.disk.read_file(self.path(name))
            if actual != file.durable:
                assert file.low <= len(actual), name
                assert file.visible.startswith(actual), name
            file.visible = file.durable = actual
            file.low = len(actual)

    @invariant()
    def the_disk_shows_the_visible_model(self) -> None:
        assert self.disk.listdir("/d") == sorted(self.model.visible)
        for name, file_id in self.model.visible.items():
            assert self.disk.read_file(self.path(name)) == self.model.files[file_id].visible


MODEL_SETTINGS = settings(
    max_examples=150,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_sim_disk_agrees_with_the_model() -> None:
    run_state_machine_as_test(DiskAgainstModel, settings=MODEL_SETTINGS)


class KeepsEverything(SimDisk):
    """A broken disk whose crash loses nothing: unsynced creates and renames survive."""

    def crash(self) -> None:
        self.crashes += 1
        self._generation += 1


class KeepsEverythingMachine(DiskAgainstModel):
    make_disk = KeepsEverything


def test_the_model_test_catches_a_disk_that_keeps_unsynced_state() -> None:
    with pytest.raises(AssertionError):
        run_state_machine_as_test(
            KeepsEverythingMachine,
            settings=settings(MODEL_SETTINGS, phases=[Phase.generate], database=None),
        )
