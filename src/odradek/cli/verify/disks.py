"""The disks of a verify run that can fill up: a tmpfs under a node's data dir.

A node that a ``disk-full`` fault targets keeps its data dir (and with it, in the
combined layout verify uses, its metadata log) on a tmpfs of its own from before it is
formatted: a disk cannot be put under a running node. The tmpfs starts large. To fill
it, the nemesis shrinks it (``mount -o remount,size=``) to what it holds plus a little,
which the workload writes within seconds; to repair it, it grows it back. On the way
out the files are copied to the real disk, so the report keeps them as it keeps every
other node's, and the tmpfs is unmounted.

The mounts are made inside the run's ``ip netns exec`` process, which has a mount
namespace of its own whose mounts do not propagate to the host: if the run is killed
too hard for any cleanup, the tmpfs goes away with the last process in the namespace.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["FULL_MARGIN_BYTES", "ROOMY_BYTES", "Disks"]

ROOMY_BYTES = 512 * 1024 * 1024
"""The size of a disk that is not full; far above what a verify run writes. A tmpfs
takes memory only for what it holds."""
FULL_MARGIN_BYTES = 64 * 1024
"""Room left when a disk is made full: a few seconds of the workload's writes."""


def _mount(*args: str) -> None:
    result = subprocess.run(
        ["mount", *args], capture_output=True, text=True, check=False, timeout=30
    )
    if result.returncode != 0:
        raise RuntimeError(f"mount {' '.join(args)}: {result.stderr.strip()}")


def used_bytes(path: Path) -> int:
    stat = os.statvfs(path)
    return (stat.f_blocks - stat.f_bfree) * stat.f_frsize


class Disks:
    """The tmpfs mounts of one run, by node id."""

    def __init__(self) -> None:
        self.mounts: dict[int, Path] = {}

    def mount(self, node_id: int, path: Path) -> None:
        """A roomy tmpfs at ``path`` (an empty or missing dir: before the node is formatted)."""
        path.mkdir(parents=True, exist_ok=True)
        _mount("-t", "tmpfs", "-o", f"size={ROOMY_BYTES},mode=0755", "tmpfs", str(path))
        self.mounts[node_id] = path

    def fill(self, node_id: int) -> int:
        """Shrink the disk to what it holds plus :data:`FULL_MARGIN_BYTES`; its new size.
        (A tmpfs cannot shrink below what it holds, so the size is never too small.)"""
        path = self.mounts[node_id]
        size = used_bytes(path) + FULL_MARGIN_BYTES
        _mount("-o", f"remount,size={size}", str(path))
        return size

    def repair(self, node_id: int) -> None:
        _mount("-o", f"remount,size={ROOMY_BYTES}", str(self.mounts[node_id]))

    def release(self) -> None:
        """Copy every disk's files to the real disk and unmount it. Idempotent; every
        node must be stopped first."""
        for node_id, path in sorted(self.mounts.items()):
            saved = path.with_name(path.name + ".saved")
            # Should the copy fail, the report loses those files; the unmount matters more.
            with contextlib.suppress(OSError):
                shutil.copytree(path, saved, dirs_exist_ok=True)
            unmounted = subprocess.run(
                ["umount", "-l", str(path)], capture_output=True, check=False, timeout=30
            )
            if unmounted.returncode == 0 and saved.exists():
                shutil.rmtree(path, ignore_errors=True)
                saved.rename(path)
            del self.mounts[node_id]
