"""Consumer groups with Kafka's classic protocol, and their committed offsets, as a pure
state machine: :class:`GroupCoordinator`, one per node for many groups, is the facade the
shell calls (Kafka's ``GroupCoordinatorShard``).

The rules follow Kafka's ``GroupCoordinator`` (and the classic group of its newer group
coordinator): the five states, JoinGroup with MEMBER_ID_REQUIRED, protocol selection by
vote, the initial rebalance delay of a new group, rebalance timeouts that drop members
that do not rejoin, session expiry, static membership (``group.instance.id``) with
fencing, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit and OffsetFetch, ListGroups,
DescribeGroups, DeleteGroups, offset retention and the ``__consumer_offsets`` records
that make it all survive a restart. Each has one owner behind this facade:

* :mod:`~odradek.coordinator.classic_group`: :class:`Group`, :class:`Member`,
  :class:`GroupState` and :class:`CommittedOffset`, the model;
* :mod:`~odradek.coordinator.membership`: JoinGroup, Heartbeat, LeaveGroup, static
  membership and session expiry;
* :mod:`~odradek.coordinator.rebalance`: the join and sync phases, SyncGroup and the
  assignment's write;
* :mod:`~odradek.coordinator.offsets`: OffsetCommit, OffsetFetch and retention;
* :mod:`~odradek.coordinator.admin`: ListGroups, DescribeGroups and DeleteGroups;
* :mod:`~odradek.coordinator.loading`: the replay of a ``__consumer_offsets`` partition
  when this node becomes its leader, and the unloading when it stops being;
* :mod:`~odradek.coordinator.context`: what they share (groups, timers, time, the output
  being built, the writes in flight, the partitions owned);
* :mod:`~odradek.coordinator.record_helpers`: the model as records.

Nothing here waits, reads a clock or does I/O. Requests come in as decoded message
objects with an opaque token and the time; every call returns an
:class:`~odradek.coordinator.outputs.Output` of responses that are ready and records to
persist (see that module for the contract). Timers are deadlines the caller learns from
:meth:`GroupCoordinator.next_deadline_ms` and fires with :meth:`GroupCoordinator.tick`.
Member ids come from an injected ``random.Random``, so a run is a function of its inputs.

Not covered: transactional offset commits (TxnOffsetCommit), so ``require_stable`` in
OffsetFetch never has anything to wait for; OffsetDelete; KIP-848 consumer groups (their
records in ``__consumer_offsets`` are skipped on load); authorization.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from odradek.coordinator.admin import DeleteGroupsWrite, GroupAdmin
from odradek.coordinator.classic_group import CommittedOffset, Group, GroupState, Member
from odradek.coordinator.context import RETENTION, CoordinatorContext
from odradek.coordinator.group_config import GroupConfig
from odradek.coordinator.loading import GroupLoader
from odradek.coordinator.membership import Membership, StaticRejoinWrite
from odradek.coordinator.offsets import OffsetCommitWrite, OffsetMetadataManager
from odradek.coordinator.outputs import Output, Record, Token
from odradek.coordinator.rebalance import Rebalancer, SyncWrite
from odradek.core.invariant import invariant
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages.delete_groups_request import DeleteGroupsRequest
from odradek.protocol.messages.describe_groups_request import DescribeGroupsRequest
from odradek.protocol.messages.heartbeat_request import HeartbeatRequest
from odradek.protocol.messages.join_group_request import JoinGroupRequest
from odradek.protocol.messages.leave_group_request import LeaveGroupRequest
from odradek.protocol.messages.list_groups_request import ListGroupsRequest
from odradek.protocol.messages.offset_commit_request import OffsetCommitRequest
from odradek.protocol.messages.offset_fetch_request import OffsetFetchRequest
from odradek.protocol.messages.sync_group_request import SyncGroupRequest

__all__ = [
    "API_VERSIONS",
    "CommittedOffset",
    "Group",
    "GroupCoordinator",
    "GroupState",
    "Member",
]

API_VERSIONS: dict[int, tuple[int, int]] = {
    JoinGroupRequest.API_KEY: JoinGroupRequest.VALID_VERSIONS,
    SyncGroupRequest.API_KEY: SyncGroupRequest.VALID_VERSIONS,
    HeartbeatRequest.API_KEY: HeartbeatRequest.VALID_VERSIONS,
    LeaveGroupRequest.API_KEY: LeaveGroupRequest.VALID_VERSIONS,
    OffsetCommitRequest.API_KEY: OffsetCommitRequest.VALID_VERSIONS,
    OffsetFetchRequest.API_KEY: OffsetFetchRequest.VALID_VERSIONS,
    ListGroupsRequest.API_KEY: ListGroupsRequest.VALID_VERSIONS,
    DescribeGroupsRequest.API_KEY: DescribeGroupsRequest.VALID_VERSIONS,
    DeleteGroupsRequest.API_KEY: DeleteGroupsRequest.VALID_VERSIONS,
}
"""The API versions :meth:`GroupCoordinator.handle` answers, by API key."""


class GroupCoordinator:
    """Every classic group of the ``__consumer_offsets`` partitions this node leads.

    ``owned_partitions=None`` makes the node the coordinator of every partition (a single
    node); otherwise requests for groups of other partitions get NOT_COORDINATOR, and
    :meth:`load` / :meth:`unload` follow leadership changes.

    Each public call begins by firing every deadline up to ``now_ms`` and returns what
    the call produced; the managers behind it only add to that output.
    """

    def __init__(
        self,
        config: GroupConfig | None = None,
        *,
        rng: random.Random,
        owned_partitions: Iterable[int] | None = None,
        now_ms: int = 0,
    ) -> None:
        config = config or GroupConfig()
        self._rng = rng
        owned = None if owned_partitions is None else set(owned_partitions)
        self._ctx = CoordinatorContext(config, owned=owned, now_ms=now_ms)
        self._rebalance = Rebalancer(self._ctx)
        self._membership = Membership(self._ctx, self._rebalance, rng=rng)
        self._offsets = OffsetMetadataManager(self._ctx)
        self._admin = GroupAdmin(self._ctx)
        self._loader = GroupLoader(self._ctx, self._rebalance)
        self._ctx.timers.set(RETENTION, now_ms + config.offsets_retention_check_interval_ms)

    @property
    def config(self) -> GroupConfig:
        return self._ctx.config

    # ======================================================================================
    # Queries
    # ======================================================================================

    def group(self, group_id: str) -> Group | None:
        return self._ctx.groups.get(group_id)

    def groups(self) -> Iterator[Group]:
        return iter(list(self._ctx.groups.values()))

    def partition_for(self, group_id: str) -> int:
        return self._ctx.partition_for(group_id)

    def next_deadline_ms(self) -> int | None:
        """When :meth:`tick` must next be called (None: nothing is timed)."""
        return self._ctx.timers.next_deadline_ms()

    def pending_write_ids(self) -> list[int]:
        return list(self._ctx.pending_writes)

    def check_invariants(self) -> None:
        """Raise InvariantError if any group or timer is inconsistent (used by the tests)."""
        for group in self._ctx.groups.values():
            group.check_invariants()
            self._rebalance.check_timers(group)

    # ======================================================================================
    # Requests
    # ======================================================================================

    def handle(
        self,
        token: Token,
        request: Any,
        version: int,
        *,
        now_ms: int,
        client_id: str = "",
        client_host: str = "",
        partition_exists: Callable[[str, int], bool] | None = None,
    ) -> Output:
        """Dispatch any of the group requests in :data:`API_VERSIONS` by its type."""
        if isinstance(request, JoinGroupRequest):
            return self.join_group(
                token,
                request,
                version,
                client_id=client_id,
                client_host=client_host,
                now_ms=now_ms,
            )
        if isinstance(request, SyncGroupRequest):
            return self.sync_group(token, request, version, now_ms=now_ms)
        if isinstance(request, HeartbeatRequest):
            return self.heartbeat(token, request, version, now_ms=now_ms)
        if isinstance(request, LeaveGroupRequest):
            return self.leave_group(token, request, version, now_ms=now_ms)
        if isinstance(request, OffsetCommitRequest):
            return self.offset_commit(
                token, request, version, now_ms=now_ms, partition_exists=partition_exists
            )
        if isinstance(request, OffsetFetchRequest):
            return self.offset_fetch(token, request, version, now_ms=now_ms)
        if isinstance(request, ListGroupsRequest):
            return self.list_groups(token, request, version, now_ms=now_ms)
        if isinstance(request, DescribeGroupsRequest):
            return self.describe_groups(token, request, version, now_ms=now_ms)
        if isinstance(request, DeleteGroupsRequest):
            return self.delete_groups(token, request, version, now_ms=now_ms)
        raise TypeError(f"not a group request: {type(request).__name__}")

    def join_group(
        self,
        token: Token,
        request: JoinGroupRequest,
        version: int,
        *,
        client_id: str,
        client_host: str,
        now_ms: int,
    ) -> Output:
        """JoinGroup. ``client_id`` is the request header's, ``client_host`` the peer's
        address; both show in DescribeGroups and the persisted member metadata."""
        self._begin(now_ms)
        self._membership.join_group(
            token, request, version, client_id=client_id, client_host=client_host
        )
        return self._ctx.finish()

    def sync_group(
        self, token: Token, request: SyncGroupRequest, version: int, *, now_ms: int
    ) -> Output:
        self._begin(now_ms)
        self._rebalance.sync_group(token, request, version)
        return self._ctx.finish()

    def heartbeat(
        self, token: Token, request: HeartbeatRequest, version: int, *, now_ms: int
    ) -> Output:
        self._begin(now_ms)
        self._membership.heartbeat(token, request, version)
        return self._ctx.finish()

    def leave_group(
        self, token: Token, request: LeaveGroupRequest, version: int, *, now_ms: int
    ) -> Output:
        """LeaveGroup: v0-v2 name one member; v3+ a batch, by member id or instance id."""
        self._begin(now_ms)
        self._membership.leave_group(token, request, version)
        return self._ctx.finish()

    def offset_commit(
        self,
        token: Token,
        request: OffsetCommitRequest,
        version: int,
        *,
        now_ms: int,
        partition_exists: Callable[[str, int], bool] | None = None,
    ) -> Output:
        """OffsetCommit. The response waits for the offsets to be durable (a Write).

        ``partition_exists`` lets the broker refuse partitions it does not know with
        UNKNOWN_TOPIC_OR_PARTITION, as Kafka does; without it every partition is taken.
        """
        self._begin(now_ms)
        self._offsets.offset_commit(token, request, version, partition_exists=partition_exists)
        return self._ctx.finish()

    def offset_fetch(
        self, token: Token, request: OffsetFetchRequest, version: int, *, now_ms: int
    ) -> Output:
        """OffsetFetch: v0-v7 for one group, v8+ for several."""
        self._begin(now_ms)
        self._offsets.offset_fetch(token, request, version)
        return self._ctx.finish()

    def list_groups(
        self, token: Token, request: ListGroupsRequest, version: int, *, now_ms: int
    ) -> Output:
        self._begin(now_ms)
        self._admin.list_groups(token, request, version)
        return self._ctx.finish()

    def describe_groups(
        self, token: Token, request: DescribeGroupsRequest, version: int, *, now_ms: int
    ) -> Output:
        self._begin(now_ms)
        self._admin.describe_groups(token, request, version)
        return self._ctx.finish()

    def delete_groups(
        self, token: Token, request: DeleteGroupsRequest, version: int, *, now_ms: int
    ) -> Output:
        """DeleteGroups: only empty groups; the answer waits until their tombstones are
        durable."""
        self._begin(now_ms)
        self._admin.delete_groups(token, request, version)
        return self._ctx.finish()

    # ======================================================================================
    # Time
    # ======================================================================================

    def tick(self, now_ms: int) -> Output:
        """Fire every deadline at or before ``now_ms``: rebalance and initial delays, pending
        syncs, session expiry of members and of pending member ids, offset retention.

        Every other call does this first too, so a late tick changes nothing: a request
        at time t always sees the state with every deadline up to t handled.
        """
        self._begin(now_ms)
        return self._ctx.finish()

    def _begin(self, now_ms: int) -> None:
        self._ctx.begin(now_ms)
        self._fire_due()

    def _fire_due(self) -> None:
        ctx = self._ctx
        while (key := ctx.timers.pop_due(ctx.now_ms)) is not None:
            assert isinstance(key, tuple)
            kind = key[0]
            if kind == "retention":
                self._offsets.expire_offsets()
                continue
            group = ctx.groups.get(key[1])
            if group is None:
                continue
            if kind == "join":
                if group.state is GroupState.PREPARING_REBALANCE:
                    self._rebalance.on_join_deadline(group)
            elif kind == "sync":
                self._rebalance.on_sync_deadline(group)
            elif kind == "member":
                self._membership.on_session_deadline(group, key[2])
            elif kind == "pending" and key[2] in group.pending_join_members:
                self._rebalance.remove_pending_member_and_update_group(group, key[2])

    # ======================================================================================
    # Persistence
    # ======================================================================================

    def write_completed(
        self, write_id: int, *, now_ms: int, error: ErrorCode | int = ErrorCode.NONE
    ) -> Output:
        """Report that a :class:`~odradek.coordinator.outputs.Write` is durable (``error``
        NONE) or has failed (the append's error, e.g. NOT_LEADER_OR_FOLLOWER,
        NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT). Releases what waited for it."""
        self._begin(now_ms)
        error = ErrorCode(error)
        entry = self._ctx.pending_writes.pop(write_id, None)
        invariant(entry is not None, f"write {write_id} is not pending")
        assert entry is not None
        _partition, continuation = entry
        # Each continuation goes back to the manager that emitted the write.
        if isinstance(continuation, OffsetCommitWrite):
            self._offsets.offset_commit_written(write_id, continuation, error)
        elif isinstance(continuation, SyncWrite):
            self._rebalance.sync_written(continuation, error)
        elif isinstance(continuation, StaticRejoinWrite):
            self._membership.static_rejoin_written(continuation, error)
        elif isinstance(continuation, DeleteGroupsWrite):
            self._admin.delete_groups_written(continuation, error)
        else:
            invariant(continuation is None, f"write {write_id} has an unknown continuation")
        return self._ctx.finish()

    def begin_load(self, partition: int) -> None:
        """Mark ``partition`` as loading: its groups answer COORDINATOR_LOAD_IN_PROGRESS
        until :meth:`load` (optional; for a shell that reads the partition in steps)."""
        self._loader.begin_load(partition)

    def load(self, partition: int, records: Iterable[Record], *, now_ms: int) -> Output:
        """Rebuild every group of ``partition`` from its ``__consumer_offsets`` records in
        log order, and become its coordinator (see
        :meth:`~odradek.coordinator.loading.GroupLoader.load`)."""
        self._begin(now_ms)
        self._loader.load(partition, records)
        return self._ctx.finish()

    def unload(self, partition: int, *, now_ms: int) -> Output:
        """Stop coordinating the groups of ``partition`` (another node leads it now):
        waiting requests are answered NOT_COORDINATOR and the groups are dropped."""
        self._begin(now_ms)
        self._loader.unload(partition)
        return self._ctx.finish()
