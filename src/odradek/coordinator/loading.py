"""Loading and unloading the groups of one ``__consumer_offsets`` partition, as its
leadership comes and goes (the replay of Kafka's ``GroupCoordinatorShard`` and its
loader).

:meth:`GroupLoader.load` replays a partition's records in log order (the last value of a
key wins, a tombstone deletes) into groups and committed offsets;
:meth:`GroupLoader.unload` answers the requests that wait on the partition's groups with
NOT_COORDINATOR and forgets them.
"""

from __future__ import annotations

from collections.abc import Iterable

from odradek.coordinator.classic_group import (
    CommittedOffset,
    Group,
    GroupState,
    Member,
    TopicPartition,
)
from odradek.coordinator.context import CoordinatorContext
from odradek.coordinator.outputs import Record
from odradek.coordinator.rebalance import Rebalancer, join_response, sync_response
from odradek.coordinator.record_helpers import committed_offset
from odradek.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    UnknownKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from odradek.core.errors import DecodeError
from odradek.protocol.error_codes import ErrorCode

__all__ = ["GroupLoader"]

_EMPTY = GroupState.EMPTY
_STABLE = GroupState.STABLE


class GroupLoader:
    """Which ``__consumer_offsets`` partitions' groups the context holds."""

    def __init__(self, ctx: CoordinatorContext, rebalance: Rebalancer) -> None:
        self._ctx = ctx
        self._rebalance = rebalance

    def begin_load(self, partition: int) -> None:
        """Mark ``partition`` as loading: its groups answer COORDINATOR_LOAD_IN_PROGRESS
        until :meth:`load` (optional; for a shell that reads the partition in steps)."""
        self._ctx.loading.add(partition)

    def load(self, partition: int, records: Iterable[Record]) -> None:
        """Rebuild every group of ``partition`` from its ``__consumer_offsets`` records in
        log order (the last value of a key wins, a tombstone deletes), and become its
        coordinator.

        Groups come back Empty, or Stable with their members and assignments of the last
        persisted generation; the members' sessions start now, so live members carry on
        with heartbeats and dead ones expire and cause a rebalance, as in Kafka.
        """
        self._unload_groups(partition)
        metadata: dict[str, GroupMetadataValue | None] = {}
        offsets: dict[str, dict[TopicPartition, CommittedOffset | None]] = {}
        for key_bytes, value_bytes in records:
            key = decode_key(key_bytes)
            if isinstance(key, UnknownKey):
                continue  # KIP-848 / share group records: not ours to keep
            if isinstance(key, OffsetCommitKey):
                offsets.setdefault(key.group, {})[(key.topic, key.partition)] = (
                    None
                    if value_bytes is None
                    else committed_offset(decode_offset_commit_value(value_bytes))
                )
            elif isinstance(key, GroupMetadataKey):
                metadata[key.group] = (
                    None if value_bytes is None else decode_group_metadata_value(value_bytes)
                )
        for group_id, group_value in metadata.items():
            if group_value is not None:
                self._ctx.groups[group_id] = self._group_from_record(group_id, group_value)
        for group_id, entries in offsets.items():
            live = {tp: o for tp, o in entries.items() if o is not None}
            group = self._ctx.groups.get(group_id)
            if group is None:
                if not live:
                    continue
                group = self._ctx.create_group(group_id)
            group.offsets = live
        if self._ctx.owned is not None:
            self._ctx.owned.add(partition)
        self._ctx.loading.discard(partition)
        for group_id in list(metadata):
            group = self._ctx.groups.get(group_id)
            if group is None:
                continue
            for member in group.members.values():
                self._ctx.schedule_session(group, member)
            if len(group.members) > self._ctx.config.max_size:
                # A lower group.max.size than before: rebalance, so that the members
                # beyond it are shed while the others can commit first.
                self._rebalance.prepare_rebalance(group)

    def _group_from_record(self, group_id: str, value: GroupMetadataValue) -> Group:
        if value.members and value.protocol is None:
            raise DecodeError(f"group {group_id}: members but no protocol in its metadata")
        group = Group(
            group_id,
            self._ctx.now_ms,
            state=_STABLE if value.members else _EMPTY,
            generation_id=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol if value.members else None,
        )
        if value.current_state_timestamp < 0:
            group.current_state_timestamp_ms = None
        else:
            group.current_state_timestamp_ms = value.current_state_timestamp
        for m in value.members:
            group.add(
                Member(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout,
                    session_timeout_ms=m.session_timeout,
                    protocol_type=value.protocol_type,
                    protocols=[(value.protocol or "", m.subscription)],
                    assignment=m.assignment,
                )
            )
        if value.leader is not None and value.leader in group.members:
            group.leader_id = value.leader
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    def unload(self, partition: int) -> None:
        """Stop coordinating the groups of ``partition`` (another node leads it now):
        waiting requests are answered NOT_COORDINATOR and the groups are dropped."""
        self._unload_groups(partition)
        if self._ctx.owned is None:
            self._ctx.owned = set(range(self._ctx.config.offsets_topic_num_partitions))
        self._ctx.owned.discard(partition)
        self._ctx.loading.discard(partition)

    def _unload_groups(self, partition: int) -> None:
        for group in list(self._ctx.groups.values()):
            if self._ctx.partition_for(group.group_id) != partition:
                continue
            for member in group.members.values():
                if member.awaiting_join is not None:
                    w = member.awaiting_join
                    member.awaiting_join = None
                    self._ctx.complete(
                        w, join_response(w.version, ErrorCode.NOT_COORDINATOR, member.member_id)
                    )
                if member.awaiting_sync is not None:
                    w = member.awaiting_sync
                    member.awaiting_sync = None
                    self._ctx.complete(w, sync_response(ErrorCode.NOT_COORDINATOR))
            self._ctx.drop_group(group)
