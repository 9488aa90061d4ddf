"""What the Raft core hands its driver, and what it answers the leader's commands with.

:class:`Ready` is the output of every input to :class:`~odradek.raft.core.RaftNode`
(etcd-io/raft's ``Ready``): the quorum state to make durable first
(:class:`QuorumState`, Kafka's ``quorum-state`` file), the messages to send next, the
entries committed, and the log flush to do whenever the driver can (:class:`LogFlush`,
answered with :meth:`~odradek.raft.core.RaftNode.flushed`). :class:`VoterChangeOutcome`
answers AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter; :class:`QuorumDescription` is
DescribeQuorum's view.

These are the contract between the pure core and whatever drives it (the asyncio shell,
the simulator, the unit tests' instant disk), so they live apart from the rules that fill
them: a driver reads this module, not the state machine, to learn what it must do.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.raft.log import Entry, SnapshotId
from odradek.raft.messages import Message
from odradek.raft.voters import ReplicaKey


@dataclass(frozen=True, slots=True)
class QuorumState:
    """What must survive a crash: Kafka's ``quorum-state`` file."""

    epoch: int
    voted_for: ReplicaKey | None
    leader: int | None


@dataclass(frozen=True, slots=True)
class LogFlush:
    """What the driver must make durable: the log up to ``end_offset``.

    ``log_generation`` counts the truncations the core made: a flush asked for before a
    truncation that cut below its end says nothing of the entries written since, so
    :meth:`~odradek.raft.core.RaftNode.flushed` ignores it (the core asks for another).
    """

    end_offset: int
    log_generation: int


@dataclass(frozen=True, slots=True)
class VoterChangeOutcome:
    """The immediate answer to a voter change: an error, or the offset whose commit
    completes it (reported later in ``Ready.voter_changes``)."""

    error: int
    message: str = ""
    offset: int | None = None


@dataclass(frozen=True, slots=True)
class ReplicaDescription:
    node_id: int
    directory_id: str
    log_end_offset: int
    last_fetch_ms: int | None
    last_caught_up_ms: int | None


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    """DescribeQuorum's view (meaningful on the leader; elsewhere voters only)."""

    leader: int | None
    epoch: int
    high_watermark: int
    voters: tuple[ReplicaDescription, ...]
    observers: tuple[ReplicaDescription, ...]


@dataclass(slots=True)
class Ready:
    """The outputs of one input. Persist first, then send, then apply; flush when you
    can, then call :meth:`~odradek.raft.core.RaftNode.flushed`."""

    messages: list[tuple[int, Message]] = field(default_factory=list)
    persist: QuorumState | None = None
    flush: LogFlush | None = None  # the log to make durable (no message waits for it)
    high_watermark: int | None = None  # set when it moved forward
    committed: list[Entry] = field(default_factory=list)
    snapshot: SnapshotId | None = None  # installed from the leader: reload from it first
    voter_changes: list[tuple[int, int]] = field(default_factory=list)  # (offset, error)
