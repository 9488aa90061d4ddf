"""CreatePartitions and DeleteRecords: the partition-level admin requests.

CreatePartitions grows topics. The controller's pure command
(``odradek.controller.partitions``) decides each topic; the new partitions exist once
their PartitionRecords are committed to the metadata log and replayed (``CommitRecords``),
and only then is the client answered.

DeleteRecords moves a partition's log start offset (its low watermark) forward on the
leader. Records below it become unreadable at once and go with their segments at the next
retention pass. Nothing in the metadata log changes, so the answer is immediate; the new
log start offset reaches the disk with the log dir's next checkpoint, as in Kafka.
"""

from __future__ import annotations

from collections import Counter
from typing import Final

from odradek.broker.authorization import allowed_names
from odradek.broker.config_requests import topic_config_entries
from odradek.broker.effects import CommitRecords, Outcome, Reply
from odradek.broker.server_config import ServerConfig
from odradek.broker.state import BrokerState
from odradek.broker.throttle import THROTTLING_QUOTA_EXCEEDED_MESSAGE, MutationQuota
from odradek.controller.partitions import create_partitions
from odradek.controller.topics import EXCESSIVE_PARTITIONS, MAX_PARTITIONS_PER_BATCH
from odradek.core.errors import ConfigError, LogOfflineError, OffsetOutOfRangeError
from odradek.protocol.api import RequestHeader
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
)
from odradek.protocol.messages.create_partitions_response import CreatePartitionsTopicResult
from odradek.protocol.messages.delete_records_response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsTopicResult,
)
from odradek.protocol.metadata import PartitionRecord
from odradek.security.acls import AclOperation, ResourceType

__all__ = [
    "CREATE_PARTITIONS_VERSIONS",
    "DELETE_RECORDS_VERSIONS",
    "handle_create_partitions",
    "handle_delete_records",
]

CREATE_PARTITIONS_VERSIONS: Final = (0, 3)
DELETE_RECORDS_VERSIONS: Final = (0, 2)

HIGH_WATERMARK: Final = -1
"""DeleteRecords offset meaning "up to the high watermark"."""
INVALID_LOW_WATERMARK: Final = -1


def handle_create_partitions(
    state: BrokerState, header: RequestHeader, request: CreatePartitionsRequest
) -> Outcome:
    counts = Counter(topic.name for topic in request.topics)
    added = 0
    for topic in request.topics:
        existing = state.image.topics_by_name.get(topic.name)
        if existing is not None and counts[topic.name] == 1:
            added += max(topic.count - len(existing.partitions), 0)
    if added > MAX_PARTITIONS_PER_BATCH:
        # The bound of CreateTopics, over the whole request: every topic is refused and
        # nothing is placed (Kafka refuses an operation of more records as a whole).
        return Reply(
            CreatePartitionsResponse(
                results=[
                    CreatePartitionsTopicResult(
                        name=name,
                        error_code=ErrorCode.POLICY_VIOLATION,
                        error_message=EXCESSIVE_PARTITIONS,
                    )
                    for name in counts
                ]
            )
        )
    results: list[CreatePartitionsTopicResult] = []
    records: list[PartitionRecord] = []
    reported: set[str] = set()
    live = state.live_brokers()
    alterable = allowed_names(state, header, AclOperation.ALTER, ResourceType.TOPIC, counts)
    quota = MutationQuota(state, header, strict=header.request_api_version >= 3)
    for topic in request.topics:
        if counts[topic.name] > 1:
            # Kafka answers a repeated topic once, and changes nothing for it.
            if topic.name not in reported:
                reported.add(topic.name)
                results.append(
                    CreatePartitionsTopicResult(
                        name=topic.name,
                        error_code=ErrorCode.INVALID_REQUEST,
                        error_message="Duplicate topic name.",
                    )
                )
            continue
        if topic.name not in alterable:
            results.append(
                CreatePartitionsTopicResult(
                    name=topic.name,
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    error_message="Authorization failed.",
                )
            )
            continue
        # An empty list is read as "not given", like null: our own request classes
        # default to it, and it could never be a valid assignment of new partitions.
        assignments = [list(a.broker_ids) for a in topic.assignments] if topic.assignments else None
        outcome = create_partitions(state.image, topic.name, topic.count, assignments, live)
        result = CreatePartitionsTopicResult(
            name=topic.name,
            error_code=outcome.error_code,
            error_message=outcome.error_message,
        )
        results.append(result)
        if request.validate_only or outcome.error_code != ErrorCode.NONE:
            continue
        if not quota.admits(len(outcome.records)):
            result.error_code = ErrorCode.THROTTLING_QUOTA_EXCEEDED
            result.error_message = THROTTLING_QUOTA_EXCEEDED_MESSAGE
            continue
        records += outcome.records
    response = CreatePartitionsResponse(results=results, throttle_time_ms=quota.throttle_ms())
    if not records:
        return Reply(response)
    return CommitRecords(list(records), lambda: _charged(response, quota))


def _charged(response: CreatePartitionsResponse, quota: MutationQuota) -> Reply:
    """The answer once the new partitions are committed, with the mutations charged."""
    response.throttle_time_ms = quota.record()
    return Reply(response)


def _deletable(state: BrokerState, server: ServerConfig, topic: str) -> bool:
    """Whether the effective ``cleanup.policy`` of ``topic`` includes ``delete``."""
    try:
        entries = topic_config_entries(state, server, topic, include_synonyms=False)
    except ConfigError:
        # Overrides this build cannot read: refuse rather than guess the policy.
        return False
    policy = next((e.value for e in entries if e.name == "cleanup.policy"), None) or ""
    # A compacted-only log keeps the latest record of every key by design; Kafka refuses
    # to cut its start for the same reason (POLICY_VIOLATION).
    return "delete" in [item.strip() for item in policy.split(",")]


def handle_delete_records(
    state: BrokerState,
    server: ServerConfig,
    header: RequestHeader,
    request: DeleteRecordsRequest,
) -> Outcome:
    node_id = state.settings.node_id
    topics: list[DeleteRecordsTopicResult] = []
    permitted = allowed_names(
        state, header, AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in request.topics)
    )
    for topic in request.topics:
        out = DeleteRecordsTopicResult(name=topic.name)
        topics.append(out)
        image_topic = state.image.topics_by_name.get(topic.name)
        deletable = image_topic is not None and _deletable(state, server, topic.name)
        for wanted in topic.partitions:
            result = DeleteRecordsPartitionResult(
                partition_index=wanted.partition_index,
                low_watermark=INVALID_LOW_WATERMARK,
                error_code=ErrorCode.NONE,
            )
            out.partitions.append(result)
            if topic.name not in permitted:
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if image_topic is None or wanted.partition_index not in image_topic.partitions:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            partition = state.partitions.get((topic.name, wanted.partition_index))
            leader = image_topic.partitions[wanted.partition_index].leader
            if partition is None or leader != node_id:
                result.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                continue
            if not deletable:
                result.error_code = ErrorCode.POLICY_VIOLATION
                continue
            high_watermark = partition.high_watermark
            offset = high_watermark if wanted.offset == HIGH_WATERMARK else wanted.offset
            # The high watermark is the limit, not the log end: records no consumer could
            # read yet (unflushed, or not yet on every in-sync replica) are never deleted.
            if offset < 0 or offset > high_watermark:
                result.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                continue
            try:
                result.low_watermark = partition.log.delete_records_before(offset)
            except LogOfflineError:
                result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
            except OffsetOutOfRangeError:
                result.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
    return Reply(DeleteRecordsResponse(topics=topics))
