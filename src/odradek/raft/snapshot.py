"""The KRaft snapshot file (KIP-630, KIP-853): what a ``.checkpoint`` file holds.

A snapshot file is a sequence of record batches, offsets counting from 0 within the
file and every batch stamped with the snapshot's epoch as its partition leader epoch:

1. one control batch that starts with a SnapshotHeaderRecord and, when the snapshot
   carries a voter set (kraft.version 1, KIP-853), goes on with a KRaftVersionRecord
   and a VotersRecord. Kafka's snapshot writer puts the three in one batch, so we do
   too; the decoder also accepts them in separate batches;
2. data batches: the metadata records, each value one serialized metadata record;
3. one control batch holding a SnapshotFooterRecord.

The file name says what the snapshot covers: ``{end_offset:020d}-{epoch:010d}.checkpoint``.
The bootstrap checkpoint that ``storage format`` writes is the snapshot ``(0, 0)``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from odradek.core.errors import DecodeError, InvalidRecordBatchError
from odradek.protocol.control_batch import control_key, parse_control_key
from odradek.protocol.messages.k_raft_version_record import KRaftVersionRecord
from odradek.protocol.messages.snapshot_footer_record import SnapshotFooterRecord
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
from odradek.raft.voters import KRAFT_VERSION, VoterSet

SUFFIX = ".checkpoint"
BOOTSTRAP_SNAPSHOT_ID = SnapshotId(0, 0)

_FILE_NAME = re.compile(r"(\d{20})-(\d{10})\.checkpoint")


@dataclass(frozen=True)
class SnapshotContents:
    """What a snapshot file says: ``kraft_version`` 0 means static voters (no set here)."""

    kraft_version: int
    voters: VoterSet | None
    records: list[bytes]
    last_contained_log_timestamp_ms: int


# --- Names ------------------------------------------------------------------------------


def snapshot_file_name(snapshot_id: SnapshotId) -> str:
    return f"{snapshot_id.end_offset:020d}-{snapshot_id.epoch:010d}{SUFFIX}"


def parse_snapshot_file_name(name: str) -> SnapshotId | None:
    """The id a file name stands for; None for any other name (temporaries included)."""
    match = _FILE_NAME.fullmatch(name)
    if match is None:
        return None
    return SnapshotId(int(match.group(1)), int(match.group(2)))


# --- Encoding ---------------------------------------------------------------------------


def _control_record(offset_delta: int, control_type: ControlType, value: bytes, ts: int) -> Record:
    key = control_key(control_type)
    return Record(offset_delta=offset_delta, timestamp=ts, key=key, value=value)


def _header_records(voters: VoterSet | None, ts: int) -> list[Record]:
    header = SnapshotHeaderRecord(version=0, last_contained_log_timestamp=ts).encode(0)
    records = [_control_record(0, ControlType.SNAPSHOT_HEADER, header, ts)]
    if voters is not None:
        # A voter set only exists from kraft.version 1 on; without one the snapshot is a
        # kraft.version 0 snapshot and, as Kafka writes it, says nothing about versions.
        version = KRaftVersionRecord(version=0, k_raft_version=KRAFT_VERSION).encode(0)
        records.append(_control_record(1, ControlType.KRAFT_VERSION, version, ts))
        records.append(_control_record(2, ControlType.VOTERS, voters.encode(), ts))
    return records


def encode_snapshot(
    snapshot_id: SnapshotId,
    records: Sequence[bytes],
    voters: VoterSet | None,
    last_contained_log_timestamp_ms: int,
    records_per_batch: int = 1000,
) -> bytes:
    """The bytes of the snapshot file for ``snapshot_id`` holding ``records``."""
    if records_per_batch < 1:
        raise ValueError(f"records_per_batch must be positive, not {records_per_batch}")
    ts = last_contained_log_timestamp_ms
    epoch = snapshot_id.epoch
    out: list[bytes] = []
    header = _header_records(voters, ts)
    out.append(encode_batch(header, partition_leader_epoch=epoch, is_control=True))
    offset = len(header)
    for start in range(0, len(records), records_per_batch):
        chunk = records[start : start + records_per_batch]
        batch = [Record(offset_delta=i, timestamp=ts, value=v) for i, v in enumerate(chunk)]
        out.append(encode_batch(batch, base_offset=offset, partition_leader_epoch=epoch))
        offset += len(chunk)
    footer = SnapshotFooterRecord(version=0).encode(0)
    out.append(
        encode_batch(
            [_control_record(0, ControlType.SNAPSHOT_FOOTER, footer, ts)],
            base_offset=offset,
            partition_leader_epoch=epoch,
            is_control=True,
        )
    )
    return b"".join(out)


def bootstrap_snapshot(
    voters: VoterSet | None, *, last_contained_log_timestamp_ms: int = 0
) -> bytes:
    """The ``00000000000000000000-0000000000.checkpoint`` that ``storage format`` writes.

    With a voter set (``--standalone``, ``--initial-controllers``) it starts the log at
    kraft.version 1 with those voters; without one (static ``controller.quorum.voters``,
    ``--no-initial-controllers``) it is an empty kraft.version 0 snapshot.
    """
    return encode_snapshot(BOOTSTRAP_SNAPSHOT_ID, [], voters, last_contained_log_timestamp_ms)


# --- Decoding ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Item:
    """One record of the file, flattened: its offset, control type (or None) and value."""

    offset: int
    control: int | None
    value: bytes


def _items(data: bytes | memoryview) -> Iterator[_Item]:
    """Every record of the file in order, each batch checked (CRC, offsets) first."""
    expected = 0
    batches = iter_batches(data)
    try:
        for header in batches:
            try:
                records = decode_records(data, header.position)
            except InvalidRecordBatchError as e:
                raise DecodeError(f"snapshot batch at position {header.position}: {e}") from None
            if header.base_offset != expected:
                raise DecodeError(
                    f"snapshot batch at position {header.position} has offset "
                    f"{header.base_offset}, expected {expected}"
                )
            for delta, record in enumerate(records):
                # decode_records accepts compacted batches; a snapshot is never compacted.
                if record.offset_delta != delta or header.last_offset_delta != len(records) - 1:
                    raise DecodeError(f"snapshot batch at position {header.position} skips offsets")
                yield _item(header.base_offset + delta, header.is_control, record)
            expected = header.next_offset
    except InvalidRecordBatchError as e:
        raise DecodeError(f"snapshot file: {e}") from None
    if batches.tail_bytes:
        raise DecodeError(
            f"snapshot file is truncated: {batches.tail_bytes} bytes after position "
            f"{batches.position} are not a whole batch"
        )


def _item(offset: int, is_control: bool, record: Record) -> _Item:
    if record.value is None:
        raise DecodeError(f"snapshot record at offset {offset} has no value")
    if not is_control:
        return _Item(offset, None, record.value)
    parsed = parse_control_key(record.key)
    if parsed is None:
        raise DecodeError(f"snapshot control record at offset {offset} has no control key")
    _version, control_type = parsed
    return _Item(offset, control_type, record.value)


def decode_snapshot(data: bytes | memoryview) -> SnapshotContents:
    """Parse and check a whole snapshot file; a bad one raises :class:`DecodeError`."""
    items = list(_items(data))
    if not items or items[0].control != ControlType.SNAPSHOT_HEADER:
        raise DecodeError("snapshot file does not start with a SnapshotHeaderRecord")
    if items[-1].control != ControlType.SNAPSHOT_FOOTER or len(items) < 2:
        raise DecodeError("snapshot file does not end with a SnapshotFooterRecord")
    header = SnapshotHeaderRecord.decode(items[0].value, 0)
    SnapshotFooterRecord.decode(items[-1].value, 0)
    kraft_version: int | None = None
    voters: VoterSet | None = None
    records: list[bytes] = []
    for item in items[1:-1]:
        if item.control is None:
            records.append(item.value)
        elif records:
            raise DecodeError(f"control record at offset {item.offset} after metadata records")
        elif item.control == ControlType.KRAFT_VERSION and kraft_version is None:
            kraft_version = KRaftVersionRecord.decode(item.value, 0).k_raft_version
        elif item.control == ControlType.VOTERS and voters is None and kraft_version:
            # Voters without kraft.version 1 before them would be a set nobody may change.
            voters = VoterSet.decode(item.value)
        else:
            raise DecodeError(
                f"unexpected control record of type {item.control} at offset {item.offset}"
            )
    return SnapshotContents(
        kraft_version or 0, voters, records, header.last_contained_log_timestamp
    )
