"""The broker's handler table: which handler answers each API, for which versions.

Pure: it reads nothing and starts nothing. :func:`broker_routes` takes the state the
handlers read and what some of them need besides (the server config, the offsets
topic's shape, this node's block of producer ids, the quorum's own view for
DescribeQuorum) and returns the routes the shell registers on the broker listener's
:class:`~odradek.broker.router.Router`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from odradek.broker import (
    acl_requests,
    client_quotas,
    cluster,
    config_requests,
    elect_leaders,
    fetch,
    groups,
    list_offsets,
    offset_for_leader_epoch,
    partitions_admin,
    produce,
    reassignments,
    scram_credentials,
    topics,
)
from odradek.broker import producer_ids as init_producer_id
from odradek.broker.effects import Outcome, Reply
from odradek.broker.producer_ids import ProducerIds
from odradek.broker.router import Handler, Router
from odradek.broker.server_config import ServerConfig
from odradek.broker.state import BrokerState
from odradek.coordinator import API_VERSIONS as GROUP_API_VERSIONS
from odradek.protocol.messages import (
    AlterClientQuotasRequest,
    AlterConfigsRequest,
    AlterPartitionReassignmentsRequest,
    AlterUserScramCredentialsRequest,
    CreateAclsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeClientQuotasRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeLogDirsRequest,
    DescribeQuorumRequest,
    DescribeUserScramCredentialsRequest,
    ElectLeadersRequest,
    FetchRequest,
    FindCoordinatorRequest,
    IncrementalAlterConfigsRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    ListPartitionReassignmentsRequest,
    MetadataRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
    UnregisterBrokerRequest,
)

Route = tuple[int, tuple[int, int], Handler]
"""An API key, the versions served of it, and its handler."""

DESCRIBE_QUORUM_VERSIONS = (0, 2)


def broker_routes(
    s: BrokerState,
    server: ServerConfig,
    *,
    offsets_topic_num_partitions: int,
    offsets_topic_replication_factor: int,
    describe_quorum: Callable[[], Any],
    producer_ids: ProducerIds | None = None,
) -> list[Route]:
    """Every route of the broker listener. ``describe_quorum`` gives this node's own view
    of the metadata quorum (a DescribeQuorumResponse); ``producer_ids`` is the node's
    block of producer ids (a new, empty one by default)."""
    producer_ids = producer_ids if producer_ids is not None else ProducerIds()
    routes: list[Route] = [
        (MetadataRequest.API_KEY, topics.METADATA_VERSIONS, partial(topics.handle_metadata, s)),
        (
            CreateTopicsRequest.API_KEY,
            topics.CREATE_TOPICS_VERSIONS,
            partial(topics.handle_create_topics, s),
        ),
        (
            DeleteTopicsRequest.API_KEY,
            topics.DELETE_TOPICS_VERSIONS,
            partial(topics.handle_delete_topics, s),
        ),
        (ProduceRequest.API_KEY, produce.VERSIONS, partial(produce.handle_produce, s)),
        (FetchRequest.API_KEY, fetch.VERSIONS, partial(fetch.handle_fetch, s)),
        (
            ListOffsetsRequest.API_KEY,
            list_offsets.VERSIONS,
            partial(list_offsets.handle_list_offsets, s),
        ),
        (
            DescribeClusterRequest.API_KEY,
            cluster.DESCRIBE_CLUSTER_VERSIONS,
            partial(cluster.handle_describe_cluster, s),
        ),
        (
            CreatePartitionsRequest.API_KEY,
            partitions_admin.CREATE_PARTITIONS_VERSIONS,
            partial(partitions_admin.handle_create_partitions, s),
        ),
        (
            DeleteRecordsRequest.API_KEY,
            partitions_admin.DELETE_RECORDS_VERSIONS,
            partial(partitions_admin.handle_delete_records, s, server),
        ),
        (
            DescribeConfigsRequest.API_KEY,
            config_requests.DESCRIBE_CONFIGS_VERSIONS,
            partial(config_requests.handle_describe_configs, s, server),
        ),
        (
            AlterConfigsRequest.API_KEY,
            config_requests.ALTER_CONFIGS_VERSIONS,
            partial(config_requests.handle_alter_configs, s, server),
        ),
        (
            IncrementalAlterConfigsRequest.API_KEY,
            config_requests.INCREMENTAL_ALTER_CONFIGS_VERSIONS,
            partial(config_requests.handle_incremental_alter_configs, s, server),
        ),
        (
            FindCoordinatorRequest.API_KEY,
            groups.FIND_COORDINATOR_VERSIONS,
            partial(
                groups.handle_find_coordinator,
                s,
                offsets_topic_num_partitions=offsets_topic_num_partitions,
                offsets_topic_replication_factor=offsets_topic_replication_factor,
                offsets_topic_segment_bytes=server.offsets_topic_segment_bytes,
            ),
        ),
        (
            OffsetForLeaderEpochRequest.API_KEY,
            offset_for_leader_epoch.VERSIONS,
            partial(offset_for_leader_epoch.handle_offset_for_leader_epoch, s),
        ),
        (
            ElectLeadersRequest.API_KEY,
            elect_leaders.VERSIONS,
            partial(elect_leaders.handle_elect_leaders, s),
        ),
        (
            InitProducerIdRequest.API_KEY,
            init_producer_id.VERSIONS,
            partial(init_producer_id.handle_init_producer_id, s, producer_ids),
        ),
        (
            AlterPartitionReassignmentsRequest.API_KEY,
            reassignments.ALTER_VERSIONS,
            partial(reassignments.handle_alter_partition_reassignments, s),
        ),
        (
            ListPartitionReassignmentsRequest.API_KEY,
            reassignments.LIST_VERSIONS,
            partial(reassignments.handle_list_partition_reassignments, s),
        ),
        (
            UnregisterBrokerRequest.API_KEY,
            reassignments.UNREGISTER_VERSIONS,
            partial(reassignments.handle_unregister_broker, s),
        ),
        (
            DescribeLogDirsRequest.API_KEY,
            reassignments.DESCRIBE_LOG_DIRS_VERSIONS,
            partial(reassignments.handle_describe_log_dirs, s),
        ),
        (
            DescribeUserScramCredentialsRequest.API_KEY,
            scram_credentials.DESCRIBE_VERSIONS,
            partial(scram_credentials.handle_describe_user_scram_credentials, s),
        ),
        (
            AlterUserScramCredentialsRequest.API_KEY,
            scram_credentials.ALTER_VERSIONS,
            partial(scram_credentials.handle_alter_user_scram_credentials, s),
        ),
        (
            DescribeAclsRequest.API_KEY,
            acl_requests.DESCRIBE_VERSIONS,
            partial(acl_requests.handle_describe_acls, s),
        ),
        (
            CreateAclsRequest.API_KEY,
            acl_requests.CREATE_VERSIONS,
            partial(acl_requests.handle_create_acls, s),
        ),
        (
            DeleteAclsRequest.API_KEY,
            acl_requests.DELETE_VERSIONS,
            partial(acl_requests.handle_delete_acls, s),
        ),
        (
            DescribeClientQuotasRequest.API_KEY,
            client_quotas.DESCRIBE_VERSIONS,
            partial(client_quotas.handle_describe_client_quotas, s),
        ),
        (
            AlterClientQuotasRequest.API_KEY,
            client_quotas.ALTER_VERSIONS,
            partial(client_quotas.handle_alter_client_quotas, s),
        ),
    ]
    routes += [
        (api_key, versions, groups.handle_group_request)
        for api_key, versions in GROUP_API_VERSIONS.items()
    ]
    # DescribeQuorum on the broker listener answers with this node's own view of
    # the metadata quorum (leader, high watermark, the stall alarm) for health checks.
    routes.append(
        (DescribeQuorumRequest.API_KEY, DESCRIBE_QUORUM_VERSIONS, _describe(describe_quorum))
    )
    return routes


def register(router: Router, routes: list[Route]) -> Router:
    """Register ``routes`` on ``router``; the router."""
    for api_key, versions, handler in routes:
        router.register(api_key, versions, handler)
    return router


def _describe(describe_quorum: Callable[[], Any]) -> Handler:
    def handle(header: Any, body: Any) -> Outcome:
        return Reply(describe_quorum())

    return handle
