"""Every Raft message survives the trip through Kafka's wire encoding, both ways."""

from __future__ import annotations

import uuid

import pytest

from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import fetch_request as fq
from odradek.protocol.messages import vote_request as vq
from odradek.protocol.primitives import Reader, Writer
from odradek.protocol.record_batch import (
    ControlType,
)
from odradek.raft import wire
from odradek.raft.log import Entry, SnapshotId
from odradek.raft.messages import (
    BeginQuorumEpoch,
    EndQuorumEpoch,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    VoteRequest,
    VoteResponse,
)
from odradek.raft.voters import ReplicaKey

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qk"
A = ReplicaKey(1, uuid.UUID(int=11))
B = ReplicaKey(2, uuid.UUID(int=22))


def roundtrip(body: object, version: int) -> object:
    """Encode and decode a wire body at ``version``, as the peer would see it."""
    w = Writer()
    body.write(w, version)  # type: ignore[attr-defined]
    return type(body).read(Reader(w.getvalue()), version)  # type: ignore[attr-defined]


VERSIONS = {
    VoteRequest: wire.VOTE_VERSION,
    BeginQuorumEpoch: wire.BEGIN_QUORUM_EPOCH_VERSION,
    EndQuorumEpoch: wire.END_QUORUM_EPOCH_VERSION,
    FetchRequest: wire.FETCH_VERSION,
    FetchSnapshotRequest: wire.FETCH_SNAPSHOT_VERSION,
}

REQUESTS: list[tuple[Message, int]] = [
    (VoteRequest(7, A, B, 6, 120, pre_vote=True), 1),
    (VoteRequest(7, A, B, 6, 120, pre_vote=False), 1),
    (BeginQuorumEpoch(9, 1, B), 1),
    (EndQuorumEpoch(9, 1, (3, 2)), 1),
    (FetchRequest(9, B, 42, 8, 1234, 500), 2),
    (FetchSnapshotRequest(9, B, SnapshotId(40, 8), 1 << 20, 77, 4096), 2),
]


@pytest.mark.parametrize("message,sender", REQUESTS, ids=lambda m: type(m).__name__)
def test_requests_survive_the_wire(message: Message, sender: int) -> None:
    body = roundtrip(wire.request_to_wire(message, CLUSTER), VERSIONS[type(message)])
    correlation = getattr(message, "request_id", 0)
    got = wire.request_from_wire(body, CLUSTER, correlation)  # type: ignore[arg-type]
    assert got == (message, sender)


def test_pre_vote_rides_in_a_tagged_field_that_a_plain_decoder_ignores() -> None:
    body = wire.request_to_wire(VoteRequest(7, A, B, 6, 120, True), CLUSTER)
    assert isinstance(body, vq.VoteRequest)
    tags = body.topics[0].partitions[0].unknown_tagged_fields
    assert tags == [(wire.PRE_VOTE_TAG, b"\x01")]


def test_another_cluster_is_rejected() -> None:
    body = wire.request_to_wire(FetchRequest(1, B, 0, 0, 1), "another-cluster")
    got = wire.request_from_wire(body, CLUSTER, 1)
    assert isinstance(got, wire.Rejected) and got.error == ErrorCode.INCONSISTENT_CLUSTER_ID


def test_a_fetch_of_another_topic_is_rejected() -> None:
    body = wire.request_to_wire(FetchRequest(1, B, 0, 0, 1), CLUSTER)
    assert isinstance(body, fq.FetchRequest)
    body.topics[0].topic_id = uuid.UUID(int=99)
    got = wire.request_from_wire(body, CLUSTER, 1)
    assert isinstance(got, wire.Rejected) and got.error == ErrorCode.UNKNOWN_TOPIC_ID


ENTRIES = (
    Entry(40, 8, (b"leader-change",), ControlType.LEADER_CHANGE),
    Entry(41, 8, (b"r1", b"r2", b"r3")),
)

RESPONSES: list[tuple[Message, Message]] = [
    (VoteRequest(7, A, B, 6, 120, True), VoteResponse(7, True, True, None)),
    (VoteRequest(7, A, B, 6, 120, False), VoteResponse(8, False, False, 3)),
    (FetchRequest(8, B, 40, 7, 55, 500), FetchResponse(8, 1, 41, ENTRIES, 55)),
    (
        FetchRequest(8, B, 40, 7, 56),
        FetchResponse(8, 1, 30, (), 56, diverging_epoch=6, diverging_end_offset=35),
    ),
    (FetchRequest(8, B, 4, 2, 57), FetchResponse(8, 1, 30, (), 57, snapshot_id=SnapshotId(20, 5))),
    (
        FetchRequest(8, B, 4, 2, 58),
        FetchResponse(9, None, 30, (), 58, error=ErrorCode.NOT_LEADER_OR_FOLLOWER),
    ),
    (
        FetchSnapshotRequest(8, B, SnapshotId(20, 5), 0, 59),
        FetchSnapshotResponse(8, 1, SnapshotId(20, 5), 300, 0, b"x" * 100, 59),
    ),
]


@pytest.mark.parametrize("request_,response", RESPONSES, ids=lambda m: type(m).__name__)
def test_responses_survive_the_wire(request_: Message, response: Message) -> None:
    body = roundtrip(wire.response_to_wire(response), VERSIONS[type(request_)])
    assert wire.response_from_wire(request_, body) == response  # type: ignore[arg-type]
