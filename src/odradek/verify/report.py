"""What a verify run shows: the terminal summary, the anomaly examples file, and the
series the timeline is drawn from. Pure: the runner writes and draws them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from odradek.verify.checker import Verdict
from odradek.verify.history import FAIL, INVOKE, NEMESIS, OK, Op
from odradek.verify.metadata_log import MetadataSummary
from odradek.verify.nemesis import Fault

TOPIC = "verify"
"""The workload's topic, whose ISR shrinks and leader changes the summary shows."""


@dataclass(frozen=True, slots=True)
class Completion:
    """One produce attempt: when it was sent, how long it took, how it ended."""

    time: float
    latency: float
    type: str  # ok, fail or info


def completions(ops: Iterable[Op]) -> list[Completion]:
    started: dict[tuple[str, str], float] = {}
    out: list[Completion] = []
    for op in ops:
        if op.f != "send":
            continue
        key = (op.process, str(op.value))
        if op.type == INVOKE:
            started[key] = op.time
        elif key in started:
            at = started.pop(key)
            out.append(Completion(at, op.time - at, op.type))
    return out


def fault_windows(ops: Iterable[Op]) -> list[tuple[float, float, str]]:
    """``(start, end, description)`` of every fault the nemesis carried out."""
    begun: dict[str, tuple[float, str]] = {}
    windows: list[tuple[float, float, str]] = []
    for op in ops:
        if op.process != NEMESIS:
            continue
        key = f"{op.f}#{op.value}"
        if op.type == INVOKE:
            begun[key] = (op.time, str(op.value))
        elif op.type == OK and key in begun:
            at, text = begun.pop(key)
            windows.append((at, op.time, text))
    windows += [(at, float("inf"), text) for at, text in begun.values()]
    return windows


@dataclass(frozen=True, slots=True)
class RecordedLoss:
    """The cluster's own account of what it gave up (``odradek cluster health``): its
    unclean elections and the records the returning replicas reported dropping, set
    beside what the checker counts from the clients' side."""

    unclean_elections: int
    dropped: int
    acknowledged_at_least: int
    unreported: int  # elections no returning replica has reported on

    def to_json(self) -> dict[str, int]:
        return {
            "unclean_elections": self.unclean_elections,
            "dropped_records": self.dropped,
            "acknowledged_dropped_at_least": self.acknowledged_at_least,
            "elections_without_report": self.unreported,
        }

    def describe(self) -> str:
        if not self.unclean_elections:
            return "no unclean election"
        text = (
            f"{self.unclean_elections} unclean election(s), {self.dropped} records dropped "
            f"(at least {self.acknowledged_at_least} acknowledged)"
        )
        return text + (f", {self.unreported} without a report" if self.unreported else "")


RECOVERY_FUNCTIONS = ("healthy", "rejoin")


@dataclass(frozen=True, slots=True)
class Recovery:
    """A recovery the runner watched for: a node back in every ISR after its disk was
    repaired (``rejoin``), or the whole cluster healthy again after the heal
    (``healthy``)."""

    process: str
    what: str
    after_s: float | None
    """Seconds it took; None when it did not happen within the wait."""

    def to_json(self) -> dict[str, Any]:
        return {"process": self.process, "what": self.what, "after_s": self.after_s}

    def describe(self) -> str:
        if self.after_s is None:
            return f"{self.process}: NOT {self.what} within the wait"
        return f"{self.process}: {self.what}: {self.after_s:.1f} s"


def recoveries(ops: Iterable[Op]) -> tuple[Recovery, ...]:
    """Every watched recovery of the history, in order (``ok``: it happened, with
    ``value`` ``{"what": ..., "after_s": ...}``; ``fail``: not within the wait)."""
    found = []
    for op in ops:
        if op.f in RECOVERY_FUNCTIONS and op.type in (OK, FAIL) and isinstance(op.value, dict):
            after = op.value.get("after_s") if op.type == OK else None
            found.append(Recovery(op.process, str(op.value.get("what")), after))
    return tuple(found)


@dataclass(frozen=True, slots=True)
class Aftermath:
    """What the run learnt from the cluster itself after the final read."""

    recorded: RecordedLoss | None = None
    duplicate_causes: Counter[str] = field(default_factory=Counter)
    metadata: MetadataSummary | None = None
    """The metadata log's account of fencings, ISR shrinks and leader changes."""
    recoveries: tuple[Recovery, ...] = ()
    """How the cluster recovered (:func:`recoveries`)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster_record": self.recorded.to_json() if self.recorded is not None else None,
            "duplicate_causes": dict(self.duplicate_causes),
            "recoveries": [r.to_json() for r in self.recoveries],
            "cluster_metadata": self.metadata.to_json() if self.metadata is not None else None,
        }


def summary_table(
    verdict: Verdict, scenario: str, seed: int, unsafe: bool, aftermath: Aftermath | None = None
) -> str:
    a = verdict.availability
    after = aftermath or Aftermath()
    recorded = after.recorded
    causes = "".join(
        f"; {count}: {cause}" for cause, count in sorted(after.duplicate_causes.items())
    )
    rows = [
        ("scenario", f"{scenario} seed {seed}" + (" --unsafe" if unsafe else "")),
        ("produce attempts", str(verdict.attempted)),
        ("acknowledged", str(verdict.acknowledged)),
        ("lost", f"{len(verdict.lost)} ({verdict.lost_share:.2%} of acknowledged)"),
        (
            "duplicated",
            str(len(verdict.duplicated))
            + ("" if verdict.idempotent else " (non-idempotent writers: not an anomaly)")
            + causes,
        ),
        ("inconsistent offsets", str(len(verdict.inconsistent_offsets))),
        ("unexpected", str(len(verdict.unexpected))),
        ("non-monotonic polls", str(len(verdict.nonmonotonic))),
        ("skipping polls", str(len(verdict.skipped))),
        ("aborted reads", str(len(verdict.aborted_reads))),
        ("unexpected node exits", str(len(verdict.unexpected_exits))),
        ("nodes stopped by their fault", str(len(verdict.expected_exits))),
        ("unseen (not an anomaly)", str(len(verdict.unseen))),
        *(
            [("compacted (not an anomaly)", f"{len(verdict.compacted)} superseded values removed")]
            if verdict.keyed
            else []
        ),
        (
            "final read",
            f"{verdict.final_read} records"
            + ("" if verdict.final_read_complete else " (INCOMPLETE)"),
        ),
        ("produce failed / no answer", f"{a.failed} ({a.failed_share:.1%})"),
        ("longest window without ack", f"{a.longest_gap_s:.1f} s (from {a.gap_start_s:.1f} s)"),
        ("cluster's own record", recorded.describe() if recorded else "not read"),
        *(("recovery", r.describe()) for r in after.recoveries),
        (
            "metadata log",
            after.metadata.describe(TOPIC) if after.metadata is not None else "not read",
        ),
        ("valid", "yes" if verdict.valid else "NO"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k.ljust(width)}  {v}" for k, v in rows)


def anomalies_text(
    verdict: Verdict, faults: Iterable[Fault], carried_out: Iterable[tuple[float, float, str]]
) -> str:
    """Every anomaly with all its examples, and the faults of the run (as planned, and as
    carried out with their targets and times), for the report."""
    lines = ["# Faults planned", *(f.describe() for f in faults), ""]
    lines += ["# Faults carried out (start s, end s, what)"]
    lines += [f"{start:.2f} {end:.2f} {text}" for start, end, text in carried_out]
    lines.append("")
    explain = {
        "lost": "acknowledged values missing from the final read",
        "duplicated": "values present more than once in the final read",
        "inconsistent_offsets": "(value, acknowledged offset, offset in the final read)",
        "unexpected": "values in the final read that nobody sent",
        "nonmonotonic": "(consumer, partition, previous offset, offset) going back",
        "skipped": "(consumer, partition, previous offset, offset) jumping over records",
        "aborted_reads": "values a consumer received that the final read does not hold",
        "unexpected_exits": "node processes that ended by themselves where no fault stops them",
    }
    for name, found in verdict.anomalies.items():
        lines.append(f"# {name}: {len(found)} ({explain[name]})")
        lines += [str(e) for e in found]
        lines.append("")
    lines.append(f"# expected exits: {len(verdict.expected_exits)} (nodes stopped by their fault)")
    lines += list(verdict.expected_exits)
    lines.append("")
    lines.append(f"# unseen: {len(verdict.unseen)} (acknowledged, never polled by the group)")
    lines += [str(v) for v in verdict.unseen]
    return "\n".join(lines) + "\n"
