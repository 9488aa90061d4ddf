"""ElectLeaders (``kafka-leader-election``): PREFERRED moves leadership back to preferred
replicas; UNCLEAN gives a leaderless partition a leader even from outside the ISR.

The broker decides on its image and commits the PartitionChangeRecords through the
controller (forwarded there when this node is not the active controller). An unclean
election is the operator's deliberate data-loss decision, Kafka's semantics, and is
logged as such by the node; ``odradek partitions recover`` sends it with the replica to
elect in tagged field :data:`RECOVER_FROM_TAG` (a Kafka broker ignores the tag) and
prints what it gives up.
"""

from __future__ import annotations

from odradek.broker.effects import CommitRecords, Outcome, Reply
from odradek.broker.state import BrokerState
from odradek.controller.elections import requested_unclean_election
from odradek.controller.image import LEADER_RECOVERY_RECOVERING
from odradek.controller.preferred import PREFERRED, UNCLEAN, ElectionResult, preferred_election
from odradek.controller.unclean_history import history_records
from odradek.protocol.api import RequestHeader
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import ElectLeadersRequest, ElectLeadersResponse
from odradek.protocol.messages.elect_leaders_response import PartitionResult, ReplicaElectionResult

VERSIONS = (0, 2)
RECOVER_FROM_TAG = 10_000
"""Odradek's tagged field of ElectLeadersRequest: the broker id (int32) an UNCLEAN
election must choose."""


def recover_from(request: ElectLeadersRequest) -> int | None:
    """The replica named in :data:`RECOVER_FROM_TAG`, if any."""
    for tag, data in request.unknown_tagged_fields:
        if tag == RECOVER_FROM_TAG and len(data) == 4:
            return int.from_bytes(data, "big", signed=True)
    return None


def handle_elect_leaders(
    state: BrokerState, header: RequestHeader, request: ElectLeadersRequest
) -> Outcome:
    wanted = (
        None
        if request.topic_partitions is None
        else [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    )
    if request.election_type == UNCLEAN:
        if wanted is None:
            # Kafka elects every leaderless partition; here the loss is decided one
            # named partition at a time.
            return Reply(_response([], ErrorCode.INVALID_REQUEST))
        unclean, unclean_results = requested_unclean_election(
            state.image, wanted, recover_from(request)
        )
        response = _response(unclean_results)
        if not unclean:
            return Reply(response)
        history = history_records(
            state.image,
            [r for r in unclean if r.leader_recovery_state == LEADER_RECOVERY_RECOVERING],
            state.now_ms,
            requested=True,
        )
        return CommitRecords([*unclean, *history], lambda: Reply(response))
    if request.election_type != PREFERRED:
        return Reply(_response([], ErrorCode.INVALID_REQUEST))
    records, results = preferred_election(state.image, wanted)
    response = _response(
        results if wanted is not None else [r for r in results if r.error == ErrorCode.NONE]
    )
    if not records:
        return Reply(response)
    return CommitRecords(list(records), lambda: Reply(response))


def _response(results: list[ElectionResult], error: int = ErrorCode.NONE) -> ElectLeadersResponse:
    by_topic: dict[str, list[PartitionResult]] = {}
    for r in results:
        by_topic.setdefault(r.topic, []).append(
            PartitionResult(partition_id=r.partition, error_code=r.error, error_message=r.message)
        )
    return ElectLeadersResponse(
        error_code=error,
        replica_election_results=[
            ReplicaElectionResult(topic=t, partition_result=ps) for t, ps in by_topic.items()
        ],
    )
