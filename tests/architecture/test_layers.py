"""The one direction of imports (docs/architecture.md), checked over every module in src/.

core <- protocol <- {storage, raft, replication, controller, coordinator} <- broker
<- shell <- cli. Modules of one level do not import each other, with one exception in
one direction (``SIDEWAYS``): raft may import storage, because the metadata log's disk
store is built on the storage engine; storage never imports raft. ``testing`` may import
everything below ``shell``. Only ``shell`` (and ``cli``, which starts it) may touch
asyncio, sockets, signals, clocks (``time``: wall and monotonic), files (``os``, ``open``,
``pathlib``, ``shutil``, ``tempfile``), threads and processes: every other layer is pure,
gets the time and the disk as arguments, and can run in the simulator.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "odradek"

RANK = {
    "core": 0,
    "protocol": 1,
    "storage": 2,
    "raft": 2,
    "replication": 2,
    "controller": 2,
    "coordinator": 2,
    "security": 2,
    "broker": 3,
    "testing": 3.5,
    "verify": 3.6,
    "shell": 4,
    "cli": 5,
}
# Imports allowed between two layers of one rank, in this direction only.
SIDEWAYS = {("raft", "storage")}
IO_MODULES = {
    "asyncio",
    "socket",
    "selectors",
    "signal",
    "ssl",
    # Clocks: a pure core is told the time, so that the simulator can move it.
    "time",
    # Files and processes: a pure core reads and writes through storage.fs.FileSystem,
    # which the simulator implements on its own disk.
    "os",
    "pathlib",
    "shutil",
    "tempfile",
    "subprocess",
    "multiprocessing",
    # Threads: a pure core runs on whichever thread calls it, and never starts one.
    "threading",
    "concurrent",
}
IO_LAYERS = {"shell", "cli"}


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "odradek" or len(parts) < 2:
        return None
    return parts[1]


def imports_of(source: str, module: str) -> list[str]:
    """Absolute names of everything a module imports (relative imports resolved)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: -node.level]
                names.append(".".join([*base, node.module] if node.module else base))
            elif node.module:
                names.append(node.module)
    return names


def opens_files(source: str) -> bool:
    """Whether the module calls the builtin ``open`` (not a method named open)."""
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open"
        for node in ast.walk(ast.parse(source))
    )


def violations(module: str, source: str) -> list[str]:
    own = layer_of(module)
    found: list[str] = []
    if own is None or own not in RANK:
        # Files directly in the package (``odradek/__init__.py``) import nothing internal.
        if own is not None and not module.endswith(("__init__", "__main__")):
            found.append(f"{module}: layer {own!r} is not in the table; add it to RANK")
        return found
    if own not in IO_LAYERS and opens_files(source):
        found.append(f"{module} calls open(): files belong to the shell")
    for name in imports_of(source, module):
        target = layer_of(name)
        top = name.split(".")[0]
        if top in IO_MODULES and own not in IO_LAYERS:
            found.append(f"{module} imports {name}: I/O belongs to the shell")
        if target is None or target == own:
            continue
        if target not in RANK:
            found.append(f"{module} imports unknown layer {name}")
        elif RANK[target] >= RANK[own] and (own, target) not in SIDEWAYS:
            found.append(f"{module} ({own}) imports {name} ({target}) against the direction")
    return found


def all_modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        out.append((".".join(rel.parts), path))
    return out


def test_every_module_imports_only_downwards() -> None:
    problems: list[str] = []
    for module, path in all_modules():
        problems += violations(module, path.read_text())
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        ("odradek.protocol.x", "from odradek.storage import log", "against the direction"),
        ("odradek.raft.core", "import odradek.controller.image", "against the direction"),
        ("odradek.storage.log", "import asyncio", "I/O belongs to the shell"),
        ("odradek.raft.core", "import time", "I/O belongs to the shell"),
        ("odradek.coordinator.group", "from time import monotonic", "I/O belongs to the shell"),
        ("odradek.storage.log", "import os.path", "I/O belongs to the shell"),
        ("odradek.replication.follower", "import threading", "I/O belongs to the shell"),
        ("odradek.broker.produce", "import subprocess", "I/O belongs to the shell"),
        ("odradek.controller.image", "from concurrent import futures", "I/O belongs"),
        ("odradek.storage.log", "data = open('x').read()", "files belong to the shell"),
        ("odradek.core.ids", "from ..protocol import api", "against the direction"),
        ("odradek.storage.log", "from odradek.raft import log", "against the direction"),
        ("odradek.newlayer.x", "", "not in the table"),
    ],
)
def test_the_checker_catches_violations(module: str, source: str, expected: str) -> None:
    found = violations(module, source)
    assert found and expected in found[0]


def test_the_checker_allows_the_direction() -> None:
    assert violations("odradek.broker.produce", "from odradek.storage import log") == []
    assert violations("odradek.shell.server", "import asyncio") == []
    assert violations("odradek.shell.clock", "import time") == []
    assert violations("odradek.cli.main", "import os, subprocess") == []
    assert violations("odradek.storage.log", "handle = fs.open(path)") == []
    assert violations("odradek.protocol.api", "from . import primitives") == []
    assert violations("odradek.raft.disk_log", "from odradek.storage import log") == []
