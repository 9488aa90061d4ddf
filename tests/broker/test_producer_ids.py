"""InitProducerId for idempotent producers: a fresh producer id from a block reserved in
the metadata log, on a broker and on the controller-only node that brokers forward the
request to."""

from __future__ import annotations

import dataclasses

from odradek.broker.producer_ids import ProducerIds, handle_init_producer_id
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import InitProducerIdRequest
from tests.broker.harness import Harness, header, new_harness

KEY = InitProducerIdRequest.API_KEY


def init(h: Harness, ids: ProducerIds) -> tuple[int, int]:
    outcome = handle_init_producer_id(
        h.state,
        ids,
        header(KEY, 4),
        InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1),
    )
    response = h.carry(outcome)
    return int(response.error_code), int(response.producer_id)


def test_a_registered_broker_hands_out_ids_from_a_reserved_block() -> None:
    h = new_harness()
    h.register_broker(h.node_id)
    ids = ProducerIds()
    assert init(h, ids) == (ErrorCode.NONE, 0)
    assert init(h, ids) == (ErrorCode.NONE, 1)
    assert h.image.next_producer_id == 1000


def test_a_broker_not_yet_registered_asks_the_client_to_retry() -> None:
    h = new_harness()
    assert init(h, ProducerIds())[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def test_a_controller_only_node_serves_forwarded_requests_from_its_own_block() -> None:
    """Broker-only nodes forward InitProducerId to the active controller; a
    controller-only node has no broker registration and used to answer
    COORDINATOR_LOAD_IN_PROGRESS forever."""
    h = new_harness()
    h.state.settings = dataclasses.replace(h.state.settings, is_broker=False)
    h.image.next_producer_id = 5000  # blocks already handed out to brokers
    ids = ProducerIds()
    assert init(h, ids) == (ErrorCode.NONE, 5000)
    assert h.image.next_producer_id == 6000
