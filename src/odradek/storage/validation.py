"""Validating whole record batches in a range of a segment file.

One rule, used in three places: start-up recovery
(:meth:`~odradek.storage.segment.LogSegment.recover`), the scrub
(:class:`~odradek.storage.scrub.ScrubTask`) and the log cleaner, which reads the
batches it rewrites (:mod:`odradek.storage.cleaner.cleaning`). Each batch's lengths,
magic and CRC are checked, and its base offset against the end of the batch before it.
It is apart from the segment because it touches nothing but the file handle it is
given, so it may run on a worker thread while the log goes on (the scrub, the cleaner),
and it holds no segment state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
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


class ValidBatches:
    """The valid whole batches from ``position`` (a batch boundary, the batch there at
    offset ``expected``) while they start before ``limit``, in a file of ``size`` bytes:
    their headers, each with its position in the file; :meth:`data` gives the bytes of
    the batch just yielded (a view of the chunk read, made only when asked for).

    Each batch's lengths, magic and CRC are checked, and its base offset against the
    previous batch's end (the base offset lies outside the CRC: density is what checks
    it). Iteration stops at the first problem; then :attr:`problem` says what it is,
    :attr:`position` where it is and :attr:`next_offset` the offset expected there.
    Reads a megabyte at a time (``on_read`` is told each read's bytes) and touches
    nothing but ``handle``, so it may run on a thread.
    """

    def __init__(
        self,
        handle: FileHandle,
        position: int,
        limit: int,
        size: int,
        expected: int,
        on_read: Callable[[int], None] | None = None,
    ) -> None:
        self.handle = handle
        self.position = position
        """Just past the last valid batch read so far (at the end: where the next batch,
        or the problem, starts)."""
        self.limit = limit
        self.size = size
        self.next_offset = expected
        self.problem: str | None = None
        self._on_read = on_read
        self._chunk = b""
        self._chunk_position = 0

    def data(self, header: BatchHeader) -> memoryview:
        """The bytes of ``header``'s batch, which must be the one just yielded."""
        start = header.position - self._chunk_position
        return memoryview(self._chunk)[start : start + header.size_in_bytes]

    def __iter__(self) -> Iterator[BatchHeader]:
        handle, limit, size = self.handle, self.limit, self.size
        # Kept in locals on the hot path (recovery reads every batch) and written back
        # when the iteration ends, however it ends.
        position, expected = self.position, self.next_offset
        pos = 0
        try:
            while position < limit:
                pos = 0
                length = _batch_length_at(handle, position)
                if length is None or position + length > size:
                    self.problem = (
                        f"TRUNCATED at position {position}: a batch runs past the file end"
                    )
                    return
                # Read many batches at once, but always at least the whole first one.
                chunk = handle.read(position, max(length, min(RECOVERY_CHUNK, limit - position)))
                if self._on_read is not None:
                    self._on_read(len(chunk))
                self._chunk, self._chunk_position = chunk, position
                while pos < len(chunk):
                    try:
                        # Compacted: a cleaned log holds batches that lost records, or all.
                        h = validate_batch(chunk, pos, compacted=True)
                    except InvalidRecordBatchError as e:
                        if e.problem != "TRUNCATED" or pos == 0:
                            self.problem = f"{e.problem} at position {position + pos}: {e.detail}"
                            return
                        break  # a batch straddling the chunk is read whole on the next turn
                    if h.base_offset != expected:
                        self.problem = (
                            f"offset {h.base_offset} at position {position + pos}, "
                            f"expected {expected}"
                        )
                        return
                    expected = h.next_offset
                    start, pos = pos, h.end
                    yield h._replace(position=position + start)
                position += pos
                pos = 0
        finally:
            self.position, self.next_offset = position + pos, expected


def validate_range(
    handle: FileHandle,
    position: int,
    limit: int,
    size: int,
    expected: int,
    on_batch: Callable[[BatchHeader], None],
) -> RangeCheck:
    """Validate whole batches (:class:`ValidBatches`) from ``position`` while they
    start before ``limit``; ``on_batch`` gets each valid header, its position in the
    file. Start-up recovery and the scrub run it."""
    batches = ValidBatches(handle, position, limit, size, expected)
    for header in batches:
        on_batch(header)
    return RangeCheck(batches.position, batches.next_offset, batches.problem)


def _batch_length_at(handle: FileHandle, position: int) -> int | None:
    head = handle.read(position, LOG_OVERHEAD)
    if len(head) < LOG_OVERHEAD:
        return None
    length = int.from_bytes(head[8:12], "big", signed=True)
    return None if length < 0 else length + LOG_OVERHEAD
