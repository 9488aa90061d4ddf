"""The follower's half of an incremental fetch session: what each request names and
forgets, and how every kind of failure starts the session over."""

from __future__ import annotations

import uuid

from odradek.protocol.error_codes import ErrorCode
from odradek.replication.fetch_session import (
    INITIAL_EPOCH,
    Answer,
    FetchSessionHandler,
    PartitionKey,
    Position,
)

T = uuid.UUID(int=7)
A: PartitionKey = (T, 0)
B: PartitionKey = (T, 1)
C: PartitionKey = (T, 2)


def pos(offset: int, epoch: int = 3) -> Position:
    return (epoch, offset, epoch, 1 << 20)


def opened(session_id: int = 42) -> FetchSessionHandler:
    handler = FetchSessionHandler()
    first = handler.build({A: pos(0), B: pos(0)})
    assert handler.on_answer(first, ErrorCode.NONE, session_id) is Answer.FULL
    return handler


def test_the_first_request_is_full_and_asks_for_a_session() -> None:
    handler = FetchSessionHandler()
    request = handler.build({A: pos(0), B: pos(5)})
    assert (request.session_id, request.session_epoch) == (0, INITIAL_EPOCH)
    assert request.send == {A: pos(0), B: pos(5)} and request.forget == []
    assert not request.incremental
    assert handler.on_answer(request, ErrorCode.NONE, 42) is Answer.FULL
    assert (handler.session_id, handler.epoch) == (42, 1)


def test_incremental_requests_name_only_what_moved_and_forget_what_is_gone() -> None:
    handler = opened()
    same = handler.build({A: pos(0), B: pos(0)})
    assert (same.session_id, same.session_epoch) == (42, 1)
    assert same.send == {} and same.forget == [] and same.incremental
    assert handler.on_answer(same, ErrorCode.NONE, 42) is Answer.INCREMENTAL
    moved = handler.build({A: pos(9), C: pos(0)})
    assert moved.session_epoch == 2
    assert moved.send == {A: pos(9), C: pos(0)} and moved.forget == [B]
    handler.on_answer(moved, ErrorCode.NONE, 42)
    # A new leader epoch at the same offset is a move too.
    epoch = handler.build({A: pos(9, epoch=4), C: pos(0)})
    assert epoch.send == {A: pos(9, epoch=4)} and epoch.session_epoch == 3


def test_a_request_without_an_answer_closes_the_session_and_starts_over_full() -> None:
    handler = opened()
    request = handler.build({A: pos(3), B: pos(0)})
    handler.on_failure()
    again = handler.build({A: pos(3), B: pos(0)})
    # The old id goes along at epoch 0: the leader drops that session and opens another.
    assert (again.session_id, again.session_epoch) == (42, INITIAL_EPOCH)
    assert again.send == {A: pos(3), B: pos(0)}
    assert request.incremental and not again.incremental


def test_session_errors_ask_again_at_once_with_a_full_request() -> None:
    handler = opened()
    request = handler.build({A: pos(1), B: pos(0)})
    assert handler.on_answer(request, ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0) is Answer.RETRY
    # The leader lost it (a restart): a new session, no old id to close.
    assert (handler.session_id, handler.epoch) == (0, INITIAL_EPOCH)
    for error in (ErrorCode.INVALID_FETCH_SESSION_EPOCH, ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR):
        handler = opened()
        request = handler.build({A: pos(1), B: pos(0)})
        assert handler.on_answer(request, error, 0) is Answer.RETRY
        full = handler.build({A: pos(1), B: pos(0)})
        assert (full.session_id, full.session_epoch) == (42, INITIAL_EPOCH)
        assert full.send == {A: pos(1), B: pos(0)}


def test_a_leader_without_room_gets_full_requests() -> None:
    handler = FetchSessionHandler()
    first = handler.build({A: pos(0)})
    assert handler.on_answer(first, ErrorCode.NONE, 0) is Answer.FULL
    second = handler.build({A: pos(0)})
    assert (second.session_id, second.session_epoch) == (0, INITIAL_EPOCH)
    assert second.send == {A: pos(0)}


def test_another_error_of_the_whole_request_reads_as_a_full_answer_and_starts_over() -> None:
    handler = opened()
    request = handler.build({A: pos(1), B: pos(0)})
    assert handler.on_answer(request, ErrorCode.UNKNOWN_SERVER_ERROR, 0) is Answer.FULL
    assert handler.build({A: pos(1), B: pos(0)}).session_epoch == INITIAL_EPOCH
