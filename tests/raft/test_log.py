"""MemoryRaftLog: appends, truncation and Kafka's end_offset_for_epoch semantics."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.core.errors import InvariantError
from odradek.raft.log import UNDEFINED, Entry, MemoryRaftLog


def log_with(epochs: list[int]) -> MemoryRaftLog:
    log = MemoryRaftLog()
    log.append([Entry(i, e, (bytes([i]),)) for i, e in enumerate(epochs)])
    return log


def test_empty_log() -> None:
    log = MemoryRaftLog()
    assert log.end_offset() == 0
    assert log.last_epoch() == 0
    assert log.end_offset_for_epoch(1) == (UNDEFINED, UNDEFINED)
    assert log.entries_from(0, 10) == []


def test_end_offset_for_epoch_follows_kafka() -> None:
    log = log_with([1, 1, 3, 3, 3, 5])
    assert log.end_offset_for_epoch(5) == (5, 6)  # latest epoch: the log end
    assert log.end_offset_for_epoch(3) == (3, 5)  # ends where epoch 5 starts
    assert log.end_offset_for_epoch(4) == (3, 5)  # largest epoch <= 4 is 3
    assert log.end_offset_for_epoch(1) == (1, 2)
    assert log.end_offset_for_epoch(2) == (1, 2)
    assert log.end_offset_for_epoch(6) == (UNDEFINED, UNDEFINED)


def test_epoch_below_the_first_answers_the_first_start() -> None:
    log = log_with([2, 2, 4])
    assert log.end_offset_for_epoch(1) == (1, 0)


def test_truncate_drops_epochs() -> None:
    log = log_with([1, 1, 3, 3, 5])
    log.truncate_to(3)
    assert log.end_offset() == 3
    assert log.last_epoch() == 3
    assert log.end_offset_for_epoch(5) == (UNDEFINED, UNDEFINED)
    assert log.end_offset_for_epoch(3) == (3, 3)
    log.truncate_to(2)
    assert log.last_epoch() == 1
    assert log.end_offset_for_epoch(3) == (UNDEFINED, UNDEFINED)
    log.append([Entry(2, 4, (b"x",))])
    assert log.end_offset_for_epoch(3) == (1, 2)


def test_append_rejects_gaps_and_lower_epochs() -> None:
    log = log_with([2])
    with pytest.raises(InvariantError):
        log.append([Entry(5, 2, (b"",))])
    with pytest.raises(InvariantError):
        log.append([Entry(1, 1, (b"",))])


def test_entries_from() -> None:
    log = log_with([1, 1, 2, 2])
    assert [e.offset for e in log.entries_from(1, 2)] == [1, 2]
    assert log.entries_from(4, 2) == []
    assert log.entry_at(3) == Entry(3, 2, (bytes([3]),))
    assert log.entry_at(4) is None


def reference_end_offset_for_epoch(epochs: list[int], epoch: int) -> tuple[int, int]:
    """Kafka's rule, computed by brute force over the entries."""
    if not epochs or epoch > epochs[-1]:
        return (UNDEFINED, UNDEFINED)
    if epoch == epochs[-1]:
        return (epoch, len(epochs))
    first_higher = next(i for i, e in enumerate(epochs) if e > epoch)
    floor = [e for e in epochs if e <= epoch]
    return (floor[-1] if floor else epoch, first_higher)


@given(
    st.lists(st.integers(1, 4), max_size=12).map(sorted),
    st.integers(0, 13),
    st.integers(1, 6),
)
def test_end_offset_for_epoch_matches_the_reference(
    epochs: list[int], truncate: int, asked: int
) -> None:
    log = log_with(epochs)
    log.truncate_to(truncate)
    kept = epochs[:truncate]
    assert log.end_offset_for_epoch(asked) == reference_end_offset_for_epoch(kept, asked)
    assert log.last_epoch() == (kept[-1] if kept else 0)
    assert log.end_offset() == len(kept)
