"""The partition leader's rules, one by one, then under random interleavings.

The rules are Kafka's (``Partition``, ``Replica``: caught-up time, maximal ISR, ISR
shrink and expansion, acks=all) plus KIP-966's "no high watermark under min ISR". The
property test drives a leader, a model controller (the partition epoch as a
compare-and-set version, answers that get lost) and followers that fetch at random,
and checks after every step what the Jepsen analysis of Kafka 0.8 is about: nothing is
acknowledged that fewer than ``min.insync.replicas`` replicas, or any ISR member, lack.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from odradek.core.errors import InvariantError
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages.alter_partition_response import PartitionData
from odradek.replication.leader import (
    AlterPartitionAction,
    IsrProposal,
    PartitionLeader,
    PartitionRegistration,
    RegistrationAction,
    diverging_epoch,
)

LAG_MS = 30_000
LEADER = 0


def registration(
    isr: tuple[int, ...] = (0, 1, 2),
    *,
    replicas: tuple[int, ...] = (0, 1, 2),
    leader: int = LEADER,
    leader_epoch: int = 5,
    partition_epoch: int = 10,
) -> PartitionRegistration:
    return PartitionRegistration(replicas, isr, leader, leader_epoch, partition_epoch)


def make_leader(
    isr: tuple[int, ...] = (0, 1, 2),
    *,
    replicas: tuple[int, ...] = (0, 1, 2),
    log_end_offset: int = 0,
    durable_end_offset: int | None = None,
    high_watermark: int = 0,
    min_insync_replicas: int = 2,
    now_ms: int = 0,
    flush_before_ack: bool = True,
) -> PartitionLeader:
    return PartitionLeader(
        replica_id=LEADER,
        registration=registration(isr, replicas=replicas),
        log_end_offset=log_end_offset,
        durable_end_offset=log_end_offset if durable_end_offset is None else durable_end_offset,
        high_watermark=high_watermark,
        min_insync_replicas=min_insync_replicas,
        replica_lag_time_max_ms=LAG_MS,
        now_ms=now_ms,
        flush_before_ack=flush_before_ack,
    )


def answer(
    proposal: IsrProposal,
    *,
    error: ErrorCode = ErrorCode.NONE,
    leader_epoch: int | None = None,
    partition_epoch: int | None = None,
) -> PartitionData:
    return PartitionData(
        error_code=int(error),
        leader_id=LEADER,
        leader_epoch=proposal.leader_epoch if leader_epoch is None else leader_epoch,
        isr=list(proposal.new_isr),
        partition_epoch=proposal.partition_epoch + 1
        if partition_epoch is None
        else partition_epoch,
    )


def append_and_flush(leader: PartitionLeader, end: int) -> None:
    leader.on_append(end)
    leader.on_flush(end)


# --- Construction ---------------------------------------------------------------------


def test_a_new_leader_keeps_the_checkpointed_high_watermark_clamped_to_its_log() -> None:
    assert make_leader(log_end_offset=10, high_watermark=7).high_watermark == 7
    assert make_leader(log_end_offset=10, high_watermark=12).high_watermark == 10


def test_an_uncleanly_elected_leader_commits_its_durable_log_at_once() -> None:
    """After an unclean election (the operator's choice) the new leader's log is the
    partition's history: readable at once, even alone below min.insync.replicas; what
    it has not flushed is not."""
    leader = PartitionLeader(
        replica_id=LEADER,
        registration=PartitionRegistration((0, 1, 2), (LEADER,), LEADER, 6, 11, recovering=True),
        log_end_offset=20,
        durable_end_offset=18,
        high_watermark=3,
        min_insync_replicas=2,
        replica_lag_time_max_ms=LAG_MS,
        now_ms=0,
    )
    assert leader.high_watermark == 18
    # A clean leader alone under min.insync.replicas keeps what it was given.
    assert make_leader((LEADER,), log_end_offset=20, high_watermark=3).high_watermark == 3


def test_follower_positions_are_unknown_until_they_fetch() -> None:
    leader = make_leader(log_end_offset=10, high_watermark=3)
    # Every ISR member must show what it holds before anything more is committed.
    assert leader.high_watermark == 3
    state = leader.follower_state(1)
    assert state is not None and state.log_end_offset == -1


def test_a_leader_must_be_built_for_itself_with_itself_in_the_isr() -> None:
    with pytest.raises(InvariantError):
        PartitionLeader(
            replica_id=1,
            registration=registration(),
            log_end_offset=0,
            durable_end_offset=0,
            high_watermark=0,
            min_insync_replicas=1,
            replica_lag_time_max_ms=LAG_MS,
            now_ms=0,
        )
    with pytest.raises(InvariantError):
        make_leader(isr=(1, 2))


# --- High watermark -------------------------------------------------------------------


def test_high_watermark_is_the_minimum_over_the_isr() -> None:
    leader = make_leader()
    append_and_flush(leader, 10)
    change = leader.on_follower_fetch(1, 6, now_ms=1)
    assert change.error == ErrorCode.NONE and not change.high_watermark_moved
    change = leader.on_follower_fetch(2, 4, now_ms=1)
    assert change.high_watermark_moved and change.high_watermark == 4
    assert leader.on_follower_fetch(2, 8, now_ms=2).high_watermark == 6


def test_replicas_outside_the_isr_do_not_hold_back_the_high_watermark() -> None:
    leader = make_leader(isr=(0, 1), min_insync_replicas=2)
    append_and_flush(leader, 10)
    leader.on_follower_fetch(1, 10, now_ms=1)
    assert leader.high_watermark == 10


def test_high_watermark_never_passes_the_leaders_durable_end() -> None:
    leader = make_leader()
    leader.on_append(10)
    leader.on_follower_fetch(1, 10, now_ms=1)
    leader.on_follower_fetch(2, 10, now_ms=1)
    assert leader.high_watermark == 0
    change = leader.on_flush(7)
    assert change.high_watermark_moved and leader.high_watermark == 7


def test_without_flush_before_ack_the_leader_counts_its_appended_end() -> None:
    leader = make_leader(flush_before_ack=False)
    leader.on_append(10)
    leader.on_follower_fetch(1, 10, now_ms=1)
    leader.on_follower_fetch(2, 9, now_ms=1)
    assert leader.high_watermark == 9


def test_high_watermark_never_decreases() -> None:
    leader = make_leader(isr=(0, 1), min_insync_replicas=1)
    append_and_flush(leader, 10)
    leader.on_follower_fetch(1, 8, now_ms=1)
    assert leader.high_watermark == 8
    # A follower that reports less (it restarted with a shorter log) does not undo a
    # commit; KIP-903's broker epochs keep such a follower out of the ISR.
    leader.on_follower_fetch(1, 3, now_ms=2)
    assert leader.high_watermark == 8


def test_high_watermark_stands_still_under_min_isr() -> None:
    leader = make_leader(isr=(0, 1), min_insync_replicas=3)
    append_and_flush(leader, 10)
    change = leader.on_follower_fetch(1, 10, now_ms=1)
    assert leader.is_under_min_isr
    assert not change.high_watermark_moved and leader.high_watermark == 0


def test_min_isr_is_capped_at_the_replication_factor() -> None:
    leader = make_leader(isr=(0, 1), replicas=(0, 1), min_insync_replicas=3)
    assert leader.effective_min_isr == 2
    append_and_flush(leader, 5)
    assert leader.on_follower_fetch(1, 5, now_ms=1).high_watermark == 5


# --- Follower fetches -----------------------------------------------------------------


def test_a_fetch_from_a_broker_that_is_not_a_replica_is_refused() -> None:
    leader = make_leader()
    change = leader.on_follower_fetch(7, 0, now_ms=1)
    assert change.error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert leader.on_follower_fetch(LEADER, 0, now_ms=1).error == (ErrorCode.NOT_LEADER_OR_FOLLOWER)


def test_a_fetch_offset_past_the_log_end_is_out_of_range_and_does_not_count() -> None:
    leader = make_leader(isr=(0, 1), min_insync_replicas=1)
    append_and_flush(leader, 5)
    change = leader.on_follower_fetch(1, 6, now_ms=1)
    assert change.error == ErrorCode.OFFSET_OUT_OF_RANGE
    assert leader.high_watermark == 0
    state = leader.follower_state(1)
    assert state is not None and state.log_end_offset == -1


def test_a_fetch_at_the_leaders_end_makes_the_follower_caught_up_now() -> None:
    leader = make_leader()
    append_and_flush(leader, 5)
    leader.on_follower_fetch(1, 5, now_ms=100)
    state = leader.follower_state(1)
    assert state is not None and state.last_caught_up_time_ms == 100


def test_a_fetch_up_to_the_previous_fetchs_leader_end_counts_from_that_fetch() -> None:
    # Kafka's second rule: a follower that always trails a busy leader by a little, but
    # reaches where the leader was at its previous fetch, was caught up back then.
    leader = make_leader()
    append_and_flush(leader, 5)
    leader.on_follower_fetch(1, 2, now_ms=100)  # leader at 5 when this fetch arrived
    leader.on_append(9)
    leader.on_follower_fetch(1, 5, now_ms=200)  # behind 9, but reaches 5
    state = leader.follower_state(1)
    assert state is not None and state.last_caught_up_time_ms == 100
    leader.on_append(20)
    leader.on_follower_fetch(1, 6, now_ms=300)  # below 9: no progress in catching up
    state = leader.follower_state(1)
    assert state is not None and state.last_caught_up_time_ms == 100


def test_check_leader_epoch_fences_old_epochs_and_flags_unknown_ones() -> None:
    leader = make_leader()
    assert leader.check_leader_epoch(5) == ErrorCode.NONE
    assert leader.check_leader_epoch(-1) == ErrorCode.NONE
    assert leader.check_leader_epoch(4) == ErrorCode.FENCED_LEADER_EPOCH
    assert leader.check_leader_epoch(6) == ErrorCode.UNKNOWN_LEADER_EPOCH


@dataclass
class EpochsLog:
    """A log described by its leader-epoch cache (epoch, start offset) and its end."""

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


def test_diverging_epoch_names_where_a_fetch_left_the_leaders_history() -> None:
    log = EpochsLog([(1, 0), (3, 10)], end=15)
    assert diverging_epoch(log, 12, 3) is None
    assert diverging_epoch(log, 8, 1) is None
    assert diverging_epoch(log, 0, -1) is None
    # The follower wrote offsets 10.. in epoch 2, which we never had: cut at 10.
    assert diverging_epoch(log, 12, 2) == (1, 10)
    # Epoch 1 ended at 10 here, but the follower has more of it.
    assert diverging_epoch(log, 11, 1) == (1, 10)


# --- acks ------------------------------------------------------------------------------


def test_check_produce_refuses_acks_all_under_min_isr_only() -> None:
    leader = make_leader(isr=(0,), min_insync_replicas=2)
    assert leader.check_produce(-1) == ErrorCode.NOT_ENOUGH_REPLICAS
    assert leader.check_produce(1) == ErrorCode.NONE
    assert leader.check_produce(0) == ErrorCode.NONE
    assert leader.check_produce(2) == ErrorCode.INVALID_REQUIRED_ACKS
    assert make_leader(isr=(0, 1)).check_produce(-1) == ErrorCode.NONE


def test_an_ack_waits_for_the_high_watermark() -> None:
    leader = make_leader()
    append_and_flush(leader, 3)
    assert not leader.ack_outcome(3).done
    leader.on_follower_fetch(1, 3, now_ms=1)
    assert not leader.ack_outcome(3).done
    change = leader.on_follower_fetch(2, 3, now_ms=1)
    assert change.recheck_acks
    outcome = leader.ack_outcome(3)
    assert outcome.done and outcome.error == ErrorCode.NONE


def test_completed_returns_the_waiters_that_are_done() -> None:
    leader = make_leader(isr=(0, 1))
    append_and_flush(leader, 10)
    leader.on_follower_fetch(1, 6, now_ms=1)
    assert leader.completed([("a", 4), ("b", 6), ("c", 7)]) == [
        ("a", ErrorCode.NONE),
        ("b", ErrorCode.NONE),
    ]


def shrink_to_leader(leader: PartitionLeader, now_ms: int) -> None:
    proposal = leader.isr_change(now_ms)
    assert proposal is not None and proposal.new_isr == (LEADER,)
    outcome = leader.on_alter_partition_result(proposal, answer(proposal))
    assert outcome.action is AlterPartitionAction.APPLIED


def test_an_ack_fails_after_append_when_the_isr_shrinks_below_min_isr() -> None:
    leader = make_leader(isr=(0, 1, 2), min_insync_replicas=2)
    append_and_flush(leader, 5)
    assert leader.check_produce(-1) == ErrorCode.NONE
    shrink_to_leader(leader, now_ms=LAG_MS + 1)
    outcome = leader.ack_outcome(5)
    assert outcome.done and outcome.error == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert leader.high_watermark == 0


def test_acks_one_and_zero_never_wait_on_the_isr() -> None:
    leader = make_leader(isr=(0,), min_insync_replicas=3)
    assert leader.check_produce(1) == ErrorCode.NONE
    assert leader.check_produce(0) == ErrorCode.NONE


# --- ISR shrink -------------------------------------------------------------------------


def test_a_follower_that_lags_longer_than_the_lag_time_is_proposed_for_removal() -> None:
    leader = make_leader()
    append_and_flush(leader, 5)
    leader.on_follower_fetch(1, 5, now_ms=1_000)
    assert leader.isr_change(now_ms=LAG_MS) is None  # 2 was caught up at 0: exactly LAG_MS
    proposal = leader.isr_change(now_ms=LAG_MS + 1)
    assert proposal is not None
    assert proposal.new_isr == (0, 1) and proposal.removed == (2,)
    assert (proposal.leader_epoch, proposal.partition_epoch) == (5, 10)


def test_a_follower_at_the_leaders_end_is_never_out_of_sync() -> None:
    leader = make_leader(isr=(0, 1))
    append_and_flush(leader, 5)
    leader.on_follower_fetch(1, 5, now_ms=0)
    # No produce traffic: the follower holds everything even though time passed.
    assert leader.isr_change(now_ms=10 * LAG_MS) is None


def test_a_shrink_never_removes_the_leader_nor_empties_the_isr() -> None:
    leader = make_leader()
    append_and_flush(leader, 5)
    proposal = leader.isr_change(now_ms=10 * LAG_MS)
    assert proposal is not None and proposal.new_isr == (LEADER,)


def test_only_one_alter_partition_is_in_flight() -> None:
    leader = make_leader()
    append_and_flush(leader, 5)
    assert leader.isr_change(now_ms=LAG_MS + 1) is not None
    assert leader.isr_change(now_ms=LAG_MS + 2) is None


def test_a_pending_shrink_still_counts_the_members_being_removed() -> None:
    leader = make_leader(min_insync_replicas=1)
    append_and_flush(leader, 10)
    leader.on_follower_fetch(1, 10, now_ms=LAG_MS)
    proposal = leader.isr_change(now_ms=LAG_MS + 1)
    assert proposal is not None and proposal.removed == (2,)
    assert leader.maximal_isr == {0, 1, 2}
    assert leader.high_watermark == 0  # replica 2 might still be in the ISR
    outcome = leader.on_alter_partition_result(proposal, answer(proposal))
    assert outcome.action is AlterPartitionAction.APPLIED
    assert outcome.change.high_watermark_moved and leader.high_watermark == 10
    assert leader.isr == {0, 1} and leader.partition_epoch == 11


# --- ISR expansion ----------------------------------------------------------------------


def test_a_follower_at_the_high_watermark_is_added() -> None:
    leader = make_leader(isr=(0, 1), min_insync_replicas=1)
    append_and_flush(leader, 10)
    leader.on_follower_fetch(1, 8, now_ms=1)
    leader.on_follower_fetch(2, 7, now_ms=1)
    assert leader.isr_change(now_ms=2) is None  # 7 < high watermark 8
    leader.on_follower_fetch(2, 8, now_ms=3)
    proposal = leader.isr_change(now_ms=4)
    assert proposal is not None and proposal.new_isr == (0, 1, 2) and proposal.added == (2,)


def test_a_follower_below_the_epoch_start_offset_is_not_added() -> None:
    # The follower may hold a divergent tail from an older leader below this epoch's
    # start, so being at the (old) high watermark is not enough (isFollowerInSync).
    leader = make_leader(isr=(0,), log_end_offset=10, high_watermark=4, min_insync_replicas=1)
    assert leader.leader_epoch_start_offset == 10
    leader.on_follower_fetch(1, 6, now_ms=1)
    assert leader.isr_change(now_ms=2) is None
    leader.on_follower_fetch(1, 10, now_ms=3)
    proposal = leader.isr_change(now_ms=4)
    assert proposal is not None and proposal.added == (1,)


def test_a_follower_that_stopped_fetching_is_not_added_back() -> None:
    # Under min.insync.replicas the high watermark stands still, so a follower that
    # stopped fetching at it stays "at the high watermark". Removed for lagging, it must
    # not be added back on the next check only to be removed again (ISR flapping).
    leader = make_leader(isr=(0, 1), min_insync_replicas=2)
    append_and_flush(leader, 5)
    leader.on_follower_fetch(1, 5, now_ms=1)
    leader.on_follower_fetch(2, 5, now_ms=1)
    append_and_flush(leader, 9)  # 1 and 2 stop fetching
    shrink = leader.isr_change(now_ms=LAG_MS + 2)
    assert shrink is not None and shrink.removed == (1,)
    leader.on_alter_partition_result(shrink, answer(shrink))
    assert leader.high_watermark == 5  # ISR {0} is under the minimum: it stands still
    assert leader.isr_change(now_ms=LAG_MS + 3) is None  # 2 is at 5, but lagging
    leader.on_follower_fetch(2, 9, now_ms=LAG_MS + 4)  # fetching again, caught up
    proposal = leader.isr_change(now_ms=LAG_MS + 5)
    assert proposal is not None and proposal.added == (2,)


def test_ineligible_replicas_are_not_added() -> None:
    leader = make_leader(isr=(0,), min_insync_replicas=1)
    leader.on_follower_fetch(1, 0, now_ms=1)
    leader.on_follower_fetch(2, 0, now_ms=1)
    proposal = leader.isr_change(now_ms=2, ineligible_replicas=[1])
    assert proposal is not None and proposal.added == (2,)


def test_a_pending_expansion_counts_the_new_member_at_once() -> None:
    leader = make_leader(isr=(0, 1), min_insync_replicas=1)
    append_and_flush(leader, 4)
    leader.on_follower_fetch(1, 4, now_ms=1)
    leader.on_follower_fetch(2, 4, now_ms=1)
    proposal = leader.isr_change(now_ms=2)
    assert proposal is not None and proposal.added == (2,)
    append_and_flush(leader, 10)
    leader.on_follower_fetch(1, 10, now_ms=3)
    # The controller may already have made 2 an ISR member: it must hold what is committed.
    assert leader.high_watermark == 4
    leader.on_follower_fetch(2, 9, now_ms=3)
    assert leader.high_watermark == 9


def test_shrinks_come_before_expansions() -> None:
    leader = make_leader(isr=(0, 1), min_insync_replicas=1)
    leader.on_follower_fetch(2, 0, now_ms=LAG_MS + 1)
    append_and_flush(leader, 3)
    proposal = leader.isr_change(now_ms=LAG_MS + 1)
    assert proposal is not None and proposal.removed == (1,) and proposal.added == ()


# --- AlterPartition answers ----------------------------------------------------------------


def pending_shrink() -> tuple[PartitionLeader, IsrProposal]:
    leader = make_leader()
    append_and_flush(leader, 5)
    leader.on_follower_fetch(1, 5, now_ms=LAG_MS)
    proposal = leader.isr_change(now_ms=LAG_MS + 1)
    assert proposal is not None
    return leader, proposal


@pytest.mark.parametrize("error", [ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION])
def test_epoch_errors_wait_for_metadata_and_keep_the_maximal_isr(error: ErrorCode) -> None:
    leader, proposal = pending_shrink()
    outcome = leader.on_alter_partition_result(proposal, answer(proposal, error=error))
    assert outcome.action is AlterPartitionAction.WAIT_FOR_METADATA
    assert leader.pending_proposal == proposal and leader.maximal_isr == {0, 1, 2}
    assert leader.isr_change(now_ms=LAG_MS + 2) is None


@pytest.mark.parametrize("error", [ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INELIGIBLE_REPLICA])
def test_a_refused_proposal_resets_to_the_committed_isr(error: ErrorCode) -> None:
    leader = make_leader(isr=(0, 1), min_insync_replicas=1)
    leader.on_follower_fetch(2, 0, now_ms=1)
    proposal = leader.isr_change(now_ms=1)
    assert proposal is not None and proposal.added == (2,)
    outcome = leader.on_alter_partition_result(proposal, answer(proposal, error=error))
    assert outcome.action is AlterPartitionAction.RESET
    assert leader.pending_proposal is None and leader.maximal_isr == {0, 1}
    assert leader.isr_change(now_ms=2) == proposal


@pytest.mark.parametrize(
    "error", [ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_CONTROLLER, ErrorCode.STALE_BROKER_EPOCH]
)
def test_other_errors_retry_the_same_proposal(error: ErrorCode) -> None:
    leader, proposal = pending_shrink()
    outcome = leader.on_alter_partition_result(proposal, answer(proposal, error=error))
    assert outcome.action is AlterPartitionAction.RETRY
    assert leader.pending_proposal == proposal


def test_a_success_for_another_leader_epoch_waits_for_metadata() -> None:
    leader, proposal = pending_shrink()
    outcome = leader.on_alter_partition_result(proposal, answer(proposal, leader_epoch=6))
    assert outcome.action is AlterPartitionAction.WAIT_FOR_METADATA
    assert leader.isr == {0, 1, 2} and leader.pending_proposal == proposal


def test_a_success_with_an_older_partition_epoch_is_ignored() -> None:
    leader, proposal = pending_shrink()
    outcome = leader.on_alter_partition_result(proposal, answer(proposal, partition_epoch=9))
    assert outcome.action is AlterPartitionAction.IGNORED
    assert leader.isr == {0, 1, 2}


def test_an_answer_to_a_proposal_that_is_no_longer_pending_is_ignored() -> None:
    leader, proposal = pending_shrink()
    leader.on_registration(registration((0, 1), partition_epoch=11))
    outcome = leader.on_alter_partition_result(proposal, answer(proposal))
    assert outcome.action is AlterPartitionAction.IGNORED
    assert leader.partition_epoch == 11


# --- Registrations -----------------------------------------------------------------------


def test_a_newer_partition_epoch_replaces_the_isr_and_drops_the_proposal() -> None:
    leader, _ = pending_shrink()
    outcome = leader.on_registration(registration((0, 1), partition_epoch=11))
    assert outcome.action is RegistrationAction.APPLIED and outcome.change.isr_changed
    assert leader.isr == {0, 1} and leader.pending_proposal is None
    assert leader.high_watermark == 5


def test_the_same_partition_epoch_keeps_the_pending_proposal() -> None:
    leader, proposal = pending_shrink()
    outcome = leader.on_registration(registration())
    assert outcome.action is RegistrationAction.UNCHANGED
    assert leader.pending_proposal == proposal


def test_older_registrations_are_stale() -> None:
    leader = make_leader()
    assert leader.on_registration(registration(partition_epoch=9)).action is (
        RegistrationAction.STALE
    )
    assert leader.on_registration(registration(leader_epoch=4, partition_epoch=20)).action is (
        RegistrationAction.STALE
    )


@pytest.mark.parametrize(
    "newer",
    [registration(leader_epoch=6, partition_epoch=11), registration(leader=1, leader_epoch=6)],
)
def test_a_new_leader_epoch_makes_the_leader_obsolete(newer: PartitionRegistration) -> None:
    leader = make_leader(isr=(0, 1))
    append_and_flush(leader, 5)
    outcome = leader.on_registration(newer)
    assert outcome.action is RegistrationAction.OBSOLETE and leader.is_obsolete
    assert leader.check_produce(-1) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert leader.ack_outcome(5).error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert leader.on_follower_fetch(1, 5, now_ms=1).error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert leader.isr_change(now_ms=10 * LAG_MS) is None
    assert leader.high_watermark == 0


# --- The unsafe configuration -------------------------------------------------------------


def test_min_isr_one_acknowledges_records_only_the_leader_holds() -> None:
    # The Jepsen scenario: followers cut off, the ISR shrinks to the leader alone, and
    # with min.insync.replicas=1 every acks=all write succeeds on one copy. Losing that
    # one broker now loses acknowledged writes; a checker must be able to see this.
    leader = make_leader(min_insync_replicas=1)
    shrink_to_leader(leader, now_ms=LAG_MS + 1)
    assert leader.check_produce(-1) == ErrorCode.NONE
    append_and_flush(leader, 5)
    outcome = leader.ack_outcome(5)
    assert outcome.done and outcome.error == ErrorCode.NONE
    for follower in (1, 2):
        state = leader.follower_state(follower)
        assert state is not None and state.log_end_offset < 5


def test_the_same_failure_with_min_isr_two_acknowledges_nothing() -> None:
    leader = make_leader(min_insync_replicas=2)
    append_and_flush(leader, 5)
    shrink_to_leader(leader, now_ms=LAG_MS + 1)
    assert leader.ack_outcome(5).error == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert leader.check_produce(-1) == ErrorCode.NOT_ENOUGH_REPLICAS


# --- Random interleavings ----------------------------------------------------------------


@dataclass
class Controller:
    """The controller's side of AlterPartition, as ``controller/alter_partition.py``
    decides it: compare-and-set on the partition epoch, sometimes a refusal."""

    isr: tuple[int, ...]
    partition_epoch: int
    leader_epoch: int
    in_flight: list[IsrProposal] = field(default_factory=list)

    def decide(self, proposal: IsrProposal, refuse: bool) -> PartitionData:
        if proposal.partition_epoch != self.partition_epoch:
            return PartitionData(
                error_code=int(ErrorCode.INVALID_UPDATE_VERSION), leader_epoch=self.leader_epoch
            )
        if refuse:
            return PartitionData(
                error_code=int(ErrorCode.INELIGIBLE_REPLICA), leader_epoch=self.leader_epoch
            )
        self.isr = proposal.new_isr
        self.partition_epoch += 1
        return PartitionData(
            leader_id=LEADER,
            leader_epoch=self.leader_epoch,
            isr=list(self.isr),
            partition_epoch=self.partition_epoch,
        )


# Each step is an operation and two small arguments that select among a few telling
# values, so that short runs reach the states that matter: a follower silent for longer
# than the lag time, a flush that covers everything, an AlterPartition answer lost
# after the controller applied it.
OPERATIONS = ("append", "flush", "fetch", "fetch", "tick", "propose", "answer", "metadata")
FRACTIONS = (0, 50, 100, 100)
TICKS_MS = (0, 10, LAG_MS // 2, LAG_MS + 1)
steps = st.tuples(st.sampled_from(OPERATIONS), st.integers(0, 3), st.integers(0, 3))


@settings(max_examples=600, deadline=None)
@given(
    followers=st.integers(1, 4),
    start=st.integers(0, 6),
    ops=st.lists(steps, min_size=40, max_size=200),
    data=st.data(),
)
def test_random_interleavings_keep_the_commit_rules(
    followers: int,
    start: int,
    ops: list[tuple[str, int, int]],
    data: st.DataObject,
) -> None:
    replicas = tuple(range(followers + 1))
    min_insync = data.draw(st.integers(1, followers + 1), label="min.insync.replicas")
    isr = tuple(sorted({LEADER, *data.draw(st.sets(st.sampled_from(replicas[1:])), label="isr")}))
    # Whatever a follower has fetched it holds; ISR members hold the previous epoch's end.
    held = {
        r: start if r in isr else data.draw(st.integers(0, start), label=f"held {r}")
        for r in replicas[1:]
    }
    initial_high_watermark = data.draw(st.integers(0, start), label="high watermark")
    leader = PartitionLeader(
        replica_id=LEADER,
        registration=PartitionRegistration(replicas, isr, LEADER, 3, 7),
        log_end_offset=start,
        durable_end_offset=start,
        high_watermark=initial_high_watermark,
        min_insync_replicas=min_insync,
        replica_lag_time_max_ms=LAG_MS,
        now_ms=0,
    )
    controller = Controller(isr, 7, 3)
    now_ms = 0
    log_end, durable = start, start
    waiters: list[tuple[int, int]] = []  # (id, required offset)
    last_high_watermark = leader.high_watermark

    def holders(offset: int) -> set[int]:
        """Replicas that hold every record below ``offset``, on the leader's side durably."""
        found = {r for r, end in held.items() if end >= offset}
        return found | ({LEADER} if durable >= offset else set())

    for step, (op, a, b) in enumerate(ops):
        if op == "append":
            acks = -1 if b < 3 else 1
            if leader.check_produce(acks) == ErrorCode.NONE:
                log_end += a + 1
                leader.on_append(log_end)
                if acks == -1:
                    waiters.append((step, log_end))
            else:
                assert len(leader.isr) < leader.effective_min_isr
        elif op == "flush":
            durable += (log_end - durable) * FRACTIONS[a] // 100
            leader.on_flush(durable)
        elif op == "fetch":
            replica = replicas[1:][a % followers]
            held[replica] += (log_end - held[replica]) * FRACTIONS[b] // 100
            assert leader.on_follower_fetch(replica, held[replica], now_ms).error == (
                ErrorCode.NONE
            )
        elif op == "tick":
            now_ms += TICKS_MS[a]
        elif op == "propose":
            ineligible = [replicas[1:][a % followers]] if b == 0 else []
            proposal = leader.isr_change(now_ms, ineligible)
            if proposal is not None:
                assert LEADER in proposal.new_isr
                event("expansion proposed" if proposal.added else "shrink proposed")
                if proposal.added:
                    assert all(held[r] >= leader.high_watermark for r in proposal.added)
                controller.in_flight.append(proposal)
        elif op == "answer" and controller.in_flight:
            proposal = controller.in_flight.pop(0)
            response = controller.decide(proposal, refuse=a == 0)
            if b == 0:
                # The answer is lost after the controller decided: a timeout.
                response = PartitionData(error_code=int(ErrorCode.REQUEST_TIMED_OUT))
            outcome = leader.on_alter_partition_result(proposal, response)
            event(f"alter partition answer: {outcome.action.name}")
            if outcome.action is AlterPartitionAction.RETRY:
                controller.in_flight.append(proposal)
        elif op == "metadata":
            leader.on_registration(
                PartitionRegistration(
                    replicas, controller.isr, LEADER, 3, controller.partition_epoch
                )
            )

        high_watermark = leader.high_watermark
        assert high_watermark >= last_high_watermark, "the high watermark went back"
        last_high_watermark = high_watermark
        assert high_watermark <= durable, "committed past the leader's durable end"
        for replica in leader.maximal_isr - {LEADER}:
            assert held[replica] >= high_watermark, f"{replica} lacks committed records"
            known = leader.follower_state(replica)
            assert known is not None
            if high_watermark > initial_high_watermark:
                assert known.log_end_offset >= high_watermark
        # Whatever ISR the controller has (it may be ahead of the leader), every member
        # holds every committed record: any of them may be elected next.
        for replica in set(controller.isr) - {LEADER}:
            assert held[replica] >= high_watermark
        assert set(controller.isr) <= leader.maximal_isr
        for _, required in waiters:
            ack = leader.ack_outcome(required)
            if ack.done and ack.error == ErrorCode.NONE:
                have = holders(required)
                assert len(have) >= leader.effective_min_isr, (
                    f"acknowledged {required} held by {sorted(have)} only"
                )
                assert set(leader.isr) <= have, "an ISR member lacks an acknowledged record"
                event(f"acks=all done, {len(have)} holders, min ISR {leader.effective_min_isr}")
        waiters = [(w, r) for w, r in waiters if not leader.ack_outcome(r).done]


@settings(max_examples=100, deadline=None)
@given(
    followers=st.integers(1, 4),
    writes=st.lists(st.integers(1, 5), min_size=1, max_size=10),
)
def test_with_min_isr_one_a_shrunk_leader_acknowledges_alone(
    followers: int, writes: list[int]
) -> None:
    replicas = tuple(range(followers + 1))
    leader = PartitionLeader(
        replica_id=LEADER,
        registration=PartitionRegistration(replicas, replicas, LEADER, 1, 1),
        log_end_offset=0,
        durable_end_offset=0,
        high_watermark=0,
        min_insync_replicas=1,
        replica_lag_time_max_ms=LAG_MS,
        now_ms=0,
    )
    # The followers are cut off: none fetches again, and the ISR shrinks to the leader.
    shrink_to_leader(leader, now_ms=LAG_MS + 1)
    end = 0
    for size in writes:
        assert leader.check_produce(-1) == ErrorCode.NONE
        end += size
        append_and_flush(leader, end)
        outcome = leader.ack_outcome(end)
        assert outcome.done and outcome.error == ErrorCode.NONE
    # Every acknowledged record exists on exactly one replica: the unsafe configuration.
    for follower in replicas[1:]:
        state = leader.follower_state(follower)
        assert state is not None and state.log_end_offset < 1
    assert leader.high_watermark == end and leader.isr == {LEADER}
