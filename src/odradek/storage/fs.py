"""The small filesystem interface that the storage engine uses for every file access.

Two implementations exist: ``odradek.shell.real_fs.RealFileSystem`` (the OS) and
``odradek.testing.sim_disk.SimDisk`` (a simulated disk for tests and the simulator).
The contract is POSIX's, made explicit so the simulator can enforce it:

* ``FileHandle.append`` data is volatile until ``FileHandle.fsync`` returns.
* Creating, renaming or removing a directory entry is volatile until ``fsync_dir`` on
  the parent directory returns.
* Errors are ``OSError`` with ``errno`` set (``EIO``, ``ENOSPC``, ``ENOENT``, ...); the
  storage engine turns them into an offline partition, never into served bad data.
* A name (one path component) holds at most :data:`MAX_NAME_BYTES` bytes, Linux's
  ``NAME_MAX``; a longer one is ``ENAMETOOLONG``.

Paths are strings joined with ``/`` (use :func:`join`), relative to nothing: the caller
passes whatever root it was configured with.
"""

from __future__ import annotations

import posixpath
from typing import Protocol

Buffer = bytes | bytearray | memoryview

MAX_NAME_BYTES = 255
"""The longest file or directory name, in bytes (``NAME_MAX`` of Linux filesystems)."""


def join(*parts: str) -> str:
    return posixpath.join(*parts)


def dirname(path: str) -> str:
    return posixpath.dirname(path)


def basename(path: str) -> str:
    return posixpath.basename(path)


class FileHandle(Protocol):
    """An open file: appends at the end, reads anywhere."""

    @property
    def path(self) -> str: ...

    def size(self) -> int:
        """Current length, including appends not yet synced."""
        ...

    def append(self, data: Buffer) -> None:
        """Write all of ``data`` at the end of the file."""
        ...

    def read(self, position: int, length: int) -> bytes:
        """Up to ``length`` bytes from ``position`` (fewer only at the end of the file)."""
        ...

    def fsync(self) -> None:
        """Make every append so far durable."""
        ...

    def truncate(self, size: int) -> None:
        """Cut the file to ``size`` bytes (volatile until the next fsync)."""
        ...

    def fileno(self) -> int | None:
        """The OS file descriptor, for ``sendfile``; None on a simulated disk."""
        ...

    def close(self) -> None: ...


class FileSystem(Protocol):
    def open(self, path: str, *, create: bool = False) -> FileHandle:
        """Open for reading and appending; ``create`` makes a missing file (else ENOENT)."""
        ...

    def exists(self, path: str) -> bool: ...

    def file_size(self, path: str) -> int:
        """The size of a file, without opening it (ENOENT if it is missing)."""
        ...

    def is_dir(self, path: str) -> bool: ...

    def listdir(self, path: str) -> list[str]:
        """Names in a directory, sorted."""
        ...

    def makedirs(self, path: str) -> None:
        """Create a directory and its parents (no error if it exists)."""
        ...

    def remove(self, path: str) -> None: ...

    def rmtree(self, path: str) -> None: ...

    def rename(self, src: str, dst: str) -> None:
        """Atomically replace ``dst`` with ``src`` (files or directories)."""
        ...

    def fsync_dir(self, path: str) -> None:
        """Make entries created, renamed or removed in ``path`` durable."""
        ...

    def read_file(self, path: str) -> bytes:
        """The whole content of a file."""
        ...


def write_file_atomically(fs: FileSystem, path: str, data: Buffer, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new content.

    Write a temporary file, fsync it, rename it over the target, fsync the directory:
    the sequence Kafka uses for its checkpoint files. Without ``sync`` the two fsyncs
    are left to the caller (a later fsync of ``path`` and of its directory); a crash
    before them may then leave the old content, or the new one torn, which a reader
    must detect.
    """
    tmp = path + ".tmp"
    if fs.exists(tmp):
        fs.remove(tmp)
    handle = fs.open(tmp, create=True)
    try:
        handle.append(data)
        if sync:
            handle.fsync()
    finally:
        handle.close()
    fs.rename(tmp, path)
    if sync:
        fs.fsync_dir(dirname(path))
