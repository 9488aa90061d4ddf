"""Control batches: the commit and abort markers of transactions (and the leader-change
records of the metadata log), encoded and read.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from odradek.core.errors import (
    DecodeError,
    EncodeError,
)
from odradek.protocol.record_batch import (
    Buffer,
    ControlType,
    byte_view,
    validate_batch,
)
from odradek.protocol.record_codec import (
    Record,
    decode_records,
    encode_batch,
)

# Control batches -----------------------------------------------------------------

_CONTROL_KEY = struct.Struct(">hh")


def control_key(control_type: int, version: int = 0) -> bytes:
    """A control record's key: ``version`` int16, then ``control_type`` int16. The one
    place that writes it, for control batches here and for the KRaft log's own."""
    return _CONTROL_KEY.pack(version, control_type)


def parse_control_key(key: Buffer | None) -> tuple[int, int] | None:
    """``(version, control_type)`` of a control record's key, or None when it is missing
    or shorter than 4 bytes (Kafka requires 4 and ignores any bytes beyond them); what
    that means is the caller's to say."""
    if key is None or len(key) < _CONTROL_KEY.size:
        return None
    version, control_type = _CONTROL_KEY.unpack_from(key)
    return int(version), int(control_type)


def encode_control_batch(
    control_type: int,
    value: bytes | None,
    *,
    version: int = 0,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    timestamp: int = 0,
    is_transactional: bool | None = None,
) -> bytes:
    """A control batch of one record whose key is ``version`` int16 + ``control_type``
    int16 and whose value is ``value`` (an EndTxnMarker, a LeaderChangeMessage, ...).

    ``is_transactional`` defaults to true for ABORT and COMMIT markers, which belong to a
    producer's transaction, and to false for the KRaft control records.
    """
    if is_transactional is None:
        is_transactional = control_type in (ControlType.ABORT, ControlType.COMMIT)
    try:
        key = control_key(control_type, version)
    except struct.error:
        raise EncodeError(f"control key ({version}, {control_type}) out of int16 range") from None
    record = Record(offset_delta=0, timestamp=timestamp, key=key, value=value)
    return encode_batch(
        [record],
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=is_transactional,
        is_control=True,
    )


def control_record_type(buf: Buffer, pos: int = 0) -> int:
    """The control type (see :class:`ControlType`) of the control batch at ``pos``.

    An int rather than the enum because a newer Kafka may define types we do not know,
    and the caller decides whether that matters. Raises :class:`DecodeError` if the
    batch is not a control batch, holds no record, or its key is not a control key.
    """
    buf = byte_view(buf)
    header = validate_batch(buf, pos, compacted=True)
    if not header.is_control:
        raise DecodeError(f"batch at {pos} is not a control batch")
    records = decode_records(buf, pos)
    if not records:
        raise DecodeError(f"control batch at {pos} holds no record")
    key = records[0].key
    parsed = parse_control_key(key)
    if parsed is None:
        raise DecodeError(f"control batch at {pos}: key {key!r} is shorter than 4 bytes")
    version, control_type = parsed
    if version < 0:
        raise DecodeError(f"control batch at {pos}: negative control key version {version}")
    return int(control_type)


# Transaction markers ---------------------------------------------------------------

_END_TXN_MARKER = struct.Struct(">hi")
END_TXN_MARKER_VERSION = 0


class EndTxnMarker(NamedTuple):
    """A COMMIT or ABORT marker: what ends a producer's transaction on one partition.

    The record's key is the control key; its value is Kafka's ``EndTxnMarker``: version
    int16 (0), then the coordinator epoch int32 of the transaction coordinator that wrote
    it (a partition refuses markers from an older coordinator).
    """

    committed: bool
    coordinator_epoch: int


def encode_end_txn_marker(
    marker: EndTxnMarker,
    *,
    producer_id: int,
    producer_epoch: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    timestamp: int = 0,
) -> bytes:
    """The control batch of one marker, as a partition leader appends it."""
    value = _END_TXN_MARKER.pack(END_TXN_MARKER_VERSION, marker.coordinator_epoch)
    return encode_control_batch(
        ControlType.COMMIT if marker.committed else ControlType.ABORT,
        value,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        timestamp=timestamp,
    )


def read_end_txn_marker(buf: Buffer, pos: int = 0) -> EndTxnMarker | None:
    """The marker of the control batch at ``pos``; None for a control batch of another
    type (the KRaft log's). A COMMIT or ABORT whose value is missing or shorter than
    Kafka's six bytes is a :class:`DecodeError` (Kafka's ``EndTransactionMarker``
    refuses it too); later versions may add fields after them, which are ignored."""
    buf = byte_view(buf)
    control_type = control_record_type(buf, pos)
    if control_type not in (ControlType.ABORT, ControlType.COMMIT):
        return None
    value = decode_records(buf, pos)[0].value
    if value is None or len(value) < _END_TXN_MARKER.size:
        raise DecodeError(f"transaction marker at {pos}: value {value!r} is not an EndTxnMarker")
    version, coordinator_epoch = _END_TXN_MARKER.unpack_from(value)
    if version < 0:
        raise DecodeError(f"transaction marker at {pos}: negative version {version}")
    return EndTxnMarker(control_type == ControlType.COMMIT, int(coordinator_epoch))
