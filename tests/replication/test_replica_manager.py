"""The replica manager: one Fetch per leader in its session, an answer read into log
actions, and AlterPartition requests with their broker epochs and their retries."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import AlterPartitionResponse, FetchResponse
from odradek.protocol.messages.alter_partition_response import (
    PartitionData as AlterPartitionAnswer,
)
from odradek.protocol.messages.alter_partition_response import TopicData
from odradek.protocol.messages.fetch_response import (
    EpochEndOffset,
    FetchableTopicResponse,
    PartitionData,
)
from odradek.replication.follower import FollowerAction, PartitionFollower
from odradek.replication.leader import PartitionLeader, PartitionRegistration
from odradek.replication.replica_manager import ReplicaManager

TOPIC_ID = uuid.UUID(int=7)
ME, OTHER = 1, 2


@dataclass
class Log:
    """A replica's log as the manager and the follower read it."""

    end: int = 0
    epochs: list[tuple[int, int]] = field(default_factory=list)  # (epoch, start offset)
    offline: str | None = None

    @property
    def log_end_offset(self) -> int:
        return self.end

    def latest_epoch(self) -> int:
        return self.epochs[-1][0] if self.epochs else -1

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        later = [start for e, start in self.epochs if e > epoch]
        earlier = [e for e, _ in self.epochs if e <= epoch]
        return (earlier[-1], later[0] if later else self.end) if earlier else (-1, -1)


@dataclass
class Hosted:
    index: int
    log: Log
    leader_state: PartitionLeader | None = None
    follower_state: PartitionFollower | None = None
    follower_broker_epochs: dict[int, int] = field(default_factory=dict)
    topic_id: uuid.UUID = TOPIC_ID

    @property
    def key(self) -> tuple[str, int]:
        return ("t", self.index)


def _manager(partitions: dict[tuple[str, int], Hosted]) -> ReplicaManager[Hosted]:
    return ReplicaManager(
        ME, partitions, fetch_wait_max_ms=500, fetch_max_bytes=1 << 20, isr_retry_ms=100, now_ms=0
    )


def _follower(index: int, end: int) -> Hosted:
    log = Log(end, [(0, 0)] if end else [])
    registration = PartitionRegistration((OTHER, ME), (OTHER, ME), OTHER, 0, 0)
    follower = PartitionFollower(
        replica_id=ME, registration=registration, log=log, high_watermark=0
    )
    return Hosted(index, log, follower_state=follower)


def _answer(*partitions: PartitionData, session_id: int = 0) -> FetchResponse:
    return FetchResponse(
        session_id=session_id,
        responses=[FetchableTopicResponse(topic_id=TOPIC_ID, partitions=list(partitions))],
    )


def test_one_fetch_per_leader_names_only_what_moved_once_in_a_session() -> None:
    hosted = {("t", i): _follower(i, end) for i, end in ((0, 3), (1, 5))}
    manager = _manager(hosted)
    plan = manager.next_fetch(OTHER, 0, broker_epoch=9)
    assert plan is not None
    request = plan.request
    assert (request.replica_state.replica_id, request.replica_state.replica_epoch) == (ME, 9)
    assert [(p.partition, p.fetch_offset) for t in request.topics for p in t.partitions] == [
        (0, 3),
        (1, 5),
    ]
    assert (request.session_id, request.session_epoch) == (0, 0)
    # Both at the leader's end: nothing to append, and the session is open.
    actions = manager.on_fetch_response(
        plan,
        _answer(
            PartitionData(partition_index=0, high_watermark=3, records=b""),
            PartitionData(partition_index=1, high_watermark=5, records=b""),
            session_id=44,
        ),
        1,
    )
    assert [a.decision.action for a in actions] == [FollowerAction.APPEND] * 2
    for action in actions:
        assert manager.on_appended(action.follower, action.data) == action.partition.log.end
    # Partition 1 appended elsewhere (its log moved): only it is named now.
    hosted[("t", 1)].log.end = 6
    again = manager.next_fetch(OTHER, 2, broker_epoch=9)
    assert again is not None
    assert (again.request.session_id, again.request.session_epoch) == (44, 1)
    named = [(p.partition, p.fetch_offset) for t in again.request.topics for p in t.partitions]
    assert named == [(1, 6)]
    # An incremental answer that leaves partition 0 out means "nothing new": it is
    # fetched again at once, with no backoff.
    manager.on_fetch_response(again, _answer(session_id=44), 3)
    third = manager.next_fetch(OTHER, 3, broker_epoch=9)
    assert third is not None and set(third.fetches) == {("t", 0), ("t", 1)}


def test_an_offline_log_is_never_fetched_and_a_failed_fetch_backs_off() -> None:
    hosted = {("t", i): _follower(i, 0) for i in (0, 1)}
    hosted[("t", 1)].log.offline = "disk error"
    manager = _manager(hosted)
    plan = manager.next_fetch(OTHER, 0, broker_epoch=9)
    assert plan is not None and set(plan.fetches) == {("t", 0)}
    manager.on_fetch_failed(plan, 10)
    assert manager.next_fetch(OTHER, 11, broker_epoch=9) is None  # replica.fetch.backoff.ms
    later = manager.next_fetch(OTHER, 10_000, broker_epoch=9)
    assert later is not None and later.request.session_epoch == 0  # the session starts over


def test_a_diverging_epoch_is_a_truncation_for_the_caller() -> None:
    hosted = {("t", 0): _follower(0, 8)}
    manager = _manager(hosted)
    plan = manager.next_fetch(OTHER, 0, broker_epoch=9)
    assert plan is not None
    diverged = PartitionData(
        partition_index=0, high_watermark=4, diverging_epoch=EpochEndOffset(epoch=0, end_offset=5)
    )
    (action,) = manager.on_fetch_response(plan, _answer(diverged), 1)
    assert action.decision.action is FollowerAction.TRUNCATE
    assert action.decision.offset == 5
    assert action.partition is hosted[("t", 0)]


def _leader(now_ms: int = 0) -> Hosted:
    registration = PartitionRegistration((ME, OTHER), (ME, OTHER), ME, 3, 10)
    leader = PartitionLeader(
        replica_id=ME,
        registration=registration,
        log_end_offset=5,
        durable_end_offset=5,
        high_watermark=0,
        min_insync_replicas=1,
        replica_lag_time_max_ms=100,
        now_ms=now_ms,
    )
    return Hosted(0, Log(5, [(3, 0)]), leader_state=leader)


def test_a_lagging_follower_is_proposed_out_and_a_retriable_answer_is_resent_later() -> None:
    hosted = {("t", 0): _leader()}
    manager = _manager(hosted)
    (send,) = manager.isr_tick(1_000, 17, (), lambda broker: -1)
    assert not send.retry
    assert tuple(send.proposal.new_isr) == (ME,)
    partition = send.request.topics[0].partitions[0]
    assert (partition.leader_epoch, partition.partition_epoch) == (3, 10)
    assert [(b.broker_id, b.broker_epoch) for b in partition.new_isr_with_epochs] == [(ME, 17)]
    # One change in flight: nothing more until it is answered.
    assert list(manager.isr_tick(1_001, 17, (), lambda broker: -1)) == []
    assert not manager.on_alter_partition_result(send, ErrorCode.REQUEST_TIMED_OUT, 1_010)
    assert list(manager.isr_tick(1_050, 17, (), lambda broker: -1)) == []  # isr_retry_ms
    (resent,) = manager.isr_tick(1_110, 17, (), lambda broker: -1)
    assert resent.retry and resent.proposal == send.proposal
    answer = AlterPartitionResponse(
        topics=[
            TopicData(
                topic_id=TOPIC_ID,
                partitions=[
                    AlterPartitionAnswer(
                        partition_index=0,
                        leader_id=ME,
                        leader_epoch=3,
                        isr=[ME],
                        partition_epoch=11,
                    )
                ],
            )
        ]
    )
    assert manager.on_alter_partition_result(resent, answer, 1_120)
    leader = hosted[("t", 0)].leader_state
    assert leader is not None and leader.isr == frozenset({ME})
