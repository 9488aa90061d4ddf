"""Group commit: a producer with ``acks=all`` is answered only once its data is durable.

Answering a waiter early acknowledges records a crash can lose; answering one twice
sends two responses to one request; answering out of order breaks a client's view of
its own requests. The model test checks all three over random adds and flushes.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.storage.group_commit import FlushWaiters


def test_no_waiters() -> None:
    waiters: FlushWaiters[str] = FlushWaiters()
    assert len(waiters) == 0
    assert waiters.complete(10**9) == []


def test_waiter_completes_only_once_the_flushed_offset_reaches_it() -> None:
    waiters: FlushWaiters[str] = FlushWaiters()
    waiters.add(10, "a")
    assert waiters.complete(9) == []
    assert len(waiters) == 1
    assert waiters.complete(10) == ["a"]
    assert len(waiters) == 0
    assert waiters.complete(10) == []


def test_completed_waiters_come_in_insertion_order_not_offset_order() -> None:
    waiters: FlushWaiters[str] = FlushWaiters()
    waiters.add(30, "first")
    waiters.add(10, "second")
    waiters.add(20, "third")
    waiters.add(40, "fourth")
    waiters.add(10, "fifth")
    assert waiters.complete(35) == ["first", "second", "third", "fifth"]
    assert waiters.complete(40) == ["fourth"]


def test_equal_waiters_are_kept_apart() -> None:
    # Two requests may carry equal (even identical) waiter objects; each is answered.
    waiters: FlushWaiters[int] = FlushWaiters()
    waiters.add(5, 7)
    waiters.add(5, 7)
    assert waiters.complete(5) == [7, 7]


def test_waiters_need_not_be_comparable() -> None:
    # Futures are not orderable: two waiters on one offset must never be compared.
    waiters: FlushWaiters[object] = FlushWaiters()
    first, second = object(), object()
    waiters.add(5, first)
    waiters.add(5, second)
    assert waiters.complete(5) == [first, second]


def test_flushed_offset_going_back_completes_nothing_new() -> None:
    waiters: FlushWaiters[str] = FlushWaiters()
    waiters.add(10, "a")
    waiters.add(20, "b")
    assert waiters.complete(15) == ["a"]
    assert waiters.complete(12) == []
    assert waiters.complete(20) == ["b"]


Step = tuple[str, int]

STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 50)),
        st.tuples(st.just("complete"), st.integers(-1, 55)),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(STEPS)
def test_matches_model(steps: list[Step]) -> None:
    waiters: FlushWaiters[int] = FlushWaiters()
    pending: list[tuple[int, int]] = []  # (end offset, waiter id) in insertion order
    answered: list[int] = []
    next_id = 0
    for kind, offset in steps:
        if kind == "add":
            waiters.add(offset, next_id)
            pending.append((offset, next_id))
            next_id += 1
        else:
            done = waiters.complete(offset)
            expected = [w for end, w in pending if end <= offset]
            assert done == expected
            pending = [(end, w) for end, w in pending if end > offset]
            answered += done
        assert len(waiters) == len(pending)
    assert len(answered) == len(set(answered))
    # Whatever is still pending is exactly what a final flush to the top completes.
    assert waiters.complete(10**9) == [w for _, w in pending]
    assert len(waiters) == 0
