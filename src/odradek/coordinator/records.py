"""The bytes and layout of the ``__consumer_offsets`` topic.

This module owns what the group coordinator persists and how it finds where:

* :func:`partition_for`: which partition of ``__consumer_offsets`` holds a group, by
  Kafka's rule ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`` with
  Java's ``String.hashCode`` over UTF-16 code units (:func:`java_string_hash`);
* the record keys and values Kafka writes there, hand-written from Kafka's schemas
  ``OffsetCommitKey``, ``OffsetCommitValue``, ``GroupMetadataKey`` and
  ``GroupMetadataValue``: each is a big-endian int16 version followed by the fields of
  that version. A key's version says which record it is: 0 and 1 are offset commits,
  2 is group metadata; higher ones belong to KIP-848 consumer groups and share groups,
  which :func:`decode_key` reports as :class:`UnknownKey` so that a loader can skip them.

Values are written in the versions Kafka writes by default (OffsetCommitValue v3, or v1
when the commit carries an explicit expire timestamp; GroupMetadataValue v3), so a log
written by Odradek reads in Kafka's tools and the other way round. Every version of the
four schemas decodes, the flexible v4 values included.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from odradek.core.errors import DecodeError, EncodeError
from odradek.protocol.primitives import Reader, Writer

__all__ = [
    "GROUP_METADATA_KEY_VERSION",
    "OFFSET_COMMIT_KEY_VERSION",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadata",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "RecordKey",
    "UnknownKey",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "encode_group_metadata_value",
    "encode_key",
    "encode_offset_commit_value",
    "java_string_hash",
    "partition_for",
]

OFFSET_COMMIT_KEY_VERSION = 1
"""Kafka writes offset commit keys as version 1 (version 0 has the same fields)."""
GROUP_METADATA_KEY_VERSION = 2

_INT_MIN = -(1 << 31)


# ---------------------------------------------------------------------------------------
# Partitioning
# ---------------------------------------------------------------------------------------


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units,
    wrapped to a signed 32-bit int.

    A character outside the Basic Multilingual Plane counts as its two surrogates, as in
    Java; lone surrogates (which Python strings may hold) count as themselves.
    """
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for unit in struct.unpack(f">{len(data) // 2}H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition that holds ``group_id``.

    Kafka's ``Utils.abs`` maps ``Integer.MIN_VALUE`` to 0 rather than overflowing, so a
    group whose hash is exactly -2^31 lives in partition 0 (Python's ``abs`` would give
    ``2^31 % partitions``, another partition, and the clients would look in vain).
    """
    if partitions <= 0:
        raise ValueError(f"offsets.topic.num.partitions must be positive, not {partitions}")
    h = java_string_hash(group_id)
    return (0 if h == _INT_MIN else abs(h)) % partitions


# ---------------------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class UnknownKey:
    """A key of a record type this coordinator does not keep (KIP-848 groups, share groups)."""

    version: int


RecordKey = OffsetCommitKey | GroupMetadataKey | UnknownKey


def encode_key(key: OffsetCommitKey | GroupMetadataKey) -> bytes:
    w = Writer()
    if isinstance(key, OffsetCommitKey):
        w.int16(OFFSET_COMMIT_KEY_VERSION)
        w.string(key.group)
        w.string(key.topic)
        w.int32(key.partition)
    else:
        w.int16(GROUP_METADATA_KEY_VERSION)
        w.string(key.group)
    return w.getvalue()


def decode_key(data: bytes | bytearray | memoryview) -> RecordKey:
    r = Reader(data)
    version = r.int16()
    key: RecordKey
    if version in (0, 1):
        key = OffsetCommitKey(r.string(), r.string(), r.int32())
    elif version == GROUP_METADATA_KEY_VERSION:
        key = GroupMetadataKey(r.string())
    else:
        return UnknownKey(version)
    r.expect_end()
    return key


# ---------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int = -1
    """Only version 1 carries it: commits of OffsetCommit v2-v4 with a retention time."""


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberMetadata, ...] = field(default_factory=tuple)


class _Codec:
    """Strings and arrays in the classic or the compact (flexible) encoding."""

    def __init__(self, flexible: bool) -> None:
        self.flexible = flexible

    def write_string(self, w: Writer, value: str) -> None:
        if self.flexible:
            w.compact_string(value)
        else:
            w.string(value)

    def write_nullable_string(self, w: Writer, value: str | None) -> None:
        if self.flexible:
            w.compact_nullable_string(value)
        else:
            w.nullable_string(value)

    def write_bytes(self, w: Writer, value: bytes) -> None:
        if self.flexible:
            w.compact_bytes(value)
        else:
            w.bytes_(value)

    def write_count(self, w: Writer, n: int) -> None:
        if self.flexible:
            w.unsigned_varint(n + 1)
        else:
            w.int32(n)

    def end_struct(self, w: Writer) -> None:
        if self.flexible:
            w.unsigned_varint(0)  # no tagged fields

    def read_string(self, r: Reader) -> str:
        return r.compact_string() if self.flexible else r.string()

    def read_nullable_string(self, r: Reader) -> str | None:
        return r.compact_nullable_string() if self.flexible else r.nullable_string()

    def read_bytes(self, r: Reader) -> bytes:
        return r.compact_bytes() if self.flexible else r.bytes_()

    def read_count(self, r: Reader) -> int:
        n = r.compact_array_length() if self.flexible else r.array_length()
        if n is None:
            raise DecodeError("null array in a __consumer_offsets record")
        return n

    def skip_tagged_fields(self, r: Reader) -> None:
        # Unknown tagged fields are ignorable by definition: a newer Kafka may add some.
        if self.flexible:
            for _ in range(r.tagged_field_count()):
                r.tagged_field()


def _check_version(name: str, version: int, low: int, high: int, error: type[Exception]) -> None:
    if not low <= version <= high:
        raise error(f"{name} has no version {version}")


def encode_offset_commit_value(value: OffsetCommitValue, version: int | None = None) -> bytes:
    """Encode in ``version``, by default Kafka's: 1 with an expire timestamp, else 3."""
    if version is None:
        version = 1 if value.expire_timestamp != -1 else 3
    _check_version("OffsetCommitValue", version, 0, 4, EncodeError)
    codec = _Codec(version >= 4)
    w = Writer()
    w.int16(version)
    w.int64(value.offset)
    if version >= 3:
        w.int32(value.leader_epoch)
    codec.write_string(w, value.metadata)
    w.int64(value.commit_timestamp)
    if version == 1:
        w.int64(value.expire_timestamp)
    codec.end_struct(w)
    return w.getvalue()


def decode_offset_commit_value(data: bytes | bytearray | memoryview) -> OffsetCommitValue:
    r = Reader(data)
    version = r.int16()
    _check_version("OffsetCommitValue", version, 0, 4, DecodeError)
    codec = _Codec(version >= 4)
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = codec.read_string(r)
    commit_timestamp = r.int64()
    expire_timestamp = r.int64() if version == 1 else -1
    codec.skip_tagged_fields(r)
    r.expect_end()
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)


def encode_group_metadata_value(value: GroupMetadataValue, version: int = 3) -> bytes:
    """Encode in ``version`` (Kafka writes 3). Older versions drop the fields they lack."""
    _check_version("GroupMetadataValue", version, 0, 4, EncodeError)
    codec = _Codec(version >= 4)
    w = Writer()
    w.int16(version)
    codec.write_string(w, value.protocol_type)
    w.int32(value.generation)
    codec.write_nullable_string(w, value.protocol)
    codec.write_nullable_string(w, value.leader)
    if version >= 2:
        w.int64(value.current_state_timestamp)
    codec.write_count(w, len(value.members))
    for m in value.members:
        codec.write_string(w, m.member_id)
        if version >= 3:
            codec.write_nullable_string(w, m.group_instance_id)
        codec.write_string(w, m.client_id)
        codec.write_string(w, m.client_host)
        if version >= 1:
            w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout)
        codec.write_bytes(w, m.subscription)
        codec.write_bytes(w, m.assignment)
        codec.end_struct(w)
    codec.end_struct(w)
    return w.getvalue()


def decode_group_metadata_value(data: bytes | bytearray | memoryview) -> GroupMetadataValue:
    r = Reader(data)
    version = r.int16()
    _check_version("GroupMetadataValue", version, 0, 4, DecodeError)
    codec = _Codec(version >= 4)
    protocol_type = codec.read_string(r)
    generation = r.int32()
    protocol = codec.read_nullable_string(r)
    leader = codec.read_nullable_string(r)
    current_state_timestamp = r.int64() if version >= 2 else -1
    members = []
    for _ in range(codec.read_count(r)):
        member_id = codec.read_string(r)
        group_instance_id = codec.read_nullable_string(r) if version >= 3 else None
        client_id = codec.read_string(r)
        client_host = codec.read_string(r)
        rebalance_timeout = r.int32() if version >= 1 else None
        session_timeout = r.int32()
        subscription = codec.read_bytes(r)
        assignment = codec.read_bytes(r)
        codec.skip_tagged_fields(r)
        members.append(
            MemberMetadata(
                member_id,
                group_instance_id,
                client_id,
                client_host,
                # Version 0 predates the rebalance timeout; Kafka then uses the session
                # timeout for both, as JoinGroup v0 does.
                session_timeout if rebalance_timeout is None else rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
        )
    codec.skip_tagged_fields(r)
    r.expect_end()
    return GroupMetadataValue(
        protocol_type, generation, protocol, leader, current_state_timestamp, tuple(members)
    )
