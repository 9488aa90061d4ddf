"""The classic group's model: :class:`Group`, its :class:`Member` s, its :class:`GroupState`
and its :class:`CommittedOffset` s (Kafka's ``ClassicGroup``, ``ClassicGroupMember`` and
``ClassicGroupState``).

A group answers questions about itself (which protocol its members vote for, which of its
offsets have expired, whether a member id is fenced) and changes itself in the ways the
state machine allows, checking each transition with :func:`invariant`. It never answers a
request, sets a timer or writes a record: the managers of
:mod:`odradek.coordinator.membership`, :mod:`odradek.coordinator.rebalance`,
:mod:`odradek.coordinator.offsets`, :mod:`odradek.coordinator.admin` and
:mod:`odradek.coordinator.loading` do that, through the shared
:class:`~odradek.coordinator.context.CoordinatorContext`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from odradek.coordinator.outputs import Token
from odradek.core.errors import DecodeError
from odradek.core.invariant import invariant
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages.join_group_response import JoinGroupResponseMember
from odradek.protocol.primitives import Reader

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "CommittedOffset",
    "Group",
    "GroupState",
    "Member",
    "TopicPartition",
    "Waiter",
]

CONSUMER_PROTOCOL_TYPE = "consumer"

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
class Waiter:
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
    awaiting_join: Waiter | None = None
    awaiting_sync: Waiter | None = None

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

    # -- checks -----------------------------------------------------------------------------

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode | None:
        """FENCED_INSTANCE_ID when the instance id now belongs to another member id,
        UNKNOWN_MEMBER_ID when the instance or the member is unknown."""
        if group_instance_id is not None:
            current = self.static_members.get(group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def validate_generation(
        self, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode | None:
        """The checks a Heartbeat and a SyncGroup share, in Kafka's order: a dead group
        (COORDINATOR_NOT_AVAILABLE), the member (:meth:`validate_member`), then its
        generation (ILLEGAL_GENERATION)."""
        if self.state is _DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self.validate_member(member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != self.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return None

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
