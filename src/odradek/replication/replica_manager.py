"""One broker's replica manager: the decisions of every partition it follows or leads
that span partitions, pure (TigerBeetle's replica over a message bus: the shell carries
messages and does the I/O; the simulator drives this same class).

The per-partition rules stay in :class:`~odradek.replication.follower.PartitionFollower`
and :class:`~odradek.replication.leader.PartitionLeader`. This class owns what ties them
to the network:

* **Fetching, the follower's side.** :meth:`ReplicaManager.next_fetch` gathers the
  partitions followed from one leader that want a fetch (none whose log is offline here,
  none held back by the caller, no throttled one once the catch-up budget is spent) into
  one Fetch in that leader's incremental session (KIP-227, one
  :class:`~odradek.replication.fetch_session.FetchSessionHandler` per leader).
  :meth:`ReplicaManager.on_fetch_response` reads the answer: the session's verdict, the
  throttle's charge, then each partition's decision. It returns the log actions
  (:class:`FetchedPartition`: append, truncate, truncate fully) for the caller to carry
  out against its log, and reports back with :meth:`ReplicaManager.on_appended` or
  :meth:`ReplicaManager.on_append_failed`. A fetch that got no answer goes to
  :meth:`ReplicaManager.on_fetch_failed`; one never sent to :meth:`ReplicaManager.abandon`.
* **ISR changes, the leader's side.** :meth:`ReplicaManager.isr_tick` yields the
  AlterPartition requests to send now (a leader's new proposal, with KIP-903's filter of
  followers whose position is from another registration, or a proposal due again after
  a retriable answer); :meth:`ReplicaManager.on_alter_partition_result` applies the
  controller's answer (or a lost request) and says whether acks=all waiters must be
  checked again.

Time comes in as ``now_ms`` (the monotonic clock of the follower and leader timers);
nothing here blocks, sleeps or touches a socket.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import AlterPartitionRequest, AlterPartitionResponse, FetchRequest
from odradek.protocol.messages import alter_partition_request as apr
from odradek.protocol.messages import fetch_request as fq
from odradek.protocol.messages.alter_partition_response import (
    PartitionData as AlterPartitionResponsePartition,
)
from odradek.protocol.messages.fetch_response import PartitionData as FetchResponsePartition
from odradek.replication.fetch_session import (
    Answer,
    FetchSessionHandler,
    PartitionKey,
    Position,
    SessionRequest,
)
from odradek.replication.follower import (
    FollowerAction,
    FollowerDecision,
    FollowerFetch,
    PartitionFollower,
)
from odradek.replication.leader import AlterPartitionAction, IsrProposal, PartitionLeader
from odradek.replication.throttle import ReplicationThrottle

__all__ = [
    "ALTER_PARTITION_VERSION",
    "FETCH_VERSION",
    "LOG_ACTIONS",
    "AlterPartitionSend",
    "FetchPlan",
    "FetchedPartition",
    "HostedReplica",
    "ReplicaManager",
]

FETCH_VERSION = 16
ALTER_PARTITION_VERSION = 3

LOG_ACTIONS = frozenset(
    {FollowerAction.APPEND, FollowerAction.TRUNCATE, FollowerAction.TRUNCATE_FULLY}
)
"""The decisions that change the local log, carried out by the caller."""

Key = tuple[str, int]


class ReplicaLog(Protocol):
    """What the manager reads of a replica's log."""

    @property
    def offline(self) -> object: ...


class HostedReplica(Protocol):
    """What the manager reads of a partition hosted here (the broker's
    ``LocalPartition`` has it)."""

    @property
    def key(self) -> Key: ...

    @property
    def topic_id(self) -> uuid.UUID: ...

    @property
    def index(self) -> int: ...

    @property
    def log(self) -> ReplicaLog: ...

    @property
    def leader_state(self) -> PartitionLeader | None: ...

    @property
    def follower_state(self) -> PartitionFollower | None: ...

    @property
    def follower_broker_epochs(self) -> dict[int, int]: ...


R = TypeVar("R", bound=HostedReplica)


@dataclass(frozen=True, slots=True)
class FetchPlan(Generic[R]):
    """One Fetch to one leader and what it asks of each partition."""

    leader_id: int
    request: FetchRequest
    session: SessionRequest
    fetches: dict[Key, tuple[R, FollowerFetch]]
    throttled: frozenset[Key]


@dataclass(frozen=True, slots=True)
class FetchedPartition(Generic[R]):
    """A decision that changes the log: carry it out, then report it back."""

    partition: R
    follower: PartitionFollower
    fetch: FollowerFetch
    decision: FollowerDecision
    data: FetchResponsePartition
    high_watermark_before: int
    """This replica's high watermark before the response (for a loss report)."""


@dataclass(frozen=True, slots=True)
class AlterPartitionSend(Generic[R]):
    """An AlterPartition for one partition's proposal, to send to the active controller."""

    partition: R
    leader: PartitionLeader
    proposal: IsrProposal
    request: AlterPartitionRequest
    retry: bool
    """Whether the proposal was sent before and is due again after a retriable answer."""


class ReplicaManager(Generic[R]):
    def __init__(
        self,
        replica_id: int,
        partitions: Mapping[Key, R],
        *,
        fetch_wait_max_ms: int,
        fetch_max_bytes: int,
        isr_retry_ms: int,
        now_ms: int,
    ) -> None:
        """``partitions`` is the live map of the partitions hosted here (the caller
        changes it as roles change); a partition no longer in it, or there as another
        object, has changed role since a request went out."""
        self.replica_id = replica_id
        self.partitions = partitions
        self.fetch_wait_max_ms = fetch_wait_max_ms
        self.fetch_max_bytes = fetch_max_bytes
        self.isr_retry_ms = isr_retry_ms
        # One budget for every fetcher: the throttle bounds this broker's catch-up total.
        self.throttle = ReplicationThrottle(now_ms)
        # One incremental fetch session (KIP-227) per leader fetched from.
        self._sessions: dict[int, FetchSessionHandler] = {}
        self._isr_retry: dict[Key, tuple[IsrProposal, int]] = {}

    # ------------------------------------------------------------------ fetching

    def followed_from(self, leader_id: int) -> list[R]:
        return [
            p
            for p in self.partitions.values()
            if p.follower_state is not None and p.follower_state.leader_id == leader_id
        ]

    def next_fetches(
        self,
        leader_id: int,
        now_ms: int,
        throttled: Collection[Key] = frozenset(),
        held: Callable[[Key], bool] = lambda key: False,
    ) -> dict[Key, tuple[R, FollowerFetch]]:
        """The partitions followed from ``leader_id`` that the next fetch asks for, with
        what it asks of each: every one whose follower wants a fetch, but none whose log
        is offline here (its log end may not be durable: reporting it would let the high
        watermark pass records this replica may not have), none ``held`` by the caller
        (one waiting for its loss report to be recorded), and no ``throttled`` one once
        the catch-up budget is spent."""
        fetches: dict[Key, tuple[R, FollowerFetch]] = {}
        for partition in self.followed_from(leader_id):
            follower = partition.follower_state
            assert follower is not None
            if partition.log.offline is not None or held(partition.key):
                continue
            if partition.key in throttled and not self.throttle.allows(now_ms):
                continue  # the catch-up budget is spent: the others go on alone
            fetch = follower.next_fetch(now_ms)
            if fetch is not None:
                fetches[partition.key] = (partition, fetch)
        return fetches

    def fetch_request(
        self,
        fetches: Mapping[Key, tuple[R, FollowerFetch]],
        broker_epoch: int,
        session: FetchSessionHandler,
        throttled: Collection[Key] = frozenset(),
        *,
        wait_ms: int | None = None,
        max_bytes: int | None = None,
    ) -> tuple[FetchRequest, SessionRequest]:
        """The Fetch for ``fetches`` in ``session`` (the leader's): an incremental one
        when the session allows, naming only what moved; else a full one. ``wait_ms``
        and ``max_bytes`` default to ``replica.fetch.wait.max.ms`` and
        ``replica.fetch.max.bytes`` as given at construction."""
        if wait_ms is None:
            wait_ms = self.fetch_wait_max_ms
        if max_bytes is None:
            max_bytes = self.fetch_max_bytes
        wanted: dict[PartitionKey, Position] = {}
        for key, (partition, fetch) in fetches.items():
            wanted[(partition.topic_id, partition.index)] = (
                fetch.current_leader_epoch,
                fetch.fetch_offset,
                fetch.last_fetched_epoch,
                self.throttle.max_bytes(max_bytes) if key in throttled else max_bytes,
            )
        asked = session.build(wanted)
        topics: dict[uuid.UUID, list[fq.FetchPartition]] = {}
        for (topic_id, index), (epoch, offset, last_epoch, limit) in asked.send.items():
            topics.setdefault(topic_id, []).append(
                fq.FetchPartition(
                    partition=index,
                    current_leader_epoch=epoch,
                    fetch_offset=offset,
                    last_fetched_epoch=last_epoch,
                    log_start_offset=-1,
                    partition_max_bytes=limit,
                )
            )
        forgotten: dict[uuid.UUID, list[int]] = {}
        for topic_id, index in asked.forget:
            forgotten.setdefault(topic_id, []).append(index)
        request = FetchRequest(
            replica_state=fq.ReplicaState(replica_id=self.replica_id, replica_epoch=broker_epoch),
            max_wait_ms=wait_ms,
            min_bytes=1,
            max_bytes=10 * max_bytes,
            session_id=asked.session_id,
            session_epoch=asked.session_epoch,
            topics=[fq.FetchTopic(topic_id=t, partitions=ps) for t, ps in topics.items()],
            forgotten_topics_data=[
                fq.ForgottenTopic(topic_id=t, partitions=ps) for t, ps in forgotten.items()
            ],
        )
        return request, asked

    def next_fetch(
        self,
        leader_id: int,
        now_ms: int,
        broker_epoch: int,
        throttled: Collection[Key] = frozenset(),
        held: Callable[[Key], bool] = lambda key: False,
    ) -> FetchPlan[R] | None:
        """The next Fetch from ``leader_id`` in its session, or None when no partition
        wants one (see :meth:`next_fetches`). Send it, then report the outcome
        (:meth:`on_fetch_response`, :meth:`on_fetch_failed`), or :meth:`abandon` it."""
        fetches = self.next_fetches(leader_id, now_ms, throttled, held)
        if not fetches:
            return None
        limited = frozenset(k for k in fetches if k in throttled)
        request, asked = self.fetch_request(fetches, broker_epoch, self.session(leader_id), limited)
        return FetchPlan(leader_id, request, asked, fetches, limited)

    def abandon(self, plan: FetchPlan[R], now_ms: int) -> None:
        """``plan`` was never sent (no address for the leader, no registration yet):
        its partitions back off; the session is as it was."""
        self.fetches_failed(plan.fetches, now_ms)

    def fetches_failed(self, fetches: Mapping[Key, tuple[R, FollowerFetch]], now_ms: int) -> None:
        for partition, fetch in fetches.values():
            follower = partition.follower_state
            if follower is not None:
                follower.on_fetch_failed(fetch, now_ms)

    def on_fetch_failed(self, plan: FetchPlan[R], now_ms: int) -> None:
        """``plan`` got no answer: the leader may or may not have applied it, so the
        session starts over, and its partitions back off."""
        self.session(plan.leader_id).on_failure()
        self.abandon(plan, now_ms)

    def on_fetch_response(
        self, plan: FetchPlan[R], response: Any, now_ms: int
    ) -> list[FetchedPartition[R]]:
        """The leader's answer to ``plan`` (a FetchResponse): the session's verdict, the
        throttle's charge, then each partition's decision. The log actions to carry
        out, in order."""
        answer = self.session(plan.leader_id).on_answer(
            plan.session, response.error_code, response.session_id
        )
        if plan.throttled:
            charged = sum(
                len(data.records)
                for key, data in self._by_key(plan.fetches, response).items()
                if key in plan.throttled and data.records is not None
            )
            if charged:
                self.throttle.charge(charged, now_ms)
        return self.apply_fetch(plan.fetches, response, answer, now_ms)

    def apply_fetch(
        self,
        fetches: Mapping[Key, tuple[R, FollowerFetch]],
        response: Any,
        answer: Answer,
        now_ms: int,
    ) -> list[FetchedPartition[R]]:
        """Each partition's decision on ``response``; ``answer`` (the session's verdict)
        says what a partition left out of it means. The log actions, in order."""
        by_key = self._by_key(fetches, response)
        actions: list[FetchedPartition[R]] = []
        for key, (partition, fetch) in fetches.items():
            follower = partition.follower_state
            if follower is None or self.partitions.get(key) is not partition:
                continue  # the role changed while the fetch was out
            data = by_key.get(key)
            if data is None:
                if answer is Answer.FULL:
                    follower.on_fetch_failed(fetch, now_ms)
                else:
                    follower.on_fetch_unchanged(fetch)
                continue
            if response.error_code != ErrorCode.NONE and data.error_code == ErrorCode.NONE:
                data.error_code = response.error_code
            high_watermark = follower.high_watermark
            decision = follower.on_fetch_response(fetch, data, now_ms)
            if decision.action in LOG_ACTIONS:
                actions.append(
                    FetchedPartition(partition, follower, fetch, decision, data, high_watermark)
                )
            elif decision.action is FollowerAction.LIST_LEADER_OFFSETS:
                # No ListOffsets to the leader yet: back off and fetch again, which asks
                # again if the offset is still out of range.
                follower.on_leader_offsets_failed(now_ms)
        return actions

    @staticmethod
    def _by_key(
        fetches: Mapping[Key, tuple[R, FollowerFetch]], response: Any
    ) -> dict[Key, FetchResponsePartition]:
        by_id = {(p.topic_id, p.index): key for key, (p, _) in fetches.items()}
        found: dict[Key, FetchResponsePartition] = {}
        for topic in response.responses:
            for data in topic.partitions:
                key = by_id.get((topic.topic_id, data.partition_index))
                if key is not None:
                    found[key] = data
        return found

    @staticmethod
    def on_appended(follower: PartitionFollower, data: FetchResponsePartition) -> int:
        """The records of an APPEND are in the log: the follower's high watermark
        follows the leader's (capped at the log end); the new high watermark."""
        return follower.update_high_watermark(data.high_watermark)

    @staticmethod
    def on_append_failed(follower: PartitionFollower, fetch: FollowerFetch, now_ms: int) -> None:
        """Records from the leader that do not validate or do not continue this log were
        not appended: as Kafka's fetcher, back off and fetch them again (the fault may
        be passing, a torn read)."""
        follower.on_fetch_failed(fetch, now_ms)

    def session(self, leader_id: int) -> FetchSessionHandler:
        """The incremental fetch session with ``leader_id``."""
        return self._sessions.setdefault(leader_id, FetchSessionHandler())

    # ------------------------------------------------------------------ ISR changes

    def isr_tick(
        self,
        now_ms: int,
        broker_epoch: int,
        ineligible: Collection[int],
        registered_epoch: Callable[[int], int],
    ) -> Iterator[AlterPartitionSend[R]]:
        """The AlterPartition requests due now, one per leader with a new proposal or a
        proposal due again. ``ineligible``: brokers fenced or in controlled shutdown;
        ``registered_epoch``: a broker's epoch in the current image (-1 if unknown).

        Lazy: each partition is looked at when the previous request has been handled,
        so a caller that awaits each answer decides on the state that answer left."""
        for key, partition in list(self.partitions.items()):
            leader = partition.leader_state
            if leader is None or leader.is_obsolete:
                continue
            retry = key in self._isr_retry
            proposal = self._isr_proposal(
                key, partition, leader, now_ms, ineligible, registered_epoch
            )
            if proposal is not None:
                request = self._alter_partition(partition, proposal, broker_epoch)
                yield AlterPartitionSend(partition, leader, proposal, request, retry)

    def _isr_proposal(
        self,
        key: Key,
        partition: R,
        leader: PartitionLeader,
        now_ms: int,
        ineligible: Collection[int],
        registered_epoch: Callable[[int], int],
    ) -> IsrProposal | None:
        retry = self._isr_retry.get(key)
        if retry is not None:
            proposal, retry_at = retry
            if leader.pending_proposal != proposal:
                del self._isr_retry[key]
                return None
            if now_ms < retry_at:
                return None
            del self._isr_retry[key]
            return proposal
        # KIP-903: only fetches made under a follower's current registration count; a
        # position from before its restart may be gone.
        stale = {
            r
            for r in leader.replicas
            if partition.follower_broker_epochs.get(r) != registered_epoch(r)
        }
        return leader.isr_change(now_ms, sorted({*ineligible, *stale}))

    def _alter_partition(
        self, partition: R, proposal: IsrProposal, broker_epoch: int
    ) -> AlterPartitionRequest:
        epochs = partition.follower_broker_epochs
        return AlterPartitionRequest(
            broker_id=self.replica_id,
            broker_epoch=broker_epoch,
            topics=[
                apr.TopicData(
                    topic_id=partition.topic_id,
                    partitions=[
                        apr.PartitionData(
                            partition_index=partition.index,
                            leader_epoch=proposal.leader_epoch,
                            new_isr_with_epochs=[
                                apr.BrokerState(
                                    broker_id=b,
                                    broker_epoch=(
                                        broker_epoch if b == self.replica_id else epochs.get(b, -1)
                                    ),
                                )
                                for b in proposal.new_isr
                            ],
                            leader_recovery_state=0,
                            partition_epoch=proposal.partition_epoch,
                        )
                    ],
                )
            ],
        )

    def on_alter_partition_result(
        self,
        send: AlterPartitionSend[R],
        response: AlterPartitionResponse | ErrorCode,
        now_ms: int,
    ) -> bool:
        """The controller's answer to ``send``, or the error that stands for it
        (REQUEST_TIMED_OUT for a lost request, NOT_CONTROLLER with no controller to ask);
        True when the partition's acks=all waiters must be checked again."""
        answer = (
            AlterPartitionResponsePartition(error_code=response)
            if isinstance(response, ErrorCode)
            else partition_answer(response)
        )
        outcome = send.leader.on_alter_partition_result(send.proposal, answer)
        if outcome.action is AlterPartitionAction.RETRY:
            self._isr_retry[send.partition.key] = (send.proposal, now_ms + self.isr_retry_ms)
        return outcome.change.recheck_acks


def partition_answer(response: AlterPartitionResponse) -> AlterPartitionResponsePartition:
    """The one partition's answer, or the top-level error in its place."""
    if response.error_code != ErrorCode.NONE or not response.topics:
        return AlterPartitionResponsePartition(
            error_code=response.error_code or ErrorCode.UNKNOWN_SERVER_ERROR
        )
    partitions = response.topics[0].partitions
    if not partitions:
        return AlterPartitionResponsePartition(error_code=ErrorCode.UNKNOWN_SERVER_ERROR)
    answer: AlterPartitionResponsePartition = partitions[0]
    return answer
