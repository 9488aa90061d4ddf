"""The messages Raft nodes exchange, as small frozen dataclasses of the core's own.

They carry what KIP-595, KIP-630, KIP-853 and KIP-996 put on the wire, but not the wire
encoding: :mod:`odradek.raft.wire` maps them to and from Kafka's ``Vote``,
``BeginQuorumEpoch``, ``EndQuorumEpoch``, ``Fetch`` and ``FetchSnapshot`` messages.
``request_id`` stands in for the correlation id: a response answers the request with
that id, and the core ignores a response whose id is not the one it waits for.

A destination is a node id, or :func:`bootstrap_destination` of an index into
``controller.quorum.bootstrap.servers`` when the node knows no voter to ask.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.raft.log import Entry, SnapshotId
from odradek.raft.voters import ReplicaKey


def bootstrap_destination(index: int) -> int:
    """The destination meaning "bootstrap server number ``index``" (always negative)."""
    return -1 - index


def bootstrap_index(destination: int) -> int | None:
    """The bootstrap server index of a destination, or None for a node id."""
    return -1 - destination if destination < 0 else None


@dataclass(frozen=True, slots=True)
class VoteRequest:
    """A (pre-)vote request. A pre-vote changes nothing on the receiver (KIP-996)."""

    epoch: int
    candidate: ReplicaKey
    voter: ReplicaKey  # the receiver as the candidate knows it (KIP-853)
    last_epoch: int
    last_offset: int  # the candidate's log end offset
    pre_vote: bool


@dataclass(frozen=True, slots=True)
class VoteResponse:
    epoch: int
    granted: bool
    pre_vote: bool
    leader: int | None = None  # the leader the responder knows in ``epoch``, if any
    error: int = 0


@dataclass(frozen=True, slots=True)
class BeginQuorumEpoch:
    """Sent by a new leader to every other voter; receivers become its followers."""

    epoch: int
    leader: int
    voter: ReplicaKey  # the receiver as the leader knows it


@dataclass(frozen=True, slots=True)
class EndQuorumEpoch:
    """A leader that steps down on purpose; successors listed best first (most caught up)."""

    epoch: int
    leader: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A follower's or observer's pull. The leader may hold it up to ``max_wait_ms``."""

    epoch: int
    replica: ReplicaKey
    fetch_offset: int
    last_fetched_epoch: int
    request_id: int
    max_wait_ms: int = 0


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """Entries from ``fetch_offset``; or, when the fetcher's log diverges, the epoch and end
    offset it must truncate to; or, when the fetch offset is below the log start, the
    snapshot to fetch. ``error`` is a Kafka error code (NOT_LEADER_OR_FOLLOWER,
    FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH) with ``leader``/``epoch`` as the hint."""

    epoch: int
    leader: int | None
    high_watermark: int
    entries: tuple[Entry, ...]
    request_id: int
    diverging_epoch: int | None = None
    diverging_end_offset: int | None = None
    snapshot_id: SnapshotId | None = None
    error: int = 0


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    epoch: int
    replica: ReplicaKey
    snapshot_id: SnapshotId
    position: int
    request_id: int
    max_bytes: int = 1 << 20


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    """A chunk of the snapshot file from ``position``; ``size`` is the whole file's."""

    epoch: int
    leader: int | None
    snapshot_id: SnapshotId
    size: int
    position: int
    chunk: bytes
    request_id: int
    error: int = 0


Message = (
    VoteRequest
    | VoteResponse
    | BeginQuorumEpoch
    | EndQuorumEpoch
    | FetchRequest
    | FetchResponse
    | FetchSnapshotRequest
    | FetchSnapshotResponse
)
