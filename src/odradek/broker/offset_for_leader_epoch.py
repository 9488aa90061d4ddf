"""OffsetForLeaderEpoch (KIP-101, KIP-320): where a leader epoch ends on the leader.

A consumer asks after a leader change, with the epoch of the last record it read: if
that epoch ends before the consumer's position, the new leader's log diverged (an
unclean history) and the client detects the truncation instead of silently skipping or
re-reading. The answer is the leader-epoch cache's: the largest epoch not above the one
asked for, and the offset where it ends.
"""

from __future__ import annotations

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

VERSIONS = (2, 4)


def handle_offset_for_leader_epoch(
    state: BrokerState, header: RequestHeader, request: OffsetForLeaderEpochRequest
) -> Outcome:
    topics = []
    for topic in request.topics:
        results = []
        for wanted in topic.partitions:
            result = EpochEndOffset(partition=wanted.partition)
            results.append(result)
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
