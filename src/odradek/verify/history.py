"""A run's history: every operation as Jepsen records it, one JSON object a line.

An operation is invoked, then completes as ``ok`` (it happened), ``fail`` (it did not)
or ``info`` (unknown: no answer in time). Processes are the workload's clients
(``writer-N``, ``consumer-N``, ``final``), the ``nemesis``, whose faults are ``info``
operations that start (``invoke``) and end (``ok``), and the nodes (``node-N``), whose
processes' ends are recorded as they happen.

Functions (``f``):

* ``send``: one value to one partition; ``ok`` carries the offset it was acknowledged at;
* ``poll``: ``ok`` carries the ``records`` a group consumer received, ``[partition,
  offset, value]`` each, and the consumer's assignment ``generation``;
* ``read``: the final read; ``ok`` carries every partition's ``[offset, value]`` pairs;
* ``config``: a writer's settings that the judge needs (``{"idempotent": bool}``);
* ``exit``: a node process ended by itself (the nemesis kills are not recorded here);
  ``info`` when a fault makes it stop (a full disk), ``fail`` otherwise; ``value``
  describes its exit status and the reason it logged;
* anything else is a fault of the nemesis, described by ``value``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["FAIL", "INFO", "INVOKE", "NEMESIS", "OK", "Op", "dumps", "loads"]

INVOKE = "invoke"
OK = "ok"
FAIL = "fail"
INFO = "info"
NEMESIS = "nemesis"


@dataclass(frozen=True, slots=True)
class Op:
    time: float
    """Seconds since the workload started."""
    process: str
    type: str
    f: str
    partition: int | None = None
    offset: int | None = None
    value: Any = None
    """The value sent; a fault's description; a final read's ``{partition: [[offset,
    value], ...]}``."""
    records: list[list[Any]] | None = None
    generation: int | None = None
    error: str | None = None

    def to_json(self) -> str:
        return json.dumps({k: v for k, v in asdict(self).items() if v is not None})


def dumps(ops: Iterable[Op]) -> str:
    return "".join(op.to_json() + "\n" for op in ops)


def loads(lines: Iterable[str]) -> Iterator[Op]:
    for line in lines:
        if line.strip():
            yield Op(**json.loads(line))
