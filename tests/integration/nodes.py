"""Start real Odradek node processes for integration tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

START_TIMEOUT_S = 30


class NodeProcess:
    """``python -m odradek dev`` in its own process, on an ephemeral port."""

    def __init__(self, directory: Path, port: int = 0) -> None:
        self.directory = directory
        self.port = port
        self.process: subprocess.Popen[str] | None = None
        self.bootstrap = ""
        self.log_path = directory / "node.log"

    def start(self) -> str:
        self.directory.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "a")  # noqa: SIM115 - closed with the process
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "odradek",
                "dev",
                "--dir",
                str(self.directory),
                "--port",
                str(self.port),
            ],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        assert self.process.stdout is not None
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            if line.startswith("bootstrap.servers="):
                self.bootstrap = line.strip().split("=", 1)[1]
                # Restarts reuse the port so that clients' cached metadata stays valid.
                self.port = int(self.bootstrap.rsplit(":", 1)[1])
                return self.bootstrap
        self.kill()
        raise AssertionError(f"node did not start; log:\n{self.log_path.read_text()[-3000:]}")

    def stop(self) -> int:
        """SIGTERM and wait: a clean stop."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(30)

    def kill(self) -> None:
        """SIGKILL: no flush, no checkpoint."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)
