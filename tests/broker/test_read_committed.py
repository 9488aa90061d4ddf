"""Transactions on a partition replica: batches and markers replicated from a leader go
into the producer state and the transaction index, Fetch and ListOffsets answer
read_committed readers below the last stable offset with the aborted transactions, and
the index survives a restart, a crash between an entry and its marker, and a torn last
entry.

The partition takes the batches as a follower does (:meth:`LocalPartition.append_replicated`):
until the transaction coordinator exists, the produce path refuses transactional
batches and nothing writes markers as a leader."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from odradek.broker.cleaner_settings import cleaner_settings
from odradek.broker.fetch import handle_fetch
from odradek.broker.list_offsets import LATEST, READ_COMMITTED, handle_list_offsets
from odradek.broker.partition import LocalPartition, load_producer_state
from odradek.protocol.control_batch import EndTxnMarker, encode_end_txn_marker
from odradek.protocol.messages import FetchRequest, ListOffsetsRequest
from odradek.protocol.messages.fetch_request import FetchPartition, FetchTopic
from odradek.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from odradek.protocol.record_batch import validate_batches
from odradek.protocol.record_codec import Record, encode_batch
from odradek.shell.log_cleaner import LogCleaner
from odradek.storage.log import LogConfig, PartitionLog
from odradek.storage.txn_index import ENTRY_SIZE, AbortedTxn
from tests.broker.harness import Harness, header, new_harness
from tests.storage.cleaner.helpers import POLICY, SMALL

A, B, C = 1000, 2000, 3000


def data(producer_id: int, offset: int, count: int = 1, *, transactional: bool = True) -> bytes:
    records = [Record(offset_delta=i, timestamp=10 + i, key=None, value=b"%d" % producer_id)
               for i in range(count)]  # fmt: skip
    return encode_batch(
        records, base_offset=offset, producer_id=producer_id, producer_epoch=0,
        base_sequence=offset, is_transactional=transactional,
    )  # fmt: skip


def marker(producer_id: int, offset: int, *, committed: bool) -> bytes:
    return encode_end_txn_marker(
        EndTxnMarker(committed, coordinator_epoch=1), producer_id=producer_id,
        producer_epoch=0, base_offset=offset, timestamp=20,
    )  # fmt: skip


def replicated(h: Harness, *batches: bytes) -> LocalPartition:
    partition = h.partition("t")
    partition.append_replicated(bytearray(b"".join(batches)), h.state.now_ms)
    partition.log.flush(h.state.now_ms)  # the high watermark is the synced log end here
    return partition


def fetch(h: Harness, offset: int, isolation: int) -> Any:
    request = FetchRequest(
        max_wait_ms=0, isolation_level=isolation,
        topics=[FetchTopic(topic="t", partitions=[
            FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
        ])],
    )  # fmt: skip
    return h.carry(handle_fetch(h.state, header(1, 11), request)).responses[0].partitions[0]


def offsets_in(records: Any) -> list[int]:
    raw = records if isinstance(records, bytes | bytearray) else records.read()
    return [h.base_offset for h in validate_batches(raw, compacted=True)]


def latest(h: Harness, isolation: int) -> int:
    request = ListOffsetsRequest(
        replica_id=-1, isolation_level=isolation,
        topics=[ListOffsetsTopic(name="t", partitions=[ListOffsetsPartition(timestamp=LATEST)])],
    )  # fmt: skip
    response = h.carry(handle_list_offsets(h.state, header(2, 7), request))
    return int(response.topics[0].partitions[0].offset)


def with_an_abort_and_an_open_transaction() -> tuple[Harness, LocalPartition]:
    """A's transaction (0-1) aborted at 4; C's plain batch at 2; B's transaction opened
    at 3, still open at 5."""
    h = new_harness()
    h.add_topic("t")
    partition = replicated(
        h, data(A, 0, 2), data(C, 2, transactional=False), data(B, 3),
        marker(A, 4, committed=False), data(B, 5),
    )  # fmt: skip
    return h, partition


def test_read_committed_readers_stop_at_the_open_transaction_and_learn_the_aborts() -> None:
    h, partition = with_an_abort_and_an_open_transaction()
    assert partition.high_watermark == 6 and partition.last_stable_offset == 3
    committed = fetch(h, 0, READ_COMMITTED)
    assert committed.last_stable_offset == 3 and committed.high_watermark == 6
    assert offsets_in(committed.records) == [0, 2]  # nothing at or past B's first batch
    assert [(t.producer_id, t.first_offset) for t in committed.aborted_transactions] == [(A, 0)]
    uncommitted = fetch(h, 0, 0)
    assert offsets_in(uncommitted.records) == [0, 2, 3, 4, 5]
    assert uncommitted.last_stable_offset == 3 and uncommitted.aborted_transactions == []
    assert latest(h, READ_COMMITTED) == 3 and latest(h, 0) == 6
    # A read that starts past the abort's marker needs it no more.
    assert fetch(h, 5, READ_COMMITTED).aborted_transactions == []
    # B commits: everything is stable once its marker is below the high watermark.
    replicated(h, marker(B, 6, committed=True))
    assert partition.last_stable_offset == 7 and latest(h, READ_COMMITTED) == 7
    everything = fetch(h, 0, READ_COMMITTED)
    assert offsets_in(everything.records) == [0, 2, 3, 4, 5, 6]
    assert [(t.producer_id, t.first_offset) for t in everything.aborted_transactions] == [(A, 0)]


def reopened(partition: LocalPartition, h: Harness) -> LocalPartition:
    log = partition.log
    log.close(sync=False)
    again = PartitionLog.open(h.disk, log.directory, LogConfig(), h.state.now_ms)
    out = LocalPartition("t", 0, partition.topic_id, again, 0)
    out.producers = load_producer_state(again, h.state.now_ms)
    return out


def test_the_index_and_the_open_transactions_survive_a_restart() -> None:
    h, partition = with_an_abort_and_an_open_transaction()
    before = partition.log.aborted_transactions(0, 6)
    assert before == [AbortedTxn(A, 0, 4, 3)]  # B's open transaction holds A's LSO at 3
    again = reopened(partition, h)
    assert again.log.offline is None
    assert again.log.aborted_transactions(0, 6) == before
    # B's transaction is open again after the replay of the log (markers included).
    assert again.producers.ongoing_transactions() == [(3, B)]
    assert again.last_stable_offset == 3


def test_an_entry_written_before_a_marker_the_crash_lost_goes_at_the_next_start() -> None:
    h, partition = with_an_abort_and_an_open_transaction()
    # The entry of B's abort is written (synced), then the node dies before the marker.
    partition.log.active.append_aborted([AbortedTxn(B, 3, 6, 7)])
    again = reopened(partition, h)
    assert again.log.offline is None
    assert again.log.aborted_transactions(0, 10) == [AbortedTxn(A, 0, 4, 3)]


def test_a_torn_last_entry_is_cut_and_other_damage_takes_the_log_offline() -> None:
    h, partition = with_an_abort_and_an_open_transaction()
    index = partition.log.active.txn_index
    assert index is not None
    path = index.handle.path
    index.handle.append(b"\x00" * (ENTRY_SIZE - 4))  # an append cut short by a crash
    again = reopened(partition, h)
    assert again.log.offline is None
    assert again.log.aborted_transactions(0, 6) == [AbortedTxn(A, 0, 4, 3)]
    assert h.disk.file_size(path) == ENTRY_SIZE
    # A flipped version field is no crash: read_committed readers would see aborted
    # records without the entry, so the log serves nothing.
    h.disk.flip_bit(path, 1, 0)
    broken = reopened(again, h)
    assert broken.log.offline is not None and ".txnindex" in broken.log.offline


def test_a_follower_truncated_below_a_marker_forgets_its_entry() -> None:
    h, partition = with_an_abort_and_an_open_transaction()
    partition.log.truncate_to(4, h.state.now_ms, "test: the leader's log diverged")
    partition.on_truncated(h.state.now_ms)
    assert partition.log.aborted_transactions(0, 10) == []
    # A's transaction is open again: its marker went with the truncation.
    assert partition.producers.ongoing_transactions() == [(0, A), (3, B)]


def keyed(producer_id: int, offset: int, key: bytes, *, transactional: bool) -> bytes:
    record = Record(offset_delta=0, timestamp=10, key=key, value=b"v%d" % offset)
    return encode_batch(
        [record], base_offset=offset, producer_id=producer_id, producer_epoch=0,
        base_sequence=offset, is_transactional=transactional,
    )  # fmt: skip


def test_the_cleaner_stops_below_the_last_stable_offset() -> None:
    """Kafka's first uncleanable offset: an undecided transaction's records, and all
    after them, stay uncleaned until the transaction is decided."""
    h = new_harness()
    config = dataclasses.replace(SMALL, compact=True, cleaning=POLICY)
    log = PartitionLog.create(h.disk, "data/keyed-0", config, 0)
    partition = LocalPartition("keyed", 0, uuid.uuid4(), log, 0)
    h.state.partitions[("keyed", 0)] = partition
    for offset in range(30):
        # Three keys written over and over by C; A's transaction opens at offset 10.
        batch = (
            keyed(A, offset, b"k0", transactional=True)
            if offset == 10
            else keyed(C, offset, b"k%d" % (offset % 3), transactional=False)
        )
        partition.append_replicated(bytearray(batch), 0)
    log.flush(0)
    assert partition.last_stable_offset == 10 and partition.high_watermark == 30
    unused: Any = None  # the commit's collaborators: only the choice of a pass is asked
    cleaner = LogCleaner(h.state, unused, h.disk, unused, lambda: cleaner_settings(h.server))
    found = cleaner._next()
    assert found is not None and found[2].first_uncleanable <= 10
    partition.append_replicated(bytearray(marker(A, 30, committed=True)), 0)
    log.flush(0)
    found = cleaner._next()
    assert found is not None and found[2].first_uncleanable > 10
