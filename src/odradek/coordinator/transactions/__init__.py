"""Kafka's transaction coordinator (KIP-98, KIP-360, KIP-890) as pure code.

:class:`TransactionCoordinatorCore` takes the fields of decoded InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions
requests and the time, and returns plain values (:mod:`.outputs`): the error code, the
``__transaction_state`` record to append, the transaction markers to send. It never does
I/O; the caller appends, sends, and reports back (``append_completed``,
``markers_written``).

The modules, each with one owner:

* :mod:`.records`: the bytes of ``__transaction_state`` (``TransactionLogKey`` and
  ``TransactionLogValue`` v0/v1) and which partition holds a transactional id;
* :mod:`.state`: ``TransactionState``, the immutable ``TransactionMetadata`` and its
  transitions (prepare, then complete once the record is durable);
* :mod:`.rules`: what each request does to one transactional id (its error codes, the
  KIP-360 and KIP-890 epoch rules);
* :mod:`.coordinator`: the partitions led, their metadata, pending appends, markers,
  loading, timeouts and expiration;
* :mod:`.outputs`: the values handed back; :mod:`.config`: the settings.
"""

from odradek.coordinator.transactions.config import TransactionConfig
from odradek.coordinator.transactions.coordinator import OFFSETS_TOPIC, TransactionCoordinatorCore
from odradek.coordinator.transactions.outputs import (
    AppendCause,
    ListedTransaction,
    TransactionDescription,
    TransactionListing,
    TxnActions,
    TxnAppend,
    TxnMarkers,
    TxnResult,
    coordinator_error_for_append,
    error_for_request_version,
)
from odradek.coordinator.transactions.records import TRANSACTION_STATE_TOPIC, partition_for
from odradek.coordinator.transactions.state import (
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    TransactionVersion,
)

__all__ = [
    "OFFSETS_TOPIC",
    "TRANSACTION_STATE_TOPIC",
    "AppendCause",
    "ListedTransaction",
    "TopicPartition",
    "TransactionConfig",
    "TransactionCoordinatorCore",
    "TransactionDescription",
    "TransactionListing",
    "TransactionMetadata",
    "TransactionState",
    "TransactionVersion",
    "TxnActions",
    "TxnAppend",
    "TxnMarkers",
    "TxnResult",
    "coordinator_error_for_append",
    "error_for_request_version",
    "partition_for",
]
