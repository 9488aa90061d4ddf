"""What the group coordinator's managers share: the groups, the timers, the time, the
output being built, the writes in flight and the partitions this node coordinates.

Kafka's coordinator shard gives its ``GroupMetadataManager`` and
``OffsetMetadataManager`` one snapshot registry, one timer and one clock; here they are
one :class:`CoordinatorContext`. Every request or tick starts with :meth:`begin` (the
time moves forward, a fresh :class:`~odradek.coordinator.outputs.Output`) and ends with
:meth:`finish`; in between, the managers :meth:`complete` requests and :meth:`emit`
writes, each write with the continuation that :meth:`GroupCoordinator.write_completed
<odradek.coordinator.group.GroupCoordinator.write_completed>` hands back to its owner.

The timer keys live here too, because both the facade (which fires them) and the
managers (which set them) name them.
"""

from __future__ import annotations

from typing import Any

from odradek.coordinator.classic_group import Group, GroupState, Member, Waiter
from odradek.coordinator.group_config import GroupConfig
from odradek.coordinator.outputs import Completion, Output, Record, Write
from odradek.coordinator.records import partition_for
from odradek.coordinator.timers import Timers
from odradek.protocol.error_codes import ErrorCode

__all__ = [
    "RETENTION",
    "CoordinatorContext",
    "append_error",
    "join_key",
    "member_key",
    "pending_key",
    "sync_key",
]

# Timer keys. The first element says what the deadline is for.
RETENTION = ("retention",)


def join_key(group_id: str) -> tuple[str, str]:
    return ("join", group_id)


def sync_key(group_id: str) -> tuple[str, str]:
    return ("sync", group_id)


def member_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("member", group_id, member_id)


def pending_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("pending", group_id, member_id)


def append_error(error: ErrorCode) -> ErrorCode:
    """What a failed append to ``__consumer_offsets`` tells the client (Kafka's mapping)."""
    if error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.INVALID_FETCH_SIZE,
    ):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


class CoordinatorContext:
    """The state every manager of the group coordinator reads and changes.

    ``owned=None`` makes the node the coordinator of every ``__consumer_offsets``
    partition; ``loading`` holds the partitions whose groups are still being read.
    """

    def __init__(self, config: GroupConfig, *, owned: set[int] | None, now_ms: int) -> None:
        self.config = config
        self.owned = owned
        self.loading: set[int] = set()
        self.groups: dict[str, Group] = {}
        self.timers = Timers()
        # write id -> (partition, continuation): what to do once the write is reported.
        # Each manager owns the continuation types it emits; None needs nothing done.
        self.pending_writes: dict[int, tuple[int, object]] = {}
        self.next_write_id = 1
        self.now_ms = now_ms
        self.out = Output()

    # -- one call -----------------------------------------------------------------------------

    def begin(self, now_ms: int) -> None:
        # Time only moves forward, even if a caller's clock steps back.
        self.now_ms = max(self.now_ms, now_ms)
        self.out = Output()

    def finish(self) -> Output:
        out, self.out = self.out, Output()
        return out

    def complete(self, waiter: Waiter, response: Any) -> None:
        self.out.completions.append(Completion(waiter.token, response))

    def emit_write(self, group: Group, records: list[Record], then: object) -> int:
        return self.emit(self.partition_for(group.group_id), records, then)

    def emit(self, partition: int, records: list[Record], then: object) -> int:
        write_id = self.next_write_id
        self.next_write_id += 1
        self.pending_writes[write_id] = (partition, then)
        self.out.writes.append(Write(write_id, partition, tuple(records)))
        return write_id

    # -- ownership ----------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def owns(self, partition: int) -> bool:
        return self.owned is None or partition in self.owned

    def group_status(self, group_id: str, *, allow_empty_id: bool) -> ErrorCode | None:
        # OffsetCommit, OffsetFetch, DescribeGroups and DeleteGroups accept the empty
        # group id, for old clients that store offsets under it.
        if group_id == "" and not allow_empty_id:
            return ErrorCode.INVALID_GROUP_ID
        partition = self.partition_for(group_id)
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if not self.owns(partition):
            return ErrorCode.NOT_COORDINATOR
        return None

    # -- groups -------------------------------------------------------------------------------

    def create_group(self, group_id: str) -> Group:
        group = Group(group_id, self.now_ms)
        self.groups[group_id] = group
        return group

    def drop_group(self, group: Group) -> None:
        """Forget a group and every timer of it (the caller writes any tombstones)."""
        g = group.group_id
        self.timers.cancel(join_key(g))
        self.timers.cancel(sync_key(g))
        for member_id in group.members:
            self.timers.cancel(member_key(g, member_id))
        for member_id in group.pending_join_members:
            self.timers.cancel(pending_key(g, member_id))
        group.transition_to(GroupState.DEAD, self.now_ms)
        del self.groups[g]

    def schedule_session(self, group: Group, member: Member) -> None:
        self.timers.set(
            member_key(group.group_id, member.member_id), self.now_ms + member.session_timeout_ms
        )
