"""Rebalances of classic groups: PreparingRebalance until the members have rejoined,
CompletingRebalance until the leader's assignment is durable, then Stable (the
rebalance half of Kafka's ``GroupMetadataManager`` for classic groups).

:class:`Rebalancer` owns the join and sync deadlines, the end of a join phase (members
that did not rejoin are dropped, a leader is chosen, a new generation starts), SyncGroup
and the write of the assignment, and taking a member out of a group with whatever that
sets off. :mod:`odradek.coordinator.membership` decides when a rebalance is needed;
the JoinGroup and SyncGroup response builders live here because both modules, and
:mod:`odradek.coordinator.loading`, answer with them.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.coordinator.classic_group import Group, GroupState, Member, Waiter
from odradek.coordinator.context import (
    CoordinatorContext,
    append_error,
    join_key,
    member_key,
    pending_key,
    sync_key,
)
from odradek.coordinator.outputs import Token
from odradek.coordinator.record_helpers import group_metadata_record
from odradek.core.invariant import invariant
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages.join_group_response import (
    JoinGroupResponse,
    JoinGroupResponseMember,
)
from odradek.protocol.messages.sync_group_request import SyncGroupRequest
from odradek.protocol.messages.sync_group_response import SyncGroupResponse

__all__ = [
    "NO_GENERATION",
    "Rebalancer",
    "SyncWrite",
    "group_append_error",
    "join_response",
    "sync_response",
]

NO_GENERATION = -1

_EMPTY = GroupState.EMPTY
_PREPARING = GroupState.PREPARING_REBALANCE
_COMPLETING = GroupState.COMPLETING_REBALANCE
_STABLE = GroupState.STABLE
_DEAD = GroupState.DEAD


def join_response(
    version: int,
    error: ErrorCode,
    member_id: str,
    *,
    generation_id: int = NO_GENERATION,
    protocol_type: str | None = None,
    protocol_name: str | None = None,
    leader: str = "",
    members: list[JoinGroupResponseMember] | None = None,
    skip_assignment: bool = False,
) -> JoinGroupResponse:
    # Before v7 the protocol name is not nullable; Kafka sends "" instead of null.
    if version < 7 and protocol_name is None:
        protocol_name = ""
    return JoinGroupResponse(
        error_code=int(error),
        generation_id=generation_id,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        leader=leader,
        skip_assignment=skip_assignment and version >= 9,
        member_id=member_id,
        members=members or [],
    )


def sync_response(
    error: ErrorCode,
    assignment: bytes = b"",
    protocol_type: str | None = None,
    protocol_name: str | None = None,
) -> SyncGroupResponse:
    return SyncGroupResponse(
        error_code=int(error),
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignment=assignment,
    )


def group_append_error(error: ErrorCode) -> ErrorCode:
    # A group record that timed out may still be written; the members rejoin either way.
    if error is ErrorCode.REQUEST_TIMED_OUT:
        return ErrorCode.REBALANCE_IN_PROGRESS
    return append_error(error)


@dataclass(slots=True)
class SyncWrite:
    group_id: str
    generation_id: int
    assignment: dict[str, bytes]
    group: Group
    """The group that wrote it: a group deleted and made again under the same name
    starts over at the same generations, so name and generation alone would hand the
    old group's assignment to the new group's members."""


class Rebalancer:
    """The rebalance state machine of every group in the context."""

    def __init__(self, ctx: CoordinatorContext) -> None:
        self._ctx = ctx

    def check_timers(self, group: Group) -> None:
        """Raise InvariantError if the group's timers do not match its state."""
        g = group.group_id
        timers = self._ctx.timers
        for m in group.members.values():
            invariant(
                timers.get(member_key(g, m.member_id)) is not None
                or m.awaiting_join is not None
                or m.awaiting_sync is not None,
                f"{g}: member {m.member_id} has no session timer",
            )
        for mid in group.pending_join_members:
            invariant(
                timers.get(pending_key(g, mid)) is not None,
                f"{g}: pending member {mid} has no timer",
            )
        invariant(
            (group.state is _PREPARING) == (timers.get(join_key(g)) is not None),
            f"{g}: join timer does not match state {group.state.value}",
        )
        if group.pending_sync_members:
            invariant(timers.get(sync_key(g)) is not None, f"{g}: no timer for pending syncs")

    # -- the join phase --------------------------------------------------------------------

    def join_success(
        self, group: Group, member_id: str, version: int, *, with_members: bool = True
    ) -> JoinGroupResponse:
        leader = group.leader_id or ""
        return join_response(
            version,
            ErrorCode.NONE,
            member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=leader,
            members=group.current_member_metadata()
            if with_members and group.is_leader(member_id)
            else None,
        )

    def maybe_prepare_rebalance(self, group: Group) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group)

    def prepare_rebalance(self, group: Group) -> None:
        if group.state is _COMPLETING:
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        group.pending_sync_members.clear()
        self._ctx.timers.cancel(sync_key(group.group_id))
        if group.state is _EMPTY:
            # group.initial.rebalance.delay.ms: the first members of a new group usually
            # start together; waiting a little saves a rebalance per late starter.
            delay = self._ctx.config.initial_rebalance_delay_ms
            group.initial_join_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
            group.new_member_added = False
            self._ctx.timers.set(join_key(group.group_id), self._ctx.now_ms + delay)
        else:
            group.initial_join_remaining_ms = None
            self._ctx.timers.set(
                join_key(group.group_id), self._ctx.now_ms + group.rebalance_timeout_ms()
            )
        group.transition_to(_PREPARING, self._ctx.now_ms)
        self.try_complete_join(group)

    def try_complete_join(self, group: Group) -> None:
        # The initial delay always runs its course; a plain rebalance ends as soon as every
        # known member has rejoined.
        if (
            group.state is _PREPARING
            and group.initial_join_remaining_ms is None
            and group.has_all_members_joined()
        ):
            self._complete_join(group)

    def on_join_deadline(self, group: Group) -> None:
        remaining = group.initial_join_remaining_ms
        if remaining is not None and group.new_member_added and remaining != 0:
            group.new_member_added = False
            delay = min(self._ctx.config.initial_rebalance_delay_ms, remaining)
            group.initial_join_remaining_ms = remaining - delay
            self._ctx.timers.set(join_key(group.group_id), self._ctx.now_ms + delay)
            return
        self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        g = group.group_id
        self._ctx.timers.cancel(join_key(g))
        group.initial_join_remaining_ms = None
        # Dynamic members that did not rejoin within the rebalance timeout are gone; static
        # members keep their place (they may be restarting) until their session expires.
        for member in list(group.members.values()):
            if member.awaiting_join is None and member.group_instance_id is None:
                self.remove_member(group, member)
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that have not rejoined are left: wait another round.
            self._ctx.timers.set(
                join_key(g), self._ctx.now_ms + max(group.rebalance_timeout_ms(), 1)
            )
            return
        group.init_next_generation(self._ctx.now_ms)
        if group.state is _EMPTY:
            # Write the empty generation so that a restarted coordinator does not bring
            # back the members of the previous one.
            self._ctx.emit_write(group, [group_metadata_record(group)], None)
            return
        for member in group.members.values():
            if member.awaiting_join is not None:
                response = self.join_success(group, member.member_id, member.awaiting_join.version)
                self.deliver_join(group, member, response)
            else:
                self._ctx.schedule_session(group, member)
            member.is_new = False
            group.pending_sync_members[member.member_id] = None
        self._ctx.timers.set(sync_key(g), self._ctx.now_ms + group.rebalance_timeout_ms())

    # -- answers and assignments -----------------------------------------------------------

    def deliver_join(self, group: Group, member: Member, response: JoinGroupResponse) -> None:
        waiter = member.awaiting_join
        invariant(waiter is not None, f"no JoinGroup waits for {member.member_id}")
        assert waiter is not None
        member.awaiting_join = None
        self._ctx.complete(waiter, response)
        # The session starts (again) once the member has its answer.
        self._ctx.schedule_session(group, member)

    def _deliver_sync(self, group: Group, member: Member, response: SyncGroupResponse) -> None:
        waiter = member.awaiting_sync
        invariant(waiter is not None, f"no SyncGroup waits for {member.member_id}")
        assert waiter is not None
        member.awaiting_sync = None
        self._ctx.complete(waiter, response)
        self._ctx.schedule_session(group, member)

    def _reset_and_propagate_assignment_error(self, group: Group, error: ErrorCode) -> None:
        invariant(group.state is _COMPLETING, f"resetting assignments of {group}")
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            if member.awaiting_sync is None:
                continue
            if error is ErrorCode.NONE:
                response = sync_response(
                    error, member.assignment, group.protocol_type, group.protocol_name
                )
            else:
                response = sync_response(error)
            self._deliver_sync(group, member, response)

    # -- taking members out ----------------------------------------------------------------

    def remove_member(self, group: Group, member: Member) -> None:
        """Take a member out, answering its waiting requests, without further effects."""
        if member.awaiting_join is not None:
            w = member.awaiting_join
            member.awaiting_join = None
            self._ctx.complete(w, join_response(w.version, ErrorCode.UNKNOWN_MEMBER_ID, ""))
        if member.awaiting_sync is not None:
            w = member.awaiting_sync
            member.awaiting_sync = None
            self._ctx.complete(w, sync_response(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self._ctx.timers.cancel(member_key(group.group_id, member.member_id))

    def remove_member_and_update_group(self, group: Group, member: Member) -> None:
        self.remove_member(group, member)
        if group.state in (_STABLE, _COMPLETING):
            self.maybe_prepare_rebalance(group)
        elif group.state is _PREPARING:
            self.try_complete_join(group)

    def remove_pending_member_and_update_group(self, group: Group, member_id: str) -> None:
        group.pending_join_members.pop(member_id, None)
        self._ctx.timers.cancel(pending_key(group.group_id, member_id))
        if group.state is _PREPARING:
            self.try_complete_join(group)

    # -- SyncGroup ---------------------------------------------------------------------------

    def sync_group(self, token: Token, request: SyncGroupRequest, version: int) -> None:
        waiter = Waiter(token, version)
        error = self._ctx.group_status(request.group_id, allow_empty_id=False)
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance in flight is lost with the old coordinator: rejoin at once
            # (older clients do not expect COORDINATOR_LOAD_IN_PROGRESS here).
            error = ErrorCode.REBALANCE_IN_PROGRESS
        group = self._ctx.groups.get(request.group_id) if error is None else None
        if error is None:
            error = self._validate_sync(group, request)
        if error is not None:
            self._ctx.complete(waiter, sync_response(error))
            return
        assert group is not None
        member = group.members[request.member_id]
        if group.state is _PREPARING:
            self._ctx.complete(waiter, sync_response(ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.state is _COMPLETING:
            previous = member.awaiting_sync
            member.awaiting_sync = waiter
            if previous is not None and previous != waiter:
                self._ctx.complete(previous, sync_response(ErrorCode.REBALANCE_IN_PROGRESS))
            self._remove_pending_sync_member(group, member.member_id)
            if group.is_leader(member.member_id):
                given = {a.member_id: bytes(a.assignment) for a in request.assignments}
                # Members the leader left out get an empty assignment, as in Kafka.
                assignment = {mid: given.get(mid, b"") for mid in group.members}
                self._ctx.emit_write(
                    group,
                    [group_metadata_record(group, assignment)],
                    SyncWrite(group.group_id, group.generation_id, assignment, group),
                )
        elif group.state is _STABLE:
            self._remove_pending_sync_member(group, member.member_id)
            self._ctx.complete(
                waiter,
                sync_response(
                    ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name
                ),
            )
            self._ctx.schedule_session(group, member)
        else:
            self._ctx.complete(waiter, sync_response(ErrorCode.UNKNOWN_MEMBER_ID))

    def _validate_sync(self, group: Group | None, request: SyncGroupRequest) -> ErrorCode | None:
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = group.validate_generation(
            request.member_id, request.group_instance_id, request.generation_id
        )
        if error is not None:
            return error
        # v5 clients name the protocol they assigned with; a mismatch means they assigned
        # for something else than the group chose.
        if request.protocol_type is not None and request.protocol_type != group.protocol_type:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if request.protocol_name is not None and request.protocol_name != group.protocol_name:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _remove_pending_sync_member(self, group: Group, member_id: str) -> None:
        group.pending_sync_members.pop(member_id, None)
        if not group.pending_sync_members:
            self._ctx.timers.cancel(sync_key(group.group_id))

    def on_sync_deadline(self, group: Group) -> None:
        if group.state not in (_COMPLETING, _STABLE) or not group.pending_sync_members:
            return
        # Members that got their JoinGroup answer but never asked for their assignment
        # within the rebalance timeout are gone; the others rebalance without them.
        for member_id in list(group.pending_sync_members):
            member = group.members.get(member_id)
            if member is not None:
                self.remove_member(group, member)
        self.prepare_rebalance(group)

    def sync_written(self, c: SyncWrite, error: ErrorCode) -> None:
        group = self._ctx.groups.get(c.group_id)
        # Another member may have joined while the assignment was being written; then
        # that rebalance has answered everyone already.
        if (
            group is not c.group
            or group.state is not _COMPLETING
            or group.generation_id != c.generation_id
        ):
            return
        if error is not ErrorCode.NONE:
            self._reset_and_propagate_assignment_error(group, group_append_error(error))
            self.maybe_prepare_rebalance(group)
            return
        for member in group.members.values():
            member.assignment = c.assignment.get(member.member_id, b"")
        self._propagate_assignment(group, ErrorCode.NONE)
        group.transition_to(_STABLE, self._ctx.now_ms)
