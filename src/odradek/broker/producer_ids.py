"""InitProducerId for idempotent producers (no transactions yet).

Each call gets a fresh producer id with epoch 0, as Kafka gives a non-transactional
producer. Ids come from blocks reserved durably in the metadata log
(``ProducerIdsRecord``), so no id is handed out twice, even across restarts.
"""

from __future__ import annotations

from odradek.broker.authorization import allowed, allowed_any
from odradek.broker.effects import CommitRecords, Outcome, Reply
from odradek.broker.state import BrokerState
from odradek.controller.producer_ids import CONTROLLER_EPOCH, ProducerIdBlock, allocate_producer_ids
from odradek.protocol.api import RequestHeader
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import InitProducerIdRequest, InitProducerIdResponse
from odradek.security.acls import AclOperation, ResourceType

VERSIONS = (0, 5)


class ProducerIds:
    """This node's current block of producer ids."""

    def __init__(self) -> None:
        self.block = ProducerIdBlock(0, 0)


def handle_init_producer_id(
    state: BrokerState, ids: ProducerIds, header: RequestHeader, request: InitProducerIdRequest
) -> Outcome:
    if request.transactional_id is not None:
        if not allowed(
            state, header, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
            request.transactional_id,
        ):  # fmt: skip
            return Reply(
                InitProducerIdResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            )
        # No transaction coordinator yet: the client retries, then gives up.
        return Reply(InitProducerIdResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE))
    # An idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic
    # (Kafka's rule since 2.8, so that a producer with topic ACLs needs nothing more).
    if not (
        allowed(state, header, AclOperation.IDEMPOTENT_WRITE)
        or allowed_any(state, header, AclOperation.WRITE, ResourceType.TOPIC)
    ):
        return Reply(InitProducerIdResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    taken = ids.block.take()
    if taken is not None:
        return Reply(InitProducerIdResponse(producer_id=taken, producer_epoch=0))
    node = state.settings.node_id
    broker = state.image.brokers.get(node)
    if broker is not None:
        epoch = broker.epoch
    elif not state.settings.is_broker:
        # A controller-only node answering a request a broker forwarded to it.
        epoch = CONTROLLER_EPOCH
    else:
        return Reply(InitProducerIdResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
    allocation = allocate_producer_ids(state.image, node, epoch)
    if allocation.record is None:
        return Reply(InitProducerIdResponse(error_code=allocation.error_code))

    def answer() -> Outcome:
        ids.block = ProducerIdBlock(allocation.first_producer_id, allocation.size)
        return handle_init_producer_id(state, ids, header, request)

    return CommitRecords([allocation.record], answer)
