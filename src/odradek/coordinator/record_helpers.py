"""The group coordinator's model as ``__consumer_offsets`` records, and committed offsets
back from them (Kafka's ``GroupCoordinatorRecordHelpers``).

:mod:`odradek.coordinator.records` owns the bytes of each key and value; this module
decides what goes into them: a group's metadata record for a generation, the tombstones
that delete a group or some of its offsets, and an offset commit's value.
"""

from __future__ import annotations

from odradek.coordinator.classic_group import CommittedOffset, Group, TopicPartition
from odradek.coordinator.outputs import Record
from odradek.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
)

__all__ = [
    "committed_offset",
    "group_metadata_record",
    "group_tombstones",
    "offset_commit_value",
]


def group_metadata_record(group: Group, assignment: dict[str, bytes] | None = None) -> Record:
    """The group's metadata record: its generation and members, with ``assignment``
    (member id -> bytes) instead of the members' current assignments when given."""
    name = group.protocol_name
    value = GroupMetadataValue(
        protocol_type=group.protocol_type or "",
        generation=group.generation_id,
        protocol=name,
        leader=group.leader_id,
        current_state_timestamp=-1
        if group.current_state_timestamp_ms is None
        else group.current_state_timestamp_ms,
        members=tuple(
            MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata(name) if name is not None else b"",
                assignment=m.assignment if assignment is None else assignment[m.member_id],
            )
            for m in group.members.values()
        ),
    )
    return (
        encode_key(GroupMetadataKey(group.group_id)),
        encode_group_metadata_value(value),
    )


def group_tombstones(
    group: Group, offsets: list[TopicPartition], *, with_metadata: bool = True
) -> list[Record]:
    """Tombstones for ``offsets`` of the group and, with ``with_metadata``, for its
    metadata record."""
    records: list[Record] = [
        (encode_key(OffsetCommitKey(group.group_id, topic, partition)), None)
        for topic, partition in offsets
    ]
    # A group that never had a generation only stored offsets: it has no metadata
    # record to delete.
    if with_metadata and group.generation_id > 0:
        records.append((encode_key(GroupMetadataKey(group.group_id)), None))
    return records


def offset_commit_value(entry: CommittedOffset) -> bytes:
    return encode_offset_commit_value(
        OffsetCommitValue(
            offset=entry.offset,
            metadata=entry.metadata,
            commit_timestamp=entry.commit_timestamp_ms,
            leader_epoch=entry.leader_epoch,
            expire_timestamp=-1 if entry.expire_timestamp_ms is None else entry.expire_timestamp_ms,
        )
    )


def committed_offset(value: OffsetCommitValue) -> CommittedOffset:
    return CommittedOffset(
        offset=value.offset,
        leader_epoch=value.leader_epoch,
        metadata=value.metadata,
        commit_timestamp_ms=value.commit_timestamp,
        expire_timestamp_ms=None if value.expire_timestamp == -1 else value.expire_timestamp,
    )
