"""A Hypothesis state machine: the log against a list of batches, with crashes.

Random appends, reads, flushes, truncations, DeleteRecords and segment rolls, and
power losses at any moment, including in the middle of an operation. After every step
and every recovery: everything flushed is there byte for byte, nothing else is there
but a prefix of what was written (never a corrupt or reordered batch), offsets are
dense and increasing, and reads return whole batches from the one holding the offset.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from odradek.protocol.record_batch import (
    validate_batches,
)
from odradek.storage.log import LogConfig, PartitionLog
from odradek.storage.segment import SegmentCache
from odradek.testing.sim_disk import PowerLoss, SimDisk
from tests.storage.helpers import DIR, batch

CONFIG = LogConfig(
    segment_bytes=700,
    index_interval_bytes=150,
    retention_ms=-1,
    retention_bytes=-1,
    quarantine_max_bytes=10**9,
)

Batches = list[tuple[int, bytes]]
FRACTION = st.floats(0, 1)


def stored(log: PartitionLog) -> Batches:
    out: Batches = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        found = log.read(offset, 1 << 20)
        assert found is not None, f"no data at {offset} below the log end {log.log_end_offset}"
        data = found.read()
        for h in validate_batches(data):
            out.append((h.base_offset, bytes(data[h.position : h.end])))
            offset = h.next_offset
    return out


def next_offset(batches: Batches, start: int) -> int:
    if not batches:
        return start
    _base, data = batches[-1]
    return validate_batches(data)[0].next_offset


class LogMachine(RuleBasedStateMachine):
    validate_all = True
    """How recovery opens the log: every batch (the metadata log), or from the recovery
    point on with the rest left to the scrub (a log dir's partitions, ADR 0016)."""

    def __init__(self) -> None:
        super().__init__()
        self.rng = random.Random(0)
        self.disk = SimDisk(self.rng)
        self.disk.makedirs("data")
        self.disk.fsync_dir("")
        self.now = 0
        # The trusting machine keeps at most two older segments open, so that reads,
        # the scrub and recovery all meet segments the cache has let go of.
        self.cache = None if self.validate_all else SegmentCache(capacity=2)
        self.log = PartitionLog.create(self.disk, DIR, CONFIG, self.now, cache=self.cache)
        self.batches: Batches = []
        self.flushed = 0
        self.log_start = 0
        self.epoch = 0
        self.tag = 0

    @property
    def end(self) -> int:
        return next_offset(self.batches, self.log_start)

    def visible(self, batches: Batches) -> Batches:
        return [(b, d) for b, d in batches if validate_batches(d)[0].next_offset > self.log_start]

    @rule(seed=st.integers(0, 2**32 - 1))
    def reseed(self, seed: int) -> None:
        self.rng.seed(seed)

    @rule(records=st.integers(1, 6), value_size=st.integers(1, 200))
    def append(self, records: int, value_size: int) -> None:
        self.tag += 1
        self.now += 1
        data = batch(records, value_size, timestamp=self.now, tag=self.tag)
        info = self.log.append_as_leader(memoryview(data), self.epoch, self.now)
        assert info.first_offset == self.end
        self.batches.append((info.first_offset, bytes(data)))

    @rule()
    def new_epoch(self) -> None:
        self.epoch += 1

    @rule()
    def flush(self) -> None:
        assert self.log.flush(self.now) == self.end
        self.flushed = self.end

    def pick(self, fraction: float, low: int, high: int) -> int:
        """An offset in ``[low, high]``; rules draw a fraction so any driver can call them."""
        return low + round(fraction * (high - low))

    @rule(fraction=FRACTION, max_bytes=st.integers(1, 2000))
    def read(self, fraction: float, max_bytes: int) -> None:
        offset = self.pick(fraction, self.log_start, self.end)
        found = self.log.read(offset, max_bytes)
        if offset == self.end:
            assert found is None
            return
        assert found is not None
        got = found.read()
        headers = validate_batches(got)
        expected = [d for b, d in self.batches if validate_batches(d)[0].next_offset > offset]
        assert headers[0].base_offset <= offset < headers[0].next_offset
        assert got == b"".join(expected[: len(headers)])
        assert len(headers) == 1 or len(got) <= max_bytes

    @precondition(lambda self: self.batches)
    @rule(fraction=FRACTION)
    def truncate(self, fraction: float) -> None:
        offset = self.pick(fraction, self.log_start, self.end)
        self.log.truncate_to(offset, self.now, "test")
        if offset >= self.end:
            return  # nothing to cut: a no-op that flushes nothing
        kept = [(b, d) for b, d in self.batches if validate_batches(d)[0].last_offset < offset]
        cut = self.batches[len(kept)][0]  # whole batches go: the end is where one began
        self.batches = kept
        self.log_start = min(self.log_start, cut)
        self.flushed = self.end  # a truncation leaves the log flushed

    @rule(fraction=FRACTION)
    def delete_records(self, fraction: float) -> None:
        offset = self.pick(fraction, self.log_start, max(self.flushed, self.log_start))
        # The log start is checkpointed by the log dir; here the model keeps it.
        assert self.log.delete_records_before(offset) == max(offset, self.log_start)
        self.log_start = max(offset, self.log_start)
        self.log.delete_old_segments(self.now, self.flushed)

    def recover(self, candidates: Batches, durable: int) -> None:
        self.log = PartitionLog.open(
            self.disk,
            DIR,
            CONFIG,
            self.now,
            recovery_point=self.flushed,
            log_start_offset=self.log_start,
            validate_all=self.validate_all,
            cache=self.cache,
        )
        assert self.log.offline is None, self.log.offline
        got = stored(self.log)
        want = self.visible(candidates)
        assert got == want[: len(got)], "recovered batches are not a prefix of those written"
        assert self.log.log_end_offset >= durable, "flushed data was lost"
        end = self.log.log_end_offset
        self.batches = [(b, d) for b, d in candidates if validate_batches(d)[0].last_offset < end]
        self.log_start = self.log.log_start_offset
        self.flushed = self.log.log_end_offset
        # Later epochs than any survivor stay valid; a fresh one keeps the model simple.
        self.epoch = max(self.epoch, self.log.epochs.latest_epoch()) + 1

    @rule()
    def crash(self) -> None:
        self.log.close()
        self.disk.crash()
        self.recover(self.batches, self.flushed)

    @rule(
        after=st.integers(1, 12),
        op=st.sampled_from(["append", "flush", "truncate"]),
        records=st.integers(1, 4),
        fraction=FRACTION,
    )
    def power_loss_during(self, after: int, op: str, records: int, fraction: float) -> None:
        """Cut the power at the n-th disk mutation inside an operation."""
        candidates = list(self.batches)
        durable = self.flushed
        new = bytearray()
        self.disk.schedule_power_loss(after)
        try:
            if op == "append":
                self.tag += 1
                self.now += 1
                new = batch(records, 50, timestamp=self.now, tag=self.tag)
                first = self.end
                candidates.append((first, b""))
                self.log.append_as_leader(memoryview(new), self.epoch, self.now)
                self.log.flush(self.now)
                durable = -1  # the new end, known once the batch's bytes are final
            elif op == "flush":
                self.log.flush(self.now)
                durable = self.end
            else:
                offset = self.pick(fraction, self.log_start, self.end)
                # Until the cut is durable either version may survive: both are prefixes
                # of the log before it, which must keep everything flushed below the cut.
                durable = min(durable, offset)
                self.log.truncate_to(offset, self.now, "test")
        except PowerLoss:
            pass
        else:
            self.disk.crash()  # the power loss did not come in time: cut it now
        if op == "append":
            # Offsets and epoch are patched into ``new`` before anything reaches the disk.
            candidates[-1] = (candidates[-1][0], bytes(new))
            if durable == -1:
                durable = next_offset(candidates, self.log_start)
        self.recover(candidates, durable)

    @invariant()
    def matches_the_model(self) -> None:
        assert self.log.log_end_offset == self.end
        self.log.check_consistency()
        assert stored(self.log) == self.visible(self.batches)


class TrustingLogMachine(LogMachine):
    """The same histories, the log opened as a log dir opens its partitions: only the
    batches from the recovery point on are validated at start, the older segments and
    their index files are taken as they are, and the scrub reads the rest in steps
    between the other rules. Reads must be right before the scrub is done, and the
    scrub must find nothing wrong in what a crash left below the recovery point."""

    validate_all = False

    @rule(steps=st.integers(1, 4), chunk=st.integers(1, 400))
    def scrub(self, steps: int, chunk: int) -> None:
        for _ in range(steps):
            task = self.log.next_scrub_task(chunk)
            if task is None:
                break
            self.log.finish_scrub(task, task.run())
            assert self.log.offline is None, self.log.offline


SETTINGS = settings(
    max_examples=200,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestLog = LogMachine.TestCase
TestLog.settings = SETTINGS
TestTrustingLog = TrustingLogMachine.TestCase
TestTrustingLog.settings = SETTINGS


@pytest.mark.parametrize("trusting", [False, True], ids=["validate-all", "scrub"])
@pytest.mark.parametrize("seed", range(40))
def test_long_random_histories(seed: int, trusting: bool) -> None:
    """The same machine driven by a seeded rng for long histories (hundreds of steps).

    Hypothesis explores short, shrinkable histories; these walk far enough to roll many
    segments and crash repeatedly on top of earlier recoveries. A failing seed replays.
    """
    rng = random.Random(seed)
    machine = TrustingLogMachine() if trusting else LogMachine()
    machine.reseed(seed)
    for _ in range(300):
        choice = rng.random()
        if choice < 0.40:
            machine.append(rng.randint(1, 6), rng.randint(1, 200))
        elif choice < 0.55:
            machine.read(rng.random(), rng.randint(1, 2000))
        elif choice < 0.65:
            machine.flush()
        elif choice < 0.70:
            machine.new_epoch()
        elif choice < 0.75 and machine.batches:
            machine.truncate(rng.random() ** 0.2)  # mostly near the end, as followers cut
        elif choice < 0.80:
            machine.delete_records(rng.random() ** 3)
        elif choice < 0.84:
            machine.crash()
        elif choice < 0.88 and isinstance(machine, TrustingLogMachine):
            machine.scrub(rng.randint(1, 4), rng.randint(1, 400))
        else:
            op = rng.choice(["append", "flush", "truncate"])
            machine.power_loss_during(rng.randint(1, 12), op, rng.randint(1, 4), rng.random())
        machine.matches_the_model()
