"""ListOffsets: the earliest, latest or max-timestamp offset, or the first at a timestamp.

Consumers see offsets up to the high watermark only. A lookup by timestamp finds the
first batch whose max timestamp reaches it with the time index, then decodes that one
batch to find the exact record: the only place the broker decodes single records (the
produce path walks them without decoding). In a LogAppendTime batch every record has the
batch's maxTimestamp (the append time), as consumers see it, whatever its own field says.
"""

from __future__ import annotations

from odradek.broker.authorization import allowed_names
from odradek.broker.effects import Outcome, Reply
from odradek.broker.partition import leader_epoch_error
from odradek.broker.state import BrokerState
from odradek.core.errors import LogOfflineError
from odradek.protocol.api import RequestHeader
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from odradek.protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsTopicResponse,
)
from odradek.protocol.record_batch import (
    TimestampType,
)
from odradek.protocol.record_codec import (
    decode_records,
)
from odradek.security.acls import AclOperation, ResourceType
from odradek.storage.log import PartitionLog

VERSIONS = (1, 9)
LATEST = -1
READ_COMMITTED = 1
"""The isolation level of read_committed consumers (ListOffsets v2+, Fetch v4+)."""
EARLIEST = -2
MAX_TIMESTAMP = -3
LEADER_EPOCH_VERSION = 4


def handle_list_offsets(
    state: BrokerState, header: RequestHeader, request: ListOffsetsRequest
) -> Outcome:
    topics = []
    described = allowed_names(
        state, header, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in request.topics)
    )
    for topic in request.topics:
        out = ListOffsetsTopicResponse(name=topic.name)
        topics.append(out)
        for wanted in topic.partitions:
            result = ListOffsetsPartitionResponse(partition_index=wanted.partition_index)
            out.partitions.append(result)
            if topic.name not in described:
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            partition = state.led_partition((topic.name, wanted.partition_index))
            if partition is None:
                known = state.knows_partition(topic.name, wanted.partition_index)
                result.error_code = (
                    ErrorCode.NOT_LEADER_OR_FOLLOWER
                    if known
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
                continue
            epoch = wanted.current_leader_epoch
            epoch_error = leader_epoch_error(epoch, partition.leader_epoch)
            if epoch_error != ErrorCode.NONE:
                result.error_code = epoch_error
                continue
            log = partition.log
            # Kafka's last fetchable offset: read_committed readers stop at the LSO.
            fetchable = (
                partition.last_stable_offset
                if request.isolation_level == READ_COMMITTED
                else partition.high_watermark
            )
            if header.request_api_version >= LEADER_EPOCH_VERSION:
                result.leader_epoch = partition.leader_epoch
            try:
                if wanted.timestamp == LATEST:
                    result.offset = fetchable
                elif wanted.timestamp == EARLIEST:
                    result.offset = log.log_start_offset
                elif wanted.timestamp == MAX_TIMESTAMP:
                    result.offset, result.timestamp = _max_timestamp(partition.log, fetchable)
                else:
                    result.offset, result.timestamp = _at_timestamp(
                        partition.log, wanted.timestamp, fetchable
                    )
            except LogOfflineError:
                result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            if result.offset >= 0 and wanted.timestamp in (LATEST, EARLIEST):
                result.timestamp = -1
            result.old_style_offsets = []
    return Reply(ListOffsetsResponse(topics=topics))


def _at_timestamp(log: PartitionLog, timestamp: int, high_watermark: int) -> tuple[int, int]:
    found = log.offset_for_timestamp(timestamp)
    if found is None or found.base_offset >= high_watermark:
        return -1, -1
    batch = log.read(found.base_offset, 1, high_watermark)
    if batch is None:
        return -1, -1
    append_time = found.timestamp_type == TimestampType.LOG_APPEND_TIME
    for record in decode_records(batch.read()):
        offset = found.base_offset + record.offset_delta
        record_timestamp = found.max_timestamp if append_time else record.timestamp
        if record_timestamp >= timestamp and offset >= log.log_start_offset:
            return offset, record_timestamp
    return -1, -1


def _max_timestamp(log: PartitionLog, high_watermark: int) -> tuple[int, int]:
    best = (-1, -1)
    for segment in log.segments:
        for h in segment.headers_from(0, segment.size):
            if h.base_offset >= high_watermark:
                return best
            if h.max_timestamp > best[1]:
                best = (h.base_offset + h.last_offset_delta, h.max_timestamp)
    return best
