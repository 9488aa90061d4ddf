"""OffsetForLeaderEpoch (KIP-101, KIP-320): where a leader epoch ends on the leader.

A consumer asks after a leader change, with the epoch of the last record it read: if
that epoch ends before the consumer's position, the new leader's log diverged (an
unclean history) and the client detects the truncation instead of silently skipping or
re-reading. The answer is the leader-epoch cache's: the largest epoch not above the one
asked for, and the offset where it ends.
"""

from __future__ import annotations

from odradek.broker.authorization import allowed, allowed_names
from odradek.broker.effects import Outcome, Reply
from odradek.broker.partition import leader_epoch_error
from odradek.broker.state import BrokerState
from odradek.protocol.api import RequestHeader
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from odradek.protocol.messages.offset_for_leader_epoch_response import (
    EpochEndOffset,
    OffsetForLeaderTopicResult,
)
from odradek.security.acls import AclOperation, ResourceType

VERSIONS = (2, 4)


def handle_offset_for_leader_epoch(
    state: BrokerState, header: RequestHeader, request: OffsetForLeaderEpochRequest
) -> Outcome:
    topics = []
    # A follower (a replica id) needs CLUSTER_ACTION; a consumer DESCRIBE on the topic.
    follower = header.request_api_version >= 3 and request.replica_id >= 0
    names = [t.topic for t in request.topics]
    if follower:
        allowed_all = allowed(state, header, AclOperation.CLUSTER_ACTION)
        described = set(names) if allowed_all else set()
    else:
        described = allowed_names(state, header, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    for topic in request.topics:
        results = []
        for wanted in topic.partitions:
            result = EpochEndOffset(partition=wanted.partition)
            results.append(result)
            if topic.topic not in described:
                result.error_code = (
                    ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                    if follower
                    else ErrorCode.TOPIC_AUTHORIZATION_FAILED
                )
                continue
            partition = state.led_partition((topic.topic, wanted.partition))
            if partition is None:
                result.error_code = (
                    ErrorCode.NOT_LEADER_OR_FOLLOWER
                    if topic.topic in state.image.topics_by_name
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
                continue
            current = wanted.current_leader_epoch
            epoch_error = leader_epoch_error(current, partition.leader_epoch)
            if epoch_error != ErrorCode.NONE:
                result.error_code = epoch_error
                continue
            epoch, end_offset = partition.log.end_offset_for_epoch(wanted.leader_epoch)
            result.leader_epoch = epoch
            result.end_offset = end_offset
        topics.append(OffsetForLeaderTopicResult(topic=topic.topic, partitions=results))
    return Reply(OffsetForLeaderEpochResponse(topics=topics))
