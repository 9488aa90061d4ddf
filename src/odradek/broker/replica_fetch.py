"""Fetch from a follower (``replica_id`` set): the leader's side of replication.

Each partition's position is checked against the leader's history first (current leader
epoch, then the diverging-epoch check of KIP-320); only a position on that history is
reported to the partition's :class:`~odradek.replication.leader.PartitionLeader`, which
may then move the high watermark. Records go up to the log end, not the high watermark:
a follower must be able to hold what the leader holds before it is counted. An empty
answer waits for new records (``AwaitData``) up to ``max_wait_ms``.

In an incremental fetch session, a partition the request does not name whose position
this same leader (one leader epoch) already found on its history, and which has nothing
new, skips the checks and its answer (``_quiet``): it only counts as fetched again.

Only a registered follower is counted: the fetch must name a replica of the partition
and carry that broker's current broker epoch (:func:`registered_follower`).
"""

from __future__ import annotations

from odradek.broker.effects import AwaitData, Outcome, Reply
from odradek.broker.fetch_session import CachedPartition, FetchContext
from odradek.broker.leader_hints import leader_hint
from odradek.broker.partition import LogEpochs
from odradek.broker.state import BrokerState
from odradek.core.errors import LogOfflineError, OffsetOutOfRangeError
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import FetchRequest, FetchResponse
from odradek.protocol.messages.fetch_request import FetchPartition
from odradek.protocol.messages.fetch_response import (
    EpochEndOffset,
    FetchableTopicResponse,
    PartitionData,
)
from odradek.replication.leader import diverging_epoch

TOPIC_IDS_VERSION = 13
REPLICA_STATE_VERSION = 15


def replica_of(version: int, request: FetchRequest) -> int:
    """The fetching broker's id (-1 for a consumer)."""
    if version >= REPLICA_STATE_VERSION:
        return request.replica_state.replica_id
    return request.replica_id


def registered_follower(state: BrokerState, replica: int, replica_epoch: int) -> bool:
    """Whether a fetch naming ``replica`` comes from that broker as registered now: its
    ``replica_epoch`` (Fetch v15's ReplicaState) is the broker epoch of its current
    registration. Anyone can put a broker's id in a Fetch; only the registered process
    knows its epoch, so only its fetches count towards the high watermark. Kafka refuses
    stale epochs the same way (NOT_LEADER_OR_FOLLOWER)."""
    broker = state.image.brokers.get(replica)
    return broker is not None and replica_epoch >= 0 and broker.epoch == replica_epoch


def _quiet(
    state: BrokerState,
    key: tuple[str, int],
    wanted: FetchPartition,
    cached: CachedPartition,
    replica: int,
    replica_epoch: int,
) -> bool:
    """A session partition with nothing to answer, settled without building its answer:
    the follower still stands where this leader last found it on its history, has read
    to the log end, and has heard the current high watermark and log start. It counts as
    fetched (its caught-up time moves on) and is left out of the answer. Anything else,
    or any doubt, takes the full path."""
    partition = state.partitions.get(key)
    if partition is None or not registered_follower(state, replica, replica_epoch):
        return False
    leader = partition.leader_state
    if leader is None or leader is not cached.checked_by or leader.is_obsolete:
        return False
    if cached.checked_position != (wanted.fetch_offset, wanted.last_fetched_epoch):
        return False
    log = partition.log
    high_watermark = leader.high_watermark
    if (
        log.offline is not None
        or log.log_end_offset != wanted.fetch_offset
        or high_watermark != cached.high_watermark
        or high_watermark != cached.last_stable_offset
        or log.log_start_offset != cached.log_start_offset
    ):
        return False
    partition.follower_broker_epochs[replica] = replica_epoch
    change = leader.on_follower_fetch(replica, wanted.fetch_offset, state.monotonic_ms)
    if change.error != ErrorCode.NONE:
        return False  # the full path answers the error
    if change.recheck_acks:
        state.replication_changed(key)
    return True


def attempt(
    state: BrokerState,
    version: int,
    request: FetchRequest,
    context: FetchContext,
    deadline: int,
    timed_out: bool,
) -> Outcome:
    """One attempt at answering; ``context`` holds the partitions to read (the session's,
    for an incremental fetch: every one of them counts as fetched again, so that a
    follower at the log end stays caught up while it names nothing new)."""
    replica = replica_of(version, request)
    total = 0
    budget = request.max_bytes if request.max_bytes > 0 else 2**31 - 1
    responses: list[FetchableTopicResponse] = []
    watched: set[tuple[str, int]] = set()
    session = context.session if context.incremental else None
    replica_epoch = request.replica_state.replica_epoch
    for topic in context.topics:
        name = state.fetched_topic_name(topic.topic, topic.topic_id, version >= TOPIC_IDS_VERSION)
        out = FetchableTopicResponse(topic=topic.topic, topic_id=topic.topic_id)
        responses.append(out)
        for wanted in topic.partitions:
            key = (name, wanted.partition)
            cached = None
            if session is not None:
                session_key = (topic.topic_id, topic.topic, wanted.partition)
                cached = session.partitions.get(session_key)
                if (
                    cached is not None
                    and session_key not in context.named
                    and _quiet(state, key, wanted, cached, replica, replica_epoch)
                ):
                    watched.add(key)
                    continue
            if cached is not None:
                cached.checked_by = None
            data = PartitionData(partition_index=wanted.partition, high_watermark=-1, records=b"")
            out.partitions.append(data)
            partition = state.partitions.get(key)
            leader = partition.leader_state if partition is not None else None
            if partition is None or leader is None:
                data.error_code = (
                    ErrorCode.NOT_LEADER_OR_FOLLOWER
                    if name in state.image.topics_by_name
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
                hint = leader_hint(state, name, wanted.partition) if name else None
                if hint is not None:
                    data.current_leader.leader_id = hint.leader_id
                    data.current_leader.leader_epoch = hint.leader_epoch
                continue
            if replica not in leader.replicas or not registered_follower(
                state, replica, replica_epoch
            ):
                # Not a replica of this partition, or not the process registered under
                # that id (a client posing as a follower, or one that lost its session):
                # served nothing and counted nowhere.
                data.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                continue
            error = leader.check_leader_epoch(wanted.current_leader_epoch)
            if error != ErrorCode.NONE:
                data.error_code = error
                data.current_leader.leader_id = state.settings.node_id
                data.current_leader.leader_epoch = leader.leader_epoch
                continue
            log = partition.log
            data.log_start_offset = log.log_start_offset
            data.high_watermark = leader.high_watermark
            diverged = diverging_epoch(
                LogEpochs(log), wanted.fetch_offset, wanted.last_fetched_epoch
            )
            if diverged is not None:
                # The follower's log parts from ours: it truncates there and asks again.
                data.diverging_epoch = EpochEndOffset(epoch=diverged[0], end_offset=diverged[1])
                continue
            if not log.log_start_offset <= wanted.fetch_offset <= log.log_end_offset:
                data.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                continue
            partition.follower_broker_epochs[replica] = replica_epoch
            change = leader.on_follower_fetch(replica, wanted.fetch_offset, state.monotonic_ms)
            if change.error != ErrorCode.NONE:
                data.error_code = change.error
                continue
            if cached is not None:
                cached.checked_by = leader
                cached.checked_position = (wanted.fetch_offset, wanted.last_fetched_epoch)
            if change.recheck_acks:
                state.replication_changed(key)
            data.high_watermark = leader.high_watermark
            data.last_stable_offset = leader.high_watermark
            watched.add(key)
            if budget <= 0 or wanted.fetch_offset >= log.log_end_offset:
                continue
            limit = min(wanted.partition_max_bytes, budget)
            try:
                found_range = log.read(wanted.fetch_offset, max(limit, 1))
            except OffsetOutOfRangeError:
                data.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                continue
            except LogOfflineError:
                data.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            if found_range is not None:
                data.records = found_range
                total += found_range.length
                budget -= found_range.length
    if total >= max(request.min_bytes, 1) or timed_out or request.max_wait_ms <= 0 or not watched:
        return Reply(
            FetchResponse(responses=context.shape(responses), session_id=context.session_id)
        )
    return AwaitData(
        frozenset(watched),
        deadline,
        lambda expired: attempt(state, version, request, context, deadline, expired),
    )
