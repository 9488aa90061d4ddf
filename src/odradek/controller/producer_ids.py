"""Producer ids: the controller hands out blocks of them through the metadata log.

This module owns two small pieces of Kafka's producer id allocation (KIP-730):

* :func:`allocate_producer_ids`, the controller's side of AllocateProducerIds (Kafka's
  ``ProducerIdControlManager.generateNextProducerId``): the next block starts at
  :attr:`MetadataImage.next_producer_id` (0 while that is -1), and the
  ``ProducerIdsRecord`` it returns moves that mark past the block once committed and
  replayed. Because the mark lives in the replicated metadata log, a block is never
  handed out twice, whichever controller is active and however often the log is
  replayed. The active controller must replay the record into the image it allocates
  from before it allocates again (Kafka's controller applies every record to its
  in-memory state at once), and must answer the broker only once the record is
  committed.
* :class:`ProducerIdBlock`, the broker's side (Kafka's ``RPCProducerIdManager``): hand
  out ids from the current block and say when to ask for the next one, which Kafka
  does once 90% of the block is used so that InitProducerId rarely waits.

InitProducerId without a transactional id (an idempotent producer, the default of
kafka-python and of librdkafka with ``enable.idempotence=true``) always gets a fresh
producer id with epoch 0, whatever producer id and epoch the request carries: Kafka's
``TransactionCoordinator.handleInitProducerId`` "blindly accepts" it. When the broker
has no id left and the next block has not arrived, Kafka answers
COORDINATOR_LOAD_IN_PROGRESS, which clients retry. An idempotent producer that needs a
new epoch (after OUT_OF_ORDER_SEQUENCE_NUMBER, KIP-360) bumps it itself and starts the
new epoch at sequence 0; it asks InitProducerId again only when the epoch would
overflow.

Pure: the image goes in, a record and the block come out; nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.controller.image import MetadataImage
from odradek.core.invariant import invariant
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.metadata import ProducerIdsRecord

__all__ = [
    "CONTROLLER_EPOCH",
    "MAX_PRODUCER_ID",
    "PREFETCH_THRESHOLD",
    "PRODUCER_ID_BLOCK_SIZE",
    "ProducerIdAllocation",
    "ProducerIdBlock",
    "allocate_producer_ids",
]

CONTROLLER_EPOCH = -1
"""The broker epoch with which a controller-only node reserves a block for itself: it
runs the InitProducerId requests that broker-only nodes forward to it (Envelope), and
has no broker registration to check. The block is still reserved in the log, so no id
is handed out twice."""

PRODUCER_ID_BLOCK_SIZE = 1000
"""Kafka's ``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``."""

MAX_PRODUCER_ID = 2**63 - 1

PREFETCH_THRESHOLD = 0.9
"""Kafka's ``RPCProducerIdManager.PID_PREFETCH_THRESHOLD``: ask for the next block once
this share of the current one is used."""


@dataclass(frozen=True, slots=True)
class ProducerIdAllocation:
    """The outcome of one AllocateProducerIds: a block and the record that reserves it,
    or a Kafka error (then ``record`` is None and the block is empty)."""

    error_code: ErrorCode
    error_message: str | None = None
    record: ProducerIdsRecord | None = None
    first_producer_id: int = -1
    """AllocateProducerIdsResponse's ``producer_id_start``."""
    size: int = 0
    """AllocateProducerIdsResponse's ``producer_id_len``."""


def allocate_producer_ids(
    image: MetadataImage,
    broker_id: int,
    broker_epoch: int,
    block_size: int = PRODUCER_ID_BLOCK_SIZE,
) -> ProducerIdAllocation:
    """Reserve the next ``block_size`` producer ids for ``broker_id``.

    STALE_BROKER_EPOCH when the broker is not registered with ``broker_epoch`` (Kafka's
    ``ClusterControlManager.checkBrokerEpoch``), UNKNOWN_SERVER_ERROR when the int64
    space is used up. The image is not changed: replaying the returned record does that.
    """
    invariant(block_size > 0, f"producer id block size {block_size}")
    broker = image.brokers.get(broker_id)
    if broker is None and broker_epoch == CONTROLLER_EPOCH:
        pass  # the active controller itself (see CONTROLLER_EPOCH)
    elif broker is None:
        return ProducerIdAllocation(
            ErrorCode.STALE_BROKER_EPOCH, f"no broker registration found for broker {broker_id}"
        )
    elif broker.epoch != broker_epoch:
        return ProducerIdAllocation(
            ErrorCode.STALE_BROKER_EPOCH,
            f"broker {broker_id} has epoch {broker.epoch}, the request says {broker_epoch}",
        )
    # -1 means no block was ever handed out (Kafka's empty ProducerIdsImage).
    first = max(image.next_producer_id, 0)
    if first > MAX_PRODUCER_ID - block_size:
        return ProducerIdAllocation(
            ErrorCode.UNKNOWN_SERVER_ERROR,
            f"producer ids exhausted: a block of {block_size} from {first} passes the int64 limit",
        )
    record = ProducerIdsRecord(
        broker_id=broker_id, broker_epoch=broker_epoch, next_producer_id=first + block_size
    )
    return ProducerIdAllocation(ErrorCode.NONE, None, record, first, block_size)


@dataclass(slots=True)
class ProducerIdBlock:
    """A broker's block of producer ids, handed out one at a time.

    Start with ``ProducerIdBlock(0, 0)`` (empty: :attr:`needs_new_block` is true) and
    replace it with the block an AllocateProducerIds response gives. Keep the next block
    aside while the current one lasts, as Kafka does, and switch when :meth:`take`
    returns None.
    """

    first_producer_id: int
    size: int
    next_producer_id: int = field(default=-1)

    def __post_init__(self) -> None:
        invariant(self.size >= 0, f"producer id block of size {self.size}")
        if self.next_producer_id < 0:
            self.next_producer_id = self.first_producer_id
        invariant(
            self.first_producer_id <= self.next_producer_id <= self.end,
            f"next producer id {self.next_producer_id} outside block "
            f"[{self.first_producer_id}, {self.end})",
        )

    @property
    def end(self) -> int:
        """The first id after the block."""
        return self.first_producer_id + self.size

    @property
    def remaining(self) -> int:
        return self.end - self.next_producer_id

    @property
    def exhausted(self) -> bool:
        return self.next_producer_id >= self.end

    @property
    def needs_new_block(self) -> bool:
        """True once :data:`PREFETCH_THRESHOLD` of the block is used (always for an empty
        block): time to send AllocateProducerIds if no request is in flight."""
        used = self.next_producer_id - self.first_producer_id
        return self.exhausted or used >= int(self.size * PREFETCH_THRESHOLD)

    def take(self) -> int | None:
        """The next unused id of the block, or None when it is used up."""
        if self.exhausted:
            return None
        producer_id = self.next_producer_id
        self.next_producer_id += 1
        return producer_id
