"""Planning a quorum-loss recovery: which log, which node, and when to refuse."""

from __future__ import annotations

import json
import uuid

from odradek.protocol.metadata import NoOpRecord
from odradek.protocol.metadata_record import decode_metadata_record
from odradek.protocol.record_batch import (
    ControlType,
)
from odradek.raft.audit import AUDIT_HEADER
from odradek.raft.log import SnapshotId
from odradek.raft.quorum_file import StoredQuorumState
from odradek.raft.recovery import Survivor, divergence, plan_recovery, recovery_entries
from odradek.raft.survey import MetadataLogSurvey
from odradek.raft.voters import Voter, VoterEndpoint, VoterSet


def voter(node_id: int) -> Voter:
    return Voter(
        node_id, uuid.UUID(int=node_id), (VoterEndpoint("CONTROLLER", "127.0.0.1", 9000 + node_id),)
    )


VOTERS = VoterSet.of(voter(i) for i in (1, 2, 3))


def log(
    epochs: list[tuple[int, int]],
    end: int,
    *,
    snapshot: SnapshotId | None = None,
    quorum_epoch: int | None = None,
) -> MetadataLogSurvey:
    start = snapshot.end_offset if snapshot is not None else 0
    last = epochs[-1][0] if epochs else (snapshot.epoch if snapshot else 0)
    state = None if quorum_epoch is None else StoredQuorumState(quorum_epoch, None, None)
    return MetadataLogSurvey(
        "dir", start, end, last, snapshot, VOTERS, 1, state, None, tuple(epochs)
    )


def node(node_id: int, found: MetadataLogSurvey, controller: bool = True) -> Survivor:
    return Survivor(f"node-{node_id}", node_id, uuid.UUID(int=node_id), controller, found)


def test_the_longest_log_on_a_controller_needs_no_copy() -> None:
    plan = plan_recovery(
        [node(1, log([(1, 0), (2, 10)], 20)), node(4, log([(1, 0), (2, 10)], 15), False)]
    )
    assert plan.ok, plan.refusals
    assert plan.chosen is not None and plan.chosen.node_id == 1
    assert plan.target is plan.chosen and plan.copy_from is None
    assert [v.node_id for v in plan.lost_voters] == [2, 3]
    assert [v.node_id for v in plan.demoted] == [2, 3]


def test_a_broker_holding_the_longest_log_is_copied_to_a_controller() -> None:
    broker = node(4, log([(1, 0), (2, 10)], 25), controller=False)
    plan = plan_recovery([node(1, log([(1, 0), (2, 10)], 20)), broker])
    assert plan.ok, plan.refusals
    assert plan.chosen is broker and plan.copy_from is broker
    assert plan.target is not None and plan.target.node_id == 1


def test_logs_compare_by_last_epoch_before_end_offset() -> None:
    # Node 1's log is longer but its tail is in an older epoch than node 4's: Raft
    # prefers node 4's, and node 1 would lose entries, so the plan refuses.
    stale = node(1, log([(1, 0), (2, 10)], 30))
    newer = node(4, log([(1, 0), (2, 10), (3, 20)], 22), controller=False)
    plan = plan_recovery([stale, newer])
    assert plan.chosen is newer
    assert not plan.ok
    assert any("node-1 (node 1) would move backwards" in r for r in plan.refusals)


def test_a_diverging_survivor_refuses_the_plan() -> None:
    chosen = node(1, log([(1, 0), (2, 10), (4, 20)], 40))
    # Epoch 3 never made it into the chosen log: node 5 diverges at offset 20.
    other = node(5, log([(1, 0), (2, 10), (3, 20)], 25), controller=False)
    plan = plan_recovery([chosen, other])
    assert not plan.ok
    assert any("does not occur in the chosen log" in r for r in plan.refusals)
    # Its epoch-2 tail going past where epoch 2 ends in the chosen log diverges too.
    assert divergence(chosen.log, log([(1, 0), (2, 10)], 24)) is not None
    assert divergence(chosen.log, log([(1, 0), (2, 10)], 20)) is None


def test_below_the_chosen_snapshot_only_its_epoch_can_be_compared() -> None:
    chosen = log([(3, 100)], 120, snapshot=SnapshotId(100, 2))
    assert divergence(chosen, log([(1, 0), (2, 50)], 90)) is None
    assert divergence(chosen, log([(1, 0), (2, 50)], 100)) is None
    assert divergence(chosen, log([(1, 0)], 100)) is not None  # ends at it, wrong epoch
    assert divergence(chosen, log([(1, 0), (3, 90)], 95)) is not None  # newer epoch below it


def test_no_recovery_while_a_majority_of_voters_survives() -> None:
    plan = plan_recovery([node(1, log([(1, 0)], 10)), node(2, log([(1, 0)], 10))])
    assert not plan.ok
    assert any("a majority of the voters (2 of 3) survived" in r for r in plan.refusals)
    # apply sees only its own node and the source: liveness is asked of the network there.
    partial = plan_recovery(
        [node(1, log([(1, 0)], 10)), node(2, log([(1, 0)], 10))], 1, whole_survey=False
    )
    assert partial.ok, partial.refusals


def test_the_recovery_epoch_is_above_every_survivors_epoch() -> None:
    plan = plan_recovery(
        [
            node(1, log([(1, 0), (2, 10)], 20, quorum_epoch=4)),
            node(4, log([(1, 0), (2, 10)], 20, quorum_epoch=7), controller=False),
        ]
    )
    assert plan.ok and plan.recovery_epoch == 8
    assert plan_recovery([node(1, log([(1, 0)], 5))], min_epoch=12).recovery_epoch == 12


def test_a_named_node_must_be_a_surveyed_controller() -> None:
    survivors = [node(1, log([(1, 0)], 5)), node(4, log([(1, 0)], 5), controller=False)]
    assert any("not a controller" in r for r in plan_recovery(survivors, 4).refusals)
    assert any("not among" in r for r in plan_recovery(survivors, 9).refusals)


def test_recovery_entries_demote_one_voter_at_a_time_then_audit() -> None:
    entries = recovery_entries(VOTERS, voter(1), 40, 9, {"user": "op"})
    assert [e.offset for e in entries] == [40, 41, 42]
    assert {e.epoch for e in entries} == {9}
    assert [e.control for e in entries[:2]] == [ControlType.VOTERS, ControlType.VOTERS]
    sets = [VoterSet.decode(e.records[0]) for e in entries[:2]]
    assert [sorted(s.ids) for s in sets] == [[1, 2], [1]]
    assert sets[1].get(1) == voter(1)  # the kept voter's endpoints stay as they were
    audit = entries[2]
    assert audit.control is None
    assert isinstance(decode_metadata_record(audit.records[0])[0], NoOpRecord)
    ((name, value),) = audit.headers
    assert name == AUDIT_HEADER
    assert json.loads(value) == {"user": "op", "voter_records": [40, 41]}


def test_a_controller_that_was_not_a_voter_is_added_before_the_others_go() -> None:
    newcomer = Voter(4, uuid.UUID(int=44), (VoterEndpoint("CONTROLLER", "127.0.0.1", 9004),))
    entries = recovery_entries(VOTERS, newcomer, 0, 3, {})
    sets = [VoterSet.decode(e.records[0]) for e in entries[:-1]]
    assert [sorted(s.ids) for s in sets] == [[1, 2, 3, 4], [1, 2, 4], [1, 4], [4]]
    assert sets[-1].get(4) == newcomer
