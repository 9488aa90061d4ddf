"""An image written out as snapshot records: what it writes, in which order, that reading
it back gives the same image, and that equal images give the same bytes."""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.controller.image import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_TOPIC,
    LEADER_RECOVERY_RECOVERING,
    MIGRATING_DIRECTORY,
    MetadataImage,
    TopicImage,
)
from odradek.controller.image_records import (
    decode_image_records,
    encode_image_records,
    image_records,
)
from odradek.core.errors import DecodeError, InvariantError
from odradek.protocol.metadata import (
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    DelegationTokenRecord,
    FeatureLevelRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    TopicRecord,
    UserScramCredentialRecord,
)
from odradek.protocol.metadata.client_quota_record import EntityData as QuotaEntityData
from odradek.protocol.metadata.register_broker_record import BrokerEndpoint
from odradek.protocol.metadata_record import encode_metadata_record
from tests.controller.test_image import (
    ACL_1,
    ACL_2,
    D1,
    D2,
    D3,
    INC_A,
    LOG_SETTINGS,
    acl,
    replay_all,
    replay_log,
    valid_logs,
)
from tests.protocol.strategies import message_value

FOO = uuid.UUID(int=0xF00)
BAR = uuid.UUID(int=0xBA2)
SNAPSHOT_OFFSET = 1_000_000
"""Above every offset ``valid_logs`` reaches, so it can stand for any log's end."""


def round_trip(image: MetadataImage, offset: int = SNAPSHOT_OFFSET) -> MetadataImage:
    return decode_image_records(encode_image_records(image), offset)


def at(image: MetadataImage, offset: int) -> MetadataImage:
    return dataclasses.replace(image, offset=offset)


def _sample_log() -> list[object]:
    """One record of every kind the snapshot has to reproduce, out of snapshot order."""
    return [
        ProducerIdsRecord(broker_id=2, broker_epoch=11, next_producer_id=5000),
        TopicRecord(name="foo", topic_id=FOO),
        ConfigRecord(resource_type=CONFIG_RESOURCE_TOPIC, resource_name="foo", name="b", value="2"),
        ConfigRecord(resource_type=CONFIG_RESOURCE_TOPIC, resource_name="foo", name="a", value=""),
        ConfigRecord(resource_type=CONFIG_RESOURCE_BROKER, resource_name="", name="c", value="3"),
        FeatureLevelRecord(name="kraft.version", feature_level=1),
        FeatureLevelRecord(name="metadata.version", feature_level=21),
        FeatureLevelRecord(name="group.version", feature_level=1),
        RegisterBrokerRecord(
            broker_id=2,
            incarnation_id=INC_A,
            broker_epoch=11,
            end_points=[
                BrokerEndpoint(name="SSL", host="h2", port=9093, security_protocol=1),
                BrokerEndpoint(name="PLAINTEXT", host="h2", port=9092, security_protocol=0),
            ],
            rack=None,
            fenced=True,
            log_dirs=[D2, D1],
        ),
        RegisterBrokerRecord(broker_id=1, incarnation_id=INC_A, broker_epoch=10, rack="r1"),
        # Unfenced and in controlled shutdown: a state only a change record reaches.
        BrokerRegistrationChangeRecord(
            broker_id=2, broker_epoch=11, fenced=-1, in_controlled_shutdown=1
        ),
        PartitionRecord(
            partition_id=1,
            topic_id=FOO,
            replicas=[1, 2],
            isr=[1, 2],
            leader=1,
            leader_epoch=0,
            partition_epoch=0,
        ),
        PartitionRecord(
            partition_id=0,
            topic_id=FOO,
            replicas=[1, 2, 3],
            isr=[1],
            removing_replicas=[3],
            adding_replicas=[2],
            leader=1,
            leader_recovery_state=LEADER_RECOVERY_RECOVERING,
            leader_epoch=4,
            partition_epoch=7,
            directories=[D1, D2, D3],
            eligible_leader_replicas=[2],
            last_known_elr=[3],
        ),
        PartitionChangeRecord(partition_id=0, topic_id=FOO, leader=1),
        TopicRecord(name="bar", topic_id=BAR),
        UserScramCredentialRecord(
            name="bob", mechanism=1, salt=b"s2", stored_key=b"k3", server_key=b"k4", iterations=8192
        ),
        UserScramCredentialRecord(
            name="alice",
            mechanism=2,
            salt=b"s1",
            stored_key=b"k1",
            server_key=b"k2",
            iterations=4096,
        ),
        UserScramCredentialRecord(
            name="alice",
            mechanism=1,
            salt=b"s0",
            stored_key=b"k5",
            server_key=b"k6",
            iterations=4096,
        ),
        acl(ACL_2, resource_name="bar", permission=2),
        acl(uuid.UUID(int=0xAC0)),
        acl(ACL_1, principal="User:*"),
        RemoveAccessControlEntryRecord(id=uuid.UUID(int=0xAC0)),
    ]


def test_the_records_come_in_snapshot_order_with_every_field() -> None:
    assert image_records(replay_all(_sample_log())) == [
        # metadata.version first, then the other features by name.
        FeatureLevelRecord(name="metadata.version", feature_level=21),
        FeatureLevelRecord(name="group.version", feature_level=1),
        FeatureLevelRecord(name="kraft.version", feature_level=1),
        RegisterBrokerRecord(
            broker_id=1,
            incarnation_id=INC_A,
            broker_epoch=10,
            rack="r1",
            fenced=True,
            in_controlled_shutdown=False,
        ),
        RegisterBrokerRecord(
            broker_id=2,
            incarnation_id=INC_A,
            broker_epoch=11,
            # Listeners keep the registration's order; directories come out sorted.
            end_points=[
                BrokerEndpoint(name="SSL", host="h2", port=9093, security_protocol=1),
                BrokerEndpoint(name="PLAINTEXT", host="h2", port=9092, security_protocol=0),
            ],
            rack=None,
            fenced=False,
            in_controlled_shutdown=True,
            log_dirs=[D1, D2],
        ),
        TopicRecord(name="bar", topic_id=BAR),
        TopicRecord(name="foo", topic_id=FOO),
        PartitionRecord(
            partition_id=0,
            topic_id=FOO,
            replicas=[1, 2, 3],
            isr=[1],
            removing_replicas=[3],
            adding_replicas=[2],
            leader=1,
            leader_recovery_state=LEADER_RECOVERY_RECOVERING,
            # The change record bumped both epochs.
            leader_epoch=5,
            partition_epoch=8,
            directories=[D1, D2, D3],
            eligible_leader_replicas=[2],
            last_known_elr=[3],
        ),
        PartitionRecord(
            partition_id=1,
            topic_id=FOO,
            replicas=[1, 2],
            isr=[1, 2],
            leader=1,
            leader_epoch=0,
            partition_epoch=0,
            # Replay placed these replicas in MIGRATING; the snapshot says so outright.
            directories=[MIGRATING_DIRECTORY, MIGRATING_DIRECTORY],
            # Empty ELR lists are left out, as Kafka does.
            eligible_leader_replicas=None,
            last_known_elr=None,
        ),
        ConfigRecord(resource_type=CONFIG_RESOURCE_TOPIC, resource_name="foo", name="a", value=""),
        ConfigRecord(resource_type=CONFIG_RESOURCE_TOPIC, resource_name="foo", name="b", value="2"),
        ConfigRecord(resource_type=CONFIG_RESOURCE_BROKER, resource_name="", name="c", value="3"),
        ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=5000),
        # Credentials last, by mechanism type and then user name, keys and all: a
        # snapshot is what a restarted or new node learns its users' passwords from.
        UserScramCredentialRecord(
            name="alice",
            mechanism=1,
            salt=b"s0",
            stored_key=b"k5",
            server_key=b"k6",
            iterations=4096,
        ),
        UserScramCredentialRecord(
            name="bob", mechanism=1, salt=b"s2", stored_key=b"k3", server_key=b"k4", iterations=8192
        ),
        UserScramCredentialRecord(
            name="alice",
            mechanism=2,
            salt=b"s1",
            stored_key=b"k1",
            server_key=b"k2",
            iterations=4096,
        ),
        # ACLs after the credentials, by id; a removed one is simply not there.
        acl(ACL_1, principal="User:*"),
        acl(ACL_2, resource_name="bar", permission=2),
    ]


def test_the_sample_image_reads_back_equal() -> None:
    image = replay_all(_sample_log())
    assert round_trip(image, image.offset) == image


def test_an_empty_image_writes_nothing() -> None:
    assert image_records(MetadataImage()) == []
    assert encode_image_records(MetadataImage()) == []
    assert decode_image_records([], 7) == MetadataImage(offset=7)
    assert decode_image_records([], -1) == MetadataImage()


def test_records_the_image_does_not_model_leave_nothing_to_write() -> None:
    # Delegation tokens and the like are applied as offset-only, so a snapshot cannot
    # carry them.
    image = replay_all([DelegationTokenRecord(token_id="t", owner="User:a")])
    assert image_records(image) == []


def test_acls_read_back_with_their_ids_and_every_field() -> None:
    record = AccessControlEntryRecord(
        id=uuid.UUID("0b4b2dd5-7c1b-4e4b-9a6f-6d1d8e1f2a3b"),
        resource_type=4,
        resource_name="kafka-cluster",
        pattern_type=4,
        principal="User:\u00e9ve",
        host="10.0.0.1",
        operation=7,
        permission_type=2,
    )
    image = replay_all([acl(ACL_2), record])
    decoded = round_trip(image, image.offset)
    assert decoded == image
    assert decoded.acls == {ACL_2: acl(ACL_2), record.id: record}


def test_the_bootstrap_snapshot_holds_records_at_offset_minus_one() -> None:
    # `storage format` writes the snapshot (0, 0): it covers no log offset at all, yet
    # it carries metadata.version. Replay alone could not take a record at -1.
    values = [encode_metadata_record(FeatureLevelRecord(name="metadata.version", feature_level=21))]
    image = decode_image_records(values, -1)
    assert image.offset == -1
    assert image.features == {"metadata.version": 21}


def test_records_that_do_not_fit_together_name_their_position() -> None:
    values = [
        encode_metadata_record(TopicRecord(name="foo", topic_id=FOO)),
        encode_metadata_record(PartitionRecord(partition_id=0, topic_id=BAR)),
    ]
    with pytest.raises(InvariantError, match="snapshot at offset 9, record 1 of 2"):
        decode_image_records(values, 9)


def test_bytes_that_are_not_a_record_are_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        decode_image_records([b"\x01\x63\x00"], 9)


def test_an_offset_below_minus_one_is_a_bug() -> None:
    with pytest.raises(InvariantError):
        decode_image_records([], -2)


# Random images -------------------------------------------------------------------


# valid_logs seldom sets two keys of one resource; these records, replayed after the
# log, make resources with several keys (and deletions among them) common.
_CONFIGS = st.lists(
    st.builds(
        ConfigRecord,
        resource_type=st.sampled_from([CONFIG_RESOURCE_TOPIC, CONFIG_RESOURCE_BROKER]),
        resource_name=st.sampled_from(["", "0", "a"]),
        name=st.sampled_from(["k1", "k2", "k3"]),
        value=st.none() | st.sampled_from(["", "v"]),
    ),
    max_size=10,
)


def image_of(log: list[tuple[object, int]], configs: list[ConfigRecord]) -> MetadataImage:
    return replay_all(configs, replay_log(log))


@LOG_SETTINGS
@given(valid_logs(), _CONFIGS)
def test_an_image_reads_back_equal(
    log: list[tuple[object, int]], configs: list[ConfigRecord]
) -> None:
    image = image_of(log, configs)
    decoded = round_trip(image)
    assert decoded.offset == SNAPSHOT_OFFSET
    assert decoded == at(image, SNAPSHOT_OFFSET)
    # Name and id maps of the decoded image share their topics, as replay's do.
    for topic in decoded.topics_by_name.values():
        assert decoded.topics_by_id[topic.topic_id] is topic
    # Writing the decoded image again gives the same bytes: nothing drifts per cycle.
    assert encode_image_records(decoded) == encode_image_records(image)


def _wide_record(draw: st.DrawFn, image: MetadataImage) -> object:
    """A record with values from the whole range of each wire field.

    ``valid_logs`` keeps to small values so that its records fit together; this reaches
    the edges (negative ids, int32 and int64 extremes, any Unicode, random UUIDs) that
    the encoding has to carry unchanged.
    """
    cls: Any = draw(
        st.sampled_from(
            [
                TopicRecord,
                PartitionRecord,
                RegisterBrokerRecord,
                ConfigRecord,
                FeatureLevelRecord,
                ProducerIdsRecord,
                UserScramCredentialRecord,
                AccessControlEntryRecord,
            ]
        )
    )
    record: Any = draw(message_value(cls, cls.VALID_VERSIONS[1]))
    if isinstance(record, PartitionRecord):
        if not image.topics_by_id:
            return NoOpRecord()
        record.topic_id = draw(st.sampled_from(sorted(image.topics_by_id)))
        # Replay refuses an unknown recovery state and a directory list that does not
        # match the replicas; keep the rest of the record as drawn.
        record.leader_recovery_state %= 2
        if len(record.directories) != len(record.replicas):
            record.directories = []
    return record


@st.composite
def wide_images(draw: st.DrawFn) -> MetadataImage:
    image = MetadataImage()
    for _ in range(draw(st.integers(0, 12))):
        record = _wide_record(draw, image)
        # A record the image refuses (a repeated topic, a producer id going backwards)
        # leaves it unchanged, so drawing on is safe.
        with contextlib.suppress(InvariantError):
            image.replay(record, image.offset + 1)
    return image


@LOG_SETTINGS
@given(wide_images())
def test_an_image_with_extreme_values_reads_back_equal(image: MetadataImage) -> None:
    assert round_trip(image, image.offset) == image


def _reordered(image: MetadataImage) -> MetadataImage:
    """An equal image whose every dict was filled in the reverse order."""

    def reverse(values: dict[Any, Any]) -> dict[Any, Any]:
        return dict(reversed(values.items()))

    topics_by_id = {
        topic_id: TopicImage(topic.name, topic.topic_id, reverse(topic.partitions))
        for topic_id, topic in reversed(image.topics_by_id.items())
    }
    return MetadataImage(
        offset=image.offset,
        topics_by_name={
            name: topics_by_id[image.topics_by_name[name].topic_id]
            for name in reversed(image.topics_by_name)
        },
        topics_by_id=topics_by_id,
        brokers=reverse(image.brokers),
        configs={resource: reverse(values) for resource, values in reverse(image.configs).items()},
        features=reverse(image.features),
        next_producer_id=image.next_producer_id,
        scram_credentials=reverse(image.scram_credentials),
        acls=reverse(dict(image.acls)),
        client_quotas={
            entity: reverse(values)
            for entity, values in reversed(list(image.client_quotas.items()))
        },
    )


def test_client_quotas_are_written_by_entity_default_first_then_by_key() -> None:
    entities: list[list[tuple[str, str | None]]] = [
        [("user", "bob")],
        [("user", None)],
        [("user", "alice"), ("client-id", "app")],
        [("client-id", None), ("user", "alice")],
        [("ip", "10.0.0.1")],
    ]
    records = [
        ClientQuotaRecord(
            entity=[QuotaEntityData(entity_type=t, entity_name=n) for t, n in entity],
            key=key,
            value=value,
        )
        for entity in entities
        for key, value in (("request_percentage", 5.5), ("producer_byte_rate", 1024.0))
    ]
    image = replay_all(records)
    written = [r for r in image_records(image) if isinstance(r, ClientQuotaRecord)]
    assert [
        ([(e.entity_type, e.entity_name) for e in r.entity], r.key, r.value) for r in written
    ] == [
        (entity, key, value)
        for entity in (
            [("client-id", None), ("user", "alice")],
            [("client-id", "app"), ("user", "alice")],
            [("ip", "10.0.0.1")],
            [("user", None)],
            [("user", "bob")],
        )
        for key, value in (("producer_byte_rate", 1024.0), ("request_percentage", 5.5))
    ]
    assert decode_image_records(encode_image_records(image), 7) == dataclasses.replace(
        image, offset=7
    )


@LOG_SETTINGS
@given(valid_logs(), _CONFIGS)
def test_equal_images_give_the_same_bytes_whatever_their_dict_order(
    log: list[tuple[object, int]], configs: list[ConfigRecord]
) -> None:
    image = image_of(log, configs)
    reordered = _reordered(image)
    assert reordered == image
    assert encode_image_records(reordered) == encode_image_records(image)


def test_the_same_facts_replayed_in_another_order_give_the_same_bytes() -> None:
    log = _sample_log()
    # Two independent groups of the sample log, each kept in its own order (a
    # partition needs its topic, a change needs its partition), swapped around.
    first = [r for r in log if not isinstance(r, ConfigRecord | FeatureLevelRecord)]
    second = [r for r in log if isinstance(r, ConfigRecord | FeatureLevelRecord)]
    forward = replay_all(first + second)
    backward = replay_all(list(reversed(second)) + first)
    # Reversed, the two "foo" configs and three features still set the same keys.
    assert at(backward, forward.offset) == forward
    assert encode_image_records(backward) == encode_image_records(forward)
