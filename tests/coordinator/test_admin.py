"""ListGroups, DescribeGroups, DeleteGroups, FindCoordinator, and which node coordinates."""

from __future__ import annotations

import pytest

from odradek.coordinator import API_VERSIONS, GroupState, find_coordinator, partition_for
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages.delete_groups_response import DeleteGroupsResponse
from odradek.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from odradek.protocol.messages.find_coordinator_response import FindCoordinatorResponse
from odradek.protocol.messages.heartbeat_request import HeartbeatRequest
from odradek.protocol.messages.list_groups_request import ListGroupsRequest
from tests.coordinator.harness import Driver, expect
from tests.coordinator.test_membership import stable_group


def three_groups() -> Driver:
    """g: Stable with a; "empty": Empty after its member left; "simple": offsets only."""
    d = stable_group("a")
    d.join("e", group_id="empty")
    d.join("e")
    d.advance(3000)
    d.sync("e")
    d.leave("e")
    d.commit("tool", {("t", 0): 1}, group_id="simple")
    d.heartbeat("a")
    d.take()
    return d


def test_list_groups_with_state_and_type_filters() -> None:
    d = three_groups()
    listed = d.list_groups(version=5)
    assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups] == [
        ("empty", "consumer", "Empty", "classic"),
        ("g", "consumer", "Stable", "classic"),
        ("simple", "", "Empty", "classic"),
    ]
    assert [g.group_id for g in d.list_groups(version=4, states=["stable"]).groups] == ["g"]
    assert [g.group_id for g in d.list_groups(states=["Empty", "Dead"]).groups] == [
        "empty",
        "simple",
    ]
    # Before v4 there is no filter: everything is listed.
    assert len(d.list_groups(version=3, states=["Stable"]).groups) == 3
    by_type = d.admin(ListGroupsRequest(types_filter=["consumer"]), 5)
    assert by_type.groups == []
    by_type = d.admin(ListGroupsRequest(types_filter=["Classic"]), 5)
    assert len(by_type.groups) == 3


def test_describe_groups() -> None:
    d = three_groups()
    a = d.clients["a"].member_id
    response = d.describe("g", "empty", "missing")
    g, empty, missing = response.groups
    assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (
        0,
        "Stable",
        "consumer",
        "range",
    )
    (member,) = g.members
    assert (member.member_id, member.client_id, member.client_host) == (a, "a", "/127.0.0.1")
    assert member.member_metadata == b"r"  # the metadata of the chosen protocol
    assert member.member_assignment == b"@a#1"
    assert (empty.group_state, empty.protocol_type, empty.members) == ("Empty", "consumer", [])
    # An unknown group is described as Dead, without an error (up to v5).
    assert (missing.error_code, missing.group_state, missing.members) == (0, "Dead", [])


def test_describe_shows_no_metadata_while_rebalancing() -> None:
    d = stable_group("a", "b")
    d.join("a")
    (g,) = d.describe("g").groups
    assert g.group_state == "PreparingRebalance" and g.protocol_data == ""
    assert [(m.member_metadata, m.member_assignment) for m in g.members] == [(b"", b""), (b"", b"")]


def test_delete_groups() -> None:
    d = three_groups()
    d.auto_write = False
    token = d.delete("g", "empty", "simple", "missing", "empty")
    # Deleting empty groups writes tombstones for their offsets and metadata; the answer
    # waits until they are durable.
    assert d.take() == expect(
        """
        t=9000 write#5 p1 -group empty
        t=9000 write#6 p2 -offset simple t-0
        """
    )
    assert d.response(token) is None
    d.complete_writes()
    response = d.response(token)
    assert isinstance(response, DeleteGroupsResponse)
    assert [(r.group_id, ErrorCode(r.error_code).name) for r in response.results] == [
        ("g", "NON_EMPTY_GROUP"),
        ("empty", "NONE"),
        ("simple", "NONE"),
        ("missing", "GROUP_ID_NOT_FOUND"),
    ]
    assert d.coordinator.group("empty") is None and d.coordinator.group("simple") is None
    assert d.committed("simple") == {}
    d.delete("empty")
    assert d.take().endswith("admin DeleteGroups DeleteGroupsResponse")
    assert d.responses[max(d.responses)].results[0].error_code == int(ErrorCode.GROUP_ID_NOT_FOUND)


def test_a_failed_delete_write_reports_the_error() -> None:
    d = three_groups()
    d.auto_write = False
    token = d.delete("empty")
    d.complete_writes(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    response = d.response(token)
    assert response.results[0].error_code == int(ErrorCode.NOT_COORDINATOR)


def test_groups_of_other_partitions_get_not_coordinator() -> None:
    assert partition_for("g", 4) == 3
    d = Driver(owned_partitions=[0, 1, 2])
    d.join("a")
    d.commit("tool", {("t", 0): 1})
    d.heartbeat("a")
    assert d.take() == expect(
        """
        t=0 a JoinGroup NOT_COORDINATOR member=''
        t=0 tool OffsetCommit t-0:NOT_COORDINATOR
        t=0 a Heartbeat NOT_COORDINATOR
        """
    )
    (g,) = d.describe("g").groups
    assert g.error_code == int(ErrorCode.NOT_COORDINATOR)
    d.delete("g")
    assert d.responses[max(d.responses)].results[0].error_code == int(ErrorCode.NOT_COORDINATOR)
    # Once the partition is loaded, this node coordinates it.
    d.coordinator.load(3, [], now_ms=0)
    d.take()
    d.join("a")
    assert d.take() == "t=0 a JoinGroup MEMBER_ID_REQUIRED member=a#1"


def test_while_loading_joins_wait_heartbeats_pass_and_syncs_rejoin() -> None:
    d = stable_group("a")
    d.coordinator.begin_load(3)
    d.join("a")
    d.heartbeat("a")
    d.sync("a")
    assert d.take() == expect(
        """
        t=6000 a JoinGroup COORDINATOR_LOAD_IN_PROGRESS member=a#1
        t=6000 a Heartbeat NONE
        t=6000 a SyncGroup REBALANCE_IN_PROGRESS
        """
    )
    assert d.list_groups().error_code == int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)


def test_unload_answers_waiting_requests_and_drops_the_groups() -> None:
    d = stable_group("a", "b")
    d.join("a")
    d.commit("a", {("t", 0): 3})
    d.take()
    d.auto_write = False
    d.commit("a", {("t", 0): 4})
    d._apply(d.coordinator.unload(3, now_ms=d.now))
    assert d.take() == expect(
        """
        t=6000 write#3 p3 offset g t-0=4
        t=6000 a JoinGroup NOT_COORDINATOR member=a#1
        """
    )
    assert d.coordinator.group("g") is None
    assert d.coordinator.next_deadline_ms() == 600_000  # only the retention check is left
    d.complete_writes(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert d.take().endswith("a OffsetCommit t-0:NOT_COORDINATOR")
    d.heartbeat("b")
    assert d.take() == "t=6000 b Heartbeat NOT_COORDINATOR"


def test_handle_refuses_other_requests() -> None:
    d = Driver()
    with pytest.raises(TypeError):
        d.coordinator.handle(1, FindCoordinatorRequest(), 0, now_ms=0)
    assert API_VERSIONS[HeartbeatRequest.API_KEY] == (0, 4)


@pytest.mark.parametrize("version", range(0, 4))
def test_find_coordinator_single_key(version: int) -> None:
    request = FindCoordinatorRequest(key="my-group")
    leaders = {12: (2, "broker-2", 9092)}
    response = find_coordinator(
        request, version, offsets_topic_num_partitions=50, leader_of=leaders.get
    )
    assert (response.error_code, response.node_id, response.host, response.port) == (
        0,
        2,
        "broker-2",
        9092,
    )
    FindCoordinatorResponse.decode(response.encode(version), version)
    response = find_coordinator(
        request, version, offsets_topic_num_partitions=50, leader_of=lambda p: None
    )
    assert response.error_code == int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert response.node_id == -1
    FindCoordinatorResponse.decode(response.encode(version), version)


@pytest.mark.parametrize("version", [4, 5, 6])
def test_find_coordinator_batch(version: int) -> None:
    request = FindCoordinatorRequest(coordinator_keys=["my-group", "hello"])
    leaders = {12: (2, "b2", 9092)}
    response = find_coordinator(
        request, version, offsets_topic_num_partitions=50, leader_of=leaders.get
    )
    assert [(c.key, c.node_id, ErrorCode(c.error_code).name) for c in response.coordinators] == [
        ("my-group", 2, "NONE"),
        ("hello", -1, "COORDINATOR_NOT_AVAILABLE"),  # partition 22 has no leader
    ]
    FindCoordinatorResponse.decode(response.encode(version), version)
    txn = find_coordinator(
        FindCoordinatorRequest(key_type=1, coordinator_keys=["tx"]),
        version,
        offsets_topic_num_partitions=50,
        leader_of=leaders.get,
    )
    assert txn.coordinators[0].error_code == int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    other = find_coordinator(
        FindCoordinatorRequest(key_type=7, coordinator_keys=["x"]),
        version,
        offsets_topic_num_partitions=50,
        leader_of=leaders.get,
    )
    assert other.coordinators[0].error_code == int(ErrorCode.INVALID_REQUEST)


def test_groups_state_enum_names_are_kafkas() -> None:
    assert [s.value for s in GroupState] == [
        "Empty",
        "PreparingRebalance",
        "CompletingRebalance",
        "Stable",
        "Dead",
    ]
