"""The verdict on a verify run's history, with Jepsen's definitions.

Safety anomalies (any one makes the run invalid): **lost** (acknowledged, not in the
final read), **duplicated** (in the final read twice), **inconsistent offsets**
(acknowledged at one offset, read at another), **unexpected** (read, never sent),
**non-monotonic** and **skipping** polls (a group consumer going back, or jumping over
records, within one assignment), **aborted reads** (a consumer received a value that
the final read does not hold), **unexpected exits** (a node process that ended by
itself where no fault makes it stop: a crash, or a broken invariant). Reported beside
them: **expected exits** (a node that stopped itself as its fault makes it, such as a
full disk), **unseen** (acknowledged, never
received by a group consumer) and availability (the share of produce attempts that
failed or got no answer, the longest window with no acknowledged produce).

The per-partition judge is :mod:`odradek.testing.produce_history`, the same one the
replication simulator uses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from odradek.testing.produce_history import (
    UNKNOWN_OFFSET,
    Availability,
    Poll,
    ProduceHistory,
    availability,
    check,
    check_compacted,
    check_polls,
)
from odradek.verify.history import FAIL, INFO, INVOKE, OK, Op

__all__ = ["Verdict", "final_read_of", "judge"]

EXAMPLES = 10
"""How many examples of each anomaly the summary keeps (the report holds them all)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    attempted: int
    acknowledged: int
    lost: tuple[str, ...]
    duplicated: tuple[str, ...]
    inconsistent_offsets: tuple[tuple[str, int, int], ...]
    unexpected: tuple[str, ...]
    unseen: tuple[str, ...]
    nonmonotonic: tuple[tuple[str, int, int, int], ...]
    skipped: tuple[tuple[str, int, int, int], ...]
    aborted_reads: tuple[str, ...]
    availability: Availability
    final_read: int
    """Records in the final read, every partition."""
    final_read_complete: bool
    """The final read reached every partition's end; without it, nothing can be judged."""
    idempotent: bool = True
    """The writers were idempotent producers. Without idempotence a client may send a
    value twice on its own (librdkafka resends a request that got no answer when the
    leader moves), so a duplicate is then the client's at-least-once, not an anomaly of
    the cluster, and is reported apart."""
    unexpected_exits: tuple[str, ...] = ()
    """Node processes that ended by themselves outside a fault that stops them."""
    expected_exits: tuple[str, ...] = ()
    """Node processes that stopped themselves as their fault makes them (a full disk)."""
    keyed: bool = False
    """The keyed workload on a compacted topic (``--workload keyed``)."""
    compacted: tuple[str, ...] = ()
    """Acknowledged values the final read no longer holds because a later value of
    their key is there: what compaction may remove. Not an anomaly."""

    @property
    def anomalies(self) -> dict[str, tuple[Any, ...]]:
        """Every safety anomaly by name, with all its examples."""
        return {
            "lost": self.lost,
            "duplicated": self.duplicated if self.idempotent else (),
            "inconsistent_offsets": self.inconsistent_offsets,
            "unexpected": self.unexpected,
            "nonmonotonic": self.nonmonotonic,
            "skipped": self.skipped,
            "aborted_reads": self.aborted_reads,
            "unexpected_exits": self.unexpected_exits,
        }

    @property
    def valid(self) -> bool:
        return self.final_read_complete and not any(self.anomalies.values())

    @property
    def conclusive(self) -> bool:
        """Something was acknowledged and read back: a run that acknowledged nothing
        cannot lose anything, and proves nothing either."""
        return self.final_read_complete and self.acknowledged > 0

    @property
    def lost_share(self) -> float:
        return len(self.lost) / self.acknowledged if self.acknowledged else 0.0

    def to_json(self) -> dict[str, Any]:
        counts: dict[str, Any] = {name: len(found) for name, found in self.anomalies.items()}
        counts["duplicated"] = len(self.duplicated)
        return {
            "valid": self.valid,
            "conclusive": self.conclusive,
            "attempted": self.attempted,
            "acknowledged": self.acknowledged,
            **counts,
            "lost_share": self.lost_share,
            "unseen": len(self.unseen),
            "expected_exits": len(self.expected_exits),
            "final_read": self.final_read,
            "final_read_complete": self.final_read_complete,
            "idempotent_producers": self.idempotent,
            "keyed": self.keyed,
            "compacted": len(self.compacted),
            "produce_failed": self.availability.failed,
            "produce_failed_share": self.availability.failed_share,
            "longest_unavailable_s": round(self.availability.longest_gap_s, 3),
            "examples": {
                name: [list(e) if isinstance(e, tuple) else e for e in found[:EXAMPLES]]
                for name, found in {
                    **self.anomalies,
                    "duplicated": self.duplicated,
                    "unseen": self.unseen,
                    "expected_exits": self.expected_exits,
                }.items()
                if found
            },
        }


def final_read_of(ops: Iterable[Op]) -> dict[int, list[tuple[int, str]]] | None:
    """The final read's ``partition -> [(offset, value)]``, or None when it did not end."""
    final = None
    for op in ops:
        if op.f == "read" and op.type == OK:
            final = {int(p): [(int(o), str(v)) for o, v in read] for p, read in op.value.items()}
    return final


def judge(ops: Iterable[Op], start_s: float, end_s: float) -> Verdict:
    """Judge a history; ``[start_s, end_s]`` is the span availability is measured over
    (the workload's produce phase)."""
    histories: dict[int, ProduceHistory] = {}
    polls: list[Poll] = []
    ops = list(ops)
    final = final_read_of(ops)
    attempts = failed = 0
    acknowledged_at: list[float] = []
    idempotent = True
    keys: int | None = None
    exits: dict[str, list[str]] = {FAIL: [], INFO: []}
    for op in ops:
        if op.f == "exit" and op.type in exits:
            exits[op.type].append(f"{op.process} at {op.time:.1f} s: {op.value}")
        elif op.f == "config" and isinstance(op.value, dict):
            idempotent = idempotent and bool(op.value.get("idempotent", True))
            if "keys" in op.value:
                keys = int(op.value["keys"])
        elif op.f == "send":
            value = str(op.value)
            assert op.partition is not None, op
            history = histories.setdefault(op.partition, ProduceHistory())
            if op.type == INVOKE:
                history.invoke(value)
                attempts += 1
            elif op.type == OK:
                history.ok(value, UNKNOWN_OFFSET if op.offset is None else op.offset)
                acknowledged_at.append(op.time)
            elif op.type in (FAIL, INFO):
                # Both may be in the log: a failed append can be committed later.
                history.fail(value)
                failed += 1
        elif op.f == "poll" and op.type == OK:
            assert op.records is not None and op.generation is not None, op
            polls += [
                Poll(op.process, op.generation, int(p), int(o), str(v)) for p, o, v in op.records
            ]
    read = final or {}
    lost: list[str] = []
    duplicated: list[str] = []
    inconsistent: list[tuple[str, int, int]] = []
    unexpected: list[str] = []
    compacted: list[str] = []
    for partition, history in sorted(histories.items()):
        if keys is None:
            result = check(history, read.get(partition, []))
        else:
            result, removed = check_compacted(history, read.get(partition, []), key_of(keys))
            compacted += removed
        lost += result.lost
        duplicated += result.duplicated
        inconsistent += result.inconsistent_offsets
        unexpected += result.unexpected
    # A value read from a partition it was not sent to is unexpected there too.
    sent = {v for h in histories.values() for v in h.attempted}
    unexpected += sorted(
        v for p, pairs in read.items() if p not in histories for _, v in pairs if v not in sent
    )
    acked = [v for h in histories.values() for v in h.acknowledged]
    gone = set(compacted)
    seen = check_polls([v for v in acked if v not in gone], polls, read)
    aborted = seen.aborted_reads
    if keys is not None:
        # A value a consumer received and compaction removed since (a later record of
        # its key is in the final read) is no aborted read.
        key = key_of(keys)
        latest: dict[tuple[int, str], int] = {}
        for partition, pairs in read.items():
            for offset, value in pairs:
                slot = (partition, key(value))
                latest[slot] = max(latest.get(slot, -1), offset)
        flagged = set(aborted)
        aborted = tuple(sorted({
            p.value for p in polls
            if p.value in flagged and latest.get((p.partition, key(p.value)), -1) <= p.offset
        }))  # fmt: skip
    return Verdict(
        attempted=attempts,
        acknowledged=len(acked),
        lost=tuple(lost),
        duplicated=tuple(duplicated),
        inconsistent_offsets=tuple(inconsistent),
        unexpected=tuple(unexpected),
        unseen=seen.unseen,
        nonmonotonic=seen.nonmonotonic,
        skipped=seen.skipped,
        aborted_reads=aborted,
        availability=availability(attempts, failed, acknowledged_at, start_s, end_s),
        final_read=sum(len(pairs) for pairs in read.values()),
        final_read_complete=final is not None,
        idempotent=idempotent,
        unexpected_exits=tuple(exits[FAIL]),
        expected_exits=tuple(exits[INFO]),
        keyed=keys is not None,
        compacted=tuple(compacted),
    )


def key_of(keys: int) -> Callable[[str], str]:
    """The keyed workload's key of a value ``N-M``: ``k<M % keys>``."""
    return lambda value: f"k{int(value.rsplit('-', 1)[1]) % keys}"
