"""Where each copy of a duplicated value came from: the producer id, producer epoch and
sequence of the batch that holds it, read from a node's log after the run.

An idempotent producer's duplicate has two possible causes, and only one is the
broker's fault:

* both copies carry the same producer id, epoch and sequence: the broker appended a
  retry its sequence check should have recognised (a broker bug);
* the copies carry different producer epochs or ids: the client sent the value again
  after starting a new epoch or producer (librdkafka bumps the epoch after its own
  message timeouts, KIP-360, and the broker cannot know the two are one message);
* same producer and epoch but another sequence: the client sent it twice in one epoch.

Pure: the caller reads the batch headers (``cli/verify/provenance.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "ACROSS_EPOCHS",
    "SAME_SEQUENCE",
    "UNKNOWN",
    "WITHIN_EPOCH",
    "Copy",
    "classify",
    "duplicate_offsets",
]

SAME_SEQUENCE = "same producer, epoch and sequence: the broker missed a retry"
ACROSS_EPOCHS = "another producer epoch or id: the client resent it after a bump"
WITHIN_EPOCH = "same producer epoch, another sequence: the client sent it twice"
UNKNOWN = "batch not found in any node's log"


@dataclass(frozen=True, slots=True)
class Copy:
    """One copy of a value: its offset and the batch identity that wrote it."""

    offset: int
    producer_id: int
    producer_epoch: int
    sequence: int  # the record's own: the batch's base sequence plus its position


def duplicate_offsets(
    final: Mapping[int, Sequence[tuple[int, str]]], values: Sequence[str]
) -> dict[str, tuple[int, list[int]]]:
    """``value -> (partition, offsets)`` for each value in ``values`` that the final
    read holds more than once."""
    wanted = set(values)
    found: dict[str, tuple[int, list[int]]] = {}
    for partition, pairs in sorted(final.items()):
        for offset, value in pairs:
            if value in wanted:
                found.setdefault(value, (partition, []))[1].append(offset)
    return {v: (p, sorted(o)) for v, (p, o) in found.items() if len(o) > 1}


def classify(copies: Sequence[Copy | None]) -> str:
    """The cause of one duplicate, from its copies (None where no batch was found)."""
    if any(c is None for c in copies):
        return UNKNOWN
    known = [c for c in copies if c is not None]
    producers = {(c.producer_id, c.producer_epoch) for c in known}
    if len(producers) > 1:
        return ACROSS_EPOCHS
    if len({c.sequence for c in known}) == 1:
        return SAME_SEQUENCE
    return WITHIN_EPOCH
