"""Produce: validate each partition's batches, append them, answer per ``acks``.

acks=0 gets no response; acks=1 is answered once the leader's log holds the batches;
acks=all (-1) is refused with NOT_ENOUGH_REPLICAS while the ISR is under
``min.insync.replicas``, and otherwise answered once the high watermark passed the
batches: every in-sync replica holds them and, by our default
(``odradek.flush.before.ack``), the leader has fsynced them (one group-commit flush
covers many requests).

A request goes through three steps. First each partition's batches are checked by header
and CRC, size and kind, and the ISR. Then their records are checked as Kafka's
LogValidator does (``broker/record_validation.py``), here on the event loop, compressed
batches decompressed once into the state's buffer; a request of more than 8,192 records,
or with a batch that decompresses to more than 4 MiB, is checked on the shell's
record-check thread instead (:class:`~odradek.broker.effects.AwaitRecordCheck`), so that
no request holds the loop for long. Last, on the loop, each batch that passed gets its
timestamps (LogAppendTime) and is appended; a partition whose leadership moved meanwhile
answers NOT_LEADER_OR_FOLLOWER. No batch is copied or re-encoded on the way.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.broker.acks import Fail, await_acks
from odradek.broker.addresses import listener_of
from odradek.broker.authorization import allowed_names
from odradek.broker.effects import (
    AwaitRecordCheck,
    NoReply,
    Outcome,
    Reply,
)
from odradek.broker.leader_hints import leader_hint
from odradek.broker.partition import LocalPartition
from odradek.broker.record_validation import (
    RecordPolicy,
    RecordVerdict,
    check_records,
    needs_record_check_thread,
    problem_error_code,
    set_timestamps,
)
from odradek.broker.state import BrokerState
from odradek.broker.throttle import produce_throttle_ms
from odradek.core.errors import InvalidRecordBatchError, LogOfflineError
from odradek.protocol.api import RequestHeader
from odradek.protocol.compression import (
    DecompressBuffer,
)
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import ProduceRequest, ProduceResponse
from odradek.protocol.messages.produce_response import (
    BatchIndexAndErrorMessage,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    TopicProduceResponse,
)
from odradek.protocol.record_batch import (
    BatchHeader,
    TimestampType,
    validate_batches,
)
from odradek.security.acls import AclOperation, ResourceType

VERSIONS = (3, 11)
LEADER_HINT_VERSION = 10


@dataclass(slots=True)
class _Pending:
    """A partition whose batches passed the first checks and wait for the record check."""

    key: tuple[str, int]
    result: PartitionProduceResponse
    partition: LocalPartition
    records: memoryview
    headers: list[BatchHeader]
    policy: RecordPolicy
    """The topic's record policy when the request came: its checks and its timestamps."""


def handle_produce(state: BrokerState, header: RequestHeader, request: ProduceRequest) -> Outcome:
    acks = request.acks
    version = header.request_api_version
    endpoints: dict[int, NodeEndpoint] = {}
    responses: list[TopicProduceResponse] = []
    pending: list[_Pending] = []
    writable = allowed_names(
        state, header, AclOperation.WRITE, ResourceType.TOPIC, (t.name for t in request.topic_data)
    )
    for topic in request.topic_data:
        partitions = []
        for data in topic.partition_data:
            result = PartitionProduceResponse(index=data.index)
            partitions.append(result)
            if acks not in (0, 1, -1):
                result.error_code = ErrorCode.INVALID_REQUIRED_ACKS
                continue
            if topic.name not in writable:
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if request.transactional_id is not None:
                result.error_code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                result.error_message = "transactions are not supported yet"
                continue
            key = (topic.name, data.index)
            partition = state.led_partition(key)
            if partition is None:
                known = state.knows_partition(topic.name, data.index)
                result.error_code = (
                    ErrorCode.NOT_LEADER_OR_FOLLOWER
                    if known
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
                hint = (
                    leader_hint(state, topic.name, data.index, listener_of(header))
                    if known
                    else None
                )
                if hint is not None and version >= LEADER_HINT_VERSION:
                    result.current_leader = LeaderIdAndEpoch(hint.leader_id, hint.leader_epoch)
                    if hint.host is not None and hint.port is not None:
                        endpoints[hint.leader_id] = NodeEndpoint(
                            hint.leader_id, hint.host, hint.port, hint.rack
                        )
                continue
            records = data.records
            if not isinstance(records, memoryview) or not len(records):
                result.error_code = ErrorCode.CORRUPT_MESSAGE
                result.error_message = "no record batches"
                continue
            try:
                headers = validate_batches(records)
            except InvalidRecordBatchError as e:
                result.error_code = problem_error_code(e.problem)
                result.error_message = str(e)
                continue
            limit = partition.max_message_bytes or state.settings.message_max_bytes
            refusal = _refuse(headers, limit)
            if refusal is not None:
                result.error_code, result.error_message = refusal
                continue
            if partition.leader_state is not None:
                # acks=all with the ISR under min.insync.replicas: refused before the
                # append, so nothing is written that could not be acknowledged.
                refused = partition.leader_state.check_produce(acks)
                if refused != ErrorCode.NONE:
                    result.error_code = refused
                    continue
            pending.append(
                _Pending(key, result, partition, records, headers, partition.record_policy)
            )
        responses.append(TopicProduceResponse(name=topic.name, partition_responses=partitions))
    response = ProduceResponse(responses=responses, node_endpoints=list(endpoints.values()))
    # The bytes a client sends count against its quota whatever became of them.
    response.throttle_time_ms = produce_throttle_ms(state, header, request)
    now_ms = state.now_ms

    def check(buffer: DecompressBuffer | None) -> list[RecordVerdict]:
        # Pure: reads only the request's bytes and the policies taken above, so it may run
        # on the record-check thread while the loop goes on.
        return [
            check_records(p.records, p.headers, p.policy, now_ms, buffer, f"{p.key[0]}-{p.key[1]}")
            for p in pending
        ]

    def append(verdicts: list[RecordVerdict]) -> Outcome:
        return _append(state, request, response, pending, verdicts)

    if needs_record_check_thread([h for p in pending for h in p.headers]):
        return AwaitRecordCheck(check, append)
    verdicts = check(state.decompress_buffer)
    if any(v.needs_larger_buffer for v in verdicts):
        # Records too large to decompress on the loop: all checked again on the thread,
        # whose buffer takes up to socket.request.max.bytes (and refuses beyond it).
        return AwaitRecordCheck(check, append)
    return append(verdicts)


def _append(
    state: BrokerState,
    request: ProduceRequest,
    response: ProduceResponse,
    pending: list[_Pending],
    verdicts: list[RecordVerdict],
) -> Outcome:
    """The last step: set timestamps and append each partition that passed its checks."""
    acks = request.acks
    waits: dict[tuple[str, int], int] = {}
    # The replica each waiting batch went to: if the node rebuilds it (a new leader epoch,
    # or it now follows) before the ack, nothing counts the batch towards an ISR any more.
    appended: dict[tuple[str, int], LocalPartition] = {}
    for p, verdict in zip(pending, verdicts, strict=True):
        result = p.result
        key = p.key
        if verdict.error_code != ErrorCode.NONE:
            result.error_code = verdict.error_code
            result.error_message = verdict.error_message
            result.record_errors = [
                BatchIndexAndErrorMessage(index, why) for index, why in verdict.record_errors
            ]
            continue
        partition = p.partition
        if state.led_partition(key) is not partition:
            # Leadership moved while the records were checked on the thread: the new
            # leader, or this node's new replica, must take the batch.
            result.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            continue
        leader = partition.leader_state
        if leader is not None:
            refused = leader.check_produce(acks)
            if refused != ErrorCode.NONE:
                result.error_code = refused
                continue
        headers = p.headers
        policy = p.policy
        idempotent = headers[0].producer_id >= 0
        if idempotent:
            decision = partition.producers.check(headers[0])
            if decision.is_duplicate and decision.duplicate_of is not None:
                # A retry of a batch already in the log: its original offsets, no append.
                result.base_offset = decision.duplicate_of.first_offset
                result.log_start_offset = partition.log.log_start_offset
                if policy.timestamp_type == TimestampType.LOG_APPEND_TIME:
                    # Kafka answers a retry with the time its first copy was appended.
                    result.log_append_time_ms = decision.duplicate_of.timestamp
                if acks == -1:
                    waits[key] = decision.duplicate_of.last_offset + 1
                    appended[key] = partition
                continue
            if not decision.append:
                result.error_code = decision.error_code
                result.error_message = decision.message
                continue
        # The batches are to be appended: only now may their bytes change.
        result.log_append_time_ms = set_timestamps(
            p.records, headers, verdict, policy, state.now_ms
        )
        try:
            info = partition.log.append_as_leader(p.records, partition.leader_epoch, state.now_ms)
        except LogOfflineError as e:
            result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
            result.error_message = str(e)
            result.log_append_time_ms = -1
            continue
        if idempotent:
            partition.producers.update(
                headers[0], info.first_offset, info.last_offset, info.max_timestamp
            )
        if leader is not None:
            leader.on_append(partition.log.log_end_offset)
        # Whatever the acks: the node schedules the flush that makes it visible.
        state.records_appended(key)
        result.base_offset = info.first_offset
        result.log_start_offset = partition.log.log_start_offset
        if acks == -1:
            waits[key] = info.last_offset + 1
            appended[key] = partition
    if acks == 0:
        failed = [
            f"{t.name}-{p.index}: {ErrorCode(p.error_code).name}"
            for t in response.responses
            for p in t.partition_responses
            if p.error_code != ErrorCode.NONE
        ]
        # Kafka closes the connection of an acks=0 produce that failed anywhere: the
        # client then refreshes its metadata instead of sending on into the void.
        return NoReply(f"acks=0 produce failed ({', '.join(failed)})" if failed else None)
    if not waits:
        return Reply(response)
    return await_acks(
        state, waits, appended, request.timeout_ms, _failer(response), lambda: Reply(response)
    )


def _failer(response: ProduceResponse) -> Fail:
    """:data:`~odradek.broker.acks.Fail` over the response's partition results (looked
    up only when one fails: the acknowledged path builds nothing)."""
    results: dict[tuple[str, int], PartitionProduceResponse] = {}

    def fail(key: tuple[str, int], code: ErrorCode, message: str | None) -> None:
        if not results:
            results.update(
                ((t.name, r.index), r) for t in response.responses for r in t.partition_responses
            )
        result = results.get(key)
        if result is not None and result.error_code == ErrorCode.NONE:
            result.error_code = code
            result.error_message = message

    return fail


def _refuse(headers: list[BatchHeader], max_message_bytes: int) -> tuple[ErrorCode, str] | None:
    for h in headers:
        if h.size_in_bytes > max_message_bytes:
            return (
                ErrorCode.MESSAGE_TOO_LARGE,
                f"batch of {h.size_in_bytes} bytes exceeds max.message.bytes {max_message_bytes}",
            )
        if h.is_control:
            return ErrorCode.INVALID_RECORD, "clients may not write control batches"
        if h.is_transactional:
            return ErrorCode.INVALID_RECORD, "transactional batches are not supported yet"
    if len(headers) > 1 and any(h.producer_id >= 0 for h in headers):
        # Kafka's rule for produce v3+: an idempotent producer sends one batch per
        # partition, so that its sequence check covers the whole request.
        return ErrorCode.INVALID_RECORD, "an idempotent produce must carry exactly one batch"
    return None
