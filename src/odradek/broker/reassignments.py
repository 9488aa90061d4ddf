"""Reassignment admin requests on the broker listener (``kafka-reassign-partitions``).

* AlterPartitionReassignments and UnregisterBroker are decided on the image by
  :mod:`odradek.controller.reassignment` and committed through the controller (this
  node commits them when it is the active controller; otherwise the request is
  forwarded there in an Envelope and decided again on the controller's image).
* ListPartitionReassignments is answered from this node's image.
* DescribeLogDirs reports the size of every partition hosted here, which is what
  ``odradek cluster add-brokers --dry-run`` adds up as the bytes a plan moves.
"""

from __future__ import annotations

from odradek.broker.effects import CommitRecords, Outcome, Reply
from odradek.broker.state import BrokerState
from odradek.controller.reassignment import (
    alter_reassignments,
    list_reassignments,
    unregister_broker,
)
from odradek.protocol.api import RequestHeader
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)
from odradek.protocol.messages import alter_partition_reassignments_response as apr
from odradek.protocol.messages import describe_log_dirs_response as dld
from odradek.protocol.messages import list_partition_reassignments_response as lpr

ALTER_VERSIONS = (0, 0)
LIST_VERSIONS = (0, 0)
UNREGISTER_VERSIONS = (0, 0)
DESCRIBE_LOG_DIRS_VERSIONS = (1, 4)


def handle_alter_partition_reassignments(
    state: BrokerState, header: RequestHeader, request: AlterPartitionReassignmentsRequest
) -> Outcome:
    requested = [
        (topic.name, partition.partition_index, partition.replicas)
        for topic in request.topics
        for partition in topic.partitions
    ]
    records, results = alter_reassignments(state.image, requested)
    by_topic: dict[str, list[apr.ReassignablePartitionResponse]] = {}
    for result in results:
        by_topic.setdefault(result.topic, []).append(
            apr.ReassignablePartitionResponse(
                partition_index=result.partition,
                error_code=result.error_code,
                error_message=result.message,
            )
        )
    response = AlterPartitionReassignmentsResponse(
        error_code=ErrorCode.NONE,
        error_message=None,
        responses=[
            apr.ReassignableTopicResponse(name=name, partitions=partitions)
            for name, partitions in by_topic.items()
        ],
    )
    if not records:
        return Reply(response)
    return CommitRecords(list(records), lambda: Reply(response))


def handle_list_partition_reassignments(
    state: BrokerState, header: RequestHeader, request: ListPartitionReassignmentsRequest
) -> Outcome:
    wanted = (
        None
        if request.topics is None
        else [(t.name, index) for t in request.topics for index in t.partition_indexes]
    )
    by_topic: dict[str, list[lpr.OngoingPartitionReassignment]] = {}
    for ongoing in list_reassignments(state.image, wanted):
        by_topic.setdefault(ongoing.topic, []).append(
            lpr.OngoingPartitionReassignment(
                partition_index=ongoing.partition,
                replicas=list(ongoing.replicas),
                adding_replicas=list(ongoing.adding_replicas),
                removing_replicas=list(ongoing.removing_replicas),
            )
        )
    return Reply(
        ListPartitionReassignmentsResponse(
            error_code=ErrorCode.NONE,
            error_message=None,
            topics=[
                lpr.OngoingTopicReassignment(name=name, partitions=partitions)
                for name, partitions in by_topic.items()
            ],
        )
    )


def handle_unregister_broker(
    state: BrokerState, header: RequestHeader, request: UnregisterBrokerRequest
) -> Outcome:
    records, error, message = unregister_broker(state.image, request.broker_id)
    response = UnregisterBrokerResponse(error_code=error, error_message=message)
    if not records:
        return Reply(response)
    return CommitRecords(list(records), lambda: Reply(response))


def handle_describe_log_dirs(
    state: BrokerState, header: RequestHeader, request: DescribeLogDirsRequest
) -> Outcome:
    """The one log dir of this node and the size of each partition hosted in it (all
    partitions for a null topic list, as Kafka does)."""
    wanted = (
        None
        if request.topics is None
        else {(t.topic, index) for t in request.topics for index in t.partitions}
    )
    by_topic: dict[str, list[dld.DescribeLogDirsPartition]] = {}
    log_dir = ""
    for key in sorted(state.partitions):
        partition = state.partitions[key]
        log_dir = log_dir or _parent(partition.log.directory or "")
        if wanted is not None and key not in wanted:
            continue
        size = partition.log.size_in_bytes() if partition.log.offline is None else 0
        by_topic.setdefault(key[0], []).append(
            dld.DescribeLogDirsPartition(
                partition_index=key[1],
                partition_size=size,
                offset_lag=0,
                is_future_key=False,
            )
        )
    return Reply(
        DescribeLogDirsResponse(
            error_code=ErrorCode.NONE,
            results=[
                dld.DescribeLogDirsResult(
                    error_code=ErrorCode.NONE,
                    log_dir=log_dir,
                    topics=[
                        dld.DescribeLogDirsTopic(name=name, partitions=partitions)
                        for name, partitions in by_topic.items()
                    ],
                )
            ],
        )
    )


def _parent(directory: str) -> str:
    return directory.rstrip("/").rsplit("/", 1)[0]
