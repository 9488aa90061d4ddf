"""A transaction coordinator core on one partition of ``__transaction_state``, with a
producer id source and helpers that append records the way a shell would."""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.coordinator.transactions import (
    TransactionConfig,
    TransactionCoordinatorCore,
    TransactionVersion,
    TxnAppend,
    TxnResult,
)
from odradek.coordinator.transactions.records import Record
from odradek.protocol.error_codes import ErrorCode

TV0 = TransactionVersion.TV_0
TV1 = TransactionVersion.TV_1
TV2 = TransactionVersion.TV_2
NONE = ErrorCode.NONE
TIMEOUT_MS = 60_000
COORDINATOR_EPOCH = 7


@dataclass
class ProducerIds:
    """Producer ids from a counter; ``available`` False plays an exhausted block."""

    next_id: int = 1000
    available: bool = True
    taken: list[int] = field(default_factory=list)

    def __call__(self) -> int | None:
        if not self.available:
            return None
        self.taken.append(self.next_id)
        self.next_id += 1
        return self.taken[-1]


@dataclass
class Node:
    """A core that leads partition 0 of a one-partition ``__transaction_state``, the log
    of what it appended, and the clock."""

    core: TransactionCoordinatorCore
    ids: ProducerIds
    log: list[Record] = field(default_factory=list)
    now_ms: int = 1_000

    def tick(self, ms: int = 1) -> int:
        self.now_ms += ms
        return self.now_ms

    def complete(self, item: TxnResult | TxnAppend, error: ErrorCode = NONE) -> TxnResult:
        """Append ``item`` (a result's append; durably when ``error`` is NONE) and report
        it, as a shell would."""
        append = item.append if isinstance(item, TxnResult) else item
        assert append is not None, item
        if error == NONE:
            self.log.append((append.key, append.value))
        return self.core.append_completed(append, error, self.tick())

    def init(self, tid: str = "t", producer_id: int = -1, producer_epoch: int = -1) -> TxnResult:
        """InitProducerId through to its answer (appends complete at once)."""
        r = self.core.init_producer_id(tid, TIMEOUT_MS, self.tick(), producer_id, producer_epoch)
        return self.complete(r) if r.append is not None else r

    def add(
        self,
        tid: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[tuple[str, int]],
        tv: TransactionVersion = TV0,
    ) -> TxnResult:
        r = self.core.add_partitions(tid, producer_id, producer_epoch, partitions, self.tick(), tv)
        return self.complete(r) if r.append is not None else r

    def end(
        self,
        tid: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        tv: TransactionVersion = TV0,
    ) -> TxnResult:
        """EndTxn up to its answer: the markers (if any) are still to be written."""
        r = self.core.end_txn(tid, producer_id, producer_epoch, committed, self.tick(), tv)
        return self.complete(r) if r.append is not None else r

    def finish(self, tid: str, answer: TxnResult) -> TxnResult:
        """Write the markers of ``answer`` (or its completing append) and complete."""
        if answer.markers is not None:
            done = self.core.markers_written(tid, answer.markers.coordinator_epoch)
            return self.complete(done)
        return self.complete(answer)

    def transaction(
        self,
        tid: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool = True,
        tv: TransactionVersion = TV0,
        partitions: list[tuple[str, int]] | None = None,
    ) -> TxnResult:
        """A whole transaction: add, end, markers; returns the EndTxn answer."""
        added = self.add(tid, producer_id, producer_epoch, partitions or [("topic", 0)], tv)
        assert added.error == NONE, added
        answer = self.end(tid, producer_id, producer_epoch, committed, tv)
        assert answer.error == NONE, answer
        self.finish(tid, answer)
        return answer


def node(
    level: TransactionVersion = TV2,
    transaction_max_timeout_ms: int = 900_000,
    transactional_id_expiration_ms: int = 604_800_000,
    records: list[Record] | None = None,
) -> Node:
    ids = ProducerIds()
    config = TransactionConfig(
        transaction_state_log_num_partitions=1,
        transaction_max_timeout_ms=transaction_max_timeout_ms,
        transactional_id_expiration_ms=transactional_id_expiration_ms,
    )
    core = TransactionCoordinatorCore(config, ids, level)
    n = Node(core, ids, list(records or []))
    core.load(0, COORDINATOR_EPOCH, n.log, n.now_ms)
    return n
