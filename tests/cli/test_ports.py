"""Ports planned now and bound later stay out of the kernel's ephemeral range."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from odradek.cli import ports
from odradek.cli.ports import ephemeral_range, free_port


def test_ports_avoid_the_ephemeral_range_and_never_repeat() -> None:
    low, high = ephemeral_range()
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(not low <= p <= high for p in ports)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports[-1]))  # free when handed out, and still


def test_a_port_in_use_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    class Picks:
        def __init__(self, ports: list[int]) -> None:
            self.ports = ports

        def randint(self, first: int, last: int) -> int:
            return self.ports.pop(0)

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        busy = held.getsockname()[1]
        spare = free_port()
        # The kernel's pick is in the ephemeral range, so feed it to the picker directly.
        monkeypatch.setattr(ports, "_rng", Picks([busy, spare]))
        monkeypatch.setattr(ports, "_handed_out", set())
        assert free_port() == spare


def test_ephemeral_range_is_read_from_the_kernel_file(tmp_path: Path) -> None:
    path = tmp_path / "ip_local_port_range"
    path.write_text("40000\t50000\n")
    assert ephemeral_range(path) == (40000, 50000)
    assert ephemeral_range(tmp_path / "missing") == (32768, 60999)
