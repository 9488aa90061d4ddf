"""Membership of classic groups: JoinGroup, Heartbeat and LeaveGroup, static membership
(``group.instance.id``, KIP-345) with fencing, and session expiry (the membership half of
Kafka's ``GroupMetadataManager`` for classic groups).

:class:`Membership` decides who is a member and when the group must rebalance; the
rebalance itself (join and sync deadlines, SyncGroup, the assignment) is
:class:`~odradek.coordinator.rebalance.Rebalancer`'s. Member ids come from an injected
``random.Random``, so a run is a function of its inputs.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

from odradek.coordinator.classic_group import Group, GroupState, Member, Waiter
from odradek.coordinator.context import CoordinatorContext, member_key, pending_key
from odradek.coordinator.outputs import Token
from odradek.coordinator.rebalance import (
    Rebalancer,
    group_append_error,
    join_response,
    sync_response,
)
from odradek.coordinator.record_helpers import group_metadata_record
from odradek.core.invariant import invariant
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages.heartbeat_request import HeartbeatRequest
from odradek.protocol.messages.heartbeat_response import HeartbeatResponse
from odradek.protocol.messages.join_group_request import JoinGroupRequest
from odradek.protocol.messages.leave_group_request import LeaveGroupRequest, MemberIdentity
from odradek.protocol.messages.leave_group_response import LeaveGroupResponse, MemberResponse

__all__ = ["Membership", "StaticRejoinWrite"]

_EMPTY = GroupState.EMPTY
_PREPARING = GroupState.PREPARING_REBALANCE
_COMPLETING = GroupState.COMPLETING_REBALANCE
_STABLE = GroupState.STABLE
_DEAD = GroupState.DEAD


@dataclass(slots=True)
class StaticRejoinWrite:
    group_id: str
    generation_id: int
    old_member_id: str
    new_member_id: str
    old_protocols: list[tuple[str, bytes]]
    old_rebalance_timeout_ms: int
    old_session_timeout_ms: int
    previous_leader: str | None
    waiter: Waiter


@dataclass(frozen=True, slots=True)
class _JoinParams:
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool


class Membership:
    """JoinGroup, Heartbeat, LeaveGroup and session expiry for every group in the context."""

    def __init__(
        self, ctx: CoordinatorContext, rebalance: Rebalancer, *, rng: random.Random
    ) -> None:
        self._ctx = ctx
        self._rebalance = rebalance
        self._rng = rng

    # -- JoinGroup ---------------------------------------------------------------------------

    def join_group(
        self,
        token: Token,
        request: JoinGroupRequest,
        version: int,
        *,
        client_id: str,
        client_host: str,
    ) -> None:
        """JoinGroup. ``client_id`` is the request header's, ``client_host`` the peer's
        address; both show in DescribeGroups and the persisted member metadata."""
        waiter = Waiter(token, version)
        member_id = request.member_id
        error = self._ctx.group_status(request.group_id, allow_empty_id=False)
        if error is not None:
            self._ctx.complete(waiter, join_response(version, error, member_id))
            return
        session_timeout = request.session_timeout_ms
        if not (
            self._ctx.config.min_session_timeout_ms
            <= session_timeout
            <= self._ctx.config.max_session_timeout_ms
        ):
            self._ctx.complete(
                waiter, join_response(version, ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
            )
            return
        params = _JoinParams(
            group_instance_id=request.group_instance_id,
            client_id=client_id,
            client_host=client_host,
            # JoinGroup v0 has no rebalance timeout: the session timeout serves for both.
            rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else session_timeout,
            session_timeout_ms=session_timeout,
            protocol_type=request.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
            # KIP-394: from v4 a member must first learn its id, so that a client that
            # times out and retries does not leave a dead member behind.
            require_known_member_id=version >= 4,
        )
        is_unknown = member_id == ""
        group = self._ctx.groups.get(request.group_id)
        if group is None:
            if not is_unknown:
                self._ctx.complete(
                    waiter, join_response(version, ErrorCode.UNKNOWN_MEMBER_ID, member_id)
                )
                return
            group = self._ctx.create_group(request.group_id)
        if not self._accept_joining_member(group, member_id):
            member = group.members.get(member_id)
            if member is not None:
                self._rebalance.remove_member(group, member)
            self._ctx.complete(waiter, join_response(version, ErrorCode.GROUP_MAX_SIZE_REACHED, ""))
        elif is_unknown:
            self._join_new_member(group, waiter, params)
        else:
            self._join_current_member(group, member_id, waiter, params)
        if group.state is _PREPARING:
            self._rebalance.try_complete_join(group)

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        max_size = self._ctx.config.max_size
        if group.state in (_EMPTY, _DEAD):
            return True
        if group.state is _PREPARING:
            # Counting members that have rejoined (not all members) lets a group whose
            # max size was lowered shed the members that rejoin last.
            member = group.members.get(member_id)
            awaiting = sum(1 for m in group.members.values() if m.awaiting_join is not None)
            return (member is not None and member.awaiting_join is not None) or (
                awaiting < max_size
            )
        return member_id in group.members or len(group.members) < max_size

    def _join_new_member(self, group: Group, waiter: Waiter, params: _JoinParams) -> None:
        version = waiter.version
        names = [name for name, _ in params.protocols]
        if group.state is _DEAD:
            self._ctx.complete(
                waiter, join_response(version, ErrorCode.COORDINATOR_NOT_AVAILABLE, "")
            )
            return
        if not group.supports_protocols(params.protocol_type, names):
            self._ctx.complete(
                waiter, join_response(version, ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "")
            )
            return
        instance_id = params.group_instance_id
        new_member_id = self._new_member_id(instance_id or params.client_id)
        if instance_id is not None:
            old_member_id = group.static_members.get(instance_id)
            if old_member_id is not None:
                self._update_static_member_and_rebalance(
                    group, old_member_id, new_member_id, waiter, params
                )
            else:
                self._add_member_and_rebalance(group, new_member_id, waiter, params)
        elif params.require_known_member_id:
            group.pending_join_members[new_member_id] = None
            self._ctx.timers.set(
                pending_key(group.group_id, new_member_id),
                self._ctx.now_ms + params.session_timeout_ms,
            )
            self._ctx.complete(
                waiter, join_response(version, ErrorCode.MEMBER_ID_REQUIRED, new_member_id)
            )
        else:
            self._add_member_and_rebalance(group, new_member_id, waiter, params)

    def _join_current_member(
        self, group: Group, member_id: str, waiter: Waiter, params: _JoinParams
    ) -> None:
        version = waiter.version
        names = [name for name, _ in params.protocols]
        if group.state is _DEAD:
            self._ctx.complete(
                waiter, join_response(version, ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
            )
            return
        if not group.supports_protocols(params.protocol_type, names):
            self._ctx.complete(
                waiter, join_response(version, ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
            )
            return
        if member_id in group.pending_join_members:
            if params.group_instance_id is not None:
                # Static members are never made pending; a client that mixes the two is
                # confused, and starting over with a fresh id is the way out.
                self._ctx.complete(
                    waiter, join_response(version, ErrorCode.UNKNOWN_MEMBER_ID, member_id)
                )
                return
            self._add_member_and_rebalance(group, member_id, waiter, params)
            return
        error = group.validate_member(member_id, params.group_instance_id)
        if error is not None:
            self._ctx.complete(waiter, join_response(version, error, member_id))
            return
        member = group.members[member_id]
        if group.state is _PREPARING:
            self._update_member_and_rebalance(group, member, waiter, params)
        elif group.state is _COMPLETING:
            if member.matches(params.protocols):
                # The member probably missed the JoinGroup response: send it again.
                self._ctx.complete(waiter, self._rebalance.join_success(group, member_id, version))
            else:
                self._update_member_and_rebalance(group, member, waiter, params)
        elif group.state is _STABLE:
            if group.is_leader(member_id) or not member.matches(params.protocols):
                # A JoinGroup from the leader forces a rebalance even with unchanged
                # metadata: it is how a consumer reacts to topic metadata changes.
                self._update_member_and_rebalance(group, member, waiter, params)
            else:
                self._ctx.complete(
                    waiter,
                    self._rebalance.join_success(group, member_id, version, with_members=False),
                )
        else:
            self._ctx.complete(
                waiter, join_response(version, ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            )

    def _new_member_id(self, prefix: str) -> str:
        return f"{prefix}-{uuid.UUID(int=self._rng.getrandbits(128), version=4)}"

    def _add_member_and_rebalance(
        self, group: Group, member_id: str, waiter: Waiter, params: _JoinParams
    ) -> None:
        member = Member(
            member_id=member_id,
            group_instance_id=params.group_instance_id,
            client_id=params.client_id,
            client_host=params.client_host,
            rebalance_timeout_ms=params.rebalance_timeout_ms,
            session_timeout_ms=params.session_timeout_ms,
            protocol_type=params.protocol_type,
            protocols=params.protocols,
            is_new=True,
            awaiting_join=waiter,
        )
        # A member joining a new group during its initial delay extends the delay.
        if group.state is _PREPARING and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        self._ctx.timers.cancel(pending_key(group.group_id, member_id))
        # A new member has no id to heartbeat with yet, so its session cannot run; bound
        # its wait instead, in case its client gave up and will come back as another.
        self._ctx.timers.set(
            member_key(group.group_id, member_id),
            self._ctx.now_ms + self._ctx.config.new_member_join_timeout_ms,
        )
        self._rebalance.maybe_prepare_rebalance(group)

    def _update_member(
        self,
        member: Member,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        waiter: Waiter | None,
    ) -> None:
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        previous = member.awaiting_join
        member.awaiting_join = waiter
        if previous is not None and waiter is not None and previous != waiter:
            # Kafka drops the older request silently; answering it keeps our promise that
            # every token is completed, and a retrying client reads only the newer one.
            self._ctx.complete(
                previous,
                join_response(previous.version, ErrorCode.REBALANCE_IN_PROGRESS, member.member_id),
            )

    def _update_member_and_rebalance(
        self, group: Group, member: Member, waiter: Waiter, params: _JoinParams
    ) -> None:
        self._update_member(
            member,
            params.protocols,
            params.rebalance_timeout_ms,
            params.session_timeout_ms,
            waiter,
        )
        self._rebalance.maybe_prepare_rebalance(group)

    def _update_static_member_and_rebalance(
        self,
        group: Group,
        old_member_id: str,
        new_member_id: str,
        waiter: Waiter,
        params: _JoinParams,
    ) -> None:
        previous_leader = group.leader_id
        old = group.members[old_member_id]
        old_protocols = old.protocols
        old_rebalance_timeout, old_session_timeout = (
            old.rebalance_timeout_ms,
            old.session_timeout_ms,
        )
        member = self._replace_static_member(group, old_member_id, new_member_id)
        self._update_member(
            member,
            params.protocols,
            params.rebalance_timeout_ms,
            params.session_timeout_ms,
            waiter,
        )
        if group.state is _STABLE:
            if group.select_protocol() == group.protocol_name:
                # KIP-345: a known static member that comes back with a new id and the same
                # protocols takes its old place and assignment without a rebalance, once
                # the new id is durable.
                self._ctx.emit_write(
                    group,
                    [group_metadata_record(group)],
                    StaticRejoinWrite(
                        group.group_id,
                        group.generation_id,
                        old_member_id,
                        new_member_id,
                        old_protocols,
                        old_rebalance_timeout,
                        old_session_timeout,
                        previous_leader,
                        waiter,
                    ),
                )
            else:
                self._rebalance.maybe_prepare_rebalance(group)
        elif group.state is _COMPLETING:
            # The leader may be assigning to the old id right now; start over.
            self._rebalance.prepare_rebalance(group)
        else:
            invariant(
                group.state is _PREPARING,
                f"static member rejoined group {group.group_id} in {group.state.value}",
            )

    def _replace_static_member(
        self, group: Group, old_member_id: str, new_member_id: str
    ) -> Member:
        old = group.members[old_member_id]
        # Requests still waiting under the old id belong to a fenced instance.
        if old.awaiting_join is not None:
            w = old.awaiting_join
            self._ctx.complete(
                w, join_response(w.version, ErrorCode.FENCED_INSTANCE_ID, old_member_id)
            )
        if old.awaiting_sync is not None:
            self._ctx.complete(old.awaiting_sync, sync_response(ErrorCode.FENCED_INSTANCE_ID))
        member = group.replace_member_id(old_member_id, new_member_id)
        self._ctx.timers.cancel(member_key(group.group_id, old_member_id))
        self._ctx.schedule_session(group, member)
        return member

    # -- Heartbeat ---------------------------------------------------------------------------

    def heartbeat(self, token: Token, request: HeartbeatRequest, version: int) -> None:
        error = self._heartbeat(request)
        self._ctx.complete(Waiter(token, version), HeartbeatResponse(error_code=int(error)))

    def _heartbeat(self, request: HeartbeatRequest) -> ErrorCode:
        error = self._ctx.group_status(request.group_id, allow_empty_id=False)
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # The group is being loaded; its members are fine as far as anyone knows.
            return ErrorCode.NONE
        if error is not None:
            return error
        group = self._ctx.groups.get(request.group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = group.validate_generation(
            request.member_id, request.group_instance_id, request.generation_id
        )
        if error is not None:
            return error
        if group.state is _EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._ctx.schedule_session(group, group.members[request.member_id])
        if group.state is _PREPARING:
            # How members learn that they must rejoin.
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # -- LeaveGroup --------------------------------------------------------------------------

    def leave_group(self, token: Token, request: LeaveGroupRequest, version: int) -> None:
        """LeaveGroup: v0-v2 name one member; v3+ a batch, by member id or instance id."""
        if version >= 3:
            identities = request.members
        else:
            identities = [MemberIdentity(member_id=request.member_id)]
        top_error, results = self._leave(request.group_id, identities)
        if version >= 3:
            response = LeaveGroupResponse(
                error_code=int(top_error),
                members=[
                    MemberResponse(
                        member_id=i.member_id,
                        group_instance_id=i.group_instance_id,
                        error_code=int(e),
                    )
                    for i, e in results
                ],
            )
        else:
            error = top_error
            if error is ErrorCode.NONE and results:
                error = results[0][1]
            response = LeaveGroupResponse(error_code=int(error))
        self._ctx.complete(Waiter(token, version), response)

    def _leave(
        self, group_id: str, identities: list[MemberIdentity]
    ) -> tuple[ErrorCode, list[tuple[MemberIdentity, ErrorCode]]]:
        error = self._ctx.group_status(group_id, allow_empty_id=False)
        if error is not None:
            return error, []
        group = self._ctx.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [(i, ErrorCode.UNKNOWN_MEMBER_ID) for i in identities]
        if group.state is _DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results: list[tuple[MemberIdentity, ErrorCode]] = []
        for identity in identities:
            member_id = identity.member_id
            if member_id == "":
                # An administrator removes a static member by its instance id alone.
                current = (
                    group.static_members.get(identity.group_instance_id)
                    if identity.group_instance_id is not None
                    else None
                )
                if current is None:
                    results.append((identity, ErrorCode.UNKNOWN_MEMBER_ID))
                else:
                    self._rebalance.remove_member_and_update_group(group, group.members[current])
                    results.append((identity, ErrorCode.NONE))
            elif member_id in group.pending_join_members:
                self._rebalance.remove_pending_member_and_update_group(group, member_id)
                results.append((identity, ErrorCode.NONE))
            else:
                err = group.validate_member(member_id, identity.group_instance_id)
                if err is None:
                    self._rebalance.remove_member_and_update_group(group, group.members[member_id])
                    results.append((identity, ErrorCode.NONE))
                else:
                    results.append((identity, err))
        return ErrorCode.NONE, results

    # -- sessions and durable rejoins -----------------------------------------------------

    def on_session_deadline(self, group: Group, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is None:
            return
        if not member.is_new and (
            member.awaiting_join is not None or member.awaiting_sync is not None
        ):
            # A member waiting for its JoinGroup or SyncGroup answer cannot heartbeat; its
            # session starts again with the answer.
            return
        self._rebalance.remove_member_and_update_group(group, member)

    def static_rejoin_written(self, c: StaticRejoinWrite, error: ErrorCode) -> None:
        group = self._ctx.groups.get(c.group_id)
        member = group.members.get(c.new_member_id) if group is not None else None
        if (
            group is None
            or member is None
            or member.awaiting_join != c.waiter
            or group.state is not _STABLE
            or group.generation_id != c.generation_id
        ):
            # A rebalance started meanwhile and will answer the member.
            return
        version = c.waiter.version
        if error is not ErrorCode.NONE:
            # The new id is not durable: put the old member back, as if nothing happened.
            member.awaiting_join = None
            self._update_member(
                member,
                c.old_protocols,
                c.old_rebalance_timeout_ms,
                c.old_session_timeout_ms,
                None,
            )
            self._replace_static_member(group, c.new_member_id, c.old_member_id)
            self._ctx.complete(
                c.waiter,
                join_response(
                    version,
                    group_append_error(error),
                    "",
                    generation_id=group.generation_id,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    leader=c.previous_leader or "",
                ),
            )
            return
        if version >= 9:
            # KIP-814: tell a returning static leader that it leads, but that it must not
            # compute a new assignment, which a Stable group would not distribute.
            is_leader = group.is_leader(member.member_id)
            response = join_response(
                version,
                ErrorCode.NONE,
                member.member_id,
                generation_id=group.generation_id,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                leader=group.leader_id or "",
                members=group.current_member_metadata() if is_leader else None,
                skip_assignment=is_leader,
            )
        else:
            # Older clients are given the old leader id, so that a returning leader does
            # not believe it leads and does not run the assignor.
            response = join_response(
                version,
                ErrorCode.NONE,
                member.member_id,
                generation_id=group.generation_id,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                leader=c.previous_leader or "",
            )
        self._rebalance.deliver_join(group, member, response)
