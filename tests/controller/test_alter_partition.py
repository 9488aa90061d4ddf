"""AlterPartition on the controller: each of Kafka's checks and its error code, the
record a valid change produces, and the state the response reports.

Outcomes are applied by replaying their records into the image, as the active
controller does.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.controller.alter_partition import AlterPartitionOutcome, alter_partition
from odradek.controller.controller import QuorumControllerState
from odradek.controller.image import (
    LEADER_RECOVERY_RECOVERED,
    LEADER_RECOVERY_RECOVERING,
    MetadataImage,
    PartitionImage,
)
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages.alter_partition_request import (
    AlterPartitionRequest,
    BrokerState,
    PartitionData,
    TopicData,
)
from odradek.protocol.metadata import (
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)

TOPIC = uuid.UUID(int=0x70)
NAME = "orders"
EPOCHS = {1: 10, 2: 20, 3: 30, 4: 40}
"""Broker id -> broker epoch."""


def cluster() -> MetadataImage:
    """Brokers 1-4 unfenced; orders-0 on [1, 2, 3] led by 1 at leader epoch 4 and
    partition epoch 7, ISR [1, 2]; orders-1 on [2, 3] led by 2."""
    image = MetadataImage()
    records: list[object] = [
        RegisterBrokerRecord(
            broker_id=broker_id,
            incarnation_id=uuid.UUID(int=broker_id),
            broker_epoch=epoch,
            fenced=False,
        )
        for broker_id, epoch in EPOCHS.items()
    ]
    records += [
        TopicRecord(name=NAME, topic_id=TOPIC),
        PartitionRecord(
            partition_id=0,
            topic_id=TOPIC,
            replicas=[1, 2, 3],
            isr=[1, 2],
            leader=1,
            leader_epoch=4,
            partition_epoch=7,
        ),
        PartitionRecord(partition_id=1, topic_id=TOPIC, replicas=[2, 3], isr=[2, 3], leader=2),
    ]
    apply(image, records)
    return image


def apply(image: MetadataImage, records: Sequence[object]) -> None:
    for record in records:
        image.replay(record, image.offset + 1)


def request(
    isr: list[int],
    *,
    broker_id: int = 1,
    broker_epoch: int | None = None,
    partition: int = 0,
    leader_epoch: int = 4,
    partition_epoch: int = 7,
    version: int = 2,
    topic_id: uuid.UUID = TOPIC,
    topic_name: str = NAME,
    leader_recovery_state: int = LEADER_RECOVERY_RECOVERED,
    isr_epochs: dict[int, int] | None = None,
) -> AlterPartitionRequest:
    data = PartitionData(
        partition_index=partition,
        leader_epoch=leader_epoch,
        leader_recovery_state=leader_recovery_state,
        partition_epoch=partition_epoch,
    )
    if version >= 3:
        epochs = isr_epochs or {}
        data.new_isr_with_epochs = [BrokerState(b, epochs.get(b, EPOCHS.get(b, -1))) for b in isr]
    else:
        data.new_isr = list(isr)
    return AlterPartitionRequest(
        broker_id=broker_id,
        broker_epoch=EPOCHS[broker_id] if broker_epoch is None else broker_epoch,
        topics=[
            TopicData(
                topic_name=topic_name if version < 2 else "",
                topic_id=topic_id if version >= 2 else uuid.UUID(int=0),
                partitions=[data],
            )
        ],
    )


def run(
    image: MetadataImage, req: AlterPartitionRequest, version: int = 2
) -> AlterPartitionOutcome:
    outcome = alter_partition(image, req, version)
    apply(image, outcome.records)
    return outcome


def only_error(outcome: AlterPartitionOutcome) -> int:
    [topic] = outcome.response.topics
    [partition] = topic.partitions
    return partition.error_code


def partition0(image: MetadataImage) -> PartitionImage:
    return image.topics_by_id[TOPIC].partitions[0]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_an_isr_expansion_is_recorded_and_the_response_has_the_new_state(version: int) -> None:
    image = cluster()
    outcome = run(image, request([1, 2, 3], version=version), version)
    assert outcome.response.error_code == ErrorCode.NONE
    assert outcome.records == [PartitionChangeRecord(partition_id=0, topic_id=TOPIC, isr=[1, 2, 3])]
    after = partition0(image)
    assert (after.leader, after.isr, after.leader_epoch, after.partition_epoch) == (
        1,
        [1, 2, 3],
        4,
        8,
    )
    [topic] = outcome.response.topics
    assert (topic.topic_id, topic.topic_name) == (
        (TOPIC, "") if version >= 2 else (uuid.UUID(int=0), NAME)
    )
    [answer] = topic.partitions
    assert answer.error_code == ErrorCode.NONE
    assert (answer.leader_id, answer.leader_epoch, answer.isr, answer.partition_epoch) == (
        1,
        4,
        [1, 2, 3],
        8,
    )
    # The response encodes in the request's version.
    outcome.response.encode(version)


def test_an_isr_shrink_keeps_the_leader_and_its_epoch() -> None:
    image = cluster()
    outcome = run(image, request([1]))
    assert only_error(outcome) == ErrorCode.NONE
    assert (partition0(image).isr, partition0(image).leader_epoch) == ([1], 4)


def test_a_retry_of_an_applied_change_fails_on_the_partition_epoch() -> None:
    image = cluster()
    run(image, request([1, 2, 3]))
    assert only_error(run(image, request([1, 2, 3]))) == ErrorCode.INVALID_UPDATE_VERSION


def test_an_unchanged_isr_writes_nothing_and_reports_the_current_state() -> None:
    image = cluster()
    outcome = run(image, request([1, 2]))
    assert outcome.records == []
    [answer] = outcome.response.topics[0].partitions
    assert (answer.error_code, answer.isr, answer.partition_epoch) == (ErrorCode.NONE, [1, 2], 7)


@pytest.mark.parametrize(
    ("req", "version", "error"),
    [
        (request([1, 2], topic_id=uuid.UUID(int=0x99)), 2, ErrorCode.UNKNOWN_TOPIC_ID),
        (request([1, 2], version=1, topic_name="nope"), 1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (request([1, 2], partition=5), 2, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (request([1, 2], leader_epoch=5), 2, ErrorCode.NOT_CONTROLLER),
        (request([1, 2], partition_epoch=8), 2, ErrorCode.NOT_CONTROLLER),
        (request([1, 2], leader_epoch=3), 2, ErrorCode.FENCED_LEADER_EPOCH),
        (request([1, 2], broker_id=2), 2, ErrorCode.INVALID_REQUEST),
        (request([1, 2], partition_epoch=6), 2, ErrorCode.INVALID_UPDATE_VERSION),
        (request([1, 4]), 2, ErrorCode.INVALID_REQUEST),
        (request([1, 1, 2]), 2, ErrorCode.INVALID_REQUEST),
        (request([2, 3]), 2, ErrorCode.INVALID_REQUEST),
        (request([]), 2, ErrorCode.INVALID_REQUEST),
        (
            request([1, 2], leader_recovery_state=LEADER_RECOVERY_RECOVERING),
            2,
            ErrorCode.INVALID_REQUEST,
        ),
        (
            request([1], leader_recovery_state=LEADER_RECOVERY_RECOVERING),
            2,
            ErrorCode.INVALID_REQUEST,
        ),
        (request([1, 2], leader_recovery_state=7), 2, ErrorCode.INVALID_REQUEST),
        (request([1, 2], version=3, isr_epochs={2: 19}), 3, ErrorCode.INELIGIBLE_REPLICA),
    ],
    ids=[
        "unknown-topic-id",
        "unknown-topic-name",
        "unknown-partition",
        "newer-leader-epoch",
        "newer-partition-epoch",
        "older-leader-epoch",
        "not-the-leader",
        "older-partition-epoch",
        "not-a-replica",
        "repeated-member",
        "leader-not-in-isr",
        "empty-isr",
        "recovering-with-followers",
        "recovered-to-recovering",
        "unknown-recovery-state",
        "stale-member-epoch",
    ],
)
def test_each_check_answers_with_kafkas_error_and_changes_nothing(
    req: AlterPartitionRequest, version: int, error: ErrorCode
) -> None:
    image = cluster()
    before = image.copy()
    outcome = run(image, req, version)
    assert outcome.response.error_code == ErrorCode.NONE
    assert only_error(outcome) == error
    assert outcome.records == []
    assert image == before


@pytest.mark.parametrize(("broker_id", "epoch"), [(1, 9), (9, 0)])
def test_a_stale_or_unknown_sender_fails_the_whole_request(broker_id: int, epoch: int) -> None:
    image = cluster()
    req = request([1, 2, 3])
    req.broker_id, req.broker_epoch = broker_id, epoch
    outcome = run(image, req)
    assert outcome.response.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert outcome.response.topics == []
    assert outcome.records == []


@pytest.mark.parametrize(
    ("version", "error"),
    [(1, ErrorCode.OPERATION_NOT_ATTEMPTED), (2, ErrorCode.INELIGIBLE_REPLICA)],
)
@pytest.mark.parametrize("why", ["fenced", "shutting-down", "unregistered"])
def test_an_isr_member_that_cannot_be_in_sync_is_ineligible(
    version: int, error: ErrorCode, why: str
) -> None:
    image = cluster()
    if why == "fenced":
        apply(image, [FenceBrokerRecord(id=3, epoch=EPOCHS[3])])
    elif why == "shutting-down":
        apply(
            image,
            [
                BrokerRegistrationChangeRecord(
                    broker_id=3, broker_epoch=EPOCHS[3], in_controlled_shutdown=1
                )
            ],
        )
    else:
        # Broker 3 is a replica but its registration is gone.
        image.brokers.pop(3)
    outcome = run(image, request([1, 2, 3], version=version), version)
    assert only_error(outcome) == error
    assert outcome.records == []


def test_a_recovering_leader_reports_recovery_alone_then_grows_the_isr() -> None:
    image = cluster()
    apply(
        image,
        [
            PartitionChangeRecord(
                partition_id=0, topic_id=TOPIC, isr=[1], leader=1, leader_recovery_state=1
            )
        ],
    )
    state = partition0(image)
    outcome = run(
        image,
        request(
            [1],
            leader_epoch=state.leader_epoch,
            partition_epoch=state.partition_epoch,
            version=2,
        ),
    )
    assert outcome.records == [
        PartitionChangeRecord(partition_id=0, topic_id=TOPIC, leader_recovery_state=0)
    ]
    assert partition0(image).leader_recovery_state == LEADER_RECOVERY_RECOVERED
    [answer] = outcome.response.topics[0].partitions
    assert answer.leader_recovery_state == LEADER_RECOVERY_RECOVERED


def test_a_partition_named_twice_changes_once() -> None:
    image = cluster()
    req = request([1, 2, 3])
    req.topics[0].partitions.append(PartitionData(0, 4, [1], [], 0, 7))
    outcome = run(image, req)
    errors = [p.error_code for p in outcome.response.topics[0].partitions]
    assert errors == [ErrorCode.NONE, ErrorCode.INVALID_UPDATE_VERSION]
    assert len(outcome.records) == 1
    assert partition0(image).isr == [1, 2, 3]


def test_the_facade_answers_alter_partition() -> None:
    image = cluster()
    controller = QuorumControllerState(image, cluster_id="c", activated_ms=0)
    records, response = controller.alter_partition(request([1, 2, 3]), 2)
    assert response.topics[0].partitions[0].partition_epoch == 8
    assert len(records) == 1


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([1, 2, 3, 4]), max_size=5),
    st.sampled_from([1, 2, 3]),
    st.integers(3, 5),
    st.integers(6, 8),
)
def test_an_accepted_isr_always_holds_the_leader_and_only_live_replicas(
    isr: list[int], broker_id: int, leader_epoch: int, partition_epoch: int
) -> None:
    image = cluster()
    apply(image, [FenceBrokerRecord(id=3, epoch=EPOCHS[3])])
    before = partition0(image)
    outcome = run(
        image,
        request(
            isr, broker_id=broker_id, leader_epoch=leader_epoch, partition_epoch=partition_epoch
        ),
    )
    after = partition0(image)
    if only_error(outcome) != ErrorCode.NONE:
        assert after == before
        return
    assert after.leader == before.leader == broker_id
    assert after.leader in after.isr
    assert set(after.isr) <= {1, 2}  # replicas of the partition that are not fenced
    assert after.leader_epoch == before.leader_epoch
    assert after.partition_epoch == before.partition_epoch + (1 if outcome.records else 0)
