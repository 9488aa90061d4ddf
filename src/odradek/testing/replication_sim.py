"""The deterministic simulator of partition replication: the production replica
manager, fetch path, storage engine and controller on simulated brokers, network,
disks, clients and faults.

One thread, one priority queue of events ordered by (time ms, sequence number), one
``random.Random(seed)`` from which every choice and every child generator is drawn.
Nothing reads the wall clock. A seed replays byte for byte; it also picks the scenario
and, swarm style, which faults are on and how often.

What is modelled
================

* **Controller** (node 0): the real pure controller, :class:`QuorumControllerState`
  (registration, heartbeats, session expiry with leader election from the ISR,
  AlterPartition, eligible leader replicas), plus :mod:`odradek.controller.elections`
  when the configuration enables unclean leader election. The metadata log is a plain
  list of committed records (the controller quorum itself is simulated in
  ``raft_sim``); every record is replayed into the controller's image as soon as it is
  appended, as the controller's contract says, and a response is sent at once. A
  *controller failover* stops all answers for a while (requests in flight are lost),
  then a new :class:`QuorumControllerState` takes over the same log with every broker
  session started afresh, as a newly elected controller does. The *network* to the
  controller is as faulty as any other link.
* **Brokers** (1..3 or 1..5): each is the production code without its sockets, as
  TigerBeetle runs its replica on simulated I/O. A broker has a
  :class:`~odradek.broker.state.BrokerState` whose partitions are
  :class:`~odradek.broker.partition.LocalPartition` values with the production roles
  (``PartitionLeader`` / ``PartitionFollower``, built as ``shell/replication.py``
  builds them), and a :class:`~odradek.replication.replica_manager.ReplicaManager`,
  the class the shell drives: it decides each Fetch (one per leader, one in flight,
  in an incremental fetch session), what the answer means (append, truncate, back
  off), and the ISR changes (``isr_tick``, with KIP-903's broker-epoch filter, resent
  after a backoff on ``RETRY``), sent as real ``AlterPartitionRequest`` v3 values to
  the controller. A leader answers a follower's Fetch with the shipped handler
  (``broker/fetch.py`` and ``broker/replica_fetch.py``: fetch sessions, the
  quiet-partition fast path, the registered-follower and diverging-epoch checks, and
  the long poll, which waits ``FETCH_WAIT_MS`` or until new data). Fetch requests and
  responses travel encoded at v16. Produce uses ``check_produce``/``on_append``/
  ``on_flush`` and acks=all waiters; a follower flushes before it fetches again. Roles
  come from the broker's own metadata image, which it learns by polling the
  controller's log (so it lags, and not at all while cut off). A broker registers,
  heartbeats with its applied metadata offset, and builds replica roles only once its
  image has caught up to its own registration (as Kafka's broker does).
* **Disk**: each broker has a :class:`~odradek.testing.sim_disk.SimDisk`, and each
  replica's log is a real :class:`~odradek.storage.log.PartitionLog` on it (small
  segments, so that runs roll them), one record per batch. Flushes happen a random few
  ms after appends (group commit). A crash is SimDisk's power loss: each file keeps
  its durable content, all it was given, or a prefix of it (a torn write), and the
  log is opened again with recovery; the high-watermark checkpoint survives. The checks
  read each log's records back from its files after every change (``Replica.sync``).
* **Network** (:mod:`odradek.testing.sim_network`): per-link delay, drop, duplicate,
  reorder between all brokers and the controller; partitions of any shape; slow links.
  A request without an answer times out. Clients are not partitioned from brokers
  (Jepsen's clients were not either), but a crashed or paused broker does not answer.
* **Clients**: producers with acks=all and unique values, sent to the leader named by
  a random broker's image (possibly stale). Each acknowledgement is recorded with its
  offset in a :class:`~odradek.testing.produce_history.ProduceHistory`.
* **Faults**: partitions (a node alone, two groups, a bridge, one-way, a broker cut from
  the controller only, a leader cut from its followers only), crashes losing unflushed
  data, pauses, slow links, controller failovers, and wiped disks (a broker comes back
  empty with a new log directory id; only while every committed record has
  min.insync.replicas other durable copies, since a wipe beyond that is a loss no
  protocol prevents). The ``seed000`` scenario replays Jepsen's Kafka 0.8 case:
  cut the leader from its followers but not the controller (the ISR shrinks to the
  leader), then from the controller too (it is fenced and leadership moves), then heal.

Invariants, after every event
=============================

1. *One leader per partition per leader epoch*: when a broker builds a
   ``PartitionLeader`` for an epoch, no other broker ever did for that epoch (the
   controller hands out each epoch once; the broker must only lead on its word).
2. *A replica's high watermark never decreases within a process lifetime*: the leader
   and the follower cores never lower it, and a role change hands it over. The only
   exception is a follower truncation flagged ``below_high_watermark``, which can only
   follow an unclean election.
3. *Every record below any replica's high watermark is the committed record at that
   offset* (a global map, filled from whichever replica first passes an offset). Hence
   no two replicas ever differ below the minimum of their high watermarks.
4. *No follower the controller counts on truncates a committed record*: followers
   truncate by leader epoch, and a clean leader holds every committed record. A member
   of the partition's ISR or eligible leader replicas (in the controller's image) must
   never drop one. A replica outside both may: a follower paused with a fetch response
   of an older epoch's leader in hand acts on it when it resumes, drops records that
   were committed meanwhile, and fetches them again; no election and no high watermark
   relies on its copy, and invariant 5 still counts the durable ones (counted in
   ``stale_truncations``).
5. *The last committed record of each partition is durable (flushed) on at least
   min.insync.replicas replicas*: the leader counts only its flushed end and followers
   flush before they report an offset, so when the high watermark passed it that many
   disks held it; nothing clean ever removes it. (A wiped disk still counts for what it
   held: leaders may have counted those copies before the wipe, a fault beyond the
   fsync contract; the final read judges whether anything was really lost.)

All five hold in the safe configuration (min.insync.replicas=2 of 3, no unclean
election), where a violation raises :class:`SimulationFailure` at once. In the unsafe
configuration 2 to 5 are exactly what is given up; violations are counted
(``violations``), the run goes on, and the final checker reports the loss.

At the end, after healing, restarting and a quiet period: every partition has a leader,
every replica's log equals the leader's, a produce after the quiet period was
acknowledged, and the final read of each partition (its leader's log below the high
watermark) is judged by :func:`odradek.testing.produce_history.check`: nothing lost,
duplicated or at another offset than acknowledged.

Where it lives
==============

This module holds the simulation's state, the event loop (``EVENTS``: what each kind of
event runs), the controller and the clients. A broker's loop is
:mod:`~odradek.testing.replication_sim_broker_loop`, the faults
:mod:`~odradek.testing.replication_sim_faults`, the invariants and the final read
:mod:`~odradek.testing.replication_sim_checks`, the timings and the swarm
:mod:`~odradek.testing.replication_sim_config`. They are plain functions of the
:class:`Simulation`, which owns all state; the simulated broker itself (its disk and
hosted replicas) is :mod:`~odradek.testing.sim_broker`.
"""

from __future__ import annotations

import heapq
import random
import uuid
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

from odradek.broker.partition import (
    LocalPartition,
    load_producer_state,
)
from odradek.broker.state import BrokerSettings, BrokerState
from odradek.controller.controller import QuorumControllerState
from odradek.controller.elections import unclean_leader_elections
from odradek.controller.image import CONFIG_RESOURCE_TOPIC, NO_LEADER, MetadataImage
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    AlterPartitionRequest,
)
from odradek.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from odradek.protocol.messages.broker_registration_request import (
    BrokerRegistrationRequest,
)
from odradek.protocol.metadata import (
    ConfigRecord,
    PartitionChangeRecord,
    PartitionRecord,
    TopicRecord,
)
from odradek.replication.replica_manager import (
    ReplicaManager,
)
from odradek.storage.log import PartitionLog
from odradek.testing import replication_sim_broker_loop as broker_loop
from odradek.testing import replication_sim_faults as faults
from odradek.testing.produce_history import CheckResult, ProduceHistory
from odradek.testing.replication_sim_broker_loop import (
    apply_image,
    broker_receive,
    replication_changed,
    request_failed,
    wake_parked,
)
from odradek.testing.replication_sim_checks import check_broker, check_durable, finish, report
from odradek.testing.replication_sim_config import (
    CLIENT_DELAY_MS,
    CLUSTER_ID,
    CONTROLLER,
    END_MS,
    FAULTS_END_MS,
    FETCH_MAX_BYTES,
    FETCH_WAIT_MS,
    ISR_RETRY_MS,
    PRODUCE_TIMEOUT_MS,
    REPLICATION_FACTOR,
    REQUEST_TIMEOUT_MS,
    SCENARIOS,
    STABLE_MS,
    TICK_MS,
    TOPIC_ID,
    Config,
    swarm,
)
from odradek.testing.sim_broker import (
    TOPIC,
    Broker,
    MetadataFetch,
    Produce,
    Replica,
    Request,
    Response,
    record_batch,
)
from odradek.testing.sim_disk import SimDisk
from odradek.testing.sim_network import SimNetwork

__all__ = [
    "SCENARIOS",
    "Config",
    "Simulation",
    "SimulationFailure",
    "run_simulation",
]


class SimulationFailure(AssertionError):
    """A broken invariant or a failed final check, with the seed and how to replay it."""


class Simulation:
    def __init__(
        self,
        seed: int,
        scenario: str | None = None,
        *,
        unsafe: bool = False,
        strict: bool | None = None,
        roles_before_registration: bool = False,
    ) -> None:
        """``strict`` (by default: the configuration is safe) makes the first broken
        invariant fatal; otherwise violations are counted and the run goes on.

        ``roles_before_registration`` brings back a bug ``odradek verify`` found: a
        restarted broker acting on the roles of the image it replayed from its own
        metadata log before that image holds its new registration. A test shows the
        loss it causes, so the rule that prevents it (``may_take_roles``) is proven."""
        self.seed = seed
        self.roles_before_registration = roles_before_registration
        self.strict = not unsafe if strict is None else strict
        self.scenario = scenario or SCENARIOS[seed % len(SCENARIOS)]
        if self.scenario not in SCENARIOS:
            raise ValueError(f"unknown scenario {self.scenario!r}")
        self.rng = random.Random(seed)
        self.config = cfg = swarm(seed, self.scenario, unsafe, self.rng)
        self.now = 0
        self.events = 0
        self._queue: list[tuple[int, int, str, tuple[Any, ...]]] = []
        self._seq = 0
        self._next_request_id = 0
        self.stats: Counter[str] = Counter()  # what happened, by kind of note
        self.trace: deque[tuple[int, str, Any]] = deque(maxlen=80)
        self.broker_ids = list(range(1, cfg.brokers + 1))
        self.network = SimNetwork(
            random.Random(self.rng.getrandbits(64)), [CONTROLLER, *self.broker_ids], cfg.network
        )
        self.normal_links = dict(self.network.links)
        # The controller: its image is the one QuorumControllerState decides on.
        self.metadata_log: list[object] = []
        self.controller_image = MetadataImage()
        self.controller = QuorumControllerState(
            self.controller_image,
            cluster_id=CLUSTER_ID,
            activated_ms=0,
            session_timeout_ms=cfg.session_timeout_ms,
        )
        # Between the active controller's death and the next one's election nobody
        # answers; the log (committed records) survives, the sessions do not.
        self.controller_down = False
        self._create_topic()
        self.brokers = {b: self._new_broker(b) for b in self.broker_ids}
        # The global view the checks compare against.
        self.histories = {p: ProduceHistory() for p in range(cfg.partitions)}
        self.committed: dict[int, dict[int, tuple[int, str]]] = {
            p: {} for p in range(cfg.partitions)
        }
        self.committed_end = dict.fromkeys(range(cfg.partitions), 0)
        self.leader_of_epoch: dict[tuple[int, int], int] = {}
        self.violations: list[str] = []
        self.unclean_elections = 0
        self.elr_elections = 0  # leaders taken from the eligible leader replicas
        self.truncated_below_hw = 0
        self.stale_truncations = 0  # see invariant 4
        self.produced = 0
        self.late: set[str] = set()  # values produced after the quiet period
        self.results: dict[int, CheckResult] = {}
        for b in self.brokers.values():
            self.start(b)
        self.schedule(0, "controller_tick", ())
        self.schedule(self.rng.randint(0, cfg.produce_interval_ms), "produce", ())
        self.schedule(self.rng.randint(200, 1000), "nemesis", ())
        self.schedule(FAULTS_END_MS, "heal_all", ())

    # -- building blocks

    def _create_topic(self) -> None:
        n = self.config.brokers
        records: list[object] = [
            TopicRecord(name=TOPIC, topic_id=TOPIC_ID),
            # The one min.insync.replicas both the controller and the leaders read.
            ConfigRecord(
                resource_type=CONFIG_RESOURCE_TOPIC,
                resource_name=TOPIC,
                name="min.insync.replicas",
                value=str(self.config.min_insync_replicas),
            ),
        ]
        for p in range(self.config.partitions):
            replicas = [(p + j) % n + 1 for j in range(REPLICATION_FACTOR)]
            records.append(
                PartitionRecord(
                    partition_id=p,
                    topic_id=TOPIC_ID,
                    replicas=replicas,
                    isr=replicas,
                    leader=replicas[0],
                    leader_epoch=0,
                    partition_epoch=0,
                )
            )
        self._append_metadata(records)

    def _append_metadata(self, records: list[Any]) -> None:
        """Append to the (reliable) metadata log and replay at once, as the controller's
        contract requires, then give leaderless partitions an unclean leader if allowed."""
        for record in records:
            if isinstance(record, PartitionChangeRecord) and record.leader >= 0:
                before = self.controller_image.topics_by_id[record.topic_id].partitions[
                    record.partition_id
                ]
                if record.leader in before.eligible_leader_replicas:
                    self.elr_elections += 1
                    self.note("elr election", f"p{record.partition_id} b{record.leader}")
            self.metadata_log.append(record)
            self.controller_image.replay(record, len(self.metadata_log) - 1)
        if records and self.config.unclean_leader_election:
            unclean = unclean_leader_elections(
                self.controller_image, unclean_leader_election_enable=True
            )
            if unclean:
                self.unclean_elections += len(unclean)
                self.note("unclean election", str([(r.partition_id, r.leader) for r in unclean]))
                self._append_metadata(list(unclean))

    def schedule(self, at_ms: int, kind: str, args: tuple[Any, ...]) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at_ms, self._seq, kind, args))

    def note(self, kind: str, text: str) -> None:
        self.stats[kind] += 1
        self.trace.append((self.now, kind, text))

    def new_disk(self) -> SimDisk:
        """A broker's disk with its (durable) log directory, as a node finds it."""
        disk = SimDisk(random.Random(self.rng.getrandbits(64)))
        disk.makedirs("data")
        disk.fsync_dir("/")
        return disk

    def _new_broker(self, broker_id: int) -> Broker:
        disk = self.new_disk()
        state = self._broker_state(broker_id, MetadataImage())
        return Broker(broker_id, disk, state, self._manager(broker_id, state))

    def _broker_state(self, broker_id: int, image: MetadataImage) -> BrokerState:
        """A new process's memory: the broker's state with its own fetch sessions."""
        settings = BrokerSettings(
            node_id=broker_id, cluster_id=CLUSTER_ID, host=f"b{broker_id}", port=9092
        )
        return BrokerState(settings, image, rng=random.Random(self.rng.getrandbits(64)))

    def _manager(self, broker_id: int, state: BrokerState) -> ReplicaManager[LocalPartition]:
        return ReplicaManager(
            broker_id,
            state.partitions,
            fetch_wait_max_ms=FETCH_WAIT_MS,
            fetch_max_bytes=FETCH_MAX_BYTES,
            isr_retry_ms=ISR_RETRY_MS,
            now_ms=self.now,
        )

    @staticmethod
    def local_partition(partition: int, log: PartitionLog, now_ms: int) -> LocalPartition:
        return LocalPartition(
            topic=TOPIC,
            index=partition,
            topic_id=TOPIC_ID,
            log=log,
            leader_epoch=-1,
            producers=load_producer_state(log, now_ms),
            is_leader=False,
        )

    def start(self, b: Broker) -> None:
        b.alive = True
        b.paused = False
        b.held = []
        b.generation += 1
        # The image is the one replayed from the broker's own metadata log (a wiped
        # disk took it along: see _fault_wipe); the rest of the process starts empty.
        b.state = self._broker_state(b.broker_id, b.image.copy())
        b.manager = self._manager(b.broker_id, b.state)
        generation = b.generation
        b.state.replication_changed = lambda key: replication_changed(self, b, generation, key)
        b.incarnation = uuid.UUID(int=self.rng.getrandbits(128))
        b.broker_epoch = -1
        b.registering = b.heartbeat_in_flight = b.metadata_in_flight = False
        b.next_registration_ms = b.next_heartbeat_ms = b.next_metadata_ms = self.now
        b.pending = {}
        b.fetching = set()
        b.parked = []
        for p, r in sorted(b.replicas.items()):
            r.local = self.local_partition(p, r.log, self.now)
            b.state.partitions[(TOPIC, p)] = r.local
            r.forget_process()
            r.last_hw = r.high_watermark
            r.checked_upto = 0
        if self.roles_before_registration and TOPIC in b.image.topics_by_name:
            apply_image(self, b)
        self.schedule(self.now + self.rng.randint(1, TICK_MS), "tick", (b.broker_id, b.generation))

    def send(self, src: int, dst: int, message: Any) -> None:
        generation = self.brokers[dst].generation if dst != CONTROLLER else 0
        for delay in self.network.delays(src, dst):
            self.schedule(self.now + delay, "deliver", (src, dst, generation, message))

    def request(self, b: Broker, dst: int, kind: str, context: Any, body: Any) -> None:
        self._next_request_id += 1
        request_id = self._next_request_id
        b.pending[request_id] = (kind, context)
        self.send(b.broker_id, dst, Request(request_id, body))
        self.schedule(
            self.now + REQUEST_TIMEOUT_MS, "timeout", (b.broker_id, b.generation, request_id)
        )

    def leader_of(self, partition: int) -> int:
        return self.controller_image.topics_by_name[TOPIC].partitions[partition].leader

    # -- the event loop

    def run(self) -> Simulation:
        try:
            while self._queue:
                at_ms, _, kind, args = heapq.heappop(self._queue)
                if at_ms > END_MS:
                    break
                self.now = at_ms
                self.events += 1
                if kind not in ("tick", "controller_tick"):
                    self.trace.append((at_ms, kind, args))
                EVENTS[kind](self, *args)
                check_durable(self)
            finish(self)
        except Exception as error:  # a core invariant, a check, or a simulator bug
            raise SimulationFailure(report(self, error)) from error
        return self

    def violation(self, message: str) -> None:
        """A broken safety invariant: fatal in the safe configuration; in the unsafe one
        it is what the configuration gives up, so it is counted and the run goes on."""
        if self.strict:
            raise AssertionError(message)
        if len(self.violations) < 1000:
            self.violations.append(f"{self.now}: {message}")

    def _on_deliver(self, src: int, dst: int, generation: int, message: Any) -> None:
        if not self.network.connected(src, dst):
            return  # a partition also cuts what was already in flight
        if dst == CONTROLLER:
            self._controller_receive(src, message)
            return
        b = self.brokers[dst]
        if not b.alive or b.generation != generation:
            return  # the connection died with the process
        if b.paused:
            b.held.append((src, message))
            return
        broker_receive(self, b, src, message)
        check_broker(self, b)

    def _on_timeout(self, broker_id: int, generation: int, request_id: int) -> None:
        b = self.brokers[broker_id]
        if b.generation != generation or request_id not in b.pending:
            return
        if b.paused:
            # A paused process notices its timeouts when it runs again.
            self.schedule(self.now + TICK_MS, "timeout", (broker_id, generation, request_id))
            return
        kind, context = b.pending.pop(request_id)
        request_failed(self, b, kind, context)
        check_broker(self, b)

    # -- the controller

    def _on_controller_tick(self) -> None:
        self.schedule(self.now + TICK_MS, "controller_tick", ())
        if self.controller_down:
            return
        records = self.controller.fence_stale_brokers(self.now)
        if records:
            self.note("fence", str(records))
        self._append_metadata(list(records))

    def _controller_receive(self, src: int, message: Request) -> None:
        if self.controller_down:
            return  # no active controller: the request times out at the broker
        body = message.body
        next_offset = len(self.metadata_log)
        answer: Any
        if isinstance(body, MetadataFetch):
            start = body.after_offset + 1
            answer = (start, tuple(self.metadata_log[start:]))
        elif isinstance(body, BrokerRegistrationRequest):
            records, answer = self.controller.register_broker(body, next_offset, self.now)
            self._append_metadata(list(records))
        elif isinstance(body, BrokerHeartbeatRequest):
            records, answer = self.controller.broker_heartbeat(body, next_offset, self.now)
            self._append_metadata(list(records))
        else:
            assert isinstance(body, AlterPartitionRequest)
            records, answer = self.controller.alter_partition(body, 3)
            self._append_metadata(list(records))
        self.send(CONTROLLER, src, Response(message.request_id, answer))

    def acts(self, b: Broker) -> bool:
        """Whether ``b`` acts on its image's roles now (see ``roles_before_registration``)."""
        return b.caught_up or (self.roles_before_registration and TOPIC in b.image.topics_by_name)

    # -- produce

    def _on_produce(self) -> None:
        if self.now < END_MS - 500:
            interval = self.config.produce_interval_ms
            self.schedule(self.now + self.rng.randint(1, 2 * interval), "produce", ())
        # The client's metadata comes from a random running broker, possibly stale.
        running = [b for _, b in sorted(self.brokers.items()) if b.alive and not b.paused]
        if not running:
            return
        source = self.rng.choice(running)
        partition = self.rng.randrange(self.config.partitions)
        topic = source.image.topics_by_name.get(TOPIC)
        if topic is None or partition not in topic.partitions:
            return
        leader = topic.partitions[partition].leader
        if leader == NO_LEADER:
            return
        self.produced += 1
        produce = Produce(partition, f"{partition}:{self.produced}")
        self.histories[partition].invoke(produce.value)
        if self.now >= STABLE_MS:
            self.late.add(produce.value)
        target = self.brokers[leader]
        delay = self.rng.randint(*CLIENT_DELAY_MS)
        self.schedule(
            self.now + delay, "deliver", (-1, leader, target.generation, (produce, partition))
        )
        self.schedule(self.now + PRODUCE_TIMEOUT_MS, "produce_timeout", (produce,))

    def serve_produce(self, b: Broker, produce: Produce, partition: int) -> None:
        r = b.replicas.get(partition)
        leader = r.leader if r is not None else None
        if r is None or leader is None or leader.is_obsolete:
            self._answer(produce, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)
            return
        error = leader.check_produce(-1)
        if error != ErrorCode.NONE:
            self._answer(produce, error, -1)
            return
        r.log.append_as_leader(record_batch(produce.value, self.now), leader.leader_epoch, self.now)
        r.sync()
        if r.flush_due_ms is None:
            r.flush_due_ms = self.now + self.rng.randint(0, self.config.max_flush_delay_ms)
        leader.on_append(r.log.log_end_offset)
        r.waiters.append((produce, r.log.log_end_offset))
        self.complete_waiters(r)
        wake_parked(self, b)

    def complete_waiters(self, r: Replica) -> None:
        leader = r.leader
        if leader is None or not r.waiters:
            return
        done = leader.completed((produce, required) for produce, required in r.waiters)
        finished = set()
        for produce, error in done:
            finished.add(id(produce))
            required = next(req for p, req in r.waiters if p is produce)
            self._answer(produce, error, required - 1)
        r.waiters = [w for w in r.waiters if id(w[0]) not in finished]

    def fail_waiters(self, r: Replica) -> None:
        for produce, _ in r.waiters:
            self._answer(produce, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)
        r.waiters = []

    def _answer(self, produce: Produce, error: ErrorCode, offset: int) -> None:
        if produce.state != "pending":
            return  # the client gave up already
        history = self.histories[produce.partition]
        if error == ErrorCode.NONE:
            produce.state = "ok"
            history.ok(produce.value, offset)
        else:
            produce.state = "fail"
            history.fail(produce.value)

    def _on_produce_timeout(self, produce: Produce) -> None:
        if produce.state == "pending":
            produce.state = "info"  # indeterminate: it may or may not be in the log
            for b in self.brokers.values():
                r = b.replicas.get(produce.partition)
                if r is not None:
                    r.waiters = [w for w in r.waiters if w[0] is not produce]


# What each kind of event runs, given the simulation and the event's arguments.
EVENTS: dict[str, Callable[..., None]] = {
    "deliver": Simulation._on_deliver,
    "timeout": Simulation._on_timeout,
    "controller_tick": Simulation._on_controller_tick,
    "produce": Simulation._on_produce,
    "produce_timeout": Simulation._on_produce_timeout,
    "tick": broker_loop.on_tick,
    "wake_fetches": broker_loop.on_wake_fetches,
    "nemesis": faults.on_nemesis,
    "heal": faults.on_heal,
    "heal_all": faults.on_heal_all,
    "restart": faults.on_restart,
    "resume": faults.on_resume,
    "fast": faults.on_fast,
    "controller_up": faults.on_controller_up,
    "seed000_isolate": faults.on_seed000_isolate,
    "seed000_heal": faults.on_seed000_heal,
}


def run_simulation(
    seed: int,
    scenario: str | None = None,
    *,
    unsafe: bool = False,
    strict: bool | None = None,
    roles_before_registration: bool = False,
) -> Simulation:
    """Run one seed; raise :class:`SimulationFailure` on a violation (by default only
    in the safe configuration, see :class:`Simulation`)."""
    return Simulation(
        seed,
        scenario,
        unsafe=unsafe,
        strict=strict,
        roles_before_registration=roles_before_registration,
    ).run()
