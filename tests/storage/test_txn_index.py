"""A segment's transaction index: Kafka's file format, the aborted transactions a
read_committed fetch overlaps, and damage found rather than trusted."""

from __future__ import annotations

import struct

import pytest

from odradek.storage.txn_index import (
    ENTRY_SIZE,
    AbortedTxn,
    TxnIndex,
    collect,
    decode_entries,
    encode_entries,
)
from tests.storage.helpers import DIR, new_disk

PATH = f"{DIR}/00000000000000000000.txnindex"


def opened() -> TxnIndex:
    disk = new_disk()
    disk.makedirs(DIR)
    return TxnIndex(disk.open(PATH, create=True))


def test_entries_are_kafkas_34_bytes_each_and_read_back() -> None:
    txns = [AbortedTxn(7, 0, 5, 6), AbortedTxn(8, 2, 9, 10)]
    data = encode_entries(txns)
    assert len(data) == 2 * ENTRY_SIZE == 68
    # version int16, producer id, first offset, last offset, last stable offset: int64s
    assert data[:ENTRY_SIZE] == struct.pack(">hqqqq", 0, 7, 0, 5, 6)
    assert decode_entries(data) == (txns, None)


def test_an_index_keeps_its_entries_across_a_reopen_and_truncates_by_marker() -> None:
    index = opened()
    index.append(AbortedTxn(7, 0, 5, 6))
    index.append(AbortedTxn(8, 2, 9, 10))
    index.append(AbortedTxn(7, 11, 14, 15))
    with pytest.raises(ValueError, match="does not follow"):
        index.append(AbortedTxn(9, 3, 12, 13))
    reopened = TxnIndex(index.handle)
    assert reopened.entries == index.entries and reopened.problem is None
    reopened.truncate_to(10)  # the marker at 14 goes; the one at 9 stays
    assert reopened.entries == [AbortedTxn(7, 0, 5, 6), AbortedTxn(8, 2, 9, 10)]
    assert TxnIndex(index.handle).entries == reopened.entries


def test_a_read_is_told_of_every_abort_it_overlaps_and_of_no_other() -> None:
    entries = [AbortedTxn(1, 0, 3, 4), AbortedTxn(2, 5, 20, 8), AbortedTxn(3, 8, 12, 21)]
    # A read of [4, 6): producer 1's marker at 3 is behind it; producer 2's transaction
    # opened inside it, and its last stable offset (8) passes the read's end, so no later
    # marker can belong to a transaction the read saw: the search may stop.
    assert collect(entries, 4, 6) == ([AbortedTxn(2, 5, 20, 8)], True)
    # A read of [0, 30) sees all three; the last entry's LSO (21) is below 30, so later
    # segments may hold markers of transactions it saw.
    found, complete = collect(entries, 0, 30)
    assert found == entries and not complete
    # A read wholly after every marker overlaps none.
    assert collect(entries, 21, 25) == ([], False)


FIRST, SECOND = AbortedTxn(7, 0, 5, 6), AbortedTxn(8, 2, 9, 10)


@pytest.mark.parametrize(
    ("damage", "problem", "kept"),
    [
        (lambda data: data + b"\x00" * 5, "not a whole number", [FIRST, SECOND]),
        (lambda data: b"\x00\x07" + data[2:], "unknown version 7", []),
        (lambda data: data[ENTRY_SIZE:] + data[:ENTRY_SIZE], "does not follow", [SECOND]),
    ],
)
def test_a_damaged_index_says_so_and_keeps_what_came_before(
    damage: object, problem: str, kept: list[AbortedTxn]
) -> None:
    data = encode_entries([FIRST, SECOND])
    entries, found = decode_entries(damage(data))  # type: ignore[operator]
    assert found is not None and problem in found
    assert entries == kept


def test_a_rebuild_replaces_a_damaged_index() -> None:
    index = opened()
    index.handle.append(b"\xff" * 40)
    damaged = TxnIndex(index.handle)
    assert damaged.problem is not None and damaged.entries == []
    damaged.replace([AbortedTxn(7, 0, 5, 6)])
    assert TxnIndex(index.handle).entries == [AbortedTxn(7, 0, 5, 6)]
    assert TxnIndex(index.handle).problem is None
