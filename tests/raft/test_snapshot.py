"""The KRaft snapshot file: what Kafka writes and reads as a ``.checkpoint``."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.core.errors import DecodeError
from odradek.protocol.control_batch import (
    encode_control_batch,
)
from odradek.protocol.messages.snapshot_header_record import SnapshotHeaderRecord
from odradek.protocol.record_batch import (
    ControlType,
    iter_batches,
)
from odradek.protocol.record_codec import (
    Record,
    decode_records,
    encode_batch,
)
from odradek.raft.log import SnapshotId
from odradek.raft.snapshot import (
    bootstrap_snapshot,
    decode_snapshot,
    encode_snapshot,
    parse_snapshot_file_name,
    snapshot_file_name,
)
from odradek.raft.voters import Voter, VoterEndpoint, VoterSet

VOTERS = VoterSet.of(
    [
        Voter(1, uuid.UUID(int=11), (VoterEndpoint("CONTROLLER", "c1", 9093),)),
        Voter(2, uuid.UUID(int=22), (VoterEndpoint("CONTROLLER", "c2", 9093),)),
    ]
)


def control_types(data: bytes) -> list[int]:
    types = []
    for header in iter_batches(data):
        if header.is_control:
            for record in decode_records(data, header.position):
                assert record.key is not None
                types.append(struct.unpack_from(">hh", record.key)[1])
    return types


@given(
    records=st.lists(st.binary(max_size=30), max_size=40),
    per_batch=st.integers(1, 7),
    with_voters=st.booleans(),
    timestamp=st.integers(0, 2**40),
)
def test_round_trip(
    records: list[bytes], per_batch: int, with_voters: bool, timestamp: int
) -> None:
    voters = VOTERS if with_voters else None
    data = encode_snapshot(SnapshotId(120, 4), records, voters, timestamp, per_batch)
    contents = decode_snapshot(data)
    assert contents.records == records
    assert contents.voters == voters
    assert contents.kraft_version == (1 if with_voters else 0)
    assert contents.last_contained_log_timestamp_ms == timestamp


def test_layout_is_kafkas_header_then_data_then_footer() -> None:
    data = encode_snapshot(SnapshotId(50, 3), [b"a", b"b", b"c"], VOTERS, 99, records_per_batch=2)
    headers = list(iter_batches(data))
    # Header, kraft.version and voters share the first control batch, as Kafka writes it.
    assert [h.is_control for h in headers] == [True, False, False, True]
    assert [h.base_offset for h in headers] == [0, 3, 5, 6]
    assert {h.partition_leader_epoch for h in headers} == {3}
    assert control_types(data) == [
        ControlType.SNAPSHOT_HEADER,
        ControlType.KRAFT_VERSION,
        ControlType.VOTERS,
        ControlType.SNAPSHOT_FOOTER,
    ]
    first = decode_records(data, 0)[0]
    assert first.value is not None
    assert SnapshotHeaderRecord.decode(first.value, 0).last_contained_log_timestamp == 99


def test_separate_control_batches_are_read_too() -> None:
    header = SnapshotHeaderRecord(version=0, last_contained_log_timestamp=5).encode(0)
    data = b"".join(
        [
            encode_control_batch(ControlType.SNAPSHOT_HEADER, header, partition_leader_epoch=1),
            encode_batch([Record(0, 5, value=b"x")], base_offset=1, partition_leader_epoch=1),
            encode_control_batch(ControlType.SNAPSHOT_FOOTER, b"\x00\x00\x00", base_offset=2),
        ]
    )
    assert decode_snapshot(data).records == [b"x"]


def test_bootstrap_checkpoint() -> None:
    assert snapshot_file_name(SnapshotId(0, 0)) == "00000000000000000000-0000000000.checkpoint"
    dynamic = decode_snapshot(bootstrap_snapshot(VOTERS))
    assert (dynamic.kraft_version, dynamic.voters, dynamic.records) == (1, VOTERS, [])
    static = bootstrap_snapshot(None)
    assert control_types(static) == [ControlType.SNAPSHOT_HEADER, ControlType.SNAPSHOT_FOOTER]
    assert decode_snapshot(static).voters is None


def test_file_names() -> None:
    snapshot = SnapshotId(1234, 56)
    name = snapshot_file_name(snapshot)
    assert name == "00000000000000001234-0000000056.checkpoint"
    assert parse_snapshot_file_name(name) == snapshot
    for other in [name + ".part", name + ".deleted", "00000000000000000000.log", "1-2.checkpoint"]:
        assert parse_snapshot_file_name(other) is None


GOOD = encode_snapshot(SnapshotId(9, 2), [b"r1", b"r2"], VOTERS, 0, records_per_batch=1)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "does not start with a SnapshotHeaderRecord"),
        (GOOD[:-5], "truncated"),
        (GOOD[:60] + bytes([GOOD[60] ^ 1]) + GOOD[61:], "CRC"),
        (
            encode_batch([Record(0, 0, value=b"x")])
            + encode_control_batch(ControlType.SNAPSHOT_FOOTER, b"\x00\x00\x00", base_offset=1),
            "does not start with a SnapshotHeaderRecord",
        ),
    ],
)
def test_bad_files_are_refused_with_a_reason(data: bytes, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        decode_snapshot(data)


def test_a_file_without_its_footer_is_refused() -> None:
    last = list(iter_batches(GOOD))[-1]
    with pytest.raises(DecodeError, match="does not end with a SnapshotFooterRecord"):
        decode_snapshot(GOOD[: last.position])


def test_batches_must_count_offsets_from_zero() -> None:
    shifted = encode_snapshot(SnapshotId(9, 2), [b"r"], None, 0)
    headers = list(iter_batches(shifted))
    broken = bytearray(shifted)
    struct.pack_into(">q", broken, headers[1].position, 7)  # outside the CRC
    with pytest.raises(DecodeError, match="offset 7, expected 1"):
        decode_snapshot(bytes(broken))
