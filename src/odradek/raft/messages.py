"""The messages Raft nodes exchange, as small frozen dataclasses of the core's own.

These are deliberately not the generated Kafka wire classes: the mapping to
``VoteRequest``/``VoteResponse``/``BeginQuorumEpochRequest``/``FetchRequest``/
``FetchResponse`` (``replica_state.replica_id``, ``last_fetched_epoch``,
``diverging_epoch``, ``current_leader``, ``high_watermark``, record batches, correlation
ids) is a later step done by the layer that owns the sockets.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.raft.log import Entry


@dataclass(frozen=True, slots=True)
class VoteRequest:
    """A (pre-)vote request. A pre-vote changes nothing on the receiver (KIP-996)."""

    epoch: int
    candidate: int
    last_epoch: int
    last_offset: int  # the candidate's log end offset
    pre_vote: bool


@dataclass(frozen=True, slots=True)
class VoteResponse:
    epoch: int
    granted: bool
    pre_vote: bool
    leader: int | None = None  # the leader the responder knows in ``epoch``, if any


@dataclass(frozen=True, slots=True)
class BeginQuorumEpoch:
    """Sent by a new leader to every other voter; receivers become its followers."""

    epoch: int
    leader: int


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A follower's pull. ``request_id`` stands in for the wire's correlation id."""

    epoch: int
    replica: int
    fetch_offset: int
    last_fetched_epoch: int
    request_id: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """Entries from ``fetch_offset``, or, when the follower's log diverges, the epoch and end
    offset it must truncate to (``diverging_epoch``/``diverging_end_offset``)."""

    epoch: int
    leader: int | None
    high_watermark: int
    entries: tuple[Entry, ...]
    request_id: int
    diverging_epoch: int | None = None
    diverging_end_offset: int | None = None


Message = VoteRequest | VoteResponse | BeginQuorumEpoch | FetchRequest | FetchResponse
