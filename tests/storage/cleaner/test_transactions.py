"""Cleaning a log that holds transactions, by Kafka's rules: an aborted transaction's
records go and never supersede a committed value, a committed one's are cleaned like
any others, the markers stay, and the transaction index moves with them into the
cleaned segments, through a power loss at any step of the swap."""

from __future__ import annotations

from odradek.protocol.control_batch import EndTxnMarker, encode_end_txn_marker
from odradek.protocol.record_batch import validate_batches
from odradek.storage.log import PartitionLog
from odradek.storage.txn_index import AbortedTxn
from odradek.testing.sim_disk import PowerLoss, SimDisk
from tests.storage.cleaner.helpers import SMALL, batches_of, clean, keyed, records_of
from tests.storage.helpers import DIR, new_disk

A, B = 1000, 2000
KEYS = [b"k%d" % i for i in range(5)]


def append(
    log: PartitionLog, batch: bytes | bytearray, aborted: list[AbortedTxn] | None = None
) -> int:
    """Append as leader; the offset the batch got."""
    first = log.log_end_offset
    log.append_as_leader(memoryview(bytearray(batch)), 1, 0, aborted or [])
    return first


def marker(producer_id: int, *, committed: bool) -> bytes:
    return encode_end_txn_marker(
        EndTxnMarker(committed, 3), producer_id=producer_id, producer_epoch=0, timestamp=1_000
    )


def with_transactions(disk: SimDisk) -> tuple[PartitionLog, AbortedTxn]:
    """Every key written; then A writes k0 and k1 in a transaction it aborts and B
    writes k2 in one it commits; then enough later values of k3 and k4 to roll the
    segments, so that all of it lies below the active segment."""
    log = PartitionLog.create(disk, DIR, SMALL, 0)
    for key in KEYS:
        append(log, keyed([(key, b"first-" + key)]))
    txn = {"is_transactional": True}
    a_first = append(log, keyed([(KEYS[0], b"aborted")], producer_id=A, base_sequence=0, **txn))
    append(log, keyed([(KEYS[1], b"aborted")], producer_id=A, base_sequence=1, **txn))
    append(log, keyed([(KEYS[2], b"committed")], producer_id=B, base_sequence=0, **txn))
    end = log.log_end_offset
    aborted = AbortedTxn(A, a_first, end, a_first + 2)  # B's open transaction at a_first + 2
    append(log, marker(A, committed=False), [aborted])
    append(log, marker(B, committed=True))
    for r in range(12):
        append(log, keyed([(KEYS[3 + r % 2], b"later-%d" % r)]))
    log.flush(0)
    return log, aborted


def values(log: PartitionLog) -> dict[bytes, bytes | None]:
    """Each key's last value as a consumer reading it all sees it (aborted records
    included: a read_uncommitted consumer)."""
    last: dict[bytes, bytes | None] = {}
    for _offset, key, value in records_of(log):
        if key is not None and not key.startswith(b"\x00\x00"):  # not a control key
            last[key] = value
    return last


def markers_in(log: PartitionLog) -> int:
    return sum(
        h.is_control for data in batches_of(log) for h in validate_batches(data, compacted=True)
    )


def test_aborted_records_go_committed_values_stay_and_markers_keep_their_index() -> None:
    disk = new_disk()
    log, aborted = with_transactions(disk)
    before = values(log)
    assert before[KEYS[0]] == b"aborted"  # what a read_uncommitted consumer sees before
    result = clean(log, 100)
    assert result is not None and result.stats.records_removed > 0
    # The marker's segment is among those cleaned and swapped in.
    assert any(c.base_offset <= aborted.last_offset < c.next_offset for c in result.segments)
    after = values(log)
    # A's aborted records are gone, and k0 and k1 keep their committed values: an
    # aborted value never made the cleaner drop the committed one before it.
    assert after[KEYS[0]] == b"first-k0" and after[KEYS[1]] == b"first-k1"
    assert after[KEYS[2]] == b"committed" and after[KEYS[3]] == before[KEYS[3]]
    assert b"aborted" not in [v for _o, _k, v in records_of(log)]
    # Both markers stay, and so does the abort's entry, now in the cleaned segment.
    assert markers_in(log) == 2
    assert log.aborted_transactions(0, log.log_end_offset) == [aborted]
    log.check_consistency()
    log.close()
    reopened = PartitionLog.open(disk, DIR, SMALL, 200, recovery_point=0)
    assert reopened.offline is None and values(reopened) == after
    assert reopened.aborted_transactions(0, reopened.log_end_offset) == [aborted]
    assert not [n for n in disk.listdir(DIR) if n.endswith((".cleaned", ".swap"))]


def test_a_power_loss_at_every_step_leaves_the_old_log_or_the_new_with_its_index() -> None:
    disk = new_disk()
    log, aborted = with_transactions(disk)
    start = disk.operations
    clean(log, 100)
    steps = disk.operations - start
    outcomes = set()
    for at in range(steps + 1):
        disk = new_disk(at)
        log, _ = with_transactions(disk)
        before = values(log)
        disk.schedule_power_loss(at)
        try:
            clean(log, 100)
            disk.crash()
        except PowerLoss:
            pass
        reopened = PartitionLog.open(disk, DIR, SMALL, 1_000, recovery_point=0)
        assert reopened.offline is None, at
        reopened.check_consistency()
        assert not [n for n in disk.listdir(DIR) if n.endswith((".cleaned", ".swap"))], at
        # The abort's entry is there exactly once, whichever log the crash left.
        assert reopened.aborted_transactions(0, reopened.log_end_offset) == [aborted], at
        seen = values(reopened)
        outcomes.add("old" if seen == before else "new")
        if seen != before:
            assert seen[KEYS[0]] == b"first-k0" and seen[KEYS[2]] == b"committed", at
    assert outcomes == {"old", "new"}
