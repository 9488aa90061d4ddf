"""ACLs and the authorizer, with the semantics of Kafka's ``StandardAuthorizer``.

An :class:`AclBinding` says that a principal from a host is allowed (or denied) an
operation on resources: one by name (``LITERAL``, where the name ``*`` means every
resource of the type) or every resource whose name starts with a prefix
(``PREFIXED``). :meth:`Authorizer.authorize` decides one action as Kafka does:

1. a super user (``super.users``) may do anything;
2. the ACLs that match the resource are looked at: a DENY that matches the principal
   (or ``User:*``), the host (or ``*``) and the operation (or ``ALL``) denies, whatever
   else matches;
3. else an ALLOW that matches allows; ALLOW of READ, WRITE, DELETE or ALTER implies
   DESCRIBE, and ALLOW of ALTER_CONFIGS implies DESCRIBE_CONFIGS (a DENY implies
   nothing);
4. else, when no ACL at all matches the resource, ``allow.everyone.if.no.acl.found``
   (default false) decides; when some do, the action is denied.

The ids are Kafka's (``ResourceType``, ``PatternType``, ``AclOperation``,
``AclPermissionType``), as the ACL requests and ``AccessControlEntryRecord`` carry them.
Pure: bindings in, decisions out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from odradek.protocol.metadata import AccessControlEntryRecord
from odradek.security.principal import KafkaPrincipal

__all__ = [
    "CLUSTER_NAME",
    "WILDCARD",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermission",
    "Authorizer",
    "PatternType",
    "ResourceType",
    "binding_from_record",
    "parse_principal",
    "parse_super_users",
]

WILDCARD: Final = "*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME: Final = "kafka-cluster"
"""The one cluster resource's name, as Kafka names it."""

# What an ALLOW of each operation also allows (Kafka's AclEntry implied operations).
_IMPLIED_BY: Final = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    """As written in the ACL: ``User:alice``, ``User:*``."""
    host: str
    operation: AclOperation
    permission: AclPermission

    def matches_resource(self, resource_type: ResourceType, name: str) -> bool:
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name in (name, WILDCARD)
        return self.pattern_type == PatternType.PREFIXED and name.startswith(self.resource_name)

    def _matches_who(self, principals: tuple[str, str], host: str) -> bool:
        return self.principal in principals and self.host in (host, WILDCARD)

    def _matches_operation(self, operation: AclOperation) -> bool:
        if self.operation in (AclOperation.ALL, operation):
            return True
        return self.permission == AclPermission.ALLOW and self.operation in _IMPLIED_BY.get(
            operation, ()
        )


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls select (Kafka's ``AclBindingFilter``): None and
    the ANY values match everything; ``MATCH`` selects every binding that applies to the
    named resource (literal, the ``*`` literal, and prefixes of the name)."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermission = AclPermission.ANY

    def matches(self, binding: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, binding.resource_type):
            return False
        if not self._matches_pattern(binding):
            return False
        if self.principal is not None and self.principal != binding.principal:
            return False
        if self.host is not None and self.host != binding.host:
            return False
        if self.operation not in (AclOperation.ANY, binding.operation):
            return False
        return self.permission in (AclPermission.ANY, binding.permission)

    def _matches_pattern(self, binding: AclBinding) -> bool:
        name, pattern = self.resource_name, self.pattern_type
        if pattern == PatternType.MATCH:
            if name is None:
                return True
            if binding.pattern_type == PatternType.LITERAL:
                return binding.resource_name in (name, WILDCARD)
            return binding.pattern_type == PatternType.PREFIXED and name.startswith(
                binding.resource_name
            )
        if pattern not in (PatternType.ANY, binding.pattern_type):
            return False
        return name is None or name == binding.resource_name


def parse_principal(text: str) -> KafkaPrincipal | None:
    """``User:alice`` as a principal; None when it is not ``TYPE:NAME``."""
    kind, colon, name = text.partition(":")
    if not colon or not kind or not name:
        return None
    return KafkaPrincipal(kind, name)


def parse_super_users(text: str) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:admin;User:broker``)."""
    return frozenset(p.strip() for p in text.split(";") if p.strip())


class Authorizer:
    """Decides actions against a set of bindings (all of them, indexed by resource)."""

    def __init__(
        self,
        bindings: Iterable[AclBinding],
        super_users: frozenset[str] = frozenset(),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.super_users = super_users
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        # Literal names and prefixes each by (type, name): a decision looks up the name,
        # the wildcard and every prefix of the name (at most its length plus one), not
        # every ACL; Kafka's StandardAuthorizer walks a sorted map to the same end.
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefixed: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefix_lengths: dict[ResourceType, list[int]] = {}
        self._by_principal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._types: set[ResourceType] = set()
        lengths: dict[ResourceType, set[int]] = {}
        for binding in bindings:
            self._types.add(binding.resource_type)
            key = (binding.resource_type, binding.principal)
            self._by_principal.setdefault(key, []).append(binding)
            if binding.pattern_type == PatternType.LITERAL:
                key = (binding.resource_type, binding.resource_name)
                self._literal.setdefault(key, []).append(binding)
            elif binding.pattern_type == PatternType.PREFIXED:
                key = (binding.resource_type, binding.resource_name)
                self._prefixed.setdefault(key, []).append(binding)
                lengths.setdefault(binding.resource_type, set()).add(len(binding.resource_name))
        self._prefix_lengths = {t: sorted(v) for t, v in lengths.items()}

    def is_super_user(self, principal: KafkaPrincipal) -> bool:
        return str(principal) in self.super_users

    def _matching(self, resource_type: ResourceType, name: str) -> Iterable[AclBinding]:
        yield from self._literal.get((resource_type, name), ())
        if name != WILDCARD:
            yield from self._literal.get((resource_type, WILDCARD), ())
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            yield from self._prefixed.get((resource_type, name[:length]), ())

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        """Whether ``principal`` from ``host`` may do ``operation`` on the resource."""
        if self.is_super_user(principal):
            return True
        principals = (str(principal), f"{principal.principal_type}:{WILDCARD}")
        found = allowed = False
        for binding in self._matching(resource_type, name):
            found = True
            if not binding._matches_who(principals, host):
                continue
            if not binding._matches_operation(operation):
                continue
            if binding.permission == AclPermission.DENY:
                return False
            if binding.permission == AclPermission.ALLOW:
                allowed = True
        if allowed:
            return True
        return not found and self.allow_everyone_if_no_acl_found

    def authorize_any(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        """Whether ``principal`` may do ``operation`` on at least one resource of the type
        (Kafka's ``authorizeByResourceType``): some ALLOW that no DENY covers."""
        if self.is_super_user(principal):
            return True
        principals = (str(principal), f"{principal.principal_type}:{WILDCARD}")
        if resource_type not in self._types:
            return self.allow_everyone_if_no_acl_found
        # Only the bindings of this principal (or of everyone) can allow or deny it.
        bindings = [b for p in principals for b in self._by_principal.get((resource_type, p), ())]
        denies = [
            b
            for b in bindings
            if b.permission == AclPermission.DENY
            and b._matches_who(principals, host)
            and b._matches_operation(operation)
        ]
        for allow in bindings:
            if allow.permission != AclPermission.ALLOW:
                continue
            if not (allow._matches_who(principals, host) and allow._matches_operation(operation)):
                continue
            if not any(_covers(deny, allow) for deny in denies):
                return True
        return False


def _covers(deny: AclBinding, allow: AclBinding) -> bool:
    """Whether ``deny`` applies to every resource ``allow`` names."""
    if deny.pattern_type == PatternType.LITERAL:
        if deny.resource_name == WILDCARD:
            return True
        return (
            allow.pattern_type == PatternType.LITERAL and allow.resource_name == deny.resource_name
        )
    return deny.pattern_type == PatternType.PREFIXED and allow.resource_name.startswith(
        deny.resource_name
    )


def binding_from_record(record: AccessControlEntryRecord) -> AclBinding | None:
    """The binding an ``AccessControlEntryRecord`` holds; None for ids this build does not
    know (a newer writer's), which then match nothing."""
    try:
        return AclBinding(
            ResourceType(record.resource_type),
            record.resource_name,
            PatternType(record.pattern_type),
            record.principal,
            record.host,
            AclOperation(record.operation),
            AclPermission(record.permission_type),
        )
    except ValueError:
        return None
