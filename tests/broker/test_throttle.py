"""Byte-rate quotas throttle Produce and consumer Fetch (KIP-219): the answer says how
long to wait, and nothing is refused for it."""

from __future__ import annotations

from odradek.broker import fetch, produce
from odradek.broker.router import Request
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import FetchRequest, ProduceRequest
from odradek.protocol.messages import fetch_request as fr
from odradek.protocol.messages import produce_request as pr
from odradek.protocol.metadata import ClientQuotaRecord
from odradek.protocol.metadata.client_quota_record import EntityData
from odradek.security.principal import KafkaPrincipal
from tests.broker.harness import Harness, batch, new_harness


def _quota(h: Harness, key: str, value: float, user: str | None = None) -> None:
    h.replay([ClientQuotaRecord(entity=[EntityData("user", user)], key=key, value=value)])


def _produce(h: Harness, who: Request, batches: int = 1) -> object:
    request = ProduceRequest(
        acks=1,
        timeout_ms=1000,
        topic_data=[
            pr.TopicProduceData(
                name="t",
                partition_data=[pr.PartitionProduceData(index=0, records=batch(records=200))],
            )
        ],
    )
    response = None
    for _ in range(batches):
        request.topic_data[0].partition_data[0].records = batch(records=200)
        response = h.carry(produce.handle_produce(h.state, who, request))
    return response


def _as(user: str, api_key: int, version: int) -> Request:
    return Request(api_key, version, 1, "app", principal=KafkaPrincipal("User", user))


def test_no_quota_no_throttle() -> None:
    h = new_harness()
    h.add_topic("t")
    response = _produce(h, _as("alice", 0, 9), batches=20)
    assert response.throttle_time_ms == 0  # type: ignore[attr-defined]


def test_a_producer_over_its_byte_rate_is_told_to_wait_and_its_records_are_kept() -> None:
    h = new_harness()
    h.add_topic("t")
    _quota(h, "producer_byte_rate", 1000, "alice")
    response = _produce(h, _as("alice", 0, 9), batches=20)
    assert response.throttle_time_ms > 0  # type: ignore[attr-defined]
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    assert h.partition("t").log.log_end_offset == 20 * 200
    # Another user is not charged for alice's bytes (no default quota).
    assert _produce(h, _as("bob", 0, 9)).throttle_time_ms == 0  # type: ignore[attr-defined]


def test_the_default_user_quota_covers_an_anonymous_client() -> None:
    h = new_harness()
    h.add_topic("t")
    _quota(h, "producer_byte_rate", 1000)  # /users/<default>
    response = _produce(h, _as("ANONYMOUS", 0, 9), batches=20)
    assert response.throttle_time_ms > 0  # type: ignore[attr-defined]


def test_a_consumer_over_its_byte_rate_is_throttled() -> None:
    h = new_harness()
    h.add_topic("t")
    h.append("t", batches=30, records=100)
    h.flush("t")
    _quota(h, "consumer_byte_rate", 1000, "alice")
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        max_bytes=10_000_000,
        topics=[
            fr.FetchTopic(
                topic="t",
                partitions=[fr.FetchPartition(partition=0, partition_max_bytes=10_000_000)],
            )
        ],
    )
    response = h.carry(fetch.handle_fetch(h.state, _as("alice", 1, 12), request))
    assert response.responses[0].partitions[0].records
    assert response.throttle_time_ms > 0
