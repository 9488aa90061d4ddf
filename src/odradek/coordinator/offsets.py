"""Committed offsets: OffsetCommit, OffsetFetch and retention (Kafka's
``OffsetMetadataManager``).

An offset is visible once its record is durable: :meth:`OffsetMetadataManager.offset_commit`
emits the write and answers when :meth:`OffsetMetadataManager.offset_commit_written`
reports it. Retention (``offsets.retention.minutes``) follows Kafka's rules, which
:meth:`~odradek.coordinator.classic_group.Group.expired_offsets` states; an empty group
left with no offsets is dropped with them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from odradek.coordinator.classic_group import (
    CommittedOffset,
    Group,
    GroupState,
    TopicPartition,
    Waiter,
)
from odradek.coordinator.context import RETENTION, CoordinatorContext, append_error
from odradek.coordinator.outputs import Record, Token
from odradek.coordinator.record_helpers import group_tombstones, offset_commit_value
from odradek.coordinator.records import OffsetCommitKey, encode_key
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages.offset_commit_request import OffsetCommitRequest
from odradek.protocol.messages.offset_commit_response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from odradek.protocol.messages.offset_fetch_request import OffsetFetchRequest
from odradek.protocol.messages.offset_fetch_response import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)

__all__ = ["NO_OFFSET", "OffsetCommitWrite", "OffsetMetadataManager"]

NO_OFFSET = -1

_EMPTY = GroupState.EMPTY
_PREPARING = GroupState.PREPARING_REBALANCE
_COMPLETING = GroupState.COMPLETING_REBALANCE
_STABLE = GroupState.STABLE
_DEAD = GroupState.DEAD


def _java_length(text: str) -> int:
    """``String.length()`` in Java: UTF-16 code units, as ``offset.metadata.max.bytes``
    is checked in Kafka."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _commit_append_error(error: ErrorCode) -> ErrorCode:
    if error in (
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.INVALID_FETCH_SIZE,
    ):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return append_error(error)


@dataclass(slots=True)
class OffsetCommitWrite:
    group: Group
    """The group as it was when the commit was made: if it has been deleted since, the
    tombstones follow this commit in the log and win."""
    token: Token
    response: OffsetCommitResponse
    entries: dict[TopicPartition, CommittedOffset]
    results: dict[TopicPartition, list[OffsetCommitResponsePartition]]


class OffsetMetadataManager:
    """The committed offsets of every group in the context."""

    def __init__(self, ctx: CoordinatorContext) -> None:
        self._ctx = ctx

    # -- OffsetCommit ------------------------------------------------------------------------

    def offset_commit(
        self,
        token: Token,
        request: OffsetCommitRequest,
        version: int,
        *,
        partition_exists: Callable[[str, int], bool] | None = None,
    ) -> None:
        """OffsetCommit. The response waits for the offsets to be durable (a Write).

        ``partition_exists`` lets the broker refuse partitions it does not know with
        UNKNOWN_TOPIC_OR_PARTITION, as Kafka does; without it every partition is taken.
        """
        waiter = Waiter(token, version)
        results: dict[TopicPartition, list[OffsetCommitResponsePartition]] = {}
        response = OffsetCommitResponse(topics=[])
        for topic in request.topics:
            out_topic = OffsetCommitResponseTopic(name=topic.name, partitions=[])
            response.topics.append(out_topic)
            for p in topic.partitions:
                result = OffsetCommitResponsePartition(partition_index=p.partition_index)
                out_topic.partitions.append(result)
                results.setdefault((topic.name, p.partition_index), []).append(result)

        def fail_all(error: ErrorCode) -> None:
            for rs in results.values():
                for r in rs:
                    r.error_code = int(error)
            self._ctx.complete(waiter, response)

        error = self._ctx.group_status(request.group_id, allow_empty_id=True)
        if error is not None:
            fail_all(error)
            return
        generation = request.generation_id_or_member_epoch
        group = self._ctx.groups.get(request.group_id)
        if group is None:
            if generation >= 0:
                # A member of a generation that no longer exists.
                fail_all(ErrorCode.ILLEGAL_GENERATION)
                return
            # Generation -1: a client that only stores offsets here (no group management).
            group = self._ctx.create_group(request.group_id)
        error = self._validate_offset_commit(
            group, request.member_id, request.group_instance_id, generation
        )
        if error is not None:
            fail_all(error)
            return
        member = group.members.get(request.member_id)
        if member is not None and group.state in (_STABLE, _PREPARING):
            # A commit shows the member is alive, as a heartbeat would.
            self._ctx.schedule_session(group, member)

        entries: dict[TopicPartition, CommittedOffset] = {}
        for topic in request.topics:
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                if partition_exists is not None and not partition_exists(*tp):
                    for r in results[tp]:
                        r.error_code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    entries.pop(tp, None)
                    continue
                metadata = p.committed_metadata if p.committed_metadata is not None else ""
                if _java_length(metadata) > self._ctx.config.offset_metadata_max_bytes:
                    for r in results[tp]:
                        r.error_code = int(ErrorCode.OFFSET_METADATA_TOO_LARGE)
                    entries.pop(tp, None)
                    continue
                # v1 lets the client set the commit time; v2-v4 a retention time, which
                # becomes the offset's own expire time (the rule Kafka keeps for them).
                explicit = version == 1 and p.commit_timestamp != -1
                retention = request.retention_time_ms if 2 <= version <= 4 else -1
                entries[tp] = CommittedOffset(
                    offset=p.committed_offset,
                    leader_epoch=p.committed_leader_epoch,
                    metadata=metadata,
                    commit_timestamp_ms=p.commit_timestamp if explicit else self._ctx.now_ms,
                    expire_timestamp_ms=None if retention == -1 else self._ctx.now_ms + retention,
                )
        if not entries:
            self._ctx.complete(waiter, response)
            return
        records: list[Record] = [
            (
                encode_key(OffsetCommitKey(group.group_id, tp[0], tp[1])),
                offset_commit_value(entry),
            )
            for tp, entry in entries.items()
        ]
        for tp in entries:
            group.pending_offset_commits[tp] = group.pending_offset_commits.get(tp, 0) + 1
        self._ctx.emit_write(
            group,
            records,
            OffsetCommitWrite(group, token, response, entries, results),
        )

    def _validate_offset_commit(
        self, group: Group, member_id: str, group_instance_id: str | None, generation: int
    ) -> ErrorCode | None:
        if group.state is _DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.state is _EMPTY:
            # Admin clients and consumers without group management commit this way.
            return None
        if generation >= 0 or member_id != "" or group_instance_id is not None:
            error = group.validate_member(member_id, group_instance_id)
            if error is not None:
                return error
            if generation != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif group.state is not _EMPTY:
            # Without member id and generation, only an empty group takes commits.
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is _COMPLETING:
            # The member knows the new generation but not yet its assignment: it must not
            # commit for partitions it may be about to lose.
            return ErrorCode.REBALANCE_IN_PROGRESS
        return None

    # -- OffsetFetch -------------------------------------------------------------------------

    def offset_fetch(self, token: Token, request: OffsetFetchRequest, version: int) -> None:
        """OffsetFetch: v0-v7 for one group, v8+ for several.

        ``require_stable`` is accepted and has nothing to wait for: without transactions
        no commit is ever pending in a transaction, and commits pending durability are
        not visible anyway (only durable offsets are returned).
        """
        if version >= 8:
            groups = []
            for g in request.groups:
                wanted = (
                    None
                    if g.topics is None
                    else [(t.name, list(t.partition_indexes)) for t in g.topics]
                )
                error, found = self._fetch_offsets(g.group_id, wanted)
                if error is not ErrorCode.NONE:
                    found = []
                groups.append(
                    OffsetFetchResponseGroup(
                        group_id=g.group_id,
                        error_code=int(error),
                        topics=[
                            OffsetFetchResponseTopics(
                                name=name,
                                partitions=[
                                    OffsetFetchResponsePartitions(
                                        partition_index=pi,
                                        committed_offset=o,
                                        committed_leader_epoch=e,
                                        metadata=md,
                                    )
                                    for pi, o, e, md in parts
                                ],
                            )
                            for name, parts in found
                        ],
                    )
                )
            response = OffsetFetchResponse(groups=groups)
        else:
            wanted = (
                None
                if request.topics is None
                else [(t.name, list(t.partition_indexes)) for t in request.topics]
            )
            error, found = self._fetch_offsets(request.group_id, wanted)
            # v0 and v1 have no group-level error: each requested partition carries it.
            # Later versions answer a group error with no partitions, as Kafka does.
            partition_error = int(error) if version < 2 else 0
            if version >= 2 and error is not ErrorCode.NONE:
                found = []
            response = OffsetFetchResponse(
                error_code=int(error) if version >= 2 else 0,
                topics=[
                    OffsetFetchResponseTopic(
                        name=name,
                        partitions=[
                            OffsetFetchResponsePartition(
                                partition_index=pi,
                                committed_offset=o,
                                committed_leader_epoch=e,
                                metadata=md,
                                error_code=partition_error,
                            )
                            for pi, o, e, md in parts
                        ],
                    )
                    for name, parts in found
                ],
            )
        self._ctx.complete(Waiter(token, version), response)

    def _fetch_offsets(
        self, group_id: str, wanted: list[tuple[str, list[int]]] | None
    ) -> tuple[ErrorCode, list[tuple[str, list[tuple[int, int, int, str]]]]]:
        """(error, [(topic, [(partition, offset, leader epoch, metadata)])]); ``wanted``
        None means every committed offset of the group."""
        error = self._ctx.group_status(group_id, allow_empty_id=True)
        group = self._ctx.groups.get(group_id) if error is None else None
        offsets = group.offsets if group is not None else {}
        if wanted is None:
            if error is not None:
                return error, []
            by_topic: dict[str, list[tuple[int, int, int, str]]] = {}
            for (topic, partition), o in sorted(offsets.items()):
                by_topic.setdefault(topic, []).append(
                    (partition, o.offset, o.leader_epoch, o.metadata)
                )
            return ErrorCode.NONE, list(by_topic.items())
        found = []
        for topic, partitions in wanted:
            parts = []
            for partition in partitions:
                found_offset = offsets.get((topic, partition))
                if found_offset is None:
                    parts.append((partition, NO_OFFSET, -1, ""))
                else:
                    c = found_offset
                    parts.append((partition, c.offset, c.leader_epoch, c.metadata))
            found.append((topic, parts))
        return error or ErrorCode.NONE, found

    # -- retention and durability ---------------------------------------------------------

    def expire_offsets(self) -> None:
        """offsets.retention.minutes: drop expired offsets, and empty groups left with none."""
        tombstones: dict[int, list[Record]] = {}
        for group in list(self._ctx.groups.values()):
            expired = group.expired_offsets(self._ctx.now_ms, self._ctx.config.offsets_retention_ms)
            for tp in expired:
                del group.offsets[tp]
            drop = (
                group.state is _EMPTY
                and not group.offsets
                and not group.pending_offset_commits
                and not group.pending_join_members
            )
            records = group_tombstones(group, expired, with_metadata=drop)
            if drop:
                self._ctx.drop_group(group)
            if records:
                tombstones.setdefault(self._ctx.partition_for(group.group_id), []).extend(records)
        for partition, records in tombstones.items():
            self._ctx.emit(partition, records, None)
        self._ctx.timers.set(
            RETENTION, self._ctx.now_ms + self._ctx.config.offsets_retention_check_interval_ms
        )

    def offset_commit_written(self, write_id: int, c: OffsetCommitWrite, error: ErrorCode) -> None:
        group = c.group
        # A group deleted since (or unloaded with its partition) is no longer the one in the
        # map: its tombstones follow this commit in the log, so the commit is void.
        alive = self._ctx.groups.get(group.group_id) is group
        if alive:
            for tp in c.entries:
                left = group.pending_offset_commits.get(tp, 0) - 1
                if left > 0:
                    group.pending_offset_commits[tp] = left
                else:
                    group.pending_offset_commits.pop(tp, None)
        if error is ErrorCode.NONE:
            if alive:
                for tp, entry in c.entries.items():
                    existing = group.offsets.get(tp)
                    # Writes reach the log in the order they were made: the later one wins
                    # even if the earlier one is reported last.
                    if existing is None or existing.write_id < write_id:
                        group.offsets[tp] = replace(entry, write_id=write_id)
        else:
            code = int(_commit_append_error(error))
            for tp in c.entries:
                for r in c.results[tp]:
                    r.error_code = code
        self._ctx.complete(Waiter(c.token, 0), c.response)
