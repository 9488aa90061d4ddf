"""The records of a batch as the cleaner needs them: where each lies, its offset delta,
timestamp delta and key, and whether it is a tombstone; nothing else decoded.

A kept record is copied as the bytes it was (its timestamp and offset deltas are
relative to its batch's base fields, which the cleaner keeps), so the cleaner never
builds a record object: the walk costs a few varints a record, where decoding every
field and header costs several times that (``bench/bench_cleaner.py``). Fields beyond
the value's length (the headers) are not walked; the record's own length bounds it, and
the walk checks that the records fill the section exactly, ``recordsCount`` of them.
"""

from __future__ import annotations

from typing import NamedTuple

from odradek.core.errors import DecodeError
from odradek.protocol.compression import decompress
from odradek.protocol.primitives import decode_varint, decode_varlong
from odradek.protocol.record_batch import (
    LOG_OVERHEAD,
    RECORDS_OFFSET,
    BatchHeader,
    Buffer,
    Compression,
)


class RawRecord(NamedTuple):
    start: int
    """Where the record (its length varint) starts in the records section."""
    end: int
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    tombstone: bool


def records_section(batch: Buffer, header: BatchHeader) -> bytes:
    """The records section of the one batch ``batch``, decompressed if need be."""
    section = memoryview(batch)[RECORDS_OFFSET : header.batch_length + LOG_OVERHEAD]
    if header.compression == Compression.NONE:
        return bytes(section)  # indexing bytes is faster than a view, and the walk indexes
    return decompress(header.compression, section)


def _varint(section: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    """A zigzag varint; one- and two-byte encodings (what records carry) inline."""
    b = section[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    if pos + 1 < end:
        c = section[pos + 1]
        if c < 0x80:
            raw = (b & 0x7F) | (c << 7)
            return (raw >> 1) ^ -(raw & 1), pos + 2
    return decode_varint(section, pos, end)


def raw_records(section: bytes | memoryview, count: int) -> list[RawRecord]:
    """Walk ``count`` records of a records section; DecodeError if they do not fill it."""
    out: list[RawRecord] = []
    end = len(section)
    pos = 0
    varint = _varint
    try:
        for index in range(count):
            start = pos
            length, pos = varint(section, pos, end)
            record_end = pos + length
            if length < 1 or record_end > end:
                raise DecodeError(f"record {index} of length {length} runs outside its batch")
            pos += 1  # attributes
            b = section[pos]
            if b < 0x80:
                timestamp_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                timestamp_delta, pos = decode_varlong(section, pos, record_end)
            offset_delta, pos = varint(section, pos, record_end)
            key_length, pos = varint(section, pos, record_end)
            key: bytes | None = None
            if key_length >= 0:
                if pos + key_length > record_end:
                    raise DecodeError(f"record {index}: its key runs outside the record")
                key = bytes(section[pos : pos + key_length])
                pos += key_length
            value_length, pos = varint(section, pos, record_end)
            if value_length > record_end - pos:
                raise DecodeError(f"record {index}: its value runs outside the record")
            tombstone = value_length < 0
            out.append(RawRecord(start, record_end, offset_delta, timestamp_delta, key, tombstone))
            pos = record_end
    except IndexError:
        raise DecodeError(f"a record runs past the end of its batch ({end} bytes)") from None
    if pos != end:
        raise DecodeError(f"{end - pos} bytes left after {count} records")
    return out
