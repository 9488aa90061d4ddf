"""What a group request may do, before the group coordinator sees it (Kafka's table):

* JoinGroup, SyncGroup, Heartbeat, LeaveGroup: READ on the group;
* OffsetCommit: READ on the group, and READ on each topic committed to;
* OffsetFetch: DESCRIBE on the group, and DESCRIBE on each topic read back (a topic the
  principal may not describe is left out of an "all topics" answer);
* DescribeGroups: DESCRIBE, DeleteGroups: DELETE on each group (DescribeGroups also
  reports what the principal may do on each, KIP-430, when asked);
* ListGroups: DESCRIBE on the cluster lists every group, else those it may describe.

:func:`screen` takes the request and a decision function and returns what goes to the
coordinator (None: nothing, the refusal is the answer) and how the coordinator's answer
becomes the client's (refused parts put back with their error codes). Pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from odradek.broker.authorization import operations_bits
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from odradek.protocol.messages import offset_commit_response as ocr
from odradek.protocol.messages import offset_fetch_response as ofr
from odradek.protocol.messages.delete_groups_response import DeletableGroupResult
from odradek.protocol.messages.describe_groups_response import DescribedGroup
from odradek.security.acls import CLUSTER_NAME, AclOperation, ResourceType

__all__ = ["May", "Screened", "screen"]

May = Callable[[AclOperation, ResourceType, str], bool]
"""Whether the request's principal may do an operation on a resource."""

_GROUP_DENIED: Final = ErrorCode.GROUP_AUTHORIZATION_FAILED
_TOPIC_DENIED: Final = ErrorCode.TOPIC_AUTHORIZATION_FAILED
_READ, _DESCRIBE, _DELETE = AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE
_GROUP, _TOPIC = ResourceType.GROUP, ResourceType.TOPIC
_OFFSET_FETCH_GROUPS_VERSION: Final = 8


def _unchanged(response: Any) -> Any:
    return response


@dataclass(frozen=True)
class Screened:
    request: Any | None
    """What the coordinator handles; None when the whole request is refused."""
    finish: Callable[[Any], Any]
    """The coordinator's answer (None when it handled nothing) to the client's."""


def screen(request: Any, version: int, may: May) -> Screened:
    if isinstance(
        request, JoinGroupRequest | SyncGroupRequest | HeartbeatRequest | LeaveGroupRequest
    ):
        return _one_group(request, may)
    if isinstance(request, OffsetCommitRequest):
        return _offset_commit(request, may)
    if isinstance(request, OffsetFetchRequest):
        if version >= _OFFSET_FETCH_GROUPS_VERSION:
            return _offset_fetch_groups(request, may)
        return _offset_fetch(request, version, may)
    if isinstance(request, DescribeGroupsRequest):
        return _describe_groups(request, may)
    if isinstance(request, DeleteGroupsRequest):
        return _delete_groups(request, may)
    if isinstance(request, ListGroupsRequest):
        return _list_groups(request, may)
    return Screened(request, _unchanged)


_REFUSALS: Final[dict[type, Callable[[], Any]]] = {
    JoinGroupRequest: lambda: JoinGroupResponse(error_code=_GROUP_DENIED, member_id=""),
    SyncGroupRequest: lambda: SyncGroupResponse(error_code=_GROUP_DENIED),
    HeartbeatRequest: lambda: HeartbeatResponse(error_code=_GROUP_DENIED),
    LeaveGroupRequest: lambda: LeaveGroupResponse(error_code=_GROUP_DENIED),
}


def _one_group(request: Any, may: May) -> Screened:
    if may(_READ, _GROUP, request.group_id):
        return Screened(request, _unchanged)
    refusal = _REFUSALS[type(request)]()
    return Screened(None, lambda _: refusal)


def _may_on_group(may: May, group_id: str, operation: AclOperation) -> bool:
    return may(operation, _GROUP, group_id)


def _passing(request: Any, field: str, kept: list[Any], finish: Callable[[Any], Any]) -> Screened:
    """What goes on when some of ``request``'s ``field`` was refused: the rest (nothing,
    when nothing is left), with ``finish`` putting the refused parts back."""
    if not kept:
        return Screened(None, finish)
    return Screened(dataclasses.replace(request, **{field: kept}), finish)


def _offset_commit(request: OffsetCommitRequest, may: May) -> Screened:
    def refused(topics: list[Any], code: int) -> list[ocr.OffsetCommitResponseTopic]:
        return [
            ocr.OffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    ocr.OffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=code
                    )
                    for p in t.partitions
                ],
            )
            for t in topics
        ]

    if not may(_READ, _GROUP, request.group_id):
        answer = OffsetCommitResponse(topics=refused(request.topics, _GROUP_DENIED))
        return Screened(None, lambda _: answer)
    denied = [t for t in request.topics if not may(_READ, _TOPIC, t.name)]
    if not denied:
        return Screened(request, _unchanged)
    kept = [t for t in request.topics if t not in denied]

    def finish(response: OffsetCommitResponse | None) -> OffsetCommitResponse:
        answer = response if response is not None else OffsetCommitResponse()
        answer.topics = [*answer.topics, *refused(denied, _TOPIC_DENIED)]
        return answer

    return _passing(request, "topics", kept, finish)


def _offset_fetch(request: OffsetFetchRequest, version: int, may: May) -> Screened:
    if not may(_DESCRIBE, _GROUP, request.group_id):
        if version >= 2:
            answer = OffsetFetchResponse(error_code=_GROUP_DENIED)
        else:
            answer = OffsetFetchResponse(
                topics=[
                    ofr.OffsetFetchResponseTopic(
                        name=t.name,
                        partitions=[
                            ofr.OffsetFetchResponsePartition(
                                partition_index=i, committed_offset=-1, error_code=_GROUP_DENIED
                            )
                            for i in t.partition_indexes
                        ],
                    )
                    for t in request.topics or []
                ]
            )
        return Screened(None, lambda _: answer)
    if request.topics is None:
        # Every topic the group committed to: those it may not describe are left out.
        def visible(response: OffsetFetchResponse) -> OffsetFetchResponse:
            response.topics = [t for t in response.topics if may(_DESCRIBE, _TOPIC, t.name)]
            return response

        return Screened(request, visible)
    denied = [t for t in request.topics if not may(_DESCRIBE, _TOPIC, t.name)]
    if not denied:
        return Screened(request, _unchanged)
    kept = [t for t in request.topics if t not in denied]

    def finish(response: OffsetFetchResponse | None) -> OffsetFetchResponse:
        answer = response if response is not None else OffsetFetchResponse()
        answer.topics = [
            *answer.topics,
            *(
                ofr.OffsetFetchResponseTopic(
                    name=t.name,
                    partitions=[
                        ofr.OffsetFetchResponsePartition(
                            partition_index=i, committed_offset=-1, error_code=_TOPIC_DENIED
                        )
                        for i in t.partition_indexes
                    ],
                )
                for t in denied
            ),
        ]
        return answer

    return _passing(request, "topics", kept, finish)


def _offset_fetch_groups(request: OffsetFetchRequest, may: May) -> Screened:
    denied = [g for g in request.groups if not may(_DESCRIBE, _GROUP, g.group_id)]
    kept = [g for g in request.groups if g not in denied]
    refused_topics: dict[str, list[Any]] = {}
    screened = []
    for group in kept:
        if group.topics is None:
            screened.append(group)
            continue
        hidden = [t for t in group.topics if not may(_DESCRIBE, _TOPIC, t.name)]
        refused_topics[group.group_id] = hidden
        screened.append(
            dataclasses.replace(group, topics=[t for t in group.topics if t not in hidden])
        )

    def finish(response: OffsetFetchResponse | None) -> OffsetFetchResponse:
        answer = response if response is not None else OffsetFetchResponse()
        for group in answer.groups:
            if group.group_id in refused_topics:
                group.topics += [
                    ofr.OffsetFetchResponseTopics(
                        name=t.name,
                        partitions=[
                            ofr.OffsetFetchResponsePartitions(
                                partition_index=i, committed_offset=-1, error_code=_TOPIC_DENIED
                            )
                            for i in t.partition_indexes
                        ],
                    )
                    for t in refused_topics[group.group_id]
                ]
            else:
                group.topics = [t for t in group.topics if may(_DESCRIBE, _TOPIC, t.name)]
        answer.groups = [
            *answer.groups,
            *(
                ofr.OffsetFetchResponseGroup(group_id=g.group_id, error_code=_GROUP_DENIED)
                for g in denied
            ),
        ]
        return answer

    return _passing(request, "groups", screened, finish)


def _describe_groups(request: DescribeGroupsRequest, may: May) -> Screened:
    denied = [g for g in request.groups if not may(_DESCRIBE, _GROUP, g)]
    kept = [g for g in request.groups if g not in denied]

    def finish(response: DescribeGroupsResponse | None) -> DescribeGroupsResponse:
        answer = response if response is not None else DescribeGroupsResponse()
        if request.include_authorized_operations:
            # KIP-430: what the principal may do on each group it was shown.
            for group in answer.groups:
                if group.error_code == ErrorCode.NONE:
                    group.authorized_operations = operations_bits(
                        _GROUP, partial(_may_on_group, may, group.group_id)
                    )
        answer.groups = [
            *answer.groups,
            *(DescribedGroup(error_code=_GROUP_DENIED, group_id=g) for g in denied),
        ]
        return answer

    return _passing(request, "groups", kept, finish)


def _delete_groups(request: DeleteGroupsRequest, may: May) -> Screened:
    denied = [g for g in request.groups_names if not may(_DELETE, _GROUP, g)]
    if not denied:
        return Screened(request, _unchanged)
    kept = [g for g in request.groups_names if g not in denied]

    def finish(response: DeleteGroupsResponse | None) -> DeleteGroupsResponse:
        answer = response if response is not None else DeleteGroupsResponse()
        answer.results = [
            *answer.results,
            *(DeletableGroupResult(group_id=g, error_code=_GROUP_DENIED) for g in denied),
        ]
        return answer

    return _passing(request, "groups_names", kept, finish)


def _list_groups(request: ListGroupsRequest, may: May) -> Screened:
    if may(_DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return Screened(request, _unchanged)

    def visible(response: ListGroupsResponse) -> ListGroupsResponse:
        response.groups = [g for g in response.groups if may(_DESCRIBE, _GROUP, g.group_id)]
        return response

    return Screened(request, visible)
