"""``__consumer_offsets`` records: known bytes, every version, round trips, partitioning."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
    java_string_hash,
    partition_for,
)
from odradek.core.errors import DecodeError, EncodeError
from tests.coordinator.record_bytes import cs, i16, i32, i64, s

# -- partitioning: values computed with Java (String.hashCode, Kafka's Utils.abs) ----------

JAVA_HASHES = [
    ("", 0),
    ("a", 97),
    ("hello", 99162322),
    ("my-group", -1906497762),
    ("console-consumer-12345", 158455506),
    ("polygenelubricants", -2147483648),
    ("test-consumer-group", -1793216381),
    ("Aa", 2112),
    ("BB", 2112),
    ("\u00e9t\u00e9", 227742),
    ("\U0001f600", 1772899),  # one code point, two UTF-16 code units
    ("group-\u4e2d\u6587", 506956552),
    ("connect-cluster", 1440343063),
    ("_confluent-ksql-default_query_CSAS_1", -2013116731),
]

# (group id, partitions, partition): Utils.abs(hashCode) % partitions, as Kafka computes.
KAFKA_PARTITIONS = [
    ("", 50, 0),
    ("a", 50, 47),
    ("hello", 50, 22),
    ("my-group", 50, 12),
    ("my-group", 7, 1),
    ("console-consumer-12345", 50, 6),
    ("test-consumer-group", 50, 31),
    ("test-consumer-group", 7, 5),
    ("\U0001f600", 50, 49),
    ("group-\u4e2d\u6587", 50, 2),
    ("connect-cluster", 50, 13),
    ("_confluent-ksql-default_query_CSAS_1", 50, 31),
    # hashCode is Integer.MIN_VALUE: Utils.abs gives 0, where Python's abs would give 48.
    ("polygenelubricants", 50, 0),
    ("polygenelubricants", 7, 0),
]


@pytest.mark.parametrize(("text", "expected"), JAVA_HASHES)
def test_java_string_hash_matches_java(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


@pytest.mark.parametrize(("group_id", "partitions", "expected"), KAFKA_PARTITIONS)
def test_partition_for_matches_kafka(group_id: str, partitions: int, expected: int) -> None:
    assert partition_for(group_id, partitions) == expected


@given(st.text(), st.integers(1, 200))
def test_partition_for_is_in_range(group_id: str, partitions: int) -> None:
    assert 0 <= partition_for(group_id, partitions) < partitions


def test_partition_for_refuses_no_partitions() -> None:
    with pytest.raises(ValueError, match="positive"):
        partition_for("g", 0)


# -- keys ----------------------------------------------------------------------------------

OFFSET_KEY = i16(1) + s("my-group") + s("orders") + i32(3)
GROUP_KEY = i16(2) + s("my-group")


def test_offset_commit_key_known_bytes() -> None:
    key = OffsetCommitKey("my-group", "orders", 3)
    assert encode_key(key) == OFFSET_KEY
    assert decode_key(OFFSET_KEY) == key
    # Version 0 has the same fields; Kafka still reads it.
    assert decode_key(i16(0) + OFFSET_KEY[2:]) == key


def test_group_metadata_key_known_bytes() -> None:
    assert encode_key(GroupMetadataKey("my-group")) == GROUP_KEY
    assert decode_key(GROUP_KEY) == GroupMetadataKey("my-group")


def test_other_key_versions_are_reported_not_decoded() -> None:
    # Version 3 and up: KIP-848 consumer group records, which a classic coordinator skips.
    assert decode_key(i16(3) + s("g")) == UnknownKey(3)
    assert decode_key(i16(11) + b"anything") == UnknownKey(11)


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", OFFSET_KEY[:-1], OFFSET_KEY + b"\x00", GROUP_KEY + b"x", i16(2) + i16(-1)],
)
def test_malformed_keys_raise(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_key(data)


# -- offset commit values --------------------------------------------------------------------


def test_offset_commit_value_v3_known_bytes() -> None:
    value = OffsetCommitValue(offset=42, metadata="meta", commit_timestamp=1_700_000_000_000,
                              leader_epoch=7)  # fmt: skip
    data = i16(3) + i64(42) + i32(7) + s("meta") + i64(1_700_000_000_000)
    assert encode_offset_commit_value(value) == data  # Kafka's default version
    assert decode_offset_commit_value(data) == value


def test_offset_commit_value_with_expire_timestamp_is_v1() -> None:
    value = OffsetCommitValue(offset=42, metadata="", commit_timestamp=1000, expire_timestamp=5000)
    data = i16(1) + i64(42) + s("") + i64(1000) + i64(5000)
    assert encode_offset_commit_value(value) == data
    assert decode_offset_commit_value(data) == value


def test_offset_commit_value_v0_and_v2_have_no_leader_epoch() -> None:
    data = i16(0) + i64(9) + s("x") + i64(123)
    assert decode_offset_commit_value(data) == OffsetCommitValue(9, "x", 123)
    assert decode_offset_commit_value(i16(2) + data[2:]) == OffsetCommitValue(9, "x", 123)


def test_offset_commit_value_v4_is_flexible() -> None:
    # Compact string, then a tagged-field section holding one unknown field (tag 5,
    # 2 bytes), which must be skipped.
    data = i16(4) + i64(42) + i32(7) + cs("meta") + i64(99) + b"\x01" + b"\x05\x02ab"
    assert decode_offset_commit_value(data) == OffsetCommitValue(42, "meta", 99, 7)
    assert encode_offset_commit_value(OffsetCommitValue(42, "meta", 99, 7), version=4) == (
        i16(4) + i64(42) + i32(7) + cs("meta") + i64(99) + b"\x00"
    )


@pytest.mark.parametrize(
    "data",
    [
        i16(5) + i64(1) + s("") + i64(1),  # no such version
        i16(3) + i64(1),  # truncated
        i16(3) + i64(1) + i32(-1) + s("") + i64(1) + b"\x00",  # trailing byte
    ],
)
def test_malformed_offset_commit_values_raise(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_offset_commit_value(data)


def test_encoding_a_version_that_does_not_exist_raises() -> None:
    with pytest.raises(EncodeError):
        encode_offset_commit_value(OffsetCommitValue(1, "", 1), version=5)
    with pytest.raises(EncodeError):
        encode_group_metadata_value(GroupMetadataValue("consumer", 1, None, None), version=5)


# -- group metadata values -------------------------------------------------------------------

MEMBER = MemberMetadata(
    member_id="c1-0",
    group_instance_id="instance-1",
    client_id="c1",
    client_host="/10.0.0.1",
    rebalance_timeout=300_000,
    session_timeout=45_000,
    subscription=b"\x00\x01sub",
    assignment=b"\x00\x01asg",
)
GROUP_VALUE = GroupMetadataValue(
    protocol_type="consumer",
    generation=5,
    protocol="range",
    leader="c1-0",
    current_state_timestamp=1_700_000_000_000,
    members=(MEMBER,),
)
GROUP_VALUE_V3 = (
    i16(3)
    + s("consumer")
    + i32(5)
    + s("range")  # protocol, nullable string
    + s("c1-0")  # leader, nullable string
    + i64(1_700_000_000_000)  # current state timestamp (v2+)
    + i32(1)  # one member
    + s("c1-0")
    + s("instance-1")  # group instance id (v3+)
    + s("c1")
    + s("/10.0.0.1")
    + i32(300_000)  # rebalance timeout (v1+)
    + i32(45_000)
    + i32(5)
    + b"\x00\x01sub"
    + i32(5)
    + b"\x00\x01asg"
)


def test_group_metadata_value_v3_known_bytes() -> None:
    assert encode_group_metadata_value(GROUP_VALUE) == GROUP_VALUE_V3
    assert decode_group_metadata_value(GROUP_VALUE_V3) == GROUP_VALUE


def test_empty_group_metadata_value_known_bytes() -> None:
    # What a coordinator writes when a group's last member has gone: no protocol, no
    # leader (both null, length -1), no members.
    value = GroupMetadataValue("consumer", 6, None, None, 1000, ())
    data = i16(3) + s("consumer") + i32(6) + i16(-1) + i16(-1) + i64(1000) + i32(0)
    assert encode_group_metadata_value(value) == data
    assert decode_group_metadata_value(data) == value


def test_group_metadata_value_v0_uses_session_timeout_as_rebalance_timeout() -> None:
    data = (
        i16(0) + s("consumer") + i32(1) + s("range") + s("m") + i32(1)
        + s("m") + s("c") + s("/h") + i32(10_000) + i32(1) + b"s" + i32(1) + b"a"
    )  # fmt: skip
    value = decode_group_metadata_value(data)
    assert value.current_state_timestamp == -1
    (member,) = value.members
    assert member == MemberMetadata("m", None, "c", "/h", 10_000, 10_000, b"s", b"a")


def test_group_metadata_value_v4_is_flexible() -> None:
    data = (
        i16(4) + cs("consumer") + i32(5) + cs("range") + cs(None) + i64(7)
        + b"\x02"  # compact array: one member
        + cs("m") + cs(None) + cs("c") + cs("/h") + i32(3) + i32(2)
        + b"\x02s" + b"\x02a"  # compact bytes
        + b"\x01\x00\x01z"  # the member's tagged fields: one unknown (tag 0, 1 byte)
        + b"\x00"  # the value's tagged fields: none
    )  # fmt: skip
    value = GroupMetadataValue(
        "consumer", 5, "range", None, 7, (MemberMetadata("m", None, "c", "/h", 3, 2, b"s", b"a"),)
    )
    assert decode_group_metadata_value(data) == value
    assert decode_group_metadata_value(encode_group_metadata_value(value, version=4)) == value


def test_malformed_group_metadata_values_raise() -> None:
    for data in (GROUP_VALUE_V3[:-1], GROUP_VALUE_V3 + b"\x00", i16(9) + GROUP_VALUE_V3[2:]):
        with pytest.raises(DecodeError):
            decode_group_metadata_value(data)


# -- round trips -------------------------------------------------------------------------

names = st.text(max_size=20)
int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)


@given(names, names, int32s)
def test_keys_round_trip(group: str, topic: str, partition: int) -> None:
    for key in (OffsetCommitKey(group, topic, partition), GroupMetadataKey(group)):
        assert decode_key(encode_key(key)) == key


@given(
    st.integers(0, 4),
    int64s,
    names,
    int64s,
    int32s,
    int64s,
)
def test_offset_commit_values_round_trip_in_every_version(
    version: int, offset: int, metadata: str, commit: int, epoch: int, expire: int
) -> None:
    value = OffsetCommitValue(
        offset,
        metadata,
        commit,
        leader_epoch=epoch if version >= 3 else -1,
        expire_timestamp=expire if version == 1 else -1,
    )
    assert decode_offset_commit_value(encode_offset_commit_value(value, version)) == value


members = st.builds(
    MemberMetadata,
    member_id=names,
    group_instance_id=st.none() | names,
    client_id=names,
    client_host=names,
    rebalance_timeout=int32s,
    session_timeout=int32s,
    subscription=st.binary(max_size=30),
    assignment=st.binary(max_size=30),
)


@settings(max_examples=60)
@given(
    st.integers(0, 4),
    names,
    int32s,
    st.none() | names,
    st.none() | names,
    int64s,
    st.lists(members, max_size=4),
)
def test_group_metadata_values_round_trip_in_every_version(
    version: int,
    protocol_type: str,
    generation: int,
    protocol: str | None,
    leader: str | None,
    timestamp: int,
    member_list: list[MemberMetadata],
) -> None:
    # Fields a version lacks come back as their defaults.
    kept = tuple(
        MemberMetadata(
            m.member_id,
            m.group_instance_id if version >= 3 else None,
            m.client_id,
            m.client_host,
            m.rebalance_timeout if version >= 1 else m.session_timeout,
            m.session_timeout,
            m.subscription,
            m.assignment,
        )
        for m in member_list
    )
    value = GroupMetadataValue(
        protocol_type, generation, protocol, leader, timestamp if version >= 2 else -1, kept
    )
    assert decode_group_metadata_value(encode_group_metadata_value(value, version)) == value
