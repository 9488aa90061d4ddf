"""Fetch for consumers: file ranges of whole batches below the high watermark, long poll.

Records are returned as :class:`~odradek.storage.segment.FileRange` values, which the
shell sends with ``sendfile`` where the socket allows; no batch is copied in Python on
the way. A fetch that finds fewer than ``min_bytes`` waits (``AwaitData``) until new
data is readable or ``max_wait_ms`` passes, and is then answered from scratch.

Fetch sessions (KIP-227, :mod:`odradek.broker.fetch_session`) serve consumers and
followers alike: the session is resolved once per request, the partitions read are the
session's, and the answer leaves out what the client has already heard.
"""

from __future__ import annotations

from odradek.broker import replica_fetch
from odradek.broker.addresses import listener_of
from odradek.broker.authorization import allowed, allowed_names
from odradek.broker.effects import AwaitData, Outcome, Reply
from odradek.broker.fetch_session import FetchContext
from odradek.broker.leader_hints import leader_hint
from odradek.broker.list_offsets import READ_COMMITTED
from odradek.broker.partition import leader_epoch_error
from odradek.broker.state import BrokerState
from odradek.broker.throttle import fetch_throttle_ms, who
from odradek.core.errors import LogOfflineError, OffsetOutOfRangeError
from odradek.protocol.api import RequestHeader
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import FetchRequest, FetchResponse
from odradek.protocol.messages.fetch_response import (
    AbortedTransaction,
    FetchableTopicResponse,
    NodeEndpoint,
    PartitionData,
)
from odradek.security.acls import AclOperation, ResourceType

VERSIONS = (4, 16)
TOPIC_IDS_VERSION = 13
LEADER_HINT_VERSION = 12
NODE_ENDPOINTS_VERSION = 16


def handle_fetch(state: BrokerState, header: RequestHeader, request: FetchRequest) -> Outcome:
    version = header.request_api_version
    replica = replica_fetch.replica_of(version, request)
    context = state.fetch_sessions.context(request, version, replica, state.monotonic_ms, state.rng)
    if context.error != ErrorCode.NONE:
        return Reply(FetchResponse(error_code=context.error, session_id=0))
    deadline = state.monotonic_ms + max(request.max_wait_ms, 0)
    if replica >= 0:
        # Only a broker may fetch as a follower (it moves the ISR and the high watermark).
        if not allowed(state, header, AclOperation.CLUSTER_ACTION):
            return Reply(
                FetchResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, session_id=0)
            )
        return replica_fetch.attempt(state, version, request, context, deadline, False)
    readable: set[str] | None = None  # without an authorizer every topic is readable
    if state.authorization is not None:
        names = {
            state.fetched_topic_name(t.topic, t.topic_id, version >= TOPIC_IDS_VERSION)
            for t in context.topics
        }
        readable = allowed_names(state, header, AclOperation.READ, ResourceType.TOPIC, names)
    listener = listener_of(header)
    return _attempt(
        state, version, request, context, deadline, False, readable, who(header), listener
    )


def _attempt(
    state: BrokerState,
    version: int,
    request: FetchRequest,
    context: FetchContext,
    deadline: int,
    timed_out: bool,
    readable: set[str] | None,
    charged: tuple[str, str],
    listener: str,
) -> Outcome:
    """``readable``: the topics the principal may read (decided when the request came),
    or None when there is no authorizer."""
    total = 0
    budget = request.max_bytes if request.max_bytes > 0 else 2**31 - 1
    responses: list[FetchableTopicResponse] = []
    endpoints: dict[int, NodeEndpoint] = {}
    watched: set[tuple[str, int]] = set()
    for topic in context.topics:
        name = state.fetched_topic_name(topic.topic, topic.topic_id, version >= TOPIC_IDS_VERSION)
        out = FetchableTopicResponse(topic=topic.topic, topic_id=topic.topic_id)
        responses.append(out)
        for wanted in topic.partitions:
            # Empty, not null: librdkafka rejects a null record set.
            data = PartitionData(partition_index=wanted.partition, high_watermark=-1, records=b"")
            out.partitions.append(data)
            if name and readable is not None and name not in readable:
                data.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            partition = state.led_partition((name, wanted.partition))
            if partition is None:
                if version >= TOPIC_IDS_VERSION and not name:
                    data.error_code = ErrorCode.UNKNOWN_TOPIC_ID
                elif state.knows_partition(name, wanted.partition):
                    data.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                    hint = leader_hint(state, name, wanted.partition, listener)
                    if hint is not None and version >= LEADER_HINT_VERSION:
                        data.current_leader.leader_id = hint.leader_id
                        data.current_leader.leader_epoch = hint.leader_epoch
                        if hint.host is not None and hint.port is not None:
                            endpoints[hint.leader_id] = NodeEndpoint(
                                hint.leader_id, hint.host, hint.port, hint.rack
                            )
                else:
                    data.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            epoch = wanted.current_leader_epoch
            epoch_error = leader_epoch_error(epoch, partition.leader_epoch)
            if epoch_error != ErrorCode.NONE:
                data.error_code = epoch_error
                data.current_leader.leader_id = state.settings.node_id
                data.current_leader.leader_epoch = partition.leader_epoch
                continue
            log = partition.log
            high_watermark = partition.high_watermark
            data.high_watermark = high_watermark
            data.last_stable_offset = last_stable = partition.last_stable_offset
            data.log_start_offset = log.log_start_offset
            committed = request.isolation_level == READ_COMMITTED
            # read_committed readers read below the last stable offset only.
            bound = last_stable if committed else high_watermark
            watched.add(partition.key)
            if wanted.fetch_offset > high_watermark:
                # Above the high watermark but not above the log end: the data exists
                # and will become readable; Kafka answers with no records, no error.
                if wanted.fetch_offset > log.log_end_offset:
                    data.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                continue
            if budget <= 0:
                continue
            limit = min(wanted.partition_max_bytes, budget)
            try:
                # Only the cleaner makes record-less segments: other logs skip the check.
                found_range = log.read(
                    wanted.fetch_offset, max(limit, 1), bound,
                    skip_record_less=log.config.compact,
                )  # fmt: skip
                if committed and found_range is not None:
                    # Every abort the read may overlap, up to the LSO (Kafka bounds it
                    # by the read's end; entries past it match no batch sent).
                    data.aborted_transactions = [
                        AbortedTransaction(producer_id=t.producer_id, first_offset=t.first_offset)
                        for t in log.aborted_transactions(wanted.fetch_offset, bound)
                    ]
            except OffsetOutOfRangeError:
                data.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                continue
            except LogOfflineError as e:
                data.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                del e
                continue
            if found_range is not None:
                # The first batch goes whole even past the limits, so consumers progress.
                data.records = found_range
                total += found_range.length
                budget -= found_range.length
    if total >= request.min_bytes or timed_out or request.max_wait_ms <= 0 or not watched:
        nodes = list(endpoints.values()) if version >= NODE_ENDPOINTS_VERSION else []
        return Reply(
            FetchResponse(
                throttle_time_ms=fetch_throttle_ms(state, charged, total),
                responses=context.shape(responses),
                session_id=context.session_id,
                node_endpoints=nodes,
            )
        )
    return AwaitData(
        frozenset(watched),
        deadline,
        lambda expired: _attempt(
            state, version, request, context, deadline, expired, readable, charged, listener
        ),
    )
