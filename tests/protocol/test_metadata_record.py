"""The metadata log's record framing: known bytes, round trips of every record, errors."""

from __future__ import annotations

import uuid
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.core.errors import DecodeError, EncodeError, UnsupportedVersionError
from odradek.protocol.metadata import (
    RECORDS,
    FenceBrokerRecord,
    NoOpRecord,
    PartitionChangeRecord,
    TopicRecord,
)
from odradek.protocol.metadata_record import (
    FRAME_VERSION,
    decode_metadata_record,
    encode_metadata_record,
)
from odradek.protocol.primitives import Writer
from tests.protocol.strategies import message_value

TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")

# TopicRecord(name="foo", topic_id=TOPIC_ID) written by hand, field by field.
TOPIC_RECORD_VALUE = (
    b"\x01"  # frame version 1, unsigned varint
    b"\x02"  # api key 2 (TopicRecord)
    b"\x00"  # record version 0
    b"\x04foo"  # name: compact string, length + 1 = 4
    + TOPIC_ID.bytes  # topic id: 16 raw bytes
    + b"\x00"  # no tagged fields
)


def test_frame_version_is_one() -> None:
    assert FRAME_VERSION == 1


def test_topic_record_encodes_to_known_bytes() -> None:
    assert encode_metadata_record(TopicRecord(name="foo", topic_id=TOPIC_ID)) == TOPIC_RECORD_VALUE


def test_topic_record_decodes_from_known_bytes() -> None:
    record, version = decode_metadata_record(TOPIC_RECORD_VALUE)
    assert record == TopicRecord(name="foo", topic_id=TOPIC_ID)
    assert version == 0


def test_decode_accepts_memoryview_and_bytearray() -> None:
    for data in (memoryview(TOPIC_RECORD_VALUE), bytearray(TOPIC_RECORD_VALUE)):
        assert decode_metadata_record(data) == (TopicRecord(name="foo", topic_id=TOPIC_ID), 0)


def test_header_varints_need_not_be_minimal() -> None:
    # Kafka reads each header field with readUnsignedVarint, which accepts a padded
    # encoding; 0x81 0x00 is 1 written in two bytes.
    padded = b"\x81\x00" + TOPIC_RECORD_VALUE[1:]
    assert decode_metadata_record(padded)[0] == TopicRecord(name="foo", topic_id=TOPIC_ID)


def test_default_version_is_the_highest() -> None:
    record = PartitionChangeRecord(partition_id=3, topic_id=TOPIC_ID, leader=1)
    data = encode_metadata_record(record)
    assert data[:3] == bytes([1, PartitionChangeRecord.API_KEY, 2])
    assert data[3:] == record.encode(2)


def test_explicit_version_is_written() -> None:
    record = PartitionChangeRecord(partition_id=3, topic_id=TOPIC_ID, isr=[1, 2])
    data = encode_metadata_record(record, 0)
    assert data[:3] == bytes([1, 5, 0])
    assert decode_metadata_record(data) == (record, 0)


CASES = [
    pytest.param(cls, version, id=f"{cls.NAME}-v{version}")
    for cls in RECORDS.values()
    for version in range(cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1] + 1)
]


def test_cases_cover_every_metadata_record() -> None:
    assert {cls for cls, *_ in (p.values for p in CASES)} == set(RECORDS.values())
    assert len(RECORDS) == 25


@pytest.mark.parametrize(("cls", "version"), CASES)
@settings(max_examples=25, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip(cls: Any, version: int, data: st.DataObject) -> None:
    record = data.draw(message_value(cls, version))
    encoded = encode_metadata_record(record, version)
    assert encoded[:3] == bytes([1, cls.API_KEY, version])
    assert encoded[3:] == record.encode(version)
    decoded, decoded_version = decode_metadata_record(encoded)
    assert decoded_version == version
    assert type(decoded) is cls
    assert decoded == record
    assert encode_metadata_record(decoded, version) == encoded


# Decode errors ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(b"", "past the end", id="empty"),
        pytest.param(b"\x00" + TOPIC_RECORD_VALUE[1:], "frame version 0", id="frame-0"),
        pytest.param(b"\x02" + TOPIC_RECORD_VALUE[1:], "unknown frame version 2", id="frame-2"),
        pytest.param(b"\x01\x06\x00", "unknown metadata record type 6", id="api-key-6"),
        pytest.param(b"\x01\x63\x00\x00", "unknown metadata record type 99", id="api-key-99"),
        pytest.param(b"\x01\x02", "past the end", id="no-version"),
        pytest.param(b"\x01\x02\x01" + TOPIC_RECORD_VALUE[3:], "not version 1", id="version-1"),
        pytest.param(b"\x01\x14\x01\x00", "not version 1", id="noop-version-1"),
        pytest.param(TOPIC_RECORD_VALUE + b"\x00", "1 bytes left over", id="trailing-byte"),
        pytest.param(TOPIC_RECORD_VALUE[:-1], "past the end", id="truncated-body"),
        pytest.param(TOPIC_RECORD_VALUE[:10], "need 16 bytes", id="truncated-uuid"),
    ],
)
def test_decode_errors(data: bytes, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        decode_metadata_record(data)


@given(st.binary(max_size=40))
def test_decode_raises_only_decode_error(data: bytes) -> None:
    try:
        record, version = decode_metadata_record(data)
    except DecodeError:
        return
    # Whatever decoded must frame back to the same bytes' meaning.
    assert decode_metadata_record(encode_metadata_record(record, version)) == (record, version)


# Encode errors ---------------------------------------------------------------


def test_encode_refuses_a_version_out_of_range() -> None:
    with pytest.raises(UnsupportedVersionError, match="not version 1"):
        encode_metadata_record(NoOpRecord(), 1)
    with pytest.raises(UnsupportedVersionError, match="not version -1"):
        encode_metadata_record(FenceBrokerRecord(), -1)


def test_encode_refuses_what_is_not_a_metadata_record() -> None:
    class Impostor:
        NAME: ClassVar[str] = "Impostor"
        API_KEY: ClassVar[int] = 2
        VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 0)

        def write(self, w: Writer, version: int) -> None:
            raise AssertionError("must not be called")

    with pytest.raises(EncodeError, match="not a metadata record"):
        encode_metadata_record(Impostor())
