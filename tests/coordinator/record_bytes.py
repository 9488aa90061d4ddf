"""Kafka's record fields written out by hand, for the tests that pin the exact bytes of
``__consumer_offsets`` and ``__transaction_state`` records (big-endian, as Kafka's
generated serializers write them)."""

from __future__ import annotations

import struct


def i8(n: int) -> bytes:
    return struct.pack(">b", n)


def i16(n: int) -> bytes:
    return struct.pack(">h", n)


def i32(n: int) -> bytes:
    return struct.pack(">i", n)


def i64(n: int) -> bytes:
    return struct.pack(">q", n)


def s(text: str) -> bytes:
    """A classic string: int16 length, then UTF-8."""
    data = text.encode()
    return i16(len(data)) + data


def cs(text: str | None) -> bytes:
    """A compact (flexible) string: unsigned varint length + 1, 0 for null (short here)."""
    if text is None:
        return b"\x00"
    data = text.encode()
    assert len(data) < 127
    return bytes([len(data) + 1]) + data
