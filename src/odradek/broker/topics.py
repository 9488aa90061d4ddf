"""CreateTopics, DeleteTopics and Metadata: the topic-level requests.

Creation and deletion are decided by the controller's pure commands
(``odradek.controller.topics``) and take effect when their records are committed to
the metadata log and replayed (``CommitRecords``); the answer is built after that, so a
client that is told a topic exists can use it at once.
"""

from __future__ import annotations

import uuid
from typing import Any

from odradek.broker.addresses import listener_of, registered_address
from odradek.broker.authorization import allowed, allowed_names, authorized_operations
from odradek.broker.effects import CommitRecords, Outcome, Reply
from odradek.broker.state import BrokerState
from odradek.broker.throttle import THROTTLING_QUOTA_EXCEEDED_MESSAGE, MutationQuota
from odradek.controller.topics import (
    EXCESSIVE_PARTITIONS,
    MAX_PARTITIONS_PER_BATCH,
    NewTopic,
    create_topic,
    delete_topic,
    requested_partitions,
    topic_name_problem,
)
from odradek.controller.unclean_history import UNCLEAN_ELECTIONS_CONFIG
from odradek.core.errors import ConfigError
from odradek.protocol.api import RequestHeader
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    MetadataRequest,
    MetadataResponse,
)
from odradek.protocol.messages.create_topics_response import CreatableTopicResult
from odradek.protocol.messages.delete_topics_response import DeletableTopicResult
from odradek.protocol.messages.metadata_response import (
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from odradek.security.acls import AclOperation, ResourceType

CREATE_TOPICS_VERSIONS = (0, 7)
DELETE_TOPICS_VERSIONS = (0, 6)
METADATA_VERSIONS = (0, 12)
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})

CREATE, DELETE, DESCRIBE = AclOperation.CREATE, AclOperation.DELETE, AclOperation.DESCRIBE
TOPIC = ResourceType.TOPIC


def handle_create_topics(
    state: BrokerState, header: RequestHeader, request: CreateTopicsRequest
) -> Outcome:
    requested = sum(
        requested_partitions(t.num_partitions, len(t.assignments), state.settings.num_partitions)
        for t in request.topics
    )
    if requested > MAX_PARTITIONS_PER_BATCH:
        # Kafka refuses the whole request, every topic with the same error, before any
        # other check: nothing of it is placed or created.
        return Reply(
            CreateTopicsResponse(
                topics=[
                    CreatableTopicResult(
                        name=t.name,
                        error_code=ErrorCode.POLICY_VIOLATION,
                        error_message=EXCESSIVE_PARTITIONS,
                    )
                    for t in request.topics
                ]
            )
        )
    results: list[CreatableTopicResult] = []
    records: list[Any] = []
    pending: set[str] = set()
    seen: dict[str, int] = {}
    for topic in request.topics:
        seen[topic.name] = seen.get(topic.name, 0) + 1
    # CREATE on the cluster allows every topic; else each needs CREATE on itself.
    creatable = (
        None
        if allowed(state, header, CREATE)
        else allowed_names(state, header, CREATE, TOPIC, seen)
    )
    quota = MutationQuota(state, header, strict=header.request_api_version >= 6)
    for topic in request.topics:
        result = CreatableTopicResult(name=topic.name, error_message=None)
        results.append(result)
        if seen[topic.name] > 1:
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = f"topic {topic.name!r} appears more than once in the request"
            continue
        if creatable is not None and topic.name not in creatable:
            result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            result.error_message = "Authorization failed."
            continue
        if any(c.name == UNCLEAN_ELECTIONS_CONFIG for c in topic.configs):
            result.error_code = ErrorCode.INVALID_CONFIG
            result.error_message = f"{UNCLEAN_ELECTIONS_CONFIG} is written by the controller"
            continue
        try:
            configs = state.validate_topic_configs(
                {c.name: c.value for c in topic.configs if c.value is not None}
            )
        except ConfigError as e:
            result.error_code = ErrorCode.INVALID_CONFIG
            result.error_message = str(e)
            continue
        outcome = create_topic(
            state.image,
            NewTopic(
                name=topic.name,
                num_partitions=topic.num_partitions,
                replication_factor=topic.replication_factor,
                assignments={a.partition_index: list(a.broker_ids) for a in topic.assignments}
                or None,
                configs=configs,
            ),
            state.live_brokers(),
            default_partitions=state.settings.num_partitions,
            default_replication_factor=state.default_replication_factor(),
            rng=state.rng,
            pending=pending,
        )
        result.error_code = outcome.error_code
        result.error_message = outcome.error_message
        if outcome.error_code != ErrorCode.NONE:
            continue
        if not request.validate_only and not quota.admits(outcome.num_partitions):
            result.error_code = ErrorCode.THROTTLING_QUOTA_EXCEEDED
            result.error_message = THROTTLING_QUOTA_EXCEEDED_MESSAGE
            continue
        result.num_partitions = outcome.num_partitions
        result.replication_factor = outcome.replication_factor
        result.topic_id = outcome.topic_id
        pending.add(topic.name)
        if not request.validate_only:
            records += outcome.records
    response = CreateTopicsResponse(topics=results, throttle_time_ms=quota.throttle_ms())
    if not records:
        return Reply(response)
    return CommitRecords(records, lambda: _charged(response, quota))


def _charged(response: Any, quota: MutationQuota) -> Reply:
    """The answer once its records are committed, with the mutations charged."""
    response.throttle_time_ms = quota.record()
    return Reply(response)


def handle_delete_topics(
    state: BrokerState, header: RequestHeader, request: DeleteTopicsRequest
) -> Outcome:
    wanted: list[tuple[str | None, uuid.UUID | None]] = [
        (name, None) for name in request.topic_names
    ]
    wanted += [(t.name, t.topic_id) for t in request.topics]
    results: list[DeletableTopicResult] = []
    records: list[Any] = []
    quota = MutationQuota(state, header, strict=header.request_api_version >= 5)
    for name, topic_id in wanted:
        if name is not None and not allowed(state, header, DELETE, TOPIC, name):
            # Refused before looking it up: the answer does not say whether it exists.
            results.append(
                DeletableTopicResult(
                    name=name,
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    error_message="Authorization failed.",
                )
            )
            continue
        outcome = delete_topic(state.image, name, topic_id)
        result = DeletableTopicResult(
            name=name, topic_id=outcome.topic_id, error_code=outcome.error_code
        )
        if outcome.error_code != ErrorCode.NONE:
            result.error_message = outcome.error_message
        else:
            found = state.image.topics_by_id[outcome.topic_id]
            result.name = found.name
            if not allowed(state, header, DELETE, TOPIC, found.name):
                # Named by id and not describable: answered as an unknown id, so that
                # the refusal does not tell which topic the id is.
                if name is None and not allowed(state, header, DESCRIBE, TOPIC, found.name):
                    result.name = None
                    result.error_code = ErrorCode.UNKNOWN_TOPIC_ID
                else:
                    result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    result.error_message = "Authorization failed."
                results.append(result)
                continue
            if found.name in INTERNAL_TOPICS:
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                result.error_message = f"{found.name} is an internal topic"
            elif not quota.admits(len(found.partitions)):
                result.error_code = ErrorCode.THROTTLING_QUOTA_EXCEEDED
                result.error_message = THROTTLING_QUOTA_EXCEEDED_MESSAGE
            else:
                records += outcome.records
        results.append(result)
    response = DeleteTopicsResponse(responses=results, throttle_time_ms=quota.throttle_ms())
    if not records:
        return Reply(response)
    return CommitRecords(records, lambda: _charged(response, quota))


def handle_metadata(state: BrokerState, header: RequestHeader, request: MetadataRequest) -> Outcome:
    version = header.request_api_version
    image = state.image
    if request.topics is None or (version == 0 and not request.topics):
        names: list[str | None] = list(sorted(image.topics_by_name))
        by_id: dict[int, Any] = {}
    else:
        names = []
        by_id = {}
        for i, t in enumerate(request.topics):
            if t.name is None and version >= 10:
                found = image.topics_by_id.get(t.topic_id)
                by_id[i] = found
                names.append(found.name if found is not None else None)
            else:
                names.append(t.name)
    allow_create = state.settings.auto_create_topics and (
        version < 4 or request.allow_auto_topic_creation
    )
    # A topic the principal may not describe is not listed, and when named it is
    # refused whether it exists or not: nothing tells it apart from a missing one. A
    # topic named by id is answered as an unknown id then.
    listing_all = not by_id and (request.topics is None or (version == 0 and not request.topics))
    named = {n for n in names if n is not None}
    visible = allowed_names(state, header, DESCRIBE, TOPIC, named)
    if listing_all:
        names = [n for n in names if n in visible]
    for i, found in by_id.items():
        if found is not None and found.name not in visible:
            names[i] = None
    denied = {n for n in named if n not in visible}
    missing = [
        n
        for n in dict.fromkeys(names)
        if n is not None
        and n not in denied
        and n not in image.topics_by_name
        and topic_name_problem(n) is None
    ]
    if missing and allow_create and not allowed(state, header, CREATE):
        # Auto-creation needs CREATE on the cluster or on the topic itself.
        refused = set(missing) - allowed_names(state, header, CREATE, TOPIC, missing)
        denied |= refused
        missing = [n for n in missing if n not in refused]
    # The topics one Metadata request creates obey the bound of a CreateTopics request;
    # over it none is created (as Kafka's controller refuses the whole creation).
    creatable = len(missing) * state.settings.num_partitions <= MAX_PARTITIONS_PER_BATCH
    if missing and allow_create and creatable:
        records: list[Any] = []
        pending: set[str] = set()
        for name in missing:
            outcome = create_topic(
                image,
                NewTopic(name=name),
                state.live_brokers(),
                default_partitions=state.settings.num_partitions,
                default_replication_factor=state.default_replication_factor(),
                rng=state.rng,
                pending=pending,
            )
            if outcome.error_code == ErrorCode.NONE:
                pending.add(name)
                records += outcome.records
        if records:
            return CommitRecords(
                records, lambda: Reply(_with_operations(state, header, request, names, denied))
            )
    return Reply(_with_operations(state, header, request, names, denied))


def _with_operations(
    state: BrokerState,
    header: RequestHeader,
    request: MetadataRequest,
    names: list[str | None],
    denied: set[str],
) -> MetadataResponse:
    """The answer, with the authorized operations (KIP-430) where the client asked."""
    version = header.request_api_version
    response = _metadata_response(state, names, version, denied, listener_of(header))
    if request.include_topic_authorized_operations and version >= 8:
        for topic in response.topics:
            if topic.error_code == ErrorCode.NONE and topic.name is not None:
                topic.topic_authorized_operations = authorized_operations(
                    state, header, TOPIC, topic.name
                )
    if request.include_cluster_authorized_operations and 8 <= version <= 10:
        response.cluster_authorized_operations = authorized_operations(
            state, header, ResourceType.CLUSTER
        )
    return response


def _metadata_response(
    state: BrokerState, names: list[str | None], version: int, denied: set[str], listener: str
) -> MetadataResponse:
    s = state.settings
    image = state.image
    brokers = []
    own = s.address(listener)
    if own is not None:
        brokers.append(MetadataResponseBroker(s.node_id, own[0], own[1], s.rack))
    for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        if b.broker_id != s.node_id and not b.fenced:
            address = registered_address(b, listener)
            if address is not None:
                brokers.append(MetadataResponseBroker(b.broker_id, address[0], address[1], b.rack))
    topics = []
    for name in names:
        if name in denied:
            topics.append(
                MetadataResponseTopic(name=name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            )
            continue
        topic = image.topics_by_name.get(name) if name is not None else None
        if topic is None:
            if name is None:
                error = ErrorCode.UNKNOWN_TOPIC_ID
            elif topic_name_problem(name) is not None:
                # No topic can ever have this name: a client fails its messages at once
                # instead of waiting for the topic until they time out.
                error = ErrorCode.INVALID_TOPIC_EXCEPTION
            else:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            topics.append(MetadataResponseTopic(name=name, error_code=error))
            continue
        partitions = []
        for index in sorted(topic.partitions):
            p = topic.partitions[index]
            partitions.append(
                MetadataResponsePartition(
                    error_code=ErrorCode.NONE if p.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                    partition_index=index,
                    leader_id=p.leader,
                    leader_epoch=p.leader_epoch,
                    replica_nodes=list(p.replicas),
                    isr_nodes=list(p.isr),
                )
            )
        topics.append(
            MetadataResponseTopic(
                name=topic.name,
                topic_id=topic.topic_id if version >= 10 else MetadataResponseTopic().topic_id,
                is_internal=topic.name in INTERNAL_TOPICS,
                partitions=partitions,
            )
        )
    return MetadataResponse(
        brokers=brokers, cluster_id=s.cluster_id, controller_id=s.node_id, topics=topics
    )
