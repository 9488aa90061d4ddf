"""The roles of a Raft replica, one small class each, and the transitions between them.

This follows Kafka's ``QuorumState`` and its ``EpochState`` classes (``UnattachedState``,
``ProspectiveState``, ``CandidateState``, ``LeaderState``, ``FollowerState``,
``ResignedState``): a replica is in exactly one role, the role object holds only what
that role needs, and :func:`check_transition` refuses any move the table
:data:`TRANSITIONS` does not list. A field that exists in one role only cannot be read
stale in another, and a transition nobody planned stops the node loudly instead of
leaving it half in one role and half in the next.

Every role carries the epoch and the vote of the quorum state (what survives a crash,
with the leader); a role is replaced, never rewound, when the epoch changes.

Observers (KIP-853) have no role of their own: a replica outside the voter set is
Unattached (looking for the leader) or a Follower, like Kafka's observers. An observer's
Unattached state may have no election deadline, since it never campaigns.

What outlives a role is not here: the log, the high watermark, the voter set, and the
fetch in flight (a fetch sent to a bootstrap server by a prospective voter may be
answered once it is a candidate; Kafka keeps requests in its ``RequestManager`` too).
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from odradek.core.invariant import invariant
from odradek.raft.log import SnapshotId
from odradek.raft.messages import FetchRequest
from odradek.raft.voters import ZERO_DIRECTORY, ReplicaKey


class State(enum.Enum):
    UNATTACHED = "unattached"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"
    RESIGNED = "resigned"


@dataclass(slots=True)
class ReplicaProgress:
    """What the leader knows of one fetching replica (voter or observer)."""

    key: ReplicaKey
    end_offset: int = 0  # the log end offset it proved to share with the leader
    last_fetch_ms: int | None = None
    last_caught_up_ms: int | None = None
    # The leader's log end when this replica last fetched: a fetch that reaches it
    # proves the replica was caught up at that earlier fetch (Kafka's rule), so a
    # replica of a leader that appends steadily still counts as caught up.
    leader_end_at_last_fetch: int | None = None
    sent_high_watermark: int = -1


@dataclass(slots=True)
class UnattachedState:
    """No leader known in ``epoch``, maybe a vote given in it. A voter campaigns once
    ``election_deadline_ms`` passes; an observer fetches from anyone to find the leader
    (its deadline may be None: it never campaigns)."""

    STATE: ClassVar[State] = State.UNATTACHED
    epoch: int
    voted_for: ReplicaKey | None
    election_deadline_ms: int | None

    @property
    def leader(self) -> int | None:
        return None


@dataclass(slots=True)
class ProspectiveState:
    """Asking pre-votes (KIP-996) without raising the epoch; ``granted`` includes us."""

    STATE: ClassVar[State] = State.PROSPECTIVE
    epoch: int
    voted_for: ReplicaKey | None
    election_deadline_ms: int
    granted: set[int]

    @property
    def leader(self) -> int | None:
        return None


@dataclass(slots=True)
class CandidateState:
    """Asking votes in the epoch it raised; ``voted_for`` is its own key."""

    STATE: ClassVar[State] = State.CANDIDATE
    epoch: int
    voted_for: ReplicaKey
    election_deadline_ms: int
    granted: set[int]

    @property
    def leader(self) -> int | None:
        return None


@dataclass(slots=True)
class LeaderState:
    """Leading ``epoch``: the replicas' progress, the fetches it holds open (``parked``:
    the request and when to answer it anyway) and the voter changes not yet committed."""

    STATE: ClassVar[State] = State.LEADER
    epoch: int
    voted_for: ReplicaKey | None
    leader: int
    epoch_start_offset: int  # the offset of its leader-change entry
    progress: dict[int, ReplicaProgress] = field(default_factory=dict)
    begin_sent_ms: dict[int, int] = field(default_factory=dict)
    fetched_this_epoch: set[int] = field(default_factory=set)
    parked: dict[int, tuple[FetchRequest, int]] = field(default_factory=dict)
    pending_changes: list[int] = field(default_factory=list)

    def progress_of(
        self, node_id: int, directory_id: uuid.UUID = ZERO_DIRECTORY
    ) -> ReplicaProgress:
        """The progress of ``node_id``, started at nothing when it is new."""
        progress = self.progress.get(node_id)
        if progress is None:
            progress = ReplicaProgress(ReplicaKey(node_id, directory_id))
            self.progress[node_id] = progress
        return progress


@dataclass(slots=True)
class FollowerState:
    """Fetching from ``leader``; it campaigns (a voter) or looks for the leader again (an
    observer) when no fetch succeeds before ``fetch_deadline_ms``."""

    STATE: ClassVar[State] = State.FOLLOWER
    epoch: int
    voted_for: ReplicaKey | None
    leader: int
    fetch_deadline_ms: int
    # Only a successful fetch proves the leader alive (Kafka's hasFetchedFromLeader).
    last_leader_contact_ms: int | None = None
    snapshot_fetch: tuple[SnapshotId, bytearray] | None = None  # the snapshot so far


@dataclass(slots=True)
class ResignedState:
    """A leader that stepped down, waiting for the next election. ``leader`` is our own
    id when we stepped down while running, None when we restarted after leading."""

    STATE: ClassVar[State] = State.RESIGNED
    epoch: int
    voted_for: ReplicaKey | None
    leader: int | None
    election_deadline_ms: int


Role = (
    UnattachedState
    | ProspectiveState
    | CandidateState
    | LeaderState
    | FollowerState
    | ResignedState
)


class EpochChange(enum.Enum):
    """How the epoch may move in one transition."""

    SAME = "the same epoch"
    NEXT = "the next epoch"
    HIGHER = "a higher epoch"
    SAME_OR_HIGHER = "the same or a higher epoch"

    def allows(self, old: int, new: int) -> bool:
        if self is EpochChange.SAME:
            return new == old
        if self is EpochChange.NEXT:
            return new == old + 1
        if self is EpochChange.HIGHER:
            return new > old
        return new >= old


_SAME, _NEXT, _HIGHER, _SAME_OR_HIGHER = (
    EpochChange.SAME,
    EpochChange.NEXT,
    EpochChange.HIGHER,
    EpochChange.SAME_OR_HIGHER,
)

TRANSITIONS: dict[tuple[type[Role], type[Role]], EpochChange] = {
    # Every role moves to Unattached on learning of a higher epoch. The others also
    # do so in their own epoch when they lose their leader (EndQuorumEpoch, or an
    # observer's fetch timeout) or when they find they are observers.
    (UnattachedState, UnattachedState): _HIGHER,
    (ProspectiveState, UnattachedState): _SAME_OR_HIGHER,
    (CandidateState, UnattachedState): _SAME_OR_HIGHER,
    (LeaderState, UnattachedState): _HIGHER,
    (FollowerState, UnattachedState): _SAME_OR_HIGHER,
    (ResignedState, UnattachedState): _SAME_OR_HIGHER,
    # An election timeout (or a fetch timeout) starts a pre-vote round in the epoch.
    (UnattachedState, ProspectiveState): _SAME,
    (ProspectiveState, ProspectiveState): _SAME,
    (CandidateState, ProspectiveState): _SAME,
    (FollowerState, ProspectiveState): _SAME,
    (ResignedState, ProspectiveState): _SAME,
    # A majority of pre-votes raises the epoch by one; a majority of votes elects.
    (ProspectiveState, CandidateState): _NEXT,
    (CandidateState, LeaderState): _SAME,
    (LeaderState, ResignedState): _SAME,
    # A leader found in our epoch (when we know none) or in a higher one. A leader or
    # a follower of another leader only follows in a higher epoch: two leaders in one
    # epoch is the bug Raft exists to prevent.
    (UnattachedState, FollowerState): _SAME_OR_HIGHER,
    (ProspectiveState, FollowerState): _SAME_OR_HIGHER,
    (CandidateState, FollowerState): _SAME_OR_HIGHER,
    (ResignedState, FollowerState): _SAME_OR_HIGHER,
    (LeaderState, FollowerState): _HIGHER,
    (FollowerState, FollowerState): _HIGHER,
}


def check_transition(old: Role, new: Role) -> None:
    """Raise InvariantError unless :data:`TRANSITIONS` allows ``old`` to become ``new``."""
    rule = TRANSITIONS.get((type(old), type(new)))
    invariant(rule is not None, f"no transition from {old.STATE.value} to {new.STATE.value}")
    assert rule is not None
    invariant(
        rule.allows(old.epoch, new.epoch),
        f"{old.STATE.value} to {new.STATE.value} needs {rule.value}, "
        f"not epoch {old.epoch} to {new.epoch}",
    )
