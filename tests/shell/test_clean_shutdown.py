"""Kafka's clean shutdown file: a clean stop leaves its broker epoch, the next start takes
it (and removes it, so that a crash afterwards does not pass for a clean stop)."""

from __future__ import annotations

import random

from odradek.shell.clean_shutdown import CLEAN_SHUTDOWN_FILE, CleanShutdownFile
from odradek.storage.fs import join, write_file_atomically
from odradek.testing.sim_disk import SimDisk

LOG_DIR = "/data"


def _disk() -> SimDisk:
    disk = SimDisk(random.Random(7))
    disk.makedirs(LOG_DIR)
    disk.fsync_dir("/")
    return disk


def test_the_epoch_of_a_clean_stop_is_taken_once() -> None:
    disk = _disk()
    CleanShutdownFile(disk, LOG_DIR).write(42)
    # The next process: the file says the stop was clean, with the epoch it stopped in.
    restarted = CleanShutdownFile(disk, LOG_DIR)
    assert restarted.exists()
    assert restarted.take_epoch() == 42
    # Gone at once, and durably: a crash of this process (even a power loss) must not
    # pass for a clean stop.
    disk.crash()
    assert not restarted.exists()
    assert not disk.exists(join(LOG_DIR, CLEAN_SHUTDOWN_FILE))
    assert CleanShutdownFile(disk, LOG_DIR).take_epoch() == -1


def test_a_damaged_file_claims_no_epoch_and_is_removed() -> None:
    disk = _disk()
    write_file_atomically(disk, join(LOG_DIR, CLEAN_SHUTDOWN_FILE), b'{"version": 0}')
    clean = CleanShutdownFile(disk, LOG_DIR)
    assert clean.take_epoch() == -1
    assert not clean.exists()
