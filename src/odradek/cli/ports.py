"""Ports for servers that are planned now and started later (``odradek dev``, the tests).

Asking the kernel for port 0 hands out a port from the ephemeral range, the same range
every outgoing connection takes its local port from. A port chosen that way and bound
seconds later can meanwhile be the local end of a connection between two other nodes,
and the late server then fails to bind. So ports come from below the ephemeral range, a
process never hands one out twice, and each is checked free when handed out.
"""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

_LOWEST = 10_000
_EPHEMERAL_DEFAULT = (32_768, 60_999)  # Linux's default net.ipv4.ip_local_port_range
_handed_out: set[int] = set()
_rng = random.Random(os.getpid())  # processes that pick side by side start apart


def ephemeral_range(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> tuple[int, int]:
    """The kernel's ephemeral port range (Linux's default where it cannot be read)."""
    try:
        low, high = (int(part) for part in path.read_text().split())
    except (OSError, ValueError):
        return _EPHEMERAL_DEFAULT
    return low, high


def _candidates() -> tuple[int, int]:
    low, high = ephemeral_range()
    if low - _LOWEST >= 1_000:
        return _LOWEST, low - 1
    return high + 1, 65_535  # an unusual range that starts low: use the ports above it


def free_port(host: str = "127.0.0.1") -> int:
    """A port outside the ephemeral range that nothing holds now and this process has not
    handed out before."""
    first, last = _candidates()
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for _ in range(1_000):
        port = _rng.randint(first, last)
        if port in _handed_out:
            continue
        with socket.socket(family) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port on {host} in {first}-{last} after 1,000 tries")
