"""A Hypothesis state machine: a compacted log against a model of what it must keep.

Random keyed appends and tombstones, flushes, segment rolls (small segments), cleaning
passes, time moving on, and power losses (between steps, or in place of any mutating
operation of a pass) that lose what was not synced. After every step:

* every record the log holds is one that was written, at its offset, with its value;
* every key's last record is there, unless it is a tombstone whose delete horizon had
  passed when a pass ran (``delete.retention.ms`` after the first pass that saw it);
* nothing at or past the highest offset any pass reached is missing;
* the log is dense batch by batch and its segments are contiguous.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from odradek.storage.cleaner.cleaning import CleaningResult
from odradek.storage.cleaner.plan import CleaningPolicy
from odradek.storage.log import PartitionLog
from odradek.testing.sim_disk import PowerLoss, SimDisk
from tests.storage.cleaner.helpers import SMALL, clean, keyed, records_of
from tests.storage.helpers import DIR

RETENTION = 1_000
POLICY = CleaningPolicy(min_cleanable_dirty_ratio=0.0, delete_retention_ms=RETENTION)
KEYS = [b"a", b"b", b"c", b"d"]


class CleanerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.disk = SimDisk(random.Random(0))
        self.disk.makedirs("data")
        self.disk.fsync_dir("")
        self.now = 0
        self.log = PartitionLog.create(self.disk, DIR, SMALL, self.now)
        self.written: dict[int, tuple[bytes, bytes | None]] = {}
        self.first_seen: dict[int, int] = {}
        """Tombstone offset -> the time of the first pass that reached it."""
        self.last_pass_ms = -1
        self.reached = 0
        """The highest offset a pass (maybe interrupted) cleaned up to."""
        self.checkpoint: int | None = None

    # --- Steps ------------------------------------------------------------------------

    @rule(
        records=st.lists(
            st.tuples(st.sampled_from(KEYS), st.booleans(), st.integers(0, 40)),
            min_size=1,
            max_size=6,
        )
    )
    def append(self, records: list[tuple[bytes, bool, int]]) -> None:
        pairs = [(k, None if tomb else b"v%d" % n * 3) for k, tomb, n in records]
        info = self.log.append_as_leader(memoryview(keyed(pairs)), leader_epoch=0, now_ms=self.now)
        for i, (key, value) in enumerate(pairs):
            self.written[info.first_offset + i] = (key, value)

    @rule()
    def flush(self) -> None:
        self.log.flush(self.now)

    @rule(ms=st.integers(0, 1_500))
    def time_passes(self, ms: int) -> None:
        self.now += ms

    def _passed(self, result: CleaningResult | None) -> None:
        if result is None:
            return
        self.checkpoint = result.map_end
        self._reached(result.segments[-1].next_offset if result.segments else 0)

    def _reached(self, end: int) -> None:
        self.reached = max(self.reached, end)
        self.last_pass_ms = self.now
        for offset, (_key, value) in self.written.items():
            if value is None and offset < end:
                self.first_seen.setdefault(offset, self.now)

    @rule(flush_first=st.booleans())
    def clean(self, flush_first: bool) -> None:
        if flush_first:  # the broker flushes on its own schedule; the cleaner waits for it
            self.log.flush(self.now)
        self._passed(clean(self.log, self.now, policy=POLICY, checkpoint=self.checkpoint))

    # Power losses are drawn one time in eight (``chance``), so that logs grow between.
    @rule(at=st.integers(0, 60), chance=st.integers(0, 7))
    def power_loss_while_cleaning(self, at: int, chance: int) -> None:
        if chance:
            return
        # Whatever the pass might have reached counts as reached: it may have committed.
        self._reached(self.log.active.base_offset)
        self.disk.schedule_power_loss(at)
        try:
            clean(self.log, self.now, policy=POLICY, checkpoint=self.checkpoint)
        except PowerLoss:
            self._reopen(crashed=True)
            return
        self.disk.cancel_power_loss()  # the pass took fewer operations: no loss

    @rule(chance=st.integers(0, 7))
    def power_loss(self, chance: int) -> None:
        if chance:
            return
        self.disk.crash()
        self._reopen(crashed=True)

    def _reopen(self, *, crashed: bool) -> None:
        durable = self.log.recovery_point
        self.log = PartitionLog.open(self.disk, DIR, SMALL, self.now, recovery_point=0)
        assert self.log.offline is None
        end = self.log.log_end_offset
        assert end >= durable, (end, durable)  # nothing synced was lost
        self.written = {o: r for o, r in self.written.items() if o < end}
        if self.checkpoint is not None and self.checkpoint > end:
            self.checkpoint = None

    # --- What must hold -----------------------------------------------------------------

    @invariant()
    def holds_what_the_model_requires(self) -> None:
        seen = records_of(self.log)
        for offset, key, value in seen:
            assert self.written.get(offset) == (key, value), offset
        present = {offset for offset, _k, _v in seen}
        last: dict[bytes, int] = {}
        for offset, (key, _value) in sorted(self.written.items()):
            last[key] = offset
            if offset >= self.reached:
                assert offset in present, f"offset {offset} lost, no pass reached it"
        for key, offset in last.items():
            if offset in present:
                continue
            value = self.written[offset][1]
            assert value is None, f"the last value of {key!r} (offset {offset}) is gone"
            seen_at = self.first_seen.get(offset)
            assert seen_at is not None and self.last_pass_ms >= seen_at + RETENTION, (
                f"tombstone at {offset} gone before its delete horizon"
            )
        self.log.check_consistency()


TestCleaner = CleanerMachine.TestCase
TestCleaner.settings = settings(
    max_examples=200,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
