"""``RealFileSystem``: the storage engine's :class:`~odradek.storage.fs.FileSystem` on the OS.

Each method is one or two plain ``os`` calls, so the durability contract of ``fs.py`` is
exactly POSIX's and errors stay ``OSError`` with ``errno`` set. The append path is hot:
a handle keeps its own size so that an append costs one ``write`` and nothing else. A
handle nobody refers to any more closes its descriptor (``__del__``), which is how a
segment's handle stays open exactly as long as a reader needs it.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat

from odradek.storage.fs import Buffer

# O_APPEND makes every write land at the current end of the file, so the handle never
# has to seek; the flag is fixed at open time and costs nothing per append. (os.open
# already makes descriptors non-inheritable, PEP 446, so no O_CLOEXEC is needed.)
_OPEN_FLAGS = os.O_RDWR | os.O_APPEND
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY
_CLOSED = -1


class RealFileHandle:
    """An open OS file descriptor with the size tracked in memory.

    The size is learned once with ``fstat`` at open and then follows this handle's own
    appends and truncations. Writes to the same file through another handle or process
    are not seen by :meth:`size`; the storage engine keeps one handle per file.
    """

    __slots__ = ("_fd", "_path", "_size")

    def __init__(self, path: str, fd: int, size: int) -> None:
        self._path = path
        self._fd = fd
        self._size = size

    @property
    def path(self) -> str:
        return self._path

    def size(self) -> int:
        return self._size

    def append(self, data: Buffer) -> None:
        written = os.write(self._fd, data)
        total = data.nbytes if isinstance(data, memoryview) else len(data)
        if written != total:
            # A short write (a signal, a full disk) is rare; only then pay for a view.
            view = memoryview(data).cast("B")
            while written < total:
                try:
                    written += os.write(self._fd, view[written:])
                except OSError:
                    # The bytes already written are in the file: keep the size true so
                    # that the caller can truncate back to where it started.
                    self._size += written
                    raise
        self._size += written

    def read(self, position: int, length: int) -> bytes:
        # pread may return fewer bytes than asked before the end of the file (a signal,
        # a pipe, some network filesystems); the contract only allows short reads at
        # the end, so read until the length or the end of the file is reached.
        data = os.pread(self._fd, length, position)
        if len(data) == length or not data:
            return data
        parts = [data]
        got = len(data)
        while got < length:
            more = os.pread(self._fd, length - got, position + got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def fsync(self) -> None:
        if self._fd == _CLOSED:
            # Closed because its data is gone (a deleted partition, a segment removed by
            # truncation) while a flush on a worker thread still held the handle: there
            # is nothing left to make durable, and os.fsync(-1) would raise ValueError.
            return
        os.fsync(self._fd)

    def truncate(self, size: int) -> None:
        os.ftruncate(self._fd, size)
        self._size = size

    def fileno(self) -> int | None:
        return self._fd

    def close(self) -> None:
        fd, self._fd = self._fd, _CLOSED
        # Closing twice is harmless; without the guard a second close could close an
        # unrelated descriptor that the OS has reused the number for.
        if fd != _CLOSED:
            os.close(fd)

    def __del__(self) -> None:
        # The storage engine lets go of an older segment's handle instead of closing
        # it, because a file range being sent (sendfile) may still hold it: the
        # descriptor closes here, when the last holder is gone.
        fd = getattr(self, "_fd", _CLOSED)
        if fd != _CLOSED:
            self._fd = _CLOSED
            # Plain try rather than contextlib: at interpreter exit, module globals may
            # already be gone when this runs.
            try:  # noqa: SIM105
                os.close(fd)
            except OSError:
                pass


class RealFileSystem:
    """The OS filesystem. Paths are passed to ``os`` unchanged."""

    def open(self, path: str, *, create: bool = False) -> RealFileHandle:
        fd = os.open(path, (_OPEN_FLAGS | os.O_CREAT) if create else _OPEN_FLAGS, 0o644)
        try:
            size = os.fstat(fd).st_size
        except BaseException:
            os.close(fd)
            raise
        return RealFileHandle(path, fd, size)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def file_size(self, path: str) -> int:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        return st.st_size

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def listdir(self, path: str) -> list[str]:
        # ``dirname("name")`` is "", which the OS does not accept as a directory.
        return sorted(os.listdir(path or "."))

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def remove(self, path: str) -> None:
        os.remove(path)

    def rmtree(self, path: str) -> None:
        shutil.rmtree(path)

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path or ".", _DIR_FLAGS)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def read_file(self, path: str) -> bytes:
        with open(path, "rb") as file:
            return file.read()
