"""The history of produce operations and the checker that judges it against a final read.

The definitions are Jepsen's (its Kafka 0.8 test, and the queue checker of its later
Kafka workload), so the numbers can be compared with what real runs report:

* **acknowledged**: a produce whose ``acks=all`` answer was success, with its offset;
* **lost**: acknowledged, but not anywhere in the final read;
* **duplicated**: a value that appears more than once in the final read;
* **inconsistent offset**: acknowledged at one offset, found in the final read at another;
* **unexpected**: a value in the final read that no producer ever sent (only a broken
  log or simulator can produce one).

A failed or indeterminate produce (an error, a timeout, a crash before the answer) may
or may not be in the final read: both are allowed, as with any at-least-once client.

Pure and independent of how the history was made, so that a run on real processes
(a future ``odradek verify``) can use the same judge.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["CheckResult", "ProduceHistory", "check"]


@dataclass(slots=True)
class ProduceHistory:
    """Every value sent to one partition, and the offsets of the acknowledged ones."""

    attempted: set[str] = field(default_factory=set)
    acknowledged: dict[str, int] = field(default_factory=dict)
    failed: set[str] = field(default_factory=set)
    """Answered with an error: it may still be in the log (an append under min ISR that
    was never committed can be committed later by a new leader)."""

    def invoke(self, value: str) -> None:
        assert value not in self.attempted, f"value {value} sent twice"
        self.attempted.add(value)

    def ok(self, value: str, offset: int) -> None:
        assert value in self.attempted and value not in self.acknowledged, value
        self.acknowledged[value] = offset

    def fail(self, value: str) -> None:
        self.failed.add(value)


@dataclass(frozen=True, slots=True)
class CheckResult:
    acknowledged: int
    lost: tuple[str, ...]
    duplicated: tuple[str, ...]
    inconsistent_offsets: tuple[tuple[str, int, int], ...]
    """``(value, acknowledged offset, offset in the final read)``."""
    unexpected: tuple[str, ...]

    @property
    def valid(self) -> bool:
        return not (self.lost or self.duplicated or self.inconsistent_offsets or self.unexpected)

    @property
    def lost_share(self) -> float:
        return len(self.lost) / self.acknowledged if self.acknowledged else 0.0

    def summary(self) -> str:
        return (
            f"acknowledged {self.acknowledged}, lost {len(self.lost)} "
            f"({self.lost_share:.1%}), duplicated {len(self.duplicated)}, "
            f"inconsistent offsets {len(self.inconsistent_offsets)}, "
            f"unexpected {len(self.unexpected)}"
        )


def check(history: ProduceHistory, final_read: Iterable[tuple[int, str]]) -> CheckResult:
    """Judge ``history`` against ``final_read``, the ``(offset, value)`` pairs of the
    final log of the partition, in offset order."""
    read = list(final_read)
    counts = Counter(value for _, value in read)
    offsets: dict[str, list[int]] = {}
    for offset, value in read:
        offsets.setdefault(value, []).append(offset)
    lost = sorted(v for v in history.acknowledged if v not in counts)
    # A duplicated value that is also where it was acknowledged counts as duplicated
    # only; an inconsistent offset is one that is nowhere near its acknowledgement.
    inconsistent = sorted(
        (v, at, offsets[v][0])
        for v, at in history.acknowledged.items()
        if v in offsets and at not in offsets[v]
    )
    return CheckResult(
        acknowledged=len(history.acknowledged),
        lost=tuple(lost),
        duplicated=tuple(sorted(v for v, n in counts.items() if n > 1)),
        inconsistent_offsets=tuple(inconsistent),
        unexpected=tuple(sorted(v for v in counts if v not in history.attempted)),
    )
