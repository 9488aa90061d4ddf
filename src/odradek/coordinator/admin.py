"""Group administration: ListGroups, DescribeGroups and DeleteGroups (the admin requests
of Kafka's ``GroupMetadataManager``).

Listing and describing only read the groups. Deleting takes an empty group out at once,
writes tombstones for its metadata and offsets, and answers once they are durable.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.coordinator.classic_group import GroupState, Waiter
from odradek.coordinator.context import CoordinatorContext, append_error
from odradek.coordinator.outputs import Record, Token
from odradek.coordinator.record_helpers import group_tombstones
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages.delete_groups_request import DeleteGroupsRequest
from odradek.protocol.messages.delete_groups_response import (
    DeletableGroupResult,
    DeleteGroupsResponse,
)
from odradek.protocol.messages.describe_groups_request import DescribeGroupsRequest
from odradek.protocol.messages.describe_groups_response import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsResponse,
)
from odradek.protocol.messages.list_groups_request import ListGroupsRequest
from odradek.protocol.messages.list_groups_response import ListedGroup, ListGroupsResponse

__all__ = ["DeleteGroupsWrite", "GroupAdmin"]

_GROUP_TYPE = "classic"

_EMPTY = GroupState.EMPTY
_STABLE = GroupState.STABLE
_DEAD = GroupState.DEAD


@dataclass(slots=True)
class _DeleteGroups:
    token: Token
    response: DeleteGroupsResponse
    results: dict[str, DeletableGroupResult]
    writes_left: int


@dataclass(slots=True)
class DeleteGroupsWrite:
    request: _DeleteGroups
    group_ids: list[str]


class GroupAdmin:
    """ListGroups, DescribeGroups and DeleteGroups over every group in the context."""

    def __init__(self, ctx: CoordinatorContext) -> None:
        self._ctx = ctx

    def list_groups(self, token: Token, request: ListGroupsRequest, version: int) -> None:
        """ListGroups, filtered by state (v4+) and type (v5+; every group here is
        "classic"), case-insensitively as Kafka does."""
        states = {s.lower() for s in request.states_filter} if version >= 4 else set()
        types = {t.lower() for t in request.types_filter} if version >= 5 else set()
        listed: list[ListedGroup] = []
        if not types or _GROUP_TYPE in types:
            for group_id in sorted(self._ctx.groups):
                group = self._ctx.groups[group_id]
                if states and group.state.value.lower() not in states:
                    continue
                listed.append(
                    ListedGroup(
                        group_id=group_id,
                        protocol_type=group.protocol_type or "",
                        group_state=group.state.value,
                        group_type=_GROUP_TYPE,
                    )
                )
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self._ctx.loading else ErrorCode.NONE
        self._ctx.complete(
            Waiter(token, version), ListGroupsResponse(error_code=int(error), groups=listed)
        )

    def describe_groups(self, token: Token, request: DescribeGroupsRequest, version: int) -> None:
        """DescribeGroups. An unknown group is described as Dead with no error, as Kafka
        does up to v5; members show their metadata and assignment only when Stable."""
        described = []
        for group_id in request.groups:
            error = self._ctx.group_status(group_id, allow_empty_id=True)
            group = self._ctx.groups.get(group_id) if error is None else None
            if error is not None:
                described.append(DescribedGroup(error_code=int(error), group_id=group_id))
            elif group is None:
                described.append(DescribedGroup(group_id=group_id, group_state=_DEAD.value))
            else:
                stable = group.state is _STABLE and group.protocol_name is not None
                name = group.protocol_name if stable else None
                described.append(
                    DescribedGroup(
                        group_id=group_id,
                        group_state=group.state.value,
                        protocol_type=group.protocol_type or "",
                        protocol_data=name or "",
                        members=[
                            DescribedGroupMember(
                                member_id=m.member_id,
                                group_instance_id=m.group_instance_id,
                                client_id=m.client_id,
                                client_host=m.client_host,
                                member_metadata=m.metadata(name) if name else b"",
                                member_assignment=m.assignment if name else b"",
                            )
                            for m in group.members.values()
                        ],
                    )
                )
        self._ctx.complete(Waiter(token, version), DescribeGroupsResponse(groups=described))

    def delete_groups(self, token: Token, request: DeleteGroupsRequest, version: int) -> None:
        """DeleteGroups: only empty groups (NON_EMPTY_GROUP otherwise); their offsets and
        metadata become tombstones, and the answer waits until those are durable."""
        results: dict[str, DeletableGroupResult] = {}
        tombstones: dict[int, list[Record]] = {}
        deleted: dict[int, list[str]] = {}
        for group_id in request.groups_names:
            if group_id in results:
                continue
            result = DeletableGroupResult(group_id=group_id)
            results[group_id] = result
            error = self._ctx.group_status(group_id, allow_empty_id=True)
            group = self._ctx.groups.get(group_id) if error is None else None
            if error is not None:
                result.error_code = int(error)
            elif group is None or group.state is _DEAD:
                result.error_code = int(ErrorCode.GROUP_ID_NOT_FOUND)
            elif group.state is not _EMPTY:
                result.error_code = int(ErrorCode.NON_EMPTY_GROUP)
            else:
                # Offsets still being written get tombstones too: those writes come first
                # in the log, and must not outlive the group.
                offsets = list(dict.fromkeys([*group.offsets, *group.pending_offset_commits]))
                records = group_tombstones(group, offsets)
                self._ctx.drop_group(group)
                if records:
                    partition = self._ctx.partition_for(group_id)
                    tombstones.setdefault(partition, []).extend(records)
                    deleted.setdefault(partition, []).append(group_id)
        response = DeleteGroupsResponse(results=list(results.values()))
        if not tombstones:
            self._ctx.complete(Waiter(token, version), response)
            return
        pending = _DeleteGroups(token, response, results, writes_left=len(tombstones))
        for partition, records in tombstones.items():
            self._ctx.emit(partition, records, DeleteGroupsWrite(pending, deleted[partition]))

    def delete_groups_written(self, c: DeleteGroupsWrite, error: ErrorCode) -> None:
        """One partition's tombstones are durable (or failed): answer once all are."""
        request = c.request
        if error is not ErrorCode.NONE:
            for group_id in c.group_ids:
                request.results[group_id].error_code = int(append_error(error))
        request.writes_left -= 1
        if request.writes_left == 0:
            self._ctx.complete(Waiter(request.token, 0), request.response)
