"""Partition replication on a broker: roles, acks=all waiters, fetchers, ISR changes.

This module drives the pure replication cores (:mod:`odradek.replication.leader`,
:mod:`odradek.replication.follower`) for every partition the node hosts:

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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from odradek.broker.partition import LocalPartition, LogEpochs, registration_of
from odradek.broker.server_config import ServerConfig
from odradek.broker.state import BrokerState
from odradek.controller.elr import min_insync_replicas
from odradek.controller.image import CONFIG_RESOURCE_BROKER, PartitionImage
from odradek.controller.unclean_history import LossReport, truncation_loss
from odradek.core.errors import LogOfflineError, RemoteProtocolError
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import AlterPartitionRequest, FetchRequest
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
    FollowerRegistrationAction,
    PartitionFollower,
)
from odradek.replication.leader import (
    AlterPartitionAction,
    IsrProposal,
    PartitionLeader,
    RegistrationAction,
)
from odradek.replication.throttle import FOLLOWER_REPLICATION_THROTTLED_RATE, ReplicationThrottle
from odradek.shell.clock import monotonic_ms, now_ms
from odradek.shell.peer_client import PeerConnection, PeerPool, PeerUnavailable
from odradek.shell.supervisor import Supervisor

log = logging.getLogger("odradek.replication")

FETCH_VERSION = 16
ALTER_PARTITION_VERSION = 3
ISR_TICK_S = 0.2
ISR_RETRY_MS = 500
FETCHER_IDLE_S = 0.05


class ReplicationService:
    def __init__(
        self,
        state: BrokerState,
        server: ServerConfig,
        await_flush: Callable[[dict[tuple[str, int], int]], Awaitable[frozenset[tuple[str, int]]]],
        broker_epoch: Callable[[], int],
        controller_address: Callable[[], tuple[str, int] | None],
        wake_readers: Callable[[tuple[str, int]], None],
        report_loss: Callable[[LossReport], asyncio.Event | None] = lambda report: None,
        supervisor: Supervisor | None = None,
    ) -> None:
        self.state = state
        # Fetchers are long-lived: one that fails on something no partition's own error
        # handling covers (a bug) stops the node rather than leaving its replicas
        # looking alive to their leaders' ISRs while they fetch nothing.
        self.supervisor = supervisor or Supervisor(_unsupervised)
        # The controller adds these to the topic's record of unclean elections; the
        # event is set once it has (None: nobody to report to, nothing to wait for).
        self.report_loss = report_loss
        # Partitions that dropped records and wait, before fetching again, for the
        # controller to record the loss: a replica back in the ISR means the record
        # of what its partition gave up is complete.
        self._loss_unrecorded: dict[tuple[str, int], asyncio.Event] = {}
        self.server = server
        self.await_flush = await_flush
        self.broker_epoch = broker_epoch
        self.controller_address = controller_address
        self.wake_readers = wake_readers
        self.node_id = state.settings.node_id
        self._waiters: dict[tuple[str, int], list[tuple[int, asyncio.Future[int]]]] = {}
        self._fetchers: dict[int, asyncio.Task[None]] = {}
        # One incremental fetch session (KIP-227) per leader fetched from.
        self._sessions: dict[int, FetchSessionHandler] = {}
        # Fetches long-poll: ISR changes get connections of their own, not queued behind.
        self._peers = {
            "fetch": PeerPool(f"replica-{self.node_id}-fetch"),
            "isr": PeerPool(f"replica-{self.node_id}-isr"),
        }
        self._isr_retry: dict[tuple[str, int], tuple[IsrProposal, int]] = {}
        self._isr_task: asyncio.Task[None] | None = None
        # One budget for every fetcher: the throttle bounds this broker's catch-up total.
        self.throttle = ReplicationThrottle(monotonic_ms())
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

    def _followed_from(self, leader_id: int) -> list[LocalPartition]:
        return [
            p
            for p in self.state.partitions.values()
            if p.follower_state is not None and p.follower_state.leader_id == leader_id
        ]

    def _broker_address(self, broker_id: int) -> tuple[str, int] | None:
        broker = self.state.image.brokers.get(broker_id)
        if broker is None or not broker.endpoints:
            return None
        return (broker.endpoints[0].host, broker.endpoints[0].port)

    def _peer(self, address: tuple[str, int], purpose: str) -> PeerConnection:
        return self._peers[purpose].get(address)

    async def _fetch_from(self, leader_id: int) -> None:
        """Pull every partition this node follows from ``leader_id``, forever."""
        wait_ms = self.server.replica_fetch_wait_max_ms
        max_bytes = self.server.replica_fetch_max_bytes
        while True:
            now = monotonic_ms()
            throttled = self._throttled_partitions(now)
            fetches = self.next_fetches(leader_id, now, throttled)
            address = self._broker_address(leader_id)
            if not fetches or address is None or self.broker_epoch() < 0:
                for partition, fetch in fetches.values():
                    assert partition.follower_state is not None
                    partition.follower_state.on_fetch_failed(fetch, now)
                await asyncio.sleep(FETCHER_IDLE_S)
                continue
            session = self._sessions.setdefault(leader_id, FetchSessionHandler())
            request, asked = self._fetch_request(fetches, wait_ms, max_bytes, throttled, session)
            try:
                response = await self._peer(address, "fetch").request(
                    request, FETCH_VERSION, (wait_ms + 30_000) / 1000
                )
            except (PeerUnavailable, TimeoutError) as e:
                log.debug("fetch from broker %d failed: %s", leader_id, e)
                session.on_failure()
                for partition, fetch in fetches.values():
                    assert partition.follower_state is not None
                    partition.follower_state.on_fetch_failed(fetch, monotonic_ms())
                await asyncio.sleep(FETCHER_IDLE_S)
                continue
            answer = session.on_answer(asked, response.error_code, response.session_id)
            charged = _records_bytes(response, fetches.keys() & throttled, self.state)
            if charged:
                self.throttle.charge(charged, monotonic_ms())
            flush_offsets = self._apply_fetch(fetches, response, answer)
            if flush_offsets:
                # The next fetch reports these offsets to the leader, which counts them
                # towards the high watermark: they must be durable here first. A partition
                # whose flush failed is offline now and is not fetched (nor reported) again.
                for key in await self.await_flush(flush_offsets):
                    log.error("%s-%d: not durable here; no longer fetched", *key)

    def next_fetches(
        self, leader_id: int, now: int, throttled: set[tuple[str, int]]
    ) -> dict[tuple[str, int], tuple[LocalPartition, FollowerFetch]]:
        """What the next fetch from ``leader_id`` asks for: every followed partition
        whose follower wants a fetch, but none whose log is offline here (its log end
        may not be durable: reporting it would let the high watermark pass records this
        replica may not have), none that waits for its loss report to be recorded, and
        no throttled one once the catch-up budget is spent."""
        fetches: dict[tuple[str, int], tuple[LocalPartition, FollowerFetch]] = {}
        for partition in self._followed_from(leader_id):
            assert partition.follower_state is not None
            if partition.log.offline is not None:
                continue
            if self._awaits_loss_record(partition.key):
                continue
            if partition.key in throttled and not self.throttle.allows(now):
                continue  # the catch-up budget is spent: the others go on alone
            fetch = partition.follower_state.next_fetch(now)
            if fetch is not None:
                fetches[partition.key] = (partition, fetch)
        return fetches

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

    def _fetch_request(
        self,
        fetches: dict[tuple[str, int], tuple[LocalPartition, FollowerFetch]],
        wait_ms: int,
        max_bytes: int,
        throttled: set[tuple[str, int]],
        session: FetchSessionHandler,
    ) -> tuple[FetchRequest, SessionRequest]:
        """The Fetch for ``fetches`` in ``session`` (the leader's): an incremental one when
        the session allows, naming only what moved; else a full one."""
        wanted: dict[PartitionKey, Position] = {}
        for partition, fetch in fetches.values():
            limited = partition.key in throttled
            wanted[(partition.topic_id, partition.index)] = (
                fetch.current_leader_epoch,
                fetch.fetch_offset,
                fetch.last_fetched_epoch,
                self.throttle.max_bytes(max_bytes) if limited else max_bytes,
            )
        asked = session.build(wanted)
        topics: dict[Any, list[fq.FetchPartition]] = {}
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
        forgotten: dict[Any, list[int]] = {}
        for topic_id, index in asked.forget:
            forgotten.setdefault(topic_id, []).append(index)
        request = FetchRequest(
            replica_state=fq.ReplicaState(
                replica_id=self.node_id, replica_epoch=self.broker_epoch()
            ),
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

    def _apply_fetch(
        self,
        fetches: dict[tuple[str, int], tuple[LocalPartition, FollowerFetch]],
        response: Any,
        answer: Answer = Answer.FULL,
    ) -> dict[tuple[str, int], int]:
        """Carry out each partition's decision; the offsets to flush before the next fetch.
        ``answer`` says what a partition left out of the response means."""
        now = monotonic_ms()
        by_key: dict[tuple[str, int], Any] = {}
        for topic in response.responses:
            found = self.state.image.topics_by_id.get(topic.topic_id)
            if found is None:
                continue
            for data in topic.partitions:
                by_key[(found.name, data.partition_index)] = data
        flush: dict[tuple[str, int], int] = {}
        for key, (partition, fetch) in fetches.items():
            follower = partition.follower_state
            if follower is None or self.state.partitions.get(key) is not partition:
                continue  # the role changed while the fetch was out
            data = by_key.get(key)
            if data is None:
                if answer is Answer.FULL:
                    follower.on_fetch_failed(fetch, now)
                else:
                    follower.on_fetch_unchanged(fetch)
                continue
            if response.error_code != ErrorCode.NONE and data.error_code == ErrorCode.NONE:
                data.error_code = response.error_code
            high_watermark = follower.high_watermark
            decision = follower.on_fetch_response(fetch, data, now)
            try:
                self._carry_out(partition, follower, decision, data, now, flush, high_watermark)
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
                    fetch.fetch_offset,
                    e,
                )
                follower.on_fetch_failed(fetch, now)
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
                log_.append_as_follower(memoryview(raw), wall)
                partition.on_replicated(raw)
            follower.update_high_watermark(data.high_watermark)
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
        elif action is FollowerAction.LIST_LEADER_OFFSETS:
            follower.on_leader_offsets_failed(now)

    # ------------------------------------------------------------------ ISR changes

    async def isr_ticker(self) -> None:
        """Send the leaders' ISR changes (AlterPartition) to the active controller."""
        while True:
            await asyncio.sleep(ISR_TICK_S)
            now = monotonic_ms()
            ineligible = {
                b.broker_id
                for b in self.state.image.brokers.values()
                if b.fenced or b.in_controlled_shutdown
            }
            for key, partition in list(self.state.partitions.items()):
                leader = partition.leader_state
                if leader is None or leader.is_obsolete:
                    continue
                retry = self._isr_retry.get(key)
                if retry is not None:
                    proposal, retry_at = retry
                    if now < retry_at or leader.pending_proposal != proposal:
                        if leader.pending_proposal != proposal:
                            del self._isr_retry[key]
                        continue
                    del self._isr_retry[key]
                else:
                    # KIP-903: only fetches made under a follower's current registration
                    # count; a position from before its restart may be gone.
                    stale = {
                        r
                        for r in leader.replicas
                        if partition.follower_broker_epochs.get(r) != self._epoch_of(r)
                    }
                    found = leader.isr_change(now, ineligible | stale)
                    if found is None:
                        continue
                    proposal = found
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
                await self._send_alter_partition(partition, leader, proposal)

    async def _send_alter_partition(
        self, partition: LocalPartition, leader: PartitionLeader, proposal: IsrProposal
    ) -> None:
        address = self.controller_address()
        answer: AlterPartitionResponsePartition
        if address is None:
            answer = AlterPartitionResponsePartition(error_code=ErrorCode.NOT_CONTROLLER)
        else:
            request = AlterPartitionRequest(
                broker_id=self.node_id,
                broker_epoch=self.broker_epoch(),
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
                                            self.broker_epoch()
                                            if b == self.node_id
                                            else partition.follower_broker_epochs.get(b, -1)
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
            try:
                response = await self._peer(address, "isr").request(
                    request, ALTER_PARTITION_VERSION, 10.0
                )
                answer = _partition_answer(response)
            except (PeerUnavailable, TimeoutError):
                answer = AlterPartitionResponsePartition(error_code=ErrorCode.REQUEST_TIMED_OUT)
        outcome = leader.on_alter_partition_result(proposal, answer)
        if outcome.action is AlterPartitionAction.RETRY:
            self._isr_retry[partition.key] = (proposal, monotonic_ms() + ISR_RETRY_MS)
        if outcome.change.recheck_acks:
            self.replication_changed(partition.key)

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


def _records_bytes(response: Any, keys: set[tuple[str, int]], state: BrokerState) -> int:
    """The record bytes a fetch response brought for the partitions ``keys``."""
    if not keys:
        return 0
    total = 0
    for topic in response.responses:
        found = state.image.topics_by_id.get(topic.topic_id)
        if found is None:
            continue
        for data in topic.partitions:
            if (found.name, data.partition_index) in keys and data.records is not None:
                total += len(data.records)
    return total


def _partition_answer(response: Any) -> AlterPartitionResponsePartition:
    if response.error_code != ErrorCode.NONE or not response.topics:
        return AlterPartitionResponsePartition(
            error_code=response.error_code or ErrorCode.UNKNOWN_SERVER_ERROR
        )
    partitions = response.topics[0].partitions
    if not partitions:
        return AlterPartitionResponsePartition(error_code=ErrorCode.UNKNOWN_SERVER_ERROR)
    answer: AlterPartitionResponsePartition = partitions[0]
    return answer
