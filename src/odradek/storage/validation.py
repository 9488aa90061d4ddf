"""Validating whole record batches in a range of a segment file.

One rule, used in two places: start-up recovery
(:meth:`~odradek.storage.segment.LogSegment.recover`) and the scrub
(:class:`~odradek.storage.scrub.ScrubTask`). Each batch's lengths, magic and CRC are
checked, and its base offset against the end of the batch before it. It is apart from
the segment because it touches nothing but the file handle it is given, so it may run
on a worker thread while the log goes on (the scrub), and it holds no segment state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from odradek.core.errors import InvalidRecordBatchError
from odradek.protocol.record_batch import (
    LOG_OVERHEAD,
    BatchHeader,
    validate_batch,
)
from odradek.storage.fs import FileHandle

RECOVERY_CHUNK = 1024 * 1024
"""How much of the file one read takes (always at least one whole batch)."""


@dataclass(frozen=True, slots=True)
class RangeCheck:
    """What :func:`validate_range` found."""

    position: int
    """Just past the last valid batch (where the next batch, or a problem, starts)."""
    next_offset: int
    """The offset the batch at ``position`` must start at."""
    problem: str | None
    """What is wrong at ``position``, or None."""


def validate_range(
    handle: FileHandle,
    position: int,
    limit: int,
    size: int,
    expected: int,
    on_batch: Callable[[BatchHeader], None],
) -> RangeCheck:
    """Validate whole batches from ``position`` (a batch boundary, the batch there at
    offset ``expected``) while they start before ``limit``, in a file of ``size`` bytes.

    Each batch's lengths, magic and CRC are checked, and its base offset against the
    previous batch's end (the base offset lies outside the CRC: density is what checks
    it); ``on_batch`` gets each valid header, its position in the file. Reads a
    megabyte at a time and touches nothing but ``handle``, so it may run on a thread.
    """
    problem: str | None = None
    while position < limit and problem is None:
        length = _batch_length_at(handle, position)
        if length is None or position + length > size:
            problem = f"TRUNCATED at position {position}: a batch runs past the file end"
            break
        # Read many batches at once, but always at least the whole first one.
        chunk = handle.read(position, max(length, min(RECOVERY_CHUNK, limit - position)))
        pos = 0
        while pos < len(chunk):
            try:
                # Compacted: a cleaned log holds batches that lost records, or all.
                h = validate_batch(chunk, pos, compacted=True)
            except InvalidRecordBatchError as e:
                if e.problem != "TRUNCATED" or pos == 0:
                    problem = f"{e.problem} at position {position + pos}: {e.detail}"
                break  # a batch straddling the chunk is read whole on the next turn
            if h.base_offset != expected:
                problem = (
                    f"offset {h.base_offset} at position {position + pos}, expected {expected}"
                )
                break
            on_batch(h._replace(position=position + pos))
            expected = h.next_offset
            pos = h.end
        position += pos
    return RangeCheck(position, expected, problem)


def _batch_length_at(handle: FileHandle, position: int) -> int | None:
    head = handle.read(position, LOG_OVERHEAD)
    if len(head) < LOG_OVERHEAD:
        return None
    length = int.from_bytes(head[8:12], "big", signed=True)
    return None if length < 0 else length + LOG_OVERHEAD
