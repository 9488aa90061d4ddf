"""What a verify run shows: the terminal summary, the anomaly examples file, and the
series the timeline is drawn from. Pure: the runner writes and draws them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from odradek.verify.checker import Verdict
from odradek.verify.history import INVOKE, NEMESIS, OK, Op
from odradek.verify.nemesis import Fault


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


def summary_table(
    verdict: Verdict,
    scenario: str,
    seed: int,
    unsafe: bool,
    recorded: RecordedLoss | None = None,
    duplicate_causes: Mapping[str, int] | None = None,
) -> str:
    a = verdict.availability
    causes = "".join(
        f"; {count}: {cause}" for cause, count in sorted((duplicate_causes or {}).items())
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
        ("unseen (not an anomaly)", str(len(verdict.unseen))),
        (
            "final read",
            f"{verdict.final_read} records"
            + ("" if verdict.final_read_complete else " (INCOMPLETE)"),
        ),
        ("produce failed / no answer", f"{a.failed} ({a.failed_share:.1%})"),
        ("longest window without ack", f"{a.longest_gap_s:.1f} s (from {a.gap_start_s:.1f} s)"),
        ("cluster's own record", recorded.describe() if recorded else "not read"),
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
    }
    for name, found in verdict.anomalies.items():
        lines.append(f"# {name}: {len(found)} ({explain[name]})")
        lines += [str(e) for e in found]
        lines.append("")
    lines.append(f"# unseen: {len(verdict.unseen)} (acknowledged, never polled by the group)")
    lines += [str(v) for v in verdict.unseen]
    return "\n".join(lines) + "\n"
