"""FindCoordinator for groups: which node leads the group's ``__consumer_offsets`` partition.

The coordinator of a group is the leader of partition :func:`partition_for` of
``__consumer_offsets``; only the broker knows leaders and addresses, so it passes
``leader_of``. When the topic does not exist yet or the partition has no live leader,
the answer is COORDINATOR_NOT_AVAILABLE and the client retries (the broker creates the
topic on the first lookup, as Kafka does).
"""

from __future__ import annotations

from collections.abc import Callable

from odradek.coordinator.records import partition_for
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from odradek.protocol.messages.find_coordinator_response import (
    Coordinator,
    FindCoordinatorResponse,
)

__all__ = ["GROUP_KEY_TYPE", "TRANSACTION_KEY_TYPE", "Node", "find_coordinator"]

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1

Node = tuple[int, str, int]
"""A broker as ``(node_id, host, port)``."""


def find_coordinator(
    request: FindCoordinatorRequest,
    version: int,
    *,
    offsets_topic_num_partitions: int,
    leader_of: Callable[[int], Node | None],
) -> FindCoordinatorResponse:
    """Answer FindCoordinator: one key before v4, a batch of ``coordinator_keys`` from v4.

    ``leader_of(partition)`` gives the live leader of that ``__consumer_offsets``
    partition, or None. Transaction coordinators (key type 1) are not implemented yet and
    get COORDINATOR_NOT_AVAILABLE; other key types INVALID_REQUEST.
    """
    keys = list(request.coordinator_keys) if version >= 4 else [request.key]
    answers = [
        _lookup(key, request.key_type, offsets_topic_num_partitions, leader_of) for key in keys
    ]
    if version >= 4:
        return FindCoordinatorResponse(
            coordinators=[
                Coordinator(
                    key=key,
                    node_id=node_id,
                    host=host,
                    port=port,
                    error_code=int(error),
                    error_message=message,
                )
                for key, (error, message, (node_id, host, port)) in zip(keys, answers, strict=True)
            ]
        )
    error, message, (node_id, host, port) = answers[0]
    return FindCoordinatorResponse(
        error_code=int(error),
        error_message=message if version >= 1 else "",
        node_id=node_id,
        host=host,
        port=port,
    )


_NO_NODE: Node = (-1, "", -1)


def _lookup(
    key: str,
    key_type: int,
    partitions: int,
    leader_of: Callable[[int], Node | None],
) -> tuple[ErrorCode, str | None, Node]:
    if key_type == TRANSACTION_KEY_TYPE:
        return (
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            "transactions are not supported yet",
            _NO_NODE,
        )
    if key_type != GROUP_KEY_TYPE:
        return ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}", _NO_NODE
    node = leader_of(partition_for(key, partitions))
    if node is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, _NO_NODE
    return ErrorCode.NONE, None, node
