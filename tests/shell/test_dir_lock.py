"""One process per data dir: the second to lock a dir is refused with the dir named,
and the lock is free again once its holder releases it (or dies)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from odradek.core.errors import ConfigError
from odradek.shell.dir_lock import DirLock


def test_a_locked_dir_refuses_a_second_holder_until_released(tmp_path: Path) -> None:
    first = DirLock(str(tmp_path))
    first.acquire()
    with pytest.raises(ConfigError, match="in use by another process"):
        DirLock(str(tmp_path)).acquire()
    first.release()
    again = DirLock(str(tmp_path))
    again.acquire()
    again.release()


def test_a_dead_holder_leaves_the_dir_free(tmp_path: Path) -> None:
    script = (
        "import os, sys\n"
        "from odradek.shell.dir_lock import DirLock\n"
        f"DirLock({str(tmp_path)!r}).acquire()\n"
        "os._exit(0)  # dies holding it, as after SIGKILL\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    lock = DirLock(str(tmp_path))
    lock.acquire()  # the kernel dropped the lock with the process
    lock.release()
