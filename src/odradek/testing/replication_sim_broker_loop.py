"""A simulated broker's loop in :mod:`odradek.testing.replication_sim`: what the
shell's node and ``ReplicationService`` do around the shipped cores, on simulated I/O.

Each tick a running broker registers, heartbeats and polls the metadata log
(``_lifecycle``), flushes what its group commit holds, asks its
:class:`~odradek.replication.replica_manager.ReplicaManager` for ISR changes and for one
Fetch per leader, and expires long polls. What it receives is a Fetch to serve with the
shipped handler (``broker/fetch.py``: sessions, the quiet-partition fast path, long
polls parked until data or their deadline), an answer to one of its own requests, or a
client's produce. Roles come from the broker's own image (``apply_image``), built as
``ReplicationService.new_role`` builds them; a follower carries out what the replica
manager decides about each fetched partition (append, or truncate, checked against the
committed records: invariant 4).

Plain functions of the :class:`~odradek.testing.replication_sim.Simulation`, so that
the event table names them; the simulation owns every piece of state they change."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from odradek.broker.effects import AwaitData, Outcome, Reply
from odradek.broker.fetch import handle_fetch
from odradek.broker.partition import (
    LocalPartition,
    LogEpochs,
    registration_of,
)
from odradek.controller.elr import min_insync_replicas
from odradek.controller.image import MetadataImage
from odradek.protocol.api import RequestHeader
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    AlterPartitionResponse,
    FetchRequest,
    FetchResponse,
)
from odradek.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from odradek.protocol.messages.broker_registration_request import (
    BrokerRegistrationRequest,
    Listener,
)
from odradek.replication.follower import (
    FollowerAction,
    FollowerRegistrationAction,
    PartitionFollower,
)
from odradek.replication.leader import (
    PartitionLeader,
    PartitionRegistration,
    RegistrationAction,
)
from odradek.replication.replica_manager import (
    FETCH_VERSION,
    AlterPartitionSend,
    FetchPlan,
)
from odradek.storage.log import PartitionLog
from odradek.testing.replication_sim_checks import check_broker
from odradek.testing.replication_sim_config import (
    CLUSTER_ID,
    CONTROLLER,
    HEARTBEAT_MS,
    REGISTRATION_BACKOFF_MS,
    REPLICA_FETCH_BACKOFF_MS,
    TICK_MS,
    TOPIC_ID,
)
from odradek.testing.sim_broker import (
    LOG_CONFIG,
    TOPIC,
    Broker,
    MetadataFetch,
    ParkedFetch,
    Replica,
    Request,
    Response,
    Wire,
    log_dir,
)

if TYPE_CHECKING:
    from odradek.testing.replication_sim import Simulation


def on_tick(sim: Simulation, broker_id: int, generation: int) -> None:
    b = sim.brokers[broker_id]
    if not b.alive or b.generation != generation:
        return
    sim.schedule(sim.now + TICK_MS, "tick", (broker_id, generation))
    if b.paused:
        return
    _lifecycle(sim, b)
    if sim.acts(b):
        _broker_tick(sim, b)
    check_broker(sim, b)


def _lifecycle(sim: Simulation, b: Broker) -> None:
    if b.broker_epoch < 0 and not b.registering and sim.now >= b.next_registration_ms:
        b.registering = True
        request = BrokerRegistrationRequest(
            broker_id=b.broker_id,
            cluster_id=CLUSTER_ID,
            incarnation_id=b.incarnation,
            listeners=[Listener("PLAINTEXT", f"b{b.broker_id}", 9092, 0)],
            rack=None,
            log_dirs=[uuid.UUID(int=(b.disk_number << 32) + 0xD000 + b.broker_id)],
        )
        sim.request(b, CONTROLLER, "register", None, request)
    if b.broker_epoch >= 0 and not b.heartbeat_in_flight and sim.now >= b.next_heartbeat_ms:
        b.heartbeat_in_flight = True
        b.next_heartbeat_ms = sim.now + HEARTBEAT_MS
        heartbeat = BrokerHeartbeatRequest(
            broker_id=b.broker_id,
            broker_epoch=b.broker_epoch,
            current_metadata_offset=b.image.offset,
        )
        sim.request(b, CONTROLLER, "heartbeat", None, heartbeat)
    if not b.metadata_in_flight and sim.now >= b.next_metadata_ms:
        b.metadata_in_flight = True
        b.next_metadata_ms = sim.now + sim.config.metadata_interval_ms
        sim.request(b, CONTROLLER, "metadata", None, MetadataFetch(b.image.offset))


def _broker_tick(sim: Simulation, b: Broker) -> None:
    for _, r in sorted(b.replicas.items()):
        _replica_tick(sim, b, r)
    _expire_parked(sim, b)
    _isr_tick(sim, b)
    _fetch_tick(sim, b)


def _replica_tick(sim: Simulation, b: Broker, r: Replica) -> None:
    # Group commit: the flush the appends of the last few ms were waiting for.
    if r.flush_due_ms is not None and sim.now >= r.flush_due_ms:
        r.flush_due_ms = None
        r.log.flush(sim.now)
        leader = r.leader
        if (
            leader is not None
            and not leader.is_obsolete
            and r.flushed > leader.durable_end_offset
            and leader.on_flush(r.flushed).recheck_acks
        ):
            sim.complete_waiters(r)
    r.hw_checkpoint = r.high_watermark  # Kafka checkpoints it periodically


def _isr_tick(sim: Simulation, b: Broker) -> None:
    ineligible = {
        broker_id
        for broker_id, broker in b.image.brokers.items()
        if broker.fenced or broker.in_controlled_shutdown
    }
    for send in b.manager.isr_tick(
        sim.now, b.broker_epoch, ineligible, lambda r: _epoch_in(b.image, r)
    ):
        if not send.retry:
            sim.note("isr proposal", f"b{b.broker_id} p{send.partition.index} {send.proposal}")
        sim.request(b, CONTROLLER, "alter_partition", send, send.request)


def _epoch_in(image: MetadataImage, broker_id: int) -> int:
    broker = image.brokers.get(broker_id)
    return broker.epoch if broker is not None else -1


def _fetch_tick(sim: Simulation, b: Broker) -> None:
    """One fetcher per leader, one fetch in flight each, as the shell runs them. A
    follower flushes before it fetches again: the next fetch reports its log end to
    the leader, which counts it towards the high watermark."""
    leaders = sorted({r.follower.leader_id for r in b.replicas.values() if r.follower is not None})
    for leader_id in leaders:
        if leader_id in b.fetching or leader_id < 0:
            continue
        if any(
            r.flush_due_ms is not None
            for r in b.replicas.values()
            if r.follower is not None and r.follower.leader_id == leader_id
        ):
            continue
        plan = b.manager.next_fetch(leader_id, sim.now, b.broker_epoch)
        if plan is None:
            continue
        if b.broker_epoch < 0:
            b.manager.abandon(plan, sim.now)
            continue
        b.fetching.add(leader_id)
        wire = Wire(plan.request.encode(FETCH_VERSION))
        sim.request(b, leader_id, "fetch", plan, wire)


def broker_receive(sim: Simulation, b: Broker, src: int, message: Any) -> None:
    if isinstance(message, Request):
        assert isinstance(message.body, Wire)
        _serve_fetch(sim, b, src, message.request_id, message.body)
    elif isinstance(message, Response):
        pending = b.pending.pop(message.request_id, None)
        if pending is not None:
            _response(sim, b, pending[0], pending[1], message.body)
    else:
        produce, partition = message
        sim.serve_produce(b, produce, partition)


def request_failed(sim: Simulation, b: Broker, kind: str, context: Any) -> None:
    if kind == "register":
        b.registering = False
        b.next_registration_ms = sim.now + REGISTRATION_BACKOFF_MS
    elif kind == "heartbeat":
        b.heartbeat_in_flight = False
    elif kind == "metadata":
        b.metadata_in_flight = False
    elif kind == "fetch":
        b.fetching.discard(context.leader_id)
        b.manager.on_fetch_failed(context, sim.now)
    else:
        _alter_partition_answer(sim, b, context, ErrorCode.REQUEST_TIMED_OUT)


def _response(sim: Simulation, b: Broker, kind: str, context: Any, body: Any) -> None:
    if kind == "register":
        b.registering = False
        if body.error_code == ErrorCode.NONE:
            b.broker_epoch = body.broker_epoch
            b.next_heartbeat_ms = sim.now
        else:
            b.next_registration_ms = sim.now + REGISTRATION_BACKOFF_MS
    elif kind == "heartbeat":
        b.heartbeat_in_flight = False
    elif kind == "metadata":
        b.metadata_in_flight = False
        start, records = body
        if records and start == b.image.offset + 1:
            for i, record in enumerate(records):
                b.image.replay(record, start + i)
            if sim.acts(b):
                apply_image(sim, b)
    elif kind == "fetch":
        b.fetching.discard(context.leader_id)
        _fetch_answer(sim, b, context, FetchResponse.decode(body.payload, FETCH_VERSION))
    else:
        _alter_partition_answer(sim, b, context, body)


def _alter_partition_answer(
    sim: Simulation,
    b: Broker,
    send: AlterPartitionSend[LocalPartition],
    answer: AlterPartitionResponse | ErrorCode,
) -> None:
    if b.manager.on_alter_partition_result(send, answer, sim.now):
        r = b.replicas[send.partition.index]
        if r.local is send.partition:
            sim.complete_waiters(r)


def apply_image(sim: Simulation, b: Broker) -> None:
    topic = b.image.topics_by_name[TOPIC]
    for p, partition in sorted(topic.partitions.items()):
        if b.broker_id not in partition.replicas:
            continue
        r = b.replicas.get(p)
        if r is None:
            log = PartitionLog.create(b.disk, log_dir(p), LOG_CONFIG, sim.now, TOPIC_ID)
            r = b.replicas[p] = Replica(p, sim.local_partition(p, log, sim.now))
            b.state.partitions[(TOPIC, p)] = r.local
        registration = registration_of(partition)
        # The old role hands its high watermark over to the new one.
        high_watermark = r.high_watermark
        if r.leader is not None:
            outcome = r.leader.on_registration(registration)
            if outcome.action is not RegistrationAction.OBSOLETE:
                if outcome.change.recheck_acks:
                    sim.complete_waiters(r)
                continue
            sim.fail_waiters(r)
            r.local.leader_state = None
        elif r.follower is not None:
            action = r.follower.on_registration(registration)
            if action is not FollowerRegistrationAction.OBSOLETE:
                continue
            r.local.follower_state = None
        _new_role(sim, b, r, registration, high_watermark)


def _new_role(
    sim: Simulation, b: Broker, r: Replica, registration: PartitionRegistration, high_watermark: int
) -> None:
    """As ``ReplicationService.new_role``: a new LocalPartition role for a new epoch."""
    local = r.local
    local.leader_epoch = registration.leader_epoch
    if registration.leader == b.broker_id:
        # The local log assigns the new epoch at its end before leading in it.
        if r.log.epochs.latest_epoch() < registration.leader_epoch:
            r.log.assign_leader_epoch(registration.leader_epoch)
        key = (r.partition, registration.leader_epoch)
        first = sim.leader_of_epoch.setdefault(key, b.broker_id)
        if first != b.broker_id:
            raise AssertionError(
                f"partition {r.partition} epoch {registration.leader_epoch} led by "
                f"{first} and {b.broker_id}"
            )
        local.is_leader = True
        local.leader_state = PartitionLeader(
            replica_id=b.broker_id,
            registration=registration,
            log_end_offset=r.log.log_end_offset,
            durable_end_offset=r.flushed,
            high_watermark=high_watermark,
            min_insync_replicas=min_insync_replicas(
                b.image.configs, TOPIC, len(registration.replicas)
            ),
            replica_lag_time_max_ms=sim.config.replica_lag_time_max_ms,
            now_ms=sim.now,
            flush_before_ack=local.flush_before_ack,
        )
        local.follower_state = None
        local.follower_broker_epochs = {}
        sim.note("leader", f"b{b.broker_id} p{r.partition} {registration}")
    else:
        local.is_leader = False
        local.leader_state = None
        local.follower_state = PartitionFollower(
            replica_id=b.broker_id,
            registration=registration,
            log=LogEpochs(r.log),
            high_watermark=high_watermark,
            replica_fetch_backoff_ms=REPLICA_FETCH_BACKOFF_MS,
        )


def _serve_fetch(sim: Simulation, b: Broker, src: int, request_id: int, wire: Wire) -> None:
    """The leader's side: the shipped Fetch handler (``broker/fetch.py`` and
    ``broker/replica_fetch.py``, fetch sessions included) on this broker's state."""
    request = FetchRequest.decode(wire.payload, FETCH_VERSION)
    b.state.now_ms = b.state.monotonic_ms = sim.now
    header = RequestHeader(
        request_api_key=FetchRequest.API_KEY,
        request_api_version=FETCH_VERSION,
        correlation_id=request_id,
        client_id=f"replica-{src}",
    )
    _fetch_outcome(sim, b, src, request_id, handle_fetch(b.state, header, request))


def _fetch_outcome(sim: Simulation, b: Broker, src: int, request_id: int, outcome: Outcome) -> None:
    if isinstance(outcome, Reply):
        sim.send(
            b.broker_id, src, Response(request_id, Wire(outcome.response.encode(FETCH_VERSION)))
        )
        return
    assert isinstance(outcome, AwaitData), outcome
    b.parked.append(ParkedFetch(src, request_id, outcome))


def replication_changed(sim: Simulation, b: Broker, generation: int, key: tuple[str, int]) -> None:
    """The shell's ``replication_changed``: answer acks=all waiters, wake long polls."""
    if b.generation != generation:
        return
    r = b.replicas.get(key[1])
    if r is not None:
        sim.complete_waiters(r)
    wake_parked(sim, b)


def wake_parked(sim: Simulation, b: Broker) -> None:
    if b.parked:
        sim.schedule(sim.now, "wake_fetches", (b.broker_id, b.generation))


def on_wake_fetches(sim: Simulation, broker_id: int, generation: int) -> None:
    """New data or a new high watermark: the held fetches try again, as the shell's
    long polls wake (those still without news go on waiting)."""
    b = sim.brokers[broker_id]
    if not b.alive or b.generation != generation or b.paused:
        return
    _retry_parked(sim, b, timed_out=False)
    check_broker(sim, b)


def _expire_parked(sim: Simulation, b: Broker) -> None:
    if any(sim.now >= p.outcome.deadline_ms for p in b.parked):
        _retry_parked(sim, b, timed_out=True)


def _retry_parked(sim: Simulation, b: Broker, timed_out: bool) -> None:
    parked, b.parked = b.parked, []
    b.state.now_ms = b.state.monotonic_ms = sim.now
    for held in parked:
        expired = timed_out and sim.now >= held.outcome.deadline_ms
        outcome = held.outcome.then(expired)
        _fetch_outcome(sim, b, held.src, held.request_id, outcome)


def _fetch_answer(
    sim: Simulation, b: Broker, plan: FetchPlan[LocalPartition], response: FetchResponse
) -> None:
    """The follower's side: the replica manager decides, this carries it out."""
    for item in b.manager.on_fetch_response(plan, response, sim.now):
        r = b.replicas[item.partition.index]
        decision = item.decision
        action = decision.action
        if action is FollowerAction.APPEND:
            records = item.data.records
            if records is not None and len(records):
                raw = (
                    records
                    if isinstance(records, bytes | bytearray | memoryview)
                    else records.read()
                )
                r.local.append_replicated(raw, sim.now)
                r.sync()
                r.flush_due_ms = sim.now + sim.rng.randint(0, sim.config.max_flush_delay_ms)
            b.manager.on_appended(item.follower, item.data)
        elif action is FollowerAction.TRUNCATE:
            _truncate(sim, b, r, decision.offset, decision.below_high_watermark, decision.reason)
        else:
            raise AssertionError(f"truncate fully without retention: {decision}")


def _truncate(
    sim: Simulation, b: Broker, r: Replica, offset: int, below_hw: bool, why: str
) -> None:
    committed = sim.committed[r.partition]
    dropped = [o for o in range(offset, r.log.log_end_offset) if committed.get(o) == r.entries[o]]
    if dropped:
        now = sim.controller_image.topics_by_name[TOPIC].partitions[r.partition]
        if b.broker_id in now.isr or b.broker_id in now.eligible_leader_replicas:
            sim.violation(
                f"b{b.broker_id} p{r.partition} truncation to {offset} ({why}) drops "
                f"committed records {dropped[0]}..{dropped[-1]}"
            )
        else:
            sim.stale_truncations += 1
    if below_hw:
        sim.truncated_below_hw += 1
        sim.violation(f"b{b.broker_id} p{r.partition} truncates below its hw: {why}")
        r.last_hw = min(r.last_hw, offset)
    sim.note("truncate", f"b{b.broker_id} p{r.partition} to {offset}: {why}")
    r.log.truncate_to(offset, sim.now, f"replication: {why}")
    r.local.on_truncated(sim.now)
    r.sync()
    r.checked_upto = min(r.checked_upto, offset)
