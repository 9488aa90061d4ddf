"""A driver for the group coordinator that plays the shell and the clients.

It passes tokens, keeps each client's member id and generation as a real consumer would,
appends writes to an in-memory ``__consumer_offsets`` log (completing them at once unless
told otherwise), checks that every token is answered exactly once and that every response
encodes in its version, and writes a transcript: one line per response and per write, with
member ids shortened to ``client#n`` so that expectations stay readable.
"""

from __future__ import annotations

import random
import re
import textwrap
from dataclasses import dataclass, field
from typing import Any

from odradek.coordinator import (
    GroupConfig,
    GroupCoordinator,
    GroupState,
    Output,
    Record,
    Write,
)
from odradek.coordinator.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages.delete_groups_request import DeleteGroupsRequest
from odradek.protocol.messages.describe_groups_request import DescribeGroupsRequest
from odradek.protocol.messages.heartbeat_request import HeartbeatRequest
from odradek.protocol.messages.heartbeat_response import HeartbeatResponse
from odradek.protocol.messages.join_group_request import (
    JoinGroupRequest,
    JoinGroupRequestProtocol,
)
from odradek.protocol.messages.join_group_response import JoinGroupResponse
from odradek.protocol.messages.leave_group_request import LeaveGroupRequest, MemberIdentity
from odradek.protocol.messages.leave_group_response import LeaveGroupResponse
from odradek.protocol.messages.list_groups_request import ListGroupsRequest
from odradek.protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from odradek.protocol.messages.offset_commit_response import OffsetCommitResponse
from odradek.protocol.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from odradek.protocol.messages.offset_fetch_response import OffsetFetchResponse
from odradek.protocol.messages.sync_group_request import (
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)
from odradek.protocol.messages.sync_group_response import SyncGroupResponse

TEST_CONFIG = GroupConfig(
    min_session_timeout_ms=1000,
    max_session_timeout_ms=60_000,
    initial_rebalance_delay_ms=3000,
    offsets_topic_num_partitions=4,
)
PROTOCOLS = [("range", b"r"), ("roundrobin", b"rr")]
SESSION_MS = 10_000
REBALANCE_MS = 30_000

_UUID = re.compile(r"^(.*)-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def expect(text: str) -> str:
    return textwrap.dedent(text).strip()


@dataclass
class Client:
    """What a consumer remembers between requests."""

    name: str
    group_id: str
    instance_id: str | None = None
    member_id: str = ""
    generation: int = -1
    protocols: list[tuple[str, bytes]] = field(default_factory=lambda: list(PROTOCOLS))
    session_ms: int = SESSION_MS
    rebalance_ms: int = REBALANCE_MS
    members: list[str] = field(default_factory=list)
    """The member ids of the last JoinGroup response, if this client was made leader."""
    protocol_name: str | None = None
    assignment: bytes | None = None


@dataclass
class Request:
    client: str
    api: str
    version: int
    body: Any


class Driver:
    def __init__(
        self,
        config: GroupConfig = TEST_CONFIG,
        *,
        seed: int = 0,
        owned_partitions: list[int] | None = None,
        now_ms: int = 0,
    ) -> None:
        self.config = config
        self.coordinator = GroupCoordinator(
            config, rng=random.Random(seed), owned_partitions=owned_partitions, now_ms=now_ms
        )
        self.now = now_ms
        self.clients: dict[str, Client] = {}
        self.requests: dict[int, Request] = {}
        self.responses: dict[int, Any] = {}
        self.log: dict[int, list[Record]] = {}
        self.pending: list[Write] = []
        self.auto_write = True
        self.lines: list[str] = []
        self._aliases: dict[str, str] = {}
        self._next_token = 1

    # -- clients --------------------------------------------------------------------------

    def client(self, name: str, group_id: str = "g", **kwargs: Any) -> Client:
        if name not in self.clients:
            self.clients[name] = Client(name, group_id, **kwargs)
        return self.clients[name]

    def alias(self, member_id: str) -> str:
        if member_id == "":
            return "''"
        if member_id not in self._aliases:
            m = _UUID.match(member_id)
            prefix = m.group(1) if m else member_id
            n = sum(1 for a in self._aliases.values() if a.startswith(prefix + "#")) + 1
            self._aliases[member_id] = f"{prefix}#{n}" if m else member_id
        return self._aliases[member_id]

    # -- requests -------------------------------------------------------------------------

    def join(self, name: str, version: int = 9, **client_kwargs: Any) -> int:
        c = self.client(name, **client_kwargs)
        request = JoinGroupRequest(
            group_id=c.group_id,
            session_timeout_ms=c.session_ms,
            rebalance_timeout_ms=c.rebalance_ms,
            member_id=c.member_id,
            group_instance_id=c.instance_id,
            protocol_type="consumer",
            protocols=[JoinGroupRequestProtocol(name=n, metadata=m) for n, m in c.protocols],
        )
        return self._send(
            name,
            "JoinGroup",
            version,
            request,
            client_id=name,
            client_host="/127.0.0.1",
        )

    def sync(
        self,
        name: str,
        version: int = 5,
        assignments: dict[str, bytes] | None = None,
        generation: int | None = None,
    ) -> int:
        c = self.clients[name]
        if assignments is None:
            # The leader assigns every member something recognisable.
            assignments = {m: b"@" + self.alias(m).encode() for m in c.members}
        request = SyncGroupRequest(
            group_id=c.group_id,
            generation_id=c.generation if generation is None else generation,
            member_id=c.member_id,
            group_instance_id=c.instance_id,
            protocol_type="consumer" if version >= 5 else None,
            protocol_name=c.protocol_name if version >= 5 else None,
            assignments=[
                SyncGroupRequestAssignment(member_id=m, assignment=a)
                for m, a in assignments.items()
            ],
        )
        return self._send(name, "SyncGroup", version, request)

    def heartbeat(
        self,
        name: str,
        version: int = 4,
        generation: int | None = None,
        member_id: str | None = None,
    ) -> int:
        c = self.clients[name]
        request = HeartbeatRequest(
            group_id=c.group_id,
            generation_id=c.generation if generation is None else generation,
            member_id=c.member_id if member_id is None else member_id,
            group_instance_id=c.instance_id,
        )
        return self._send(name, "Heartbeat", version, request)

    def leave(self, name: str, version: int = 5, *, by_instance_only: bool = False) -> int:
        c = self.clients[name]
        if version >= 3:
            identity = MemberIdentity(
                member_id="" if by_instance_only else c.member_id,
                group_instance_id=c.instance_id,
            )
            request = LeaveGroupRequest(group_id=c.group_id, members=[identity])
        else:
            request = LeaveGroupRequest(group_id=c.group_id, member_id=c.member_id)
        return self._send(name, "LeaveGroup", version, request)

    def commit(
        self,
        name: str,
        offsets: dict[tuple[str, int], int],
        version: int = 8,
        *,
        group_id: str | None = None,
        generation: int | None = None,
        member_id: str | None = None,
        metadata: str | None = "",
        leader_epoch: int = -1,
        retention_ms: int = -1,
    ) -> int:
        """Commit as client ``name``; a name without a client commits as a simple consumer
        (generation -1, no member id)."""
        c = self.clients.get(name)
        topics: dict[str, list[OffsetCommitRequestPartition]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(
                OffsetCommitRequestPartition(
                    partition_index=partition,
                    committed_offset=offset,
                    committed_leader_epoch=leader_epoch,
                    committed_metadata=metadata,
                )
            )
        request = OffsetCommitRequest(
            group_id=group_id if group_id is not None else (c.group_id if c else "g"),
            generation_id_or_member_epoch=generation
            if generation is not None
            else (c.generation if c else -1),
            member_id=member_id if member_id is not None else (c.member_id if c else ""),
            group_instance_id=c.instance_id if c and version >= 7 else None,
            retention_time_ms=retention_ms,
            topics=[OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()],
        )
        return self._send(name, "OffsetCommit", version, request)

    def fetch(
        self,
        group_id: str = "g",
        partitions: list[tuple[str, int]] | None = None,
        version: int = 7,
    ) -> OffsetFetchResponse:
        topics: dict[str, list[int]] = {}
        for topic, partition in partitions or []:
            topics.setdefault(topic, []).append(partition)
        if version >= 8:
            request = OffsetFetchRequest(
                groups=[
                    OffsetFetchRequestGroup(
                        group_id=group_id,
                        topics=None
                        if partitions is None
                        else [
                            OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                            for t, ps in topics.items()
                        ],
                    )
                ]
            )
        else:
            request = OffsetFetchRequest(
                group_id=group_id,
                topics=None
                if partitions is None
                else [
                    OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                    for t, ps in topics.items()
                ],
            )
        token = self._send("admin", "OffsetFetch", version, request)
        response = self.responses[token]
        assert isinstance(response, OffsetFetchResponse)
        return response

    def committed(self, group_id: str = "g") -> dict[tuple[str, int], int]:
        """Every committed offset of the group, as OffsetFetch (all topics) returns them."""
        response = self.fetch(group_id, None, version=8)
        (group,) = response.groups
        assert group.error_code == 0
        return {
            (t.name, p.partition_index): p.committed_offset
            for t in group.topics
            for p in t.partitions
        }

    def admin(self, request: Any, version: int) -> Any:
        api = type(request).__name__.removesuffix("Request")
        token = self._send("admin", api, version, request)
        return self.responses.get(token)

    def list_groups(self, version: int = 5, states: list[str] | None = None) -> Any:
        return self.admin(ListGroupsRequest(states_filter=states or []), version)

    def describe(self, *group_ids: str, version: int = 5) -> Any:
        return self.admin(DescribeGroupsRequest(groups=list(group_ids)), version)

    def delete(self, *group_ids: str, version: int = 2) -> int:
        return self._send(
            "admin", "DeleteGroups", version, DeleteGroupsRequest(groups_names=list(group_ids))
        )

    # -- time and writes ------------------------------------------------------------------

    def advance(self, ms: int) -> None:
        """Let ``ms`` pass, firing every deadline on the way, at its own time."""
        end = self.now + ms
        while True:
            deadline = self.coordinator.next_deadline_ms()
            if deadline is None or deadline > end:
                break
            self.now = max(self.now, deadline)
            self._apply(self.coordinator.tick(self.now))
        self.now = end
        self._apply(self.coordinator.tick(self.now))

    def complete_writes(self, error: ErrorCode = ErrorCode.NONE, count: int | None = None) -> None:
        n = len(self.pending) if count is None else count
        for _ in range(n):
            write = self.pending.pop(0)
            if error is ErrorCode.NONE:
                self.log.setdefault(write.partition, []).extend(write.records)
            self.lines.append(f"t={self.now} write#{write.write_id} {error.name}")
            self._apply(
                self.coordinator.write_completed(write.write_id, now_ms=self.now, error=error)
            )

    def all_records(self) -> list[Record]:
        return [r for p in sorted(self.log) for r in self.log[p]]

    # -- responses -------------------------------------------------------------------------

    def response(self, token: int) -> Any:
        return self.responses.get(token)

    def error(self, token: int) -> str:
        response = self.responses[token]
        return ErrorCode(response.error_code).name

    def state(self, group_id: str = "g") -> GroupState | None:
        group = self.coordinator.group(group_id)
        return None if group is None else group.state

    def take(self) -> str:
        text = "\n".join(self.lines)
        self.lines.clear()
        return text

    def unanswered(self) -> list[int]:
        return [t for t in self.requests if t not in self.responses]

    # -- internals -------------------------------------------------------------------------

    def _send(self, name: str, api: str, version: int, body: Any, **kwargs: Any) -> int:
        token = self._next_token
        self._next_token += 1
        self.requests[token] = Request(name, api, version, body)
        out = self.coordinator.handle(token, body, version, now_ms=self.now, **kwargs)
        self._apply(out)
        return token

    def _apply(self, out: Output) -> None:
        for completion in out.completions:
            token = completion.token
            assert isinstance(token, int)
            assert token in self.requests, f"unknown token {token}"
            assert token not in self.responses, f"token {token} answered twice"
            request = self.requests[token]
            response = completion.response
            # Every response must be encodable in the version it answers.
            type(response).decode(response.encode(request.version), request.version)
            self.responses[token] = response
            self._observe(request, response)
            self.lines.append(f"t={self.now} {self._describe(request, response)}")
        for write in out.writes:
            self.lines.append(
                f"t={self.now} write#{write.write_id} p{write.partition} "
                + "; ".join(self._record(r) for r in write.records)
            )
            self.pending.append(write)
        if self.auto_write and out.writes:
            self.complete_writes()

    def _observe(self, request: Request, response: Any) -> None:
        c = self.clients.get(request.client)
        if c is None:
            return
        if isinstance(response, JoinGroupResponse):
            error = ErrorCode(response.error_code)
            if error is ErrorCode.MEMBER_ID_REQUIRED:
                c.member_id = response.member_id
            elif error is ErrorCode.NONE:
                c.member_id = response.member_id
                c.generation = response.generation_id
                c.protocol_name = response.protocol_name
                c.members = [m.member_id for m in response.members]
            elif error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                c.member_id, c.generation = "", -1
        elif isinstance(response, SyncGroupResponse) and response.error_code == 0:
            c.assignment = response.assignment

    def _describe(self, request: Request, response: Any) -> str:
        head = f"{request.client} {request.api}"
        error = ErrorCode(getattr(response, "error_code", 0)).name
        if isinstance(response, JoinGroupResponse):
            text = f"{head} {error} member={self.alias(response.member_id)}"
            if response.error_code == 0:
                text += (
                    f" gen={response.generation_id} leader={self.alias(response.leader)}"
                    f" protocol={response.protocol_name}"
                )
                if response.members:
                    text += (
                        " members=["
                        + ",".join(self.alias(m.member_id) for m in response.members)
                        + "]"
                    )
                if response.skip_assignment:
                    text += " skip_assignment"
            return text
        if isinstance(response, SyncGroupResponse):
            if response.error_code == 0:
                return f"{head} {error} assignment={response.assignment.decode()}"
            return f"{head} {error}"
        if isinstance(response, HeartbeatResponse):
            return f"{head} {error}"
        if isinstance(response, LeaveGroupResponse):
            members = ",".join(
                (self.alias(m.member_id) if m.member_id else str(m.group_instance_id))
                + ":"
                + ErrorCode(m.error_code).name
                for m in response.members
            )
            return f"{head} {error}" + (f" [{members}]" if members else "")
        if isinstance(response, OffsetCommitResponse):
            parts = " ".join(
                f"{t.name}-{p.partition_index}:{ErrorCode(p.error_code).name}"
                for t in response.topics
                for p in t.partitions
            )
            return f"{head} {parts}"
        return f"{head} {type(response).__name__}"

    def _record(self, record: Record) -> str:
        key_bytes, value = record
        key = decode_key(key_bytes)
        if isinstance(key, OffsetCommitKey):
            where = f"offset {key.group} {key.topic}-{key.partition}"
            if value is None:
                return f"-{where}"
            return f"{where}={decode_offset_commit_value(value).offset}"
        assert isinstance(key, GroupMetadataKey)
        if value is None:
            return f"-group {key.group}"
        v = decode_group_metadata_value(value)
        members = ",".join(
            f"{self.alias(m.member_id)}" + (f":{m.assignment.decode()}" if m.assignment else "")
            for m in v.members
        )
        leader = self.alias(v.leader) if v.leader else None
        return (
            f"group {key.group} gen={v.generation} protocol={v.protocol} leader={leader}"
            f" members=[{members}]"
        )
