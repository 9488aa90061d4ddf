"""Producer id blocks: allocated through the metadata log, never handed out twice.

A producer id given to two producers would let one's sequence numbers fence or
duplicate the other's records, so the blocks must be disjoint and increasing across
controllers, restarts and replays of the log, exactly as Kafka's
``ProducerIdControlManager`` makes them.
"""

from __future__ import annotations

import itertools
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.controller.image import MetadataImage
from odradek.controller.producer_ids import (
    MAX_PRODUCER_ID,
    PRODUCER_ID_BLOCK_SIZE,
    ProducerIdAllocation,
    ProducerIdBlock,
    allocate_producer_ids,
)
from odradek.core.errors import InvariantError
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.metadata import ProducerIdsRecord, RegisterBrokerRecord


class Controller:
    """An active controller in miniature: allocate from the image, append the record to
    the metadata log, replay it (Kafka applies a record as soon as it is written)."""

    def __init__(self, brokers: dict[int, int]) -> None:
        self.log: list[object] = [
            RegisterBrokerRecord(
                broker_id=broker_id, broker_epoch=epoch, incarnation_id=uuid.UUID(int=broker_id)
            )
            for broker_id, epoch in brokers.items()
        ]
        self.image = replay(self.log)

    def allocate(
        self, broker_id: int, broker_epoch: int, block_size: int = PRODUCER_ID_BLOCK_SIZE
    ) -> ProducerIdAllocation:
        result = allocate_producer_ids(self.image, broker_id, broker_epoch, block_size)
        if result.record is not None:
            self.log.append(result.record)
            self.image.replay(result.record, len(self.log) - 1)
        return result


def replay(log: list[object]) -> MetadataImage:
    image = MetadataImage()
    for offset, record in enumerate(log):
        image.replay(record, offset)
    return image


def test_the_first_block_starts_at_zero() -> None:
    controller = Controller({1: 10})
    assert controller.image.next_producer_id == -1
    result = controller.allocate(1, 10)
    assert result == ProducerIdAllocation(
        ErrorCode.NONE,
        None,
        ProducerIdsRecord(broker_id=1, broker_epoch=10, next_producer_id=1000),
        0,
        1000,
    )
    assert controller.image.next_producer_id == 1000


def test_allocation_does_not_change_the_image() -> None:
    image = Controller({1: 10}).image
    before = image.copy()
    first = allocate_producer_ids(image, 1, 10)
    again = allocate_producer_ids(image, 1, 10)
    assert image == before
    # Without replaying the record the same block comes out again: the controller
    # must replay each record before the next allocation.
    assert (first.first_producer_id, again.first_producer_id) == (0, 0)


def test_blocks_follow_each_other_across_brokers() -> None:
    controller = Controller({1: 10, 2: 20})
    blocks = [
        (r.first_producer_id, r.size)
        for r in (
            controller.allocate(1, 10),
            controller.allocate(2, 20, 5),
            controller.allocate(1, 10),
        )
    ]
    assert blocks == [(0, 1000), (1000, 5), (1005, 1000)]
    assert controller.image.next_producer_id == 2005


@pytest.mark.parametrize(("broker_id", "epoch"), [(1, 9), (1, 11), (2, 10)])
def test_a_stale_or_unknown_broker_gets_stale_broker_epoch(broker_id: int, epoch: int) -> None:
    controller = Controller({1: 10})
    result = controller.allocate(broker_id, epoch)
    assert result.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert result.error_message
    assert (result.record, result.first_producer_id, result.size) == (None, -1, 0)
    assert controller.image.next_producer_id == -1


def test_exhausted_producer_ids_are_an_error() -> None:
    image = Controller({1: 10}).image
    image.next_producer_id = MAX_PRODUCER_ID - 1000
    assert allocate_producer_ids(image, 1, 10).first_producer_id == MAX_PRODUCER_ID - 1000
    image.next_producer_id = MAX_PRODUCER_ID - 999
    result = allocate_producer_ids(image, 1, 10)
    assert result.error_code == ErrorCode.UNKNOWN_SERVER_ERROR and result.record is None


def test_a_block_size_below_one_is_a_bug() -> None:
    with pytest.raises(InvariantError):
        allocate_producer_ids(Controller({1: 10}).image, 1, 10, 0)


def test_the_image_refuses_a_record_that_would_hand_a_block_out_again() -> None:
    controller = Controller({1: 10})
    result = controller.allocate(1, 10)
    assert result.record is not None
    with pytest.raises(InvariantError):
        controller.image.replay(result.record, len(controller.log))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.sampled_from([1, 2, 3]), st.integers(1, 2000)),
            st.just(("restart", 0)),
        ),
        max_size=40,
    )
)
def test_blocks_are_monotonic_and_never_reused_across_replays(
    steps: list[tuple[int | str, int]],
) -> None:
    controller = Controller({1: 10, 2: 20, 3: 30})
    handed_out: list[tuple[int, int]] = []
    for who, size in steps:
        if who == "restart":
            # A new controller (or a restart) rebuilds the image from the log alone.
            controller.image = replay(controller.log)
            continue
        assert isinstance(who, int)
        result = controller.allocate(who, who * 10, size)
        assert result.error_code == ErrorCode.NONE
        handed_out.append((result.first_producer_id, result.first_producer_id + result.size))
    for (_, end), (start, _) in itertools.pairwise(handed_out):
        assert start == end, "blocks must be contiguous and increasing"
    if handed_out:
        assert handed_out[0][0] == 0
        assert replay(controller.log).next_producer_id == handed_out[-1][1]


# The broker's block -------------------------------------------------------------


def test_a_block_hands_out_each_id_once_then_none() -> None:
    block = ProducerIdBlock(2000, 3)
    assert [block.take(), block.take(), block.take()] == [2000, 2001, 2002]
    assert block.exhausted and block.remaining == 0
    assert block.take() is None
    assert block.take() is None


def test_a_new_block_is_wanted_once_ninety_percent_are_used() -> None:
    block = ProducerIdBlock(0, PRODUCER_ID_BLOCK_SIZE)
    for _ in range(899):
        block.take()
    assert not block.needs_new_block and block.remaining == 101
    block.take()
    assert block.needs_new_block and not block.exhausted


def test_an_empty_block_wants_a_new_one() -> None:
    block = ProducerIdBlock(0, 0)
    assert block.exhausted and block.needs_new_block and block.take() is None


def test_a_block_built_from_an_allocation() -> None:
    result = Controller({1: 10}).allocate(1, 10, 2)
    block = ProducerIdBlock(result.first_producer_id, result.size)
    assert (block.take(), block.take(), block.take()) == (0, 1, None)


def test_a_block_refuses_an_impossible_position() -> None:
    with pytest.raises(InvariantError):
        ProducerIdBlock(10, 5, next_producer_id=16)
    with pytest.raises(InvariantError):
        ProducerIdBlock(10, -1)
