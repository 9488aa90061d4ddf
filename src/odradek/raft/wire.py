"""The Raft core's messages as Kafka's KRaft wire messages, both ways.

Requests a node sends: ``Vote`` v1, ``BeginQuorumEpoch`` v1, ``EndQuorumEpoch`` v1,
``Fetch`` v17 (replica fetch of ``__cluster_metadata-0`` by topic id) and
``FetchSnapshot`` v1. The core's responses become the matching response bodies; a wire
response becomes the core response to the request that asked for it (the caller keeps
the request, as Kafka keeps it under the correlation id).

One extension: the schemas this project generates from stop at ``Vote`` v1, which has no
KIP-996 ``PreVote`` field. Odradek carries it as tagged field :data:`PRE_VOTE_TAG` of the
partition (a Kafka 3.9 controller would ignore it; Odradek controllers only talk to
each other).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from odradek.core.errors import DecodeError
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import begin_quorum_epoch_request as bq
from odradek.protocol.messages import begin_quorum_epoch_response as bqr
from odradek.protocol.messages import end_quorum_epoch_request as eq
from odradek.protocol.messages import end_quorum_epoch_response as eqr
from odradek.protocol.messages import fetch_request as fq
from odradek.protocol.messages import fetch_response as fr
from odradek.protocol.messages import fetch_snapshot_request as sq
from odradek.protocol.messages import fetch_snapshot_response as sr
from odradek.protocol.messages import vote_request as vq
from odradek.protocol.messages import vote_response as vr
from odradek.raft.batches import decode_entries, encode_entries
from odradek.raft.log import SnapshotId
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
from odradek.raft.voters import ZERO_DIRECTORY, ReplicaKey

T = TypeVar("T")

METADATA_TOPIC = "__cluster_metadata"
#: Kafka's fixed id of the metadata topic (``Uuid.METADATA_TOPIC_ID``).
METADATA_TOPIC_ID = uuid.UUID(int=1)
METADATA_PARTITION = 0
PRE_VOTE_TAG = 10

VOTE_VERSION = 1
BEGIN_QUORUM_EPOCH_VERSION = 1
END_QUORUM_EPOCH_VERSION = 1
FETCH_VERSION = 17
FETCH_SNAPSHOT_VERSION = 1

WireRequest = (
    vq.VoteRequest
    | bq.BeginQuorumEpochRequest
    | eq.EndQuorumEpochRequest
    | fq.FetchRequest
    | sq.FetchSnapshotRequest
)
WireResponse = (
    vr.VoteResponse
    | bqr.BeginQuorumEpochResponse
    | eqr.EndQuorumEpochResponse
    | fr.FetchResponse
    | sr.FetchSnapshotResponse
)


@dataclass(frozen=True, slots=True)
class Rejected:
    """An inbound request the core must not see, with the error to answer it with."""

    error: int
    message: str


def _leader(leader_id: int) -> int | None:
    return None if leader_id < 0 else leader_id


def _wire_leader(leader: int | None) -> int:
    return -1 if leader is None else leader


def _check_partition(topic: str, partition: int) -> Rejected | None:
    if topic != METADATA_TOPIC or partition != METADATA_PARTITION:
        return Rejected(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no raft partition {topic}-{partition}"
        )
    return None


def _check_cluster(cluster_id: str | None, ours: str) -> Rejected | None:
    if cluster_id is not None and cluster_id != ours:
        return Rejected(
            ErrorCode.INCONSISTENT_CLUSTER_ID, f"cluster id {cluster_id} is not this cluster's"
        )
    return None


# ---------------------------------------------------------------------- outbound requests


def request_to_wire(message: Message, cluster_id: str, timestamp_ms: int = 0) -> WireRequest:
    """The Kafka request body for a request of the core."""
    if isinstance(message, VoteRequest):
        tags = [(PRE_VOTE_TAG, b"\x01")] if message.pre_vote else []
        vote_partition = vq.PartitionData(
            partition_index=METADATA_PARTITION,
            candidate_epoch=message.epoch,
            candidate_id=message.candidate.node_id,
            candidate_directory_id=message.candidate.directory_id,
            voter_directory_id=message.voter.directory_id,
            last_offset_epoch=message.last_epoch,
            last_offset=message.last_offset,
            unknown_tagged_fields=tags,
        )
        return vq.VoteRequest(
            cluster_id=cluster_id,
            voter_id=message.voter.node_id,
            topics=[vq.TopicData(topic_name=METADATA_TOPIC, partitions=[vote_partition])],
        )
    if isinstance(message, BeginQuorumEpoch):
        begin_partition = bq.PartitionData(
            partition_index=METADATA_PARTITION,
            voter_directory_id=message.voter.directory_id,
            leader_id=message.leader,
            leader_epoch=message.epoch,
        )
        return bq.BeginQuorumEpochRequest(
            cluster_id=cluster_id,
            voter_id=message.voter.node_id,
            topics=[bq.TopicData(topic_name=METADATA_TOPIC, partitions=[begin_partition])],
        )
    if isinstance(message, EndQuorumEpoch):
        end_partition = eq.PartitionData(
            partition_index=METADATA_PARTITION,
            leader_id=message.leader,
            leader_epoch=message.epoch,
            preferred_candidates=[
                eq.ReplicaInfo(candidate_id=c, candidate_directory_id=ZERO_DIRECTORY)
                for c in message.preferred_successors
            ],
        )
        return eq.EndQuorumEpochRequest(
            cluster_id=cluster_id,
            topics=[eq.TopicData(topic_name=METADATA_TOPIC, partitions=[end_partition])],
        )
    if isinstance(message, FetchRequest):
        fetch_partition = fq.FetchPartition(
            partition=METADATA_PARTITION,
            current_leader_epoch=message.epoch,
            fetch_offset=message.fetch_offset,
            last_fetched_epoch=message.last_fetched_epoch,
            replica_directory_id=message.replica.directory_id,
        )
        return fq.FetchRequest(
            cluster_id=cluster_id,
            replica_state=fq.ReplicaState(replica_id=message.replica.node_id, replica_epoch=-1),
            max_wait_ms=message.max_wait_ms,
            topics=[fq.FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=[fetch_partition])],
        )
    if isinstance(message, FetchSnapshotRequest):
        snapshot_partition = sq.PartitionSnapshot(
            partition=METADATA_PARTITION,
            current_leader_epoch=message.epoch,
            snapshot_id=sq.SnapshotId(
                end_offset=message.snapshot_id.end_offset, epoch=message.snapshot_id.epoch
            ),
            position=message.position,
            replica_directory_id=message.replica.directory_id,
        )
        return sq.FetchSnapshotRequest(
            cluster_id=cluster_id,
            replica_id=message.replica.node_id,
            max_bytes=message.max_bytes,
            topics=[sq.TopicSnapshot(name=METADATA_TOPIC, partitions=[snapshot_partition])],
        )
    raise TypeError(f"{type(message).__name__} is not a request")


def response_from_wire(request: Message, body: WireResponse) -> Message | None:
    """The core response to ``request`` that ``body`` carries; None when it carries none
    the core needs (BeginQuorumEpoch and EndQuorumEpoch acknowledgements)."""
    if isinstance(request, VoteRequest) and isinstance(body, vr.VoteResponse):
        part = _one(_one(body.topics, "VoteResponse").partitions, "VoteResponse")
        error = body.error_code or part.error_code
        return VoteResponse(
            part.leader_epoch,
            part.vote_granted and error == ErrorCode.NONE,
            request.pre_vote,
            _leader(part.leader_id),
            error,
        )
    if isinstance(request, FetchRequest) and isinstance(body, fr.FetchResponse):
        if body.error_code != ErrorCode.NONE and not body.responses:
            return FetchResponse(
                request.epoch, None, -1, (), request.request_id, error=body.error_code
            )
        fetched = _one(_one(body.responses, "FetchResponse").partitions, "FetchResponse")
        diverging = fetched.diverging_epoch
        snapshot = fetched.snapshot_id
        data = fetched.records
        entries = decode_entries(bytes(data)) if data else []  # type: ignore[arg-type]
        return FetchResponse(
            fetched.current_leader.leader_epoch,
            _leader(fetched.current_leader.leader_id),
            fetched.high_watermark,
            tuple(entries),
            request.request_id,
            diverging_epoch=diverging.epoch if diverging.end_offset >= 0 else None,
            diverging_end_offset=diverging.end_offset if diverging.end_offset >= 0 else None,
            snapshot_id=(
                SnapshotId(snapshot.end_offset, snapshot.epoch)
                if snapshot.end_offset >= 0
                else None
            ),
            error=fetched.error_code,
        )
    if isinstance(request, FetchSnapshotRequest) and isinstance(body, sr.FetchSnapshotResponse):
        if body.error_code != ErrorCode.NONE and not body.topics:
            return FetchSnapshotResponse(
                request.epoch, None, request.snapshot_id, 0, 0, b"", request.request_id,
                body.error_code,
            )  # fmt: skip
        chunk = _one(_one(body.topics, "FetchSnapshotResponse").partitions, "FetchSnapshotResponse")
        return FetchSnapshotResponse(
            chunk.current_leader.leader_epoch,
            _leader(chunk.current_leader.leader_id),
            SnapshotId(chunk.snapshot_id.end_offset, chunk.snapshot_id.epoch),
            chunk.size,
            chunk.position,
            bytes(chunk.unaligned_records),  # type: ignore[arg-type]
            request.request_id,
            chunk.error_code,
        )
    return None


def _one(items: Sequence[T], what: str) -> T:
    """The single topic or partition of a KRaft message (they name only the metadata one)."""
    if len(items) != 1:
        raise DecodeError(f"{what} with {len(items)} topics or partitions, expected one")
    return items[0]


# ---------------------------------------------------------------------- inbound requests


def request_from_wire(
    body: WireRequest, cluster_id: str, correlation_id: int
) -> tuple[Message, int] | Rejected:
    """The core message and sender node id of an inbound KRaft request, or why not."""
    rejected = _check_cluster(body.cluster_id, cluster_id)
    if rejected:
        return rejected
    if isinstance(body, vq.VoteRequest):
        vote_topic = _one(body.topics, "VoteRequest")
        vote = _one(vote_topic.partitions, "VoteRequest")
        rejected = _check_partition(vote_topic.topic_name, vote.partition_index)
        if rejected:
            return rejected
        pre_vote = any(tag == PRE_VOTE_TAG for tag, _ in vote.unknown_tagged_fields)
        message = VoteRequest(
            vote.candidate_epoch,
            ReplicaKey(vote.candidate_id, vote.candidate_directory_id),
            ReplicaKey(body.voter_id, vote.voter_directory_id),
            vote.last_offset_epoch,
            vote.last_offset,
            pre_vote,
        )
        return message, vote.candidate_id
    if isinstance(body, bq.BeginQuorumEpochRequest):
        begin_topic = _one(body.topics, "BeginQuorumEpochRequest")
        begin = _one(begin_topic.partitions, "BeginQuorumEpochRequest")
        rejected = _check_partition(begin_topic.topic_name, begin.partition_index)
        if rejected:
            return rejected
        voter = ReplicaKey(body.voter_id, begin.voter_directory_id)
        return BeginQuorumEpoch(begin.leader_epoch, begin.leader_id, voter), begin.leader_id
    if isinstance(body, eq.EndQuorumEpochRequest):
        end_topic = _one(body.topics, "EndQuorumEpochRequest")
        end = _one(end_topic.partitions, "EndQuorumEpochRequest")
        rejected = _check_partition(end_topic.topic_name, end.partition_index)
        if rejected:
            return rejected
        successors = tuple(c.candidate_id for c in end.preferred_candidates) or tuple(
            end.preferred_successors
        )
        return EndQuorumEpoch(end.leader_epoch, end.leader_id, successors), end.leader_id
    if isinstance(body, fq.FetchRequest):
        if len(body.topics) != 1 or len(body.topics[0].partitions) != 1:
            return Rejected(ErrorCode.INVALID_REQUEST, "a raft fetch names one partition")
        topic_id = body.topics[0].topic_id
        fetch = body.topics[0].partitions[0]
        if topic_id != METADATA_TOPIC_ID or fetch.partition != METADATA_PARTITION:
            return Rejected(ErrorCode.UNKNOWN_TOPIC_ID, f"no raft partition {topic_id}")
        replica = body.replica_state.replica_id
        if replica < 0:
            replica = body.replica_id
        fetch_message = FetchRequest(
            fetch.current_leader_epoch,
            ReplicaKey(replica, fetch.replica_directory_id),
            fetch.fetch_offset,
            fetch.last_fetched_epoch,
            correlation_id,
            body.max_wait_ms,
        )
        return fetch_message, replica
    snap_topic = _one(body.topics, "FetchSnapshotRequest")
    snap = _one(snap_topic.partitions, "FetchSnapshotRequest")
    rejected = _check_partition(snap_topic.name, snap.partition)
    if rejected:
        return rejected
    message_snapshot = FetchSnapshotRequest(
        snap.current_leader_epoch,
        ReplicaKey(body.replica_id, snap.replica_directory_id),
        SnapshotId(snap.snapshot_id.end_offset, snap.snapshot_id.epoch),
        snap.position,
        correlation_id,
        body.max_bytes,
    )
    return message_snapshot, body.replica_id


def response_to_wire(message: Message, timestamp_ms: int = 0) -> WireResponse:
    """The Kafka response body for a response of the core."""
    if isinstance(message, VoteResponse):
        return vr.VoteResponse(
            topics=[
                vr.TopicData(
                    topic_name=METADATA_TOPIC,
                    partitions=[
                        vr.PartitionData(
                            partition_index=METADATA_PARTITION,
                            error_code=message.error,
                            leader_id=_wire_leader(message.leader),
                            leader_epoch=message.epoch,
                            vote_granted=message.granted,
                        )
                    ],
                )
            ]
        )
    if isinstance(message, FetchResponse):
        diverging = fr.EpochEndOffset()
        if message.diverging_epoch is not None:
            diverging = fr.EpochEndOffset(
                epoch=message.diverging_epoch, end_offset=message.diverging_end_offset or 0
            )
        snapshot = fr.SnapshotId()
        if message.snapshot_id is not None:
            snapshot = fr.SnapshotId(
                end_offset=message.snapshot_id.end_offset, epoch=message.snapshot_id.epoch
            )
        partition = fr.PartitionData(
            partition_index=METADATA_PARTITION,
            error_code=message.error,
            high_watermark=message.high_watermark,
            diverging_epoch=diverging,
            current_leader=fr.LeaderIdAndEpoch(
                leader_id=_wire_leader(message.leader), leader_epoch=message.epoch
            ),
            snapshot_id=snapshot,
            records=encode_entries(message.entries, timestamp_ms),
        )
        return fr.FetchResponse(
            responses=[
                fr.FetchableTopicResponse(topic_id=METADATA_TOPIC_ID, partitions=[partition])
            ]
        )
    if isinstance(message, FetchSnapshotResponse):
        chunk = sr.PartitionSnapshot(
            index=METADATA_PARTITION,
            error_code=message.error,
            snapshot_id=sr.SnapshotId(
                end_offset=message.snapshot_id.end_offset, epoch=message.snapshot_id.epoch
            ),
            current_leader=sr.LeaderIdAndEpoch(
                leader_id=_wire_leader(message.leader), leader_epoch=message.epoch
            ),
            size=message.size,
            position=message.position,
            unaligned_records=message.chunk,
        )
        return sr.FetchSnapshotResponse(
            topics=[sr.TopicSnapshot(name=METADATA_TOPIC, partitions=[chunk])]
        )
    raise TypeError(f"{type(message).__name__} is not a response")


def acknowledgement(body: WireRequest, epoch: int, leader: int | None) -> WireResponse:
    """The answer to BeginQuorumEpoch / EndQuorumEpoch: our epoch and leader after it."""
    if isinstance(body, bq.BeginQuorumEpochRequest):
        return bqr.BeginQuorumEpochResponse(
            topics=[
                bqr.TopicData(
                    topic_name=METADATA_TOPIC,
                    partitions=[
                        bqr.PartitionData(
                            partition_index=METADATA_PARTITION,
                            leader_id=_wire_leader(leader),
                            leader_epoch=epoch,
                        )
                    ],
                )
            ]
        )
    return eqr.EndQuorumEpochResponse(
        topics=[
            eqr.TopicData(
                topic_name=METADATA_TOPIC,
                partitions=[
                    eqr.PartitionData(
                        partition_index=METADATA_PARTITION,
                        leader_id=_wire_leader(leader),
                        leader_epoch=epoch,
                    )
                ],
            )
        ]
    )


def rejection(body: WireRequest, rejected: Rejected) -> WireResponse:
    """A top-level error response to a request the core did not see."""
    if isinstance(body, vq.VoteRequest):
        return vr.VoteResponse(error_code=rejected.error)
    if isinstance(body, bq.BeginQuorumEpochRequest):
        return bqr.BeginQuorumEpochResponse(error_code=rejected.error)
    if isinstance(body, eq.EndQuorumEpochRequest):
        return eqr.EndQuorumEpochResponse(error_code=rejected.error)
    if isinstance(body, fq.FetchRequest):
        return fr.FetchResponse(error_code=rejected.error)
    return sr.FetchSnapshotResponse(error_code=rejected.error)


def add_leader_endpoint(response: WireResponse, leader: int, host: str, port: int) -> None:
    """Name the leader's address in ``response`` (NodeEndpoints, KIP-853), so that a
    replica that knows no voter set yet (a new observer) can reach the leader."""
    if isinstance(response, fr.FetchResponse):
        response.node_endpoints = [fr.NodeEndpoint(node_id=leader, host=host, port=port)]
    elif isinstance(response, sr.FetchSnapshotResponse):
        response.node_endpoints = [sr.NodeEndpoint(node_id=leader, host=host, port=port)]
    elif isinstance(response, vr.VoteResponse):
        response.node_endpoints = [vr.NodeEndpoint(node_id=leader, host=host, port=port)]
    elif isinstance(response, bqr.BeginQuorumEpochResponse):
        response.node_endpoints = [bqr.NodeEndpoint(node_id=leader, host=host, port=port)]
    else:
        response.node_endpoints = [eqr.NodeEndpoint(node_id=leader, host=host, port=port)]
