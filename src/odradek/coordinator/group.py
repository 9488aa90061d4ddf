"""Consumer groups with Kafka's classic protocol, and their committed offsets, as a pure
state machine: :class:`GroupCoordinator` (one per node, many groups), :class:`Group` and
:class:`Member`.

The rules follow Kafka's ``GroupCoordinator`` (and the classic group of its newer group
coordinator): the five states, JoinGroup with MEMBER_ID_REQUIRED, protocol selection by
vote, the initial rebalance delay of a new group, rebalance timeouts that drop members
that do not rejoin, session expiry, static membership (``group.instance.id``) with
fencing, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit and OffsetFetch, ListGroups,
DescribeGroups, DeleteGroups, offset retention and the ``__consumer_offsets`` records
that make it all survive a restart.

Nothing here waits, reads a clock or does I/O. Requests come in as decoded message
objects with an opaque token and the time; every call returns an
:class:`~odradek.coordinator.outputs.Output` of responses that are ready and records to
persist (see that module for the contract). Timers are deadlines the caller learns from
:meth:`GroupCoordinator.next_deadline_ms` and fires with :meth:`GroupCoordinator.tick`.
Member ids come from an injected ``random.Random``, so a run is a function of its inputs.

Not covered: transactional offset commits (TxnOffsetCommit), so ``require_stable`` in
OffsetFetch never has anything to wait for; OffsetDelete; KIP-848 consumer groups (their
records in ``__consumer_offsets`` are skipped on load); authorization.
"""

from __future__ import annotations

import enum
import random
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from odradek.coordinator.config import GroupConfig
from odradek.coordinator.outputs import Completion, Output, Record, Token, Write
from odradek.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
    partition_for,
)
from odradek.coordinator.timers import Timers
from odradek.core.errors import DecodeError
from odradek.core.invariant import invariant
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
from odradek.protocol.messages.heartbeat_request import HeartbeatRequest
from odradek.protocol.messages.heartbeat_response import HeartbeatResponse
from odradek.protocol.messages.join_group_request import JoinGroupRequest
from odradek.protocol.messages.join_group_response import (
    JoinGroupResponse,
    JoinGroupResponseMember,
)
from odradek.protocol.messages.leave_group_request import LeaveGroupRequest, MemberIdentity
from odradek.protocol.messages.leave_group_response import LeaveGroupResponse, MemberResponse
from odradek.protocol.messages.list_groups_request import ListGroupsRequest
from odradek.protocol.messages.list_groups_response import ListedGroup, ListGroupsResponse
from odradek.protocol.messages.offset_commit_request import OffsetCommitRequest
from odradek.protocol.messages.offset_commit_response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from odradek.protocol.messages.offset_fetch_request import OffsetFetchRequest
from odradek.protocol.messages.offset_fetch_response import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from odradek.protocol.messages.sync_group_request import SyncGroupRequest
from odradek.protocol.messages.sync_group_response import SyncGroupResponse
from odradek.protocol.primitives import Reader

__all__ = [
    "API_VERSIONS",
    "CommittedOffset",
    "Group",
    "GroupCoordinator",
    "GroupState",
    "Member",
]

API_VERSIONS: dict[int, tuple[int, int]] = {
    JoinGroupRequest.API_KEY: JoinGroupRequest.VALID_VERSIONS,
    SyncGroupRequest.API_KEY: SyncGroupRequest.VALID_VERSIONS,
    HeartbeatRequest.API_KEY: HeartbeatRequest.VALID_VERSIONS,
    LeaveGroupRequest.API_KEY: LeaveGroupRequest.VALID_VERSIONS,
    OffsetCommitRequest.API_KEY: OffsetCommitRequest.VALID_VERSIONS,
    OffsetFetchRequest.API_KEY: OffsetFetchRequest.VALID_VERSIONS,
    ListGroupsRequest.API_KEY: ListGroupsRequest.VALID_VERSIONS,
    DescribeGroupsRequest.API_KEY: DescribeGroupsRequest.VALID_VERSIONS,
    DeleteGroupsRequest.API_KEY: DeleteGroupsRequest.VALID_VERSIONS,
}
"""The API versions :meth:`GroupCoordinator.handle` answers, by API key."""

CONSUMER_PROTOCOL_TYPE = "consumer"
NO_OFFSET = -1
NO_GENERATION = -1
_GROUP_TYPE = "classic"

TopicPartition = tuple[str, int]


class GroupState(enum.Enum):
    """The classic group states; the values are the names Kafka's tools show."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_EMPTY = GroupState.EMPTY
_PREPARING = GroupState.PREPARING_REBALANCE
_COMPLETING = GroupState.COMPLETING_REBALANCE
_STABLE = GroupState.STABLE
_DEAD = GroupState.DEAD

_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    _PREPARING: frozenset({_STABLE, _COMPLETING, _EMPTY}),
    _COMPLETING: frozenset({_PREPARING}),
    _STABLE: frozenset({_COMPLETING}),
    _EMPTY: frozenset({_PREPARING}),
    _DEAD: frozenset({_STABLE, _PREPARING, _COMPLETING, _EMPTY, _DEAD}),
}


@dataclass(frozen=True, slots=True)
class _Waiter:
    """A request that waits for its response: the caller's token and the API version the
    response must suit."""

    token: Token
    version: int


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    """The member's protocols in its order of preference, each with its metadata."""
    assignment: bytes = b""
    is_new: bool = False
    """Joined in the current rebalance and not yet answered: its session cannot run yet."""
    awaiting_join: _Waiter | None = None
    awaiting_sync: _Waiter | None = None

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def metadata(self, protocol_name: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol_name}")

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _metadata in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None
    write_id: int = field(default=0, compare=False)
    """Which write put it in the log (0: loaded): a later write wins, as in the log."""


class Group:
    """One classic group: its state, generation, members and committed offsets."""

    def __init__(
        self,
        group_id: str,
        now_ms: int,
        *,
        state: GroupState = _EMPTY,
        generation_id: int = 0,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        leader_id: str | None = None,
    ) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state = _DEAD
        self.generation_id = generation_id
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        # None only for groups loaded from metadata records older than version 2.
        self.current_state_timestamp_ms: int | None = now_ms
        # Dicts keep insertion order, so everything that iterates over members (the
        # leader's member list, the choice of a new leader, protocol votes) is
        # deterministic; Python sets of strings are not, from one run to the next.
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}
        self.pending_join_members: dict[str, None] = {}
        self.pending_sync_members: dict[str, None] = {}
        self.new_member_added = False
        self.offsets: dict[TopicPartition, CommittedOffset] = {}
        self.pending_offset_commits: dict[TopicPartition, int] = {}
        self.subscribed_topics: frozenset[str] | None = None
        # While the join timer is the initial rebalance delay of an empty group: how much
        # of the rebalance timeout is left for further delays. None for a plain rebalance.
        self.initial_join_remaining_ms: int | None = None

    def __repr__(self) -> str:
        return (
            f"Group({self.group_id!r}, {self.state.value}, generation={self.generation_id}, "
            f"members={list(self.members)})"
        )

    # -- queries ----------------------------------------------------------------------------

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[_PREPARING]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def has_all_members_joined(self) -> bool:
        return not self.pending_join_members and all(
            m.awaiting_join is not None for m in self.members.values()
        )

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        members = iter(self.members.values())
        first = next(members, None)
        if first is None:
            return set()
        common = {name for name, _ in first.protocols}
        for m in members:
            common &= {name for name, _ in m.protocols}
        return common

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if self.state is _EMPTY:
            return bool(protocol_type) and bool(names)
        if self.protocol_type != protocol_type:
            return False
        if not self.members:
            return True
        candidates = self.candidate_protocols()
        return any(name in candidates for name in names)

    def select_protocol(self) -> str:
        """The protocol with most votes among those every member supports (ties go to the
        one voted for first, so the choice is deterministic)."""
        invariant(bool(self.members), f"cannot select a protocol for empty group {self}")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            name = m.vote(candidates)
            votes[name] = votes.get(name, 0) + 1
        best = max(votes.values())
        return next(name for name, count in votes.items() if count == best)

    def current_member_metadata(self) -> list[JoinGroupResponseMember]:
        """Every member's metadata for the chosen protocol: what the leader assigns from."""
        name = self.protocol_name
        invariant(name is not None, f"no protocol chosen in {self}")
        assert name is not None
        return [
            JoinGroupResponseMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                metadata=m.metadata(name),
            )
            for m in self.members.values()
        ]

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """The topics the members subscribe to, when the group uses the consumer protocol
        and every subscription parses; None when unknown."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = _subscription_topics(m.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics.update(parsed)
        return frozenset(topics)

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[TopicPartition]:
        """The committed offsets that retention removes now (Kafka's expiration rules)."""
        # An empty group's offsets age from when it became empty; a group that only stores
        # offsets (no protocol type), or a Stable consumer group's offsets of topics it no
        # longer subscribes to, age from their commit. Other offsets never expire.
        since_empty: int | None = None
        subscribed: frozenset[str] = frozenset()
        if self.protocol_type:
            if self.state is _EMPTY:
                since_empty = self.current_state_timestamp_ms
            elif (
                self.protocol_type == CONSUMER_PROTOCOL_TYPE
                and self.subscribed_topics is not None
                and self.state is _STABLE
            ):
                subscribed = self.subscribed_topics
            else:
                return []
        expired = []
        for tp, o in self.offsets.items():
            if tp in self.pending_offset_commits or tp[0] in subscribed:
                continue
            if o.expire_timestamp_ms is not None:
                # OffsetCommit v2-v4 carried a retention time: the old per-offset rule.
                if now_ms >= o.expire_timestamp_ms:
                    expired.append(tp)
            else:
                base = o.commit_timestamp_ms if since_empty is None else since_empty
                if now_ms - base >= retention_ms:
                    expired.append(tp)
        return expired

    # -- changes ----------------------------------------------------------------------------

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        invariant(
            self.state in _VALID_PREVIOUS[state],
            f"group {self.group_id}: no transition from {self.state.value} to {state.value}",
        )
        self.previous_state = self.state
        self.state = state
        self.current_state_timestamp_ms = now_ms

    def add(self, member: Member) -> None:
        if member.group_instance_id is not None:
            invariant(
                member.group_instance_id not in self.static_members,
                f"static member {member.group_instance_id} is already in {self}",
            )
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        invariant(
            self.protocol_type == member.protocol_type,
            f"member {member.member_id} has protocol type {member.protocol_type!r}, "
            f"group {self.group_id} {self.protocol_type!r}",
        )
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.pending_join_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.pop(member_id, None)
        self.pending_sync_members.pop(member_id, None)
        return member

    def replace_member_id(self, old_member_id: str, new_member_id: str) -> Member:
        """Give a static member a new id, keeping its place among the members and all its
        state (the caller deals with requests still waiting under the old id)."""
        old = self.members[old_member_id]
        new = replace(old, member_id=new_member_id, awaiting_join=None, awaiting_sync=None)
        self.members = {
            (new_member_id if mid == old_member_id else mid): (new if mid == old_member_id else m)
            for mid, m in self.members.items()
        }
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        if new.group_instance_id is not None:
            self.static_members[new.group_instance_id] = new_member_id
        if old_member_id in self.pending_sync_members:
            # Kafka leaves the old id pending, so the sync timer later rebalances a group
            # that is fine; the new id owes the SyncGroup instead.
            del self.pending_sync_members[old_member_id]
            self.pending_sync_members[new_member_id] = None
        return new

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else make the first member that did the leader.
        False when the group has no leader or nobody rejoined."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join is not None:
            return True
        for m in self.members.values():
            if m.awaiting_join is not None:
                self.leader_id = m.member_id
                return True
        return False

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(_COMPLETING, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(_EMPTY, now_ms)
        self.pending_sync_members.clear()

    # -- checks -----------------------------------------------------------------------------

    def check_invariants(self) -> None:
        """Raise InvariantError if the group's state is inconsistent (used by the tests)."""
        g = self.group_id
        invariant(self.state is not _DEAD, f"{g}: a dead group is still kept")
        invariant(self.generation_id >= 0, f"{g}: negative generation")
        if self.state is _EMPTY:
            invariant(not self.members, f"{g}: empty group with members")
            invariant(not self.pending_sync_members, f"{g}: empty group awaits syncs")
        if self.members:
            invariant(self.leader_id in self.members, f"{g}: leader is not a member")
            for m in self.members.values():
                invariant(m.protocol_type == self.protocol_type, f"{g}: mixed protocol types")
        else:
            invariant(self.leader_id is None, f"{g}: leader without members")
        for instance_id, member_id in self.static_members.items():
            member = self.members.get(member_id)
            invariant(
                member is not None and member.group_instance_id == instance_id,
                f"{g}: static member {instance_id} maps to {member_id}",
            )
        for m in self.members.values():
            if m.group_instance_id is not None:
                invariant(
                    self.static_members.get(m.group_instance_id) == m.member_id,
                    f"{g}: static member {m.member_id} is not mapped",
                )
            if m.awaiting_sync is not None:
                invariant(self.state is _COMPLETING, f"{g}: a SyncGroup waits in {self.state}")
            if m.awaiting_join is not None:
                # Stable only while a static member's rejoin is being written.
                invariant(
                    self.state in (_PREPARING, _STABLE), f"{g}: a JoinGroup waits in {self.state}"
                )
        invariant(
            all(mid in self.members for mid in self.pending_sync_members),
            f"{g}: pending sync of a non-member",
        )
        if self.pending_sync_members:
            invariant(self.state in (_COMPLETING, _STABLE), f"{g}: syncs pending in {self.state}")
        invariant(
            not any(mid in self.members for mid in self.pending_join_members),
            f"{g}: a pending member is also a member",
        )
        if self.state in (_COMPLETING, _STABLE):
            name = self.protocol_name
            invariant(name is not None, f"{g}: no protocol in {self.state}")
            for m in self.members.values():
                invariant(
                    any(n == name for n, _ in m.protocols),
                    f"{g}: member {m.member_id} does not support {name}",
                )


def _subscription_topics(metadata: bytes) -> list[str] | None:
    """The topics of a ConsumerProtocolSubscription, read with its version 0 prefix (which
    every version starts with, so a newer client's subscription parses too)."""
    try:
        r = Reader(metadata)
        r.int16()
        n = r.array_length()
        if n is None:
            return None
        return [r.string() for _ in range(n)]
    except DecodeError:
        return None


def _java_length(text: str) -> int:
    """``String.length()`` in Java: UTF-16 code units, as ``offset.metadata.max.bytes``
    is checked in Kafka."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


# ---------------------------------------------------------------------------------------
# Response builders
# ---------------------------------------------------------------------------------------


def _join_response(
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


def _sync_response(
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


def _append_error(error: ErrorCode) -> ErrorCode:
    """What a failed append to ``__consumer_offsets`` tells the client (Kafka's mapping)."""
    if error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.INVALID_FETCH_SIZE,
    ):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


def _commit_append_error(error: ErrorCode) -> ErrorCode:
    if error in (
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.INVALID_FETCH_SIZE,
    ):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return _append_error(error)


def _group_append_error(error: ErrorCode) -> ErrorCode:
    # A group record that timed out may still be written; the members rejoin either way.
    if error is ErrorCode.REQUEST_TIMED_OUT:
        return ErrorCode.REBALANCE_IN_PROGRESS
    return _append_error(error)


# ---------------------------------------------------------------------------------------
# Continuations of writes
# ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class _OffsetCommitWrite:
    group: Group
    """The group as it was when the commit was made: if it has been deleted since, the
    tombstones follow this commit in the log and win."""
    token: Token
    response: OffsetCommitResponse
    entries: dict[TopicPartition, CommittedOffset]
    results: dict[TopicPartition, list[OffsetCommitResponsePartition]]


@dataclass(slots=True)
class _SyncWrite:
    group_id: str
    generation_id: int
    assignment: dict[str, bytes]


@dataclass(slots=True)
class _StaticRejoinWrite:
    group_id: str
    generation_id: int
    old_member_id: str
    new_member_id: str
    old_protocols: list[tuple[str, bytes]]
    old_rebalance_timeout_ms: int
    old_session_timeout_ms: int
    previous_leader: str | None
    waiter: _Waiter


@dataclass(slots=True)
class _DeleteGroups:
    token: Token
    response: DeleteGroupsResponse
    results: dict[str, DeletableGroupResult]
    writes_left: int


@dataclass(slots=True)
class _DeleteGroupsWrite:
    request: _DeleteGroups
    group_ids: list[str]


_Continuation = _OffsetCommitWrite | _SyncWrite | _StaticRejoinWrite | _DeleteGroupsWrite | None


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


# Timer keys. The first element says what the deadline is for.
_RETENTION = ("retention",)


def _join_key(group_id: str) -> tuple[str, str]:
    return ("join", group_id)


def _sync_key(group_id: str) -> tuple[str, str]:
    return ("sync", group_id)


def _member_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("member", group_id, member_id)


def _pending_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("pending", group_id, member_id)


# ---------------------------------------------------------------------------------------
# The coordinator
# ---------------------------------------------------------------------------------------


class GroupCoordinator:
    """Every classic group of the ``__consumer_offsets`` partitions this node leads.

    ``owned_partitions=None`` makes the node the coordinator of every partition (a single
    node); otherwise requests for groups of other partitions get NOT_COORDINATOR, and
    :meth:`load` / :meth:`unload` follow leadership changes.
    """

    def __init__(
        self,
        config: GroupConfig | None = None,
        *,
        rng: random.Random,
        owned_partitions: Iterable[int] | None = None,
        now_ms: int = 0,
    ) -> None:
        self.config = config or GroupConfig()
        self._rng = rng
        self._owned: set[int] | None = None if owned_partitions is None else set(owned_partitions)
        self._loading: set[int] = set()
        self._groups: dict[str, Group] = {}
        self._timers = Timers()
        self._pending_writes: dict[int, tuple[int, _Continuation]] = {}
        self._next_write_id = 1
        self._now = now_ms
        self._out = Output()
        self._timers.set(_RETENTION, now_ms + self.config.offsets_retention_check_interval_ms)

    # ======================================================================================
    # Queries
    # ======================================================================================

    def group(self, group_id: str) -> Group | None:
        return self._groups.get(group_id)

    def groups(self) -> Iterator[Group]:
        return iter(list(self._groups.values()))

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def next_deadline_ms(self) -> int | None:
        """When :meth:`tick` must next be called (None: nothing is timed)."""
        return self._timers.next_deadline_ms()

    def pending_write_ids(self) -> list[int]:
        return list(self._pending_writes)

    def check_invariants(self) -> None:
        """Raise InvariantError if any group or timer is inconsistent (used by the tests)."""
        for group in self._groups.values():
            group.check_invariants()
            g = group.group_id
            for m in group.members.values():
                invariant(
                    self._timers.get(_member_key(g, m.member_id)) is not None
                    or m.awaiting_join is not None
                    or m.awaiting_sync is not None,
                    f"{g}: member {m.member_id} has no session timer",
                )
            for mid in group.pending_join_members:
                invariant(
                    self._timers.get(_pending_key(g, mid)) is not None,
                    f"{g}: pending member {mid} has no timer",
                )
            invariant(
                (group.state is _PREPARING) == (self._timers.get(_join_key(g)) is not None),
                f"{g}: join timer does not match state {group.state.value}",
            )
            if group.pending_sync_members:
                invariant(
                    self._timers.get(_sync_key(g)) is not None, f"{g}: no timer for pending syncs"
                )

    # ======================================================================================
    # Requests
    # ======================================================================================

    def handle(
        self,
        token: Token,
        request: Any,
        version: int,
        *,
        now_ms: int,
        client_id: str = "",
        client_host: str = "",
        partition_exists: Callable[[str, int], bool] | None = None,
    ) -> Output:
        """Dispatch any of the group requests in :data:`API_VERSIONS` by its type."""
        if isinstance(request, JoinGroupRequest):
            return self.join_group(
                token,
                request,
                version,
                client_id=client_id,
                client_host=client_host,
                now_ms=now_ms,
            )
        if isinstance(request, SyncGroupRequest):
            return self.sync_group(token, request, version, now_ms=now_ms)
        if isinstance(request, HeartbeatRequest):
            return self.heartbeat(token, request, version, now_ms=now_ms)
        if isinstance(request, LeaveGroupRequest):
            return self.leave_group(token, request, version, now_ms=now_ms)
        if isinstance(request, OffsetCommitRequest):
            return self.offset_commit(
                token, request, version, now_ms=now_ms, partition_exists=partition_exists
            )
        if isinstance(request, OffsetFetchRequest):
            return self.offset_fetch(token, request, version, now_ms=now_ms)
        if isinstance(request, ListGroupsRequest):
            return self.list_groups(token, request, version, now_ms=now_ms)
        if isinstance(request, DescribeGroupsRequest):
            return self.describe_groups(token, request, version, now_ms=now_ms)
        if isinstance(request, DeleteGroupsRequest):
            return self.delete_groups(token, request, version, now_ms=now_ms)
        raise TypeError(f"not a group request: {type(request).__name__}")

    # -- JoinGroup ---------------------------------------------------------------------------

    def join_group(
        self,
        token: Token,
        request: JoinGroupRequest,
        version: int,
        *,
        client_id: str,
        client_host: str,
        now_ms: int,
    ) -> Output:
        """JoinGroup. ``client_id`` is the request header's, ``client_host`` the peer's
        address; both show in DescribeGroups and the persisted member metadata."""
        self._begin(now_ms)
        waiter = _Waiter(token, version)
        member_id = request.member_id
        error = self._group_status(request.group_id, allow_empty_id=False)
        if error is not None:
            self._complete(waiter, _join_response(version, error, member_id))
            return self._finish()
        session_timeout = request.session_timeout_ms
        if not (
            self.config.min_session_timeout_ms
            <= session_timeout
            <= self.config.max_session_timeout_ms
        ):
            self._complete(
                waiter, _join_response(version, ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
            )
            return self._finish()
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
        group = self._groups.get(request.group_id)
        if group is None:
            if not is_unknown:
                self._complete(
                    waiter, _join_response(version, ErrorCode.UNKNOWN_MEMBER_ID, member_id)
                )
                return self._finish()
            group = self._create_group(request.group_id)
        if not self._accept_joining_member(group, member_id):
            member = group.members.get(member_id)
            if member is not None:
                self._remove_member(group, member)
            self._complete(waiter, _join_response(version, ErrorCode.GROUP_MAX_SIZE_REACHED, ""))
        elif is_unknown:
            self._join_new_member(group, waiter, params)
        else:
            self._join_current_member(group, member_id, waiter, params)
        if group.state is _PREPARING:
            self._try_complete_join(group)
        return self._finish()

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        max_size = self.config.max_size
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

    def _join_new_member(self, group: Group, waiter: _Waiter, params: _JoinParams) -> None:
        version = waiter.version
        names = [name for name, _ in params.protocols]
        if group.state is _DEAD:
            self._complete(waiter, _join_response(version, ErrorCode.COORDINATOR_NOT_AVAILABLE, ""))
            return
        if not group.supports_protocols(params.protocol_type, names):
            self._complete(
                waiter, _join_response(version, ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "")
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
            self._timers.set(
                _pending_key(group.group_id, new_member_id),
                self._now + params.session_timeout_ms,
            )
            self._complete(
                waiter, _join_response(version, ErrorCode.MEMBER_ID_REQUIRED, new_member_id)
            )
        else:
            self._add_member_and_rebalance(group, new_member_id, waiter, params)

    def _join_current_member(
        self, group: Group, member_id: str, waiter: _Waiter, params: _JoinParams
    ) -> None:
        version = waiter.version
        names = [name for name, _ in params.protocols]
        if group.state is _DEAD:
            self._complete(
                waiter, _join_response(version, ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
            )
            return
        if not group.supports_protocols(params.protocol_type, names):
            self._complete(
                waiter, _join_response(version, ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
            )
            return
        if member_id in group.pending_join_members:
            if params.group_instance_id is not None:
                # Static members are never made pending; a client that mixes the two is
                # confused, and starting over with a fresh id is the way out.
                self._complete(
                    waiter, _join_response(version, ErrorCode.UNKNOWN_MEMBER_ID, member_id)
                )
                return
            self._add_member_and_rebalance(group, member_id, waiter, params)
            return
        error = self._validate_member(group, member_id, params.group_instance_id)
        if error is not None:
            self._complete(waiter, _join_response(version, error, member_id))
            return
        member = group.members[member_id]
        if group.state is _PREPARING:
            self._update_member_and_rebalance(group, member, waiter, params)
        elif group.state is _COMPLETING:
            if member.matches(params.protocols):
                # The member probably missed the JoinGroup response: send it again.
                self._complete(waiter, self._join_success(group, member_id, version))
            else:
                self._update_member_and_rebalance(group, member, waiter, params)
        elif group.state is _STABLE:
            if group.is_leader(member_id) or not member.matches(params.protocols):
                # A JoinGroup from the leader forces a rebalance even with unchanged
                # metadata: it is how a consumer reacts to topic metadata changes.
                self._update_member_and_rebalance(group, member, waiter, params)
            else:
                self._complete(
                    waiter, self._join_success(group, member_id, version, with_members=False)
                )
        else:
            self._complete(waiter, _join_response(version, ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _join_success(
        self, group: Group, member_id: str, version: int, *, with_members: bool = True
    ) -> JoinGroupResponse:
        leader = group.leader_id or ""
        return _join_response(
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

    def _new_member_id(self, prefix: str) -> str:
        return f"{prefix}-{uuid.UUID(int=self._rng.getrandbits(128), version=4)}"

    def _add_member_and_rebalance(
        self, group: Group, member_id: str, waiter: _Waiter, params: _JoinParams
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
        self._timers.cancel(_pending_key(group.group_id, member_id))
        # A new member has no id to heartbeat with yet, so its session cannot run; bound
        # its wait instead, in case its client gave up and will come back as another.
        self._timers.set(
            _member_key(group.group_id, member_id),
            self._now + self.config.new_member_join_timeout_ms,
        )
        self._maybe_prepare_rebalance(group)

    def _update_member(
        self,
        member: Member,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        waiter: _Waiter | None,
    ) -> None:
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        previous = member.awaiting_join
        member.awaiting_join = waiter
        if previous is not None and waiter is not None and previous != waiter:
            # Kafka drops the older request silently; answering it keeps our promise that
            # every token is completed, and a retrying client reads only the newer one.
            self._complete(
                previous,
                _join_response(previous.version, ErrorCode.REBALANCE_IN_PROGRESS, member.member_id),
            )

    def _update_member_and_rebalance(
        self, group: Group, member: Member, waiter: _Waiter, params: _JoinParams
    ) -> None:
        self._update_member(
            member,
            params.protocols,
            params.rebalance_timeout_ms,
            params.session_timeout_ms,
            waiter,
        )
        self._maybe_prepare_rebalance(group)

    def _update_static_member_and_rebalance(
        self,
        group: Group,
        old_member_id: str,
        new_member_id: str,
        waiter: _Waiter,
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
                self._emit_write(
                    group,
                    [self._group_record(group)],
                    _StaticRejoinWrite(
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
                self._maybe_prepare_rebalance(group)
        elif group.state is _COMPLETING:
            # The leader may be assigning to the old id right now; start over.
            self._prepare_rebalance(group)
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
            self._complete(
                w, _join_response(w.version, ErrorCode.FENCED_INSTANCE_ID, old_member_id)
            )
        if old.awaiting_sync is not None:
            self._complete(old.awaiting_sync, _sync_response(ErrorCode.FENCED_INSTANCE_ID))
        member = group.replace_member_id(old_member_id, new_member_id)
        self._timers.cancel(_member_key(group.group_id, old_member_id))
        self._schedule_session(group, member)
        return member

    def _validate_member(
        self, group: Group, member_id: str, group_instance_id: str | None
    ) -> ErrorCode | None:
        """FENCED_INSTANCE_ID when the instance id now belongs to another member id,
        UNKNOWN_MEMBER_ID when the instance or the member is unknown."""
        if group_instance_id is not None:
            current = group.static_members.get(group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    # -- rebalances ------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group)

    def _prepare_rebalance(self, group: Group) -> None:
        if group.state is _COMPLETING:
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        group.pending_sync_members.clear()
        self._timers.cancel(_sync_key(group.group_id))
        if group.state is _EMPTY:
            # group.initial.rebalance.delay.ms: the first members of a new group usually
            # start together; waiting a little saves a rebalance per late starter.
            delay = self.config.initial_rebalance_delay_ms
            group.initial_join_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
            group.new_member_added = False
            self._timers.set(_join_key(group.group_id), self._now + delay)
        else:
            group.initial_join_remaining_ms = None
            self._timers.set(_join_key(group.group_id), self._now + group.rebalance_timeout_ms())
        group.transition_to(_PREPARING, self._now)
        self._try_complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        # The initial delay always runs its course; a plain rebalance ends as soon as every
        # known member has rejoined.
        if (
            group.state is _PREPARING
            and group.initial_join_remaining_ms is None
            and group.has_all_members_joined()
        ):
            self._complete_join(group)

    def _on_join_deadline(self, group: Group) -> None:
        remaining = group.initial_join_remaining_ms
        if remaining is not None and group.new_member_added and remaining != 0:
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, remaining)
            group.initial_join_remaining_ms = remaining - delay
            self._timers.set(_join_key(group.group_id), self._now + delay)
            return
        self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        g = group.group_id
        self._timers.cancel(_join_key(g))
        group.initial_join_remaining_ms = None
        # Dynamic members that did not rejoin within the rebalance timeout are gone; static
        # members keep their place (they may be restarting) until their session expires.
        for member in list(group.members.values()):
            if member.awaiting_join is None and member.group_instance_id is None:
                self._remove_member(group, member)
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that have not rejoined are left: wait another round.
            self._timers.set(_join_key(g), self._now + max(group.rebalance_timeout_ms(), 1))
            return
        group.init_next_generation(self._now)
        if group.state is _EMPTY:
            # Write the empty generation so that a restarted coordinator does not bring
            # back the members of the previous one.
            self._emit_write(group, [self._group_record(group)], None)
            return
        for member in group.members.values():
            if member.awaiting_join is not None:
                response = self._join_success(group, member.member_id, member.awaiting_join.version)
                self._deliver_join(group, member, response)
            else:
                self._schedule_session(group, member)
            member.is_new = False
            group.pending_sync_members[member.member_id] = None
        self._timers.set(_sync_key(g), self._now + group.rebalance_timeout_ms())

    def _deliver_join(self, group: Group, member: Member, response: JoinGroupResponse) -> None:
        waiter = member.awaiting_join
        invariant(waiter is not None, f"no JoinGroup waits for {member.member_id}")
        assert waiter is not None
        member.awaiting_join = None
        self._complete(waiter, response)
        # The session starts (again) once the member has its answer.
        self._schedule_session(group, member)

    def _deliver_sync(self, group: Group, member: Member, response: SyncGroupResponse) -> None:
        waiter = member.awaiting_sync
        invariant(waiter is not None, f"no SyncGroup waits for {member.member_id}")
        assert waiter is not None
        member.awaiting_sync = None
        self._complete(waiter, response)
        self._schedule_session(group, member)

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
                response = _sync_response(
                    error, member.assignment, group.protocol_type, group.protocol_name
                )
            else:
                response = _sync_response(error)
            self._deliver_sync(group, member, response)

    def _schedule_session(self, group: Group, member: Member) -> None:
        self._timers.set(
            _member_key(group.group_id, member.member_id), self._now + member.session_timeout_ms
        )

    def _remove_member(self, group: Group, member: Member) -> None:
        """Take a member out, answering its waiting requests, without further effects."""
        if member.awaiting_join is not None:
            w = member.awaiting_join
            member.awaiting_join = None
            self._complete(w, _join_response(w.version, ErrorCode.UNKNOWN_MEMBER_ID, ""))
        if member.awaiting_sync is not None:
            w = member.awaiting_sync
            member.awaiting_sync = None
            self._complete(w, _sync_response(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self._timers.cancel(_member_key(group.group_id, member.member_id))

    def _remove_member_and_update_group(self, group: Group, member: Member) -> None:
        self._remove_member(group, member)
        if group.state in (_STABLE, _COMPLETING):
            self._maybe_prepare_rebalance(group)
        elif group.state is _PREPARING:
            self._try_complete_join(group)

    def _remove_pending_member_and_update_group(self, group: Group, member_id: str) -> None:
        group.pending_join_members.pop(member_id, None)
        self._timers.cancel(_pending_key(group.group_id, member_id))
        if group.state is _PREPARING:
            self._try_complete_join(group)

    # -- SyncGroup ---------------------------------------------------------------------------

    def sync_group(
        self, token: Token, request: SyncGroupRequest, version: int, *, now_ms: int
    ) -> Output:
        self._begin(now_ms)
        waiter = _Waiter(token, version)
        error = self._group_status(request.group_id, allow_empty_id=False)
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance in flight is lost with the old coordinator: rejoin at once
            # (older clients do not expect COORDINATOR_LOAD_IN_PROGRESS here).
            error = ErrorCode.REBALANCE_IN_PROGRESS
        group = self._groups.get(request.group_id) if error is None else None
        if error is None:
            error = self._validate_sync(group, request)
        if error is not None:
            self._complete(waiter, _sync_response(error))
            return self._finish()
        assert group is not None
        member = group.members[request.member_id]
        if group.state is _PREPARING:
            self._complete(waiter, _sync_response(ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.state is _COMPLETING:
            previous = member.awaiting_sync
            member.awaiting_sync = waiter
            if previous is not None and previous != waiter:
                self._complete(previous, _sync_response(ErrorCode.REBALANCE_IN_PROGRESS))
            self._remove_pending_sync_member(group, member.member_id)
            if group.is_leader(member.member_id):
                given = {a.member_id: bytes(a.assignment) for a in request.assignments}
                # Members the leader left out get an empty assignment, as in Kafka.
                assignment = {mid: given.get(mid, b"") for mid in group.members}
                self._emit_write(
                    group,
                    [self._group_record(group, assignment)],
                    _SyncWrite(group.group_id, group.generation_id, assignment),
                )
        elif group.state is _STABLE:
            self._remove_pending_sync_member(group, member.member_id)
            self._complete(
                waiter,
                _sync_response(
                    ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name
                ),
            )
            self._schedule_session(group, member)
        else:
            self._complete(waiter, _sync_response(ErrorCode.UNKNOWN_MEMBER_ID))
        return self._finish()

    def _validate_sync(self, group: Group | None, request: SyncGroupRequest) -> ErrorCode | None:
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is _DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_member(group, request.member_id, request.group_instance_id)
        if error is not None:
            return error
        if request.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
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
            self._timers.cancel(_sync_key(group.group_id))

    def _on_sync_deadline(self, group: Group) -> None:
        if group.state not in (_COMPLETING, _STABLE) or not group.pending_sync_members:
            return
        # Members that got their JoinGroup answer but never asked for their assignment
        # within the rebalance timeout are gone; the others rebalance without them.
        for member_id in list(group.pending_sync_members):
            member = group.members.get(member_id)
            if member is not None:
                self._remove_member(group, member)
        self._prepare_rebalance(group)

    # -- Heartbeat ---------------------------------------------------------------------------

    def heartbeat(
        self, token: Token, request: HeartbeatRequest, version: int, *, now_ms: int
    ) -> Output:
        self._begin(now_ms)
        error = self._heartbeat(request)
        self._complete(_Waiter(token, version), HeartbeatResponse(error_code=int(error)))
        return self._finish()

    def _heartbeat(self, request: HeartbeatRequest) -> ErrorCode:
        error = self._group_status(request.group_id, allow_empty_id=False)
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # The group is being loaded; its members are fine as far as anyone knows.
            return ErrorCode.NONE
        if error is not None:
            return error
        group = self._groups.get(request.group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is _DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_member(group, request.member_id, request.group_instance_id)
        if error is not None:
            return error
        if request.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.state is _EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._schedule_session(group, group.members[request.member_id])
        if group.state is _PREPARING:
            # How members learn that they must rejoin.
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # -- LeaveGroup --------------------------------------------------------------------------

    def leave_group(
        self, token: Token, request: LeaveGroupRequest, version: int, *, now_ms: int
    ) -> Output:
        """LeaveGroup: v0-v2 name one member; v3+ a batch, by member id or instance id."""
        self._begin(now_ms)
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
        self._complete(_Waiter(token, version), response)
        return self._finish()

    def _leave(
        self, group_id: str, identities: list[MemberIdentity]
    ) -> tuple[ErrorCode, list[tuple[MemberIdentity, ErrorCode]]]:
        error = self._group_status(group_id, allow_empty_id=False)
        if error is not None:
            return error, []
        group = self._groups.get(group_id)
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
                    self._remove_member_and_update_group(group, group.members[current])
                    results.append((identity, ErrorCode.NONE))
            elif member_id in group.pending_join_members:
                self._remove_pending_member_and_update_group(group, member_id)
                results.append((identity, ErrorCode.NONE))
            else:
                err = self._validate_member(group, member_id, identity.group_instance_id)
                if err is None:
                    self._remove_member_and_update_group(group, group.members[member_id])
                    results.append((identity, ErrorCode.NONE))
                else:
                    results.append((identity, err))
        return ErrorCode.NONE, results

    # -- OffsetCommit ------------------------------------------------------------------------

    def offset_commit(
        self,
        token: Token,
        request: OffsetCommitRequest,
        version: int,
        *,
        now_ms: int,
        partition_exists: Callable[[str, int], bool] | None = None,
    ) -> Output:
        """OffsetCommit. The response waits for the offsets to be durable (a Write).

        ``partition_exists`` lets the broker refuse partitions it does not know with
        UNKNOWN_TOPIC_OR_PARTITION, as Kafka does; without it every partition is taken.
        """
        self._begin(now_ms)
        waiter = _Waiter(token, version)
        results: dict[TopicPartition, list[OffsetCommitResponsePartition]] = {}
        response = OffsetCommitResponse(topics=[])
        for topic in request.topics:
            out_topic = OffsetCommitResponseTopic(name=topic.name, partitions=[])
            response.topics.append(out_topic)
            for p in topic.partitions:
                result = OffsetCommitResponsePartition(partition_index=p.partition_index)
                out_topic.partitions.append(result)
                results.setdefault((topic.name, p.partition_index), []).append(result)

        def fail_all(error: ErrorCode) -> Output:
            for rs in results.values():
                for r in rs:
                    r.error_code = int(error)
            self._complete(waiter, response)
            return self._finish()

        error = self._group_status(request.group_id, allow_empty_id=True)
        if error is not None:
            return fail_all(error)
        generation = request.generation_id_or_member_epoch
        group = self._groups.get(request.group_id)
        if group is None:
            if generation >= 0:
                # A member of a generation that no longer exists.
                return fail_all(ErrorCode.ILLEGAL_GENERATION)
            # Generation -1: a client that only stores offsets here (no group management).
            group = self._create_group(request.group_id)
        error = self._validate_offset_commit(
            group, request.member_id, request.group_instance_id, generation
        )
        if error is not None:
            return fail_all(error)
        member = group.members.get(request.member_id)
        if member is not None and group.state in (_STABLE, _PREPARING):
            # A commit shows the member is alive, as a heartbeat would.
            self._schedule_session(group, member)

        entries: dict[TopicPartition, CommittedOffset] = {}
        for topic in request.topics:
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                if partition_exists is not None and not partition_exists(*tp):
                    for r in results[tp]:
                        r.error_code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    entries.pop(tp, None)
                    continue
                metadata = p.committed_metadata if p.committed_metadata is not None else ""
                if _java_length(metadata) > self.config.offset_metadata_max_bytes:
                    for r in results[tp]:
                        r.error_code = int(ErrorCode.OFFSET_METADATA_TOO_LARGE)
                    entries.pop(tp, None)
                    continue
                # v1 lets the client set the commit time; v2-v4 a retention time, which
                # becomes the offset's own expire time (the rule Kafka keeps for them).
                explicit = version == 1 and p.commit_timestamp != -1
                retention = request.retention_time_ms if 2 <= version <= 4 else -1
                entries[tp] = CommittedOffset(
                    offset=p.committed_offset,
                    leader_epoch=p.committed_leader_epoch,
                    metadata=metadata,
                    commit_timestamp_ms=p.commit_timestamp if explicit else self._now,
                    expire_timestamp_ms=None if retention == -1 else self._now + retention,
                )
        if not entries:
            self._complete(waiter, response)
            return self._finish()
        records: list[Record] = [
            (
                encode_key(OffsetCommitKey(group.group_id, tp[0], tp[1])),
                _offset_value(entry),
            )
            for tp, entry in entries.items()
        ]
        for tp in entries:
            group.pending_offset_commits[tp] = group.pending_offset_commits.get(tp, 0) + 1
        self._emit_write(
            group,
            records,
            _OffsetCommitWrite(group, token, response, entries, results),
        )
        return self._finish()

    def _validate_offset_commit(
        self, group: Group, member_id: str, group_instance_id: str | None, generation: int
    ) -> ErrorCode | None:
        if group.state is _DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.state is _EMPTY:
            # Admin clients and consumers without group management commit this way.
            return None
        if generation >= 0 or member_id != "" or group_instance_id is not None:
            error = self._validate_member(group, member_id, group_instance_id)
            if error is not None:
                return error
            if generation != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif group.state is not _EMPTY:
            # Without member id and generation, only an empty group takes commits.
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is _COMPLETING:
            # The member knows the new generation but not yet its assignment: it must not
            # commit for partitions it may be about to lose.
            return ErrorCode.REBALANCE_IN_PROGRESS
        return None

    # -- OffsetFetch -------------------------------------------------------------------------

    def offset_fetch(
        self, token: Token, request: OffsetFetchRequest, version: int, *, now_ms: int
    ) -> Output:
        """OffsetFetch: v0-v7 for one group, v8+ for several.

        ``require_stable`` is accepted and has nothing to wait for: without transactions
        no commit is ever pending in a transaction, and commits pending durability are
        not visible anyway (only durable offsets are returned).
        """
        self._begin(now_ms)
        if version >= 8:
            groups = []
            for g in request.groups:
                wanted = (
                    None
                    if g.topics is None
                    else [(t.name, list(t.partition_indexes)) for t in g.topics]
                )
                error, found = self._fetch_offsets(g.group_id, wanted)
                if error is not ErrorCode.NONE:
                    found = []
                groups.append(
                    OffsetFetchResponseGroup(
                        group_id=g.group_id,
                        error_code=int(error),
                        topics=[
                            OffsetFetchResponseTopics(
                                name=name,
                                partitions=[
                                    OffsetFetchResponsePartitions(
                                        partition_index=pi,
                                        committed_offset=o,
                                        committed_leader_epoch=e,
                                        metadata=md,
                                    )
                                    for pi, o, e, md in parts
                                ],
                            )
                            for name, parts in found
                        ],
                    )
                )
            response = OffsetFetchResponse(groups=groups)
        else:
            wanted = (
                None
                if request.topics is None
                else [(t.name, list(t.partition_indexes)) for t in request.topics]
            )
            error, found = self._fetch_offsets(request.group_id, wanted)
            # v0 and v1 have no group-level error: each requested partition carries it.
            # Later versions answer a group error with no partitions, as Kafka does.
            partition_error = int(error) if version < 2 else 0
            if version >= 2 and error is not ErrorCode.NONE:
                found = []
            response = OffsetFetchResponse(
                error_code=int(error) if version >= 2 else 0,
                topics=[
                    OffsetFetchResponseTopic(
                        name=name,
                        partitions=[
                            OffsetFetchResponsePartition(
                                partition_index=pi,
                                committed_offset=o,
                                committed_leader_epoch=e,
                                metadata=md,
                                error_code=partition_error,
                            )
                            for pi, o, e, md in parts
                        ],
                    )
                    for name, parts in found
                ],
            )
        self._complete(_Waiter(token, version), response)
        return self._finish()

    def _fetch_offsets(
        self, group_id: str, wanted: list[tuple[str, list[int]]] | None
    ) -> tuple[ErrorCode, list[tuple[str, list[tuple[int, int, int, str]]]]]:
        """(error, [(topic, [(partition, offset, leader epoch, metadata)])]); ``wanted``
        None means every committed offset of the group."""
        error = self._group_status(group_id, allow_empty_id=True)
        group = self._groups.get(group_id) if error is None else None
        offsets = group.offsets if group is not None else {}
        if wanted is None:
            if error is not None:
                return error, []
            by_topic: dict[str, list[tuple[int, int, int, str]]] = {}
            for (topic, partition), o in sorted(offsets.items()):
                by_topic.setdefault(topic, []).append(
                    (partition, o.offset, o.leader_epoch, o.metadata)
                )
            return ErrorCode.NONE, list(by_topic.items())
        found = []
        for topic, partitions in wanted:
            parts = []
            for partition in partitions:
                found_offset = offsets.get((topic, partition))
                if found_offset is None:
                    parts.append((partition, NO_OFFSET, -1, ""))
                else:
                    c = found_offset
                    parts.append((partition, c.offset, c.leader_epoch, c.metadata))
            found.append((topic, parts))
        return error or ErrorCode.NONE, found

    # -- ListGroups, DescribeGroups, DeleteGroups ---------------------------------------------

    def list_groups(
        self, token: Token, request: ListGroupsRequest, version: int, *, now_ms: int
    ) -> Output:
        """ListGroups, filtered by state (v4+) and type (v5+; every group here is
        "classic"), case-insensitively as Kafka does."""
        self._begin(now_ms)
        states = {s.lower() for s in request.states_filter} if version >= 4 else set()
        types = {t.lower() for t in request.types_filter} if version >= 5 else set()
        listed: list[ListedGroup] = []
        if not types or _GROUP_TYPE in types:
            for group_id in sorted(self._groups):
                group = self._groups[group_id]
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
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self._loading else ErrorCode.NONE
        self._complete(
            _Waiter(token, version), ListGroupsResponse(error_code=int(error), groups=listed)
        )
        return self._finish()

    def describe_groups(
        self, token: Token, request: DescribeGroupsRequest, version: int, *, now_ms: int
    ) -> Output:
        """DescribeGroups. An unknown group is described as Dead with no error, as Kafka
        does up to v5; members show their metadata and assignment only when Stable."""
        self._begin(now_ms)
        described = []
        for group_id in request.groups:
            error = self._group_status(group_id, allow_empty_id=True)
            group = self._groups.get(group_id) if error is None else None
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
        self._complete(_Waiter(token, version), DescribeGroupsResponse(groups=described))
        return self._finish()

    def delete_groups(
        self, token: Token, request: DeleteGroupsRequest, version: int, *, now_ms: int
    ) -> Output:
        """DeleteGroups: only empty groups (NON_EMPTY_GROUP otherwise); their offsets and
        metadata become tombstones, and the answer waits until those are durable."""
        self._begin(now_ms)
        results: dict[str, DeletableGroupResult] = {}
        tombstones: dict[int, list[Record]] = {}
        deleted: dict[int, list[str]] = {}
        for group_id in request.groups_names:
            if group_id in results:
                continue
            result = DeletableGroupResult(group_id=group_id)
            results[group_id] = result
            error = self._group_status(group_id, allow_empty_id=True)
            group = self._groups.get(group_id) if error is None else None
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
                records = self._group_tombstones(group, offsets)
                self._drop_group(group)
                if records:
                    partition = self.partition_for(group_id)
                    tombstones.setdefault(partition, []).extend(records)
                    deleted.setdefault(partition, []).append(group_id)
        response = DeleteGroupsResponse(results=list(results.values()))
        if not tombstones:
            self._complete(_Waiter(token, version), response)
            return self._finish()
        pending = _DeleteGroups(token, response, results, writes_left=len(tombstones))
        for partition, records in tombstones.items():
            self._emit(partition, records, _DeleteGroupsWrite(pending, deleted[partition]))
        return self._finish()

    # ======================================================================================
    # Time
    # ======================================================================================

    def tick(self, now_ms: int) -> Output:
        """Fire every deadline at or before ``now_ms``: rebalance and initial delays, pending
        syncs, session expiry of members and of pending member ids, offset retention.

        Every other call does this first too, so a late tick changes nothing: a request
        at time t always sees the state with every deadline up to t handled.
        """
        self._begin(now_ms)
        return self._finish()

    def _fire_due(self) -> None:
        while (key := self._timers.pop_due(self._now)) is not None:
            assert isinstance(key, tuple)
            kind = key[0]
            if kind == "retention":
                self._expire_offsets()
                continue
            group = self._groups.get(key[1])
            if group is None:
                continue
            if kind == "join":
                if group.state is _PREPARING:
                    self._on_join_deadline(group)
            elif kind == "sync":
                self._on_sync_deadline(group)
            elif kind == "member":
                self._on_session_deadline(group, key[2])
            elif kind == "pending" and key[2] in group.pending_join_members:
                self._remove_pending_member_and_update_group(group, key[2])

    def _on_session_deadline(self, group: Group, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is None:
            return
        if not member.is_new and (
            member.awaiting_join is not None or member.awaiting_sync is not None
        ):
            # A member waiting for its JoinGroup or SyncGroup answer cannot heartbeat; its
            # session starts again with the answer.
            return
        self._remove_member_and_update_group(group, member)

    def _expire_offsets(self) -> None:
        """offsets.retention.minutes: drop expired offsets, and empty groups left with none."""
        tombstones: dict[int, list[Record]] = {}
        for group in list(self._groups.values()):
            expired = group.expired_offsets(self._now, self.config.offsets_retention_ms)
            for tp in expired:
                del group.offsets[tp]
            drop = (
                group.state is _EMPTY
                and not group.offsets
                and not group.pending_offset_commits
                and not group.pending_join_members
            )
            records = self._group_tombstones(group, expired, with_metadata=drop)
            if drop:
                self._drop_group(group)
            if records:
                tombstones.setdefault(self.partition_for(group.group_id), []).extend(records)
        for partition, records in tombstones.items():
            self._emit(partition, records, None)
        self._timers.set(_RETENTION, self._now + self.config.offsets_retention_check_interval_ms)

    # ======================================================================================
    # Persistence
    # ======================================================================================

    def write_completed(
        self, write_id: int, *, now_ms: int, error: ErrorCode | int = ErrorCode.NONE
    ) -> Output:
        """Report that a :class:`~odradek.coordinator.outputs.Write` is durable (``error``
        NONE) or has failed (the append's error, e.g. NOT_LEADER_OR_FOLLOWER,
        NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT). Releases what waited for it."""
        self._begin(now_ms)
        error = ErrorCode(error)
        entry = self._pending_writes.pop(write_id, None)
        invariant(entry is not None, f"write {write_id} is not pending")
        assert entry is not None
        _partition, continuation = entry
        if isinstance(continuation, _OffsetCommitWrite):
            self._offset_commit_written(write_id, continuation, error)
        elif isinstance(continuation, _SyncWrite):
            self._sync_written(continuation, error)
        elif isinstance(continuation, _StaticRejoinWrite):
            self._static_rejoin_written(continuation, error)
        elif isinstance(continuation, _DeleteGroupsWrite):
            request = continuation.request
            if error is not ErrorCode.NONE:
                for group_id in continuation.group_ids:
                    request.results[group_id].error_code = int(_append_error(error))
            request.writes_left -= 1
            if request.writes_left == 0:
                self._complete(_Waiter(request.token, 0), request.response)
        return self._finish()

    def _offset_commit_written(
        self, write_id: int, c: _OffsetCommitWrite, error: ErrorCode
    ) -> None:
        group = c.group
        # A group deleted since (or unloaded with its partition) is no longer the one in the
        # map: its tombstones follow this commit in the log, so the commit is void.
        alive = self._groups.get(group.group_id) is group
        if alive:
            for tp in c.entries:
                left = group.pending_offset_commits.get(tp, 0) - 1
                if left > 0:
                    group.pending_offset_commits[tp] = left
                else:
                    group.pending_offset_commits.pop(tp, None)
        if error is ErrorCode.NONE:
            if alive:
                for tp, entry in c.entries.items():
                    existing = group.offsets.get(tp)
                    # Writes reach the log in the order they were made: the later one wins
                    # even if the earlier one is reported last.
                    if existing is None or existing.write_id < write_id:
                        group.offsets[tp] = replace(entry, write_id=write_id)
        else:
            code = int(_commit_append_error(error))
            for tp in c.entries:
                for r in c.results[tp]:
                    r.error_code = code
        self._complete(_Waiter(c.token, 0), c.response)

    def _sync_written(self, c: _SyncWrite, error: ErrorCode) -> None:
        group = self._groups.get(c.group_id)
        # Another member may have joined while the assignment was being written; then
        # that rebalance has answered everyone already.
        if (
            group is None
            or group.state is not _COMPLETING
            or group.generation_id != c.generation_id
        ):
            return
        if error is not ErrorCode.NONE:
            self._reset_and_propagate_assignment_error(group, _group_append_error(error))
            self._maybe_prepare_rebalance(group)
            return
        for member in group.members.values():
            member.assignment = c.assignment.get(member.member_id, b"")
        self._propagate_assignment(group, ErrorCode.NONE)
        group.transition_to(_STABLE, self._now)

    def _static_rejoin_written(self, c: _StaticRejoinWrite, error: ErrorCode) -> None:
        group = self._groups.get(c.group_id)
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
            self._complete(
                c.waiter,
                _join_response(
                    version,
                    _group_append_error(error),
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
            response = _join_response(
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
            response = _join_response(
                version,
                ErrorCode.NONE,
                member.member_id,
                generation_id=group.generation_id,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                leader=c.previous_leader or "",
            )
        self._deliver_join(group, member, response)

    def begin_load(self, partition: int) -> None:
        """Mark ``partition`` as loading: its groups answer COORDINATOR_LOAD_IN_PROGRESS
        until :meth:`load` (optional; for a shell that reads the partition in steps)."""
        self._loading.add(partition)

    def load(self, partition: int, records: Iterable[Record], *, now_ms: int) -> Output:
        """Rebuild every group of ``partition`` from its ``__consumer_offsets`` records in
        log order (the last value of a key wins, a tombstone deletes), and become its
        coordinator.

        Groups come back Empty, or Stable with their members and assignments of the last
        persisted generation; the members' sessions start now, so live members carry on
        with heartbeats and dead ones expire and cause a rebalance, as in Kafka.
        """
        self._begin(now_ms)
        self._unload_groups(partition)
        metadata: dict[str, GroupMetadataValue | None] = {}
        offsets: dict[str, dict[TopicPartition, CommittedOffset | None]] = {}
        for key_bytes, value_bytes in records:
            key = decode_key(key_bytes)
            if isinstance(key, UnknownKey):
                continue  # KIP-848 / share group records: not ours to keep
            if isinstance(key, OffsetCommitKey):
                offsets.setdefault(key.group, {})[(key.topic, key.partition)] = (
                    None
                    if value_bytes is None
                    else _committed(decode_offset_commit_value(value_bytes))
                )
            elif isinstance(key, GroupMetadataKey):
                metadata[key.group] = (
                    None if value_bytes is None else decode_group_metadata_value(value_bytes)
                )
        for group_id, group_value in metadata.items():
            if group_value is not None:
                self._groups[group_id] = self._group_from_record(group_id, group_value)
        for group_id, entries in offsets.items():
            live = {tp: o for tp, o in entries.items() if o is not None}
            group = self._groups.get(group_id)
            if group is None:
                if not live:
                    continue
                group = self._create_group(group_id)
            group.offsets = live
        if self._owned is not None:
            self._owned.add(partition)
        self._loading.discard(partition)
        for group_id in list(metadata):
            group = self._groups.get(group_id)
            if group is None:
                continue
            for member in group.members.values():
                self._schedule_session(group, member)
            if len(group.members) > self.config.max_size:
                # A lower group.max.size than before: rebalance, so that the members
                # beyond it are shed while the others can commit first.
                self._prepare_rebalance(group)
        return self._finish()

    def _group_from_record(self, group_id: str, value: GroupMetadataValue) -> Group:
        if value.members and value.protocol is None:
            raise DecodeError(f"group {group_id}: members but no protocol in its metadata")
        group = Group(
            group_id,
            self._now,
            state=_STABLE if value.members else _EMPTY,
            generation_id=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol if value.members else None,
        )
        if value.current_state_timestamp < 0:
            group.current_state_timestamp_ms = None
        else:
            group.current_state_timestamp_ms = value.current_state_timestamp
        for m in value.members:
            group.add(
                Member(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout,
                    session_timeout_ms=m.session_timeout,
                    protocol_type=value.protocol_type,
                    protocols=[(value.protocol or "", m.subscription)],
                    assignment=m.assignment,
                )
            )
        if value.leader is not None and value.leader in group.members:
            group.leader_id = value.leader
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    def unload(self, partition: int, *, now_ms: int) -> Output:
        """Stop coordinating the groups of ``partition`` (another node leads it now):
        waiting requests are answered NOT_COORDINATOR and the groups are dropped."""
        self._begin(now_ms)
        self._unload_groups(partition)
        if self._owned is None:
            self._owned = set(range(self.config.offsets_topic_num_partitions))
        self._owned.discard(partition)
        self._loading.discard(partition)
        return self._finish()

    def _unload_groups(self, partition: int) -> None:
        for group in list(self._groups.values()):
            if self.partition_for(group.group_id) != partition:
                continue
            for member in group.members.values():
                if member.awaiting_join is not None:
                    w = member.awaiting_join
                    member.awaiting_join = None
                    self._complete(
                        w, _join_response(w.version, ErrorCode.NOT_COORDINATOR, member.member_id)
                    )
                if member.awaiting_sync is not None:
                    w = member.awaiting_sync
                    member.awaiting_sync = None
                    self._complete(w, _sync_response(ErrorCode.NOT_COORDINATOR))
            self._drop_group(group)

    # ======================================================================================
    # Helpers
    # ======================================================================================

    def _begin(self, now_ms: int) -> None:
        # Time only moves forward, even if a caller's clock steps back.
        self._now = max(self._now, now_ms)
        self._out = Output()
        self._fire_due()

    def _finish(self) -> Output:
        out, self._out = self._out, Output()
        return out

    def _complete(self, waiter: _Waiter, response: Any) -> None:
        self._out.completions.append(Completion(waiter.token, response))

    def _owns(self, partition: int) -> bool:
        return self._owned is None or partition in self._owned

    def _group_status(self, group_id: str, *, allow_empty_id: bool) -> ErrorCode | None:
        # OffsetCommit, OffsetFetch, DescribeGroups and DeleteGroups accept the empty
        # group id, for old clients that store offsets under it.
        if group_id == "" and not allow_empty_id:
            return ErrorCode.INVALID_GROUP_ID
        partition = self.partition_for(group_id)
        if partition in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if not self._owns(partition):
            return ErrorCode.NOT_COORDINATOR
        return None

    def _create_group(self, group_id: str) -> Group:
        group = Group(group_id, self._now)
        self._groups[group_id] = group
        return group

    def _drop_group(self, group: Group) -> None:
        """Forget a group and every timer of it (the caller writes any tombstones)."""
        g = group.group_id
        self._timers.cancel(_join_key(g))
        self._timers.cancel(_sync_key(g))
        for member_id in group.members:
            self._timers.cancel(_member_key(g, member_id))
        for member_id in group.pending_join_members:
            self._timers.cancel(_pending_key(g, member_id))
        group.transition_to(_DEAD, self._now)
        del self._groups[g]

    def _group_tombstones(
        self, group: Group, offsets: list[TopicPartition], *, with_metadata: bool = True
    ) -> list[Record]:
        records: list[Record] = [
            (encode_key(OffsetCommitKey(group.group_id, topic, partition)), None)
            for topic, partition in offsets
        ]
        # A group that never had a generation only stored offsets: it has no metadata
        # record to delete.
        if with_metadata and group.generation_id > 0:
            records.append((encode_key(GroupMetadataKey(group.group_id)), None))
        return records

    def _group_record(self, group: Group, assignment: dict[str, bytes] | None = None) -> Record:
        name = group.protocol_name
        value = GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=name,
            leader=group.leader_id,
            current_state_timestamp=-1
            if group.current_state_timestamp_ms is None
            else group.current_state_timestamp_ms,
            members=tuple(
                MemberMetadata(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout=m.rebalance_timeout_ms,
                    session_timeout=m.session_timeout_ms,
                    subscription=m.metadata(name) if name is not None else b"",
                    assignment=m.assignment if assignment is None else assignment[m.member_id],
                )
                for m in group.members.values()
            ),
        )
        return (
            encode_key(GroupMetadataKey(group.group_id)),
            encode_group_metadata_value(value),
        )

    def _emit_write(self, group: Group, records: list[Record], then: _Continuation) -> int:
        return self._emit(self.partition_for(group.group_id), records, then)

    def _emit(self, partition: int, records: list[Record], then: _Continuation) -> int:
        write_id = self._next_write_id
        self._next_write_id += 1
        self._pending_writes[write_id] = (partition, then)
        self._out.writes.append(Write(write_id, partition, tuple(records)))
        return write_id


def _offset_value(entry: CommittedOffset) -> bytes:
    return encode_offset_commit_value(
        OffsetCommitValue(
            offset=entry.offset,
            metadata=entry.metadata,
            commit_timestamp=entry.commit_timestamp_ms,
            leader_epoch=entry.leader_epoch,
            expire_timestamp=-1 if entry.expire_timestamp_ms is None else entry.expire_timestamp_ms,
        )
    )


def _committed(value: OffsetCommitValue) -> CommittedOffset:
    return CommittedOffset(
        offset=value.offset,
        leader_epoch=value.leader_epoch,
        metadata=value.metadata,
        commit_timestamp_ms=value.commit_timestamp,
        expire_timestamp_ms=None if value.expire_timestamp == -1 else value.expire_timestamp,
    )
