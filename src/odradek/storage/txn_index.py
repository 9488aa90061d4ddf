"""A segment's transaction index (Kafka's ``.txnindex``): the aborted transactions whose
ABORT marker is in the segment, so that a read_committed fetch can tell its reader which
producers' batches to drop.

Kafka's file format, kept so that a log dir reads the same either way: entries of 34
bytes, appended in marker order, each version int16 (0), producer id int64, first offset
int64, last offset int64 (the marker's), last stable offset int64 (see
:class:`~odradek.replication.producer_state.CompletedTxn`), big-endian.

A file whose length is not a whole number of entries, or whose entries' last offsets do
not increase, is damaged: :attr:`TxnIndex.problem` says how, and the owner rebuilds the
index from the segment's markers (it holds nothing the log does not), as Kafka's
recovery does.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from odradek.storage.fs import FileHandle

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size
TXN_INDEX_VERSION = 0
TXN_INDEX_SUFFIX = ".txnindex"


class AbortedTxn(NamedTuple):
    """One aborted transaction, as the index and FetchResponse's AbortedTransactions
    (producer id and first offset) need it."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def encode_entries(txns: Iterable[AbortedTxn]) -> bytes:
    return b"".join(_ENTRY.pack(TXN_INDEX_VERSION, *t) for t in txns)


def decode_entries(data: bytes) -> tuple[list[AbortedTxn], str | None]:
    """The entries of an index file's bytes, and what is wrong with them (or None). The
    entries before the first problem are returned either way."""
    out: list[AbortedTxn] = []
    whole = len(data) - len(data) % ENTRY_SIZE
    for position in range(0, whole, ENTRY_SIZE):
        version, *fields = _ENTRY.unpack_from(data, position)
        if version != TXN_INDEX_VERSION:
            return out, f"entry at {position}: unknown version {version}"
        txn = AbortedTxn(*fields)
        if out and txn.last_offset <= out[-1].last_offset:
            previous = out[-1].last_offset
            return (
                out,
                f"entry at {position}: last offset {txn.last_offset} does not follow {previous}",
            )
        out.append(txn)
    if whole != len(data):
        return out, f"{len(data)} bytes are not a whole number of {ENTRY_SIZE}-byte entries"
    return out, None


def collect(
    entries: Sequence[AbortedTxn], fetch_offset: int, upper_bound: int
) -> tuple[list[AbortedTxn], bool]:
    """The aborted transactions a read from ``fetch_offset`` up to ``upper_bound`` (the
    offset after the last one read) overlaps, and whether the search may stop at these
    entries (Kafka's ``collectAbortedTxns``): an entry whose last stable offset reaches
    the upper bound proves that no later marker belongs to a transaction the read saw."""
    found = [t for t in entries if t.last_offset >= fetch_offset and t.first_offset < upper_bound]
    complete = any(t.last_stable_offset >= upper_bound for t in entries)
    return found, complete


class TxnIndex:
    """One segment's ``.txnindex`` on its open handle; entries are also kept in memory
    (aborts are rare, and each costs 34 bytes)."""

    def __init__(self, handle: FileHandle) -> None:
        self.handle = handle
        data = handle.read(0, handle.size())
        self.entries, self.problem = decode_entries(data)
        self.torn = bool(len(data) % ENTRY_SIZE) and len(self.entries) == len(data) // ENTRY_SIZE
        """The only damage is a partial last entry: an append cut short by a crash."""

    def append(self, txn: AbortedTxn) -> None:
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            raise ValueError(
                f"{self.handle.path}: aborted transaction at {txn.last_offset} does not "
                f"follow {self.entries[-1].last_offset}"
            )
        self.handle.append(encode_entries([txn]))
        self.entries.append(txn)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after ``offset`` (the log's new end)."""
        keep = [t for t in self.entries if t.last_offset < offset]
        if len(keep) != len(self.entries):
            self.handle.truncate(len(keep) * ENTRY_SIZE)
            self.entries = keep

    def replace(self, txns: Sequence[AbortedTxn]) -> None:
        """Rewrite the index with ``txns`` (a rebuild from the segment's markers)."""
        self.handle.truncate(0)
        self.handle.append(encode_entries(txns))
        self.entries, self.problem, self.torn = list(txns), None, False
