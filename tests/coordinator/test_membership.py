"""Transcripts of the classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

Each test drives the coordinator as clients and a shell would and compares the transcript
of responses and writes (see ``harness.py``) with what Kafka answers in that situation.
"""

from __future__ import annotations

from odradek.coordinator import GroupConfig, GroupState
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages.join_group_response import JoinGroupResponse
from tests.coordinator.harness import TEST_CONFIG, Driver, expect


def stable_group(*names: str, driver: Driver | None = None) -> Driver:
    """A Stable group ``g`` whose members are ``names``, the first one leading."""
    d = driver or Driver()
    for n in names:
        d.join(n)
    for n in names:
        # Dynamic members come back with the id they were given; static members were
        # taken in at once (they never get MEMBER_ID_REQUIRED).
        if d.clients[n].instance_id is None:
            d.join(n)
    d.advance(2 * TEST_CONFIG.initial_rebalance_delay_ms)
    for n in names:
        d.sync(n)
    group = d.coordinator.group("g")
    assert group is not None and group.state is GroupState.STABLE
    d.take()
    return d


def test_first_join_gets_member_id_required_then_joins_with_it() -> None:
    d = Driver()
    d.join("a")
    assert d.take() == "t=0 a JoinGroup MEMBER_ID_REQUIRED member=a#1"
    group = d.coordinator.group("g")
    assert group is not None and group.state is GroupState.EMPTY
    assert list(group.pending_join_members) == [d.clients["a"].member_id]
    assert d.clients["a"].member_id.startswith("a-")  # client_id-<uuid>

    d.join("a")
    assert d.take() == ""  # waits for the initial rebalance delay
    assert d.state() is GroupState.PREPARING_REBALANCE
    d.advance(3000)
    assert (
        d.take()
        == "t=3000 a JoinGroup NONE member=a#1 gen=1 leader=a#1 protocol=range members=[a#1]"
    )


def test_before_v4_a_new_member_gets_its_id_at_once() -> None:
    d = Driver()
    d.join("a", version=3)
    d.advance(3000)
    assert (
        d.take()
        == "t=3000 a JoinGroup NONE member=a#1 gen=1 leader=a#1 protocol=range members=[a#1]"
    )


def test_member_ids_come_from_the_injected_rng() -> None:
    ids = []
    for _ in range(2):
        d = Driver(seed=7)
        d.join("a")
        ids.append(d.clients["a"].member_id)
    assert ids[0] == ids[1]
    d = Driver(seed=8)
    d.join("a")
    assert d.clients["a"].member_id != ids[0]


def test_three_members_join_and_sync() -> None:
    d = Driver()
    for n in "abc":
        d.join(n)
    for n in "abc":
        d.join(n)
    # Members kept joining during the initial delay of the new group, so the delay was
    # extended once (at 3000) and the rebalance completes at 6000.
    d.advance(6000)
    for n in "abc":
        d.sync(n)
    assert d.take() == expect(
        """
        t=0 a JoinGroup MEMBER_ID_REQUIRED member=a#1
        t=0 b JoinGroup MEMBER_ID_REQUIRED member=b#1
        t=0 c JoinGroup MEMBER_ID_REQUIRED member=c#1
        t=6000 a JoinGroup NONE member=a#1 gen=1 leader=a#1 protocol=range members=[a#1,b#1,c#1]
        t=6000 b JoinGroup NONE member=b#1 gen=1 leader=a#1 protocol=range
        t=6000 c JoinGroup NONE member=c#1 gen=1 leader=a#1 protocol=range
        t=6000 write#1 p3 group g gen=1 protocol=range leader=a#1 members=[a#1:@a#1,b#1:@b#1,c#1:@c#1]
        t=6000 write#1 NONE
        t=6000 a SyncGroup NONE assignment=@a#1
        t=6000 b SyncGroup NONE assignment=@b#1
        t=6000 c SyncGroup NONE assignment=@c#1
        """  # noqa: E501 - a transcript line
    )
    group = d.coordinator.group("g")
    assert group is not None and group.state is GroupState.STABLE
    for n in "abc":
        d.heartbeat(n)
    assert d.take() == expect(
        """
        t=6000 a Heartbeat NONE
        t=6000 b Heartbeat NONE
        t=6000 c Heartbeat NONE
        """
    )


def test_followers_wait_for_the_leaders_assignment_and_its_write() -> None:
    d = Driver()
    for n in "ab":
        d.join(n)
    for n in "ab":
        d.join(n)
    d.advance(6000)
    d.take()
    d.auto_write = False
    d.sync("b")
    assert d.take() == ""  # the follower waits for the leader
    d.heartbeat("b")  # a member may heartbeat while it waits
    assert d.take() == "t=6000 b Heartbeat NONE"
    d.sync("a", assignments={d.clients["a"].member_id: b"p0", d.clients["b"].member_id: b"p1"})
    # The leader's assignment is persisted before anyone gets it.
    assert (
        d.take()
        == "t=6000 write#1 p3 group g gen=1 protocol=range leader=a#1 members=[a#1:p0,b#1:p1]"
    )
    group = d.coordinator.group("g")
    assert group is not None and group.state is GroupState.COMPLETING_REBALANCE
    d.complete_writes()
    assert d.take() == expect(
        """
        t=6000 write#1 NONE
        t=6000 a SyncGroup NONE assignment=p0
        t=6000 b SyncGroup NONE assignment=p1
        """
    )
    assert d.state() is GroupState.STABLE


def test_members_the_leader_leaves_out_get_an_empty_assignment() -> None:
    d = Driver()
    for n in "ab":
        d.join(n)
    for n in "ab":
        d.join(n)
    d.advance(6000)
    d.take()
    d.sync("a", assignments={d.clients["a"].member_id: b"everything"})
    d.sync("b")
    assert d.take().endswith("t=6000 b SyncGroup NONE assignment=")


def test_a_failed_assignment_write_sends_everyone_back_to_join() -> None:
    d = Driver()
    for n in "ab":
        d.join(n)
    for n in "ab":
        d.join(n)
    d.advance(6000)
    d.take()
    d.auto_write = False
    d.sync("b")
    d.sync("a")
    d.take()
    d.complete_writes(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert d.take() == expect(
        """
        t=6000 write#1 NOT_LEADER_OR_FOLLOWER
        t=6000 a SyncGroup NOT_COORDINATOR
        t=6000 b SyncGroup NOT_COORDINATOR
        """
    )
    group = d.coordinator.group("g")
    assert group is not None and group.state is GroupState.PREPARING_REBALANCE
    assert all(m.assignment == b"" for m in group.members.values())


def test_protocol_chosen_by_votes_among_protocols_all_members_support() -> None:
    d = Driver()
    d.client("a", protocols=[("range", b""), ("roundrobin", b""), ("sticky", b"")])
    d.client("b", protocols=[("roundrobin", b""), ("range", b"")])
    d.client("c", protocols=[("sticky", b""), ("roundrobin", b""), ("range", b"")])
    for n in "abc":
        d.join(n)
    for n in "abc":
        d.join(n)
    d.advance(6000)
    # sticky is not supported by b; a votes range, b and c vote roundrobin.
    assert "protocol=roundrobin" in d.take()


def test_inconsistent_protocols_are_refused() -> None:
    d = stable_group("a")
    d.client("b", protocols=[("sticky", b"")])
    d.join("b")
    d.join("c", group_id="g")
    d.clients["c"].protocols = []
    d.join("c")
    assert d.take() == expect(
        """
        t=6000 b JoinGroup INCONSISTENT_GROUP_PROTOCOL member=''
        t=6000 c JoinGroup MEMBER_ID_REQUIRED member=c#1
        t=6000 c JoinGroup INCONSISTENT_GROUP_PROTOCOL member=c#1
        """
    )


def test_session_timeout_outside_the_configured_bounds_is_refused() -> None:
    d = Driver()
    d.join("a", session_ms=999)
    d.join("b", session_ms=60_001)
    d.join("c", session_ms=60_000)
    assert d.take() == expect(
        """
        t=0 a JoinGroup INVALID_SESSION_TIMEOUT member=''
        t=0 b JoinGroup INVALID_SESSION_TIMEOUT member=''
        t=0 c JoinGroup MEMBER_ID_REQUIRED member=c#1
        """
    )


def test_empty_group_id_is_invalid_for_group_management() -> None:
    d = Driver()
    d.join("a", group_id="")
    assert d.take() == "t=0 a JoinGroup INVALID_GROUP_ID member=''"


def test_a_member_leaving_triggers_a_rebalance() -> None:
    d = stable_group("a", "b", "c")
    d.leave("b")
    d.heartbeat("a")
    d.heartbeat("c")
    d.join("c")
    d.join("a")
    d.sync("c")
    d.sync("a")
    assert d.take() == expect(
        """
        t=6000 b LeaveGroup NONE [b#1:NONE]
        t=6000 a Heartbeat REBALANCE_IN_PROGRESS
        t=6000 c Heartbeat REBALANCE_IN_PROGRESS
        t=6000 a JoinGroup NONE member=a#1 gen=2 leader=a#1 protocol=range members=[a#1,c#1]
        t=6000 c JoinGroup NONE member=c#1 gen=2 leader=a#1 protocol=range
        t=6000 write#2 p3 group g gen=2 protocol=range leader=a#1 members=[a#1:@a#1,c#1:@c#1]
        t=6000 write#2 NONE
        t=6000 a SyncGroup NONE assignment=@a#1
        t=6000 c SyncGroup NONE assignment=@c#1
        """
    )


def test_leave_before_v3_names_one_member() -> None:
    d = stable_group("a", "b")
    d.leave("b", version=2)
    d.leave("b", version=0)
    assert d.take() == expect(
        """
        t=6000 b LeaveGroup NONE
        t=6000 b LeaveGroup UNKNOWN_MEMBER_ID
        """
    )


def test_the_leader_leaving_hands_leadership_over() -> None:
    d = stable_group("a", "b")
    d.leave("a")
    d.join("b")
    assert d.take() == expect(
        """
        t=6000 a LeaveGroup NONE [a#1:NONE]
        t=6000 b JoinGroup NONE member=b#1 gen=2 leader=b#1 protocol=range members=[b#1]
        """
    )


def test_the_last_member_leaving_empties_the_group_and_persists_that() -> None:
    d = stable_group("a")
    d.leave("a")
    assert d.take() == expect(
        """
        t=6000 a LeaveGroup NONE [a#1:NONE]
        t=6000 write#2 p3 group g gen=2 protocol=None leader=None members=[]
        t=6000 write#2 NONE
        """
    )
    group = d.coordinator.group("g")
    assert group is not None and group.state is GroupState.EMPTY


def test_session_expiry_removes_the_member_and_triggers_a_rebalance() -> None:
    d = stable_group("a", "b")
    # b keeps heartbeating, a falls silent; sessions are 10 s.
    for _ in range(3):
        d.advance(4000)
        d.heartbeat("b")
    # a's session expired at 16000.
    assert d.take() == expect(
        """
        t=10000 b Heartbeat NONE
        t=14000 b Heartbeat NONE
        t=18000 b Heartbeat REBALANCE_IN_PROGRESS
        """
    )
    group = d.coordinator.group("g")
    assert group is not None and list(group.members) == [d.clients["b"].member_id]
    d.join("b")
    assert (
        d.take()
        == "t=18000 b JoinGroup NONE member=b#1 gen=2 leader=b#1 protocol=range members=[b#1]"
    )
    d.heartbeat("a")
    assert d.take() == "t=18000 a Heartbeat UNKNOWN_MEMBER_ID"


def test_rebalance_timeout_drops_a_member_that_does_not_rejoin() -> None:
    d = stable_group("a", "b")
    d.join("c")
    d.join("c")  # the new member starts a rebalance (timeout: 30 s, the members' maximum)
    d.join("a")
    # b's heartbeats go on (a consumer's heartbeat thread does while its application is
    # stuck), but b never rejoins.
    for _ in range(7):
        d.advance(4000)
        d.heartbeat("b")
    assert d.take() == expect(
        """
        t=6000 c JoinGroup MEMBER_ID_REQUIRED member=c#1
        t=10000 b Heartbeat REBALANCE_IN_PROGRESS
        t=14000 b Heartbeat REBALANCE_IN_PROGRESS
        t=18000 b Heartbeat REBALANCE_IN_PROGRESS
        t=22000 b Heartbeat REBALANCE_IN_PROGRESS
        t=26000 b Heartbeat REBALANCE_IN_PROGRESS
        t=30000 b Heartbeat REBALANCE_IN_PROGRESS
        t=34000 b Heartbeat REBALANCE_IN_PROGRESS
        """
    )
    d.advance(1999)
    assert d.take() == ""
    d.advance(1)  # the rebalance times out at 36000
    assert d.take() == expect(
        """
        t=36000 a JoinGroup NONE member=a#1 gen=2 leader=a#1 protocol=range members=[a#1,c#1]
        t=36000 c JoinGroup NONE member=c#1 gen=2 leader=a#1 protocol=range
        """
    )
    d.heartbeat("b")
    assert d.take() == "t=36000 b Heartbeat UNKNOWN_MEMBER_ID"


def test_initial_rebalance_delay_waits_and_extends_for_new_members() -> None:
    d = Driver()
    d.join("a")
    d.join("a")
    d.advance(2000)
    d.join("b")
    d.join("b")  # a new member during the delay: the delay is extended once
    d.advance(1000)
    assert d.take() == expect(
        """
        t=0 a JoinGroup MEMBER_ID_REQUIRED member=a#1
        t=2000 b JoinGroup MEMBER_ID_REQUIRED member=b#1
        """
    )
    d.advance(2999)
    assert d.take() == ""
    d.advance(1)
    assert d.take() == expect(
        """
        t=6000 a JoinGroup NONE member=a#1 gen=1 leader=a#1 protocol=range members=[a#1,b#1]
        t=6000 b JoinGroup NONE member=b#1 gen=1 leader=a#1 protocol=range
        """
    )


def test_initial_rebalance_delay_is_bounded_by_the_rebalance_timeout() -> None:
    d = Driver()
    d.client("a", rebalance_ms=5000)
    d.join("a")
    d.join("a")
    d.advance(1000)
    d.join("b")
    d.join("b")
    # Delays: 3000, then what is left of the 5000 ms rebalance timeout (2000).
    d.advance(3999)
    assert "JoinGroup NONE" not in d.take()
    d.advance(1)
    assert d.take().startswith("t=5000 a JoinGroup NONE member=a#1 gen=1")


def test_no_initial_delay_when_it_is_zero_length() -> None:
    d = Driver(GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=1000))
    d.join("a")
    d.join("a")
    d.advance(0)
    assert "t=0 a JoinGroup NONE member=a#1 gen=1" in d.take()


def test_static_member_rejoins_without_rebalance_and_its_old_id_is_fenced() -> None:
    d = Driver()
    for n in "ab":
        d.client(n, instance_id=n.upper())
    d = stable_group("a", "b", driver=d)
    old_b = d.clients["b"].member_id
    group = d.coordinator.group("g")
    assert group is not None
    # b restarts: it has lost its member id but keeps its group.instance.id.
    d.clients["b"].member_id = ""
    d.join("b")
    assert d.take() == expect(
        """
        t=6000 write#2 p3 group g gen=1 protocol=range leader=A#1 members=[A#1:@A#1,B#2:@B#1]
        t=6000 write#2 NONE
        t=6000 b JoinGroup NONE member=B#2 gen=1 leader=A#1 protocol=range
        """
    )
    # Static member ids start with the instance id; no rebalance happened.
    assert group.state is GroupState.STABLE and group.generation_id == 1
    d.sync("b")
    d.heartbeat("a")
    d.heartbeat("b")
    d.heartbeat("b", member_id=old_b)  # the old incarnation is fenced
    assert d.take() == expect(
        """
        t=6000 b SyncGroup NONE assignment=@B#1
        t=6000 a Heartbeat NONE
        t=6000 b Heartbeat NONE
        t=6000 b Heartbeat FENCED_INSTANCE_ID
        """
    )


def test_static_member_rejoin_with_other_protocols_triggers_a_rebalance() -> None:
    d = Driver()
    for n in "ab":
        d.client(n, instance_id=n)
    d = stable_group("a", "b", driver=d)
    d.clients["b"].member_id = ""
    d.clients["b"].protocols = [("roundrobin", b"rr")]  # range is no longer possible
    d.join("b")
    d.heartbeat("a")
    d.join("a")
    assert d.take() == expect(
        """
        t=6000 a Heartbeat REBALANCE_IN_PROGRESS
        t=6000 a JoinGroup NONE member=a#1 gen=2 leader=a#1 protocol=roundrobin members=[a#1,b#2]
        t=6000 b JoinGroup NONE member=b#2 gen=2 leader=a#1 protocol=roundrobin
        """
    )


def test_static_leader_rejoin_v9_skips_assignment_and_older_versions_see_the_old_leader() -> None:
    transcripts = []
    for version in (9, 8):
        d = Driver()
        d.client("a", instance_id="a")
        d = stable_group("a", "b", driver=d)
        d.clients["a"].member_id = ""  # the static leader restarts
        d.join("a", version=version)
        transcripts.append(d.take().splitlines()[-1])
    assert transcripts == [
        # v9: it is told it leads, with the members, but must not assign (KIP-814).
        "t=6000 a JoinGroup NONE member=a#2 gen=1 leader=a#2 protocol=range members=[a#2,b#1]"
        " skip_assignment",
        # Before v9: it is given the old leader id, so it does not believe it leads.
        "t=6000 a JoinGroup NONE member=a#2 gen=1 leader=a#1 protocol=range",
    ]


def test_a_static_rejoin_whose_write_fails_restores_the_old_member() -> None:
    d = Driver()
    d.client("b", instance_id="b")
    d = stable_group("a", "b", driver=d)
    old_b = d.clients["b"].member_id
    d.auto_write = False
    d.clients["b"].member_id = ""
    d.join("b")
    d.complete_writes(ErrorCode.NOT_ENOUGH_REPLICAS)
    assert d.take().splitlines()[-1] == "t=6000 b JoinGroup COORDINATOR_NOT_AVAILABLE member=''"
    response = d.responses[max(d.responses)]
    assert isinstance(response, JoinGroupResponse) and response.generation_id == 1
    group = d.coordinator.group("g")
    assert group is not None and group.static_members == {"b": old_b}
    d.heartbeat("b", member_id=old_b, generation=1)
    assert d.take() == "t=6000 b Heartbeat NONE"


def test_a_second_incarnation_of_a_static_member_fences_the_first_one_waiting() -> None:
    d = Driver()
    d.client("a", instance_id="a")
    d = stable_group("a", driver=d)
    d.auto_write = False
    d.clients["a"].member_id = ""
    first = d.join("a")
    d.clients["a"].member_id = ""
    d.join("a")
    d.complete_writes()
    assert ErrorCode(d.responses[first].error_code) is ErrorCode.FENCED_INSTANCE_ID
    assert d.take().splitlines()[-1].startswith("t=6000 a JoinGroup NONE member=a#3 gen=1")


def test_static_member_that_does_not_rejoin_keeps_its_place_until_its_session_expires() -> None:
    d = Driver()
    d.join("a")
    d.join("a")
    d.join("b", instance_id="b")  # static b joins after a, which leads
    d.advance(6000)
    d.sync("a")
    d.sync("b")
    d.join("a")  # the leader rejoins: a rebalance, which static b does not rejoin
    for _ in range(7):
        d.advance(4000)
        d.heartbeat("b")
    d.advance(2000)
    # At the rebalance timeout a dynamic member would be dropped; a static member stays in
    # the new generation (it may be restarting) and is handed to the leader.
    assert d.take().splitlines()[-1] == (
        "t=36000 a JoinGroup NONE member=a#1 gen=2 leader=a#1 protocol=range members=[a#1,b#1]"
    )
    d.sync("a")
    d.heartbeat("b")  # b is still in generation 1
    assert d.take().splitlines()[-1] == "t=36000 b Heartbeat ILLEGAL_GENERATION"
    group = d.coordinator.group("g")
    assert group is not None and group.state is GroupState.STABLE and len(group.members) == 2
    d.heartbeat("a")
    d.advance(9999)
    d.heartbeat("a")
    assert len(group.members) == 2
    d.advance(1)  # b's session, restarted with the new generation, expires
    assert d.state() is GroupState.PREPARING_REBALANCE
    assert list(group.members) == [d.clients["a"].member_id]


def test_illegal_generation_and_unknown_member() -> None:
    d = stable_group("a", "b")
    d.heartbeat("a", generation=0)
    d.heartbeat("a", member_id="nobody")
    d.sync("b", generation=7)
    d.commit("a", {("t", 0): 1}, generation=0)
    d.join("x", member_id="x-unknown")
    d.join("y", group_id="no-such-group", member_id="y-unknown")
    assert d.take() == expect(
        """
        t=6000 a Heartbeat ILLEGAL_GENERATION
        t=6000 a Heartbeat UNKNOWN_MEMBER_ID
        t=6000 b SyncGroup ILLEGAL_GENERATION
        t=6000 a OffsetCommit t-0:ILLEGAL_GENERATION
        t=6000 x JoinGroup UNKNOWN_MEMBER_ID member=x-unknown
        t=6000 y JoinGroup UNKNOWN_MEMBER_ID member=y-unknown
        """
    )


def test_sync_while_preparing_rebalance_and_heartbeat_while_completing() -> None:
    d = stable_group("a", "b")
    d.join("a")  # leader rejoin: PreparingRebalance, waiting for b
    d.sync("b")
    d.heartbeat("b")
    d.join("b")
    d.heartbeat("b")  # CompletingRebalance: a normal heartbeat
    assert d.take() == expect(
        """
        t=6000 b SyncGroup REBALANCE_IN_PROGRESS
        t=6000 b Heartbeat REBALANCE_IN_PROGRESS
        t=6000 a JoinGroup NONE member=a#1 gen=2 leader=a#1 protocol=range members=[a#1,b#1]
        t=6000 b JoinGroup NONE member=b#1 gen=2 leader=a#1 protocol=range
        t=6000 b Heartbeat NONE
        """
    )


def test_sync_v5_checks_the_protocol_type_and_name() -> None:
    d = Driver()
    d.join("a")
    d.join("a")
    d.advance(3000)
    d.take()
    d.clients["a"].protocol_name = "roundrobin"
    d.sync("a")
    d.clients["a"].protocol_name = "range"
    d.sync("a", version=4)  # v4 does not send them: no check
    assert d.take().splitlines()[0] == "t=3000 a SyncGroup INCONSISTENT_GROUP_PROTOCOL"
    response = d.responses[max(d.responses)]
    assert response.error_code == 0 and response.protocol_name == "range"


def test_follower_rejoining_a_stable_group_with_same_metadata_gets_the_generation() -> None:
    d = stable_group("a", "b")
    d.join("b")
    assert d.take() == "t=6000 b JoinGroup NONE member=b#1 gen=1 leader=a#1 protocol=range"
    group = d.coordinator.group("g")
    assert group is not None and group.state is GroupState.STABLE


def test_rejoin_during_completing_rebalance_resends_the_join_response() -> None:
    d = Driver()
    for n in "ab":
        d.join(n)
    for n in "ab":
        d.join(n)
    d.advance(6000)
    d.take()
    d.join("a")  # the leader lost its response and asks again with the same metadata
    assert (
        d.take()
        == "t=6000 a JoinGroup NONE member=a#1 gen=1 leader=a#1 protocol=range members=[a#1,b#1]"
    )


def test_members_that_do_not_sync_in_time_are_removed() -> None:
    d = Driver()
    for n in "ab":
        d.join(n)
    for n in "ab":
        d.join(n)
    d.advance(6000)
    d.sync("a")
    assert d.take().endswith("t=6000 a SyncGroup NONE assignment=@a#1")
    group = d.coordinator.group("g")
    assert group is not None and group.state is GroupState.STABLE
    # b heartbeats but never sends SyncGroup: once the rebalance timeout has passed since
    # the JoinGroup responses, it is removed and the group rebalances without it.
    for _ in range(7):
        d.advance(4000)
        d.heartbeat("a")
        d.heartbeat("b")
    assert "REBALANCE_IN_PROGRESS" not in d.take()
    d.advance(1999)
    assert group.state is GroupState.STABLE
    d.advance(1)
    assert d.state() is GroupState.PREPARING_REBALANCE
    assert list(group.members) == [d.clients["a"].member_id]
    d.heartbeat("a")
    d.heartbeat("b")
    assert d.take() == expect(
        """
        t=36000 a Heartbeat REBALANCE_IN_PROGRESS
        t=36000 b Heartbeat UNKNOWN_MEMBER_ID
        """
    )


def test_pending_member_that_never_comes_back_only_delays_the_rebalance() -> None:
    d = stable_group("a")
    d.join("b")  # gets an id, never returns
    d.join("a")  # the leader rejoins: the rebalance waits for the pending member
    assert d.take() == "t=6000 b JoinGroup MEMBER_ID_REQUIRED member=b#1"
    d.advance(9999)
    assert d.take() == ""
    d.advance(1)  # b's session (10 s) as a pending member expires
    assert (
        d.take()
        == "t=16000 a JoinGroup NONE member=a#1 gen=2 leader=a#1 protocol=range members=[a#1]"
    )


def test_leave_group_batch_by_member_id_and_by_instance_id() -> None:
    d = Driver()
    d.client("b", instance_id="b-instance")
    d = stable_group("a", "b", "c", driver=d)
    from odradek.protocol.messages.leave_group_request import LeaveGroupRequest, MemberIdentity

    request = LeaveGroupRequest(
        group_id="g",
        members=[
            MemberIdentity(member_id="", group_instance_id="b-instance"),
            MemberIdentity(member_id=d.clients["c"].member_id),
            MemberIdentity(member_id="nobody"),
            MemberIdentity(member_id="", group_instance_id="no-instance"),
        ],
    )
    d.admin(request, 5)
    assert d.take() == (
        "t=6000 admin LeaveGroup NONE [b-instance:NONE,c#1:NONE,nobody:UNKNOWN_MEMBER_ID,"
        "no-instance:UNKNOWN_MEMBER_ID]"
    )
    group = d.coordinator.group("g")
    assert group is not None and list(group.members) == [d.clients["a"].member_id]


def test_leave_with_a_fenced_instance() -> None:
    d = Driver()
    d.client("b", instance_id="b")
    d = stable_group("a", "b", driver=d)
    d.clients["b"].member_id = "someone-else"
    d.leave("b")
    assert d.take() == "t=6000 b LeaveGroup NONE [someone-else:FENCED_INSTANCE_ID]"


def test_leave_of_unknown_group_and_pending_member() -> None:
    d = Driver()
    d.join("a")
    d.leave("a")  # a pending member (it got its id, never joined) may leave
    d.client("x", group_id="nothing").member_id = "x-1"
    d.leave("x")
    assert d.take() == expect(
        """
        t=0 a JoinGroup MEMBER_ID_REQUIRED member=a#1
        t=0 a LeaveGroup NONE [a#1:NONE]
        t=0 x LeaveGroup NONE [x-1:UNKNOWN_MEMBER_ID]
        """
    )
    group = d.coordinator.group("g")
    assert group is not None and not group.pending_join_members


def test_group_max_size() -> None:
    d = Driver(GroupConfig(max_size=2, min_session_timeout_ms=1000))
    d = stable_group("a", "b", driver=d)
    d.join("c")
    d.join("b")  # members already in the group are always taken back
    assert d.take() == expect(
        """
        t=6000 c JoinGroup GROUP_MAX_SIZE_REACHED member=''
        t=6000 b JoinGroup NONE member=b#1 gen=1 leader=a#1 protocol=range
        """
    )


def test_a_new_member_that_never_completes_its_join_is_dropped_after_five_minutes() -> None:
    d = Driver()
    d.client("a", rebalance_ms=600_000)
    d.client("b", rebalance_ms=600_000)
    d = stable_group("a", "b", driver=d)
    d.join("c", rebalance_ms=600_000)
    c_join = d.join("c")
    a_join = d.join("a")

    # b keeps heartbeating but never rejoins, so the rebalance lasts its 10-minute timeout;
    # a new member's JoinGroup may only wait 5 minutes.
    def run_until(end: int) -> None:
        while d.now + 9000 <= end:
            d.advance(9000)
            d.heartbeat("b")
        d.advance(end - d.now)
        d.heartbeat("b")

    run_until(305_999)
    assert d.response(c_join) is None
    run_until(306_000)  # five minutes after c joined
    assert d.error(c_join) == "UNKNOWN_MEMBER_ID"
    run_until(605_999)
    assert d.response(a_join) is None
    run_until(606_000)  # the rebalance timeout
    assert d.error(a_join) == "NONE"
    group = d.coordinator.group("g")
    assert group is not None and list(group.members) == [d.clients["a"].member_id]


def test_join_v0_uses_the_session_timeout_as_rebalance_timeout() -> None:
    d = Driver()
    for n in "ab":
        d.join(n, version=0)
    d.advance(6000)
    for n in "ab":
        d.sync(n, version=0)
    group = d.coordinator.group("g")
    assert group is not None and group.rebalance_timeout_ms() == 10_000
    d.take()
    join = d.join("a", version=0)
    d.advance(5000)
    d.heartbeat("b", version=0)  # keeps b alive; b never rejoins
    d.advance(4999)
    assert d.take() == "t=11000 b Heartbeat REBALANCE_IN_PROGRESS"
    d.advance(1)  # the rebalance timeout is the session timeout: 10 s
    response = d.response(join)
    assert isinstance(response, JoinGroupResponse)
    assert response.generation_id == 2 and len(response.members) == 1


def test_a_request_sees_every_deadline_before_it_even_if_the_tick_is_late() -> None:
    d = stable_group("a", "b")
    d.now = 20_000  # the shell's timer has not fired yet: sessions expired at 16000
    d.heartbeat("a")
    assert d.take() == expect(
        """
        t=20000 a Heartbeat UNKNOWN_MEMBER_ID
        t=20000 write#2 p3 group g gen=2 protocol=None leader=None members=[]
        t=20000 write#2 NONE
        """
    )
