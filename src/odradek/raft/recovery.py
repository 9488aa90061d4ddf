"""Planning a quorum-loss recovery, and the records that carry it out (pure).

When a majority of the voters is gone for good no membership change can commit: the
change needs the quorum it would repair. The seed's procedure breaks the loop offline:

1. survey every surviving copy of the metadata log (controllers and brokers alike:
   brokers observe the same log and may hold more of it);
2. choose the longest copy, compared as Raft compares logs, by (last epoch, end offset),
   and refuse when a survivor's copy is not a prefix of it: starting from that log would
   ask the survivor to un-see records (epochs going backwards, which brokers cannot
   handle);
3. on one stopped controller holding that log (copied there if a broker held it),
   append VotersRecords that demote every other voter, one at a time, until that
   controller is the only voter, in a NEW epoch above every epoch any survivor reached,
   plus an audit record.

Why a new epoch: a node that was not surveyed may hold entries past the chosen end in
the old last epoch. If the recovery records were written in that epoch, the restarted
leader's ``end_offset_for_epoch`` would vouch for that node's suffix as a prefix of its
own log; in a new epoch the leader answers with the old epoch's real end and the node
truncates its suffix, as Raft does for any uncommitted tail. It also puts the restarted
leader's epoch above every survivor's, so that a survivor still believing in the old
voters learns of the leader from any answer it gets, instead of ignoring a lower epoch.

What is given up cannot be listed: offsets that existed only on lost disks are unknown
to every survivor. The plan says so instead of guessing.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from odradek.core.kafka_uuid import to_kafka_str
from odradek.protocol.metadata import NoOpRecord
from odradek.protocol.metadata_record import encode_metadata_record
from odradek.protocol.record_batch import (
    ControlType,
)
from odradek.raft.audit import AUDIT_HEADER
from odradek.raft.log import Entry
from odradek.raft.survey import MetadataLogSurvey
from odradek.raft.voters import ZERO_DIRECTORY, Voter, VoterSet


@dataclass(frozen=True, slots=True)
class Survivor:
    """One surviving copy of the metadata log and what is known of its node."""

    name: str
    """How the operator named it (a server.properties or a metadata.log.dir)."""
    node_id: int | None
    directory_id: uuid.UUID | None
    is_controller: bool | None
    """None when only a directory was given (the role is unknown)."""
    log: MetadataLogSurvey


@dataclass(frozen=True, slots=True)
class RecoveryPlan:
    chosen: Survivor | None
    """The copy to recover from: the longest log."""
    target: Survivor | None
    """The stopped controller to run ``apply`` on (None: no surviving controller)."""
    copy_from: Survivor | None
    """Set when the chosen log is not already on the target: copy it there first."""
    voters: VoterSet | None
    """The voter set in force at the end of the chosen log."""
    demoted: tuple[Voter, ...]
    lost_voters: tuple[Voter, ...]
    """Voters with no surviving copy among the survivors given."""
    recovery_epoch: int
    """The epoch of the records ``apply`` appends: above every epoch a survivor reached."""
    refusals: tuple[str, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.refusals


def epoch_end(log: MetadataLogSurvey, epoch: int) -> tuple[int, int] | None:
    """(first offset, end offset) of ``epoch`` among the entries ``log`` holds."""
    for i, (held, start) in enumerate(log.epochs):
        if held == epoch:
            end = log.epochs[i + 1][1] if i + 1 < len(log.epochs) else log.end_offset
            return start, end
    return None


def divergence(chosen: MetadataLogSurvey, other: MetadataLogSurvey) -> str | None:
    """None when ``other`` is a prefix of ``chosen`` (as far as the logs can tell), else
    why starting from ``chosen`` would move ``other`` backwards.

    Raft's log matching: two logs holding an entry of the same epoch at the same offset
    are equal up to it, so ``other``'s last (epoch, end offset) decides. Below
    ``chosen``'s snapshot the entries are gone and only the snapshot's epoch can be
    compared, as Kafka's fetch validation does.
    """
    epoch, end = other.last_epoch, other.end_offset
    if end == 0:
        return None
    if (epoch, end) > (chosen.last_epoch, chosen.end_offset):
        return (
            f"its log (end offset {end}, last epoch {epoch}) is ahead of the chosen one "
            f"(end offset {chosen.end_offset}, last epoch {chosen.last_epoch})"
        )
    held = epoch_end(chosen, epoch)
    if held is not None:
        first, last = held
        if first < end <= last:
            return None
        return (
            f"its last epoch {epoch} ends at offset {end}, the chosen log's epoch {epoch} "
            f"spans [{first}, {last}): the logs diverge and {max(0, end - last)} of its "
            "offsets would be truncated"
        )
    snapshot = chosen.latest_snapshot
    if snapshot is not None and end <= chosen.start_offset:
        if end == chosen.start_offset and epoch != snapshot.epoch:
            return (
                f"it ends at the chosen log's snapshot (offset {end}) in epoch {epoch}, "
                f"the snapshot's epoch is {snapshot.epoch}: the logs diverge"
            )
        if epoch <= snapshot.epoch:
            return None
    return (
        f"its last epoch {epoch} (end offset {end}) does not occur in the chosen log "
        f"(epochs {[e for e, _ in chosen.epochs]}): the logs diverge"
    )


def _key(s: Survivor) -> tuple[int, int]:
    return (s.log.last_epoch, s.log.end_offset)


def _voter_of(voters: VoterSet | None, s: Survivor) -> Voter | None:
    if voters is None or s.node_id is None:
        return None
    voter = voters.get(s.node_id)
    if voter is None:
        return None
    same_disk = (
        voter.directory_id == ZERO_DIRECTORY
        or s.directory_id is None
        or voter.directory_id == s.directory_id
    )
    return voter if same_disk else None


def plan_recovery(
    survivors: list[Survivor],
    node: int | None = None,
    min_epoch: int = 0,
    *,
    whole_survey: bool = True,
) -> RecoveryPlan:
    """The plan for ``survivors``; ``node`` forces the controller to apply on, and the
    recovery epoch is at least ``min_epoch``. With ``whole_survey`` the survivors are
    every surviving node, so a majority of voters among them means nothing is lost."""
    refusals: list[str] = []
    notes: list[str] = []
    if not survivors:
        return RecoveryPlan(None, None, None, None, (), (), 0, ("no surviving log was given",))
    ids = [s.node_id for s in survivors if s.node_id is not None]
    if len(ids) != len(set(ids)):
        refusals.append(f"a node is listed twice: {sorted(ids)}")
    # The longest log; among equals one already on a controller, then the requested node.
    chosen = max(
        survivors,
        key=lambda s: (*_key(s), s.is_controller is True, s.node_id == node),
    )
    voters = chosen.log.voters
    if voters is None:
        refusals.append(
            "the chosen log names no voter set (a static quorum, controller.quorum.voters): "
            "change controller.quorum.voters on the survivors instead"
        )
    for s in survivors:
        if s.log.problem is not None:
            notes.append(f"{s.name}: damaged tail, surveyed up to offset {s.log.end_offset}")
        if s is chosen:
            continue
        why = divergence(chosen.log, s.log)
        if why is not None:
            refusals.append(
                f"{s.name} (node {s.node_id}) would move backwards: {why}. If its disk "
                "cannot be trusted, leave it out of the survey: it is then treated as lost "
                "and truncated to the chosen log when it fetches"
            )
        elif chosen.log.latest_snapshot is not None and s.log.end_offset < chosen.log.start_offset:
            notes.append(
                f"{s.name}: ends below the chosen log's snapshot; it will install the snapshot "
                "(entries below a snapshot cannot be compared)"
            )
    target = _pick_target(survivors, chosen, voters, node, refusals)
    copy_from = None
    if target is not None and _key(target) != _key(chosen):
        copy_from = chosen
    recovery_epoch = max(min_epoch, 1 + highest_epoch(survivors))
    demoted: tuple[Voter, ...] = ()
    lost: tuple[Voter, ...] = ()
    if voters is not None:
        keep = _voter_of(voters, target) if target is not None else None
        demoted = tuple(v for v in voters if v != keep)
        surviving = {id(v) for s in survivors if (v := _voter_of(voters, s)) is not None}
        lost = tuple(v for v in voters if id(v) not in surviving)
        if not whole_survey:
            pass
        elif not lost:
            refusals.append(
                "every voter has a surviving copy: the quorum is not lost; start the "
                "voters again instead"
            )
        elif len(voters) - len(lost) >= voters.majority:
            refusals.append(
                f"a majority of the voters ({len(voters) - len(lost)} of {len(voters)}) "
                "survived: start them again and the quorum elects a leader by itself"
            )
    return RecoveryPlan(
        chosen,
        target,
        copy_from,
        voters,
        demoted,
        lost,
        recovery_epoch,
        tuple(refusals),
        tuple(notes),
    )


def highest_epoch(survivors: list[Survivor]) -> int:
    """The highest epoch any survivor reached: in its log or its quorum state."""
    return max(
        [0]
        + [s.log.last_epoch for s in survivors]
        + [s.log.quorum_state.epoch for s in survivors if s.log.quorum_state is not None]
    )


def _pick_target(
    survivors: list[Survivor],
    chosen: Survivor,
    voters: VoterSet | None,
    node: int | None,
    refusals: list[str],
) -> Survivor | None:
    if node is not None:
        found = [s for s in survivors if s.node_id == node]
        if not found:
            refusals.append(f"node {node} is not among the surveyed nodes")
            return None
        if found[0].is_controller is False:
            refusals.append(f"node {node} is not a controller (process.roles)")
            return None
        return found[0]
    controllers = [s for s in survivors if s.is_controller]
    if not controllers:
        return None
    # A controller that already holds the chosen log needs no copy; a voter keeps its
    # voter entry (endpoints) instead of being added anew.
    return max(
        controllers,
        key=lambda s: (
            _key(s) == _key(chosen),
            _voter_of(voters, s) is not None,
            -(s.node_id or 0),
        ),
    )


# --- The records apply appends ---------------------------------------------------------


def recovery_entries(
    voters: VoterSet,
    keep: Voter,
    offset: int,
    epoch: int,
    audit: dict[str, Any],
) -> list[Entry]:
    """VotersRecords from ``voters`` down to ``keep`` alone, one change per record, then the
    audit record; the first entry at ``offset``, all in ``epoch``.

    When ``keep`` is not a voter with its directory id (a controller that never was
    one, or one whose disk was replaced) it is first added, under its own directory id,
    replacing any voter of its node id: from then on it is the replica that votes.
    """
    entries: list[Entry] = []
    current = voters

    def record(new: VoterSet) -> None:
        nonlocal current
        entries.append(Entry(offset + len(entries), epoch, (new.encode(),), ControlType.VOTERS))
        current = new

    if current.get(keep.node_id) != keep:
        present = current.get(keep.node_id)
        if present is None or present.key != keep.key or present.endpoints != keep.endpoints:
            record(current.replaced(keep))
    for voter in sorted(current, key=lambda v: -v.node_id):
        if voter.node_id != keep.node_id:
            record(current.without(voter.node_id))
    document = {**audit, "voter_records": [e.offset for e in entries]}
    entries.append(
        Entry(
            offset + len(entries),
            epoch,
            (encode_metadata_record(NoOpRecord()),),
            None,
            ((AUDIT_HEADER, json.dumps(document, sort_keys=True).encode("utf-8")),),
        )
    )
    return entries


def voter_json(voter: Voter) -> dict[str, Any]:
    return {"id": voter.node_id, "directory_id": to_kafka_str(voter.directory_id)}
