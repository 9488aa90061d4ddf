"""``SimDisk``: an in-memory :class:`~odradek.storage.fs.FileSystem` that loses what POSIX may lose.

The storage engine is only as safe as its fsyncs. A real disk almost never shows the
difference between written and durable bytes; this one shows it on every crash, from a
seeded ``random.Random``, so that a failing seed replays byte for byte.

The model
=========

Files and directories are nodes. Every node has a *visible* state, which every
operation reads and changes at once, and a *durable* state, which is what a power loss
leaves behind.

* A file's visible content is a byte string. ``append`` and ``truncate`` change it;
  ``FileHandle.fsync`` makes the whole visible content the durable content.
* A directory's visible entries map names to nodes. ``open(create=True)``, ``makedirs``,
  ``rename``, ``remove`` and ``rmtree`` change them; ``fsync_dir(path)`` makes that one
  directory's entries durable (not those of its subdirectories, and not its own entry in
  its parent). A file's content and its name are made durable independently, as on
  POSIX: a file that was fsynced but whose directory was not is lost by a crash.
  A rename between two directories is durable only once both are fsynced; with one
  fsynced the file may survive under both names or under neither.
* ``crash()`` is a power loss. The tree is rebuilt from the root's durable entries,
  following durable entries only; nodes not reached are gone, so unsynced creates
  vanish and unsynced renames and removes revert. Each file reached ends up in a state
  that some prefix of its operations since the last fsync produces, the last append of
  the prefix possibly cut short (a torn write): surviving bytes are always bytes that
  were written, in the order written. Precisely, with ``low`` the smallest size the
  file had since its last fsync, the crash picks, each with probability 1/3: *none*
  (the durable content), *all* (the visible content), or a *cut* (the first ``k``
  visible bytes, ``k`` uniform in ``low..size``). An unsynced truncation is therefore
  lost by *none* and kept by *all* and by any *cut*, as on a real filesystem, where
  truncate-then-rewrite in place can leave an empty file. After a crash the visible
  state equals the durable state, and every handle opened before it raises
  ``OSError(EIO)``.
* Faults, all deterministic given the rng: :meth:`SimDisk.fail_next` makes chosen
  operations raise ``OSError(errno)`` before they change anything; ``capacity_bytes``
  makes an append (or an extending truncate) that would exceed the total size of all
  files raise ``ENOSPC`` having written nothing; :meth:`SimDisk.flip_bit` silently
  corrupts one bit of both the visible and the durable content;
  :meth:`SimDisk.schedule_power_loss` crashes the disk in place of the n-th next
  mutating operation and raises :class:`PowerLoss`, to test every crash point of a
  sequence.

A name (one path component) longer than ``MAX_NAME_BYTES`` (255) bytes raises
``OSError(ENAMETOOLONG)`` in every operation, as on Linux filesystems, so that a file
name built from user input (a topic name) fails here as it would on a real disk.

Limits, on purpose: a failed fsync makes nothing durable but keeps the visible bytes,
and a later successful fsync makes them durable (Linux may instead drop them: the
engine must never retry an fsync after an error). Paths are normalized with
``posixpath.normpath``; a leading ``/`` is ignored, so ``/a`` and ``a`` name the same
file on the disk's single root, which always exists and cannot be renamed or removed.
"""

from __future__ import annotations

import errno
import posixpath
import random
from dataclasses import dataclass, field
from typing import TypeAlias

from odradek.storage.fs import MAX_NAME_BYTES, Buffer

OPERATIONS = frozenset(
    {
        "open",
        "append",
        "read",
        "fsync",
        "truncate",
        "listdir",
        "makedirs",
        "remove",
        "rmtree",
        "rename",
        "fsync_dir",
        "read_file",
    }
)
"""Operation names that :meth:`SimDisk.fail_next` accepts (and ``"*"`` for all of them)."""

_MESSAGES = {
    errno.EBADF: "bad file descriptor (handle closed)",
    errno.EBUSY: "the root directory cannot be renamed or removed",
    errno.EEXIST: "file exists",
    errno.EINVAL: "invalid argument",
    errno.EIO: "input/output error",
    errno.EISDIR: "is a directory",
    errno.ENAMETOOLONG: "file name too long",
    errno.ENOENT: "no such file or directory",
    errno.ENOSPC: "no space left on device",
    errno.ENOTDIR: "not a directory",
    errno.ENOTEMPTY: "directory not empty",
}


def _error(code: int, path: str, detail: str = "") -> OSError:
    # OSError(errno, ...) builds the matching subclass (FileNotFoundError for ENOENT,
    # ...), so callers can catch the same exceptions as on a real disk.
    message = _MESSAGES.get(code, errno.errorcode.get(code, str(code)))
    return OSError(code, f"{message} (simulated{': ' + detail if detail else ''})", path)


def _parts(path: str) -> tuple[str, ...]:
    parts = tuple(p for p in posixpath.normpath(path).split("/") if p not in ("", ".", ".."))
    for part in parts:
        if len(part.encode()) > MAX_NAME_BYTES:
            raise _error(errno.ENAMETOOLONG, path)
    return parts


class PowerLoss(BaseException):
    """The simulated power went out in place of an operation (see ``schedule_power_loss``).

    It derives from ``BaseException`` so that the storage engine's ``except Exception``
    or ``except OSError`` handlers cannot swallow it: after a power loss no code of the
    "process" may run any more.
    """


@dataclass
class FaultRule:
    """Make calls of ``operation`` on ``path`` (or under it, or anywhere) raise ``error``.

    ``remaining`` is how many more calls fail (None: every call until cleared);
    ``probability`` below 1 makes each matching call fail only with that probability,
    drawn from the disk's rng. ``fired`` counts the errors raised so far.
    """

    operation: str
    error: int
    path: str | None = None
    remaining: int | None = 1
    probability: float = 1.0
    fired: int = 0
    _parts: tuple[str, ...] | None = field(default=None, repr=False)


class _File:
    """A file's content, stored so that the common case costs nothing extra.

    The durable content is ``data[:durable_size]`` while ``shadow`` is None. Only a
    truncation below ``durable_size`` takes a copy of the durable bytes into ``shadow``
    first, so appends and fsyncs never copy the file. ``low`` is the smallest size since
    the last fsync: every ``data[:k]`` with ``low <= k`` is a state a crash may leave.
    """

    __slots__ = ("data", "durable_size", "low", "shadow")

    def __init__(self) -> None:
        self.data = bytearray()
        self.durable_size = 0
        self.low = 0
        self.shadow: bytes | None = None


class _Dir:
    """A directory: its visible entries and the entries the last ``fsync_dir`` saw."""

    __slots__ = ("durable_entries", "entries")

    def __init__(self) -> None:
        self.entries: dict[str, _Node] = {}
        self.durable_entries: dict[str, _Node] = {}


_Node: TypeAlias = "_File | _Dir"


def _file_bytes(node: _Node) -> int:
    if isinstance(node, _File):
        return len(node.data)
    return sum(_file_bytes(child) for child in node.entries.values())


class SimFileHandle:
    """A handle on a :class:`SimDisk` file; it follows the file through renames."""

    __slots__ = ("_closed", "_disk", "_file", "_generation", "_path")

    def __init__(self, disk: SimDisk, file: _File, path: str) -> None:
        self._disk = disk
        self._file = file
        self._path = path
        self._generation = disk._generation
        self._closed = False

    @property
    def path(self) -> str:
        return self._path

    def _check(self) -> None:
        if self._closed:
            raise _error(errno.EBADF, self._path)
        if self._generation != self._disk._generation:
            raise _error(errno.EIO, self._path, "handle opened before a crash")

    def size(self) -> int:
        self._check()
        return len(self._file.data)

    def append(self, data: Buffer) -> None:
        self._check()
        disk = self._disk
        disk._before("append", self._path, mutating=True)
        length = data.nbytes if isinstance(data, memoryview) else len(data)
        disk._reserve(length, self._path)
        self._file.data += data
        disk.bytes_written += length

    def read(self, position: int, length: int) -> bytes:
        self._check()
        self._disk._before("read", self._path, mutating=False)
        if position < 0 or length < 0:
            raise _error(errno.EINVAL, self._path)
        return bytes(self._file.data[position : position + length])

    def fsync(self) -> None:
        self._check()
        self._disk._before("fsync", self._path, mutating=True)
        file = self._file
        file.durable_size = file.low = len(file.data)
        file.shadow = None
        self._disk.fsyncs += 1

    def truncate(self, size: int) -> None:
        self._check()
        disk = self._disk
        disk._before("truncate", self._path, mutating=True)
        if size < 0:
            raise _error(errno.EINVAL, self._path)
        file = self._file
        current = len(file.data)
        if size > current:
            # As ftruncate does: growing a file fills it with zeros.
            disk._reserve(size - current, self._path)
            file.data += bytes(size - current)
            return
        if size < file.durable_size and file.shadow is None:
            file.shadow = bytes(file.data[: file.durable_size])
        file.low = min(file.low, size)
        del file.data[size:]
        disk._used_bytes -= current - size

    def fileno(self) -> int | None:
        return None

    def close(self) -> None:
        # Closing never fails, even after a crash, so that cleanup code always runs.
        self._closed = True


class SimDisk:
    """A deterministic simulated disk; see the module docstring for what it keeps.

    Counters for tests and benchmarks: ``fsyncs`` (successful file fsyncs),
    ``dir_fsyncs``, ``bytes_written`` (appended bytes), ``crashes`` and ``operations``
    (calls of the operations that may change the disk, failed ones included: open with
    create, append, truncate, fsync, makedirs, remove, rmtree, rename, fsync_dir).
    """

    def __init__(self, rng: random.Random, *, capacity_bytes: int | None = None) -> None:
        self._rng = rng
        self.capacity_bytes = capacity_bytes
        self._root = _Dir()
        self._generation = 0
        self._used_bytes = 0
        self._faults: list[FaultRule] = []
        self._power_loss_in: int | None = None
        self.fsyncs = 0
        self.dir_fsyncs = 0
        self.bytes_written = 0
        self.crashes = 0
        self.operations = 0

    # -- fault injection ---------------------------------------------------------------

    def fail_next(
        self,
        operation: str,
        error: int = errno.EIO,
        *,
        path: str | None = None,
        count: int | None = 1,
        probability: float = 1.0,
    ) -> FaultRule:
        """Make the next ``count`` calls of ``operation`` raise ``OSError(error)``.

        ``operation`` is a name from :data:`OPERATIONS` or ``"*"``; ``path`` limits the
        rule to that file or directory and everything under it (for ``rename``, either
        side); ``count=None`` fails every call until :meth:`clear_faults`. A failing
        call changes nothing. Rules are checked in the order they were added and outlive
        crashes, like a failing drive. ``exists``, ``is_dir``, ``size`` and ``close``
        never fail: the protocol gives them no error to report.
        """
        if operation != "*" and operation not in OPERATIONS:
            raise ValueError(f"unknown operation {operation!r}; known: {sorted(OPERATIONS)}")
        if count is not None and count < 1:
            raise ValueError("count must be at least 1 (or None for every call)")
        rule = FaultRule(operation, error, path, count, probability)
        rule._parts = None if path is None else _parts(path)
        self._faults.append(rule)
        return rule

    def clear_faults(self) -> None:
        self._faults.clear()

    def schedule_power_loss(self, after: int) -> None:
        """Crash in place of the mutating operation that comes after ``after`` more.

        With ``after=0`` the very next mutating operation does not run: :meth:`crash`
        runs instead and :class:`PowerLoss` is raised. Run a sequence once to learn its
        length from ``operations``, then once per crash point.
        """
        if after < 0:
            raise ValueError("after must not be negative")
        self._power_loss_in = after

    def cancel_power_loss(self) -> None:
        """Cancel a scheduled power loss that has not happened (the sequence was shorter)."""
        self._power_loss_in = None

    def flip_bit(self, path: str, byte_offset: int, bit: int) -> None:
        """Silently invert one bit of a file, in its visible and its durable content."""
        if not 0 <= bit < 8:
            raise ValueError(f"bit {bit} is not in 0..7")
        file = self._lookup(path)
        if not isinstance(file, _File):
            raise _error(errno.EISDIR, path)
        flipped = False
        if file.shadow is not None and 0 <= byte_offset < len(file.shadow):
            shadow = bytearray(file.shadow)
            shadow[byte_offset] ^= 1 << bit
            file.shadow = bytes(shadow)
            flipped = True
        # Without a shadow the durable bytes are a prefix of ``data``: one flip does both.
        if 0 <= byte_offset < len(file.data):
            file.data[byte_offset] ^= 1 << bit
            flipped = True
        if not flipped:
            raise ValueError(f"offset {byte_offset} is outside {path!r}")

    def _before(self, operation: str, path: str, *, mutating: bool, other: str = "") -> None:
        """Run the scheduled power loss and the fault rules; called before any change."""
        if mutating:
            if self._power_loss_in is not None:
                if self._power_loss_in == 0:
                    self._power_loss_in = None
                    self.crash()
                    raise PowerLoss(f"power lost in place of {operation} {path!r}")
                self._power_loss_in -= 1
            self.operations += 1
        if not self._faults:
            return
        for rule in self._faults:
            if rule.operation not in ("*", operation) or not (
                self._under(path, rule) or (other and self._under(other, rule))
            ):
                continue
            if rule.probability < 1.0 and self._rng.random() >= rule.probability:
                continue
            rule.fired += 1
            if rule.remaining is not None:
                rule.remaining -= 1
                if rule.remaining == 0:
                    self._faults.remove(rule)
            raise _error(rule.error, path, f"injected fault on {operation}")

    @staticmethod
    def _under(path: str, rule: FaultRule) -> bool:
        if rule._parts is None:
            return True
        return _parts(path)[: len(rule._parts)] == rule._parts

    def _reserve(self, length: int, path: str) -> None:
        if self.capacity_bytes is not None and self._used_bytes + length > self.capacity_bytes:
            raise _error(errno.ENOSPC, path)
        self._used_bytes += length

    # -- crash -------------------------------------------------------------------------

    def crash(self) -> None:
        """Power loss: keep the durable state plus a torn part of the rest (module doc).

        A scheduled power loss that has not happened yet is cancelled: this is it.
        """
        self._power_loss_in = None
        self.crashes += 1
        self._generation += 1
        seen_dirs: set[int] = set()
        seen_files: set[int] = set()
        self._used_bytes = self._recover_dir(self._root, seen_dirs, seen_files)

    def _recover_dir(self, directory: _Dir, seen_dirs: set[int], seen_files: set[int]) -> int:
        seen_dirs.add(id(directory))
        entries: dict[str, _Node] = {}
        used = 0
        # Sorted, so that the rng draws come in the same order on every run.
        for name in sorted(directory.durable_entries):
            node = directory.durable_entries[name]
            if isinstance(node, _Dir):
                # Per-directory durability can leave one directory durable under two
                # names (a rename made durable on one side only); a tree cannot hold
                # that, so the first name met keeps it.
                if id(node) in seen_dirs:
                    continue
                used += self._recover_dir(node, seen_dirs, seen_files)
            elif id(node) not in seen_files:
                seen_files.add(id(node))
                self._recover_file(node)
                used += len(node.data)
            entries[name] = node
        directory.entries = entries
        directory.durable_entries = dict(entries)
        return used

    def _recover_file(self, file: _File) -> None:
        # Without a shadow, low == durable_size and the durable content is data[:low].
        if file.shadow is not None or len(file.data) != file.durable_size:
            choice = self._rng.randrange(3)
            if choice == 0 and file.shadow is not None:
                file.data = bytearray(file.shadow)
            elif choice == 0:
                del file.data[file.durable_size :]
            elif choice == 2:
                del file.data[self._rng.randint(file.low, len(file.data)) :]
        file.durable_size = file.low = len(file.data)
        file.shadow = None

    # -- the FileSystem protocol ---------------------------------------------------------

    def _lookup(self, path: str) -> _Node:
        node: _Node = self._root
        for name in _parts(path):
            if not isinstance(node, _Dir):
                raise _error(errno.ENOTDIR, path)
            child = node.entries.get(name)
            if child is None:
                raise _error(errno.ENOENT, path)
            node = child
        return node

    def _parent(self, path: str) -> tuple[_Dir, str]:
        parts = _parts(path)
        if not parts:
            raise _error(errno.EBUSY, path)
        parent = self._lookup("/".join(parts[:-1]))
        if not isinstance(parent, _Dir):
            raise _error(errno.ENOTDIR, path)
        return parent, parts[-1]

    def open(self, path: str, *, create: bool = False) -> SimFileHandle:
        self._before("open", path, mutating=create)
        if not _parts(path):
            raise _error(errno.EISDIR, path)
        parent, name = self._parent(path)
        node = parent.entries.get(name)
        if node is None:
            if not create:
                raise _error(errno.ENOENT, path)
            node = parent.entries[name] = _File()
        elif isinstance(node, _Dir):
            raise _error(errno.EISDIR, path)
        return SimFileHandle(self, node, path)

    def file_size(self, path: str) -> int:
        self._before("stat", path, mutating=False)
        node = self._lookup(path)
        if isinstance(node, _Dir):
            raise _error(errno.EISDIR, path)
        return len(node.data)

    def exists(self, path: str) -> bool:
        try:
            self._lookup(path)
        except OSError:
            return False
        return True

    def is_dir(self, path: str) -> bool:
        try:
            return isinstance(self._lookup(path), _Dir)
        except OSError:
            return False

    def listdir(self, path: str) -> list[str]:
        self._before("listdir", path, mutating=False)
        node = self._lookup(path)
        if not isinstance(node, _Dir):
            raise _error(errno.ENOTDIR, path)
        return sorted(node.entries)

    def makedirs(self, path: str) -> None:
        self._before("makedirs", path, mutating=True)
        parts = _parts(path)
        node = self._root
        for index, name in enumerate(parts):
            child = node.entries.get(name)
            if child is None:
                child = node.entries[name] = _Dir()
            elif isinstance(child, _File):
                # As os.makedirs: the path itself being a file is EEXIST, a file on
                # the way to it is ENOTDIR.
                raise _error(errno.EEXIST if index == len(parts) - 1 else errno.ENOTDIR, path)
            node = child

    def remove(self, path: str) -> None:
        self._before("remove", path, mutating=True)
        parent, name = self._parent(path)
        node = parent.entries.get(name)
        if node is None:
            raise _error(errno.ENOENT, path)
        if isinstance(node, _Dir):
            raise _error(errno.EISDIR, path)
        del parent.entries[name]
        self._used_bytes -= len(node.data)

    def rmtree(self, path: str) -> None:
        self._before("rmtree", path, mutating=True)
        parent, name = self._parent(path)
        node = parent.entries.get(name)
        if node is None:
            raise _error(errno.ENOENT, path)
        if isinstance(node, _File):
            raise _error(errno.ENOTDIR, path)
        # Only the subtree's entry in its parent goes; the directories inside keep their
        # entries, so a crash before ``fsync_dir(parent)`` brings the whole tree back.
        del parent.entries[name]
        self._used_bytes -= _file_bytes(node)

    def rename(self, src: str, dst: str) -> None:
        self._before("rename", src, mutating=True, other=dst)
        src_parent, src_name = self._parent(src)
        node = src_parent.entries.get(src_name)
        if node is None:
            raise _error(errno.ENOENT, src)
        dst_parent, dst_name = self._parent(dst)
        existing = dst_parent.entries.get(dst_name)
        if existing is node:
            return  # The same entry (or another name of the same file): POSIX does nothing.
        if isinstance(node, _Dir):
            src_parts = _parts(src)
            if _parts(dst)[: len(src_parts)] == src_parts:
                raise _error(errno.EINVAL, src, "cannot move a directory into itself")
            if isinstance(existing, _File):
                raise _error(errno.ENOTDIR, dst)
            if isinstance(existing, _Dir) and existing.entries:
                raise _error(errno.ENOTEMPTY, dst)
        elif isinstance(existing, _Dir):
            raise _error(errno.EISDIR, dst)
        if isinstance(existing, _File):
            self._used_bytes -= len(existing.data)
        dst_parent.entries[dst_name] = node
        del src_parent.entries[src_name]

    def fsync_dir(self, path: str) -> None:
        self._before("fsync_dir", path, mutating=True)
        node = self._lookup(path)
        if not isinstance(node, _Dir):
            raise _error(errno.ENOTDIR, path)
        node.durable_entries = dict(node.entries)
        self.dir_fsyncs += 1

    def read_file(self, path: str) -> bytes:
        self._before("read_file", path, mutating=False)
        node = self._lookup(path)
        if isinstance(node, _Dir):
            raise _error(errno.EISDIR, path)
        return bytes(node.data)
