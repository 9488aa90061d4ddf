"""Every API checks Kafka's operation on Kafka's resource: what a principal without the
ACL gets, and that a topic it may not describe leaks nowhere."""

from __future__ import annotations

import uuid
from typing import Any

from odradek.broker import fetch, list_offsets, produce, topics
from odradek.broker.authorization import Authorization, authorization_from
from odradek.broker.cluster_rules import CLUSTER_RULES, guard_routes
from odradek.broker.effects import Reply
from odradek.broker.handlers import broker_routes
from odradek.broker.router import Request
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    FetchRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)
from odradek.protocol.messages import create_topics_request as ct
from odradek.protocol.messages import fetch_request as fr
from odradek.protocol.messages import list_offsets_request as lo
from odradek.protocol.messages import metadata_request as mr
from odradek.protocol.messages import produce_request as pr
from odradek.protocol.metadata import AccessControlEntryRecord
from odradek.security.acls import AclOperation, AclPermission, PatternType, ResourceType
from odradek.security.principal import KafkaPrincipal
from tests.broker.harness import Harness, batch, new_harness

ALICE = KafkaPrincipal("User", "alice")


def _acl(
    name: str,
    operation: AclOperation,
    resource_type: ResourceType = ResourceType.TOPIC,
    permission: AclPermission = AclPermission.ALLOW,
    pattern: PatternType = PatternType.LITERAL,
) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        id=uuid.uuid4(),
        resource_type=resource_type,
        resource_name=name,
        pattern_type=pattern,
        principal="User:alice",
        host="*",
        operation=operation,
        permission_type=permission,
    )


def _harness(*acls: AccessControlEntryRecord) -> Harness:
    h = new_harness()
    h.state.authorization = Authorization(frozenset({"User:admin"}), False)
    h.add_topic("visible")
    h.add_topic("secret")
    h.replay(list(acls))
    return h


def _as(api_key: int, version: int, who: KafkaPrincipal = ALICE) -> Request:
    return Request(api_key, version, 7, "test", principal=who, host="10.0.0.1")


def test_no_authorizer_configured_means_none_and_an_unknown_one_is_refused() -> None:
    assert authorization_from("", "", False) is None
    made = authorization_from(
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "User:a;User:b", True
    )
    assert made is not None and made.super_users == {"User:a", "User:b"}
    try:
        authorization_from("kafka.security.authorizer.AclAuthorizer", "", False)
    except Exception as e:
        assert "authorizer.class.name" in str(e)
    else:
        raise AssertionError("an unknown authorizer must stop the node")


def _metadata(h: Harness, names: list[str] | None, version: int = 12) -> Any:
    request = MetadataRequest(
        topics=None if names is None else [mr.MetadataRequestTopic(name=n) for n in names],
        allow_auto_topic_creation=True,
    )
    outcome = topics.handle_metadata(h.state, _as(3, version), request)
    return h.carry(outcome)


def test_metadata_lists_only_what_the_principal_may_describe() -> None:
    h = _harness(_acl("visible", AclOperation.READ))  # READ implies DESCRIBE
    listed = _metadata(h, None)
    assert [t.name for t in listed.topics] == ["visible"]


def test_a_named_topic_it_may_not_describe_is_refused_whether_it_exists_or_not() -> None:
    h = _harness(_acl("visible", AclOperation.DESCRIBE))
    answer = _metadata(h, ["secret", "no-such-topic", "visible"])
    by_name = {t.name: t for t in answer.topics}
    assert by_name["secret"].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert by_name["no-such-topic"].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert by_name["secret"].partitions == [] and by_name["visible"].partitions
    assert "no-such-topic" not in h.image.topics_by_name  # and nothing was auto-created


def test_auto_creation_needs_create_on_the_cluster_or_the_topic() -> None:
    h = _harness(_acl("new-", AclOperation.DESCRIBE, pattern=PatternType.PREFIXED))
    refused = _metadata(h, ["new-a"])
    assert refused.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    h.replay([_acl("new-a", AclOperation.CREATE)])
    created = _metadata(h, ["new-a"])
    assert "new-a" in h.image.topics_by_name
    assert created.topics[0].error_code in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE)


def test_super_users_see_everything() -> None:
    h = _harness()
    listed = topics.handle_metadata(
        h.state, _as(3, 12, KafkaPrincipal("User", "admin")), MetadataRequest(topics=None)
    )
    assert isinstance(listed, Reply)
    assert sorted(t.name for t in listed.response.topics) == ["secret", "visible"]


def test_produce_needs_write_on_the_topic() -> None:
    h = _harness(_acl("visible", AclOperation.WRITE))
    request = ProduceRequest(
        acks=1,
        timeout_ms=1000,
        topic_data=[
            pr.TopicProduceData(
                name=name, partition_data=[pr.PartitionProduceData(index=0, records=batch())]
            )
            for name in ("visible", "secret")
        ],
    )
    response = h.carry(produce.handle_produce(h.state, _as(0, 9), request))
    errors = {t.name: t.partition_responses[0].error_code for t in response.responses}
    assert errors == {"visible": ErrorCode.NONE, "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    assert h.partition("secret").log.log_end_offset == 0


def test_fetch_needs_read_and_a_follower_fetch_needs_cluster_action() -> None:
    h = _harness(_acl("visible", AclOperation.READ))
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        topics=[
            fr.FetchTopic(topic=name, partitions=[fr.FetchPartition(partition=0)])
            for name in ("visible", "secret")
        ],
    )
    response = h.carry(fetch.handle_fetch(h.state, _as(1, 12), request))
    errors = {t.topic: t.partitions[0].error_code for t in response.responses}
    assert errors == {"visible": ErrorCode.NONE, "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    request.replica_id = 2  # posing as a follower
    posing = h.carry(fetch.handle_fetch(h.state, _as(1, 12), request))
    assert posing.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_list_offsets_needs_describe() -> None:
    h = _harness()
    request = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            lo.ListOffsetsTopic(name="secret", partitions=[lo.ListOffsetsPartition(0, -1, -1)])
        ],
    )
    response = h.carry(list_offsets.handle_list_offsets(h.state, _as(2, 7), request))
    assert response.topics[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_create_and_delete_topics_need_create_and_delete() -> None:
    h = _harness(_acl("visible", AclOperation.DESCRIBE))
    created = h.carry(
        topics.handle_create_topics(
            h.state,
            _as(19, 7),
            CreateTopicsRequest(
                topics=[ct.CreatableTopic(name="mine", num_partitions=1, replication_factor=1)],
                timeout_ms=1000,
            ),
        )
    )
    assert created.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    deleted = h.carry(
        topics.handle_delete_topics(
            h.state,
            _as(20, 5),
            DeleteTopicsRequest(topic_names=["visible", "secret", "nothing"], timeout_ms=1000),
        )
    )
    assert {r.name: r.error_code for r in deleted.responses} == {
        "visible": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        "nothing": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    }
    assert {"visible", "secret"} <= set(h.image.topics_by_name)


def test_cluster_apis_are_guarded_and_answer_in_their_own_shape() -> None:
    h = _harness()
    routes = guard_routes(
        h.state,
        broker_routes(
            h.state,
            h.server,
            offsets_topic_num_partitions=1,
            offsets_topic_replication_factor=1,
            describe_quorum=lambda: None,
        ),
    )
    handlers = {key: handler for key, _, handler in routes}
    assert set(CLUSTER_RULES) <= set(handlers)
    denied = handlers[DescribeClusterRequest.API_KEY](_as(60, 0), DescribeClusterRequest())
    assert isinstance(denied, Reply)
    assert denied.response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    h.replay([_acl("kafka-cluster", AclOperation.DESCRIBE, ResourceType.CLUSTER)])
    served = handlers[DescribeClusterRequest.API_KEY](_as(60, 0), DescribeClusterRequest())
    assert isinstance(served, Reply) and served.response.error_code == ErrorCode.NONE


def test_metadata_reports_authorized_operations_when_asked() -> None:
    h = _harness(_acl("visible", AclOperation.READ))
    request = MetadataRequest(
        topics=[mr.MetadataRequestTopic(name="visible")],
        include_topic_authorized_operations=True,
        include_cluster_authorized_operations=True,
    )
    answer = h.carry(topics.handle_metadata(h.state, _as(3, 10), request))
    assert answer.topics[0].topic_authorized_operations == (1 << AclOperation.READ) | (
        1 << AclOperation.DESCRIBE
    )
    assert answer.cluster_authorized_operations == 0
    unasked = h.carry(
        topics.handle_metadata(
            h.state, _as(3, 10), MetadataRequest(topics=[mr.MetadataRequestTopic(name="visible")])
        )
    )
    assert unasked.topics[0].topic_authorized_operations == -(2**31)


def test_until_the_metadata_log_is_loaded_only_super_users_are_admitted() -> None:
    made = authorization_from(
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "User:admin", True
    )
    assert made is not None and not made.loaded
    early = made.authorizer({})
    assert not early.authorize(ALICE, "h", AclOperation.READ, ResourceType.TOPIC, "t")
    admin = KafkaPrincipal("User", "admin")
    assert early.authorize(admin, "h", AclOperation.READ, ResourceType.TOPIC, "t")
    made.loaded = True
    # Loaded, with no ACL on the topic: allow.everyone.if.no.acl.found applies.
    assert made.authorizer({}).authorize(ALICE, "h", AclOperation.READ, ResourceType.TOPIC, "t")
