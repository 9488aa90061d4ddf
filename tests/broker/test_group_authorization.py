"""The group APIs' ACL checks: refused groups and topics never reach the coordinator,
and come back in the answer with Kafka's errors."""

from __future__ import annotations

from odradek.broker.group_authorization import screen
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    JoinGroupRequest,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from odradek.protocol.messages import describe_groups_response as dg
from odradek.protocol.messages import list_groups_response as lg
from odradek.protocol.messages import offset_commit_request as oc
from odradek.protocol.messages import offset_fetch_request as of
from odradek.protocol.messages import offset_fetch_response as ofr
from odradek.security.acls import AclOperation, ResourceType

GRANTS = {
    (AclOperation.READ, ResourceType.GROUP, "mine"),
    (AclOperation.DESCRIBE, ResourceType.GROUP, "mine"),
    (AclOperation.READ, ResourceType.TOPIC, "ok"),
    (AclOperation.DESCRIBE, ResourceType.TOPIC, "ok"),
}


def may(operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
    return (operation, resource_type, name) in GRANTS


def test_a_group_it_may_not_read_is_refused_before_the_coordinator() -> None:
    screened = screen(JoinGroupRequest(group_id="theirs"), 5, may)
    assert screened.request is None
    assert screened.finish(None).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert screen(JoinGroupRequest(group_id="mine"), 5, may).request is not None


def test_commits_to_topics_it_may_not_read_are_refused_the_rest_go_through() -> None:
    request = OffsetCommitRequest(
        group_id="mine",
        topics=[
            oc.OffsetCommitRequestTopic(name=n, partitions=[oc.OffsetCommitRequestPartition(0)])
            for n in ("ok", "hidden")
        ],
    )
    screened = screen(request, 8, may)
    assert screened.request is not None
    assert [t.name for t in screened.request.topics] == ["ok"]
    answer = screened.finish(OffsetCommitResponse())
    assert [(t.name, t.partitions[0].error_code) for t in answer.topics] == [
        ("hidden", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    ]
    whole = screen(OffsetCommitRequest(group_id="theirs", topics=request.topics), 8, may)
    assert whole.request is None
    refused = whole.finish(None)
    assert {p.error_code for t in refused.topics for p in t.partitions} == {
        ErrorCode.GROUP_AUTHORIZATION_FAILED
    }


def test_an_all_topics_offset_fetch_leaves_out_what_it_may_not_describe() -> None:
    screened = screen(OffsetFetchRequest(group_id="mine", topics=None), 7, may)
    committed = OffsetFetchResponse(
        topics=[ofr.OffsetFetchResponseTopic(name=n) for n in ("ok", "hidden")]
    )
    assert [t.name for t in screened.finish(committed).topics] == ["ok"]
    denied = screen(OffsetFetchRequest(group_id="theirs", topics=None), 7, may)
    assert denied.finish(None).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED


def test_offset_fetch_for_several_groups_answers_each() -> None:
    request = OffsetFetchRequest(
        groups=[
            of.OffsetFetchRequestGroup(
                group_id="mine",
                topics=[
                    of.OffsetFetchRequestTopics(name=n, partition_indexes=[0])
                    for n in ("ok", "hidden")
                ],
            ),
            of.OffsetFetchRequestGroup(group_id="theirs", topics=None),
        ]
    )
    screened = screen(request, 8, may)
    assert screened.request is not None
    assert [g.group_id for g in screened.request.groups] == ["mine"]
    assert [t.name for t in screened.request.groups[0].topics] == ["ok"]
    answer = screened.finish(
        OffsetFetchResponse(groups=[ofr.OffsetFetchResponseGroup(group_id="mine")])
    )
    by_group = {g.group_id: g for g in answer.groups}
    assert by_group["theirs"].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    hidden = [t for t in by_group["mine"].topics if t.name == "hidden"]
    assert hidden[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_describe_groups_refuses_each_group_and_reports_authorized_operations() -> None:
    request = DescribeGroupsRequest(groups=["mine", "theirs"], include_authorized_operations=True)
    screened = screen(request, 5, may)
    assert screened.request is not None
    assert screened.request.groups == ["mine"]
    answer = screened.finish(DescribeGroupsResponse(groups=[dg.DescribedGroup(group_id="mine")]))
    by_group = {g.group_id: g for g in answer.groups}
    assert by_group["theirs"].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert by_group["mine"].authorized_operations == (1 << AclOperation.READ) | (
        1 << AclOperation.DESCRIBE
    )


def test_delete_groups_and_list_groups() -> None:
    screened = screen(DeleteGroupsRequest(groups_names=["mine", "theirs"]), 2, may)
    assert screened.request is None  # it may delete neither
    answer = screened.finish(None)
    assert isinstance(answer, DeleteGroupsResponse)
    assert {r.group_id: r.error_code for r in answer.results} == {
        "mine": ErrorCode.GROUP_AUTHORIZATION_FAILED,
        "theirs": ErrorCode.GROUP_AUTHORIZATION_FAILED,
    }
    listed = screen(ListGroupsRequest(), 4, may).finish(
        ListGroupsResponse(groups=[lg.ListedGroup(group_id=g) for g in ("mine", "theirs")])
    )
    assert [g.group_id for g in listed.groups] == ["mine"]
    everything = screen(ListGroupsRequest(), 4, lambda *_: True).finish(
        ListGroupsResponse(groups=[lg.ListedGroup(group_id=g) for g in ("mine", "theirs")])
    )
    assert [g.group_id for g in everything.groups] == ["mine", "theirs"]
