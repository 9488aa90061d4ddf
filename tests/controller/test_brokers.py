"""Broker lifecycle on the active controller: registration, heartbeats (unfence, fence,
controlled shutdown), session expiry, and the leader/ISR moves they cause.

Every outcome is applied the only way the image changes: by replaying its records at
consecutive offsets, as the active controller does right after appending them.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.controller.brokers import (
    BrokerControlState,
    BrokerHeartbeats,
    BrokerRecord,
    HeartbeatOutcome,
    RegistrationOutcome,
    register_broker,
)
from odradek.controller.controller import (
    DEFAULT_METADATA_MAX_IDLE_INTERVAL_MS,
    QuorumControllerState,
    noop_record,
)
from odradek.controller.image import NO_LEADER, MetadataImage, PartitionImage
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from odradek.protocol.messages.broker_registration_request import (
    BrokerRegistrationRequest,
    Feature,
    Listener,
)
from odradek.protocol.metadata import (
    BrokerRegistrationChangeRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
SESSION_MS = 9000
TOPIC = uuid.UUID(int=0x70)
OTHER_TOPIC = uuid.UUID(int=0x71)


def incarnation(broker_id: int, generation: int = 0) -> uuid.UUID:
    return uuid.UUID(int=(generation << 32) | (broker_id + 1000))


def registration(
    broker_id: int,
    generation: int = 0,
    *,
    cluster_id: str = CLUSTER_ID,
    features: list[Feature] | None = None,
    log_dirs: list[uuid.UUID] | None = None,
) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(
        broker_id=broker_id,
        cluster_id=cluster_id,
        incarnation_id=incarnation(broker_id, generation),
        listeners=[
            Listener(name="PLAINTEXT", host=f"b{broker_id}", port=9092, security_protocol=0)
        ],
        features=features if features is not None else [Feature("metadata.version", 1, 20)],
        rack=None,
        log_dirs=log_dirs if log_dirs is not None else [uuid.UUID(int=0xD000 + broker_id)],
    )


class Cluster:
    """The active controller in miniature: decide on the image, append, replay at once."""

    def __init__(self, now_ms: int = 0) -> None:
        self.image = MetadataImage()
        self.now_ms = now_ms
        self.heartbeats = BrokerHeartbeats(activated_ms=now_ms, session_timeout_ms=SESSION_MS)

    @property
    def next_offset(self) -> int:
        return self.image.offset + 1

    def apply(self, records: Sequence[object]) -> None:
        for record in records:
            self.image.replay(record, self.next_offset)

    def register(self, broker_id: int, generation: int = 0) -> RegistrationOutcome:
        outcome = register_broker(
            self.image,
            registration(broker_id, generation),
            self.next_offset,
            self.now_ms,
            cluster_id=CLUSTER_ID,
            heartbeats=self.heartbeats,
        )
        self.apply(outcome.records)
        return outcome

    def beat(
        self,
        broker_id: int,
        *,
        offset: int | None = None,
        want_fence: bool = False,
        want_shut_down: bool = False,
        epoch: int | None = None,
        offline_log_dirs: list[uuid.UUID] | None = None,
    ) -> HeartbeatOutcome:
        broker = self.image.brokers.get(broker_id)
        request = BrokerHeartbeatRequest(
            broker_id=broker_id,
            broker_epoch=epoch if epoch is not None else (broker.epoch if broker else -1),
            current_metadata_offset=self.image.offset if offset is None else offset,
            want_fence=want_fence,
            want_shut_down=want_shut_down,
            offline_log_dirs=offline_log_dirs or [],
        )
        outcome = self.heartbeats.heartbeat(self.image, request, self.now_ms, self.next_offset)
        self.apply(outcome.records)
        return outcome

    def start(self, *broker_ids: int) -> None:
        """Register and unfence each broker."""
        for broker_id in broker_ids:
            assert self.register(broker_id).error_code == ErrorCode.NONE
            assert not self.beat(broker_id).response.is_fenced

    def partition(
        self,
        partition_id: int,
        replicas: list[int],
        isr: list[int] | None = None,
        leader: int | None = None,
        topic_id: uuid.UUID = TOPIC,
    ) -> None:
        if topic_id not in self.image.topics_by_id:
            self.apply([TopicRecord(name=f"t{topic_id.int:x}", topic_id=topic_id)])
        isr = list(replicas) if isr is None else isr
        self.apply(
            [
                PartitionRecord(
                    partition_id=partition_id,
                    topic_id=topic_id,
                    replicas=replicas,
                    isr=isr,
                    leader=isr[0] if leader is None else leader,
                )
            ]
        )

    def get(self, partition_id: int, topic_id: uuid.UUID = TOPIC) -> PartitionImage:
        return self.image.topics_by_id[topic_id].partitions[partition_id]


def kinds(records: Sequence[object]) -> list[str]:
    return [type(record).__name__ for record in records]


# Registration ----------------------------------------------------------------------


def test_a_new_broker_registers_fenced_with_the_offset_of_its_record_as_epoch() -> None:
    cluster = Cluster()
    cluster.apply([NoOpRecord()] * 5)
    outcome = cluster.register(1)
    assert outcome.error_code == ErrorCode.NONE
    assert kinds(outcome.records) == ["RegisterBrokerRecord"]
    assert outcome.broker_epoch == 5
    assert outcome.response().broker_epoch == 5
    broker = cluster.image.brokers[1]
    assert (broker.epoch, broker.fenced, broker.in_controlled_shutdown) == (5, True, False)
    assert broker.incarnation_id == incarnation(1)
    assert broker.endpoints[0].host == "b1"
    record = outcome.records[0]
    assert isinstance(record, RegisterBrokerRecord)
    assert [f.name for f in record.features] == ["metadata.version"]


def test_a_registration_for_another_cluster_is_refused() -> None:
    cluster = Cluster()
    outcome = register_broker(
        cluster.image,
        registration(1, cluster_id="other"),
        0,
        0,
        cluster_id=CLUSTER_ID,
        heartbeats=cluster.heartbeats,
    )
    assert outcome.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
    assert outcome.records == []
    assert outcome.response().error_code == ErrorCode.INCONSISTENT_CLUSTER_ID


def test_a_retry_of_the_same_incarnation_gets_the_same_epoch_and_no_records() -> None:
    cluster = Cluster()
    first = cluster.register(1)
    cluster.apply([NoOpRecord()])
    again = cluster.register(1)
    assert again.error_code == ErrorCode.NONE
    assert again.records == []
    assert again.broker_epoch == first.broker_epoch


def test_another_incarnation_is_refused_while_the_old_one_has_a_live_session() -> None:
    cluster = Cluster()
    cluster.start(1)
    cluster.now_ms += SESSION_MS  # the boundary itself still counts as live
    outcome = cluster.register(1, generation=1)
    assert outcome.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    assert cluster.image.brokers[1].incarnation_id == incarnation(1)


def test_another_incarnation_replaces_one_whose_session_timed_out() -> None:
    cluster = Cluster()
    cluster.start(1, 2)
    cluster.partition(0, [1, 2])
    cluster.now_ms += SESSION_MS + 1
    start = cluster.next_offset
    outcome = cluster.register(1, generation=1)
    assert outcome.error_code == ErrorCode.NONE
    # The old incarnation leaves leadership and ISR before the new one is registered,
    # and the epoch is the offset of the RegisterBrokerRecord itself.
    assert kinds(outcome.records) == ["PartitionChangeRecord", "RegisterBrokerRecord"]
    assert outcome.broker_epoch == start + 1
    broker = cluster.image.brokers[1]
    assert (broker.incarnation_id, broker.epoch, broker.fenced) == (
        incarnation(1, 1),
        start + 1,
        True,
    )
    partition = cluster.get(0)
    assert (partition.leader, partition.isr) == (2, [2])


def test_a_fenced_broker_can_be_replaced_at_once() -> None:
    cluster = Cluster()
    cluster.start(1)
    cluster.beat(1, want_fence=True)
    assert cluster.register(1, generation=1).error_code == ErrorCode.NONE


@pytest.mark.parametrize(
    ("features", "finalized"),
    [
        ([Feature("metadata.version", 1, 5)], 7),
        ([], 7),  # no metadata.version listed: only the KRaft minimum, level 1
        ([Feature("metadata.version", 1, 20), Feature("kraft.version", 1, 1)], None),
    ],
)
def test_a_broker_that_cannot_run_a_finalized_feature_level_is_refused(
    features: list[Feature], finalized: int | None
) -> None:
    cluster = Cluster()
    if finalized is not None:
        cluster.apply([FeatureLevelRecord(name="metadata.version", feature_level=finalized)])
    outcome = register_broker(
        cluster.image,
        registration(1, features=features),
        cluster.next_offset,
        0,
        cluster_id=CLUSTER_ID,
        heartbeats=cluster.heartbeats,
    )
    # kraft.version is not finalized, so it is at level 0, outside 1..1.
    assert outcome.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert outcome.records == []


def test_a_broker_that_lists_no_features_joins_at_the_kraft_minimum() -> None:
    cluster = Cluster()
    outcome = register_broker(
        cluster.image,
        registration(1, features=[]),
        0,
        0,
        cluster_id=CLUSTER_ID,
        heartbeats=cluster.heartbeats,
    )
    assert outcome.error_code == ErrorCode.NONE


@pytest.mark.parametrize(
    "log_dirs",
    [[uuid.UUID(int=0xD1), uuid.UUID(int=0xD1)], [uuid.UUID(int=1)]],
    ids=["duplicate", "reserved"],
)
def test_reserved_or_repeated_log_dir_ids_are_refused(log_dirs: list[uuid.UUID]) -> None:
    cluster = Cluster()
    outcome = register_broker(
        cluster.image,
        registration(1, log_dirs=log_dirs),
        0,
        0,
        cluster_id=CLUSTER_ID,
        heartbeats=cluster.heartbeats,
    )
    assert outcome.error_code == ErrorCode.INVALID_REGISTRATION


def test_a_zookeeper_migration_broker_is_refused() -> None:
    cluster = Cluster()
    request = registration(1)
    request.is_migrating_zk_broker = True
    outcome = register_broker(
        cluster.image, request, 0, 0, cluster_id=CLUSTER_ID, heartbeats=cluster.heartbeats
    )
    assert outcome.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED


# Heartbeats: unfencing ---------------------------------------------------------------


def test_a_heartbeat_with_a_stale_or_unknown_epoch_is_refused_and_renews_nothing() -> None:
    cluster = Cluster()
    cluster.start(1)
    stale = cluster.beat(1, epoch=cluster.image.brokers[1].epoch - 1)
    assert stale.response.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert (stale.response.is_fenced, stale.response.is_caught_up) == (True, False)
    assert stale.records == []
    assert stale.state is None
    unknown = cluster.beat(9, epoch=0)
    assert unknown.response.error_code == ErrorCode.STALE_BROKER_EPOCH
    cluster.now_ms = 5
    cluster.beat(1, epoch=123)
    assert cluster.heartbeats.last_contact_ms(1) == 0


def test_a_broker_is_unfenced_once_it_has_read_its_own_registration() -> None:
    cluster = Cluster()
    epoch = cluster.register(1).broker_epoch
    behind = cluster.beat(1, offset=epoch - 1)
    assert behind.records == []
    assert (behind.response.is_caught_up, behind.response.is_fenced) == (False, True)
    assert cluster.image.brokers[1].fenced
    caught_up = cluster.beat(1, offset=epoch)
    assert caught_up.records == [UnfenceBrokerRecord(id=1, epoch=epoch)]
    assert (caught_up.response.is_caught_up, caught_up.response.is_fenced) == (True, False)
    assert not cluster.image.brokers[1].fenced
    # Nothing changes on the next heartbeat.
    assert cluster.beat(1).records == []


def test_a_broker_that_wants_to_stay_fenced_stays_fenced() -> None:
    cluster = Cluster()
    cluster.register(1)
    outcome = cluster.beat(1, want_fence=True)
    assert outcome.records == []
    assert outcome.response.is_fenced
    assert outcome.response.is_caught_up


def test_an_unfenced_broker_leads_the_leaderless_partitions_whose_isr_holds_it() -> None:
    cluster = Cluster()
    cluster.start(1, 2, 3)
    cluster.partition(0, [1, 2], isr=[1], leader=1)
    cluster.partition(1, [2, 3], isr=[3], leader=3)
    cluster.partition(2, [1, 3], isr=[3], leader=3)
    cluster.beat(1, want_fence=True)
    cluster.beat(3, want_fence=True)
    assert [cluster.get(p).leader for p in range(3)] == [NO_LEADER] * 3
    epochs = [cluster.get(p).leader_epoch for p in range(3)]
    outcome = cluster.beat(1)
    assert kinds(outcome.records) == ["UnfenceBrokerRecord", "PartitionChangeRecord"]
    assert (cluster.get(0).leader, cluster.get(0).isr) == (1, [1])
    assert cluster.get(0).leader_epoch == epochs[0] + 1
    # Partition 2 lists broker 1 as a replica, but broker 1 is not in its ISR.
    assert cluster.get(2).leader == NO_LEADER
    cluster.beat(3)
    assert (cluster.get(1).leader, cluster.get(2).leader) == (3, 3)


# Heartbeats: fencing -------------------------------------------------------------------


def test_want_fence_moves_leadership_in_replica_order_and_bumps_the_epochs() -> None:
    cluster = Cluster()
    cluster.start(1, 2, 3)
    cluster.partition(0, [1, 3, 2])
    cluster.partition(1, [2, 1, 3])
    before = [cluster.get(p) for p in range(2)]
    outcome = cluster.beat(1, want_fence=True)
    assert kinds(outcome.records) == [
        "PartitionChangeRecord",
        "PartitionChangeRecord",
        "FenceBrokerRecord",
    ]
    assert outcome.response.is_fenced
    assert not outcome.response.should_shut_down
    led = cluster.get(0)
    assert (led.leader, led.isr) == (3, [3, 2])
    assert led.leader_epoch == before[0].leader_epoch + 1
    assert led.partition_epoch == before[0].partition_epoch + 1
    followed = cluster.get(1)
    assert (followed.leader, followed.isr) == (2, [2, 3])
    # Only the ISR changed: the leader and its epoch stay.
    assert followed.leader_epoch == before[1].leader_epoch
    assert followed.partition_epoch == before[1].partition_epoch + 1
    assert cluster.image.brokers[1].fenced


def test_the_last_isr_member_stays_in_the_isr_and_the_partition_loses_its_leader() -> None:
    cluster = Cluster()
    cluster.start(1, 2)
    cluster.partition(0, [1, 2], isr=[1], leader=1)
    epoch = cluster.get(0).leader_epoch
    cluster.beat(1, want_fence=True)
    partition = cluster.get(0)
    assert (partition.leader, partition.isr, partition.leader_epoch) == (NO_LEADER, [1], epoch + 1)


def test_a_fenced_broker_is_not_elected_and_a_shutting_down_one_neither() -> None:
    cluster = Cluster()
    cluster.start(1, 2, 3)
    cluster.partition(0, [1, 2, 3])
    cluster.beat(2, want_fence=True)
    cluster.beat(1, want_fence=True)
    assert (cluster.get(0).leader, cluster.get(0).isr) == (3, [3])


# Heartbeats: controlled shutdown -------------------------------------------------------


def test_controlled_shutdown_moves_leaderships_then_lets_the_broker_go() -> None:
    cluster = Cluster()
    cluster.start(1, 2, 3)
    cluster.partition(0, [1, 2, 3])
    cluster.partition(1, [2, 1])
    for broker_id in (1, 2, 3):
        cluster.beat(broker_id)
    start = cluster.next_offset
    outcome = cluster.beat(1, want_shut_down=True)
    assert outcome.state is BrokerControlState.CONTROLLED_SHUTDOWN
    assert kinds(outcome.records) == [
        "BrokerRegistrationChangeRecord",
        "PartitionChangeRecord",
        "PartitionChangeRecord",
    ]
    assert outcome.records[0] == BrokerRegistrationChangeRecord(
        broker_id=1, broker_epoch=cluster.image.brokers[1].epoch, in_controlled_shutdown=1
    )
    assert (outcome.response.is_fenced, outcome.response.should_shut_down) == (False, False)
    broker = cluster.image.brokers[1]
    assert (broker.fenced, broker.in_controlled_shutdown) == (False, True)
    assert (cluster.get(0).leader, cluster.get(0).isr) == (2, [2, 3])
    assert (cluster.get(1).leader, cluster.get(1).isr) == (2, [2])
    last = start + len(outcome.records) - 1

    # Broker 3 has not yet read the leader moves: broker 1 must keep serving.
    waiting = cluster.beat(1, want_shut_down=True)
    assert (waiting.records, waiting.response.should_shut_down) == ([], False)
    cluster.beat(2, offset=last)
    cluster.beat(3, offset=last - 1)
    assert not cluster.beat(1, want_shut_down=True).response.should_shut_down
    cluster.beat(3, offset=last)
    done = cluster.beat(1, offset=last, want_shut_down=True)
    assert done.state is BrokerControlState.SHUTDOWN_NOW
    assert (done.response.should_shut_down, done.response.is_fenced) == (True, True)
    assert kinds(done.records) == ["FenceBrokerRecord"]
    assert cluster.image.brokers[1].fenced


def test_a_broker_that_leads_nothing_may_shut_down_at_once() -> None:
    cluster = Cluster()
    cluster.start(1, 2)
    cluster.partition(0, [2, 1])
    outcome = cluster.beat(1, want_shut_down=True)
    assert outcome.state is BrokerControlState.SHUTDOWN_NOW
    assert (outcome.response.should_shut_down, outcome.response.is_fenced) == (True, True)
    assert kinds(outcome.records) == ["PartitionChangeRecord", "FenceBrokerRecord"]
    assert cluster.get(0).isr == [2]


def test_a_fenced_broker_that_wants_to_shut_down_may() -> None:
    cluster = Cluster()
    cluster.register(1)
    outcome = cluster.beat(1, want_shut_down=True)
    assert outcome.response.should_shut_down
    assert outcome.records == []


def test_a_broker_in_controlled_shutdown_is_not_unfenced_again() -> None:
    cluster = Cluster()
    cluster.start(1, 2)
    cluster.partition(0, [1, 2])
    cluster.beat(1, want_shut_down=True)
    cluster.now_ms += SESSION_MS + 1
    cluster.beat(2)
    cluster.apply(cluster.heartbeats.expire(cluster.image, cluster.now_ms))
    assert cluster.image.brokers[1].fenced
    outcome = cluster.beat(1)
    assert outcome.records == []
    assert outcome.response.is_fenced


def test_after_a_failover_a_shutting_down_broker_waits_for_the_whole_image() -> None:
    cluster = Cluster()
    cluster.start(1, 2)
    cluster.partition(0, [1, 2])
    cluster.beat(1, want_shut_down=True)
    cluster.heartbeats = BrokerHeartbeats(
        activated_ms=cluster.now_ms, session_timeout_ms=SESSION_MS
    )
    offset = cluster.image.offset
    assert not cluster.beat(1, offset=offset - 1, want_shut_down=True).response.should_shut_down
    cluster.beat(2, offset=offset)
    assert cluster.beat(1, offset=offset, want_shut_down=True).response.should_shut_down


# Session expiry ----------------------------------------------------------------------


def test_a_broker_silent_for_the_session_timeout_is_fenced_and_loses_its_leaderships() -> None:
    cluster = Cluster()
    cluster.start(1, 2)
    cluster.partition(0, [1, 2])
    cluster.now_ms = SESSION_MS
    cluster.beat(2)
    assert cluster.heartbeats.expire(cluster.image, SESSION_MS) == []
    assert cluster.heartbeats.next_expiry_ms(cluster.image) == SESSION_MS + 1
    records = cluster.heartbeats.expire(cluster.image, SESSION_MS + 1)
    assert kinds(records) == ["PartitionChangeRecord", "FenceBrokerRecord"]
    cluster.apply(records)
    assert cluster.image.brokers[1].fenced
    assert not cluster.image.brokers[2].fenced
    assert (cluster.get(0).leader, cluster.get(0).isr) == (2, [2])
    assert cluster.heartbeats.next_expiry_ms(cluster.image) == 2 * SESSION_MS + 1


def test_brokers_of_one_isr_expiring_together_never_inherit_each_others_leadership() -> None:
    cluster = Cluster()
    cluster.start(1, 2, 3)
    cluster.partition(0, [1, 2, 3])
    cluster.now_ms = SESSION_MS + 1
    cluster.beat(3)
    image_before = cluster.image.copy()
    records = cluster.heartbeats.expire(cluster.image, cluster.now_ms)
    assert cluster.image == image_before  # expire only returns records
    cluster.apply(records)
    assert (cluster.get(0).leader, cluster.get(0).isr) == (3, [3])
    assert kinds(records).count("FenceBrokerRecord") == 2


def test_a_new_active_controller_gives_every_broker_a_fresh_session() -> None:
    cluster = Cluster()
    cluster.start(1)
    cluster.heartbeats = BrokerHeartbeats(activated_ms=50_000, session_timeout_ms=SESSION_MS)
    assert cluster.heartbeats.expire(cluster.image, 50_000 + SESSION_MS) == []
    assert cluster.heartbeats.expire(cluster.image, 50_000 + SESSION_MS + 1) != []


def test_fenced_brokers_do_not_expire() -> None:
    cluster = Cluster()
    cluster.register(1)
    assert cluster.heartbeats.next_expiry_ms(cluster.image) is None
    assert cluster.heartbeats.expire(cluster.image, 10 * SESSION_MS) == []


# The facade ------------------------------------------------------------------------


def test_the_controller_facade_drives_a_broker_through_its_life() -> None:
    image = MetadataImage()
    controller = QuorumControllerState(image, cluster_id=CLUSTER_ID, activated_ms=0)

    def append(records: Sequence[object]) -> None:
        for record in records:
            image.replay(record, image.offset + 1)

    records, registered = controller.register_broker(registration(1), image.offset + 1, 0)
    append(records)
    assert registered.error_code == ErrorCode.NONE
    beat = BrokerHeartbeatRequest(
        broker_id=1, broker_epoch=registered.broker_epoch, current_metadata_offset=image.offset
    )
    records, response = controller.broker_heartbeat(beat, image.offset + 1, 100)
    append(records)
    assert not response.is_fenced
    assert controller.next_expiry_ms() == 100 + SESSION_MS + 1
    records = controller.fence_stale_brokers(100 + SESSION_MS + 1)
    assert records == [FenceBrokerRecord(id=1, epoch=registered.broker_epoch)]
    append(records)
    assert image.brokers[1].fenced
    assert noop_record() == NoOpRecord()
    assert DEFAULT_METADATA_MAX_IDLE_INTERVAL_MS == 500


# Properties --------------------------------------------------------------------------

BROKERS = range(5)


def check_partitions(image: MetadataImage) -> None:
    for topic in image.topics_by_id.values():
        for partition in topic.partitions.values():
            assert partition.isr, "the ISR never becomes empty"
            assert len(set(partition.isr)) == len(partition.isr)
            assert set(partition.isr) <= set(partition.replicas)
            if partition.leader != NO_LEADER:
                assert partition.leader in partition.isr
                broker = image.brokers[partition.leader]
                assert not broker.fenced
                assert not broker.in_controlled_shutdown


@st.composite
def partitions(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    replicas = draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=4, unique=True))
    isr = draw(st.lists(st.sampled_from(replicas), min_size=1, unique=True))
    return replicas, isr


EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["fence", "unfence", "shut_down", "expire", "restart"]),
        st.sampled_from(BROKERS),
    ),
    max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(partitions(), min_size=1, max_size=8), EVENTS)
def test_after_any_fencing_leaders_are_live_isr_members_and_no_isr_is_empty(
    layout: list[tuple[list[int], list[int]]], events: list[tuple[str, int]]
) -> None:
    cluster = Cluster()
    cluster.start(*BROKERS)
    for index, (replicas, isr) in enumerate(layout):
        cluster.partition(index, replicas, isr=isr)
    generations = dict.fromkeys(BROKERS, 0)
    check_partitions(cluster.image)
    for kind, broker_id in events:
        leader_epochs = {
            (topic.topic_id, p): partition.leader_epoch
            for topic in cluster.image.topics_by_id.values()
            for p, partition in topic.partitions.items()
        }
        records: list[BrokerRecord] = []
        if kind == "fence":
            records = cluster.beat(broker_id, want_fence=True).records
            # As in Kafka, a broker in controlled shutdown ignores want_fence: it is
            # already leaving every ISR and leadership.
            broker = cluster.image.brokers[broker_id]
            assert broker.fenced or broker.in_controlled_shutdown
        elif kind == "unfence":
            records = cluster.beat(broker_id).records
        elif kind == "shut_down":
            records = cluster.beat(broker_id, want_shut_down=True).records
        elif kind == "expire":
            # Everyone but broker_id keeps heartbeating; broker_id goes silent.
            cluster.now_ms += SESSION_MS + 1
            for other in BROKERS:
                if other != broker_id:
                    cluster.beat(other)
            records = cluster.heartbeats.expire(cluster.image, cluster.now_ms)
            cluster.apply(records)
            assert cluster.image.brokers[broker_id].fenced
            records = []
        else:
            generations[broker_id] += 1
            cluster.now_ms += SESSION_MS + 1
            outcome = cluster.register(broker_id, generations[broker_id])
            assert outcome.error_code == ErrorCode.NONE
            assert cluster.image.brokers[broker_id].fenced
        assert not any(isinstance(r, PartitionChangeRecord) and r.isr == [] for r in records)
        check_partitions(cluster.image)
        for topic in cluster.image.topics_by_id.values():
            for p, partition in topic.partitions.items():
                assert partition.leader_epoch >= leader_epochs[(topic.topic_id, p)]


def test_a_cleanly_stopped_broker_re_registers_at_once_with_its_previous_epoch() -> None:
    cluster = Cluster()
    cluster.start(1)
    # A new incarnation while the old session is valid names the epoch it stopped with
    # (its clean shutdown file): the controller knows the old process is gone.
    request = registration(1, generation=1)
    request.previous_broker_epoch = cluster.image.brokers[1].epoch
    outcome = register_broker(
        cluster.image,
        request,
        cluster.next_offset,
        cluster.now_ms,
        cluster_id=CLUSTER_ID,
        heartbeats=cluster.heartbeats,
    )
    assert outcome.error_code == ErrorCode.NONE
    assert outcome.broker_epoch == cluster.next_offset
    # A wrong previous epoch is no proof: still refused.
    request.previous_broker_epoch = 12345
    refused = register_broker(
        cluster.image,
        request,
        cluster.next_offset,
        cluster.now_ms,
        cluster_id=CLUSTER_ID,
        heartbeats=cluster.heartbeats,
    )
    assert refused.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION


def test_a_broker_whose_heartbeat_connection_closed_is_fenced_after_the_grace() -> None:
    """A killed process closes its sockets at once: the controller fences it after
    broker.session.connection.loss.ms instead of the whole session timeout."""
    cluster = Cluster()
    cluster.heartbeats = BrokerHeartbeats(0, SESSION_MS, connection_loss_ms=100)
    cluster.start(1, 2)
    cluster.partition(0, [1, 2])
    cluster.now_ms = 10
    cluster.heartbeats.connection_lost(1, 10)
    assert cluster.heartbeats.next_expiry_ms(cluster.image) == 111
    assert cluster.heartbeats.expire(cluster.image, 110) == []
    records = cluster.heartbeats.expire(cluster.image, 111)
    cluster.apply(records)
    assert cluster.image.brokers[1].fenced and not cluster.image.brokers[2].fenced
    assert cluster.get(0).leader == 2


def test_a_broker_heard_from_again_after_its_connection_closed_keeps_its_session() -> None:
    cluster = Cluster()
    cluster.heartbeats = BrokerHeartbeats(0, SESSION_MS, connection_loss_ms=100)
    cluster.start(1, 2)
    cluster.heartbeats.connection_lost(1, 10)
    cluster.now_ms = 50
    cluster.beat(1)  # it reconnected
    assert cluster.heartbeats.expire(cluster.image, 500) == []
    assert cluster.heartbeats.next_expiry_ms(cluster.image) == SESSION_MS + 1


def test_with_the_grace_turned_off_only_the_session_timeout_fences() -> None:
    cluster = Cluster()
    cluster.start(1, 2)
    cluster.heartbeats.connection_lost(1, 10)
    assert cluster.heartbeats.expire(cluster.image, SESSION_MS) == []
