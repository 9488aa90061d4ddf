"""Produce, Fetch, ListOffsets and Metadata handlers on a broker state over a simulated disk."""

from __future__ import annotations

import random
from typing import Any

import pytest

from odradek.broker.effects import (
    AwaitData,
    AwaitFlush,
    AwaitRecordCheck,
    CommitRecords,
    NoReply,
    Outcome,
    Reply,
)
from odradek.broker.fetch import handle_fetch
from odradek.broker.list_offsets import handle_list_offsets
from odradek.broker.partition import LocalPartition
from odradek.broker.produce import handle_produce
from odradek.broker.state import BrokerSettings, BrokerState
from odradek.broker.topic_config import effective_record_policy
from odradek.broker.topics import handle_create_topics, handle_metadata
from odradek.controller.image import MetadataImage
from odradek.core.errors import LogOfflineError
from odradek.protocol import record_batch as rb
from odradek.protocol.api import RequestHeader
from odradek.protocol.compression import (
    DecompressBuffer,
)
from odradek.protocol.control_batch import (
    encode_control_batch,
)
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
from odradek.protocol.metadata import ConfigRecord
from odradek.protocol.record_batch import (
    Compression,
    TimestampType,
    iter_batches,
    validate_batch,
)
from odradek.protocol.record_codec import (
    Record,
    decode_records,
    encode_batch,
)
from odradek.storage.log import LogConfig, PartitionLog
from odradek.testing.sim_disk import SimDisk
from tests.broker.harness import roundtrip, server_config
from tests.protocol.test_record_scan import forge, raw_record

DECOMPRESS_LIMIT = 8 << 20
"""The decompression bound of the harness's record-check "thread" (the shell's is
socket.request.max.bytes); the event loop's is the state's, 4 MiB."""


class Harness:
    """A broker state whose metadata commits and flushes are carried out at once."""

    def __init__(
        self, flush_before_ack: bool = True, properties: dict[str, str] | None = None
    ) -> None:
        self.server = server_config(properties)
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
            elif isinstance(outcome, AwaitRecordCheck):
                # The shell runs the check on its record-check thread; the result is the same.
                outcome = outcome.then(outcome.check(DecompressBuffer(DECOMPRESS_LIMIT)))
            else:
                raise AssertionError(f"the harness cannot carry {outcome!r}")

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
                        # As the shell does: from the topic's configs and the broker's.
                        record_policy=effective_record_policy(
                            self.server, self.state.image.configs, topic.name, 1
                        ),
                    )

    def create(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
        request = CreateTopicsRequest(
            topics=[
                CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=1,
                    configs=[
                        CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()
                    ],
                )
            ]
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
    zero = h.produce("t", batch(), acks=0)
    assert isinstance(zero, NoReply) and zero.close_reason is None
    assert h.state.partitions[("t", 0)].log.log_end_offset == 4


def test_a_failed_acks_zero_produce_closes_the_connection() -> None:
    # The producer expects no answer, so it would never hear of the error: Kafka closes
    # the connection, and the client refreshes its metadata (a partition not hosted yet,
    # a leader that moved) instead of sending on into the void.
    h = Harness()
    h.create("t")
    failed = h.produce("nope", batch(), acks=0)
    assert isinstance(failed, NoReply)
    assert failed.close_reason is not None
    assert "nope-0: UNKNOWN_TOPIC_OR_PARTITION" in failed.close_reason
    assert h.state.partitions[("t", 0)].log.log_end_offset == 0


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


# Record validation (Kafka's LogValidator) ----------------------------------------------

NOW_MS = 1_700_000_000_000


def produced(h: Harness, topic: str, records: bytes, acks: int = -1) -> Any:
    """The partition result of producing ``records``, as a v9 client reads it."""
    response = roundtrip(h.carry(h.produce(topic, records, acks=acks)), 9)
    return response.responses[0].partition_responses[0]


def timed(*timestamps: int, **kwargs: Any) -> bytes:
    return encode_batch(
        [Record(offset_delta=i, timestamp=t, value=b"v") for i, t in enumerate(timestamps)],
        **kwargs,
    )


@pytest.mark.parametrize(
    ("records", "problem"),
    [
        # Uncompressed: the count says three, two are there.
        (
            forge(raw_record(0, value=b"x" * 20) + raw_record(1, value=b"x" * 20), count=3),
            "BAD_RECORD_COUNT",
        ),
        # The case: a compressed batch claiming 2^31 - 1 records over a tiny body.
        (forge(raw_record(0), count=2**31 - 1, compression=Compression.ZSTD), "BAD_RECORD_COUNT"),
        (forge(raw_record(0) + raw_record(2), count=2, last_offset_delta=1), "BAD_OFFSET_DELTA"),
        (forge(raw_record(0, extra=b"\x00\x00"), count=1), "BAD_RECORDS"),
        (
            forge(raw_record(0) + b"\x00" * 7, count=1, compression=Compression.LZ4),
            "BAD_RECORD_COUNT",
        ),
    ],
)
def test_batches_that_lie_about_their_records_are_refused(records: bytes, problem: str) -> None:
    h = Harness()
    h.create("t")
    result = produced(h, "t", records)
    assert result.error_code == ErrorCode.INVALID_RECORD
    assert problem in result.error_message
    log = h.state.partitions[("t", 0)].log
    assert log.log_end_offset == 0  # nothing stored, the offsets did not jump
    assert produced(h, "t", batch(2)).base_offset == 0


def test_a_compressed_batch_too_large_once_decompressed_is_message_too_large() -> None:
    h = Harness()
    h.create("t")
    bomb = encode_batch(
        [Record(offset_delta=0, timestamp=1000, value=bytes(4 * DECOMPRESS_LIMIT))],
        compression=Compression.ZSTD,
    )
    result = produced(h, "t", bomb)
    assert result.error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert "DECOMPRESSED_TOO_LARGE" in result.error_message


def test_timestamps_out_of_bounds_are_refused_per_record() -> None:
    h = Harness()
    h.create("t", configs={"message.timestamp.before.max.ms": "60000"})
    h.state.now_ms = NOW_MS
    hour = 3_600_000
    records = timed(NOW_MS, NOW_MS + hour + 1, NOW_MS - 60_000, NOW_MS - 60_001, NOW_MS + hour)
    result = produced(h, "t", records)
    assert result.error_code == ErrorCode.INVALID_TIMESTAMP
    assert result.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [e.batch_index for e in result.record_errors] == [1, 3]
    assert (
        f"[{NOW_MS - 60_000}, {NOW_MS + hour}]" in result.record_errors[0].batch_index_error_message
    )
    assert h.state.partitions[("t", 0)].log.log_end_offset == 0
    # The same bounds on a compressed batch, decompressed and checked at once.
    zipped = timed(NOW_MS, NOW_MS + 2 * hour, compression=Compression.LZ4)
    assert isinstance(h.produce("t", zipped), Reply)
    result = produced(h, "t", zipped)
    assert (result.error_code, [e.batch_index for e in result.record_errors]) == (
        ErrorCode.INVALID_TIMESTAMP,
        [1],
    )


def test_records_without_a_timestamp_are_not_held_to_the_bounds() -> None:
    h = Harness()
    h.create("t", configs={"message.timestamp.before.max.ms": "0"})
    h.state.now_ms = NOW_MS
    assert produced(h, "t", timed(-1, -1)).error_code == ErrorCode.NONE


def test_broker_default_timestamp_bound_applies() -> None:
    h = Harness(properties={"log.message.timestamp.after.max.ms": "0"})
    h.create("t")
    h.state.now_ms = NOW_MS
    assert produced(h, "t", timed(NOW_MS + 1)).error_code == ErrorCode.INVALID_TIMESTAMP
    assert produced(h, "t", timed(NOW_MS)).error_code == ErrorCode.NONE


def test_a_client_batch_claiming_log_append_time_is_refused() -> None:
    h = Harness()
    h.create("t")
    records = batch(2, timestamp_type=TimestampType.LOG_APPEND_TIME)
    result = produced(h, "t", records)
    assert result.error_code == ErrorCode.INVALID_TIMESTAMP
    assert [e.batch_index for e in result.record_errors] == [0, 1]


def test_a_compacted_topic_refuses_records_without_a_key() -> None:
    h = Harness()
    h.create("c")
    # New topics may not be compacted yet, but a stored policy (an earlier build's, or an
    # internal topic's) is read as Kafka reads it: every record needs a key.
    h.state.image.replay(
        ConfigRecord(resource_type=2, resource_name="c", name="cleanup.policy", value="compact"),
        h.offset,
    )
    h.state.partitions[("c", 0)].record_policy = effective_record_policy(
        h.server, h.state.image.configs, "c", 1
    )
    records = encode_batch(
        [
            Record(offset_delta=0, timestamp=1000, key=b"k", value=b"v"),
            Record(offset_delta=1, timestamp=1000, key=None, value=b"v"),
        ]
    )
    result = produced(h, "c", records)
    assert result.error_code == ErrorCode.INVALID_RECORD
    assert [e.batch_index for e in result.record_errors] == [1]
    assert "Compacted topic cannot accept message without key" in result.error_message


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.ZSTD])
def test_log_append_time_is_set_in_place_and_answered(compression: Compression) -> None:
    h = Harness()
    h.create("t", configs={"message.timestamp.type": "LogAppendTime"})
    h.state.now_ms = NOW_MS
    original = batch(3, compression=compression)
    result = produced(h, "t", original)
    assert (result.error_code, result.log_append_time_ms) == (ErrorCode.NONE, NOW_MS)
    stored = bytearray(h.fetch("t", 0).records.read())
    header = validate_batch(stored)  # the CRC was rewritten with the fields
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert header.max_timestamp == NOW_MS
    # Nothing else changed: the same records, the same compressed bytes.
    assert stored[rb.RECORDS_OFFSET :] == original[rb.RECORDS_OFFSET :]
    assert [r.timestamp for r in decode_records(stored)] == [1000, 1001, 1002]


def test_a_create_time_batch_gets_its_records_max_timestamp() -> None:
    h = Harness()
    h.create("t")
    # A producer's lie about its max timestamp, with a CRC that covers the lie.
    forged = bytearray(timed(1000, 3000, 2000))
    rb.set_max_timestamp(forged, 0, TimestampType.CREATE_TIME, 9_999_999_999_999)
    assert produced(h, "t", bytes(forged)).error_code == ErrorCode.NONE
    stored = validate_batch(h.fetch("t", 0).records.read())
    assert stored.max_timestamp == 3000
    assert h.state.partitions[("t", 0)].log.segments[0].max_timestamp == 3000
    # A batch whose producer computed it is stored byte for byte.
    right = timed(5000, 4000)
    assert produced(h, "t", right).error_code == ErrorCode.NONE
    assert h.fetch("t", 3).records.read()[16:] == right[16:]


def test_list_offsets_by_time_on_a_log_append_time_topic() -> None:
    h = Harness()
    h.create("t", configs={"message.timestamp.type": "LogAppendTime"})
    for i in range(3):
        h.state.now_ms = NOW_MS + i * 1000
        assert produced(h, "t", batch(2)).error_code == ErrorCode.NONE
    request = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsTopic(
                name="t", partitions=[ListOffsetsPartition(partition_index=0, timestamp=NOW_MS + 1)]
            )
        ],
    )
    response = h.carry(handle_list_offsets(h.state, header(2, 7), request))
    found = response.topics[0].partitions[0]
    # Every record of the second batch has its append time, whatever its own field says.
    assert (found.offset, found.timestamp) == (2, NOW_MS + 1000)


def test_an_idempotent_retry_on_a_log_append_time_topic_gets_the_first_append_time() -> None:
    h = Harness()
    h.create("t", configs={"message.timestamp.type": "LogAppendTime"})
    records = batch(2, producer_id=7, producer_epoch=0, base_sequence=0)
    h.state.now_ms = NOW_MS
    assert produced(h, "t", records).log_append_time_ms == NOW_MS
    h.state.now_ms = NOW_MS + 500
    retry = produced(h, "t", records)
    assert (retry.error_code, retry.base_offset, retry.log_append_time_ms) == (
        ErrorCode.NONE,
        0,
        NOW_MS,
    )


def test_create_time_answers_no_log_append_time() -> None:
    h = Harness()
    h.create("t")
    h.state.now_ms = NOW_MS
    assert produced(h, "t", batch()).log_append_time_ms == -1


def large(records: int = 1, value: int = 5 << 20) -> bytes:
    """A zstd batch of a few KiB whose records decompress to ``value`` bytes and more."""
    return encode_batch(
        [Record(offset_delta=i, timestamp=1000, value=bytes(value)) for i in range(records)],
        compression=Compression.ZSTD,
    )


def test_which_checks_leave_the_event_loop() -> None:
    h = Harness()
    h.create("t")
    # Small batches, compressed or not: checked at once, the flush is next.
    assert isinstance(h.produce("t", batch(3)), AwaitFlush)
    assert isinstance(h.produce("t", batch(3, compression=Compression.LZ4)), AwaitFlush)
    # More records than the loop should walk, or more bytes than it should decompress:
    # the record-check thread.
    h.state.partitions[("t", 0)].max_message_bytes = 1 << 20
    many = encode_batch([Record(offset_delta=i, timestamp=1000) for i in range(8193)])
    for records, count in ((many, 8193), (large(), 1)):
        end = h.state.partitions[("t", 0)].log.log_end_offset
        outcome = h.produce("t", records)
        assert isinstance(outcome, AwaitRecordCheck)
        assert h.carry(outcome).responses[0].partition_responses[0].error_code == ErrorCode.NONE
        assert h.state.partitions[("t", 0)].log.log_end_offset == end + count


def test_leadership_moving_during_the_record_check_appends_nothing() -> None:
    h = Harness()
    h.create("t")
    outcome = h.produce("t", large())
    assert isinstance(outcome, AwaitRecordCheck)
    old = h.state.partitions[("t", 0)]
    h.state.partitions[("t", 0)] = LocalPartition(
        "t", 0, old.topic_id, old.log, old.leader_epoch + 1, True, is_leader=False
    )
    response = h.carry(outcome)
    assert response.responses[0].partition_responses[0].error_code == (
        ErrorCode.NOT_LEADER_OR_FOLLOWER
    )
    assert old.log.log_end_offset == 0


def test_a_partition_past_the_topics_count_is_unknown_not_led_elsewhere() -> None:
    # Kafka answers NOT_LEADER_OR_FOLLOWER only for a partition the metadata has: a client
    # told that about partition 7 of a one-partition topic waits for a leader that never
    # comes, where UNKNOWN_TOPIC_OR_PARTITION makes it refresh its metadata and give up.
    h = Harness()
    h.create("t")
    produced_to = h.produce("t", batch(), acks=1, partition=7)
    assert isinstance(produced_to, Reply)
    code = produced_to.response.responses[0].partition_responses[0].error_code
    assert code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    fetch = FetchRequest(
        max_wait_ms=0,
        topics=[
            FetchTopic(
                topic="t",
                partitions=[FetchPartition(partition=7, fetch_offset=0, partition_max_bytes=1024)],
            )
        ],
    )
    fetched = h.carry(handle_fetch(h.state, header(1, 11), fetch)).responses[0].partitions[0]
    assert fetched.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    offsets = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsTopic(
                name="t", partitions=[ListOffsetsPartition(partition_index=7, timestamp=-1)]
            )
        ],
    )
    listed = h.carry(handle_list_offsets(h.state, header(2, 7), offsets)).topics[0].partitions[0]
    assert listed.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
