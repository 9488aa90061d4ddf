"""Client quotas at work: byte rates throttle Produce and consumer Fetch (KIP-219: the
answer says how long to wait, and nothing is refused for it), request time throttles
any client request, and the controller mutation rate (KIP-599) refuses topic creations
and deletions past the client's bucket."""

from __future__ import annotations

from typing import Any

from odradek.broker import fetch, partitions_admin, produce, topics
from odradek.broker.effects import CommitRecords
from odradek.broker.router import Request
from odradek.broker.throttle import from_replica, request_throttle_ms
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    FetchRequest,
    ProduceRequest,
)
from odradek.protocol.messages import create_partitions_request as cp
from odradek.protocol.messages import create_topics_request as ct
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


# controller_mutation_rate (KIP-599): alice may create or delete 1 partition a second,
# so her bucket holds 11 (quota.window.num windows of one second) to begin with.


def _create(h: Harness, version: int, *wanted: tuple[str, int], validate: bool = False) -> Any:
    request = CreateTopicsRequest(
        topics=[
            ct.CreatableTopic(name=n, num_partitions=p, replication_factor=1) for n, p in wanted
        ],
        timeout_ms=1000,
        validate_only=validate,
    )
    return h.carry(topics.handle_create_topics(h.state, _as("alice", 19, version), request))


def test_strict_mutation_quota_refuses_topics_once_the_bucket_is_spent() -> None:
    h = new_harness()
    _quota(h, "controller_mutation_rate", 1, "alice")
    response = _create(h, 7, ("a", 10), ("b", 5), ("c", 1))
    codes = {t.name: t.error_code for t in response.topics}
    # a takes 10 of 11 tokens; b is admitted while one remains and takes the bucket to
    # -4 (a topic goes whole, as in Kafka); c finds it below zero.
    assert codes == {
        "a": ErrorCode.NONE,
        "b": ErrorCode.NONE,
        "c": ErrorCode.THROTTLING_QUOTA_EXCEEDED,
    }
    assert set(h.image.topics_by_name) == {"a", "b"}
    assert response.throttle_time_ms == 4000  # until the bucket is back at zero
    # The next request of hers is refused whole, and says how long to wait.
    again = _create(h, 7, ("d", 1))
    assert again.topics[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert again.throttle_time_ms == 4000
    assert "d" not in h.image.topics_by_name
    # Another user has a bucket of her own (no default quota: none at all).
    other = h.carry(
        topics.handle_create_topics(
            h.state,
            _as("bob", 19, 7),
            CreateTopicsRequest(
                topics=[ct.CreatableTopic(name="e", num_partitions=20, replication_factor=1)],
                timeout_ms=1000,
            ),
        )
    )
    assert other.topics[0].error_code == ErrorCode.NONE
    assert other.throttle_time_ms == 0


def test_before_kip_599_versions_the_mutation_quota_only_throttles() -> None:
    h = new_harness()
    _quota(h, "controller_mutation_rate", 1, "alice")
    response = _create(h, 5, ("a", 10), ("b", 5), ("c", 1))
    assert [t.error_code for t in response.topics] == [ErrorCode.NONE] * 3
    assert response.throttle_time_ms == 5000  # 16 taken of 11


def test_validate_only_and_refused_topics_are_not_charged() -> None:
    h = new_harness()
    _quota(h, "controller_mutation_rate", 1, "alice")
    checked = _create(h, 7, ("a", 30), validate=True)
    assert checked.topics[0].error_code == ErrorCode.NONE
    assert checked.throttle_time_ms == 0
    # A handler whose records are never committed here (a broker that forwards the
    # request to the active controller) charges nothing either.
    outcome = topics.handle_create_topics(
        h.state,
        _as("alice", 19, 7),
        CreateTopicsRequest(
            topics=[ct.CreatableTopic(name="b", num_partitions=30, replication_factor=1)],
            timeout_ms=1000,
        ),
    )
    assert isinstance(outcome, CommitRecords)
    created = _create(h, 7, ("c", 11))
    assert created.topics[0].error_code == ErrorCode.NONE
    assert created.throttle_time_ms == 0  # the bucket was whole: 11 of 11 taken


def _grow(h: Harness, topic: str, count: int) -> Any:
    request = CreatePartitionsRequest(
        topics=[cp.CreatePartitionsTopic(name=topic, count=count)], timeout_ms=1000
    )
    return h.carry(partitions_admin.handle_create_partitions(h.state, _as("alice", 37, 3), request))


def test_deleting_topics_and_adding_partitions_spend_the_same_bucket() -> None:
    h = new_harness()
    h.add_topic("big", [[h.node_id]] * 8)
    h.add_topic("small", [[h.node_id]] * 2)
    h.add_topic("last", [[h.node_id]])
    _quota(h, "controller_mutation_rate", 1, "alice")
    grown = _grow(h, "small", 6)
    assert grown.results[0].error_code == ErrorCode.NONE
    assert len(h.image.topics_by_name["small"].partitions) == 6
    deleted = h.carry(
        topics.handle_delete_topics(
            h.state,
            _as("alice", 20, 6),
            DeleteTopicsRequest(topic_names=["big", "last"], timeout_ms=1000),
        )
    )
    # 4 partitions added, then "big" deletes 8 (7 tokens left: admitted, -1 after it).
    assert {r.name: r.error_code for r in deleted.responses} == {
        "big": ErrorCode.NONE,
        "last": ErrorCode.THROTTLING_QUOTA_EXCEEDED,
    }
    assert set(h.image.topics_by_name) == {"small", "last"}
    assert deleted.throttle_time_ms == 1000
    refused = _grow(h, "small", 7)
    assert refused.results[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert refused.throttle_time_ms == 1000
    assert len(h.image.topics_by_name["small"].partitions) == 6


def test_deleting_an_internal_topic_is_answered() -> None:
    h = new_harness()
    h.add_topic("__consumer_offsets")
    deleted = h.carry(
        topics.handle_delete_topics(
            h.state,
            _as("alice", 20, 6),
            DeleteTopicsRequest(topic_names=["__consumer_offsets"], timeout_ms=1000),
        )
    )
    assert [(r.name, r.error_code) for r in deleted.responses] == [
        ("__consumer_offsets", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    ]
    assert "__consumer_offsets" in h.image.topics_by_name


# request_percentage: a share of the event loop's time (100: all of it).


def test_request_time_over_its_share_is_throttled_for_at_most_a_window() -> None:
    h = new_harness()
    _quota(h, "request_percentage", 10, "alice")  # 100 ms of loop time a second
    alice = _as("alice", 3, 12)
    # 0.5 s of handler time spread over the 10 s the first samples count as: 5%.
    assert request_throttle_ms(h.state, alice, 500_000_000) == 0
    # 1.5 s more: 2 s in 10 s is 20%, twice the share; Kafka bounds the wait by one
    # window (1 s) for request time.
    assert request_throttle_ms(h.state, alice, 1_500_000_000) == 1000
    assert request_throttle_ms(h.state, _as("bob", 3, 12), 5_000_000_000) == 0


def test_followers_are_never_charged_for_request_time() -> None:
    follower = FetchRequest(replica_state=fr.ReplicaState(replica_id=2, replica_epoch=20))
    old_follower = FetchRequest(replica_id=2)
    consumer = FetchRequest(replica_id=-1)
    assert from_replica(follower) and from_replica(old_follower)
    assert not from_replica(consumer)
    assert not from_replica(CreateTopicsRequest())
