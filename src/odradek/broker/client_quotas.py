"""DescribeClientQuotas and AlterClientQuotas (KIP-546): client quotas in the metadata log.

The quotas live in the metadata image (:attr:`MetadataImage.client_quotas`), replayed
from ``ClientQuotaRecord``. An entity is a set of ``(entity type, name)`` pairs, the
name None for the type's default entity; the types are ``user``, ``client-id`` and
``ip``.

Describe reads the image as Kafka's controller does
(``ClientQuotaControlManager.describeClientQuotas``). Each filter component names one
entity type and a match type: EXACT (0, that name), DEFAULT (1, the default entity) or
SPECIFIED (2, any name, the default included). An entity matches when it has every
type of the filter with a matching name; with ``strict`` it must also have no other
type. No components and not strict matches every entity. A bad filter fails the whole
request: an empty or repeated type or an ip component with a user or client-id one is
INVALID_REQUEST, an unknown type UNSUPPORTED_VERSION (Kafka's codes and messages).

Alter decides as Kafka's controller (``ClientQuotaControlManager.alterClientQuotas``):

* an entity must be non-empty, of known types, each at most once, and a name must not
  be empty (null is the default); ``ip`` stands alone, and its name must be an IP
  address. Kafka would also resolve a host name there; a pure handler does no DNS, so
  a name that is not an address is refused with Kafka's message;
* ``user`` and ``client-id`` (alone or together) take ``producer_byte_rate``,
  ``consumer_byte_rate`` (whole numbers), ``request_percentage`` and
  ``controller_mutation_rate``; ``ip`` takes ``connection_creation_rate`` (a whole
  number). Any other key is INVALID_REQUEST;
* a value must be above 0, except ``controller_mutation_rate``, which may be 0 (a rate
  of 0 mutations a second). NaN is refused too, which Kafka lets through;
* a key given twice in one entry, or an entity altered by two entries, is
  INVALID_REQUEST and none of that entity's changes is made (Kafka would still write
  the first entry's records while answering with the error; here the answer is true);
* a removal of a key the entity does not have, or a value equal to the one held,
  writes nothing and succeeds.

Every refusal is per entity: one entity's error does not stop the others. With
``validate_only`` nothing is written. The records of the entities that pass go into one
batch, so they are applied together or (on a failover before the commit) not at all,
and the answer comes once they are committed; on a node that is not the active
controller the shell forwards the request there (KIP-590).
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass
from typing import Final

from odradek.broker.effects import CommitRecords, Outcome, Reply
from odradek.broker.state import BrokerState
from odradek.controller.image import CLIENT_QUOTA_ENTITY_TYPES, QuotaEntity, quota_entity
from odradek.protocol.api import RequestHeader
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from odradek.protocol.messages import alter_client_quotas_request as alter_request
from odradek.protocol.messages import alter_client_quotas_response as alter_response
from odradek.protocol.messages import describe_client_quotas_response as describe_response
from odradek.protocol.metadata import ClientQuotaRecord
from odradek.protocol.metadata import client_quota_record as quota_record

__all__ = [
    "ALTER_VERSIONS",
    "CLIENT_QUOTA_KEYS",
    "CONNECTION_CREATION_RATE",
    "CONSUMER_BYTE_RATE",
    "CONTROLLER_MUTATION_RATE",
    "DESCRIBE_VERSIONS",
    "IP_QUOTA_KEYS",
    "MATCH_DEFAULT",
    "MATCH_EXACT",
    "MATCH_SPECIFIED",
    "PRODUCER_BYTE_RATE",
    "REQUEST_PERCENTAGE",
    "entity_text",
    "handle_alter_client_quotas",
    "handle_describe_client_quotas",
]

DESCRIBE_VERSIONS: Final = (0, 1)
ALTER_VERSIONS: Final = (0, 1)

USER, CLIENT_ID, IP = CLIENT_QUOTA_ENTITY_TYPES

MATCH_EXACT: Final = 0
MATCH_DEFAULT: Final = 1
MATCH_SPECIFIED: Final = 2

PRODUCER_BYTE_RATE: Final = "producer_byte_rate"
CONSUMER_BYTE_RATE: Final = "consumer_byte_rate"
REQUEST_PERCENTAGE: Final = "request_percentage"
CONTROLLER_MUTATION_RATE: Final = "controller_mutation_rate"
CONNECTION_CREATION_RATE: Final = "connection_creation_rate"

_INT_MAX: Final = 2**31 - 1
_LONG_MAX: Final = float(2**63 - 1)


@dataclass(frozen=True, slots=True)
class _Key:
    whole: bool  # an integral type in Kafka's QuotaConfig (LONG or INT)
    maximum: float  # the largest value the type holds (math.inf for a DOUBLE)
    type_name: str  # Kafka's "too large for ..." wording
    zero_allowed: bool = False


CLIENT_QUOTA_KEYS: Final[dict[str, _Key]] = {
    PRODUCER_BYTE_RATE: _Key(True, _LONG_MAX, "a LONG"),
    CONSUMER_BYTE_RATE: _Key(True, _LONG_MAX, "a LONG"),
    REQUEST_PERCENTAGE: _Key(False, math.inf, ""),
    CONTROLLER_MUTATION_RATE: _Key(False, math.inf, "", zero_allowed=True),
}
"""The keys a user or client-id entity takes (Kafka's user and client quota configs)."""
IP_QUOTA_KEYS: Final[dict[str, _Key]] = {
    CONNECTION_CREATION_RATE: _Key(True, float(_INT_MAX), "an INT"),
}
"""The keys an ip entity takes."""

_Error = tuple[int, str]


# Describe -----------------------------------------------------------------------------


class _BadFilter(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def handle_describe_client_quotas(
    state: BrokerState, header: RequestHeader, request: DescribeClientQuotasRequest
) -> Outcome:
    try:
        exact, specified = _filter(request)
    except _BadFilter as e:
        return Reply(
            DescribeClientQuotasResponse(error_code=e.code, error_message=e.message, entries=None)
        )
    size = len(exact) + len(specified)
    entries = []
    quotas = state.image.client_quotas
    for entity in sorted(quotas, key=_entity_order):
        names = dict(entity)
        if request.strict and len(names) != size:
            continue
        if any(kind not in names or names[kind] != name for kind, name in exact.items()):
            continue
        if any(kind not in names for kind in specified):
            continue
        values = quotas[entity]
        entries.append(
            describe_response.EntryData(
                entity=[
                    describe_response.EntityData(entity_type=kind, entity_name=name)
                    for kind, name in entity
                ],
                values=[
                    describe_response.ValueData(key=key, value=values[key])
                    for key in sorted(values)
                ],
            )
        )
    return Reply(DescribeClientQuotasResponse(error_message=None, entries=entries))


def _filter(request: DescribeClientQuotasRequest) -> tuple[dict[str, str | None], set[str]]:
    """The names each entity type must have (None: the default) and the types that must
    only be present; _BadFilter with Kafka's error when the filter is not one."""
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for component in request.components:
        kind = component.entity_type
        if not kind:
            raise _BadFilter(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if kind in exact or kind in specified:
            raise _BadFilter(
                ErrorCode.INVALID_REQUEST,
                f"Entity type {kind} cannot appear more than once in the filter.",
            )
        if kind not in CLIENT_QUOTA_ENTITY_TYPES:
            raise _BadFilter(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {kind}")
        if component.match_type == MATCH_EXACT:
            if component.match is None:
                raise _BadFilter(
                    ErrorCode.INVALID_REQUEST, f"Missing name for an exact match of {kind}"
                )
            exact[kind] = component.match
        elif component.match_type == MATCH_DEFAULT:
            exact[kind] = None
        elif component.match_type == MATCH_SPECIFIED:
            specified.add(kind)
        else:
            raise _BadFilter(
                ErrorCode.INVALID_REQUEST, f"Unexpected match type: {component.match_type}"
            )
    types = set(exact) | specified
    if IP in types and (USER in types or CLIENT_ID in types):
        raise _BadFilter(
            ErrorCode.INVALID_REQUEST,
            "Invalid entity filter component combination. IP filter component should "
            "not be used with user or clientId filter component.",
        )
    return exact, specified


# Alter --------------------------------------------------------------------------------


def handle_alter_client_quotas(
    state: BrokerState, header: RequestHeader, request: AlterClientQuotasRequest
) -> Outcome:
    held = state.image.client_quotas
    # Per entity, in the order of first appearance: its error or its records.
    outcomes: dict[QuotaEntity, _Error | list[ClientQuotaRecord]] = {}
    shown: dict[QuotaEntity, list[alter_request.EntityData]] = {}
    for entry in request.entries:
        pairs = [(data.entity_type, data.entity_name) for data in entry.entity]
        entity = quota_entity(pairs)
        shown.setdefault(entity, entry.entity)
        if entity in outcomes:
            outcomes[entity] = (
                ErrorCode.INVALID_REQUEST,
                f"Ignoring duplicate entity {entity_text(entity)}",
            )
            continue
        outcomes[entity] = _alter_entity(pairs, entity, entry.ops, held.get(entity, {}))

    records: list[ClientQuotaRecord] = []
    entries: list[alter_response.EntryData] = []
    for entity, outcome in outcomes.items():
        code, message = (ErrorCode.NONE, None) if isinstance(outcome, list) else outcome
        if isinstance(outcome, list):
            records += outcome
        entries.append(
            alter_response.EntryData(
                error_code=code,
                error_message=message,
                entity=[
                    alter_response.EntityData(
                        entity_type=data.entity_type, entity_name=data.entity_name
                    )
                    for data in shown[entity]
                ],
            )
        )
    response = AlterClientQuotasResponse(entries=entries)
    if request.validate_only or not records:
        return Reply(response)
    return CommitRecords(list(records), lambda: Reply(response))


def _alter_entity(
    pairs: list[tuple[str, str | None]],
    entity: QuotaEntity,
    ops: list[alter_request.OpData],
    current: dict[str, float],
) -> _Error | list[ClientQuotaRecord]:
    changes: dict[str, float | None] = {}
    for op in ops:
        if op.key in changes:
            # Kafka answers this entity with "Ignoring duplicate entity" in the end.
            return ErrorCode.INVALID_REQUEST, f"Ignoring duplicate entity {entity_text(entity)}"
        changes[op.key] = None if op.remove else op.value
    error = _check_entity(pairs)
    if error is not None:
        return error
    keys = IP_QUOTA_KEYS if any(kind == IP for kind, _ in pairs) else CLIENT_QUOTA_KEYS
    records: list[ClientQuotaRecord] = []
    for key, value in changes.items():
        if value is None:
            if key in current:
                records.append(_record(entity, key, 0.0, remove=True))
            continue
        error = _check_value(keys, key, value)
        if error is not None:
            return error
        if current.get(key) != value:
            records.append(_record(entity, key, value, remove=False))
    return records


def _check_entity(pairs: list[tuple[str, str | None]]) -> _Error | None:
    if not pairs:
        return ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity"
    seen: set[str] = set()
    for kind, name in pairs:
        if kind in seen:
            return (
                ErrorCode.INVALID_REQUEST,
                f"Invalid client quota entity, duplicate entity entry {kind}",
            )
        seen.add(kind)
        if kind not in CLIENT_QUOTA_ENTITY_TYPES:
            return ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {kind}"
        if name == "":
            return ErrorCode.INVALID_REQUEST, f"Empty {kind} not supported"
    if IP in seen:
        if len(seen) > 1:
            # Kafka's message, its missing space included, for tools that match on it.
            return (
                ErrorCode.INVALID_REQUEST,
                "Invalid quota entity combination, IP entity shouldnot be combined with "
                "User or ClientId",
            )
        name = pairs[0][1]
        if name is not None and not _is_address(name):
            return ErrorCode.INVALID_REQUEST, f"{name} is not a valid IP or resolvable host."
    return None


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _check_value(keys: dict[str, _Key], key: str, value: float) -> _Error | None:
    spec = keys.get(key)
    if spec is None:
        return ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}"
    # `not value > 0` also refuses NaN, which compares false with everything.
    if not (value >= 0 if spec.zero_allowed else value > 0):
        lowest = "0 or more" if spec.zero_allowed else "greater than 0"
        return ErrorCode.INVALID_REQUEST, f"Quota {key} must be {lowest}"
    if not spec.whole:
        return None
    if value > spec.maximum:
        return (
            ErrorCode.INVALID_REQUEST,
            f"Proposed value for {key} is too large for {spec.type_name}.",
        )
    if abs(value % 1.0) > 1e-6:
        return ErrorCode.INVALID_REQUEST, f"{key} cannot be a fractional value."
    return None


def _record(entity: QuotaEntity, key: str, value: float, *, remove: bool) -> ClientQuotaRecord:
    return ClientQuotaRecord(
        entity=[
            quota_record.EntityData(entity_type=kind, entity_name=name) for kind, name in entity
        ],
        key=key,
        value=value,
        remove=remove,
    )


def entity_text(entity: QuotaEntity) -> str:
    """``entity`` as Kafka's ``ClientQuotaEntity.toString`` shows it in messages."""
    inner = ", ".join(f"{kind}={'null' if name is None else name}" for kind, name in entity)
    return f"ClientQuotaEntity(entries={{{inner}}})"


def _entity_order(entity: QuotaEntity) -> tuple[tuple[str, bool, str], ...]:
    return tuple((kind, name is not None, name or "") for kind, name in entity)
