"""Kafka's clean shutdown file: the broker epoch a clean stop leaves in the log dir.

Its presence at start says the last stop was clean (start-up then reads less, ADR 0016);
its epoch lets the controller have this process replace the previous one at once
(BrokerRegistration's ``previous_broker_epoch``). It is removed as soon as start-up has
read it, so that a crash later does not claim a clean stop.
"""

from __future__ import annotations

import json

from odradek.storage.fs import FileSystem, join, write_file_atomically

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


class CleanShutdownFile:
    def __init__(self, fs: FileSystem, log_dir: str) -> None:
        self._fs = fs
        self._log_dir = log_dir
        self._path = join(log_dir, CLEAN_SHUTDOWN_FILE)

    def exists(self) -> bool:
        return self._fs.exists(self._path)

    def take_epoch(self) -> int:
        """The broker epoch a clean stop left (-1: none, or unreadable), the file
        removed now so that a crash later does not claim a clean stop."""
        if not self._fs.exists(self._path):
            return -1
        try:
            epoch = int(json.loads(self._fs.read_file(self._path))["brokerEpoch"])
        except (ValueError, KeyError, TypeError):
            epoch = -1
        self._fs.remove(self._path)
        self._fs.fsync_dir(self._log_dir)
        return epoch

    def write(self, broker_epoch: int) -> None:
        """At a clean stop: say so, with the epoch this broker stopped in."""
        document = {"version": 0, "brokerEpoch": broker_epoch}
        write_file_atomically(self._fs, self._path, json.dumps(document).encode())
