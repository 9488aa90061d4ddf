"""The FileSystem contract, run on both implementations.

The storage engine is tested on ``SimDisk`` and runs on ``RealFileSystem``; each test
here holds on both, so that what passes in the simulator means the same on a real disk.
Only durability differs (it cannot be observed without a power loss) and is tested in
``test_sim_disk.py``.
"""

from __future__ import annotations

import errno
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from odradek.shell.real_fs import RealFileSystem
from odradek.storage.fs import MAX_NAME_BYTES, FileSystem, join, write_file_atomically
from odradek.testing.sim_disk import SimDisk


@dataclass
class Env:
    fs: FileSystem
    root: str
    simulated: bool

    def path(self, *parts: str) -> str:
        return join(self.root, *parts)


@pytest.fixture(params=["real", "sim"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    if request.param == "real":
        yield Env(RealFileSystem(), str(tmp_path), simulated=False)
    else:
        disk = SimDisk(random.Random(1234))
        disk.makedirs("/data")
        yield Env(disk, "/data", simulated=True)


def errno_of(info: pytest.ExceptionInfo[OSError]) -> int | None:
    return info.value.errno


def test_append_read_and_size(env: Env) -> None:
    handle = env.fs.open(env.path("log"), create=True)
    assert handle.size() == 0
    handle.append(b"hello ")
    handle.append(bytearray(b"wide "))
    handle.append(memoryview(b"xxworld")[2:])
    assert handle.size() == len(b"hello wide world")
    assert handle.read(0, 100) == b"hello wide world"
    assert handle.read(6, 4) == b"wide"
    assert handle.read(3, 0) == b""
    assert handle.path == env.path("log")
    handle.fsync()
    handle.close()
    assert env.fs.read_file(env.path("log")) == b"hello wide world"


def test_append_counts_bytes_of_a_wide_memoryview(env: Env) -> None:
    # len() of a memoryview counts items, not bytes; the size must count bytes.
    wide = memoryview(bytes(range(8))).cast("I")
    handle = env.fs.open(env.path("log"), create=True)
    handle.append(wide)
    assert handle.size() == 8
    assert handle.read(0, 8) == bytes(range(8))
    handle.close()


def test_read_past_the_end_returns_fewer_bytes(env: Env) -> None:
    handle = env.fs.open(env.path("log"), create=True)
    handle.append(b"abcdef")
    assert handle.read(4, 10) == b"ef"
    assert handle.read(6, 10) == b""
    assert handle.read(100, 10) == b""
    handle.close()


def test_negative_read_and_truncate_are_invalid(env: Env) -> None:
    handle = env.fs.open(env.path("log"), create=True)
    handle.append(b"abc")
    with pytest.raises(OSError) as read_error:
        handle.read(-1, 2)
    with pytest.raises(OSError) as truncate_error:
        handle.truncate(-1)
    assert errno_of(read_error) == errno_of(truncate_error) == errno.EINVAL
    handle.close()


def test_reopen_sees_the_content_and_appends_at_the_end(env: Env) -> None:
    first = env.fs.open(env.path("log"), create=True)
    first.append(b"12345")
    first.close()
    again = env.fs.open(env.path("log"), create=True)  # create on an existing file keeps it
    assert again.size() == 5
    again.append(b"678")
    assert again.read(0, 100) == b"12345678"
    again.close()


def test_truncate_shrinks_then_appends_follow_the_new_end(env: Env) -> None:
    handle = env.fs.open(env.path("log"), create=True)
    handle.append(b"abcdefgh")
    handle.fsync()
    handle.truncate(3)
    assert handle.size() == 3
    assert handle.read(0, 100) == b"abc"
    handle.append(b"XY")
    assert handle.read(0, 100) == b"abcXY"
    handle.truncate(7)  # growing fills with zeros, as ftruncate does
    assert handle.read(0, 100) == b"abcXY\x00\x00"
    assert handle.size() == 7
    handle.close()


def test_closed_handle_raises_ebadf(env: Env) -> None:
    handle = env.fs.open(env.path("log"), create=True)
    handle.close()
    handle.close()  # closing twice is harmless
    with pytest.raises(OSError) as info:
        handle.append(b"x")
    assert errno_of(info) == errno.EBADF


def test_fileno(env: Env) -> None:
    handle = env.fs.open(env.path("log"), create=True)
    fd = handle.fileno()
    if env.simulated:
        assert fd is None
    else:
        assert fd is not None
        handle.append(b"abc")
        assert os.fstat(fd).st_size == 3
    handle.close()


def test_open_missing_without_create_is_enoent(env: Env) -> None:
    with pytest.raises(FileNotFoundError) as info:
        env.fs.open(env.path("missing"))
    assert errno_of(info) == errno.ENOENT
    assert not env.fs.exists(env.path("missing"))


def test_open_create_needs_the_parent_directory(env: Env) -> None:
    with pytest.raises(OSError) as info:
        env.fs.open(env.path("no-such-dir", "log"), create=True)
    assert errno_of(info) == errno.ENOENT


def test_a_name_longer_than_255_bytes_is_enametoolong(env: Env) -> None:
    longest = "n" * MAX_NAME_BYTES
    env.fs.open(env.path(longest), create=True).close()
    env.fs.makedirs(env.path("d" * MAX_NAME_BYTES))
    assert env.fs.exists(env.path(longest))
    too_long = longest + "n"
    with pytest.raises(OSError) as info:
        env.fs.open(env.path(too_long), create=True)
    assert errno_of(info) == errno.ENAMETOOLONG
    with pytest.raises(OSError) as info:
        env.fs.makedirs(env.path(too_long))
    assert errno_of(info) == errno.ENAMETOOLONG
    with pytest.raises(OSError) as info:
        env.fs.rename(env.path(longest), env.path(too_long))
    assert errno_of(info) == errno.ENAMETOOLONG
    assert env.fs.exists(env.path(longest)) and not env.fs.exists(env.path(too_long))


def test_open_a_directory_is_eisdir(env: Env) -> None:
    env.fs.makedirs(env.path("dir"))
    with pytest.raises(OSError) as info:
        env.fs.open(env.path("dir"), create=True)
    assert errno_of(info) == errno.EISDIR


def test_a_file_on_the_way_is_enotdir(env: Env) -> None:
    env.fs.open(env.path("file"), create=True).close()
    with pytest.raises(OSError) as info:
        env.fs.open(env.path("file", "log"), create=True)
    assert errno_of(info) == errno.ENOTDIR
    assert not env.fs.exists(env.path("file", "log"))


def test_exists_and_is_dir(env: Env) -> None:
    env.fs.makedirs(env.path("dir"))
    env.fs.open(env.path("file"), create=True).close()
    assert env.fs.exists(env.path("dir")) and env.fs.is_dir(env.path("dir"))
    assert env.fs.exists(env.path("file")) and not env.fs.is_dir(env.path("file"))
    assert not env.fs.exists(env.path("nope")) and not env.fs.is_dir(env.path("nope"))


def test_file_size_without_opening(env: Env) -> None:
    handle = env.fs.open(env.path("file"), create=True)
    handle.append(b"12345")
    handle.close()
    env.fs.makedirs(env.path("dir"))
    assert env.fs.file_size(env.path("file")) == 5
    with pytest.raises(OSError) as missing:
        env.fs.file_size(env.path("missing"))
    with pytest.raises(OSError) as on_dir:
        env.fs.file_size(env.path("dir"))
    assert errno_of(missing) == errno.ENOENT
    assert errno_of(on_dir) == errno.EISDIR


def test_listdir_is_sorted_and_lists_files_and_directories(env: Env) -> None:
    for name in ["c.log", "a.index", "b"]:
        env.fs.open(env.path(name), create=True).close()
    env.fs.makedirs(env.path("topic-0"))
    env.fs.makedirs(env.path("Z"))
    assert env.fs.listdir(env.root) == ["Z", "a.index", "b", "c.log", "topic-0"]
    assert env.fs.listdir(env.path("topic-0")) == []


def test_listdir_errors(env: Env) -> None:
    env.fs.open(env.path("file"), create=True).close()
    with pytest.raises(OSError) as missing:
        env.fs.listdir(env.path("missing"))
    with pytest.raises(OSError) as on_file:
        env.fs.listdir(env.path("file"))
    assert errno_of(missing) == errno.ENOENT
    assert errno_of(on_file) == errno.ENOTDIR


def test_makedirs_creates_parents_and_is_idempotent(env: Env) -> None:
    deep = env.path("a", "b", "c")
    env.fs.makedirs(deep)
    env.fs.makedirs(deep)
    assert env.fs.is_dir(deep)
    assert env.fs.listdir(env.path("a")) == ["b"]
    env.fs.open(join(deep, "log"), create=True).close()
    env.fs.makedirs(deep)  # an existing directory keeps its content
    assert env.fs.listdir(deep) == ["log"]


def test_makedirs_over_a_file_fails(env: Env) -> None:
    env.fs.open(env.path("file"), create=True).close()
    with pytest.raises(OSError) as info:
        env.fs.makedirs(env.path("file"))
    assert errno_of(info) == errno.EEXIST


def test_remove(env: Env) -> None:
    env.fs.open(env.path("file"), create=True).close()
    env.fs.makedirs(env.path("dir"))
    env.fs.remove(env.path("file"))
    assert not env.fs.exists(env.path("file"))
    with pytest.raises(OSError) as missing:
        env.fs.remove(env.path("file"))
    with pytest.raises(OSError) as on_dir:
        env.fs.remove(env.path("dir"))
    assert errno_of(missing) == errno.ENOENT
    assert errno_of(on_dir) == errno.EISDIR
    assert env.fs.is_dir(env.path("dir"))


def test_an_open_handle_outlives_remove(env: Env) -> None:
    # POSIX keeps an unlinked file's content for its open descriptors.
    handle = env.fs.open(env.path("file"), create=True)
    handle.append(b"still here")
    env.fs.remove(env.path("file"))
    assert handle.read(0, 100) == b"still here"
    handle.close()


def test_rmtree(env: Env) -> None:
    env.fs.makedirs(env.path("topic-0", "sub"))
    for name in ["topic-0/0.log", "topic-0/sub/x"]:
        env.fs.open(env.path(name), create=True).close()
    env.fs.open(env.path("keep"), create=True).close()
    env.fs.rmtree(env.path("topic-0"))
    assert env.fs.listdir(env.root) == ["keep"]
    with pytest.raises(OSError) as missing:
        env.fs.rmtree(env.path("topic-0"))
    assert errno_of(missing) == errno.ENOENT
    with pytest.raises(OSError) as on_file:
        env.fs.rmtree(env.path("keep"))
    assert errno_of(on_file) == errno.ENOTDIR


def test_rename_replaces_the_target_atomically(env: Env) -> None:
    old = env.fs.open(env.path("target"), create=True)
    old.append(b"old content")
    old.close()
    new = env.fs.open(env.path("target.tmp"), create=True)
    new.append(b"new")
    env.fs.rename(env.path("target.tmp"), env.path("target"))
    assert env.fs.read_file(env.path("target")) == b"new"
    assert not env.fs.exists(env.path("target.tmp"))
    assert env.fs.listdir(env.root) == ["target"]
    # The handle follows the file to its new name.
    new.append(b"er")
    assert env.fs.read_file(env.path("target")) == b"newer"
    new.close()


def test_rename_to_a_new_name_and_onto_itself(env: Env) -> None:
    handle = env.fs.open(env.path("a"), create=True)
    handle.append(b"A")
    handle.close()
    env.fs.rename(env.path("a"), env.path("b"))
    env.fs.rename(env.path("b"), env.path("b"))
    assert env.fs.listdir(env.root) == ["b"]
    assert env.fs.read_file(env.path("b")) == b"A"


def test_rename_a_directory(env: Env) -> None:
    env.fs.makedirs(env.path("topic-0"))
    env.fs.open(env.path("topic-0", "0.log"), create=True).close()
    env.fs.makedirs(env.path("empty"))
    env.fs.rename(env.path("topic-0"), env.path("topic-0.deleted"))
    assert env.fs.listdir(env.path("topic-0.deleted")) == ["0.log"]
    env.fs.rename(env.path("topic-0.deleted"), env.path("empty"))  # onto an empty directory
    assert env.fs.listdir(env.root) == ["empty"]
    assert env.fs.listdir(env.path("empty")) == ["0.log"]


@pytest.mark.parametrize(
    ("src", "dst", "expected"),
    [
        ("missing", "x", errno.ENOENT),
        ("file", "no-dir/x", errno.ENOENT),
        ("file", "full", errno.EISDIR),
        ("full", "file", errno.ENOTDIR),
        ("empty", "full", errno.ENOTEMPTY),
        ("full", "full/inside", errno.EINVAL),
    ],
)
def test_rename_errors(env: Env, src: str, dst: str, expected: int) -> None:
    env.fs.makedirs(env.path("full"))
    env.fs.makedirs(env.path("empty"))
    env.fs.open(env.path("full", "x"), create=True).close()
    env.fs.open(env.path("file"), create=True).close()
    before = env.fs.listdir(env.root)
    with pytest.raises(OSError) as info:
        env.fs.rename(env.path(src), env.path(dst))
    assert errno_of(info) == expected
    assert env.fs.listdir(env.root) == before


def test_fsync_dir(env: Env) -> None:
    env.fs.makedirs(env.path("dir"))
    env.fs.open(env.path("file"), create=True).close()
    env.fs.fsync_dir(env.path("dir"))
    env.fs.fsync_dir(env.root)
    with pytest.raises(OSError) as missing:
        env.fs.fsync_dir(env.path("missing"))
    with pytest.raises(OSError) as on_file:
        env.fs.fsync_dir(env.path("file"))
    assert errno_of(missing) == errno.ENOENT
    assert errno_of(on_file) == errno.ENOTDIR


def test_read_file_errors(env: Env) -> None:
    env.fs.makedirs(env.path("dir"))
    with pytest.raises(OSError) as missing:
        env.fs.read_file(env.path("missing"))
    with pytest.raises(OSError) as on_dir:
        env.fs.read_file(env.path("dir"))
    assert errno_of(missing) == errno.ENOENT
    assert errno_of(on_dir) == errno.EISDIR


def test_write_file_atomically_creates_and_replaces(env: Env) -> None:
    target = env.path("recovery-point-offset-checkpoint")
    write_file_atomically(env.fs, target, b"0\n1\ntopic 0 42\n")
    assert env.fs.read_file(target) == b"0\n1\ntopic 0 42\n"
    write_file_atomically(env.fs, target, memoryview(b"0\n1\ntopic 0 43\n"))
    assert env.fs.read_file(target) == b"0\n1\ntopic 0 43\n"
    assert env.fs.listdir(env.root) == ["recovery-point-offset-checkpoint"]


def test_write_file_atomically_replaces_a_stale_temporary(env: Env) -> None:
    target = env.path("checkpoint")
    stale = env.fs.open(target + ".tmp", create=True)
    stale.append(b"half-written garbage from a crash")
    stale.close()
    write_file_atomically(env.fs, target, b"fresh")
    assert env.fs.read_file(target) == b"fresh"
    assert env.fs.listdir(env.root) == ["checkpoint"]


# -- RealFileSystem only: paths the OS rarely takes, forced with a stub ---------------------


def test_real_append_finishes_a_short_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = os.write

    def at_most_three_bytes(fd: int, data: bytes | memoryview) -> int:
        return real_write(fd, memoryview(data)[:3])

    handle = RealFileSystem().open(str(tmp_path / "log"), create=True)
    monkeypatch.setattr("odradek.shell.real_fs.os.write", at_most_three_bytes)
    handle.append(b"0123456789")
    monkeypatch.undo()
    assert handle.size() == 10
    assert handle.read(0, 100) == b"0123456789"
    handle.close()


def test_real_append_failing_midway_keeps_the_size_true(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A full disk can take part of an append; the size must count those bytes so the
    # caller can truncate back to where the append started.
    real_write = os.write
    calls = 0

    def full_after_four_bytes(fd: int, data: bytes | memoryview) -> int:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, memoryview(data)[:4])

    handle = RealFileSystem().open(str(tmp_path / "log"), create=True)
    handle.append(b"ok:")
    monkeypatch.setattr("odradek.shell.real_fs.os.write", full_after_four_bytes)
    with pytest.raises(OSError) as info:
        handle.append(b"0123456789")
    monkeypatch.undo()
    assert info.value.errno == errno.ENOSPC
    assert handle.size() == 7
    handle.truncate(3)
    assert handle.read(0, 100) == b"ok:"
    handle.close()


def test_real_read_finishes_a_short_pread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_pread = os.pread

    def at_most_two_bytes(fd: int, length: int, position: int) -> bytes:
        return real_pread(fd, min(length, 2), position)

    handle = RealFileSystem().open(str(tmp_path / "log"), create=True)
    handle.append(b"abcdefg")
    monkeypatch.setattr("odradek.shell.real_fs.os.pread", at_most_two_bytes)
    assert handle.read(1, 5) == b"bcdef"
    assert handle.read(4, 100) == b"efg"
    monkeypatch.undo()
    handle.close()
