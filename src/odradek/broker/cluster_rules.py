"""The APIs that need one operation on the cluster resource, as Kafka's table has them,
and each one's answer when the principal lacks it (CLUSTER_AUTHORIZATION_FAILED in the
API's own shape). :func:`guard_routes` puts the check in front of their handlers; the
APIs that name topics, groups or transactional ids check those in their handlers.
"""

from __future__ import annotations

from typing import Any, Final

from odradek.broker.acl_requests import refused_create, refused_delete, refused_describe
from odradek.broker.authorization import ClusterRule, cluster_guarded
from odradek.broker.handlers import Route
from odradek.broker.state import BrokerState
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)
from odradek.protocol.messages import alter_client_quotas_response as alter_quotas
from odradek.protocol.messages.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResult,
)
from odradek.security.acls import AclOperation

__all__ = ["CLUSTER_RULES", "guard_routes"]

_DENIED: Final = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
_MESSAGE: Final = "Cluster authorization failed."
_DESCRIBE, _ALTER = AclOperation.DESCRIBE, AclOperation.ALTER
_DESCRIBE_CONFIGS, _ALTER_CONFIGS = AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS


def _alter_scram(body: Any) -> AlterUserScramCredentialsResponse:
    users = dict.fromkeys([u.name for u in body.upsertions] + [d.name for d in body.deletions])
    return AlterUserScramCredentialsResponse(
        results=[
            AlterUserScramCredentialsResult(user=u, error_code=_DENIED, error_message=_MESSAGE)
            for u in users
        ]
    )


def _alter_quotas(body: Any) -> AlterClientQuotasResponse:
    return AlterClientQuotasResponse(
        entries=[
            alter_quotas.EntryData(
                error_code=_DENIED,
                error_message=_MESSAGE,
                entity=[
                    alter_quotas.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                    for e in entry.entity
                ],
            )
            for entry in body.entries
        ]
    )


CLUSTER_RULES: Final[dict[int, ClusterRule]] = {
    DescribeClusterRequest.API_KEY: ClusterRule(
        _DESCRIBE, lambda _: DescribeClusterResponse(error_code=_DENIED, error_message=_MESSAGE)
    ),
    DescribeLogDirsRequest.API_KEY: ClusterRule(
        _DESCRIBE, lambda _: DescribeLogDirsResponse(error_code=_DENIED)
    ),
    ElectLeadersRequest.API_KEY: ClusterRule(
        _ALTER, lambda _: ElectLeadersResponse(error_code=_DENIED)
    ),
    AlterPartitionReassignmentsRequest.API_KEY: ClusterRule(
        _ALTER,
        lambda _: AlterPartitionReassignmentsResponse(error_code=_DENIED, error_message=_MESSAGE),
    ),
    ListPartitionReassignmentsRequest.API_KEY: ClusterRule(
        _DESCRIBE,
        lambda _: ListPartitionReassignmentsResponse(error_code=_DENIED, error_message=_MESSAGE),
    ),
    UnregisterBrokerRequest.API_KEY: ClusterRule(
        _ALTER, lambda _: UnregisterBrokerResponse(error_code=_DENIED, error_message=_MESSAGE)
    ),
    DescribeQuorumRequest.API_KEY: ClusterRule(
        _DESCRIBE, lambda _: DescribeQuorumResponse(error_code=_DENIED, error_message=_MESSAGE)
    ),
    DescribeUserScramCredentialsRequest.API_KEY: ClusterRule(
        _DESCRIBE,
        lambda _: DescribeUserScramCredentialsResponse(error_code=_DENIED, error_message=_MESSAGE),
    ),
    AlterUserScramCredentialsRequest.API_KEY: ClusterRule(_ALTER, _alter_scram),
    DescribeAclsRequest.API_KEY: ClusterRule(
        _DESCRIBE, lambda body: refused_describe(body, _DENIED, _MESSAGE)
    ),
    CreateAclsRequest.API_KEY: ClusterRule(
        _ALTER, lambda body: refused_create(body, _DENIED, _MESSAGE)
    ),
    DeleteAclsRequest.API_KEY: ClusterRule(
        _ALTER, lambda body: refused_delete(body, _DENIED, _MESSAGE)
    ),
    DescribeClientQuotasRequest.API_KEY: ClusterRule(
        _DESCRIBE_CONFIGS,
        lambda _: DescribeClientQuotasResponse(
            error_code=_DENIED, error_message=_MESSAGE, entries=None
        ),
    ),
    AlterClientQuotasRequest.API_KEY: ClusterRule(_ALTER_CONFIGS, _alter_quotas),
}
"""Every API the broker listener serves that needs one operation on the cluster."""


def guard_routes(state: BrokerState, routes: list[Route]) -> list[Route]:
    """``routes`` with the cluster check of :data:`CLUSTER_RULES` in front of theirs."""
    return [
        (key, versions, cluster_guarded(state, handler, CLUSTER_RULES[key]))
        if key in CLUSTER_RULES
        else (key, versions, handler)
        for key, versions, handler in routes
    ]
