"""WriteTxnMarkers (API 27): a transaction coordinator has each partition leader of a
transaction append its COMMIT or ABORT marker.

Kafka's rules (``ReplicaManager.appendRecords`` with ``AppendOrigin.COORDINATOR``, as
``KafkaApis.handleWriteTxnMarkersRequest`` calls it):

* the caller needs CLUSTER_ACTION on the cluster (it is another broker);
* a partition this node does not lead answers NOT_LEADER_OR_FOLLOWER (or
  UNKNOWN_TOPIC_OR_PARTITION); one whose log is offline, KAFKA_STORAGE_ERROR;
* a marker from an older producer epoch is INVALID_PRODUCER_EPOCH, one from an older
  coordinator epoch TRANSACTION_COORDINATOR_FENCED
  (:meth:`~odradek.replication.producer_state.ProducerStateManager.check_marker`);
* the marker is appended with acks=all: the answer comes once it is flushed (with
  ``odradek.flush.before.ack``) and in the in-sync replicas, or with the error that
  stopped it (NOT_ENOUGH_REPLICAS below ``min.insync.replicas``), and the coordinator
  completes the transaction only on success.

An abort's transaction index entry is written before its marker
(``docs/adr/0025-transactions-partition-side.md``).
"""

from __future__ import annotations

from odradek.broker.acks import await_acks
from odradek.broker.authorization import allowed
from odradek.broker.effects import Outcome, Reply
from odradek.broker.partition import LocalPartition, aborts_in
from odradek.broker.state import BrokerState
from odradek.core.errors import LogOfflineError
from odradek.protocol.api import RequestHeader
from odradek.protocol.control_batch import EndTxnMarker, encode_end_txn_marker
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from odradek.protocol.messages.write_txn_markers_request import WritableTxnMarker
from odradek.protocol.messages.write_txn_markers_response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
)
from odradek.protocol.record_batch import validate_batch
from odradek.security.acls import AclOperation

MARKER_TIMEOUT_MS = 30_000
"""How long a marker waits for the in-sync replicas (Kafka: ``request.timeout.ms``)."""

Key = tuple[str, int]


def handle_write_txn_markers(
    state: BrokerState, header: RequestHeader, request: WriteTxnMarkersRequest
) -> Outcome:
    permitted = allowed(state, header, AclOperation.CLUSTER_ACTION)
    response = WriteTxnMarkersResponse()
    waits: dict[Key, int] = {}
    appended: dict[Key, LocalPartition] = {}
    waiting: dict[Key, list[WritableTxnMarkerPartitionResult]] = {}
    for marker in request.markers:
        out = WritableTxnMarkerResult(producer_id=marker.producer_id)
        response.markers.append(out)
        for topic in marker.topics:
            topic_out = WritableTxnMarkerTopicResult(name=topic.name)
            out.topics.append(topic_out)
            for index in topic.partition_indexes:
                result = WritableTxnMarkerPartitionResult(partition_index=index)
                topic_out.partitions.append(result)
                key = (topic.name, index)
                if not permitted:
                    result.error_code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                    continue
                error, end = _append_marker(state, marker, key)
                result.error_code = error
                if error == ErrorCode.NONE:
                    # Two markers for one partition in a request wait for the later one.
                    waits[key] = max(waits.get(key, 0), end)
                    appended[key] = state.partitions[key]
                    waiting.setdefault(key, []).append(result)
    if not waits:
        return Reply(response)

    def fail(key: Key, code: ErrorCode, _message: str | None) -> None:
        for result in waiting.get(key, []):
            if result.error_code == ErrorCode.NONE:
                result.error_code = code

    return await_acks(state, waits, appended, MARKER_TIMEOUT_MS, fail, lambda: Reply(response))


def _append_marker(state: BrokerState, marker: WritableTxnMarker, key: Key) -> tuple[int, int]:
    """Append one marker as the partition's leader: (error code, offset to wait for)."""
    partition = state.led_partition(key)
    if partition is None:
        known = state.knows_partition(*key)
        return (
            ErrorCode.NOT_LEADER_OR_FOLLOWER if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        ), -1
    leader = partition.leader_state
    if leader is not None:
        refused = leader.check_produce(-1)
        if refused != ErrorCode.NONE:
            return refused, -1
    producers = partition.producers
    decision = producers.check_marker(
        marker.producer_id, marker.producer_epoch, marker.coordinator_epoch
    )
    if not decision.append:
        return decision.error_code, -1
    end_marker = EndTxnMarker(marker.transaction_result, marker.coordinator_epoch)
    log = partition.log
    batch = bytearray(
        encode_end_txn_marker(
            end_marker, producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
            base_offset=log.log_end_offset, partition_leader_epoch=partition.leader_epoch,
            timestamp=state.now_ms,
        )
    )  # fmt: skip
    aborted = aborts_in(producers, [(validate_batch(batch), end_marker)])
    try:
        info = log.append_as_leader(
            memoryview(batch), partition.leader_epoch, state.now_ms, aborted
        )
    except LogOfflineError:
        return ErrorCode.KAFKA_STORAGE_ERROR, -1
    producers.complete(
        marker.producer_id, marker.producer_epoch, info.first_offset,
        committed=marker.transaction_result, coordinator_epoch=marker.coordinator_epoch,
        timestamp=info.max_timestamp,
    )  # fmt: skip
    if leader is not None:
        leader.on_append(log.log_end_offset)
    state.records_appended(key)
    return ErrorCode.NONE, info.last_offset + 1
