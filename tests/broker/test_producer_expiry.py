"""``producer.id.expiration.ms``: an idempotent producer idle that long is forgotten by
every partition (Kafka's removeExpiredProducers), so producer state does not grow
forever on a node that runs for long; one that wrote since is kept."""

from __future__ import annotations

from odradek.broker.partition import LocalPartition, expire_producers
from odradek.protocol.record_batch import (
    validate_batches,
)
from odradek.protocol.record_codec import (
    Record,
    encode_batch,
)
from tests.broker.harness import new_harness

DAY_MS = 86_400_000


def _write(partition: LocalPartition, producer_id: int, timestamp: int) -> None:
    batch = bytearray(
        encode_batch(
            [Record(offset_delta=0, timestamp=timestamp, value=b"v")],
            producer_id=producer_id,
            producer_epoch=0,
            base_sequence=0,
        )
    )
    header = validate_batches(batch)[0]
    info = partition.log.append_as_leader(memoryview(batch), 0, timestamp)
    partition.producers.update(header, info.first_offset, info.last_offset, timestamp)


def test_idle_producers_are_forgotten_and_active_ones_kept() -> None:
    h = new_harness()
    h.add_topic("t", [[h.node_id], [h.node_id]])
    zero, one = h.partition("t", 0), h.partition("t", 1)
    _write(zero, producer_id=7, timestamp=1_000)
    _write(one, producer_id=7, timestamp=1_000)
    _write(one, producer_id=8, timestamp=1_000 + DAY_MS)
    forgotten = expire_producers([zero, one], 1_000 + DAY_MS, DAY_MS)
    assert forgotten == {("t", 0): [7], ("t", 1): [7]}
    assert len(zero.producers) == 0 and len(one.producers) == 1
    assert expire_producers([zero, one], 1_000 + DAY_MS, DAY_MS) == {}
