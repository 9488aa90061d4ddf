"""ElectLeaders: move leadership back to preferred replicas (``kafka-leader-election``).

The broker decides on its image and commits the PartitionChangeRecords through the
controller (forwarded there when this node is not the active controller). Unclean
elections by request are refused here: they are the operator's deliberate data-loss
decision and go through `odradek partitions recover` with its loss report.
"""

from __future__ import annotations

from odradek.broker.effects import CommitRecords, Outcome, Reply
from odradek.broker.state import BrokerState
from odradek.controller.preferred import PREFERRED, ElectionResult, preferred_election
from odradek.protocol.api import RequestHeader
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import ElectLeadersRequest, ElectLeadersResponse
from odradek.protocol.messages.elect_leaders_response import PartitionResult, ReplicaElectionResult

VERSIONS = (0, 2)


def handle_elect_leaders(
    state: BrokerState, header: RequestHeader, request: ElectLeadersRequest
) -> Outcome:
    wanted = (
        None
        if request.topic_partitions is None
        else [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    )
    if request.election_type != PREFERRED:
        results = [
            ElectionResult(
                t, p, ErrorCode.INVALID_REQUEST, "unclean elections: use odradek partitions recover"
            )
            for t, p in (wanted or [])
        ]
        return Reply(_response(results))
    records, results = preferred_election(state.image, wanted)
    response = _response(
        results if wanted is not None else [r for r in results if r.error == ErrorCode.NONE]
    )
    if not records:
        return Reply(response)
    return CommitRecords(list(records), lambda: Reply(response))


def _response(results: list[ElectionResult]) -> ElectLeadersResponse:
    by_topic: dict[str, list[PartitionResult]] = {}
    for r in results:
        by_topic.setdefault(r.topic, []).append(
            PartitionResult(partition_id=r.partition, error_code=r.error, error_message=r.message)
        )
    return ElectLeadersResponse(
        error_code=ErrorCode.NONE,
        replica_election_results=[
            ReplicaElectionResult(topic=t, partition_result=ps) for t, ps in by_topic.items()
        ],
    )
