"""Entries as Kafka record batches: the metadata log's on-disk and on-the-wire form.

One :class:`~odradek.raft.log.Entry` is one batch: base offset, partition leader epoch =
the entry's epoch, one record per value; a KRaft control entry is a control batch whose
record keys are (version 0, control type), as Kafka writes LeaderChangeMessage and
VotersRecord.
"""

from __future__ import annotations

from collections.abc import Iterable

from odradek.core.errors import DecodeError, InvalidRecordBatchError
from odradek.protocol.control_batch import control_key, parse_control_key
from odradek.protocol.record_batch import (
    iter_batches,
)
from odradek.protocol.record_codec import (
    Record,
    decode_records,
    encode_batch,
)
from odradek.raft.log import Entry


def encode_entry(entry: Entry, timestamp_ms: int) -> bytes:
    key = None if entry.control is None else control_key(entry.control)
    records = [
        Record(
            offset_delta=i,
            timestamp=timestamp_ms,
            key=key,
            value=value,
            headers=[(name, data) for name, data in entry.headers],
        )
        for i, value in enumerate(entry.records)
    ]
    return encode_batch(
        records,
        base_offset=entry.offset,
        partition_leader_epoch=entry.epoch,
        is_control=entry.control is not None,
    )


def encode_entries(entries: Iterable[Entry], timestamp_ms: int) -> bytes:
    return b"".join(encode_entry(e, timestamp_ms) for e in entries)


def decode_entry(data: bytes | memoryview, position: int = 0) -> Entry:
    """The entry of the (validated) batch at ``position``; DecodeError when it is not one
    (bad CRC, offsets missing, a control batch mixing types, a record without a value)."""
    try:
        records = decode_records(data, position)
    except InvalidRecordBatchError as e:
        raise DecodeError(f"metadata batch at {position}: {e}") from None
    header = next(iter_batches(data, position))
    if not records or len(records) != header.last_offset_delta + 1:
        raise DecodeError(f"metadata batch at {position} with missing offsets")
    control: int | None = None
    if header.is_control:
        types = {_control_type(r, position) for r in records}
        if len(types) != 1:
            raise DecodeError(f"control batch at {position} mixes types {sorted(types)}")
        control = types.pop()
    values: list[bytes] = []
    for record in records:
        if record.value is None:
            raise DecodeError(f"metadata record without a value in the batch at {position}")
        values.append(bytes(record.value))
    # The batch's headers are those of its first record (one writer gives all the same).
    headers = tuple((name, data or b"") for name, data in records[0].headers)
    return Entry(header.base_offset, header.partition_leader_epoch, tuple(values), control, headers)


def decode_entries(data: bytes | memoryview) -> list[Entry]:
    """Every whole batch of ``data`` as entries (a torn last batch is left out, as a
    fetch response may end mid-batch)."""
    entries = []
    try:
        for header in iter_batches(data):
            entries.append(decode_entry(data, header.position))
    except InvalidRecordBatchError as e:
        raise DecodeError(f"metadata batches: {e}") from None
    return entries


def _control_type(record: Record, position: int) -> int:
    parsed = parse_control_key(record.key)
    if parsed is None:
        raise DecodeError(f"control record without a control key in the batch at {position}")
    return parsed[1]
