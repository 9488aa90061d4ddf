"""The offset map of a cleaning pass: each key's last offset in the dirty section.

Kafka's ``SkimpyOffsetMap`` keys its entries by a 16-byte hash of the record key, so
that the map's memory does not depend on how long the keys are; so does this one (a
BLAKE2b digest of 16 bytes: a collision between two keys of one log is as unlikely as
in Kafka's MD5). Its capacity is counted from ``log.cleaner.dedupe.buffer.size`` the
way Kafka counts it, with what an entry costs here (a Python dict entry with its
digest and offset objects is about 140 bytes, where Kafka's packed array takes 24), so
the setting bounds the memory a pass takes rather than the number of keys.
"""

from __future__ import annotations

import hashlib

ENTRY_BYTES = 144
"""Measured memory of one entry (dict slot, 16-byte digest object, offset int)."""

LOAD_FACTOR = 0.9
"""Kafka's ``log.cleaner.io.buffer.load.factor`` default: how full the map may get."""


def key_digest(key: bytes) -> bytes:
    return hashlib.blake2b(key, digest_size=16).digest()


class OffsetMap:
    """Key digest -> last offset, up to ``capacity`` keys."""

    __slots__ = ("_offsets", "capacity")

    def __init__(self, capacity: int) -> None:
        self.capacity = max(capacity, 1)
        self._offsets: dict[bytes, int] = {}

    @classmethod
    def for_buffer(cls, buffer_bytes: int, threads: int = 1) -> OffsetMap:
        """A map the size one of ``threads`` cleaner threads gets of the buffer."""
        per_thread = buffer_bytes // max(threads, 1)
        return cls(int(per_thread * LOAD_FACTOR) // ENTRY_BYTES)

    def __len__(self) -> int:
        return len(self._offsets)

    def has_room_for(self, keys: int) -> bool:
        """Whether ``keys`` more keys fit, counted as if every one were new (a batch
        is mapped whole or not at all, so the map's end is a batch boundary)."""
        return len(self._offsets) + keys <= self.capacity

    def put(self, key: bytes, offset: int) -> None:
        self._offsets[key_digest(key)] = offset

    def get(self, key: bytes) -> int:
        """The key's last offset in the map, or -1 when the map has not seen it."""
        return self._offsets.get(key_digest(key), -1)
