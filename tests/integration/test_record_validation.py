"""Record validation on a real node: what real clients see of it.

* A LogAppendTime topic: the producer's delivery reports and the consumer's records
  carry the time the node appended them, not the producer's.
* A batch that lies about its records gets Kafka's error, is not stored, and the node
  goes on serving that connection and every client.
* A record out of the timestamp bounds is refused to librdkafka with INVALID_TIMESTAMP.
* Requests checked on the record-check thread keep their order on their connection.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import (
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol.api import RequestHeader, decode_response, encode_request
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.framing import frame
from odradek.protocol.messages import ListOffsetsRequest, ProduceRequest
from odradek.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from odradek.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from odradek.protocol.record_batch import (
    Compression,
)
from odradek.protocol.record_codec import (
    Record,
    encode_batch,
)
from tests.integration.nodes import NodeProcess
from tests.protocol.test_record_scan import forge, raw_record

pytestmark = pytest.mark.clients

PRODUCE_VERSION = 9


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    process = NodeProcess(tmp_path_factory.mktemp("validation") / "node")
    process.start()
    yield process
    process.kill()


def create_topic(bootstrap: str, name: str, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, num_partitions=1, replication_factor=1, config=config or {})
    for future in admin.create_topics([topic]).values():
        future.result(15)


def now_ms() -> int:
    return int(time.time() * 1000)


class Connection:
    """One client connection speaking Produce and ListOffsets, requests pipelined."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=15)
        self.correlation = 0
        self.sent: list[tuple[int, int, int]] = []

    def send(self, api_key: int, version: int, body: Any) -> None:
        self.correlation += 1
        header = RequestHeader(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=self.correlation,
            client_id="validation-test",
        )
        self.sock.sendall(frame(encode_request(header, body)))
        self.sent.append((api_key, version, self.correlation))

    def receive(self) -> Any:
        api_key, version, correlation = self.sent.pop(0)
        size = struct.unpack(">i", self._read(4))[0]
        response_header, response = decode_response(self._read(size), api_key, version)
        assert response_header.correlation_id == correlation
        return response

    def produce(self, topic: str, records: bytes) -> None:
        self.send(
            0,
            PRODUCE_VERSION,
            ProduceRequest(
                acks=-1,
                timeout_ms=10_000,
                topic_data=[
                    TopicProduceData(
                        name=topic,
                        partition_data=[PartitionProduceData(index=0, records=records)],
                    )
                ],
            ),
        )

    def log_end(self, topic: str) -> int:
        self.send(
            2,
            7,
            ListOffsetsRequest(
                replica_id=-1,
                topics=[
                    ListOffsetsTopic(
                        name=topic,
                        partitions=[ListOffsetsPartition(partition_index=0, timestamp=-1)],
                    )
                ],
            ),
        )
        offset: int = self.receive().topics[0].partitions[0].offset
        return offset

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "the node closed the connection"
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


def consume(bootstrap: str, topic: str, count: int) -> list[Any]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{topic}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    messages: list[Any] = []
    deadline = time.monotonic() + 30
    try:
        while len(messages) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                messages.append(message)
    finally:
        consumer.close()
    return messages


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_log_append_time_reaches_producer_and_consumer(node: NodeProcess, compression: str) -> None:
    topic = f"append-time-{compression}"
    create_topic(node.bootstrap, topic, {"message.timestamp.type": "LogAppendTime"})
    # The node's idea of "now" must be the time of the produce, not of its last request.
    time.sleep(1.5)
    reports: list[tuple[int, int]] = []

    def delivered(err: KafkaError | None, message: Any) -> None:
        assert err is None, err
        reports.append(message.timestamp())

    producer = Producer(
        {"bootstrap.servers": node.bootstrap, "linger.ms": 0, "compression.type": compression}
    )
    before = now_ms()
    for i in range(3):
        # An old producer timestamp: the topic replaces it with the append time.
        producer.produce(topic, value=b"v%d" % i, timestamp=1_000_000, on_delivery=delivered)
    assert producer.flush(30) == 0
    after = now_ms()
    assert len(reports) == 3
    for kind, timestamp in reports:
        assert kind == TIMESTAMP_LOG_APPEND_TIME
        assert before <= timestamp <= after
    messages = consume(node.bootstrap, topic, 3)
    assert [m.value() for m in messages] == [b"v0", b"v1", b"v2"]
    for message in messages:
        kind, timestamp = message.timestamp()
        assert kind == TIMESTAMP_LOG_APPEND_TIME
        assert before <= timestamp <= after


def test_a_forged_batch_gets_kafkas_error_and_the_node_keeps_serving(node: NodeProcess) -> None:
    topic = "forged"
    create_topic(node.bootstrap, topic)
    connection = Connection(node.bootstrap)
    try:
        # The batch: compressed, claiming 2^31 - 1 records over a tiny body.
        connection.produce(
            topic, bytes(forge(raw_record(0), count=2**31 - 1, compression=Compression.ZSTD))
        )
        result = connection.receive().responses[0].partition_responses[0]
        assert result.error_code == ErrorCode.INVALID_RECORD
        assert "BAD_RECORD_COUNT" in result.error_message
        # Offset deltas out of order, uncompressed.
        deltas = raw_record(0) + raw_record(2)
        connection.produce(topic, bytes(forge(deltas, count=2, last_offset_delta=1)))
        result = connection.receive().responses[0].partition_responses[0]
        assert result.error_code == ErrorCode.INVALID_RECORD
        # Nothing was stored, and the same connection is still served.
        assert connection.log_end(topic) == 0
        timestamp = now_ms()
        good = encode_batch([Record(offset_delta=i, timestamp=timestamp) for i in range(2)])
        connection.produce(topic, good)
        result = connection.receive().responses[0].partition_responses[0]
        assert (result.error_code, result.base_offset) == (ErrorCode.NONE, 0)
    finally:
        connection.close()
    # And so is every other client.
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 0})
    producer.produce(topic, value=b"after")
    assert producer.flush(30) == 0
    assert [m.value() for m in consume(node.bootstrap, topic, 3)][-1] == b"after"


def test_librdkafka_gets_invalid_timestamp_for_a_record_two_hours_ahead(
    node: NodeProcess,
) -> None:
    topic = "future"
    create_topic(node.bootstrap, topic)
    errors: list[KafkaError] = []

    def delivered(err: KafkaError | None, message: Any) -> None:
        if err is not None:
            errors.append(err)

    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 0, "retries": 0})
    producer.produce(
        topic, value=b"late", timestamp=now_ms() + 2 * 3_600_000, on_delivery=delivered
    )
    producer.flush(30)
    assert [e.code() for e in errors] == [KafkaError.INVALID_TIMESTAMP]
    producer.produce(topic, value=b"now", on_delivery=delivered)
    assert producer.flush(30) == 0
    assert len(errors) == 1
    assert [m.value() for m in consume(node.bootstrap, topic, 1)] == [b"now"]


def test_pipelined_requests_keep_their_order_when_one_is_checked_off_the_loop(
    node: NodeProcess,
) -> None:
    topic = "pipelined"
    create_topic(node.bootstrap, topic)
    timestamp = now_ms()
    # 9,000 records (4.5 MB once decompressed): checked on the record-check thread.
    slow = encode_batch(
        [Record(offset_delta=i, timestamp=timestamp, value=bytes(500)) for i in range(9000)],
        compression=Compression.ZSTD,
    )
    quick = encode_batch([Record(offset_delta=0, timestamp=timestamp, value=b"q")])
    connection = Connection(node.bootstrap)
    try:
        for _ in range(3):
            connection.produce(topic, slow)
            connection.produce(topic, quick)
        offsets = []
        for _ in range(6):
            result = connection.receive().responses[0].partition_responses[0]
            assert result.error_code == ErrorCode.NONE
            offsets.append(result.base_offset)
        assert offsets == [0, 9000, 9001, 18001, 18002, 27002]
    finally:
        connection.close()
