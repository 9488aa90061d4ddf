"""An idempotent producer's retry is recognised after the node restarts."""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from odradek.protocol.api import RequestHeader, decode_response, encode_request
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.framing import frame
from odradek.protocol.messages import (
    InitProducerIdRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)
from odradek.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from odradek.protocol.messages.metadata_request import MetadataRequestTopic
from odradek.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from odradek.protocol.record_codec import (
    Record,
    encode_batch,
)
from tests.integration.nodes import NodeProcess

pytestmark = pytest.mark.clients


class Client:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=15)
        self.correlation = 0

    def call(self, api_key: int, version: int, body: Any) -> Any:
        self.correlation += 1
        header = RequestHeader(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=self.correlation,
            client_id="test",
        )
        self.sock.sendall(frame(encode_request(header, body)))
        size = struct.unpack(">i", self._read(4))[0]
        _, response = decode_response(self._read(size), api_key, version)
        return response

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "connection closed"
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


def produce(client: Client, records: bytes) -> tuple[int, int]:
    request = ProduceRequest(
        acks=-1,
        timeout_ms=10_000,
        topic_data=[
            TopicProduceData(
                name="idem-restart", partition_data=[PartitionProduceData(index=0, records=records)]
            )
        ],
    )
    result = client.call(0, 9, request).responses[0].partition_responses[0]
    return result.error_code, result.base_offset


def log_end(client: Client) -> int:
    request = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsTopic(
                name="idem-restart",
                partitions=[ListOffsetsPartition(partition_index=0, timestamp=-1)],
            )
        ],
    )
    offset: int = client.call(2, 7, request).topics[0].partitions[0].offset
    return offset


def test_a_retry_after_a_clean_restart_is_not_appended_twice(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path)
    bootstrap = node.start()
    try:
        client = Client(bootstrap)
        init = client.call(
            22, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1)
        )
        assert init.error_code == ErrorCode.NONE and init.producer_id >= 0
        # The producer's clock: within message.timestamp.after.max.ms of the node's.
        now = int(time.time() * 1000)

        def batch(sequence: int) -> bytes:
            return encode_batch(
                [Record(offset_delta=i, timestamp=now, value=b"x") for i in range(5)],
                producer_id=init.producer_id,
                producer_epoch=init.producer_epoch,
                base_sequence=sequence,
            )

        client.call(3, 12, _metadata("idem-restart"))  # auto-creates the topic
        assert produce(client, batch(0)) == (ErrorCode.NONE, 0)
        assert produce(client, batch(5)) == (ErrorCode.NONE, 5)
        client.close()
        assert node.stop() == 0
        node.start()
        client = Client(bootstrap)
        # The retry of the second batch: acknowledged at its first offset, not appended.
        assert produce(client, batch(5)) == (ErrorCode.NONE, 5)
        assert log_end(client) == 10
        assert produce(client, batch(15))[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(client, batch(10)) == (ErrorCode.NONE, 10)
        client.close()
    finally:
        node.kill()


def _metadata(topic: str) -> MetadataRequest:
    return MetadataRequest(
        topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=True
    )
