"""CreateAcls, DescribeAcls and DeleteAcls: the ACLs held in the metadata log.

The ACLs live in the metadata image (:attr:`MetadataImage.acls`), replayed from
``AccessControlEntryRecord`` and ``RemoveAccessControlEntryRecord``; each has an id, and a
binding (:class:`~odradek.security.acls.AclBinding`) of resource type, name, pattern
type, principal, host, operation and permission, with Kafka's ids for each.

Create decides as Kafka's broker (``AclApis.handleCreateAcls``) and controller
(``AclControlManager.createAcls``/``validateNewAcl``) do, each creation on its own, in
this order, every refusal INVALID_REQUEST with Kafka's message:

* a CLUSTER resource must be named ``kafka-cluster``; no resource name may be empty;
* the resource type must be a real one (TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID,
  DELEGATION_TOKEN, USER: not ANY or an unknown id), the pattern LITERAL or PREFIXED,
  the operation a real one (not ANY), the permission ALLOW or DENY;
* the principal must read as ``Type:name``.

A binding the image already holds, or that an earlier creation of the same request
adds, succeeds without a second record (Kafka's ``existingAcls``). Every new ACL gets a
random id that no ACL has (Kafka's ``newAclId``), drawn from the broker's rng so that a
simulation replays exactly. More than 10,000 new ACLs in one request are refused whole,
as Kafka's controller refuses them (its bound on the records of one operation): POLICY_
VIOLATION for every creation that passed the broker's own checks, and nothing stored.

Describe answers from the image of the node it reaches: the ACLs the filter matches
(:class:`~odradek.security.acls.AclBindingFilter`, Kafka's matching, ``MATCH`` included),
grouped by resource pattern as Kafka's ``DescribeAclsResponse.aclsResources`` groups
them. Kafka's order is that of hash maps; ours is sorted (resource type, name, pattern;
then principal, host, operation, permission), so that every node answers alike.

Delete, as ``AclControlManager.deleteAcls``: each filter removes every ACL it matches
(a ``RemoveAccessControlEntryRecord`` per id, one even when several filters match the
same ACL) and is answered with those ACLs. A filter with an unknown resource type or
pattern type is INVALID_REQUEST ``Unknown patternFilter.``, one with an unknown operation
or permission ``Unknown entryFilter.``; the other filters go on. A filter that would take
the request past 10,000 removals fails (UNKNOWN_SERVER_ERROR, Kafka's message) and
removes nothing; Kafka would still remove the matches it had collected for it, without
saying so in the answer.

Version 0 of the three requests has no pattern type: the schema's default, LITERAL,
stands for it, as in Kafka. An explicit UNKNOWN (id 0) for a resource type, pattern
type, operation or permission makes Kafka refuse the whole request as it parses it
(``CreateAclsRequest.validate``, ``DescribeAclsRequest``/``DeleteAclsRequest``
``normalizeAndValidate``), and the broker closes the connection: so does this module.
An id Kafka does not know (above its highest) is UNKNOWN only once parsed, and is
answered as above instead.

Create and Delete commit their records on the active controller (``CommitRecords``; a
node that is not forwards the whole request there, where the handler runs again on
that node's image) and answer once the records are replayed. Who may call these APIs
(ALTER and DESCRIBE on the cluster) is the authorizer's to decide, not this module's.
ACL records whose ids this build does not know (a newer writer's) match no filter: they
are neither described nor deleted.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable, Mapping
from enum import IntEnum
from typing import Final, TypeVar

from odradek.broker.effects import CommitRecords, NoReply, Outcome, Reply
from odradek.broker.state import BrokerState
from odradek.controller.topics import new_topic_id
from odradek.protocol.api import RequestHeader
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from odradek.protocol.messages.create_acls_request import AclCreation
from odradek.protocol.messages.create_acls_response import AclCreationResult
from odradek.protocol.messages.delete_acls_request import DeleteAclsFilter
from odradek.protocol.messages.delete_acls_response import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
)
from odradek.protocol.messages.describe_acls_response import (
    AclDescription,
    DescribeAclsResource,
)
from odradek.protocol.metadata import AccessControlEntryRecord, RemoveAccessControlEntryRecord
from odradek.security.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
    binding_from_record,
    parse_principal,
)

__all__ = [
    "CREATE_VERSIONS",
    "DELETE_VERSIONS",
    "DESCRIBE_VERSIONS",
    "MAX_RECORDS_PER_REQUEST",
    "handle_create_acls",
    "handle_delete_acls",
    "handle_describe_acls",
]

DESCRIBE_VERSIONS: Final = (0, 3)
CREATE_VERSIONS: Final = (0, 3)
DELETE_VERSIONS: Final = (0, 3)

MAX_RECORDS_PER_REQUEST: Final = 10_000
"""Most ACL records one CreateAcls or DeleteAcls may commit (Kafka's
``MAX_RECORDS_PER_USER_OP``)."""

# Kafka's messages (AclApis, AclControlManager, EventHandlerExceptionInfo), so that tools
# matching on them work.
_CLUSTER_NAME_ONLY = f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
_EMPTY_NAME = "Invalid empty resource name"
_TOO_MANY_CREATED = "Unable to perform excessively large batch operation."
_TOO_MANY_DELETED = (
    f"Cannot remove more than {MAX_RECORDS_PER_REQUEST} acls in a single delete operation."
)
_UNKNOWN_PATTERN_FILTER = "Unknown patternFilter."
_UNKNOWN_ENTRY_FILTER = "Unknown entryFilter."

_CREATABLE_TYPES: Final = frozenset(ResourceType) - {ResourceType.UNKNOWN, ResourceType.ANY}
_CREATABLE_PATTERNS: Final = frozenset({PatternType.LITERAL, PatternType.PREFIXED})
_CREATABLE_OPERATIONS: Final = frozenset(AclOperation) - {AclOperation.UNKNOWN, AclOperation.ANY}
_CREATABLE_PERMISSIONS: Final = frozenset({AclPermission.ALLOW, AclPermission.DENY})

_UNKNOWN_ID: Final = 0
"""UNKNOWN's id in all four of Kafka's enums."""

E = TypeVar("E", bound=IntEnum)
_Error = tuple[int, str]


_NO_AUTHORIZER = "No Authorizer is configured."
"""Kafka's answer to the ACL APIs on a cluster without an authorizer: an ACL stored but
never checked would give a false sense of protection."""


def refused_describe(request: DescribeAclsRequest, code: int, message: str) -> DescribeAclsResponse:
    """DescribeAcls refused whole (no authorizer, or not authorized)."""
    return DescribeAclsResponse(error_code=code, error_message=message)


def refused_create(request: CreateAclsRequest, code: int, message: str) -> CreateAclsResponse:
    """CreateAcls refused whole: each creation answered with ``code``."""
    return CreateAclsResponse(
        results=[
            AclCreationResult(error_code=code, error_message=message) for _ in request.creations
        ]
    )


def refused_delete(request: DeleteAclsRequest, code: int, message: str) -> DeleteAclsResponse:
    """DeleteAcls refused whole: each filter answered with ``code``."""
    return DeleteAclsResponse(
        filter_results=[
            DeleteAclsFilterResult(error_code=code, error_message=message) for _ in request.filters
        ]
    )


def handle_describe_acls(
    state: BrokerState, header: RequestHeader, request: DescribeAclsRequest
) -> Outcome:
    if state.authorization is None:
        return Reply(refused_describe(request, ErrorCode.SECURITY_DISABLED, _NO_AUTHORIZER))
    codes = (
        request.resource_type_filter,
        request.pattern_type_filter,
        request.operation,
        request.permission_type,
    )
    if _UNKNOWN_ID in codes:
        return NoReply(close_reason="DescribeAclsRequest contains UNKNOWN elements")
    acl_filter = _filter(
        request.resource_type_filter,
        request.resource_name_filter,
        request.pattern_type_filter,
        request.principal_filter,
        request.host_filter,
        request.operation,
        request.permission_type,
    )
    # A set, as Kafka's grouping collects a set per pattern: two ids holding one binding
    # describe it once.
    matched = {binding for _, binding in _bindings(state.image.acls) if acl_filter.matches(binding)}
    by_pattern: dict[tuple[int, str, int], list[AclBinding]] = {}
    for binding in sorted(matched, key=_order):
        key = (int(binding.resource_type), binding.resource_name, int(binding.pattern_type))
        by_pattern.setdefault(key, []).append(binding)
    resources = [
        DescribeAclsResource(
            resource_type=resource_type,
            resource_name=resource_name,
            pattern_type=pattern_type,
            acls=[
                AclDescription(
                    principal=b.principal,
                    host=b.host,
                    operation=int(b.operation),
                    permission_type=int(b.permission),
                )
                for b in bindings
            ],
        )
        for (resource_type, resource_name, pattern_type), bindings in by_pattern.items()
    ]
    return Reply(DescribeAclsResponse(error_message=None, resources=resources))


def handle_create_acls(
    state: BrokerState, header: RequestHeader, request: CreateAclsRequest
) -> Outcome:
    if state.authorization is None:
        return Reply(refused_create(request, ErrorCode.SECURITY_DISABLED, _NO_AUTHORIZER))
    if any(_unknown_creation(c) for c in request.creations):
        return NoReply(close_reason="CreatableAcls contain unknown elements")
    acls = state.image.acls
    existing = {binding for _, binding in _bindings(acls)}
    taken = set(acls)
    records: list[AccessControlEntryRecord] = []
    errors: list[_Error | None] = []
    refused_by_broker: set[int] = set()
    for index, creation in enumerate(request.creations):
        error = _broker_check(creation)
        if error is not None:
            refused_by_broker.add(index)
        else:
            error = _controller_check(creation)
        errors.append(error)
        if error is not None:
            continue
        binding = _binding(creation)
        if binding in existing:
            continue  # Kafka: success, and no second record
        existing.add(binding)
        acl_id = _new_acl_id(state.rng, taken)
        taken.add(acl_id)
        records.append(_record(acl_id, binding))

    if len(records) > MAX_RECORDS_PER_REQUEST:
        # Kafka's controller fails the whole call: every creation it was sent gets the
        # error; those the broker refused before sending keep theirs.
        errors = [
            error if index in refused_by_broker else (ErrorCode.POLICY_VIOLATION, _TOO_MANY_CREATED)
            for index, error in enumerate(errors)
        ]
        records = []
    response = CreateAclsResponse(
        results=[
            AclCreationResult(error_message=None)
            if error is None
            else AclCreationResult(error_code=error[0], error_message=error[1])
            for error in errors
        ]
    )
    if not records:
        return Reply(response)
    return CommitRecords(list(records), lambda: Reply(response))


def handle_delete_acls(
    state: BrokerState, header: RequestHeader, request: DeleteAclsRequest
) -> Outcome:
    if state.authorization is None:
        return Reply(refused_delete(request, ErrorCode.SECURITY_DISABLED, _NO_AUTHORIZER))
    if any(_unknown_filter(f) for f in request.filters):
        return NoReply(close_reason="Filters contain UNKNOWN elements")
    bindings = sorted(_bindings(state.image.acls), key=lambda item: _order(item[1]))
    removed: dict[uuid.UUID, None] = {}  # ordered, and each id once over all filters
    results: list[DeleteAclsFilterResult] = []
    for delete_filter in request.filters:
        acl_filter = _filter(
            delete_filter.resource_type_filter,
            delete_filter.resource_name_filter,
            delete_filter.pattern_type_filter,
            delete_filter.principal_filter,
            delete_filter.host_filter,
            delete_filter.operation,
            delete_filter.permission_type,
        )
        error = _filter_check(acl_filter)
        if error is not None:
            code, message = error
            results.append(DeleteAclsFilterResult(error_code=code, error_message=message))
            continue
        matches = [(acl_id, b) for acl_id, b in bindings if acl_filter.matches(b)]
        if len(removed.keys() | {acl_id for acl_id, _ in matches}) > MAX_RECORDS_PER_REQUEST:
            results.append(
                DeleteAclsFilterResult(
                    error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=_TOO_MANY_DELETED
                )
            )
            continue
        removed.update(dict.fromkeys(acl_id for acl_id, _ in matches))
        results.append(
            DeleteAclsFilterResult(
                error_message=None, matching_acls=[_matching_acl(b) for _, b in matches]
            )
        )
    response = DeleteAclsResponse(filter_results=results)
    if not removed:
        return Reply(response)
    # One batch: the filters' removals happen together or, on a failover before the
    # commit, not at all (Kafka's ControllerResult.atomicOf).
    records = [RemoveAccessControlEntryRecord(id=acl_id) for acl_id in removed]
    return CommitRecords(list(records), lambda: Reply(response))


# Reading requests ----------------------------------------------------------------------


def _enum(cls: type[E], code: int, unknown: E) -> E:
    """Kafka's ``fromCode``: an id it does not know is UNKNOWN."""
    try:
        return cls(code)
    except ValueError:
        return unknown


def _filter(
    resource_type: int,
    resource_name: str | None,
    pattern_type: int,
    principal: str | None,
    host: str | None,
    operation: int,
    permission: int,
) -> AclBindingFilter:
    return AclBindingFilter(
        resource_type=_enum(ResourceType, resource_type, ResourceType.UNKNOWN),
        resource_name=resource_name,
        pattern_type=_enum(PatternType, pattern_type, PatternType.UNKNOWN),
        principal=principal,
        host=host,
        operation=_enum(AclOperation, operation, AclOperation.UNKNOWN),
        permission=_enum(AclPermission, permission, AclPermission.UNKNOWN),
    )


def _binding(creation: AclCreation) -> AclBinding:
    return AclBinding(
        _enum(ResourceType, creation.resource_type, ResourceType.UNKNOWN),
        creation.resource_name,
        _enum(PatternType, creation.resource_pattern_type, PatternType.UNKNOWN),
        creation.principal,
        creation.host,
        _enum(AclOperation, creation.operation, AclOperation.UNKNOWN),
        _enum(AclPermission, creation.permission_type, AclPermission.UNKNOWN),
    )


def _unknown_creation(creation: AclCreation) -> bool:
    return _UNKNOWN_ID in (
        creation.resource_type,
        creation.resource_pattern_type,
        creation.operation,
        creation.permission_type,
    )


def _unknown_filter(delete_filter: DeleteAclsFilter) -> bool:
    return _UNKNOWN_ID in (
        delete_filter.resource_type_filter,
        delete_filter.pattern_type_filter,
        delete_filter.operation,
        delete_filter.permission_type,
    )


# Checks --------------------------------------------------------------------------------


def _broker_check(creation: AclCreation) -> _Error | None:
    """What Kafka's broker refuses before it asks the controller."""
    if creation.resource_type == ResourceType.CLUSTER and creation.resource_name != CLUSTER_NAME:
        return ErrorCode.INVALID_REQUEST, _CLUSTER_NAME_ONLY
    if not creation.resource_name:
        return ErrorCode.INVALID_REQUEST, _EMPTY_NAME
    return None


def _controller_check(creation: AclCreation) -> _Error | None:
    """Kafka's ``AclControlManager.validateNewAcl``, with its messages."""
    binding = _binding(creation)
    if binding.resource_type not in _CREATABLE_TYPES:
        return ErrorCode.INVALID_REQUEST, f"Invalid resourceType {binding.resource_type.name}"
    if binding.pattern_type not in _CREATABLE_PATTERNS:
        return ErrorCode.INVALID_REQUEST, f"Invalid patternType {binding.pattern_type.name}"
    if binding.operation not in _CREATABLE_OPERATIONS:
        return ErrorCode.INVALID_REQUEST, f"Invalid operation {binding.operation.name}"
    if binding.permission not in _CREATABLE_PERMISSIONS:
        return ErrorCode.INVALID_REQUEST, f"Invalid permissionType {binding.permission.name}"
    if ":" not in binding.principal:
        return ErrorCode.INVALID_REQUEST, (
            f"Could not parse principal from `{binding.principal}` (no colon is present "
            "separating the principal type from the principal name)"
        )
    if parse_principal(binding.principal) is None:
        # Kafka lets ":alice" and "User:" through; no connection authenticates as either,
        # so an ACL naming one could never apply.
        return ErrorCode.INVALID_REQUEST, (
            f"Could not parse principal from `{binding.principal}` (the principal type "
            "and the principal name must not be empty)"
        )
    return None


def _filter_check(acl_filter: AclBindingFilter) -> _Error | None:
    """Kafka's ``AclControlManager.validateFilter``."""
    unknown_pattern = acl_filter.pattern_type == PatternType.UNKNOWN
    if acl_filter.resource_type == ResourceType.UNKNOWN or unknown_pattern:
        return ErrorCode.INVALID_REQUEST, _UNKNOWN_PATTERN_FILTER
    unknown_permission = acl_filter.permission == AclPermission.UNKNOWN
    if acl_filter.operation == AclOperation.UNKNOWN or unknown_permission:
        return ErrorCode.INVALID_REQUEST, _UNKNOWN_ENTRY_FILTER
    return None


# The image's ACLs ----------------------------------------------------------------------


def _bindings(
    acls: Mapping[uuid.UUID, AccessControlEntryRecord],
) -> Iterable[tuple[uuid.UUID, AclBinding]]:
    for acl_id, record in acls.items():
        binding = binding_from_record(record)
        if binding is not None:
            yield acl_id, binding


def _order(binding: AclBinding) -> tuple[int, str, int, str, str, int, int]:
    return (
        binding.resource_type,
        binding.resource_name,
        binding.pattern_type,
        binding.principal,
        binding.host,
        binding.operation,
        binding.permission,
    )


def _new_acl_id(rng: random.Random, taken: set[uuid.UUID]) -> uuid.UUID:
    """A random id no ACL has; drawn as Kafka draws every id (``Uuid.randomUuid``: never
    zero or the metadata topic's, never one whose text starts with '-')."""
    while True:
        candidate = new_topic_id(rng)
        if candidate not in taken:
            return candidate


def _record(acl_id: uuid.UUID, binding: AclBinding) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        id=acl_id,
        resource_type=int(binding.resource_type),
        resource_name=binding.resource_name,
        pattern_type=int(binding.pattern_type),
        principal=binding.principal,
        host=binding.host,
        operation=int(binding.operation),
        permission_type=int(binding.permission),
    )


def _matching_acl(binding: AclBinding) -> DeleteAclsMatchingAcl:
    return DeleteAclsMatchingAcl(
        error_message=None,
        resource_type=int(binding.resource_type),
        resource_name=binding.resource_name,
        pattern_type=int(binding.pattern_type),
        principal=binding.principal,
        host=binding.host,
        operation=int(binding.operation),
        permission_type=int(binding.permission),
    )
