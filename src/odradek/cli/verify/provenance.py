"""Read from the nodes' logs which batch wrote each copy of a duplicated value (see
:mod:`odradek.verify.provenance` for what the answer means)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from odradek.protocol.record_batch import (
    iter_batches,
)
from odradek.protocol.record_codec import (
    decode_records,
)
from odradek.verify.provenance import Copy

__all__ = ["find_copies"]


def find_copies(
    data_dirs: Sequence[Path], topic: str, partition: int, value: str, offsets: Iterable[int]
) -> dict[int, Copy]:
    """``offset -> Copy`` for each of ``offsets`` where some node's log holds ``value``.

    A node that was down at the end may hold another history at an offset; only a batch
    whose record there is ``value`` counts."""
    wanted = set(offsets)
    expected = value.encode()
    found: dict[int, Copy] = {}
    for data in data_dirs:
        for segment in sorted((data / f"{topic}-{partition}").glob("*.log")):
            buf = segment.read_bytes()
            for header in iter_batches(buf):
                inside = [
                    o
                    for o in wanted - found.keys()
                    if header.base_offset <= o <= header.base_offset + header.last_offset_delta
                ]
                if not inside:
                    continue
                for record in decode_records(buf, header.position):
                    offset = header.base_offset + record.offset_delta
                    if offset in inside and record.value == expected:
                        sequence = (
                            header.base_sequence + record.offset_delta
                            if header.base_sequence >= 0
                            else -1
                        )
                        found[offset] = Copy(
                            offset, header.producer_id, header.producer_epoch, sequence
                        )
            if found.keys() >= wanted:
                return found
    return found
