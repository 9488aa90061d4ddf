"""The wall clocks of a verify run's nodes, which a ``clock-jump`` fault moves.

Each node of a scenario that jumps clocks runs with libfaketime preloaded (Debian's
package ``libfaketime``, which ``faketime`` depends on), reading its offset from a file
of its own, ``node-N/faketime.rc``: ``+0`` until a fault writes ``+3600`` (an hour
ahead) and then ``+0`` again. libfaketime reads the file again at most a second after
it changed (``FAKETIME_CACHE_DURATION=1``), so the jump reaches the running process.

Only the wall clock moves: ``FAKETIME_DONT_FAKE_MONOTONIC=1`` leaves the monotonic
clock alone (libfaketime fakes both by default), which is the point: a node must time
out sessions and lags on the monotonic clock, and use the wall clock only for what it
stamps. ``NO_FAKE_STAT=1`` leaves file times as the kernel wrote them.
``FAKETIME_FORCE_MONOTONIC_FIX=0`` turns off a workaround libfaketime enables by itself
on this glibc: it makes timed waits on condition variables of the monotonic clock end
late, and Python hands its GIL from thread to thread with such a wait, so a produce
took 60-120 ms instead of 3 ms (median of 300 acks=all sends to three nodes) and a
queue handoff between two threads 1-13 ms instead of 20-40 us. Without it, timed waits
keep their length across jumps of the wall clock, forward and back.

One caveat of libfaketime 0.9.10 with ``FAKETIME_DONT_FAKE_MONOTONIC``: it breaks
``clock_nanosleep`` on the monotonic clock with an absolute time, which Python 3.11's
``time.sleep`` uses (it fails with EINVAL; libfaketime issue 426). A node never calls
``time.sleep``: its waits are asyncio's (epoll) and its threads' (condition variables),
which work. A node that did would crash, and the run would report its exit.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

__all__ = ["FAKETIME_PACKAGE", "libfaketime", "node_environment", "set_offset"]

FAKETIME_PACKAGE = "faketime"
"""The Debian package that brings libfaketime (``make test`` installs it when root)."""
_LIBRARY = "libfaketimeMT.so.1"
"""The variant for threaded programs: a node has an fsync thread and a thread pool."""


def libfaketime() -> str | None:
    """The path of libfaketime's preload library, if it is installed."""
    for pattern in (f"/usr/lib/*/faketime/{_LIBRARY}", f"/usr/lib/faketime/{_LIBRARY}"):
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


def node_environment(base: dict[str, str], rc_file: Path) -> dict[str, str]:
    """``base`` with libfaketime preloaded, its offset read from ``rc_file`` (written as
    ``+0`` here)."""
    library = libfaketime()
    if library is None:
        raise RuntimeError(f"libfaketime is missing (Debian package {FAKETIME_PACKAGE})")
    set_offset(rc_file, 0)
    env = {k: v for k, v in base.items() if not k.startswith("FAKETIME")}
    env.update(
        {
            "LD_PRELOAD": " ".join(filter(None, (library, base.get("LD_PRELOAD")))),
            "FAKETIME_TIMESTAMP_FILE": str(rc_file),
            "FAKETIME_CACHE_DURATION": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "FAKETIME_FORCE_MONOTONIC_FIX": "0",
            "NO_FAKE_STAT": "1",
        }
    )
    return env


def set_offset(rc_file: Path, offset_s: int) -> None:
    """The wall clock of the node reading ``rc_file`` runs ``offset_s`` seconds ahead of
    the real one (behind, if negative) within a second. Written whole and renamed into
    place, so libfaketime never reads half a line."""
    partial = rc_file.with_name(rc_file.name + ".new")
    partial.write_text(f"{offset_s:+d}\n")
    os.replace(partial, rc_file)
