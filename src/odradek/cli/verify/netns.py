"""The run's network namespace and its packet filter (``ip netns``, ``nft``).

The outer ``odradek verify`` creates one namespace, re-executes itself inside it, and
removes it afterwards, killing whatever still runs in it: nodes left behind by an inner
run that was killed hard cannot outlive the namespace's cleanup.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time

from odradek.cli.verify.clocks import FAKETIME_PACKAGE, libfaketime
from odradek.verify.nemesis import SCENARIOS
from odradek.verify.netrules import TABLE, ruleset

NAMESPACE_PREFIX = "odradek-verify-"


def missing_requirements(scenario: str | None = None) -> list[str]:
    """What this machine lacks for a verify run (of ``scenario``, when given), in words;
    empty when nothing."""
    missing = []
    if os.geteuid() != 0:
        missing.append(
            "root (a network namespace and nftables rules need CAP_NET_ADMIN): run with sudo"
        )
    for tool, package in (("ip", "iproute2"), ("nft", "nftables")):
        if shutil.which(tool) is None:
            missing.append(f"the `{tool}` command (Debian package {package})")
    if scenario is not None and SCENARIOS[scenario].jumps_clocks and libfaketime() is None:
        missing.append(
            f"libfaketime, to move a node's wall clock (Debian package {FAKETIME_PACKAGE})"
        )
    return missing


def _run(*args: str, input_text: str | None = None) -> None:
    result = subprocess.run(
        list(args), input=input_text, capture_output=True, text=True, check=False, timeout=30
    )
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {result.stderr.strip() or result.returncode}")


def create(name: str) -> None:
    _run("ip", "netns", "add", name)
    _run("ip", "-n", name, "link", "set", "lo", "up")


def pids_in(name: str) -> list[int]:
    result = subprocess.run(
        ["ip", "netns", "pids", name], capture_output=True, text=True, check=False, timeout=30
    )
    return [int(p) for p in result.stdout.split() if p.isdigit()]


def remove(name: str) -> None:
    """Kill every process left in the namespace, then delete it. Idempotent."""
    for _ in range(50):
        pids = [p for p in pids_in(name) if p != os.getpid()]
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    subprocess.run(["ip", "netns", "delete", name], capture_output=True, check=False, timeout=30)


def names() -> list[str]:
    result = subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True, check=False, timeout=30
    )
    return [line.split()[0] for line in result.stdout.splitlines() if line.strip()]


def remove_stale() -> None:
    """Remove the namespaces of earlier runs whose process is gone (killed by SIGKILL,
    which no cleanup survives), with whatever still runs in them."""
    for name in names():
        pid = name.removeprefix(NAMESPACE_PREFIX)
        if name.startswith(NAMESPACE_PREFIX) and pid.isdigit() and not _alive(int(pid)):
            remove(name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class PacketFilter:
    """The nftables table of this namespace (the process runs inside it)."""

    def apply(self, rules: str) -> None:
        _run("nft", "-f", "-", input_text=rules)

    def heal(self) -> None:
        self.apply(ruleset(()))

    def remove(self) -> None:
        subprocess.run(
            ["nft", "delete", "table", "ip", TABLE], capture_output=True, check=False, timeout=30
        )
