"""Produce, Fetch, ListOffsets and Metadata handlers on a broker state over a simulated disk."""

from __future__ import annotations

import random
from typing import Any

import pytest

from odradek.broker.effects import AwaitData, AwaitFlush, CommitRecords, NoReply, Outcome, Reply
from odradek.broker.fetch import handle_fetch
from odradek.broker.list_offsets import handle_list_offsets
from odradek.broker.partition import LocalPartition
from odradek.broker.produce import handle_produce
from odradek.broker.state import BrokerSettings, BrokerState
from odradek.broker.topics import handle_create_topics, handle_metadata
from odradek.controller.image import MetadataImage
from odradek.core.errors import LogOfflineError
from odradek.protocol.api import RequestHeader
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    CreateTopicsRequest,
    FetchRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)
from odradek.protocol.messages.create_topics_request import CreatableTopic, CreatableTopicConfig
from odradek.protocol.messages.fetch_request import FetchPartition, FetchTopic
from odradek.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from odradek.protocol.messages.metadata_request import MetadataRequestTopic
from odradek.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from odradek.protocol.record_batch import (
    Compression,
    Record,
    encode_batch,
    encode_control_batch,
    iter_batches,
)
from odradek.storage.log import LogConfig, PartitionLog
from odradek.testing.sim_disk import SimDisk


class Harness:
    """A broker state whose metadata commits and flushes are carried out at once."""

    def __init__(self, flush_before_ack: bool = True) -> None:
        self.disk = SimDisk(random.Random(0))
        self.disk.makedirs("data")
        self.state = BrokerState(
            settings=BrokerSettings(
                node_id=1,
                cluster_id="c",
                host="127.0.0.1",
                port=9092,
                message_max_bytes=10_000,
                flush_before_ack=flush_before_ack,
            ),
            image=MetadataImage(),
            rng=random.Random(1),
        )
        self.offset = 0

    def carry(self, outcome: Outcome) -> Any:
        while True:
            if isinstance(outcome, Reply):
                return outcome.response
            if isinstance(outcome, NoReply):
                return None
            if isinstance(outcome, CommitRecords):
                for record in outcome.records:
                    self.state.image.replay(record, self.offset)
                    self.offset += 1
                self.sync()
                outcome = outcome.then()
            elif isinstance(outcome, AwaitFlush):
                failed = set()
                for key in outcome.offsets:
                    try:
                        self.state.partitions[key].log.flush(0)
                    except LogOfflineError:
                        failed.add(key)
                outcome = outcome.then(frozenset(failed))
            elif isinstance(outcome, AwaitData):
                outcome = outcome.then(True)

    def sync(self) -> None:
        for topic in self.state.image.topics_by_name.values():
            for index, p in topic.partitions.items():
                key = (topic.name, index)
                if key not in self.state.partitions:
                    log = PartitionLog.create(
                        self.disk, f"data/{topic.name}-{index}", LogConfig(), 0
                    )
                    self.state.partitions[key] = LocalPartition(
                        topic.name,
                        index,
                        topic.topic_id,
                        log,
                        p.leader_epoch,
                        self.state.settings.flush_before_ack,
                    )

    def create(self, name: str, partitions: int = 1) -> None:
        request = CreateTopicsRequest(
            topics=[CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)]
        )
        response = self.carry(handle_create_topics(self.state, header(19, 7), request))
        assert response.topics[0].error_code == ErrorCode.NONE

    def produce(self, topic: str, records: bytes, acks: int = -1, partition: int = 0) -> Any:
        request = ProduceRequest(
            acks=acks,
            timeout_ms=1000,
            topic_data=[
                TopicProduceData(
                    name=topic,
                    partition_data=[
                        PartitionProduceData(
                            index=partition, records=memoryview(bytearray(records))
                        )
                    ],
                )
            ],
        )
        return handle_produce(self.state, header(0, 9), request)

    def fetch(self, topic: str, offset: int, max_bytes: int = 1 << 20, **kwargs: Any) -> Any:
        request = FetchRequest(
            max_wait_ms=0,
            topics=[
                FetchTopic(
                    topic=topic,
                    partitions=[
                        FetchPartition(
                            partition=0,
                            fetch_offset=offset,
                            partition_max_bytes=max_bytes,
                            **kwargs,
                        )
                    ],
                )
            ],
        )
        return (
            self.carry(handle_fetch(self.state, header(1, 11), request)).responses[0].partitions[0]
        )


def header(api_key: int, version: int) -> RequestHeader:
    return RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=1)


def batch(count: int = 2, value: bytes = b"v", **kwargs: Any) -> bytes:
    return encode_batch(
        [Record(offset_delta=i, timestamp=1000 + i, value=value) for i in range(count)], **kwargs
    )


def test_acks_all_waits_for_a_flush_and_consumers_see_only_flushed_data() -> None:
    h = Harness()
    h.create("t")
    outcome = h.produce("t", batch(3))
    assert isinstance(outcome, AwaitFlush)
    assert outcome.offsets == {("t", 0): 3}
    # Before the flush the high watermark has not moved: nothing is readable yet.
    assert h.fetch("t", 0).high_watermark == 0
    response = h.carry(outcome)
    result = response.responses[0].partition_responses[0]
    assert (result.error_code, result.base_offset) == (ErrorCode.NONE, 0)
    data = h.fetch("t", 0)
    assert data.high_watermark == 3
    assert [b.base_offset for b in iter_batches(data.records.read())] == [0]


def test_acks_one_and_zero_answer_without_waiting() -> None:
    h = Harness()
    h.create("t")
    one = h.produce("t", batch(), acks=1)
    assert (
        isinstance(one, Reply) and one.response.responses[0].partition_responses[0].base_offset == 0
    )
    assert isinstance(h.produce("t", batch(), acks=0), NoReply)
    assert h.state.partitions[("t", 0)].log.log_end_offset == 4


@pytest.mark.parametrize(
    ("records", "acks", "code"),
    [
        (batch(), 2, ErrorCode.INVALID_REQUIRED_ACKS),
        (batch()[:-1], -1, ErrorCode.CORRUPT_MESSAGE),
        (batch(value=b"x" * 20_000), -1, ErrorCode.MESSAGE_TOO_LARGE),
        (encode_control_batch(1, b"\x00\x00\x00\x00\x00\x00"), -1, ErrorCode.INVALID_RECORD),
        (
            batch(is_transactional=True, producer_id=7, producer_epoch=0, base_sequence=0),
            -1,
            ErrorCode.INVALID_RECORD,
        ),
    ],
)
def test_bad_produce_requests_get_kafka_errors_and_append_nothing(
    records: bytes, acks: int, code: ErrorCode
) -> None:
    h = Harness()
    h.create("t")
    response = h.carry(h.produce("t", records, acks=acks))
    assert response.responses[0].partition_responses[0].error_code == code
    assert h.state.partitions[("t", 0)].log.log_end_offset == 0


def test_crc_corruption_is_corrupt_message() -> None:
    h = Harness()
    h.create("t")
    damaged = bytearray(batch())
    damaged[-1] ^= 1
    response = h.carry(h.produce("t", bytes(damaged)))
    result = response.responses[0].partition_responses[0]
    assert result.error_code == ErrorCode.CORRUPT_MESSAGE and "BAD_CRC" in result.error_message


def test_compressed_batches_pass_through_untouched() -> None:
    h = Harness()
    h.create("t")
    original = batch(5, compression=Compression.ZSTD)
    h.carry(h.produce("t", original))
    stored = h.fetch("t", 0).records.read()
    # Only the base offset (0 already) and leader epoch (bytes 12-16) may differ.
    assert stored[16:] == original[16:]


def test_unknown_topic_and_partition() -> None:
    h = Harness()
    h.create("t")
    assert (
        h.carry(h.produce("nope", batch())).responses[0].partition_responses[0].error_code
        == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert h.fetch("nope", 0).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_fetch_errors_and_limits() -> None:
    h = Harness()
    h.create("t")
    for _ in range(3):
        h.carry(h.produce("t", batch(2, value=b"x" * 100)))
    assert h.fetch("t", 7).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert h.fetch("t", 6).records == b""  # at the end: nothing, no error
    unchecked = h.fetch("t", 0, current_leader_epoch=-1)
    assert unchecked.error_code == ErrorCode.NONE  # -1: the client gives no epoch
    future = h.fetch("t", 0, current_leader_epoch=3)
    assert future.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    one = h.fetch("t", 0, max_bytes=1)  # the first batch goes whole even past the limit
    assert [b.base_offset for b in iter_batches(one.records.read())] == [0]


def test_fetch_waits_for_min_bytes_then_answers_at_the_deadline() -> None:
    h = Harness()
    h.create("t")
    request = FetchRequest(
        max_wait_ms=500,
        min_bytes=1,
        topics=[
            FetchTopic(topic="t", partitions=[FetchPartition(partition=0, partition_max_bytes=100)])
        ],
    )
    outcome = handle_fetch(h.state, header(1, 11), request)
    assert isinstance(outcome, AwaitData)
    assert outcome.partitions == frozenset({("t", 0)}) and outcome.deadline_ms == 500
    h.carry(h.produce("t", batch()))
    woken = outcome.then(False)
    assert isinstance(woken, Reply)
    assert woken.response.responses[0].partitions[0].high_watermark == 2


def test_list_offsets_earliest_latest_and_by_time() -> None:
    h = Harness()
    h.create("t")
    for i in range(4):
        h.carry(
            h.produce(
                "t", encode_batch([Record(offset_delta=0, timestamp=10_000 + i * 100, value=b"v")])
            )
        )

    def ask(timestamp: int, version: int = 7) -> tuple[int, int, int]:
        request = ListOffsetsRequest(
            replica_id=-1,
            topics=[
                ListOffsetsTopic(
                    name="t",
                    partitions=[ListOffsetsPartition(partition_index=0, timestamp=timestamp)],
                )
            ],
        )
        response = h.carry(handle_list_offsets(h.state, header(2, version), request))
        p = response.topics[0].partitions[0]
        return p.error_code, p.offset, p.timestamp

    assert ask(-2) == (0, 0, -1)
    assert ask(-1) == (0, 4, -1)
    assert ask(10_150) == (0, 2, 10_200)
    assert ask(99_999) == (0, -1, -1)
    assert ask(-3) == (0, 3, 10_300)
    assert ask(-1, version=1)[1] == 4  # leader epoch is not in v1 and must not be sent


def test_metadata_auto_creates_and_reports_topics() -> None:
    h = Harness()
    request = MetadataRequest(
        topics=[MetadataRequestTopic(name="auto")], allow_auto_topic_creation=True
    )
    outcome = handle_metadata(h.state, header(3, 12), request)
    assert isinstance(outcome, CommitRecords)
    response = h.carry(outcome)
    topic = response.topics[0]
    assert topic.name == "auto" and topic.error_code == ErrorCode.NONE
    assert [p.leader_id for p in topic.partitions] == [1]
    assert response.brokers[0].port == 9092 and response.controller_id == 1
    refused = MetadataRequest(
        topics=[MetadataRequestTopic(name="other")], allow_auto_topic_creation=False
    )
    response = h.carry(handle_metadata(h.state, header(3, 12), refused))
    assert response.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    everything = h.carry(handle_metadata(h.state, header(3, 0), MetadataRequest(topics=[])))
    assert [t.name for t in everything.topics] == ["auto"]  # v0: an empty list means all


def test_create_topics_validation() -> None:
    h = Harness()
    bad = CreateTopicsRequest(
        topics=[
            CreatableTopic(name="ok", num_partitions=2, replication_factor=1),
            CreatableTopic(name="two", num_partitions=1, replication_factor=2),
            CreatableTopic(name="zero", num_partitions=0, replication_factor=1),
            CreatableTopic(name="bad/name", num_partitions=1, replication_factor=1),
            CreatableTopic(name="dup", num_partitions=1, replication_factor=1),
            CreatableTopic(name="dup", num_partitions=1, replication_factor=1),
            # The record of unclean elections is the controller's to write.
            CreatableTopic(
                name="history",
                num_partitions=1,
                replication_factor=1,
                configs=[CreatableTopicConfig(name="odradek.unclean.elections", value="[]")],
            ),
        ],
        validate_only=True,
    )
    response = h.carry(handle_create_topics(h.state, header(19, 7), bad))
    codes = [(t.name, t.error_code) for t in response.topics]
    assert codes == [
        ("ok", ErrorCode.NONE),
        ("two", ErrorCode.INVALID_REPLICATION_FACTOR),
        ("zero", ErrorCode.INVALID_PARTITIONS),
        ("bad/name", ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("dup", ErrorCode.INVALID_REQUEST),
        ("dup", ErrorCode.INVALID_REQUEST),
        ("history", ErrorCode.INVALID_CONFIG),
    ]
    assert h.state.image.topics_by_name == {}  # validate_only created nothing


def test_idempotent_retries_are_acknowledged_once_with_their_first_offsets() -> None:
    h = Harness()
    h.create("t")

    def send(sequence: int, epoch: int = 0) -> tuple[int, int]:
        records = batch(3, producer_id=7, producer_epoch=epoch, base_sequence=sequence)
        result = h.carry(h.produce("t", records)).responses[0].partition_responses[0]
        return result.error_code, result.base_offset

    assert send(0) == (ErrorCode.NONE, 0)
    assert send(3) == (ErrorCode.NONE, 3)
    assert send(0) == (ErrorCode.NONE, 0)  # a retry: the original offset, no append
    assert h.state.partitions[("t", 0)].log.log_end_offset == 6
    assert send(9)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # a gap
    assert send(0, epoch=1) == (ErrorCode.NONE, 6)  # a new epoch starts at 0
    assert send(6, epoch=0)[0] == ErrorCode.INVALID_PRODUCER_EPOCH  # fenced
    assert h.state.partitions[("t", 0)].log.log_end_offset == 9


def test_acks_all_is_not_acknowledged_when_leadership_moves_during_the_flush() -> None:
    """The replica rebuilt for a new leader epoch (here: this node now follows) while an
    acks=all batch was being flushed: no ISR counts that batch any more, and the new
    leader may lack it, so the producer is told NOT_LEADER_OR_FOLLOWER, never NONE."""
    h = Harness()
    h.create("t")
    outcome = h.produce("t", batch(3))
    assert isinstance(outcome, AwaitFlush)
    old = h.state.partitions[("t", 0)]
    # What the shell does when the metadata moves leadership: a new LocalPartition.
    h.state.partitions[("t", 0)] = LocalPartition(
        "t", 0, old.topic_id, old.log, old.leader_epoch + 1, True, is_leader=False
    )
    response = h.carry(outcome)
    result = response.responses[0].partition_responses[0]
    assert result.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
