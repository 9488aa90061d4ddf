"""The leader-epoch cache against Kafka's ``LeaderEpochFileCache``.

A follower truncates to what ``end_offset_for_epoch`` answers (KIP-101, KIP-279), so an
answer that differs from Kafka's by one entry loses or resurrects records. The concrete
cases below are Kafka's own (``LeaderEpochFileCacheTest``); the property test checks
every operation against a model written from Kafka's code.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.core.errors import InvariantError
from odradek.storage.leader_epoch import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    LeaderEpochCache,
)

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def test_undefined_constants_are_kafkas() -> None:
    assert UNDEFINED == (-1, -1)


def test_empty_cache() -> None:
    cache = LeaderEpochCache()
    assert cache.entries() == []
    assert cache.latest_epoch() == UNDEFINED_EPOCH
    assert cache.earliest_epoch() == UNDEFINED_EPOCH
    assert cache.epoch_for_offset(0) == UNDEFINED_EPOCH
    assert cache.end_offset_for_epoch(0, 100) == UNDEFINED
    assert cache.end_offset_for_epoch(UNDEFINED_EPOCH, 100) == UNDEFINED


def test_cache_is_built_from_checkpoint_entries() -> None:
    cache = LeaderEpochCache([(2, 6), (3, 8), (4, 11)])
    assert cache.entries() == [(2, 6), (3, 8), (4, 11)]
    assert cache.earliest_epoch() == 2
    assert cache.latest_epoch() == 4


# --- assign ----------------------------------------------------------------------------


def test_assign_appends_a_later_epoch() -> None:
    cache = LeaderEpochCache()
    assert cache.assign(2, 6)
    assert cache.assign(3, 8)
    assert cache.entries() == [(2, 6), (3, 8)]


@pytest.mark.parametrize("start_offset", [8, 9, 100])
def test_assign_of_the_latest_epoch_is_a_no_op(start_offset: int) -> None:
    # Every batch of the current epoch calls assign; only the first one counts.
    cache = LeaderEpochCache([(2, 6), (3, 8)])
    assert not cache.assign(3, start_offset)
    assert cache.entries() == [(2, 6), (3, 8)]


def test_assign_with_the_same_start_offset_replaces_the_empty_epoch() -> None:
    # Epoch 3 began at 8 but wrote nothing; epoch 4 also begins at 8 and takes its place.
    cache = LeaderEpochCache([(2, 6), (3, 8)])
    assert cache.assign(4, 8)
    assert cache.entries() == [(2, 6), (4, 8)]


def test_assign_with_an_earlier_start_offset_replaces_every_conflicting_entry() -> None:
    # The log was truncated to 7 first; entries starting at or after 7 are stale.
    cache = LeaderEpochCache([(2, 6), (3, 8), (4, 11)])
    assert cache.assign(5, 7)
    assert cache.entries() == [(2, 6), (5, 7)]
    assert cache.assign(6, 0)
    assert cache.entries() == [(6, 0)]


def test_assign_of_an_older_epoch_is_an_invariant_error_and_changes_nothing() -> None:
    cache = LeaderEpochCache([(2, 6), (3, 8)])
    with pytest.raises(InvariantError):
        cache.assign(1, 20)
    assert cache.entries() == [(2, 6), (3, 8)]


@pytest.mark.parametrize(("epoch", "start_offset"), [(-1, 0), (0, -1), (-5, -5)])
def test_assign_of_a_negative_epoch_or_offset_is_an_invariant_error(
    epoch: int, start_offset: int
) -> None:
    cache = LeaderEpochCache([(0, 0)])
    with pytest.raises(InvariantError):
        cache.assign(epoch, start_offset)
    assert cache.entries() == [(0, 0)]


# --- epoch_for_offset ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("offset", "epoch"),
    [(0, -1), (4, -1), (5, 1), (9, 1), (10, 3), (19, 3), (20, 6), (10**12, 6)],
)
def test_epoch_for_offset(offset: int, epoch: int) -> None:
    cache = LeaderEpochCache([(1, 5), (3, 10), (6, 20)])
    assert cache.epoch_for_offset(offset) == epoch


# --- end_offset_for_epoch (OffsetForLeaderEpoch) ----------------------------------------


def test_end_offset_for_undefined_epoch_is_undefined() -> None:
    cache = LeaderEpochCache([(0, 0), (2, 13)])
    assert cache.end_offset_for_epoch(UNDEFINED_EPOCH, 20) == UNDEFINED


def test_end_offset_for_the_latest_epoch_is_the_log_end_offset() -> None:
    cache = LeaderEpochCache([(2, 6), (3, 8), (4, 9)])
    assert cache.end_offset_for_epoch(4, 42) == (4, 42)


def test_end_offset_below_the_earliest_epoch_is_the_first_start_offset() -> None:
    # Kafka answers with the requested epoch itself and the first known start offset.
    cache = LeaderEpochCache([(5, 11), (6, 12), (7, 13)])
    assert cache.end_offset_for_epoch(4, 20) == (4, 11)
    assert cache.end_offset_for_epoch(0, 20) == (0, 11)


def test_end_offset_between_epochs_is_the_floor_epoch_and_the_next_start() -> None:
    cache = LeaderEpochCache([(0, 10), (2, 13), (4, 17)])
    assert cache.end_offset_for_epoch(0, 20) == (0, 13)
    assert cache.end_offset_for_epoch(1, 20) == (0, 13)
    assert cache.end_offset_for_epoch(2, 20) == (2, 17)
    assert cache.end_offset_for_epoch(3, 20) == (2, 17)
    assert cache.end_offset_for_epoch(4, 20) == (4, 20)


def test_end_offset_above_every_known_epoch_is_undefined() -> None:
    cache = LeaderEpochCache([(2, 100)])
    assert cache.end_offset_for_epoch(3, 150) == UNDEFINED
    assert cache.end_offset_for_epoch(2**31 - 1, 150) == UNDEFINED


# --- truncation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("end_offset", "entries", "changed"),
    [
        (12, [(2, 6), (3, 8), (4, 11)], False),  # past the last start: nothing to drop
        (11, [(2, 6), (3, 8)], True),  # on an epoch boundary: that epoch goes
        (9, [(2, 6), (3, 8)], True),
        (8, [(2, 6)], True),
        (6, [], True),
        (0, [], True),
    ],
)
def test_truncate_from_end(end_offset: int, entries: list[tuple[int, int]], changed: bool) -> None:
    cache = LeaderEpochCache([(2, 6), (3, 8), (4, 11)])
    assert cache.truncate_from_end(end_offset) is changed
    assert cache.entries() == entries


@pytest.mark.parametrize(
    ("start_offset", "entries", "changed"),
    [
        (1, [(2, 6), (3, 8), (4, 11)], False),  # before the first epoch: nothing to drop
        (6, [(2, 6), (3, 8), (4, 11)], False),  # exactly the first start offset
        (7, [(2, 7), (3, 8), (4, 11)], True),  # the first epoch now starts at the log start
        (8, [(3, 8), (4, 11)], True),
        (9, [(3, 9), (4, 11)], True),
        (11, [(4, 11)], True),
        (15, [(4, 15)], True),  # the latest epoch always survives
    ],
)
def test_truncate_from_start(
    start_offset: int, entries: list[tuple[int, int]], changed: bool
) -> None:
    cache = LeaderEpochCache([(2, 6), (3, 8), (4, 11)])
    assert cache.truncate_from_start(start_offset) is changed
    assert cache.entries() == entries


def test_truncation_of_an_empty_cache_changes_nothing() -> None:
    cache = LeaderEpochCache()
    assert not cache.truncate_from_end(0)
    assert not cache.truncate_from_start(10)
    assert cache.entries() == []


def test_clear() -> None:
    cache = LeaderEpochCache([(2, 6), (3, 8)])
    cache.clear()
    assert cache.entries() == []
    assert cache.latest_epoch() == UNDEFINED_EPOCH


# --- A model written from Kafka's LeaderEpochFileCache ----------------------------------


class KafkaModel:
    """Kafka's semantics over a plain list, written for clarity rather than speed.

    One difference is deliberate: re-assigning the latest epoch is always a no-op here,
    where Kafka moves that epoch's start offset back if the new one is lower.
    """

    def __init__(self) -> None:
        self.entries: list[tuple[int, int]] = []

    def assign(self, epoch: int, start: int) -> bool:
        if self.entries and epoch == self.entries[-1][0]:
            return False
        # Kafka's maybeTruncateNonMonotonicEntries: drop entries from the end while
        # their epoch or start offset is not below the new one.
        while self.entries and (self.entries[-1][0] >= epoch or self.entries[-1][1] >= start):
            self.entries.pop()
        self.entries.append((epoch, start))
        return True

    def truncate_from_end(self, end: int) -> bool:
        before = list(self.entries)
        self.entries = [e for e in self.entries if e[1] < end]
        return before != self.entries

    def truncate_from_start(self, start: int) -> bool:
        before = list(self.entries)
        removed = [e for e in self.entries if e[1] <= start]
        if removed:
            kept = [e for e in self.entries if e[1] > start]
            self.entries = [(removed[-1][0], start), *kept]
        return before != self.entries

    def epoch_for_offset(self, offset: int) -> int:
        previous = UNDEFINED_EPOCH
        for epoch, start in self.entries:
            if start == offset:
                return epoch
            if start > offset:
                return previous
            previous = epoch
        return previous

    def end_offset_for(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        if requested == UNDEFINED_EPOCH:
            return UNDEFINED
        if self.entries and self.entries[-1][0] == requested:
            return requested, log_end_offset
        higher = [e for e in self.entries if e[0] > requested]
        if not higher:
            return UNDEFINED
        floor = [e for e in self.entries if e[0] <= requested]
        if not floor:
            return requested, higher[0][1]
        return floor[-1][0], higher[0][1]


OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("assign"), st.integers(0, 3), st.integers(0, 60)),
        st.tuples(st.just("truncate_from_end"), st.just(0), st.integers(0, 60)),
        st.tuples(st.just("truncate_from_start"), st.just(0), st.integers(0, 60)),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(OPERATIONS)
def test_cache_matches_kafkas_model(operations: list[tuple[str, int, int]]) -> None:
    cache = LeaderEpochCache()
    model = KafkaModel()
    for name, epoch_step, offset in operations:
        if name == "assign":
            # Only epochs at or above the latest: an older one is an invariant error here.
            epoch = max(cache.latest_epoch(), 0) + epoch_step
            assert cache.assign(epoch, offset) == model.assign(epoch, offset)
        elif name == "truncate_from_end":
            assert cache.truncate_from_end(offset) == model.truncate_from_end(offset)
        else:
            assert cache.truncate_from_start(offset) == model.truncate_from_start(offset)
        assert cache.entries() == model.entries
        epochs = [e for e, _ in model.entries]
        starts = [s for _, s in model.entries]
        assert epochs == sorted(set(epochs))
        assert starts == sorted(set(starts))
    log_end_offset = 100
    for requested in range(-2, cache.latest_epoch() + 3):
        assert cache.end_offset_for_epoch(requested, log_end_offset) == model.end_offset_for(
            requested, log_end_offset
        ), f"epoch {requested} in {model.entries}"
    for offset in range(70):
        assert cache.epoch_for_offset(offset) == model.epoch_for_offset(offset)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(1, 10)), min_size=1, max_size=10),
    st.integers(0, 40),
)
def test_end_offset_lets_a_follower_find_the_divergence_point(
    leader_steps: list[tuple[int, int]], requested_step: int
) -> None:
    """The end offset of an epoch is where the next epoch began: never inside an epoch.

    For any epoch the follower asks about, the answer's end offset is either the log end
    or the start offset of an epoch above the answered one, and the answered epoch is
    the largest known epoch not above the requested one.
    """
    cache = LeaderEpochCache()
    epoch, start = 0, 0
    for epoch_step, length in leader_steps:
        epoch += epoch_step + 1
        cache.assign(epoch, start)
        start += length
    log_end_offset = start
    requested = requested_step % (cache.latest_epoch() + 2)
    answer_epoch, end_offset = cache.end_offset_for_epoch(requested, log_end_offset)
    entries = cache.entries()
    if requested > cache.latest_epoch():
        assert (answer_epoch, end_offset) == UNDEFINED
        return
    if requested < entries[0][0]:
        assert (answer_epoch, end_offset) == (requested, entries[0][1])
        return
    assert answer_epoch == max(e for e, _ in entries if e <= requested)
    later_starts = [s for e, s in entries if e > answer_epoch]
    assert end_offset == (later_starts[0] if later_starts else log_end_offset)
