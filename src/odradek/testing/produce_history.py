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

What group consumers received is judged by :func:`check_polls` (unseen, non-monotonic
and skipping polls, aborted reads) and availability by :func:`availability`.

Pure and independent of how the history was made, so that the simulator and a run on
real processes (``odradek verify``) use the same judge.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import pairwise

__all__ = [
    "UNKNOWN_OFFSET",
    "Availability",
    "CheckResult",
    "Poll",
    "PollCheck",
    "ProduceHistory",
    "availability",
    "check",
    "check_polls",
]


UNKNOWN_OFFSET = -1
"""The offset of a produce acknowledged without one: librdkafka acknowledges an
idempotent producer's batch implicitly when a later batch of the same producer is
acknowledged and the batch's own answer was lost. It must be in the final read all the
same; only its offset cannot be compared."""


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
        if v in offsets and at != UNKNOWN_OFFSET and at not in offsets[v]
    )
    return CheckResult(
        acknowledged=len(history.acknowledged),
        lost=tuple(lost),
        duplicated=tuple(sorted(v for v, n in counts.items() if n > 1)),
        inconsistent_offsets=tuple(inconsistent),
        unexpected=tuple(sorted(v for v in counts if v not in history.attempted)),
    )


def check_compacted(
    history: ProduceHistory,
    final_read: Iterable[tuple[int, str]],
    key_of: Callable[[str], str],
) -> tuple[CheckResult, tuple[str, ...]]:
    """Judge a compacted partition: what :func:`check` finds, except that an
    acknowledged value may be gone when the final read holds a later record of its key
    (compaction keeps at least the last value of each key, at its offset). Anything
    else missing is lost: a key whose last read record is older than one of its
    acknowledged values lost that value. Also returns the values compaction removed."""
    read = list(final_read)
    result = check(history, read)
    latest: dict[str, int] = {}
    for offset, value in read:
        key = key_of(value)
        latest[key] = max(latest.get(key, -1), offset)
    newest_acked: dict[str, int] = {}
    for value, at in history.acknowledged.items():
        if at != UNKNOWN_OFFSET:
            newest_acked[key_of(value)] = max(newest_acked.get(key_of(value), -1), at)
    lost: list[str] = []
    removed: list[str] = []
    for value in result.lost:
        at = history.acknowledged[value]
        key = key_of(value)
        # An acknowledgement without its offset is superseded only by a read record at
        # or after the newest acknowledged offset of its key.
        bound = newest_acked.get(key, -1) if at == UNKNOWN_OFFSET else at
        if latest.get(key, -1) > bound or (at == UNKNOWN_OFFSET and latest.get(key, -1) == bound):
            removed.append(value)
        else:
            lost.append(value)
    return dataclasses.replace(result, lost=tuple(lost)), tuple(removed)


# -- what consumers saw, and availability (used by ``odradek verify``)


@dataclass(frozen=True, slots=True)
class Poll:
    """One record a group consumer received. ``generation`` counts that consumer's
    assignments: offsets are compared only within one assignment, since a consumer
    that is given a partition again starts over from the committed offset."""

    consumer: str
    generation: int
    partition: int
    offset: int
    value: str


@dataclass(frozen=True, slots=True)
class PollCheck:
    unseen: tuple[str, ...]
    """Acknowledged, but never received by a group consumer (consumers may simply lag
    at the end of a run, so this is reported, not an anomaly by itself)."""
    nonmonotonic: tuple[tuple[str, int, int, int], ...]
    """``(consumer, partition, previous offset, offset)``: an offset at or below the one
    received before it in the same assignment."""
    skipped: tuple[tuple[str, int, int, int], ...]
    """``(consumer, partition, previous offset, offset)``: a jump over offsets that the
    final read holds, within one assignment."""
    aborted_reads: tuple[str, ...]
    """Values a consumer received that the final read does not hold: a read of data
    that was later undone (uncommitted, or truncated away)."""


def check_polls(
    acknowledged: Iterable[str],
    polls: Iterable[Poll],
    final_read: dict[int, list[tuple[int, str]]],
) -> PollCheck:
    """Judge what group consumers received against the final read of every partition."""
    final_offsets = {p: {offset for offset, _ in read} for p, read in final_read.items()}
    final_values = {value for read in final_read.values() for _, value in read}
    seen: set[str] = set()
    last: dict[tuple[str, int, int], int] = {}
    nonmonotonic: list[tuple[str, int, int, int]] = []
    skipped: list[tuple[str, int, int, int]] = []
    aborted: list[str] = []
    for poll in polls:
        seen.add(poll.value)
        if poll.value not in final_values:
            aborted.append(poll.value)
        key = (poll.consumer, poll.generation, poll.partition)
        previous = last.get(key)
        last[key] = poll.offset
        if previous is None:
            continue
        if poll.offset <= previous:
            nonmonotonic.append((poll.consumer, poll.partition, previous, poll.offset))
        elif any(
            o in final_offsets.get(poll.partition, ()) for o in range(previous + 1, poll.offset)
        ):
            skipped.append((poll.consumer, poll.partition, previous, poll.offset))
    return PollCheck(
        unseen=tuple(sorted(v for v in acknowledged if v not in seen)),
        nonmonotonic=tuple(nonmonotonic),
        skipped=tuple(skipped),
        aborted_reads=tuple(sorted(set(aborted))),
    )


@dataclass(frozen=True, slots=True)
class Availability:
    attempts: int
    failed: int
    """Attempts answered with an error or with no answer in time (fail and info)."""
    longest_gap_s: float
    """The longest window, within the run, in which no produce was acknowledged."""
    gap_start_s: float

    @property
    def failed_share(self) -> float:
        return self.failed / self.attempts if self.attempts else 0.0


def availability(
    attempts: int, failed: int, acknowledged_at: Iterable[float], start_s: float, end_s: float
) -> Availability:
    """Availability of produce over ``[start_s, end_s]`` from the times of the
    acknowledgements."""
    times = [start_s, *sorted(t for t in acknowledged_at if start_s <= t <= end_s), end_s]
    gap, at = max(((b - a, a) for a, b in pairwise(times)), default=(0.0, 0.0))
    return Availability(attempts, failed, gap, at)
