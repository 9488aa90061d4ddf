"""Who may do what: the broker's side of the authorizer.

With ``authorizer.class.name`` set to Kafka's
``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` (or
``odradek.StandardAuthorizer``), every request is checked against the ACLs of the
metadata image (:mod:`odradek.security.acls` decides), so every node enforces the same
set as soon as it has applied the records. Unset (Kafka's default) every client may do
anything. ``super.users`` and ``allow.everyone.if.no.acl.found`` are Kafka's.

The index over the ACLs is rebuilt only when the image's ACLs change: the image replaces
its ``acls`` mapping when an ACL record is applied and shares it otherwise.

Handlers ask through :func:`allowed` and friends with the :class:`~odradek.broker.
router.Request` they were given (its principal and host); a plain header (a test's)
counts as ``User:ANONYMOUS``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from odradek.broker.effects import Outcome, Reply
from odradek.broker.router import Handler, Request
from odradek.core.errors import ConfigError
from odradek.protocol.messages.request_header import RequestHeader
from odradek.protocol.metadata import AccessControlEntryRecord
from odradek.security.acls import (
    CLUSTER_NAME,
    AclOperation,
    Authorizer,
    ResourceType,
    binding_from_record,
    parse_super_users,
)
from odradek.security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from odradek.broker.state import BrokerState

__all__ = [
    "AUTHORIZER_CLASS_NAMES",
    "Authorization",
    "ClusterRule",
    "allowed",
    "allowed_any",
    "allowed_names",
    "authorization_from",
    "authorized_operations",
    "cluster_guarded",
    "operations_bits",
]

AUTHORIZER_CLASS_NAMES: Final = (
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "odradek.StandardAuthorizer",
)


class Authorization:
    """The authorizer of the moment: its settings and an index of the image's ACLs."""

    def __init__(
        self,
        super_users: frozenset[str],
        allow_everyone_if_no_acl_found: bool,
        *,
        loaded: bool = True,
    ):
        self.super_users = super_users
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.loaded = loaded
        """Whether the node has caught up with the metadata log (so with its ACLs); until
        then only super users are admitted (Kafka's early start, KIP-801), however
        ``allow.everyone.if.no.acl.found`` is set."""
        self._acls: Mapping[Any, AccessControlEntryRecord] | None = None
        self._authorizer = Authorizer((), super_users, allow_everyone_if_no_acl_found)
        self._early = Authorizer((), super_users, False)

    def authorizer(self, acls: Mapping[Any, AccessControlEntryRecord]) -> Authorizer:
        if not self.loaded:
            return self._early
        if acls is not self._acls:
            bindings = (binding_from_record(r) for r in acls.values())
            self._authorizer = Authorizer(
                (b for b in bindings if b is not None),
                self.super_users,
                self.allow_everyone_if_no_acl_found,
            )
            self._acls = acls
        return self._authorizer


def authorization_from(
    class_name: str, super_users: str, allow_everyone_if_no_acl_found: bool
) -> Authorization | None:
    """The node's authorization from its keys; None without an authorizer. An
    authorizer class this build does not have stops the node: never open by mistake."""
    name = class_name.strip()
    if not name:
        return None
    if name not in AUTHORIZER_CLASS_NAMES:
        raise ConfigError(
            f"authorizer.class.name: {name!r} is not available; use "
            f"{AUTHORIZER_CLASS_NAMES[0]} (ACLs in the metadata log)"
        )
    return Authorization(
        parse_super_users(super_users), allow_everyone_if_no_acl_found, loaded=False
    )


def _who(request: RequestHeader) -> tuple[KafkaPrincipal, str]:
    if isinstance(request, Request):
        return request.principal, request.host
    return ANONYMOUS, ""


def allowed(
    state: BrokerState,
    request: RequestHeader,
    operation: AclOperation,
    resource_type: ResourceType = ResourceType.CLUSTER,
    name: str = CLUSTER_NAME,
) -> bool:
    """Whether ``request``'s principal may do ``operation`` on the resource (on the
    cluster by default)."""
    if state.authorization is None:
        return True
    principal, host = _who(request)
    return state.authorization.authorizer(state.image.acls).authorize(
        principal, host, operation, resource_type, name
    )


def allowed_any(
    state: BrokerState,
    request: RequestHeader,
    operation: AclOperation,
    resource_type: ResourceType,
) -> bool:
    """Whether the principal may do ``operation`` on some resource of the type."""
    if state.authorization is None:
        return True
    principal, host = _who(request)
    authorizer = state.authorization.authorizer(state.image.acls)
    return authorizer.authorize_any(principal, host, operation, resource_type)


def allowed_names(
    state: BrokerState,
    request: RequestHeader,
    operation: AclOperation,
    resource_type: ResourceType,
    names: Iterable[str],
) -> set[str]:
    """The ``names`` the principal may do ``operation`` on."""
    names = set(names)
    if state.authorization is None:
        return names
    principal, host = _who(request)
    authorizer = state.authorization.authorizer(state.image.acls)
    return {n for n in names if authorizer.authorize(principal, host, operation, resource_type, n)}


@dataclass(frozen=True, slots=True)
class ClusterRule:
    """An API that needs one operation on the cluster, and its answer when refused."""

    operation: AclOperation
    denied: Callable[[Any], Any]


def cluster_guarded(state: BrokerState, handler: Handler, rule: ClusterRule) -> Handler:
    """``handler``, run only when the principal has ``rule.operation`` on the cluster;
    else ``rule.denied(body)`` (CLUSTER_AUTHORIZATION_FAILED in the API's shape)."""

    def guarded(header: Request, body: Any) -> Outcome:
        if not allowed(state, header, rule.operation):
            return Reply(rule.denied(body))
        return handler(header, body)

    return guarded


# The operations each resource type supports (KIP-430's authorized operations report).
SUPPORTED_OPERATIONS: Final[dict[ResourceType, tuple[AclOperation, ...]]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
    ),
}
OPERATIONS_NOT_REQUESTED: Final = -(2**31)
"""The authorized-operations field of an answer that was not asked for them."""


def authorized_operations(
    state: BrokerState,
    request: RequestHeader,
    resource_type: ResourceType,
    name: str = CLUSTER_NAME,
) -> int:
    """The KIP-430 bit field (bit ``1 << operation id``) of what the principal may do on
    the resource; every supported operation when there is no authorizer, as Kafka says."""
    return operations_bits(
        resource_type, lambda operation: allowed(state, request, operation, resource_type, name)
    )


def operations_bits(resource_type: ResourceType, may: Callable[[AclOperation], bool]) -> int:
    """The KIP-430 bit field of the operations ``resource_type`` supports that ``may``
    allows."""
    return sum(1 << op for op in SUPPORTED_OPERATIONS[resource_type] if may(op))
