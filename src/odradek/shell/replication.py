"""Partition replication on a broker: roles, acks=all waiters, fetchers, ISR changes.

This module carries out, over sockets and files, what the pure replication cores
decide for every partition the node hosts: the per-partition rules of
:mod:`odradek.replication.leader` and :mod:`odradek.replication.follower`, and the
broker-wide decisions of :class:`~odradek.replication.replica_manager.ReplicaManager`
(which Fetch to send to each leader, what its answer means, which ISR changes to send),
the class the replication simulator drives too:

* :meth:`ReplicationService.assign` gives each hosted partition its role from the
  metadata image (a ``PartitionLeader`` for the leader of a leader epoch, a
  ``PartitionFollower`` otherwise) and keeps them current as registrations change;
* acks=all produces wait in :meth:`ReplicationService.await_replication` until the
  leader says they are done (in the ISR) or refused;
* one fetcher task per source broker pulls that broker's partitions (Fetch with the
  replica id, in an incremental fetch session, so that each request names and each
  answer carries only the partitions that moved), appends as follower, truncates on a
  diverging epoch, and, with flush-before-ack, flushes before it asks again, so that the
  offset it reports is durable here;
* an ISR ticker sends the leaders' AlterPartition proposals to the active controller.

What it needs from the rest of the node comes through two protocols, one per
direction: :class:`ReplicaStorage` (flushes, waking readers) and
:class:`ControllerChannel` (this broker's epoch, the active controller, loss reports).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from odradek.broker.addresses import registered_address
from odradek.broker.partition import LocalPartition, LogEpochs, registration_of
from odradek.broker.server_config import ServerConfig
from odradek.broker.state import BrokerState
from odradek.controller.elr import min_insync_replicas
from odradek.controller.image import CONFIG_RESOURCE_BROKER, PartitionImage
from odradek.controller.unclean_history import LossReport, truncation_loss
from odradek.core.errors import LogOfflineError, RemoteProtocolError
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import AlterPartitionResponse
from odradek.protocol.messages.fetch_response import PartitionData as FetchResponsePartition
from odradek.replication.follower import (
    FollowerAction,
    FollowerDecision,
    FollowerRegistrationAction,
    PartitionFollower,
)
from odradek.replication.leader import PartitionLeader, RegistrationAction
from odradek.replication.replica_manager import (
    ALTER_PARTITION_VERSION,
    FETCH_VERSION,
    AlterPartitionSend,
    FetchedPartition,
    ReplicaManager,
)
from odradek.replication.throttle import FOLLOWER_REPLICATION_THROTTLED_RATE, ReplicationThrottle
from odradek.shell.clock import monotonic_ms, now_ms
from odradek.shell.peer_client import (
    PLAINTEXT,
    ClientSecurity,
    PeerConnection,
    PeerPool,
    PeerUnavailable,
)
from odradek.shell.supervisor import Supervisor

log = logging.getLogger("odradek.replication")

__all__ = [
    "ALTER_PARTITION_VERSION",
    "FETCH_VERSION",
    "ControllerChannel",
    "NodeControllerChannel",
    "NodeStorage",
    "ReplicaStorage",
    "ReplicationService",
]

ISR_TICK_S = 0.2
ISR_RETRY_MS = 500
FETCHER_IDLE_S = 0.05

Key = tuple[str, int]


class ReplicaStorage(Protocol):
    """What replication asks of this node's storage and readers."""

    def await_flush(self, offsets: dict[Key, int]) -> Awaitable[frozenset[Key]]:
        """Flush each partition's log up to its offset (group commit); the partitions
        whose flush failed (their logs are offline now)."""
        ...

    def wake_readers(self, key: Key) -> None:
        """A partition's high watermark moved: wake the fetches waiting on it."""
        ...


class ControllerChannel(Protocol):
    """What replication asks of this broker's registration and its way to the active
    controller."""

    def broker_epoch(self) -> int:
        """This broker's epoch, -1 before it is registered."""
        ...

    def controller_address(self) -> tuple[str, int] | None:
        """Where the active controller listens, None when none is known."""
        ...

    def report_loss(self, report: LossReport) -> asyncio.Event | None:
        """Send the controller a loss report for its record of unclean elections; an
        event set once it is recorded (None: nobody to report to, nothing to wait for)."""
        ...


@dataclass(frozen=True, slots=True)
class NodeStorage:
    """A :class:`ReplicaStorage` of the node's own functions."""

    await_flush: Callable[[dict[Key, int]], Awaitable[frozenset[Key]]]
    wake_readers: Callable[[Key], None]


def _no_report(report: LossReport) -> asyncio.Event | None:
    return None


@dataclass(frozen=True, slots=True)
class NodeControllerChannel:
    """A :class:`ControllerChannel` of the node's own functions."""

    broker_epoch: Callable[[], int]
    controller_address: Callable[[], tuple[str, int] | None]
    report_loss: Callable[[LossReport], asyncio.Event | None] = _no_report


class ReplicationService:
    def __init__(
        self,
        state: BrokerState,
        server: ServerConfig,
        storage: ReplicaStorage,
        controller: ControllerChannel,
        supervisor: Supervisor | None = None,
        fetch_security: ClientSecurity = PLAINTEXT,
        controller_security: ClientSecurity = PLAINTEXT,
    ) -> None:
        """``fetch_security``: how fetches from leaders connect (to their inter-broker
        listener); ``controller_security``: how ISR changes reach the controller."""
        self.state = state
        # Fetchers are long-lived: one that fails on something no partition's own error
        # handling covers (a bug) stops the node rather than leaving its replicas
        # looking alive to their leaders' ISRs while they fetch nothing.
        self.supervisor = supervisor or Supervisor(_unsupervised)
        # The controller adds these to the topic's record of unclean elections; the
        # event is set once it has (None: nobody to report to, nothing to wait for).
        self.report_loss = controller.report_loss
        # Partitions that dropped records and wait, before fetching again, for the
        # controller to record the loss: a replica back in the ISR means the record
        # of what its partition gave up is complete.
        self._loss_unrecorded: dict[tuple[str, int], asyncio.Event] = {}
        self.server = server
        self.await_flush = storage.await_flush
        self.broker_epoch = controller.broker_epoch
        self.controller_address = controller.controller_address
        self.wake_readers = storage.wake_readers
        self.node_id = state.settings.node_id
        self._waiters: dict[tuple[str, int], list[tuple[int, asyncio.Future[int]]]] = {}
        self._fetchers: dict[int, asyncio.Task[None]] = {}
        # The decisions: what to fetch from whom, what an answer means, which ISR
        # changes to send; this class carries them out over sockets and files.
        self.manager: ReplicaManager[LocalPartition] = ReplicaManager(
            self.node_id,
            state.partitions,
            fetch_wait_max_ms=server.replica_fetch_wait_max_ms,
            fetch_max_bytes=server.replica_fetch_max_bytes,
            isr_retry_ms=ISR_RETRY_MS,
            now_ms=monotonic_ms(),
        )
        # Fetches long-poll: ISR changes get connections of their own, not queued behind.
        self._peers = {
            "fetch": PeerPool(f"replica-{self.node_id}-fetch", fetch_security),
            "isr": PeerPool(f"replica-{self.node_id}-isr", controller_security),
        }
        self._isr_task: asyncio.Task[None] | None = None
        state.replication_changed = self.replication_changed

    # ------------------------------------------------------------------ roles

    def min_insync_replicas(self, topic: str, replicas: int) -> int:
        """The topic's ``min.insync.replicas`` from the metadata log alone, the value
        the controller uses too (see :mod:`odradek.controller.elr` for why)."""
        return min_insync_replicas(self.state.image.configs, topic, replicas)

    def assign(self, partition: LocalPartition, p: PartitionImage) -> bool:
        """Give ``partition`` its role for registration ``p``; True when the caller must
        build a new LocalPartition (a new leader epoch) rather than keep this one."""
        registration = registration_of(p)
        leader = partition.leader_state
        follower = partition.follower_state
        if leader is not None:
            outcome = leader.on_registration(registration)
            if outcome.action is RegistrationAction.OBSOLETE:
                self.fail_waiters(partition.key, ErrorCode.NOT_LEADER_OR_FOLLOWER)
                return True
            if outcome.change.recheck_acks:
                self.replication_changed(partition.key)
            return False
        if follower is not None:
            action = follower.on_registration(registration)
            if action is FollowerRegistrationAction.APPLIED:
                self._ensure_fetcher(follower.leader_id)
            return action is FollowerRegistrationAction.OBSOLETE
        return True

    def new_role(self, partition: LocalPartition, p: PartitionImage, high_watermark: int) -> None:
        """Set up the role of a partition built for a new leader epoch."""
        registration = registration_of(p)
        log_ = partition.log
        if p.leader == self.node_id:
            partition.is_leader = True
            # An offline log (the scrub found corruption, a disk error) takes no epoch:
            # the partition stays offline here and its requests are answered so.
            if log_.offline is None and log_.epochs.latest_epoch() < p.leader_epoch:
                with contextlib.suppress(LogOfflineError):  # the log said why
                    log_.assign_leader_epoch(p.leader_epoch)
            partition.leader_state = PartitionLeader(
                replica_id=self.node_id,
                registration=registration,
                log_end_offset=log_.log_end_offset,
                durable_end_offset=min(log_.recovery_point, log_.log_end_offset),
                high_watermark=high_watermark,
                min_insync_replicas=self.min_insync_replicas(partition.topic, len(p.replicas)),
                replica_lag_time_max_ms=self.server.replica_lag_time_max_ms,
                now_ms=monotonic_ms(),
                flush_before_ack=partition.flush_before_ack,
            )
            partition.follower_state = None
        else:
            partition.is_leader = False
            partition.leader_state = None
            partition.follower_state = PartitionFollower(
                replica_id=self.node_id,
                registration=registration,
                log=LogEpochs(log_),
                high_watermark=high_watermark,
                replica_fetch_backoff_ms=self.server.replica_fetch_backoff_ms,
            )
            self._ensure_fetcher(p.leader)

    # ------------------------------------------------------------------ acks=all

    def replication_changed(self, key: tuple[str, int]) -> None:
        """The partition's high watermark or ISR moved: answer what is done, wake readers."""
        partition = self.state.partitions.get(key)
        waiters = self._waiters.get(key)
        if waiters:
            leader = partition.leader_state if partition is not None else None
            if leader is None:
                self.fail_waiters(key, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            else:
                done = leader.completed((future, required) for required, future in waiters)
                finished = set()
                for future, error in done:
                    finished.add(id(future))
                    if not future.done():
                        future.set_result(int(error))
                self._waiters[key] = [w for w in waiters if id(w[1]) not in finished]
        self.wake_readers(key)

    def fail_waiters(self, key: tuple[str, int], error: int) -> None:
        for _, future in self._waiters.pop(key, []):
            if not future.done():
                future.set_result(error)

    def on_flushed(self, partition: LocalPartition) -> None:
        leader = partition.leader_state
        if leader is None or leader.is_obsolete:
            return
        durable = min(partition.log.recovery_point, partition.log.log_end_offset)
        if durable > leader.durable_end_offset and durable <= leader.log_end_offset:
            change = leader.on_flush(durable)
            if change.recheck_acks:
                self.replication_changed(partition.key)

    async def await_replication(
        self, offsets: dict[tuple[str, int], int], timeout_ms: int
    ) -> dict[tuple[str, int], int]:
        """Wait for each partition's acks=all outcome; the errors of those that failed."""
        loop = asyncio.get_running_loop()
        futures: dict[tuple[str, int], asyncio.Future[int]] = {}
        for key, required in offsets.items():
            future: asyncio.Future[int] = loop.create_future()
            futures[key] = future
            self._waiters.setdefault(key, []).append((required, future))
            self.replication_changed(key)
        errors: dict[tuple[str, int], int] = {}
        try:
            async with asyncio.timeout(max(timeout_ms, 1) / 1000):
                await wait_all(list(futures.values()))
        except TimeoutError:
            pass
        for key, future in futures.items():
            # The timeout cancels the futures still waiting: those timed out.
            if future.done() and not future.cancelled():
                if future.result() != ErrorCode.NONE:
                    errors[key] = future.result()
            else:
                errors[key] = ErrorCode.REQUEST_TIMED_OUT
                self._waiters[key] = [w for w in self._waiters.get(key, []) if w[1] is not future]
        return errors

    # ------------------------------------------------------------------ fetchers

    def _ensure_fetcher(self, leader_id: int) -> None:
        if leader_id < 0:
            return
        task = self._fetchers.get(leader_id)
        if task is None or task.done():
            self._fetchers[leader_id] = self.supervisor.start(
                f"fetcher-{leader_id}", self._fetch_from(leader_id)
            )

    def _broker_address(self, broker_id: int) -> tuple[str, int] | None:
        """Where followers fetch from ``broker_id``: its inter-broker listener
        (``inter.broker.listener.name``), or its first when it registered no such one."""
        broker = self.state.image.brokers.get(broker_id)
        if broker is None:
            return None
        return registered_address(
            broker, self.server.inter_broker_listener_name
        ) or registered_address(broker, "")

    def _peer(self, address: tuple[str, int], purpose: str) -> PeerConnection:
        return self._peers[purpose].get(address)

    @property
    def throttle(self) -> ReplicationThrottle:
        return self.manager.throttle

    async def _fetch_from(self, leader_id: int) -> None:
        """Pull every partition this node follows from ``leader_id``, forever."""
        manager = self.manager
        while True:
            now = monotonic_ms()
            throttled = self._throttled_partitions(now)
            plan = manager.next_fetch(
                leader_id, now, self.broker_epoch(), throttled, self._awaits_loss_record
            )
            address = self._broker_address(leader_id)
            if plan is None or address is None or self.broker_epoch() < 0:
                if plan is not None:
                    manager.abandon(plan, now)
                await asyncio.sleep(FETCHER_IDLE_S)
                continue
            wait_ms = plan.request.max_wait_ms
            try:
                response = await self._peer(address, "fetch").request(
                    plan.request, FETCH_VERSION, (wait_ms + 30_000) / 1000
                )
            except (PeerUnavailable, TimeoutError) as e:
                log.debug("fetch from broker %d failed: %s", leader_id, e)
                manager.on_fetch_failed(plan, monotonic_ms())
                await asyncio.sleep(FETCHER_IDLE_S)
                continue
            fetched = manager.on_fetch_response(plan, response, monotonic_ms())
            flush_offsets = self._carry_out_all(fetched)
            if flush_offsets:
                # The next fetch reports these offsets to the leader, which counts them
                # towards the high watermark: they must be durable here first. A partition
                # whose flush failed is offline now and is not fetched (nor reported) again.
                for key in await self.await_flush(flush_offsets):
                    log.error("%s-%d: not durable here; no longer fetched", *key)

    def _awaits_loss_record(self, key: tuple[str, int]) -> bool:
        recorded = self._loss_unrecorded.get(key)
        if recorded is None:
            return False
        if recorded.is_set():
            del self._loss_unrecorded[key]
            return False
        return True

    def _throttled_partitions(self, now: int) -> set[tuple[str, int]]:
        """The partitions this broker is being added to by a reassignment, when
        ``follower.replication.throttled.rate`` is set (for this broker, or as the cluster
        default); the rate is read from the image so that a change applies at once."""
        configs = self.state.image.configs
        raw = configs.get((CONFIG_RESOURCE_BROKER, str(self.node_id)), {}).get(
            FOLLOWER_REPLICATION_THROTTLED_RATE
        ) or configs.get((CONFIG_RESOURCE_BROKER, ""), {}).get(FOLLOWER_REPLICATION_THROTTLED_RATE)
        try:
            rate = int(raw) if raw is not None else self.server.follower_replication_throttled_rate
        except ValueError:
            rate = self.server.follower_replication_throttled_rate
        self.throttle.set_rate(rate, now)
        if not self.throttle.limited:
            return set()
        return {
            (topic.name, index)
            for topic in self.state.image.topics_by_name.values()
            for index, p in topic.partitions.items()
            if self.node_id in p.adding_replicas
        }

    def _carry_out_all(
        self, fetched: list[FetchedPartition[LocalPartition]]
    ) -> dict[tuple[str, int], int]:
        """Carry out the log actions of one answer; the offsets to flush before the next
        fetch."""
        now = monotonic_ms()
        flush: dict[tuple[str, int], int] = {}
        for item in fetched:
            partition, follower = item.partition, item.follower
            try:
                self._carry_out(
                    partition,
                    follower,
                    item.decision,
                    item.data,
                    now,
                    flush,
                    item.high_watermark_before,
                )
            except LogOfflineError as e:
                # The log dir's failure handling takes it from here; this fetcher goes on
                # with the partitions that still work.
                log.error("%s-%d: %s", partition.topic, partition.index, e)
            except RemoteProtocolError as e:
                # Records from the leader that do not validate or do not continue this
                # log: never appended. Kafka's fetcher logs and fetches them again, as
                # the fault may be passing (a torn read); the other partitions go on.
                log.error(
                    "%s-%d: invalid records from leader %d at offset %d, fetching again: %s",
                    partition.topic,
                    partition.index,
                    follower.leader_id,
                    item.fetch.fetch_offset,
                    e,
                )
                self.manager.on_append_failed(follower, item.fetch, now)
        return flush

    def _carry_out(
        self,
        partition: LocalPartition,
        follower: PartitionFollower,
        decision: FollowerDecision,
        data: FetchResponsePartition,
        now: int,
        flush: dict[tuple[str, int], int],
        high_watermark: int,
    ) -> None:
        """``high_watermark`` is this replica's before the response was applied;
        ``now`` is the monotonic clock of the follower's timers (the log is given the
        wall clock: segment age and quarantine times are wall-clock times)."""
        log_ = partition.log
        wall = now_ms()
        action = decision.action
        if action is FollowerAction.APPEND:
            records = data.records
            if records is not None and len(records):
                # A decoded response holds bytes or a view of the frame, never a file range.
                raw = (
                    records
                    if isinstance(records, bytes | bytearray | memoryview)
                    else records.read()
                )
                partition.append_replicated(raw, wall)
            self.manager.on_appended(follower, data)
            if partition.flush_before_ack and log_.recovery_point < log_.log_end_offset:
                flush[partition.key] = log_.log_end_offset
        elif action is FollowerAction.TRUNCATE:
            written_in = log_.epochs.epoch_for_offset(decision.offset)
            log_end = log_.log_end_offset
            moved = log_.truncate_to(decision.offset, wall, f"replication: {decision.reason}")
            partition.on_truncated(wall)
            loss = truncation_loss(
                self.state.image,
                LossReport(
                    topic=partition.topic,
                    partition=partition.index,
                    leader_epoch=follower.leader_epoch,
                    broker=self.node_id,
                    high_watermark=high_watermark,
                    truncated_to=decision.offset,
                    log_end=log_end,
                ),
                written_in_epoch=written_in,
                below_high_watermark=decision.below_high_watermark,
            )
            if loss is not None:
                # The controller keeps the count with the election; `cluster health`
                # shows it. This replica fetches again once it is recorded.
                recorded = self.report_loss(loss)
                if recorded is not None and not recorded.is_set():
                    self._loss_unrecorded[partition.key] = recorded
            if decision.below_high_watermark:
                # Only an unclean election leads here: these records were acknowledged
                # (below our high watermark) and the partition's new history lacks them.
                log.error(
                    "%s-%d: LOST ACKNOWLEDGED RECORDS after an unclean election: truncated "
                    "to %d below the high watermark %d, %d records moved to quarantine "
                    "(odradek quarantine list --log-dir ...): %s",
                    partition.topic,
                    partition.index,
                    decision.offset,
                    high_watermark,
                    moved,
                    decision.reason,
                )
        elif action is FollowerAction.TRUNCATE_FULLY:
            log_.truncate_fully_and_start_at(
                decision.offset, wall, f"replication: {decision.reason}"
            )
            partition.producers.truncate_fully()

    # ------------------------------------------------------------------ ISR changes

    async def isr_ticker(self) -> None:
        """Send the leaders' ISR changes (AlterPartition) to the active controller."""
        while True:
            await asyncio.sleep(ISR_TICK_S)
            ineligible = {
                b.broker_id
                for b in self.state.image.brokers.values()
                if b.fenced or b.in_controlled_shutdown
            }
            for send in self.manager.isr_tick(
                monotonic_ms(), self.broker_epoch(), ineligible, self._epoch_of
            ):
                if not send.retry:
                    self._log_proposal(send)
                await self._send_alter_partition(send)

    def _log_proposal(self, send: AlterPartitionSend[LocalPartition]) -> None:
        partition, leader, proposal = send.partition, send.leader, send.proposal
        now = monotonic_ms()
        log.info(
            "%s-%d: proposing ISR %s (added %s, removed %s; log end %d, high "
            "watermark %d, followers %s)",
            partition.topic,
            partition.index,
            list(proposal.new_isr),
            list(proposal.added),
            list(proposal.removed),
            leader.log_end_offset,
            leader.high_watermark,
            {
                r: (f.log_end_offset, now - f.last_caught_up_time_ms)
                for r in leader.replicas
                if (f := leader.follower_state(r)) is not None
            },
        )

    async def _send_alter_partition(self, send: AlterPartitionSend[LocalPartition]) -> None:
        address = self.controller_address()
        answer: AlterPartitionResponse | ErrorCode
        if address is None:
            answer = ErrorCode.NOT_CONTROLLER
        else:
            try:
                answer = await self._peer(address, "isr").request(
                    send.request, ALTER_PARTITION_VERSION, 10.0
                )
            except (PeerUnavailable, TimeoutError):
                answer = ErrorCode.REQUEST_TIMED_OUT
        if self.manager.on_alter_partition_result(send, answer, monotonic_ms()):
            self.replication_changed(send.partition.key)

    def _epoch_of(self, broker_id: int) -> int:
        broker = self.state.image.brokers.get(broker_id)
        return broker.epoch if broker is not None else -1

    async def close(self) -> None:
        tasks = list(self._fetchers.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for pool in self._peers.values():
            await pool.close()
        for key in list(self._waiters):
            self.fail_waiters(key, ErrorCode.NOT_LEADER_OR_FOLLOWER)


async def wait_all(futures: list[asyncio.Future[Any]]) -> None:
    """Wait for every future; one alone is awaited directly (``gather`` costs a turn of
    the event loop more, on the path of every acks=all produce)."""
    if len(futures) == 1:
        await futures[0]
    else:
        await asyncio.gather(*futures)


def _unsupervised(name: str, error: BaseException) -> None:
    """Without the node's supervisor (tests): a failed fetcher is logged, loudly."""
    log.critical("task %s failed: %r", name, error)
