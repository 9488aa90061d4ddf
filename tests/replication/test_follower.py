"""The partition follower's rules: fetch position, truncation by leader epoch, errors.

The truncation cases are Kafka's ``getOffsetTruncationState`` (KIP-101 / KIP-279 /
KIP-320). The KIP-101 scenario shows why a follower never truncates to its own high
watermark: its high watermark lags the leader's, and cutting there drops records the
leader already acknowledged.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.core.errors import InvariantError
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages.fetch_response import EpochEndOffset, PartitionData
from odradek.replication.follower import (
    FollowerAction,
    FollowerFetch,
    FollowerRegistrationAction,
    PartitionFollower,
    truncation_offset,
)
from odradek.replication.leader import PartitionRegistration

ME = 1
BACKOFF_MS = 500


@dataclass
class FakeLog:
    """A log described by its leader-epoch cache (epoch, start offset) and its end,
    answering like ``storage.leader_epoch.LeaderEpochCache``; the shell's actions are
    applied to it by the tests."""

    epochs: list[tuple[int, int]]
    end: int

    @property
    def log_end_offset(self) -> int:
        return self.end

    def latest_epoch(self) -> int:
        return self.epochs[-1][0] if self.epochs else -1

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        if not self.epochs or epoch == -1:
            return -1, -1
        if epoch == self.epochs[-1][0]:
            return epoch, self.end
        higher = [i for i, (e, _) in enumerate(self.epochs) if e > epoch]
        if not higher:
            return -1, -1
        i = higher[0]
        if i == 0:
            return epoch, self.epochs[0][1]
        return self.epochs[i - 1][0], self.epochs[i][1]

    def truncate_to(self, offset: int) -> None:
        self.end = min(self.end, offset)
        self.epochs = [(e, s) for e, s in self.epochs if s < offset]

    def append(self, epoch: int, count: int) -> None:
        if not self.epochs or self.epochs[-1][0] != epoch:
            self.epochs.append((epoch, self.end))
        self.end += count


def registration(
    leader: int = 0, leader_epoch: int = 5, replicas: tuple[int, ...] = (0, 1, 2)
) -> PartitionRegistration:
    return PartitionRegistration(replicas, replicas, leader, leader_epoch, 1)


def make_follower(log: FakeLog, high_watermark: int = 0) -> PartitionFollower:
    return PartitionFollower(
        replica_id=ME,
        registration=registration(),
        log=log,
        high_watermark=high_watermark,
        replica_fetch_backoff_ms=BACKOFF_MS,
    )


def response(
    *,
    error: ErrorCode = ErrorCode.NONE,
    high_watermark: int = 0,
    diverging: tuple[int, int] = (-1, -1),
    log_start_offset: int = -1,
) -> PartitionData:
    return PartitionData(
        error_code=int(error),
        high_watermark=high_watermark,
        log_start_offset=log_start_offset,
        diverging_epoch=EpochEndOffset(epoch=diverging[0], end_offset=diverging[1]),
    )


def fetch(follower: PartitionFollower, now_ms: int = 0) -> FollowerFetch:
    request = follower.next_fetch(now_ms)
    assert request is not None
    return request


# --- Fetching ------------------------------------------------------------------------


def test_the_fetch_names_our_log_end_last_epoch_and_the_current_leader_epoch() -> None:
    follower = make_follower(FakeLog([(2, 0), (4, 7)], end=12))
    assert fetch(follower) == FollowerFetch(
        leader_id=0, current_leader_epoch=5, fetch_offset=12, last_fetched_epoch=4
    )


def test_one_fetch_at_a_time() -> None:
    follower = make_follower(FakeLog([], end=0))
    request = fetch(follower)
    assert follower.next_fetch(0) is None
    decision = follower.on_fetch_response(request, response(), now_ms=1)
    assert decision.action is FollowerAction.APPEND
    assert follower.next_fetch(1) is not None


def test_a_follower_cannot_be_built_for_the_leader() -> None:
    with pytest.raises(InvariantError):
        PartitionFollower(
            replica_id=0, registration=registration(), log=FakeLog([], 0), high_watermark=0
        )


def test_an_answer_to_another_fetch_is_ignored() -> None:
    follower = make_follower(FakeLog([], end=0))
    stale = FollowerFetch(0, 4, 0, -1)
    fetch(follower)
    assert follower.on_fetch_response(stale, response(), 1).action is FollowerAction.IGNORE


# --- High watermark ---------------------------------------------------------------------


def test_high_watermark_is_the_leaders_capped_at_our_log_end() -> None:
    log = FakeLog([(5, 0)], end=0)
    follower = make_follower(log)
    request = fetch(follower)
    assert follower.on_fetch_response(request, response(high_watermark=9), 1).action is (
        FollowerAction.APPEND
    )
    log.append(5, 6)  # the shell appended the response's records
    assert follower.update_high_watermark(9) == 6
    log.append(5, 6)
    assert follower.update_high_watermark(9) == 9


def test_a_lower_leader_high_watermark_does_not_lower_ours() -> None:
    # A new leader reports a lower high watermark until it has heard from its
    # followers; what we saw committed stays committed.
    follower = make_follower(FakeLog([(5, 0)], end=10), high_watermark=8)
    assert follower.update_high_watermark(3) == 8


def test_the_checkpointed_high_watermark_is_capped_at_the_log_end() -> None:
    assert make_follower(FakeLog([(5, 0)], end=4), high_watermark=9).high_watermark == 4


# --- Truncation by leader epoch ------------------------------------------------------------


def test_a_known_epoch_truncates_to_the_smaller_end() -> None:
    log = FakeLog([(1, 0), (3, 10)], end=20)
    # We both know epoch 3; the leader's ends at 15, ours at 20.
    assert truncation_offset(log, 3, 15) == 15
    # Epoch 1 ended at 10 here; the leader has it ending at 12: we hold less.
    assert truncation_offset(log, 1, 12) == 10


def test_an_unknown_epoch_truncates_to_the_end_of_our_largest_smaller_one() -> None:
    log = FakeLog([(1, 0), (3, 10)], end=20)
    # The leader answers epoch 2, which we never had: our epoch 1 ends at 10.
    assert truncation_offset(log, 2, 14) == 10


def test_no_epochs_at_all_truncates_to_the_leaders_end() -> None:
    assert truncation_offset(FakeLog([], end=20), 3, 15) == 15
    assert truncation_offset(FakeLog([], end=10), 3, 15) == 10


def test_a_diverging_epoch_asks_for_a_truncation_and_the_next_fetch_starts_there() -> None:
    log = FakeLog([(1, 0), (3, 10)], end=20)
    follower = make_follower(log, high_watermark=9)
    request = fetch(follower)
    decision = follower.on_fetch_response(request, response(diverging=(1, 12)), 1)
    assert decision.action is FollowerAction.TRUNCATE and decision.offset == 10
    assert not decision.below_high_watermark and decision.high_watermark == 9
    log.truncate_to(decision.offset)
    assert fetch(follower, 2) == FollowerFetch(0, 5, 10, 1)


def test_kip_101_truncation_follows_epochs_not_the_high_watermark() -> None:
    # The follower holds offsets 0..9 of epoch 4 but learned only high watermark 5
    # (the watermark reaches followers one fetch late). The leader of epoch 5 also has
    # 0..9 of epoch 4, and 8 and 9 were acknowledged. Truncating to our high watermark
    # would drop 5..9 here; if the leader then failed, this replica would lead without
    # acknowledged records. The epochs say nothing diverges, so nothing is cut.
    log = FakeLog([(4, 0)], end=10)
    follower = make_follower(log, high_watermark=5)
    request = fetch(follower)
    assert request.fetch_offset == 10 and request.last_fetched_epoch == 4
    decision = follower.on_fetch_response(request, response(high_watermark=10), 1)
    assert decision.action is FollowerAction.APPEND
    assert follower.update_high_watermark(10) == 10


def test_a_truncation_below_the_high_watermark_is_flagged() -> None:
    # Only after an unclean election: the new leader's epoch 3 ended at 6, below what
    # we saw committed. The leader's history wins, and the loss is reported.
    log = FakeLog([(1, 0), (3, 4)], end=12)
    follower = make_follower(log, high_watermark=10)
    request = fetch(follower)
    decision = follower.on_fetch_response(request, response(diverging=(3, 6)), 1)
    assert decision.action is FollowerAction.TRUNCATE and decision.offset == 6
    assert decision.below_high_watermark and follower.high_watermark == 6


def test_a_divergence_that_truncates_nothing_backs_off_instead_of_looping() -> None:
    log = FakeLog([(3, 0)], end=5)
    follower = make_follower(log)
    request = fetch(follower)
    decision = follower.on_fetch_response(request, response(diverging=(3, 9)), 1)
    assert decision.action is FollowerAction.BACKOFF and decision.retry_at_ms == 1 + BACKOFF_MS


def test_an_unused_epoch_at_our_log_end_is_dropped_instead_of_backing_off_forever() -> None:
    # Regression (replication simulator, seed 373): we led epoch 3 from offset 61 and
    # appended nothing, then the leader of epoch 7 (which never saw epoch 3) answered
    # our fetch (61, last epoch 3) with the diverging epoch 1@61. No record is cut, but
    # the cache entry 3@61 must go, or every later fetch names epoch 3 again and gets
    # the same answer: the follower backed off forever and never caught up.
    log = FakeLog([(0, 0), (1, 27), (3, 61)], end=61)
    follower = make_follower(log, high_watermark=61)
    request = fetch(follower)
    assert request.last_fetched_epoch == 3
    decision = follower.on_fetch_response(request, response(diverging=(1, 61)), 1)
    assert decision.action is FollowerAction.TRUNCATE and decision.offset == 61
    assert not decision.below_high_watermark and follower.high_watermark == 61
    log.truncate_to(decision.offset)
    assert fetch(follower, 2) == FollowerFetch(0, 5, 61, 1)


@settings(max_examples=300, deadline=None)
@given(
    starts=st.lists(st.integers(0, 5), min_size=1, max_size=5),
    epochs=st.lists(st.integers(0, 9), min_size=1, max_size=5, unique=True),
    extra=st.integers(0, 5),
    leader_epoch=st.integers(0, 9),
    leader_end=st.integers(0, 40),
)
def test_truncation_never_passes_the_log_end_and_keeps_only_the_leaders_epochs(
    starts: list[int], epochs: list[int], extra: int, leader_epoch: int, leader_end: int
) -> None:
    offsets: list[int] = []
    at = 0
    for gap in starts[: len(epochs)]:
        offsets.append(at)
        at += gap
    entries = list(zip(sorted(epochs)[: len(offsets)], offsets, strict=True))
    # Drop entries whose start repeats (a cache never holds two epochs at one offset).
    cache = [
        entries[i]
        for i in range(len(entries))
        if i + 1 == len(entries) or entries[i + 1][1] != entries[i][1]
    ]
    log = FakeLog(cache, end=at + extra)
    target = truncation_offset(log, leader_epoch, leader_end)
    assert 0 <= target <= log.end
    # Every record kept was written in an epoch not above the leader's answer, and,
    # when we know that epoch, not past where it ended on the leader.
    for epoch, start in cache:
        if epoch > leader_epoch:
            assert target <= start
    local_epoch, local_end = log.end_offset_for_epoch(leader_epoch)
    if local_epoch == leader_epoch:
        assert target == min(local_end, leader_end, log.end)


# --- Errors ------------------------------------------------------------------------------


def test_fenced_leader_epoch_waits_for_metadata() -> None:
    follower = make_follower(FakeLog([], end=0))
    request = fetch(follower)
    decision = follower.on_fetch_response(request, response(error=ErrorCode.FENCED_LEADER_EPOCH), 1)
    assert decision.action is FollowerAction.WAIT_FOR_METADATA and follower.is_fenced
    assert follower.next_fetch(10**9) is None
    assert follower.on_registration(registration(leader=2, leader_epoch=6)) is (
        FollowerRegistrationAction.APPLIED
    )
    assert fetch(follower, 2) == FollowerFetch(2, 6, 0, -1)


@pytest.mark.parametrize(
    "error",
    [ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.CORRUPT_MESSAGE],
)
def test_other_errors_back_off(error: ErrorCode) -> None:
    follower = make_follower(FakeLog([], end=0))
    request = fetch(follower)
    decision = follower.on_fetch_response(request, response(error=error), 100)
    assert decision.action is FollowerAction.BACKOFF and decision.retry_at_ms == 100 + BACKOFF_MS
    assert follower.next_fetch(100 + BACKOFF_MS - 1) is None
    assert follower.next_fetch(100 + BACKOFF_MS) is not None


def test_a_lost_fetch_backs_off() -> None:
    follower = make_follower(FakeLog([], end=0))
    request = fetch(follower)
    assert follower.on_fetch_failed(request, 10).action is FollowerAction.BACKOFF
    assert follower.next_fetch(10) is None


def test_a_partition_an_incremental_answer_left_out_fetches_again_without_a_pause() -> None:
    follower = make_follower(FakeLog([], end=4), high_watermark=4)
    request = fetch(follower)
    assert follower.on_fetch_unchanged(request).action is FollowerAction.FETCH
    assert follower.high_watermark == 4
    again = follower.next_fetch(10)
    assert again == request  # same position, at once: no backoff
    stale = FollowerFetch(
        leader_id=0, current_leader_epoch=4, fetch_offset=4, last_fetched_epoch=-1
    )
    assert follower.on_fetch_unchanged(stale).action is FollowerAction.IGNORE
    assert follower.next_fetch(10) is None  # ``again`` is still in flight


def test_offset_out_of_range_asks_for_the_leaders_offsets() -> None:
    log = FakeLog([(1, 0)], end=5)
    follower = make_follower(log, high_watermark=5)
    request = fetch(follower)
    decision = follower.on_fetch_response(request, response(error=ErrorCode.OFFSET_OUT_OF_RANGE), 1)
    assert decision.action is FollowerAction.LIST_LEADER_OFFSETS
    assert follower.next_fetch(1) is None
    # We were away while the leader deleted old segments: start over at its log start.
    decision = follower.on_leader_offsets(100, 150, 2)
    assert decision.action is FollowerAction.TRUNCATE_FULLY and decision.offset == 100
    assert follower.high_watermark == 100
    log.truncate_to(0)
    log.end = 100
    assert fetch(follower, 3).fetch_offset == 100


def test_offset_out_of_range_with_the_log_start_in_the_response_decides_at_once() -> None:
    follower = make_follower(FakeLog([], end=0))
    request = fetch(follower)
    decision = follower.on_fetch_response(
        request, response(error=ErrorCode.OFFSET_OUT_OF_RANGE, log_start_offset=40), 1
    )
    assert decision.action is FollowerAction.TRUNCATE_FULLY and decision.offset == 40


def test_a_leader_log_shorter_than_ours_truncates_to_its_end_flagged() -> None:
    follower = make_follower(FakeLog([], end=20), high_watermark=18)
    request = fetch(follower)
    follower.on_fetch_response(request, response(error=ErrorCode.OFFSET_OUT_OF_RANGE), 1)
    decision = follower.on_leader_offsets(0, 15, 2)
    assert decision.action is FollowerAction.TRUNCATE and decision.offset == 15
    assert decision.below_high_watermark


def test_leader_offsets_that_contain_ours_just_fetch_again() -> None:
    follower = make_follower(FakeLog([], end=20))
    request = fetch(follower)
    follower.on_fetch_response(request, response(error=ErrorCode.OFFSET_OUT_OF_RANGE), 1)
    assert follower.on_leader_offsets(0, 30, 2).action is FollowerAction.FETCH
    assert follower.next_fetch(2) is not None


def test_failing_to_get_the_leaders_offsets_backs_off() -> None:
    follower = make_follower(FakeLog([], end=20))
    request = fetch(follower)
    follower.on_fetch_response(request, response(error=ErrorCode.OFFSET_OUT_OF_RANGE), 1)
    decision = follower.on_leader_offsets_failed(5)
    assert decision.action is FollowerAction.BACKOFF
    assert follower.next_fetch(5 + BACKOFF_MS) is not None


# --- Registrations ------------------------------------------------------------------------


def test_registrations() -> None:
    follower = make_follower(FakeLog([], end=0))
    assert follower.on_registration(registration(leader_epoch=4)) is (
        FollowerRegistrationAction.STALE
    )
    assert follower.on_registration(registration()) is FollowerRegistrationAction.UNCHANGED
    assert follower.on_registration(registration(leader=ME, leader_epoch=6)) is (
        FollowerRegistrationAction.OBSOLETE
    )
    assert follower.on_registration(registration(leader_epoch=6, replicas=(0, 2, 3))) is (
        FollowerRegistrationAction.OBSOLETE
    )


def test_a_new_leader_epoch_drops_the_old_fetch_and_its_backoff() -> None:
    follower = make_follower(FakeLog([], end=0))
    old = fetch(follower)
    follower.on_registration(registration(leader=2, leader_epoch=6))
    assert follower.on_fetch_response(old, response(), 1).action is FollowerAction.IGNORE
    new = fetch(follower, 1)
    follower.on_fetch_response(new, response(error=ErrorCode.NOT_LEADER_OR_FOLLOWER), 1)
    assert follower.next_fetch(2) is None
    follower.on_registration(registration(leader=0, leader_epoch=7))
    assert fetch(follower, 2) == FollowerFetch(0, 7, 0, -1)


def test_no_leader_means_no_fetch() -> None:
    follower = make_follower(FakeLog([], end=0))
    follower.on_registration(registration(leader=-1, leader_epoch=6))
    assert follower.next_fetch(0) is None
