"""The broker's handler table: which handler answers each API, for which versions.

Pure: it reads nothing and starts nothing. :func:`broker_routes` takes the state the
handlers read and what some of them need besides (the server config, the offsets
topic's shape, this node's block of producer ids, the quorum's own view for
DescribeQuorum) and returns the routes the shell registers on the broker listener's
:class:`~odradek.broker.router.Router`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from odradek.broker import (
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
    AlterConfigsRequest,
    AlterPartitionReassignmentsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeLogDirsRequest,
    DescribeQuorumRequest,
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
        (
            MetadataRequest.API_KEY,
            topics.METADATA_VERSIONS,
            lambda h, b: topics.handle_metadata(s, h, b),
        ),
        (
            CreateTopicsRequest.API_KEY,
            topics.CREATE_TOPICS_VERSIONS,
            lambda h, b: topics.handle_create_topics(s, h, b),
        ),
        (
            DeleteTopicsRequest.API_KEY,
            topics.DELETE_TOPICS_VERSIONS,
            lambda h, b: topics.handle_delete_topics(s, h, b),
        ),
        (
            ProduceRequest.API_KEY,
            produce.VERSIONS,
            lambda h, b: produce.handle_produce(s, h, b),
        ),
        (FetchRequest.API_KEY, fetch.VERSIONS, lambda h, b: fetch.handle_fetch(s, h, b)),
        (
            ListOffsetsRequest.API_KEY,
            list_offsets.VERSIONS,
            lambda h, b: list_offsets.handle_list_offsets(s, h, b),
        ),
        (
            DescribeClusterRequest.API_KEY,
            cluster.DESCRIBE_CLUSTER_VERSIONS,
            lambda h, b: cluster.handle_describe_cluster(s, h, b),
        ),
        (
            CreatePartitionsRequest.API_KEY,
            partitions_admin.CREATE_PARTITIONS_VERSIONS,
            lambda h, b: partitions_admin.handle_create_partitions(s, h, b),
        ),
        (
            DeleteRecordsRequest.API_KEY,
            partitions_admin.DELETE_RECORDS_VERSIONS,
            lambda h, b: partitions_admin.handle_delete_records(s, server, h, b),
        ),
        (
            DescribeConfigsRequest.API_KEY,
            config_requests.DESCRIBE_CONFIGS_VERSIONS,
            lambda h, b: config_requests.handle_describe_configs(s, server, h, b),
        ),
        (
            AlterConfigsRequest.API_KEY,
            config_requests.ALTER_CONFIGS_VERSIONS,
            lambda h, b: config_requests.handle_alter_configs(s, server, h, b),
        ),
        (
            IncrementalAlterConfigsRequest.API_KEY,
            config_requests.INCREMENTAL_ALTER_CONFIGS_VERSIONS,
            lambda h, b: config_requests.handle_incremental_alter_configs(s, server, h, b),
        ),
        (
            FindCoordinatorRequest.API_KEY,
            groups.FIND_COORDINATOR_VERSIONS,
            lambda h, b: groups.handle_find_coordinator(
                s,
                h,
                b,
                offsets_topic_num_partitions=offsets_topic_num_partitions,
                offsets_topic_replication_factor=offsets_topic_replication_factor,
            ),
        ),
        (
            OffsetForLeaderEpochRequest.API_KEY,
            offset_for_leader_epoch.VERSIONS,
            lambda h, b: offset_for_leader_epoch.handle_offset_for_leader_epoch(s, h, b),
        ),
        (
            ElectLeadersRequest.API_KEY,
            elect_leaders.VERSIONS,
            lambda h, b: elect_leaders.handle_elect_leaders(s, h, b),
        ),
        (
            InitProducerIdRequest.API_KEY,
            init_producer_id.VERSIONS,
            lambda h, b: init_producer_id.handle_init_producer_id(s, producer_ids, h, b),
        ),
    ]
    routes += [
        (
            AlterPartitionReassignmentsRequest.API_KEY,
            reassignments.ALTER_VERSIONS,
            lambda h, b: reassignments.handle_alter_partition_reassignments(s, h, b),
        ),
        (
            ListPartitionReassignmentsRequest.API_KEY,
            reassignments.LIST_VERSIONS,
            lambda h, b: reassignments.handle_list_partition_reassignments(s, h, b),
        ),
        (
            UnregisterBrokerRequest.API_KEY,
            reassignments.UNREGISTER_VERSIONS,
            lambda h, b: reassignments.handle_unregister_broker(s, h, b),
        ),
        (
            DescribeLogDirsRequest.API_KEY,
            reassignments.DESCRIBE_LOG_DIRS_VERSIONS,
            lambda h, b: reassignments.handle_describe_log_dirs(s, h, b),
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
