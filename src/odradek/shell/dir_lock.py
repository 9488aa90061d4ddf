"""The lock a node holds on each of its data dirs for as long as it runs (Kafka's
``.lock`` file).

Two processes must never share a log dir: their logs would interleave. The lock is an
exclusive ``flock`` on ``<dir>/.lock``, taken at start and held until the process ends;
the kernel drops it when the process dies, however it dies. So a process that holds it
also knows that every earlier process on that dir is gone, which is what lets a broker
restarted after SIGKILL replace its previous registration at once rather than wait for
that registration's session to time out (see :meth:`Node._previous_broker_epoch`).
"""

from __future__ import annotations

import fcntl
import os

from odradek.core.errors import ConfigError

LOCK_FILE = ".lock"


class DirLock:
    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock; ConfigError when another process holds it."""
        path = os.path.join(self.directory, LOCK_FILE)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ConfigError(
                f"{self.directory} is in use by another process (it holds {path}): "
                "one node per log dir"
            ) from None
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the lock
            self._fd = None
