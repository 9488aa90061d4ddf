"""Hostile input on topics, from real clients against a real node process.

What a user relies on: a request for more partitions than one request may create is
refused at once, whole, and the node goes on serving; a large topic that is allowed is
hosted while the node keeps answering everyone else, each partition served only once its
log exists; producing to a name no topic can have fails at once instead of after the
message timeout; the longest legal name can be created and deleted, and a name Kafka
refuses is refused.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from odradek.protocol.api import RequestHeader, decode_response, encode_request
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import ListOffsetsRequest
from odradek.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from tests.integration.nodes import NodeProcess

pytestmark = pytest.mark.clients

# Enough partitions that hosting them takes this node seconds (each log costs several
# fsyncs), few enough for an ordinary open-file limit (three files per partition).
LARGE_TOPIC_PARTITIONS = 1_000


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    process = NodeProcess(tmp_path_factory.mktemp("node"))
    process.start()
    yield process
    process.kill()


def admin(node: NodeProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": node.bootstrap})


def error_of(future: Any) -> int:
    with pytest.raises(KafkaException) as info:
        future.result(60)
    code: int = info.value.args[0].code()
    return code


def list_offsets_errors(node: NodeProcess, topic: str, partitions: range) -> list[int]:
    """Each partition's error in a ListOffsets answer (latest offset), asked once: what
    the node says now, where a client library would retry until it got an offset."""
    host, port = node.bootstrap.rsplit(":", 1)
    request = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsTopic(
                name=topic,
                partitions=[
                    ListOffsetsPartition(partition_index=p, timestamp=-1) for p in partitions
                ],
            )
        ],
    )
    header = RequestHeader(
        request_api_key=ListOffsetsRequest.API_KEY,
        request_api_version=7,
        correlation_id=1,
        client_id="test",
    )
    payload = encode_request(header, request)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", receive(sock, 4))[0]
        _, response = decode_response(receive(sock, size), ListOffsetsRequest.API_KEY, 7)
    return [p.error_code for t in response.topics for p in t.partitions]


def receive(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the node closed the connection"
        data += chunk
    return bytes(data)


def test_more_than_10000_partitions_in_one_request_are_refused_at_once(node: NodeProcess) -> None:
    client = admin(node)
    futures = client.create_topics(
        [NewTopic("huge", num_partitions=100_000), NewTopic("small", num_partitions=1)],
        request_timeout=60,
    )
    # Every topic of the request, the small one too, as Kafka answers.
    assert {name: error_of(f) for name, f in futures.items()} == {
        "huge": KafkaError.POLICY_VIOLATION,
        "small": KafkaError.POLICY_VIOLATION,
    }
    assert not {"huge", "small"} & set(client.list_topics(timeout=10).topics)
    for future in client.create_topics([NewTopic("grown", num_partitions=1)]).values():
        future.result(30)
    [grow] = client.create_partitions([NewPartitions("grown", 20_000)]).values()
    assert error_of(grow) == KafkaError.POLICY_VIOLATION
    assert len(client.list_topics(timeout=10).topics["grown"].partitions) == 1
    # The node serves at once.
    producer = Producer({"bootstrap.servers": node.bootstrap, "acks": "all"})
    producer.produce("grown", value=b"still serving")
    assert producer.flush(30) == 0


def test_a_large_topic_is_hosted_while_the_node_serves_others(node: NodeProcess) -> None:
    client = admin(node)
    last = LARGE_TOPIC_PARTITIONS - 1
    producer = Producer({"bootstrap.servers": node.bootstrap, "acks": "all"})
    producer.produce("busy", value=b"before")  # auto-created, hosted before the large one
    assert producer.flush(30) == 0
    [created] = client.create_topics(
        [NewTopic("large", num_partitions=LARGE_TOPIC_PARTITIONS)], request_timeout=60
    ).values()
    created.result(60)
    # Another client is answered while the large topic's partitions are still being
    # created: the last of them is not served yet, with an error a client retries on
    # (never an offset from a log that does not exist).
    producer.produce("busy", value=b"during")
    assert producer.flush(30) == 0
    assert list_offsets_errors(node, "large", range(last, last + 1)) == [
        ErrorCode.NOT_LEADER_OR_FOLLOWER
    ]
    # In the end every partition is hosted, the last one included.
    producer.produce("large", value=b"to the last", partition=last)
    assert producer.flush(180) == 0
    assert set(list_offsets_errors(node, "large", range(LARGE_TOPIC_PARTITIONS))) == {
        ErrorCode.NONE
    }
    # Deleted, and created again under the same name while the old logs may still be
    # going: the new topic starts empty.
    [deleted] = client.delete_topics(["large"]).values()
    deleted.result(60)
    [again] = client.create_topics([NewTopic("large", num_partitions=1)]).values()
    again.result(60)
    producer.produce("large", value=b"new", partition=0)
    assert producer.flush(60) == 0
    consumer = Consumer(
        {"bootstrap.servers": node.bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("large", 0, 0)])
    message = None
    for _ in range(60):
        message = consumer.poll(0.5)
        if message is not None:
            break
    consumer.close()
    assert message is not None and message.error() is None
    assert (message.offset(), message.value()) == (0, b"new")


@pytest.mark.parametrize("name", ["with space", "x" * 250, "trailing-newline\n"])
def test_producing_to_an_invalid_topic_name_fails_at_once(node: NodeProcess, name: str) -> None:
    errors: list[Any] = []
    # For a topic it is told is unknown, librdkafka keeps the message until the topic
    # shows up or these limits pass (60 s, 120 s); flush gives it 20.
    producer = Producer(
        {
            "bootstrap.servers": node.bootstrap,
            "topic.metadata.propagation.max.ms": 60_000,
            "message.timeout.ms": 120_000,
        }
    )
    producer.produce(name, value=b"nowhere", on_delivery=lambda err, _: errors.append(err))
    assert producer.flush(20) == 0
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.TOPIC_EXCEPTION  # INVALID_TOPIC_EXCEPTION, 17


def test_topic_names_at_the_limits(node: NodeProcess) -> None:
    client = admin(node)
    longest = "n" * 249
    for name in ("bad\n", "n" * 250):
        [refused] = client.create_topics([NewTopic(name, num_partitions=1)]).values()
        assert error_of(refused) == KafkaError.TOPIC_EXCEPTION
    for _ in range(2):  # created, deleted, and the name is free again
        [created] = client.create_topics([NewTopic(longest, num_partitions=3)]).values()
        created.result(30)
        producer = Producer({"bootstrap.servers": node.bootstrap})
        producer.produce(longest, value=b"v", partition=2)
        assert producer.flush(30) == 0
        [deleted] = client.delete_topics([longest]).values()
        deleted.result(30)
    assert longest not in client.list_topics(timeout=10).topics
    assert not {"bad\n", "n" * 250} & set(client.list_topics(timeout=10).topics)
