"""A follower refuses what only the leader may do and names the leader; the leader
answers where its epochs end (OffsetForLeaderEpoch)."""

from __future__ import annotations

from odradek.broker.fetch import handle_fetch
from odradek.broker.list_offsets import handle_list_offsets
from odradek.broker.offset_for_leader_epoch import handle_offset_for_leader_epoch
from odradek.broker.produce import handle_produce
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    FetchRequest,
    ListOffsetsRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
)
from odradek.protocol.messages.fetch_request import FetchPartition, FetchTopic
from odradek.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from odradek.protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from odradek.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from tests.broker.harness import batch, header, new_harness


def test_produce_on_a_follower_names_the_leader_and_appends_nothing() -> None:
    h = new_harness()
    h.register_broker(2, host="leader.test", port=19092)
    h.add_topic("t", [[2, 1]])
    produce = ProduceRequest(
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            TopicProduceData(
                name="t",
                partition_data=[PartitionProduceData(index=0, records=memoryview(batch(1)))],
            )
        ],
    )
    response = h.carry(handle_produce(h.state, header(ProduceRequest.API_KEY, 11), produce))
    result = response.responses[0].partition_responses[0]
    assert result.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (result.current_leader.leader_id, result.current_leader.leader_epoch) == (2, 0)
    assert [(n.node_id, n.host, n.port) for n in response.node_endpoints] == [
        (2, "leader.test", 19092)
    ]
    assert h.partition("t").log.log_end_offset == 0


def test_produce_v9_gets_the_error_without_the_hint_fields() -> None:
    h = new_harness()
    h.register_broker(2)
    h.add_topic("t", [[2, 1]])
    produce = ProduceRequest(
        acks=1,
        timeout_ms=1000,
        topic_data=[
            TopicProduceData(
                name="t",
                partition_data=[PartitionProduceData(index=0, records=memoryview(batch(1)))],
            )
        ],
    )
    response = h.carry(handle_produce(h.state, header(ProduceRequest.API_KEY, 9), produce))
    result = response.responses[0].partition_responses[0]
    assert result.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert result.current_leader.leader_id == -1 and response.node_endpoints == []


def test_consumer_fetch_and_list_offsets_on_a_follower_are_refused() -> None:
    h = new_harness()
    h.register_broker(2, host="leader.test", port=19092)
    h.add_topic("t", [[2, 1]])
    fetch = FetchRequest(
        max_wait_ms=0,
        topics=[
            FetchTopic(
                topic_id=h.image.topics_by_name["t"].topic_id,
                partitions=[FetchPartition(partition=0, fetch_offset=0)],
            )
        ],
    )
    fetched = h.carry(handle_fetch(h.state, header(FetchRequest.API_KEY, 16), fetch))
    data = fetched.responses[0].partitions[0]
    assert data.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert data.current_leader.leader_id == 2
    assert [n.node_id for n in fetched.node_endpoints] == [2]
    offsets = ListOffsetsRequest(
        topics=[
            ListOffsetsTopic(
                name="t", partitions=[ListOffsetsPartition(partition_index=0, timestamp=-1)]
            )
        ]
    )
    listed = h.carry(handle_list_offsets(h.state, header(ListOffsetsRequest.API_KEY, 7), offsets))
    assert listed.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_offset_for_leader_epoch_answers_where_each_epoch_ends() -> None:
    h = new_harness()
    h.add_topic("t")
    partition = h.partition("t")
    partition.log.append_as_leader(batch(3), 0, 1000)  # epoch 0: offsets 0-2
    partition.log.append_as_leader(batch(2), 4, 1000)  # epoch 4: offsets 3-4
    partition.leader_epoch = 4

    def ask(epoch: int, current: int = -1) -> tuple[int, int, int]:
        request = OffsetForLeaderEpochRequest(
            topics=[
                OffsetForLeaderTopic(
                    topic="t",
                    partitions=[
                        OffsetForLeaderPartition(
                            partition=0, current_leader_epoch=current, leader_epoch=epoch
                        )
                    ],
                )
            ]
        )
        outcome = handle_offset_for_leader_epoch(
            h.state, header(OffsetForLeaderEpochRequest.API_KEY, 4), request
        )
        result = h.carry(outcome).topics[0].partitions[0]
        return result.error_code, result.leader_epoch, result.end_offset

    assert ask(0) == (ErrorCode.NONE, 0, 3)
    assert ask(2) == (ErrorCode.NONE, 0, 3)  # the largest epoch not above 2 ends at 3
    assert ask(4) == (ErrorCode.NONE, 4, 5)
    assert ask(4, current=3)[0] == ErrorCode.FENCED_LEADER_EPOCH
    assert ask(4, current=5)[0] == ErrorCode.UNKNOWN_LEADER_EPOCH
