"""A cleaner worker's own process: cleaning passes off the node's interpreter.

A pass is pure Python over every byte of the logs it cleans (CRC checks, record walks,
the offset map): on a thread it shares the node's interpreter lock, and producers lost
about a third of their throughput while one ran. So each cleaner worker hands its
passes to a child process of its own. A :class:`~odradek.storage.cleaner.cleaning.
CleaningJob` and its :class:`~odradek.storage.cleaner.cleaning.CleaningResult` are
plain data (paths, offsets, sizes): the job goes down a pipe, the child runs
:func:`~odradek.storage.cleaner.cleaning.run_pass` on the real filesystem and sends the
result (or the exception) back, and the node swaps the result in exactly as it would a
thread's. The child writes only the ``.cleaned`` files the job names; the swap stays in
the node, which checks first that no source segment changed meanwhile.

The child dies with the thread that started it (``PR_SET_PDEATHSIG``), so a node killed
with SIGKILL leaves no pass writing ``.cleaned`` files under the node that restarts on
the same log dir. Each child holds its own share of
``log.cleaner.io.max.bytes.per.second`` (the rate divided by the workers), so that
together they stay within it, and runs at a lower CPU priority than the node, whose
requests come first on a busy host.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import pickle
import signal
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from odradek.shell.cleaner_throttle import IoThrottle
from odradek.shell.real_fs import RealFileSystem
from odradek.storage.cleaner.cleaning import CleaningJob, CleaningResult, run_pass

PR_SET_PDEATHSIG = 1
"""prctl(2): the signal this process gets when the thread that started it ends."""


CHILD_NICENESS = 10
"""How much lower the children's CPU priority is than the node's."""


class CleanerProcessDied(RuntimeError):
    """The child ended (or was killed) during a pass; the next pass starts another."""


class CleanerProcess:
    """One child process that runs passes one at a time. :meth:`run` blocks until the
    pass is done, so it is called on the worker's thread (which waits on the pipe
    without the interpreter lock), never on the event loop."""

    def __init__(self, name: str, bytes_per_second: float) -> None:
        self.name = name
        self._rate = bytes_per_second
        self._process: BaseProcess | None = None
        self._conn: Connection | None = None

    def run(self, job: CleaningJob, bytes_per_second: float | None = None) -> CleaningResult:
        """The pass of ``job``, held to ``bytes_per_second`` (else the rate the process
        was made with)."""
        if bytes_per_second is not None:
            self._rate = bytes_per_second
        conn = self._started()
        try:
            conn.send((job, self._rate))
            failed, outcome = conn.recv()
        except (EOFError, OSError) as e:
            code = self._reap()
            raise CleanerProcessDied(f"{self.name} ended during a pass (exit {code})") from e
        if failed:
            raise outcome
        assert isinstance(outcome, CleaningResult), outcome
        return outcome

    def stop(self) -> None:
        """End the child at once. A pass it was running is abandoned (start-up removes
        the ``.cleaned`` files of a pass cut short); the thread waiting on it returns."""
        process = self._process
        if process is not None and process.is_alive():
            process.kill()

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    def start(self) -> None:
        """Start the child now (else the first pass starts it), on the thread whose end
        ends it."""
        self._started()

    def _started(self) -> Connection:
        if self._conn is None or self._process is None or not self._process.is_alive():
            self._reap()
            # spawn, never fork: the node has threads, and a forked copy of its locks
            # and event loop is not a process to run anything in.
            context = multiprocessing.get_context("spawn")
            ours, theirs = context.Pipe()
            process = context.Process(
                target=_serve, args=(theirs, self._rate, os.getpid()), name=self.name, daemon=True
            )
            process.start()
            theirs.close()
            self._process, self._conn = process, ours
        return self._conn

    def _reap(self, timeout_s: float = 5.0) -> int | None:
        process, conn = self._process, self._conn
        self._process = self._conn = None
        if conn is not None:
            conn.close()
        if process is None:
            return None
        process.join(timeout_s)
        if process.is_alive():
            process.kill()
            process.join()
        return process.exitcode


def _serve(conn: Connection, bytes_per_second: float, parent: int) -> None:
    """The child: passes in, results (or what they raised) out, until told to stop or
    the node is gone."""
    _die_with_parent(parent)
    # The node's signals are the node's: a Ctrl-C in a terminal reaches the whole
    # process group, and the node stops its cleaner itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Background work: on a busy host the node's requests come first (a pass is only
    # ever due, never urgent; max.compaction.lag.ms is a bound of hours).
    with contextlib.suppress(OSError):
        os.nice(CHILD_NICENESS)
    fs, pace = RealFileSystem(), IoThrottle(bytes_per_second)
    while True:
        try:
            work = conn.recv()
        except (EOFError, OSError):
            return
        if work is None:
            return
        job, pace.rate = work
        try:
            answer: tuple[bool, object] = (False, run_pass(fs, job, pace))
        except Exception as e:
            answer = (True, _sendable(e))
        try:
            conn.send(answer)
        except OSError:
            return


def _sendable(error: Exception) -> Exception:
    """``error`` if it survives pickling whole, else a RuntimeError that names it (the
    node must learn that the pass failed, and why, whatever raised)."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")
    return error


def _die_with_parent(parent: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        # The node died before the prctl took hold.
        os._exit(0)
