"""The metadata image: each record kind's replay, the partition merge rules, copy
isolation, contradictions as invariant errors, and determinism under random logs."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Sequence
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.controller.image import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_TOPIC,
    LOST_DIRECTORY,
    MIGRATING_DIRECTORY,
    UNASSIGNED_DIRECTORY,
    UNMODELLED_RECORDS,
    BrokerImage,
    Endpoint,
    MetadataImage,
    PartitionImage,
    TopicImage,
)
from odradek.core.errors import InvariantError
from odradek.core.scram_credential import ScramCredential
from odradek.protocol.metadata import (
    RECORDS,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from odradek.protocol.metadata.client_quota_record import EntityData as QuotaEntityData
from odradek.protocol.metadata.register_broker_record import BrokerEndpoint
from odradek.protocol.metadata_record import (
    MetadataRecord,
    decode_metadata_record,
    encode_metadata_record,
)
from tests.protocol.strategies import message_value

FOO = uuid.UUID(int=0xF00)
BAR = uuid.UUID(int=0xBA2)
D1 = uuid.UUID(int=0xD1D1D1D1)
D2 = uuid.UUID(int=0xD2D2D2D2)
D3 = uuid.UUID(int=0xD3D3D3D3)
INC_A = uuid.UUID(int=0xA)
INC_B = uuid.UUID(int=0xB)


def replay_all(records: Sequence[object], image: MetadataImage | None = None) -> MetadataImage:
    """Replay ``records`` at the offsets that follow ``image.offset``."""
    image = MetadataImage() if image is None else image
    for record in records:
        image.replay(record, image.offset + 1)
    return image


def partition_record(
    partition_id: int = 0,
    topic_id: uuid.UUID = FOO,
    replicas: list[int] | None = None,
    isr: list[int] | None = None,
    leader: int = 1,
    leader_epoch: int = 4,
    partition_epoch: int = 7,
    directories: list[uuid.UUID] | None = None,
    **kwargs: Any,
) -> PartitionRecord:
    return PartitionRecord(
        partition_id=partition_id,
        topic_id=topic_id,
        replicas=[1, 2, 3] if replicas is None else replicas,
        isr=[1, 2, 3] if isr is None else isr,
        leader=leader,
        leader_epoch=leader_epoch,
        partition_epoch=partition_epoch,
        directories=[D1, D2, D3] if directories is None else directories,
        **kwargs,
    )


def register(
    broker_id: int = 1, epoch: int = 10, incarnation: uuid.UUID = INC_A, **kwargs: Any
) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id, broker_epoch=epoch, incarnation_id=incarnation, **kwargs
    )


def with_partition(**kwargs: Any) -> MetadataImage:
    """An image with topic foo and its partition 0 from ``partition_record(**kwargs)``."""
    return replay_all([TopicRecord(name="foo", topic_id=FOO), partition_record(**kwargs)])


def partition_of(image: MetadataImage, topic_id: uuid.UUID = FOO, index: int = 0) -> PartitionImage:
    return image.topics_by_id[topic_id].partitions[index]


def change(**kwargs: Any) -> PartitionChangeRecord:
    return PartitionChangeRecord(partition_id=0, topic_id=FOO, **kwargs)


BASE = PartitionImage(
    replicas=[1, 2, 3],
    isr=[1, 2, 3],
    removing_replicas=[],
    adding_replicas=[],
    leader=1,
    leader_recovery_state=0,
    leader_epoch=4,
    partition_epoch=7,
    directories=[D1, D2, D3],
    eligible_leader_replicas=[],
    last_known_elr=[],
)
"""What ``with_partition()`` holds for foo-0."""


# The empty image ---------------------------------------------------------------


def test_a_new_image_is_empty() -> None:
    image = MetadataImage()
    assert image.offset == -1
    assert image.topics_by_name == {}
    assert image.topics_by_id == {}
    assert image.brokers == {}
    assert image.configs == {}
    assert image.features == {}
    assert image.next_producer_id == -1


# Topics and partitions -----------------------------------------------------------


def test_topic_record_adds_a_topic_without_partitions() -> None:
    image = replay_all([TopicRecord(name="foo", topic_id=FOO)])
    assert image.topics_by_name == {"foo": TopicImage("foo", FOO, {})}
    assert image.topics_by_id[FOO] is image.topics_by_name["foo"]
    assert image.offset == 0


def test_partition_record_adds_a_partition() -> None:
    image = replay_all(
        [
            TopicRecord(name="foo", topic_id=FOO),
            partition_record(
                partition_id=2,
                replicas=[3, 1],
                isr=[3],
                removing_replicas=[1],
                adding_replicas=[4],
                leader=3,
                leader_recovery_state=1,
                leader_epoch=9,
                partition_epoch=11,
                directories=[D3, D1],
                eligible_leader_replicas=[1],
                last_known_elr=[5],
            ),
        ]
    )
    assert image.topics_by_name["foo"].partitions == {
        2: PartitionImage(
            replicas=[3, 1],
            isr=[3],
            removing_replicas=[1],
            adding_replicas=[4],
            leader=3,
            leader_recovery_state=1,
            leader_epoch=9,
            partition_epoch=11,
            directories=[D3, D1],
            eligible_leader_replicas=[1],
            last_known_elr=[5],
        )
    }


def test_partition_record_without_directories_places_replicas_in_migrating() -> None:
    # A version 0 record carries no directories, a version 1 record no ELR.
    image = with_partition(directories=[])
    assert partition_of(image).directories == [MIGRATING_DIRECTORY] * 3
    assert partition_of(image).eligible_leader_replicas == []
    assert partition_of(image).last_known_elr == []
    # Kafka's reserved DirectoryId values.
    assert [
        uuid.UUID(int=0),
        uuid.UUID(int=1),
        uuid.UUID(int=2),
    ] == [MIGRATING_DIRECTORY, UNASSIGNED_DIRECTORY, LOST_DIRECTORY]


def test_partition_record_replaces_the_whole_partition() -> None:
    image = with_partition(eligible_leader_replicas=[2])
    replay_all([partition_record(replicas=[5], isr=[5], leader=5, directories=[])], image)
    assert partition_of(image) == PartitionImage(
        replicas=[5],
        isr=[5],
        removing_replicas=[],
        adding_replicas=[],
        leader=5,
        leader_recovery_state=0,
        leader_epoch=4,
        partition_epoch=7,
        directories=[MIGRATING_DIRECTORY],
        eligible_leader_replicas=[],
        last_known_elr=[],
    )


def test_the_image_does_not_share_lists_with_the_record() -> None:
    record = partition_record()
    image = replay_all([TopicRecord(name="foo", topic_id=FOO), record])
    record.isr.append(99)
    record.replicas.clear()
    assert partition_of(image) == BASE


def test_remove_topic_removes_the_topic_and_its_configs() -> None:
    image = replay_all(
        [
            TopicRecord(name="foo", topic_id=FOO),
            TopicRecord(name="bar", topic_id=BAR),
            partition_record(),
            ConfigRecord(resource_type=2, resource_name="foo", name="retention.ms", value="1"),
            ConfigRecord(resource_type=2, resource_name="bar", name="retention.ms", value="2"),
            ConfigRecord(resource_type=4, resource_name="foo", name="x", value="3"),
            RemoveTopicRecord(topic_id=FOO),
        ]
    )
    assert image.topics_by_name == {"bar": TopicImage("bar", BAR, {})}
    assert list(image.topics_by_id) == [BAR]
    assert image.configs == {(2, "bar"): {"retention.ms": "2"}, (4, "foo"): {"x": "3"}}
    assert image.offset == 6


def test_a_removed_topic_name_can_be_created_again_without_its_old_configs() -> None:
    new_id = uuid.UUID(int=0xF01)
    image = replay_all(
        [
            TopicRecord(name="foo", topic_id=FOO),
            ConfigRecord(resource_type=2, resource_name="foo", name="k", value="v"),
            RemoveTopicRecord(topic_id=FOO),
            TopicRecord(name="foo", topic_id=new_id),
        ]
    )
    assert image.topics_by_name == {"foo": TopicImage("foo", new_id, {})}
    assert image.configs == {}


# PartitionChangeRecord merge rules -------------------------------------------------


def merged(record: PartitionChangeRecord, **kwargs: Any) -> PartitionImage:
    image = with_partition(**kwargs)
    replay_all([record], image)
    return partition_of(image)


def test_an_empty_change_only_bumps_the_partition_epoch() -> None:
    assert merged(change()) == dataclasses.replace(BASE, partition_epoch=8)


def test_a_leader_change_bumps_leader_and_partition_epochs() -> None:
    assert merged(change(leader=2)) == dataclasses.replace(
        BASE, leader=2, leader_epoch=5, partition_epoch=8
    )


def test_no_leader_is_a_leader_change() -> None:
    assert merged(change(leader=-1, isr=[])) == dataclasses.replace(
        BASE, leader=-1, isr=[], leader_epoch=5, partition_epoch=8
    )


def test_naming_the_current_leader_still_bumps_the_leader_epoch() -> None:
    # PartitionRegistration.merge bumps whenever leader != -2; the controller relies on
    # that to fence a stale epoch without moving leadership.
    assert merged(change(leader=1)) == dataclasses.replace(BASE, leader_epoch=5, partition_epoch=8)


def test_an_isr_only_change_keeps_the_leader_epoch() -> None:
    assert merged(change(isr=[1, 3])) == dataclasses.replace(BASE, isr=[1, 3], partition_epoch=8)


def test_an_empty_list_is_a_change_and_null_is_not() -> None:
    result = merged(change(isr=[], adding_replicas=None), adding_replicas=[4])
    assert result.isr == []
    assert result.adding_replicas == [4]


def test_reassignment_fields_change_only_when_carried() -> None:
    result = merged(change(adding_replicas=[4], removing_replicas=[3]))
    assert result == dataclasses.replace(
        BASE, adding_replicas=[4], removing_replicas=[3], partition_epoch=8
    )
    result = merged(change(removing_replicas=[]), removing_replicas=[3], adding_replicas=[4])
    assert result.removing_replicas == []
    assert result.adding_replicas == [4]


def test_new_replicas_keep_their_directories_and_new_ones_are_unassigned() -> None:
    result = merged(change(replicas=[3, 4, 1]))
    assert result.replicas == [3, 4, 1]
    assert result.directories == [D3, UNASSIGNED_DIRECTORY, D1]
    assert result.isr == [1, 2, 3]
    assert result.leader_epoch == 4


def test_replicas_with_directories_take_the_directories() -> None:
    result = merged(change(replicas=[4, 5], directories=[D2, LOST_DIRECTORY]))
    assert result.replicas == [4, 5]
    assert result.directories == [D2, LOST_DIRECTORY]


def test_directories_alone_replace_the_directories() -> None:
    assert merged(change(directories=[D3, D2, D1])).directories == [D3, D2, D1]


def test_an_empty_directory_list_means_unchanged() -> None:
    assert merged(change(directories=[])).directories == [D1, D2, D3]


def test_leader_recovery_state_minus_one_is_unchanged() -> None:
    assert merged(change(), leader_recovery_state=1).leader_recovery_state == 1
    assert (
        merged(change(leader_recovery_state=0), leader_recovery_state=1).leader_recovery_state == 0
    )
    assert merged(change(leader_recovery_state=1)).leader_recovery_state == 1


def test_elr_fields_change_only_when_carried() -> None:
    kept = merged(change(isr=[1]), eligible_leader_replicas=[2, 3], last_known_elr=[4])
    assert kept.eligible_leader_replicas == [2, 3]
    assert kept.last_known_elr == [4]
    cleared = merged(
        change(eligible_leader_replicas=[], last_known_elr=[]),
        eligible_leader_replicas=[2, 3],
        last_known_elr=[4],
    )
    assert cleared.eligible_leader_replicas == []
    assert cleared.last_known_elr == []
    both = merged(change(leader=-1, isr=[], eligible_leader_replicas=[1, 2], last_known_elr=[3]))
    assert both == dataclasses.replace(
        BASE,
        leader=-1,
        isr=[],
        leader_epoch=5,
        partition_epoch=8,
        eligible_leader_replicas=[1, 2],
        last_known_elr=[3],
    )


def test_merge_is_also_a_method_of_the_partition() -> None:
    assert BASE.merge(change(leader=3, isr=[3])) == dataclasses.replace(
        BASE, leader=3, isr=[3], leader_epoch=5, partition_epoch=8
    )
    assert BASE.merge(change()) is not BASE
    assert PartitionImage.from_record(partition_record()) == BASE


def test_successive_changes_accumulate() -> None:
    image = with_partition()
    replay_all([change(isr=[1, 2]), change(leader=2), change(isr=[2]), change(leader=-1)], image)
    assert partition_of(image) == dataclasses.replace(
        BASE, isr=[2], leader=-1, leader_epoch=6, partition_epoch=11
    )


# Configs -------------------------------------------------------------------------


def config(resource_type: int, resource_name: str, name: str, value: str | None) -> ConfigRecord:
    return ConfigRecord(
        resource_type=resource_type, resource_name=resource_name, name=name, value=value
    )


def test_config_records_set_overwrite_and_delete_keys() -> None:
    assert (CONFIG_RESOURCE_TOPIC, CONFIG_RESOURCE_BROKER) == (2, 4)
    image = replay_all(
        [
            config(2, "foo", "cleanup.policy", "compact"),
            config(2, "foo", "retention.ms", "100"),
            config(4, "1", "log.retention.ms", "5"),
            config(4, "", "log.retention.ms", "6"),
            config(2, "foo", "retention.ms", "200"),
            config(2, "foo", "cleanup.policy", None),
        ]
    )
    assert image.configs == {
        (2, "foo"): {"retention.ms": "200"},
        (4, "1"): {"log.retention.ms": "5"},
        (4, ""): {"log.retention.ms": "6"},
    }


def test_deleting_the_last_key_removes_the_resource() -> None:
    image = replay_all([config(4, "1", "a", "1"), config(4, "1", "a", None)])
    assert image.configs == {}


def test_deleting_an_absent_key_changes_nothing_but_the_offset() -> None:
    image = replay_all(
        [config(4, "1", "a", "1"), config(4, "1", "b", None), config(2, "x", "a", None)]
    )
    assert image.configs == {(4, "1"): {"a": "1"}}
    assert image.offset == 2


def test_an_empty_string_is_a_value() -> None:
    assert replay_all([config(2, "foo", "a", "")]).configs == {(2, "foo"): {"a": ""}}


# Brokers -------------------------------------------------------------------------


def test_register_broker_builds_the_broker_image() -> None:
    image = replay_all(
        [
            register(
                broker_id=3,
                epoch=21,
                end_points=[
                    BrokerEndpoint(name="PLAINTEXT", host="h3", port=9092, security_protocol=0),
                    BrokerEndpoint(name="SSL", host="h3", port=9093, security_protocol=1),
                ],
                rack="r1",
                fenced=True,
                in_controlled_shutdown=False,
                log_dirs=[D3, D1, D2],
            )
        ]
    )
    assert image.brokers == {
        3: BrokerImage(
            broker_id=3,
            incarnation_id=INC_A,
            epoch=21,
            endpoints=[
                Endpoint("PLAINTEXT", "h3", 9092, 0),
                Endpoint("SSL", "h3", 9093, 1),
            ],
            rack="r1",
            fenced=True,
            in_controlled_shutdown=False,
            log_dirs=[D1, D2, D3],
        )
    }
    assert image.brokers[3].endpoints[0] == ("PLAINTEXT", "h3", 9092, 0)


def test_a_repeated_listener_name_keeps_the_last_endpoint() -> None:
    image = replay_all(
        [
            register(
                end_points=[
                    BrokerEndpoint(name="A", host="old", port=1),
                    BrokerEndpoint(name="B", host="b", port=2),
                    BrokerEndpoint(name="A", host="new", port=3),
                ]
            )
        ]
    )
    assert image.brokers[1].endpoints == [Endpoint("A", "new", 3, 0), Endpoint("B", "b", 2, 0)]


def test_a_new_incarnation_replaces_the_registration() -> None:
    image = replay_all(
        [
            register(epoch=10, rack="r1", fenced=False, log_dirs=[D1]),
            BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, in_controlled_shutdown=1),
            register(epoch=15, incarnation=INC_B, rack=None, fenced=True),
        ]
    )
    assert image.brokers == {
        1: BrokerImage(
            broker_id=1,
            incarnation_id=INC_B,
            epoch=15,
            endpoints=[],
            rack=None,
            fenced=True,
            in_controlled_shutdown=False,
            log_dirs=[],
        )
    }


def test_unregister_removes_the_broker() -> None:
    image = replay_all(
        [
            register(broker_id=1, epoch=10),
            register(broker_id=2, epoch=11),
            UnregisterBrokerRecord(broker_id=1, broker_epoch=10),
        ]
    )
    assert list(image.brokers) == [2]


def test_fence_and_unfence_change_only_fenced() -> None:
    image = replay_all([register(epoch=10, fenced=True, in_controlled_shutdown=True)])
    before = image.brokers[1]
    replay_all([UnfenceBrokerRecord(id=1, epoch=10)], image)
    assert image.brokers[1] == dataclasses.replace(before, fenced=False)
    replay_all([FenceBrokerRecord(id=1, epoch=10)], image)
    assert image.brokers[1] == before


@pytest.mark.parametrize(
    ("fenced", "in_controlled_shutdown", "start", "expected"),
    [
        (0, 0, (True, False), (True, False)),
        (-1, 0, (True, False), (False, False)),
        (1, 0, (False, False), (True, False)),
        (0, 1, (False, False), (False, True)),
        (1, 1, (False, False), (True, True)),
        (-1, 0, (False, True), (False, True)),
        (0, 0, (False, True), (False, True)),
    ],
)
def test_registration_change_tri_states(
    fenced: int,
    in_controlled_shutdown: int,
    start: tuple[bool, bool],
    expected: tuple[bool, bool],
) -> None:
    image = replay_all(
        [register(epoch=10, fenced=start[0], in_controlled_shutdown=start[1], log_dirs=[D1])]
    )
    replay_all(
        [
            BrokerRegistrationChangeRecord(
                broker_id=1,
                broker_epoch=10,
                fenced=fenced,
                in_controlled_shutdown=in_controlled_shutdown,
            )
        ],
        image,
    )
    broker = image.brokers[1]
    assert (broker.fenced, broker.in_controlled_shutdown) == expected
    assert broker.log_dirs == [D1]
    assert broker.epoch == 10


def test_registration_change_replaces_log_dirs_when_it_carries_some() -> None:
    image = replay_all([register(epoch=10, log_dirs=[D1, D2])])
    replay_all(
        [BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, log_dirs=[D3, D1])], image
    )
    assert image.brokers[1].log_dirs == [D1, D3]


# Features, producer ids, no-ops and unmodelled records --------------------------


def test_feature_levels_are_set_and_level_zero_removes() -> None:
    image = replay_all(
        [
            FeatureLevelRecord(name="metadata.version", feature_level=20),
            FeatureLevelRecord(name="group.version", feature_level=1),
            FeatureLevelRecord(name="transaction.version", feature_level=2),
            FeatureLevelRecord(name="metadata.version", feature_level=21),
            FeatureLevelRecord(name="group.version", feature_level=0),
            FeatureLevelRecord(name="never.set", feature_level=0),
        ]
    )
    assert image.features == {"metadata.version": 21, "transaction.version": 2}


def test_producer_ids_record_sets_the_next_producer_id() -> None:
    image = replay_all(
        [
            ProducerIdsRecord(broker_id=1, broker_epoch=5, next_producer_id=1000),
            ProducerIdsRecord(broker_id=2, broker_epoch=6, next_producer_id=2000),
        ]
    )
    assert image.next_producer_id == 2000


def test_a_no_op_record_only_moves_the_offset() -> None:
    image = with_partition()
    expected = image.copy()
    image.replay(NoOpRecord(), 17)
    expected.offset = 17
    assert image == expected


@pytest.mark.parametrize("cls", UNMODELLED_RECORDS, ids=lambda c: c.NAME)
def test_unmodelled_records_only_move_the_offset(cls: Any) -> None:
    image = with_partition()
    expected = image.copy()
    image.replay(cls(), 5)
    expected.offset = 5
    assert image == expected


def test_every_metadata_record_type_is_either_modelled_or_listed() -> None:
    modelled = {
        TopicRecord,
        PartitionRecord,
        PartitionChangeRecord,
        RemoveTopicRecord,
        ConfigRecord,
        RegisterBrokerRecord,
        UnregisterBrokerRecord,
        FenceBrokerRecord,
        UnfenceBrokerRecord,
        BrokerRegistrationChangeRecord,
        FeatureLevelRecord,
        ProducerIdsRecord,
        UserScramCredentialRecord,
        RemoveUserScramCredentialRecord,
        AccessControlEntryRecord,
        RemoveAccessControlEntryRecord,
        ClientQuotaRecord,
        NoOpRecord,
    }
    assert modelled | set(UNMODELLED_RECORDS) == set(RECORDS.values())
    assert not modelled & set(UNMODELLED_RECORDS)


# SCRAM credentials ------------------------------------------------------------------


def scram(
    name: str, mechanism: int = 2, iterations: int = 4096, salt: bytes = b"salt"
) -> UserScramCredentialRecord:
    return UserScramCredentialRecord(
        name=name,
        mechanism=mechanism,
        salt=salt,
        stored_key=b"stored-" + name.encode(),
        server_key=b"server-" + name.encode(),
        iterations=iterations,
    )


def test_a_scram_credential_is_kept_by_mechanism_and_user_and_replaced_whole() -> None:
    image = replay_all([scram("alice"), scram("alice", mechanism=1), scram("bob")])
    assert image.scram_credentials[2, "alice"] == ScramCredential(
        salt=b"salt", stored_key=b"stored-alice", server_key=b"server-alice", iterations=4096
    )
    assert sorted(image.scram_credentials) == [(1, "alice"), (2, "alice"), (2, "bob")]
    # A second record for the same user and mechanism is the new password: the old
    # salt and keys are gone, so the old password stops working.
    image.replay(scram("alice", iterations=8192, salt=b"new"), image.offset + 1)
    assert image.scram_credentials[2, "alice"].salt == b"new"
    assert image.scram_credentials[2, "alice"].iterations == 8192
    assert image.scram_credentials[1, "alice"].iterations == 4096


def test_removing_a_credential_leaves_the_users_other_mechanisms() -> None:
    image = replay_all([scram("alice"), scram("alice", mechanism=1)])
    image.replay(RemoveUserScramCredentialRecord(name="alice", mechanism=2), 5)
    assert list(image.scram_credentials) == [(1, "alice")]
    assert image.offset == 5


@pytest.mark.parametrize(
    "removal",
    [
        RemoveUserScramCredentialRecord(name="bob", mechanism=2),
        RemoveUserScramCredentialRecord(name="alice", mechanism=1),
    ],
    ids=["other-user", "other-mechanism"],
)
def test_removing_a_credential_that_does_not_exist_is_an_invariant_error(
    removal: RemoveUserScramCredentialRecord,
) -> None:
    image = replay_all([scram("alice")])
    before = image.copy()
    with pytest.raises(InvariantError, match="has no credential for SCRAM mechanism"):
        image.replay(removal, 40)
    assert image == before


def test_a_credentials_keys_stay_out_of_its_repr() -> None:
    image = replay_all([scram("alice")])
    text = repr(image.scram_credentials)
    assert "stored-alice" not in text and "server-alice" not in text
    assert "iterations=4096" in text


# ACLs ------------------------------------------------------------------------------

ACL_1 = uuid.UUID(int=0xAC1)
ACL_2 = uuid.UUID(int=0xAC2)


def acl(
    acl_id: uuid.UUID = ACL_1,
    resource_name: str = "foo",
    principal: str = "User:alice",
    operation: int = 3,
    permission: int = 3,
) -> AccessControlEntryRecord:
    """An ACL record: ALLOW (3) READ (3) on the literal (3) topic (2) ``resource_name``."""
    return AccessControlEntryRecord(
        id=acl_id,
        resource_type=2,
        resource_name=resource_name,
        pattern_type=3,
        principal=principal,
        host="*",
        operation=operation,
        permission_type=permission,
    )


def test_an_acl_is_kept_by_id_as_its_record() -> None:
    image = replay_all([acl(ACL_1), acl(ACL_2, resource_name="bar", permission=2)])
    assert image.acls == {ACL_1: acl(ACL_1), ACL_2: acl(ACL_2, resource_name="bar", permission=2)}
    # Two ids may hold the same binding: the controller never writes that (CreateAcls
    # skips a binding it has), but the image, like Kafka's, keeps whatever the log says.
    image.replay(acl(uuid.UUID(int=3)), image.offset + 1)
    assert len(image.acls) == 3


def test_an_acl_record_for_an_id_already_present_replaces_it() -> None:
    # Kafka's AclControlManager.replay and AclsDelta both put the ACL under its id.
    image = replay_all([acl(ACL_1), acl(ACL_2)])
    image.replay(acl(ACL_1, operation=4), image.offset + 1)
    assert image.acls == {ACL_1: acl(ACL_1, operation=4), ACL_2: acl(ACL_2)}


def test_removing_an_acl_leaves_the_others() -> None:
    image = replay_all([acl(ACL_1), acl(ACL_2)])
    image.replay(RemoveAccessControlEntryRecord(id=ACL_1), 9)
    assert image.acls == {ACL_2: acl(ACL_2)}
    assert image.offset == 9


def test_removing_an_acl_that_does_not_exist_is_an_invariant_error() -> None:
    image = replay_all([acl(ACL_1)])
    before = image.copy()
    held = image.acls
    with pytest.raises(
        InvariantError, match=f"RemoveAccessControlEntryRecord at offset 40: no ACL with id {ACL_2}"
    ):
        image.replay(RemoveAccessControlEntryRecord(id=ACL_2), 40)
    assert image == before
    assert image.acls is held


def test_the_acls_mapping_is_replaced_exactly_when_an_acl_changes() -> None:
    # The authorizer caches its index on the identity of image.acls.
    image = replay_all([TopicRecord(name="foo", topic_id=FOO), acl(ACL_1)])
    held = image.acls
    replay_all(
        [partition_record(), config(2, "foo", "a", "1"), register(), scram("alice"), NoOpRecord()],
        image,
    )
    assert image.acls is held
    image.replay(acl(ACL_2), image.offset + 1)
    assert image.acls is not held
    # The mapping a reader held is never changed in place.
    assert held == {ACL_1: acl(ACL_1)}
    added = image.acls
    image.replay(RemoveAccessControlEntryRecord(id=ACL_1), image.offset + 1)
    assert image.acls is not added
    assert added == {ACL_1: acl(ACL_1), ACL_2: acl(ACL_2)}
    assert image.acls == {ACL_2: acl(ACL_2)}


def test_a_copy_shares_the_acls_until_one_side_changes_them() -> None:
    original = replay_all([acl(ACL_1)])
    duplicate = original.copy()
    assert duplicate.acls is original.acls
    duplicate.replay(acl(ACL_2), duplicate.offset + 1)
    assert original.acls == {ACL_1: acl(ACL_1)}
    assert duplicate.acls == {ACL_1: acl(ACL_1), ACL_2: acl(ACL_2)}
    original.replay(RemoveAccessControlEntryRecord(id=ACL_1), original.offset + 1)
    assert original.acls == {}
    assert duplicate.acls == {ACL_1: acl(ACL_1), ACL_2: acl(ACL_2)}


# Client quotas --------------------------------------------------------------------


def quota(
    entity: list[tuple[str, str | None]], key: str, value: float = 0.0, remove: bool = False
) -> ClientQuotaRecord:
    return ClientQuotaRecord(
        entity=[QuotaEntityData(entity_type=t, entity_name=n) for t, n in entity],
        key=key,
        value=value,
        remove=remove,
    )


ALICE_APP = (("client-id", "app"), ("user", "alice"))


def test_a_client_quota_is_kept_by_sorted_entity_and_key() -> None:
    image = replay_all(
        [
            quota([("user", "alice"), ("client-id", "app")], "producer_byte_rate", 1024),
            quota([("client-id", "app"), ("user", "alice")], "consumer_byte_rate", 2048),
            quota([("user", None)], "request_percentage", 50),
            quota([("user", None)], "request_percentage", 75),
        ]
    )
    assert image.client_quotas == {
        ALICE_APP: {"producer_byte_rate": 1024, "consumer_byte_rate": 2048},
        (("user", None),): {"request_percentage": 75},
    }


def test_removing_the_last_key_removes_the_entity_and_a_missing_key_is_ignored() -> None:
    image = replay_all(
        [
            quota([("user", "alice")], "producer_byte_rate", 1),
            quota([("user", "alice")], "consumer_byte_rate", 2),
        ]
    )
    held = image.client_quotas
    image.replay(quota([("user", "alice")], "request_percentage", remove=True), 10)
    image.replay(quota([("user", "bob")], "request_percentage", remove=True), 11)
    assert image.client_quotas is held  # nothing changed, nothing replaced
    image.replay(quota([("user", "alice")], "producer_byte_rate", remove=True), 12)
    assert image.client_quotas == {(("user", "alice"),): {"consumer_byte_rate": 2}}
    image.replay(quota([("user", "alice")], "consumer_byte_rate", remove=True), 13)
    assert image.client_quotas == {}
    assert image.offset == 13


def test_a_type_named_twice_keeps_its_last_name_as_kafkas_map_does() -> None:
    image = replay_all([quota([("user", "a"), ("user", "b")], "producer_byte_rate", 1)])
    assert image.client_quotas == {(("user", "b"),): {"producer_byte_rate": 1}}


def test_client_quotas_are_copy_on_write_and_shared_by_copies() -> None:
    original = replay_all([quota([("user", "alice")], "producer_byte_rate", 1)])
    held = original.client_quotas
    inner = held[(("user", "alice"),)]
    duplicate = original.copy()
    assert duplicate.client_quotas is held
    duplicate.replay(quota([("user", "alice")], "producer_byte_rate", 2), duplicate.offset + 1)
    assert duplicate.client_quotas is not held
    assert held == {(("user", "alice"),): {"producer_byte_rate": 1}}
    assert inner == {"producer_byte_rate": 1}
    assert original.client_quotas is held
    original.replay(NoOpRecord(), original.offset + 1)
    assert original.client_quotas is held


# Offsets -------------------------------------------------------------------------


def test_offsets_may_skip_but_must_increase() -> None:
    image = MetadataImage()
    image.replay(NoOpRecord(), 0)
    image.replay(NoOpRecord(), 5)
    assert image.offset == 5
    with pytest.raises(InvariantError, match="NoOpRecord at offset 5: offsets must increase"):
        image.replay(NoOpRecord(), 5)
    with pytest.raises(InvariantError, match="offset 3"):
        image.replay(TopicRecord(name="foo", topic_id=FOO), 3)
    assert image == replay_all([NoOpRecord()], MetadataImage(offset=4))


# Contradictions ------------------------------------------------------------------


def _setup() -> MetadataImage:
    return replay_all(
        [
            TopicRecord(name="foo", topic_id=FOO),
            partition_record(),
            register(broker_id=1, epoch=10),
            ProducerIdsRecord(next_producer_id=1000),
        ]
    )


CONTRADICTIONS = [
    pytest.param(TopicRecord(name="foo2", topic_id=FOO), "topic id", id="topic-id-exists"),
    pytest.param(TopicRecord(name="foo", topic_id=BAR), "topic 'foo' already", id="name-exists"),
    pytest.param(partition_record(topic_id=BAR), "no topic with id", id="partition-no-topic"),
    pytest.param(
        partition_record(directories=[D1]), "1 directories for 3 replicas", id="partition-dirs"
    ),
    pytest.param(
        partition_record(leader_recovery_state=2), "leader recovery state 2", id="partition-lrs"
    ),
    pytest.param(
        PartitionChangeRecord(topic_id=BAR, partition_id=0, leader=2),
        "no topic with id",
        id="change-no-topic",
    ),
    pytest.param(
        PartitionChangeRecord(topic_id=FOO, partition_id=1, leader=2),
        "topic 'foo' has no partition 1",
        id="change-no-partition",
    ),
    pytest.param(
        change(directories=[D1, D2]), "2 directories for 3 replicas", id="change-dirs-only"
    ),
    pytest.param(
        change(replicas=[1, 2], directories=[D1, D2, D3]),
        "3 directories for 2 replicas",
        id="change-dirs-and-replicas",
    ),
    pytest.param(change(replicas=[]), "3 directories for 0 replicas", id="change-no-replicas"),
    pytest.param(change(leader_recovery_state=3), "leader recovery state 3", id="change-lrs"),
    pytest.param(RemoveTopicRecord(topic_id=BAR), "no topic with id", id="remove-unknown"),
    pytest.param(
        UnregisterBrokerRecord(broker_id=2, broker_epoch=10), "not registered", id="unregister"
    ),
    pytest.param(
        UnregisterBrokerRecord(broker_id=1, broker_epoch=9),
        "broker 1 has epoch 10, the record says 9",
        id="unregister-epoch",
    ),
    pytest.param(FenceBrokerRecord(id=2, epoch=10), "broker 2 is not registered", id="fence"),
    pytest.param(FenceBrokerRecord(id=1, epoch=11), "has epoch 10", id="fence-epoch"),
    pytest.param(UnfenceBrokerRecord(id=7, epoch=10), "not registered", id="unfence"),
    pytest.param(UnfenceBrokerRecord(id=1, epoch=1), "has epoch 10", id="unfence-epoch"),
    pytest.param(
        BrokerRegistrationChangeRecord(broker_id=3, broker_epoch=10),
        "not registered",
        id="change-broker",
    ),
    pytest.param(
        BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=12),
        "has epoch 10",
        id="change-broker-epoch",
    ),
    pytest.param(
        BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=2),
        "unknown value 2 for fenced",
        id="change-broker-fenced",
    ),
    pytest.param(
        BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, in_controlled_shutdown=-1),
        "unknown value -1 for in_controlled_shutdown",
        id="change-broker-shutdown",
    ),
    pytest.param(
        FeatureLevelRecord(name="metadata.version", feature_level=0),
        "metadata.version cannot be 0",
        id="metadata-version-0",
    ),
    pytest.param(
        ProducerIdsRecord(next_producer_id=1000), "is not above the current 1000", id="pid-equal"
    ),
    pytest.param(ProducerIdsRecord(next_producer_id=5), "is not above", id="pid-backwards"),
    pytest.param("TopicRecord", "not a metadata record", id="not-a-record"),
]


@pytest.mark.parametrize(("record", "message"), CONTRADICTIONS)
def test_a_contradiction_is_an_invariant_error_and_changes_nothing(
    record: object, message: str
) -> None:
    image = _setup()
    before = image.copy()
    with pytest.raises(InvariantError) as raised:
        image.replay(record, 40)
    text = str(raised.value)
    assert text.startswith(f"{type(record).__name__} at offset 40: ")
    assert message in text
    assert image == before
    # The image stays usable: the next good record applies at the same offset.
    image.replay(NoOpRecord(), 40)
    assert image.offset == 40


def test_the_partition_merge_refuses_repeated_replicas_when_it_must_map_directories() -> None:
    image = with_partition(replicas=[1, 1], isr=[1], directories=[D1, D2])
    with pytest.raises(InvariantError, match="repeat a broker"):
        image.replay(change(replicas=[1, 2]), 9)
    # Changes that do not need the mapping still apply.
    image.replay(change(isr=[]), 9)
    assert partition_of(image).isr == []


# copy() --------------------------------------------------------------------------


def _full_image() -> MetadataImage:
    return replay_all(
        [
            TopicRecord(name="foo", topic_id=FOO),
            TopicRecord(name="bar", topic_id=BAR),
            partition_record(),
            partition_record(partition_id=1),
            config(2, "foo", "a", "1"),
            config(4, "1", "b", "2"),
            register(broker_id=1, epoch=10, log_dirs=[D1]),
            FeatureLevelRecord(name="metadata.version", feature_level=20),
            ProducerIdsRecord(next_producer_id=1000),
            scram("alice"),
            acl(ACL_1),
        ]
    )


MUTATIONS: list[Any] = [
    pytest.param([change(leader=2, isr=[2])], id="partition-change"),
    pytest.param([partition_record(partition_id=5)], id="partition-add"),
    pytest.param(
        [partition_record(partition_id=1, replicas=[9], isr=[9], directories=[])],
        id="partition-replace",
    ),
    pytest.param([RemoveTopicRecord(topic_id=FOO)], id="remove-topic"),
    pytest.param([TopicRecord(name="baz", topic_id=uuid.UUID(int=7))], id="add-topic"),
    pytest.param([config(2, "foo", "a", "changed")], id="config-set"),
    pytest.param([config(2, "foo", "z", "new")], id="config-add-key"),
    pytest.param([config(4, "1", "b", None)], id="config-delete"),
    pytest.param([register(broker_id=2)], id="broker-add"),
    pytest.param([FenceBrokerRecord(id=1, epoch=10)], id="broker-fence"),
    pytest.param(
        [BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, log_dirs=[D2])],
        id="broker-dirs",
    ),
    pytest.param([UnregisterBrokerRecord(broker_id=1, broker_epoch=10)], id="broker-remove"),
    pytest.param([FeatureLevelRecord(name="metadata.version", feature_level=21)], id="feature"),
    pytest.param([ProducerIdsRecord(next_producer_id=2000)], id="producer-ids"),
    pytest.param([scram("alice", iterations=8192)], id="scram-replace"),
    pytest.param([scram("bob")], id="scram-add"),
    pytest.param([RemoveUserScramCredentialRecord(name="alice", mechanism=2)], id="scram-remove"),
    pytest.param([acl(ACL_2)], id="acl-add"),
    pytest.param([acl(ACL_1, operation=4)], id="acl-replace"),
    pytest.param([RemoveAccessControlEntryRecord(id=ACL_1)], id="acl-remove"),
]


@pytest.mark.parametrize("records", MUTATIONS)
def test_replaying_on_a_copy_leaves_the_original_alone(records: list[object]) -> None:
    original = _full_image()
    reference = _full_image()
    duplicate = original.copy()
    assert duplicate == original
    replay_all(records, duplicate)
    assert duplicate != original
    assert original == reference
    assert original.topics_by_name["foo"] is original.topics_by_id[FOO]


@pytest.mark.parametrize("records", MUTATIONS)
def test_replaying_on_the_original_leaves_a_copy_alone(records: list[object]) -> None:
    original = _full_image()
    duplicate = original.copy()
    replay_all(records, original)
    assert duplicate == _full_image()


def test_a_copy_keeps_name_and_id_maps_pointing_at_the_same_topics() -> None:
    duplicate = _full_image().copy()
    for name, topic in duplicate.topics_by_name.items():
        assert duplicate.topics_by_id[topic.topic_id] is topic
        assert topic.name == name
    replay_all([partition_record(partition_id=3)], duplicate)
    assert 3 in duplicate.topics_by_name["foo"].partitions


# Random logs ---------------------------------------------------------------------

_NAMES = st.text("abc", min_size=1, max_size=2)
_BROKER_IDS = st.integers(0, 4)
_DIRS = st.sampled_from([D1, D2, D3, UNASSIGNED_DIRECTORY, LOST_DIRECTORY])


def _replica_lists(min_size: int = 1) -> st.SearchStrategy[list[int]]:
    return st.lists(_BROKER_IDS, min_size=min_size, max_size=3, unique=True)


def _optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


def _new_partition(draw: st.DrawFn, image: MetadataImage) -> PartitionRecord:
    replicas = draw(_replica_lists())
    with_dirs = draw(st.booleans())
    return PartitionRecord(
        partition_id=draw(st.integers(0, 2)),
        topic_id=draw(st.sampled_from(sorted(image.topics_by_id))),
        replicas=replicas,
        isr=draw(st.lists(st.sampled_from(replicas), unique=True)),
        removing_replicas=draw(st.lists(st.sampled_from(replicas), unique=True, max_size=1)),
        adding_replicas=draw(st.lists(_BROKER_IDS, unique=True, max_size=1)),
        leader=draw(st.sampled_from([-1, *replicas])),
        leader_recovery_state=draw(st.sampled_from([0, 1])),
        leader_epoch=draw(st.integers(0, 5)),
        partition_epoch=draw(st.integers(0, 5)),
        directories=[draw(_DIRS) for _ in replicas] if with_dirs else [],
        eligible_leader_replicas=draw(_optional(st.lists(_BROKER_IDS, max_size=2))),
        last_known_elr=draw(_optional(st.lists(_BROKER_IDS, max_size=2))),
    )


def _partition_change(draw: st.DrawFn, image: MetadataImage) -> PartitionChangeRecord:
    choices = sorted(
        (topic_id, index)
        for topic_id, topic in image.topics_by_id.items()
        for index in topic.partitions
    )
    topic_id, index = draw(st.sampled_from(choices))
    current = image.topics_by_id[topic_id].partitions[index]
    replicas = draw(_optional(_replica_lists()))
    final_count = len(current.replicas if replicas is None else replicas)
    directories = draw(st.sampled_from([None, [], [draw(_DIRS) for _ in range(final_count)]]))
    return PartitionChangeRecord(
        partition_id=index,
        topic_id=topic_id,
        isr=draw(_optional(st.lists(_BROKER_IDS, unique=True, max_size=3))),
        leader=draw(st.integers(-2, 4)),
        replicas=replicas,
        removing_replicas=draw(_optional(st.lists(_BROKER_IDS, unique=True, max_size=1))),
        adding_replicas=draw(_optional(st.lists(_BROKER_IDS, unique=True, max_size=1))),
        leader_recovery_state=draw(st.sampled_from([-1, 0, 1])),
        directories=directories,
        eligible_leader_replicas=draw(_optional(st.lists(_BROKER_IDS, max_size=2))),
        last_known_elr=draw(_optional(st.lists(_BROKER_IDS, max_size=2))),
    )


def _remove_topic(draw: st.DrawFn, image: MetadataImage) -> object:
    return RemoveTopicRecord(topic_id=draw(st.sampled_from(sorted(image.topics_by_id))))


def _new_broker(draw: st.DrawFn, image: MetadataImage) -> RegisterBrokerRecord:
    endpoints = draw(
        st.lists(
            st.builds(
                BrokerEndpoint,
                name=st.sampled_from(["PLAINTEXT", "SSL"]),
                host=st.sampled_from(["a", "b"]),
                port=st.integers(1, 3),
                security_protocol=st.sampled_from([0, 1]),
            ),
            max_size=2,
        )
    )
    return RegisterBrokerRecord(
        broker_id=draw(_BROKER_IDS),
        incarnation_id=draw(st.sampled_from([INC_A, INC_B])),
        broker_epoch=draw(st.integers(0, 100)),
        end_points=endpoints,
        rack=draw(st.sampled_from([None, "r1", "r2"])),
        fenced=draw(st.booleans()),
        in_controlled_shutdown=draw(st.booleans()),
        log_dirs=draw(st.lists(_DIRS, unique=True, max_size=2)),
    )


def _broker_record(draw: st.DrawFn, image: MetadataImage) -> object:
    broker = image.brokers[draw(st.sampled_from(sorted(image.brokers)))]
    kind = draw(st.sampled_from(["unregister", "fence", "unfence", "change"]))
    if kind == "unregister":
        return UnregisterBrokerRecord(broker_id=broker.broker_id, broker_epoch=broker.epoch)
    if kind == "fence":
        return FenceBrokerRecord(id=broker.broker_id, epoch=broker.epoch)
    if kind == "unfence":
        return UnfenceBrokerRecord(id=broker.broker_id, epoch=broker.epoch)
    return BrokerRegistrationChangeRecord(
        broker_id=broker.broker_id,
        broker_epoch=broker.epoch,
        fenced=draw(st.sampled_from([-1, 0, 1])),
        in_controlled_shutdown=draw(st.sampled_from([0, 1])),
        log_dirs=draw(st.lists(_DIRS, unique=True, max_size=2)),
    )


def _unmodelled(draw: st.DrawFn, image: MetadataImage) -> object:
    cls: Any = draw(st.sampled_from(UNMODELLED_RECORDS))
    record: object = draw(message_value(cls, cls.VALID_VERSIONS[1]))
    return record


def _scram_record(draw: st.DrawFn, image: MetadataImage) -> object:
    remove = bool(image.scram_credentials) and draw(st.booleans())
    if remove:
        mechanism, name = draw(st.sampled_from(sorted(image.scram_credentials)))
        return RemoveUserScramCredentialRecord(name=name, mechanism=mechanism)
    return UserScramCredentialRecord(
        name=draw(st.sampled_from(["alice", "bob", ""])),
        mechanism=draw(st.sampled_from([1, 2])),
        salt=draw(st.binary(max_size=4)),
        stored_key=draw(st.binary(max_size=4)),
        server_key=draw(st.binary(max_size=4)),
        iterations=draw(st.integers(4096, 16384)),
    )


def _acl_record(draw: st.DrawFn, image: MetadataImage) -> object:
    remove = bool(image.acls) and draw(st.booleans())
    if remove:
        return RemoveAccessControlEntryRecord(id=draw(st.sampled_from(sorted(image.acls))))
    # A few ids, so that some records replace an ACL already there; codes past Kafka's
    # (a newer writer's) are stored as they are.
    return AccessControlEntryRecord(
        id=uuid.UUID(int=draw(st.integers(1, 6))),
        resource_type=draw(st.integers(0, 8)),
        resource_name=draw(st.sampled_from(["foo", "fo", "*", "kafka-cluster"])),
        pattern_type=draw(st.integers(0, 5)),
        principal=draw(st.sampled_from(["User:alice", "User:*", "Group:ops"])),
        host=draw(st.sampled_from(["*", "10.0.0.1"])),
        operation=draw(st.integers(0, 15)),
        permission_type=draw(st.integers(0, 4)),
    )


def _quota_record(draw: st.DrawFn, image: MetadataImage) -> object:
    types = draw(st.lists(st.sampled_from(["user", "client-id", "ip"]), unique=True, max_size=2))
    return ClientQuotaRecord(
        entity=[
            QuotaEntityData(entity_type=t, entity_name=draw(st.sampled_from([None, "a", "b"])))
            for t in types
        ],
        key=draw(st.sampled_from(["producer_byte_rate", "request_percentage"])),
        value=draw(st.floats(0, 1e6, allow_nan=False)),
        remove=draw(st.booleans()),
    )


def _new_topic(draw: st.DrawFn, image: MetadataImage) -> object:
    name = draw(_NAMES)
    topic_id = uuid.UUID(int=draw(st.integers(1, 12)))
    if name in image.topics_by_name or topic_id in image.topics_by_id:
        return NoOpRecord()
    return TopicRecord(name=name, topic_id=topic_id)


def _other(draw: st.DrawFn, image: MetadataImage) -> object:
    kind = draw(st.sampled_from(["config", "feature", "producer", "noop"]))
    if kind == "config":
        return ConfigRecord(
            resource_type=draw(st.sampled_from([2, 4])),
            resource_name=draw(_NAMES | st.sampled_from(["0", "1", ""])),
            name=draw(st.sampled_from(["k1", "k2"])),
            value=draw(st.none() | st.sampled_from(["", "v1", "v2"])),
        )
    if kind == "feature":
        name = draw(st.sampled_from(["metadata.version", "group.version", "kraft.version"]))
        low = 1 if name == "metadata.version" else 0
        return FeatureLevelRecord(name=name, feature_level=draw(st.integers(low, 3)))
    if kind == "producer":
        return ProducerIdsRecord(
            next_producer_id=image.next_producer_id + draw(st.integers(1, 1000))
        )
    return NoOpRecord()


Builder = Callable[[st.DrawFn, MetadataImage], object]


@st.composite
def valid_logs(draw: st.DrawFn, max_records: int = 40) -> list[tuple[object, int]]:
    """A random log of records, each consistent with the image of the ones before it.

    The generator tracks the image by replaying what it has drawn, so it only names
    topics, partitions and brokers (and their epochs) that exist at that point.
    """
    image = MetadataImage()
    log: list[tuple[object, int]] = []
    for _ in range(draw(st.integers(0, max_records))):
        builders: list[Builder] = [
            _new_topic,
            _new_broker,
            _other,
            _unmodelled,
            _scram_record,
            _acl_record,
            _quota_record,
        ]
        if image.topics_by_id:
            builders += [_new_partition, _remove_topic]
        if any(topic.partitions for topic in image.topics_by_id.values()):
            builders += [_partition_change, _partition_change]
        if image.brokers:
            builders.append(_broker_record)
        record = draw(st.sampled_from(builders))(draw, image)
        offset = image.offset + draw(st.integers(1, 3))
        image.replay(record, offset)
        log.append((record, offset))
    return log


def replay_log(
    log: Sequence[tuple[object, int]], image: MetadataImage | None = None
) -> MetadataImage:
    image = MetadataImage() if image is None else image
    for record, offset in log:
        image.replay(record, offset)
    return image


def assert_consistent(image: MetadataImage) -> None:
    assert len(image.topics_by_name) == len(image.topics_by_id)
    for name, topic in image.topics_by_name.items():
        assert topic.name == name
        assert image.topics_by_id[topic.topic_id] is topic
        for partition in topic.partitions.values():
            assert len(partition.directories) == len(partition.replicas)
    assert all(values for values in image.configs.values())
    assert all(values for values in image.client_quotas.values())
    assert all(level != 0 for level in image.features.values())


LOG_SETTINGS = settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])


@LOG_SETTINGS
@given(valid_logs())
def test_replay_is_deterministic(log: list[tuple[object, int]]) -> None:
    first = replay_log(log)
    second = replay_log(log)
    assert first == second
    assert first.offset == (log[-1][1] if log else -1)
    assert_consistent(first)


@LOG_SETTINGS
@given(valid_logs(), st.data())
def test_a_prefix_then_the_rest_on_a_copy_equals_the_whole_log(
    log: list[tuple[object, int]], data: st.DataObject
) -> None:
    split = data.draw(st.integers(0, len(log)), label="split")
    whole = replay_log(log)
    prefix = replay_log(log[:split])
    continued = replay_log(log[split:], prefix.copy())
    assert continued == whole
    # The copy's replay did not leak into the image it was copied from.
    assert prefix == replay_log(log[:split])
    assert_consistent(continued)


@LOG_SETTINGS
@given(valid_logs())
def test_records_read_back_from_their_bytes_give_the_same_image(
    log: list[tuple[object, int]],
) -> None:
    decoded = [
        (decode_metadata_record(encode_metadata_record(cast(MetadataRecord, record)))[0], offset)
        for record, offset in log
    ]
    assert replay_log(decoded) == replay_log(log)


_ANY_RECORD = st.sampled_from(sorted(RECORDS.values(), key=lambda c: c.API_KEY)).flatmap(
    lambda cls: message_value(cls, cls.VALID_VERSIONS[1])
)


@LOG_SETTINGS
@given(valid_logs(max_records=20), st.lists(_ANY_RECORD, max_size=10))
def test_arbitrary_records_either_apply_or_change_nothing(
    log: list[tuple[object, int]], noise: list[object]
) -> None:
    first = replay_log(log)
    second = first.copy()
    for record in noise:
        offset = first.offset + 1
        before = first.copy()
        try:
            first.replay(record, offset)
        except InvariantError:
            assert first == before
            with pytest.raises(InvariantError):
                second.replay(record, offset)
        else:
            second.replay(record, offset)
        assert first == second
        assert_consistent(first)
