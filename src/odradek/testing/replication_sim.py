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
"""

from __future__ import annotations

import heapq
import random
import uuid
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any

from odradek.broker.effects import AwaitData, Outcome, Reply
from odradek.broker.fetch import handle_fetch
from odradek.broker.partition import (
    LocalPartition,
    LogEpochs,
    load_producer_state,
    registration_of,
)
from odradek.broker.state import BrokerSettings, BrokerState
from odradek.controller.controller import QuorumControllerState
from odradek.controller.elections import unclean_leader_elections
from odradek.controller.elr import min_insync_replicas
from odradek.controller.image import CONFIG_RESOURCE_TOPIC, NO_LEADER, MetadataImage
from odradek.protocol.api import RequestHeader
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    FetchRequest,
    FetchResponse,
)
from odradek.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from odradek.protocol.messages.broker_registration_request import (
    BrokerRegistrationRequest,
    Listener,
)
from odradek.protocol.metadata import (
    ConfigRecord,
    PartitionChangeRecord,
    PartitionRecord,
    TopicRecord,
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
    ReplicaManager,
)
from odradek.storage.log import PartitionLog
from odradek.testing.produce_history import CheckResult, ProduceHistory, check
from odradek.testing.sim_broker import (
    LOG_CONFIG,
    TOPIC,
    Broker,
    MetadataFetch,
    ParkedFetch,
    Produce,
    Replica,
    Request,
    Response,
    Wire,
    log_dir,
    record_batch,
)
from odradek.testing.sim_disk import SimDisk
from odradek.testing.sim_network import Faults, SimNetwork

__all__ = [
    "SCENARIOS",
    "Config",
    "Simulation",
    "SimulationFailure",
    "run_simulation",
]

SCENARIOS = ("mix", "seed000")

CONTROLLER = 0
CLUSTER_ID = "b2RyYWRlay1yZXBsaWNhdGlvbg"
TOPIC_ID = uuid.UUID(int=0x0D8AD3C)
REPLICATION_FACTOR = 3

TICK_MS = 10  # each broker's loop: flushes, fetches, ISR changes, heartbeats
HEARTBEAT_MS = 100  # broker.heartbeat.interval.ms, scaled down with the session timeout
REQUEST_TIMEOUT_MS = 400
REGISTRATION_BACKOFF_MS = 200
ISR_RETRY_MS = 100
FETCH_WAIT_MS = 40  # replica.fetch.wait.max.ms: how long a leader holds an empty fetch
FETCH_MAX_BYTES = 2048  # replica.fetch.max.bytes: some 25 batches of one record
REPLICA_FETCH_BACKOFF_MS = 100
PRODUCE_TIMEOUT_MS = 1500
CLIENT_DELAY_MS = (1, 4)
FAULTS_END_MS = 9_000  # faults stop: everything heals, restarts and resumes
STABLE_MS = FAULTS_END_MS + 4_000  # after the quiet period: produces must be acknowledged
END_MS = STABLE_MS + 1_500


class SimulationFailure(AssertionError):
    """A broken invariant or a failed final check, with the seed and how to replay it."""


# ---------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class Config:
    """What the swarm picked for one seed."""

    seed: int
    scenario: str
    unsafe: bool
    brokers: int
    partitions: int
    min_insync_replicas: int
    unclean_leader_election: bool
    network: Faults
    nemesis: dict[str, int]  # action -> weight (mix only)
    nemesis_interval_ms: int
    produce_interval_ms: int
    replica_lag_time_max_ms: int
    session_timeout_ms: int
    metadata_interval_ms: int  # how often a broker polls the metadata log
    max_flush_delay_ms: int
    keep_unflushed: bool
    """Drawn to keep every seed's other choices; unused since crashes are SimDisk's,
    which decides per file what of the unflushed writes a crash keeps."""


_NEMESIS = ("partition", "leader_from_followers", "from_controller", "crash", "pause", "slow")
# Added later, drawn from their own generator so that the seeds above keep the faults
# they had for every seed that does not pick these.
_LATER_NEMESIS = ("controller_failover", "wipe")


def swarm(seed: int, scenario: str, unsafe: bool, rng: random.Random) -> Config:
    nemesis = {a: rng.randint(1, 4) for a in _NEMESIS if rng.random() < 0.6}
    if not nemesis:
        nemesis = {"partition": 1}
    later = random.Random(seed * 7919 + 1)
    if later.random() < 0.5:
        nemesis |= {a: later.randint(1, 3) for a in _LATER_NEMESIS if later.random() < 0.6}

    def sometimes(high: float) -> float:
        return rng.uniform(0, high) if rng.random() < 0.5 else 0.0

    session = rng.randint(400, 1000)
    return Config(
        seed=seed,
        scenario=scenario,
        unsafe=unsafe,
        brokers=rng.choice((3, 3, 5)),
        partitions=1 if scenario == "seed000" else rng.randint(1, 2),
        # The unsafe configuration is Kafka 0.8's: an ISR of the leader alone still
        # acknowledges, and an out-of-sync replica may be elected.
        min_insync_replicas=1 if unsafe else 2,
        unclean_leader_election=unsafe,
        network=Faults(
            drop=sometimes(0.05),
            duplicate=sometimes(0.03),
            reorder=sometimes(0.05),
            max_base_ms=rng.randint(1, 8),
            max_jitter_ms=rng.randint(0, 20),
            reorder_ms=100,
        ),
        nemesis=nemesis,
        nemesis_interval_ms=rng.randint(300, 1200),
        produce_interval_ms=rng.randint(10, 60),
        replica_lag_time_max_ms=rng.randint(150, 500),
        session_timeout_ms=session,
        metadata_interval_ms=rng.randint(10, 150),
        max_flush_delay_ms=rng.randint(0, 30),
        keep_unflushed=rng.random() < 0.5,
    )


# ---------------------------------------------------------------------- the simulation


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
        self._normal_links = dict(self.network.links)
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
            self._start(b)
        self._schedule(0, "controller_tick", ())
        self._schedule(self.rng.randint(0, cfg.produce_interval_ms), "produce", ())
        self._schedule(self.rng.randint(200, 1000), "nemesis", ())
        self._schedule(FAULTS_END_MS, "heal_all", ())

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
                    self._note("elr election", f"p{record.partition_id} b{record.leader}")
            self.metadata_log.append(record)
            self.controller_image.replay(record, len(self.metadata_log) - 1)
        if records and self.config.unclean_leader_election:
            unclean = unclean_leader_elections(
                self.controller_image, unclean_leader_election_enable=True
            )
            if unclean:
                self.unclean_elections += len(unclean)
                self._note("unclean election", str([(r.partition_id, r.leader) for r in unclean]))
                self._append_metadata(list(unclean))

    def _schedule(self, at_ms: int, kind: str, args: tuple[Any, ...]) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at_ms, self._seq, kind, args))

    def _note(self, kind: str, text: str) -> None:
        self.stats[kind] += 1
        self.trace.append((self.now, kind, text))

    def _new_disk(self) -> SimDisk:
        """A broker's disk with its (durable) log directory, as a node finds it."""
        disk = SimDisk(random.Random(self.rng.getrandbits(64)))
        disk.makedirs("data")
        disk.fsync_dir("/")
        return disk

    def _new_broker(self, broker_id: int) -> Broker:
        disk = self._new_disk()
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
    def _local_partition(partition: int, log: PartitionLog, now_ms: int) -> LocalPartition:
        return LocalPartition(
            topic=TOPIC,
            index=partition,
            topic_id=TOPIC_ID,
            log=log,
            leader_epoch=-1,
            producers=load_producer_state(log, now_ms),
            is_leader=False,
        )

    def _start(self, b: Broker) -> None:
        b.alive = True
        b.paused = False
        b.held = []
        b.generation += 1
        # The image is the one replayed from the broker's own metadata log (a wiped
        # disk took it along: see _fault_wipe); the rest of the process starts empty.
        b.state = self._broker_state(b.broker_id, b.image.copy())
        b.manager = self._manager(b.broker_id, b.state)
        generation = b.generation
        b.state.replication_changed = lambda key: self._replication_changed(b, generation, key)
        b.incarnation = uuid.UUID(int=self.rng.getrandbits(128))
        b.broker_epoch = -1
        b.registering = b.heartbeat_in_flight = b.metadata_in_flight = False
        b.next_registration_ms = b.next_heartbeat_ms = b.next_metadata_ms = self.now
        b.pending = {}
        b.fetching = set()
        b.parked = []
        for p, r in sorted(b.replicas.items()):
            r.local = self._local_partition(p, r.log, self.now)
            b.state.partitions[(TOPIC, p)] = r.local
            r.forget_process()
            r.last_hw = r.high_watermark
            r.checked_upto = 0
        if self.roles_before_registration and TOPIC in b.image.topics_by_name:
            self._apply_image(b)
        self._schedule(self.now + self.rng.randint(1, TICK_MS), "tick", (b.broker_id, b.generation))

    def _send(self, src: int, dst: int, message: Any) -> None:
        generation = self.brokers[dst].generation if dst != CONTROLLER else 0
        for delay in self.network.delays(src, dst):
            self._schedule(self.now + delay, "deliver", (src, dst, generation, message))

    def _request(self, b: Broker, dst: int, kind: str, context: Any, body: Any) -> None:
        self._next_request_id += 1
        request_id = self._next_request_id
        b.pending[request_id] = (kind, context)
        self._send(b.broker_id, dst, Request(request_id, body))
        self._schedule(
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
                getattr(self, "_on_" + kind)(*args)
                self._check_durable()
            self._finish()
        except Exception as error:  # a core invariant, a check, or a simulator bug
            raise SimulationFailure(self._report(error)) from error
        return self

    def _violation(self, message: str) -> None:
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
        self._broker_receive(b, src, message)
        self._check_broker(b)

    def _on_timeout(self, broker_id: int, generation: int, request_id: int) -> None:
        b = self.brokers[broker_id]
        if b.generation != generation or request_id not in b.pending:
            return
        if b.paused:
            # A paused process notices its timeouts when it runs again.
            self._schedule(self.now + TICK_MS, "timeout", (broker_id, generation, request_id))
            return
        kind, context = b.pending.pop(request_id)
        self._request_failed(b, kind, context)
        self._check_broker(b)

    # -- the controller

    def _on_controller_tick(self) -> None:
        self._schedule(self.now + TICK_MS, "controller_tick", ())
        if self.controller_down:
            return
        records = self.controller.fence_stale_brokers(self.now)
        if records:
            self._note("fence", str(records))
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
        self._send(CONTROLLER, src, Response(message.request_id, answer))

    # -- a broker's loop

    def _on_tick(self, broker_id: int, generation: int) -> None:
        b = self.brokers[broker_id]
        if not b.alive or b.generation != generation:
            return
        self._schedule(self.now + TICK_MS, "tick", (broker_id, generation))
        if b.paused:
            return
        self._lifecycle(b)
        if self._acts(b):
            self._broker_tick(b)
        self._check_broker(b)

    def _acts(self, b: Broker) -> bool:
        """Whether ``b`` acts on its image's roles now (see ``roles_before_registration``)."""
        return b.caught_up or (self.roles_before_registration and TOPIC in b.image.topics_by_name)

    def _lifecycle(self, b: Broker) -> None:
        if b.broker_epoch < 0 and not b.registering and self.now >= b.next_registration_ms:
            b.registering = True
            request = BrokerRegistrationRequest(
                broker_id=b.broker_id,
                cluster_id=CLUSTER_ID,
                incarnation_id=b.incarnation,
                listeners=[Listener("PLAINTEXT", f"b{b.broker_id}", 9092, 0)],
                rack=None,
                log_dirs=[uuid.UUID(int=(b.disk_number << 32) + 0xD000 + b.broker_id)],
            )
            self._request(b, CONTROLLER, "register", None, request)
        if b.broker_epoch >= 0 and not b.heartbeat_in_flight and self.now >= b.next_heartbeat_ms:
            b.heartbeat_in_flight = True
            b.next_heartbeat_ms = self.now + HEARTBEAT_MS
            heartbeat = BrokerHeartbeatRequest(
                broker_id=b.broker_id,
                broker_epoch=b.broker_epoch,
                current_metadata_offset=b.image.offset,
            )
            self._request(b, CONTROLLER, "heartbeat", None, heartbeat)
        if not b.metadata_in_flight and self.now >= b.next_metadata_ms:
            b.metadata_in_flight = True
            b.next_metadata_ms = self.now + self.config.metadata_interval_ms
            self._request(b, CONTROLLER, "metadata", None, MetadataFetch(b.image.offset))

    def _broker_tick(self, b: Broker) -> None:
        for _, r in sorted(b.replicas.items()):
            self._replica_tick(b, r)
        self._expire_parked(b)
        self._isr_tick(b)
        self._fetch_tick(b)

    def _replica_tick(self, b: Broker, r: Replica) -> None:
        # Group commit: the flush the appends of the last few ms were waiting for.
        if r.flush_due_ms is not None and self.now >= r.flush_due_ms:
            r.flush_due_ms = None
            r.log.flush(self.now)
            leader = r.leader
            if (
                leader is not None
                and not leader.is_obsolete
                and r.flushed > leader.durable_end_offset
                and leader.on_flush(r.flushed).recheck_acks
            ):
                self._complete_waiters(r)
        r.hw_checkpoint = r.high_watermark  # Kafka checkpoints it periodically

    def _isr_tick(self, b: Broker) -> None:
        ineligible = {
            broker_id
            for broker_id, broker in b.image.brokers.items()
            if broker.fenced or broker.in_controlled_shutdown
        }
        for send in b.manager.isr_tick(
            self.now, b.broker_epoch, ineligible, lambda r: self._epoch_in(b.image, r)
        ):
            if not send.retry:
                self._note(
                    "isr proposal", f"b{b.broker_id} p{send.partition.index} {send.proposal}"
                )
            self._request(b, CONTROLLER, "alter_partition", send, send.request)

    @staticmethod
    def _epoch_in(image: MetadataImage, broker_id: int) -> int:
        broker = image.brokers.get(broker_id)
        return broker.epoch if broker is not None else -1

    def _fetch_tick(self, b: Broker) -> None:
        """One fetcher per leader, one fetch in flight each, as the shell runs them. A
        follower flushes before it fetches again: the next fetch reports its log end to
        the leader, which counts it towards the high watermark."""
        leaders = sorted(
            {r.follower.leader_id for r in b.replicas.values() if r.follower is not None}
        )
        for leader_id in leaders:
            if leader_id in b.fetching or leader_id < 0:
                continue
            if any(
                r.flush_due_ms is not None
                for r in b.replicas.values()
                if r.follower is not None and r.follower.leader_id == leader_id
            ):
                continue
            plan = b.manager.next_fetch(leader_id, self.now, b.broker_epoch)
            if plan is None:
                continue
            if b.broker_epoch < 0:
                b.manager.abandon(plan, self.now)
                continue
            b.fetching.add(leader_id)
            wire = Wire(plan.request.encode(FETCH_VERSION))
            self._request(b, leader_id, "fetch", plan, wire)

    # -- what a broker receives

    def _broker_receive(self, b: Broker, src: int, message: Any) -> None:
        if isinstance(message, Request):
            assert isinstance(message.body, Wire)
            self._serve_fetch(b, src, message.request_id, message.body)
        elif isinstance(message, Response):
            pending = b.pending.pop(message.request_id, None)
            if pending is not None:
                self._response(b, pending[0], pending[1], message.body)
        else:
            produce, partition = message
            self._serve_produce(b, produce, partition)

    def _request_failed(self, b: Broker, kind: str, context: Any) -> None:
        if kind == "register":
            b.registering = False
            b.next_registration_ms = self.now + REGISTRATION_BACKOFF_MS
        elif kind == "heartbeat":
            b.heartbeat_in_flight = False
        elif kind == "metadata":
            b.metadata_in_flight = False
        elif kind == "fetch":
            b.fetching.discard(context.leader_id)
            b.manager.on_fetch_failed(context, self.now)
        else:
            self._alter_partition_answer(b, context, ErrorCode.REQUEST_TIMED_OUT)

    def _response(self, b: Broker, kind: str, context: Any, body: Any) -> None:
        if kind == "register":
            b.registering = False
            if body.error_code == ErrorCode.NONE:
                b.broker_epoch = body.broker_epoch
                b.next_heartbeat_ms = self.now
            else:
                b.next_registration_ms = self.now + REGISTRATION_BACKOFF_MS
        elif kind == "heartbeat":
            b.heartbeat_in_flight = False
        elif kind == "metadata":
            b.metadata_in_flight = False
            start, records = body
            if records and start == b.image.offset + 1:
                for i, record in enumerate(records):
                    b.image.replay(record, start + i)
                if self._acts(b):
                    self._apply_image(b)
        elif kind == "fetch":
            b.fetching.discard(context.leader_id)
            self._fetch_answer(b, context, FetchResponse.decode(body.payload, FETCH_VERSION))
        else:
            self._alter_partition_answer(b, context, body)

    def _alter_partition_answer(
        self,
        b: Broker,
        send: AlterPartitionSend[LocalPartition],
        answer: AlterPartitionResponse | ErrorCode,
    ) -> None:
        if b.manager.on_alter_partition_result(send, answer, self.now):
            r = b.replicas[send.partition.index]
            if r.local is send.partition:
                self._complete_waiters(r)

    # -- metadata: roles

    def _apply_image(self, b: Broker) -> None:
        topic = b.image.topics_by_name[TOPIC]
        for p, partition in sorted(topic.partitions.items()):
            if b.broker_id not in partition.replicas:
                continue
            r = b.replicas.get(p)
            if r is None:
                log = PartitionLog.create(b.disk, log_dir(p), LOG_CONFIG, self.now, TOPIC_ID)
                r = b.replicas[p] = Replica(p, self._local_partition(p, log, self.now))
                b.state.partitions[(TOPIC, p)] = r.local
            registration = registration_of(partition)
            # The old role hands its high watermark over to the new one.
            high_watermark = r.high_watermark
            if r.leader is not None:
                outcome = r.leader.on_registration(registration)
                if outcome.action is not RegistrationAction.OBSOLETE:
                    if outcome.change.recheck_acks:
                        self._complete_waiters(r)
                    continue
                self._fail_waiters(r)
                r.local.leader_state = None
            elif r.follower is not None:
                action = r.follower.on_registration(registration)
                if action is not FollowerRegistrationAction.OBSOLETE:
                    continue
                r.local.follower_state = None
            self._new_role(b, r, registration, high_watermark)

    def _new_role(
        self, b: Broker, r: Replica, registration: PartitionRegistration, high_watermark: int
    ) -> None:
        """As ``ReplicationService.new_role``: a new LocalPartition role for a new epoch."""
        local = r.local
        local.leader_epoch = registration.leader_epoch
        if registration.leader == b.broker_id:
            # The local log assigns the new epoch at its end before leading in it.
            if r.log.epochs.latest_epoch() < registration.leader_epoch:
                r.log.assign_leader_epoch(registration.leader_epoch)
            key = (r.partition, registration.leader_epoch)
            first = self.leader_of_epoch.setdefault(key, b.broker_id)
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
                replica_lag_time_max_ms=self.config.replica_lag_time_max_ms,
                now_ms=self.now,
                flush_before_ack=local.flush_before_ack,
            )
            local.follower_state = None
            local.follower_broker_epochs = {}
            self._note("leader", f"b{b.broker_id} p{r.partition} {registration}")
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

    # -- produce

    def _on_produce(self) -> None:
        if self.now < END_MS - 500:
            interval = self.config.produce_interval_ms
            self._schedule(self.now + self.rng.randint(1, 2 * interval), "produce", ())
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
        self._schedule(
            self.now + delay, "deliver", (-1, leader, target.generation, (produce, partition))
        )
        self._schedule(self.now + PRODUCE_TIMEOUT_MS, "produce_timeout", (produce,))

    def _serve_produce(self, b: Broker, produce: Produce, partition: int) -> None:
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
        self._complete_waiters(r)
        self._wake_parked(b)

    def _complete_waiters(self, r: Replica) -> None:
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

    def _fail_waiters(self, r: Replica) -> None:
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

    # -- replica fetch

    def _serve_fetch(self, b: Broker, src: int, request_id: int, wire: Wire) -> None:
        """The leader's side: the shipped Fetch handler (``broker/fetch.py`` and
        ``broker/replica_fetch.py``, fetch sessions included) on this broker's state."""
        request = FetchRequest.decode(wire.payload, FETCH_VERSION)
        b.state.now_ms = b.state.monotonic_ms = self.now
        header = RequestHeader(
            request_api_key=FetchRequest.API_KEY,
            request_api_version=FETCH_VERSION,
            correlation_id=request_id,
            client_id=f"replica-{src}",
        )
        self._fetch_outcome(b, src, request_id, handle_fetch(b.state, header, request))

    def _fetch_outcome(self, b: Broker, src: int, request_id: int, outcome: Outcome) -> None:
        if isinstance(outcome, Reply):
            self._send(
                b.broker_id, src, Response(request_id, Wire(outcome.response.encode(FETCH_VERSION)))
            )
            return
        assert isinstance(outcome, AwaitData), outcome
        b.parked.append(ParkedFetch(src, request_id, outcome))

    def _replication_changed(self, b: Broker, generation: int, key: tuple[str, int]) -> None:
        """The shell's ``replication_changed``: answer acks=all waiters, wake long polls."""
        if b.generation != generation:
            return
        r = b.replicas.get(key[1])
        if r is not None:
            self._complete_waiters(r)
        self._wake_parked(b)

    def _wake_parked(self, b: Broker) -> None:
        if b.parked:
            self._schedule(self.now, "wake_fetches", (b.broker_id, b.generation))

    def _on_wake_fetches(self, broker_id: int, generation: int) -> None:
        """New data or a new high watermark: the held fetches try again, as the shell's
        long polls wake (those still without news go on waiting)."""
        b = self.brokers[broker_id]
        if not b.alive or b.generation != generation or b.paused:
            return
        self._retry_parked(b, timed_out=False)
        self._check_broker(b)

    def _expire_parked(self, b: Broker) -> None:
        if any(self.now >= p.outcome.deadline_ms for p in b.parked):
            self._retry_parked(b, timed_out=True)

    def _retry_parked(self, b: Broker, timed_out: bool) -> None:
        parked, b.parked = b.parked, []
        b.state.now_ms = b.state.monotonic_ms = self.now
        for held in parked:
            expired = timed_out and self.now >= held.outcome.deadline_ms
            outcome = held.outcome.then(expired)
            self._fetch_outcome(b, held.src, held.request_id, outcome)

    def _fetch_answer(
        self, b: Broker, plan: FetchPlan[LocalPartition], response: FetchResponse
    ) -> None:
        """The follower's side: the replica manager decides, this carries it out."""
        for item in b.manager.on_fetch_response(plan, response, self.now):
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
                    r.log.append_as_follower(memoryview(raw), self.now)
                    r.local.on_replicated(raw)
                    r.sync()
                    r.flush_due_ms = self.now + self.rng.randint(0, self.config.max_flush_delay_ms)
                b.manager.on_appended(item.follower, item.data)
            elif action is FollowerAction.TRUNCATE:
                self._truncate(
                    b, r, decision.offset, decision.below_high_watermark, decision.reason
                )
            else:
                raise AssertionError(f"truncate fully without retention: {decision}")

    def _truncate(self, b: Broker, r: Replica, offset: int, below_hw: bool, why: str) -> None:
        committed = self.committed[r.partition]
        dropped = [
            o for o in range(offset, r.log.log_end_offset) if committed.get(o) == r.entries[o]
        ]
        if dropped:
            now = self.controller_image.topics_by_name[TOPIC].partitions[r.partition]
            if b.broker_id in now.isr or b.broker_id in now.eligible_leader_replicas:
                self._violation(
                    f"b{b.broker_id} p{r.partition} truncation to {offset} ({why}) drops "
                    f"committed records {dropped[0]}..{dropped[-1]}"
                )
            else:
                self.stale_truncations += 1
        if below_hw:
            self.truncated_below_hw += 1
            self._violation(f"b{b.broker_id} p{r.partition} truncates below its hw: {why}")
            r.last_hw = min(r.last_hw, offset)
        self._note("truncate", f"b{b.broker_id} p{r.partition} to {offset}: {why}")
        r.log.truncate_to(offset, self.now, f"replication: {why}")
        r.local.on_truncated(self.now)
        r.sync()
        r.checked_upto = min(r.checked_upto, offset)

    # -- faults

    def _on_nemesis(self) -> None:
        if self.now >= FAULTS_END_MS:
            return
        if self.scenario == "seed000":
            self._seed000_start()
            return
        interval = self.config.nemesis_interval_ms
        self._schedule(self.now + self.rng.randint(interval // 2, 2 * interval), "nemesis", ())
        actions = sorted(self.config.nemesis)
        action = self.rng.choices(actions, [self.config.nemesis[a] for a in actions])[0]
        getattr(self, "_fault_" + action)()

    def _partition_for(self, duration_ms: int) -> None:
        self._note("partition", self.network.description)
        self._schedule(self.now + duration_ms, "heal", (self.network.cut,))

    def _on_heal(self, cut: frozenset[tuple[int, int]]) -> None:
        if self.network.cut == cut:
            self.network.heal()
            self._note("heal", "")

    def _fault_partition(self) -> None:
        ids = [CONTROLLER, *self.broker_ids]
        self.rng.shuffle(ids)
        shape = self.rng.choice(("alone", "split", "bridge", "one_way"))
        if shape == "alone":
            self.network.isolate(ids[0])
        elif shape == "split":
            cut = self.rng.randint(1, len(ids) - 1)
            self.network.split(ids[:cut], ids[cut:])
        elif shape == "bridge":
            cut = self.rng.randint(1, len(ids) - 2)
            self.network.bridge(ids[:cut], ids[cut], ids[cut + 1 :])
        else:
            self.network.split([ids[0]], ids[1:], one_way=True)
        self._partition_for(self.rng.randint(200, 3000))

    def _fault_leader_from_followers(self) -> None:
        """Seed 000's first step: the leader loses its followers but not the controller."""
        leader = self.leader_of(self.rng.randrange(self.config.partitions))
        if leader == NO_LEADER:
            return
        self.network.split([leader], [b for b in self.broker_ids if b != leader])
        self._partition_for(self.rng.randint(200, 3000))

    def _fault_from_controller(self) -> None:
        broker = self.rng.choice(self.broker_ids)
        self.network.split([broker], [CONTROLLER])
        self._partition_for(self.rng.randint(200, 3000))

    def _fault_crash(self) -> None:
        alive = [i for i in self.broker_ids if self.brokers[i].alive]
        if not alive:
            return
        b = self.brokers[self.rng.choice(alive)]
        b.alive = False
        for _, r in sorted(b.replicas.items()):
            lost = r.log.log_end_offset - r.flushed
            self._note("crash", f"b{b.broker_id} p{r.partition}: {lost} unflushed")
        # What the disk kept of the unflushed writes is SimDisk's to decide (per file:
        # nothing, all, or a prefix, a torn write); the logs recover from what is there.
        b.disk.crash()
        for p, r in sorted(b.replicas.items()):
            log = PartitionLog.open(b.disk, log_dir(p), LOG_CONFIG, self.now)
            r.local = self._local_partition(p, log, self.now)
            r.forget_process()
            r.entries = []
            r.sync()
        self._schedule(self.now + self.rng.randint(50, 2500), "restart", (b.broker_id,))

    def _fault_controller_failover(self) -> None:
        """The active controller dies; another is elected after a while. The metadata log
        is the Raft-replicated one (committed records survive, every request in flight
        is lost); the new controller knows no broker session and starts them all now."""
        if self.controller_down:
            return
        self.controller_down = True
        self._note("controller down", "")
        self._schedule(self.now + self.rng.randint(100, 2500), "controller_up", ())

    def _on_controller_up(self) -> None:
        self.controller = QuorumControllerState(
            self.controller_image,
            cluster_id=CLUSTER_ID,
            activated_ms=self.now,
            session_timeout_ms=self.config.session_timeout_ms,
        )
        self.controller_down = False
        self._note("controller up", "")

    def _fault_wipe(self) -> None:
        """A broker's disk is replaced: it crashes and comes back empty, with a new log
        directory id. Only where every committed record is durable on min.insync.replicas
        other brokers that a clean election may choose (a wipe beyond that is a loss or
        an outage no protocol prevents); what is under test is that no empty replica is
        then elected."""
        alive = [i for i in self.broker_ids if self.brokers[i].alive]
        spare = [i for i in alive if self._copies_elsewhere(i) >= self.config.min_insync_replicas]
        if not spare:
            return
        b = self.brokers[self.rng.choice(spare)]
        b.alive = False
        b.disk_number += 1
        b.disk = self._new_disk()
        b.image = MetadataImage()  # the metadata log was on the replaced disk too
        for p, r in sorted(b.replicas.items()):
            b.phantoms[p] = r.entries[: r.flushed]
            log = PartitionLog.create(b.disk, log_dir(p), LOG_CONFIG, self.now, TOPIC_ID)
            r.local = self._local_partition(p, log, self.now)
            r.entries = []
            r.hw_checkpoint = 0
            r.last_hw = r.checked_upto = 0
            r.forget_process()
        self._note("wipe", f"b{b.broker_id}")
        self._schedule(self.now + self.rng.randint(50, 2500), "restart", (b.broker_id,))

    def _copies_elsewhere(self, broker_id: int) -> int:
        """The fewest brokers other than ``broker_id`` holding any partition's committed
        records durably and electable: in the ISR or the eligible leader replicas in the
        controller's image. A copy on a broker outside both is one no clean election can
        use, so wiping the last electable one is a loss (or an outage) no protocol
        prevents."""
        fewest = len(self.broker_ids)
        partitions = self.controller_image.topics_by_name[TOPIC].partitions
        for p, end in self.committed_end.items():
            if end == 0:
                continue
            last = self.committed[p][end - 1]
            electable = {*partitions[p].isr, *partitions[p].eligible_leader_replicas}
            holders = sum(
                1
                for other_id, other in self.brokers.items()
                if other_id != broker_id
                and other_id in electable
                and (r := other.replicas.get(p)) is not None
                and r.flushed >= end
                and r.entries[end - 1] == last
            )
            fewest = min(fewest, holders)
        return fewest

    def _on_restart(self, broker_id: int) -> None:
        b = self.brokers[broker_id]
        if not b.alive:
            self._start(b)
            self._note("restart", f"b{broker_id}")

    def _fault_pause(self) -> None:
        running = [
            i for i in self.broker_ids if self.brokers[i].alive and not self.brokers[i].paused
        ]
        if running:
            broker_id = self.rng.choice(running)
            self.brokers[broker_id].paused = True
            self._note("pause", f"b{broker_id}")
            self._schedule(self.now + self.rng.randint(100, 2500), "resume", (broker_id,))

    def _on_resume(self, broker_id: int) -> None:
        b = self.brokers[broker_id]
        if not b.alive or not b.paused:
            return
        b.paused = False
        held, b.held = b.held, []
        for src, message in held:
            if b.alive:
                self._broker_receive(b, src, message)
        self._check_broker(b)

    def _fault_slow(self) -> None:
        nodes = [CONTROLLER, *self.broker_ids]
        a, c = self.rng.sample(nodes, 2)
        slow = self.rng.randint(50, 400)
        for link in ((a, c), (c, a)):
            self.network.links[link] = (slow, self.network.links[link][1])
        self._note("slow", f"{a}<->{c} {slow} ms")
        self._schedule(self.now + self.rng.randint(200, 3000), "fast", (a, c))

    def _on_fast(self, a: int, c: int) -> None:
        for link in ((a, c), (c, a)):
            self.network.links[link] = self._normal_links[link]

    # -- the seed-000 scenario, step by step

    def _seed000_start(self) -> None:
        leader = self.leader_of(0)
        if leader == NO_LEADER:
            self._schedule(self.now + 200, "nemesis", ())
            return
        others = [b for b in self.broker_ids if b != leader]
        self.network.split([leader], others)
        self._note("seed000", f"leader {leader} cut from its followers {others}")
        # Long enough for the ISR to shrink to the leader now and then, not always.
        lag = self.config.replica_lag_time_max_ms
        at = self.now + self.rng.randint(lag // 2, 3 * lag)
        self._schedule(at, "seed000_isolate", (leader, self.network.cut))

    def _on_seed000_isolate(self, leader: int, cut: frozenset[tuple[int, int]]) -> None:
        if self.network.cut != cut:
            return
        self.network.isolate(leader)
        self._note("seed000", f"leader {leader} cut from the controller too")
        session = self.config.session_timeout_ms
        at = self.now + self.rng.randint(session // 2, 3 * session)
        self._schedule(at, "seed000_heal", (self.network.cut,))

    def _on_seed000_heal(self, cut: frozenset[tuple[int, int]]) -> None:
        if self.network.cut == cut:
            self.network.heal()
            self._note("seed000", "healed")
        self._schedule(self.now + self.rng.randint(300, 1500), "nemesis", ())

    def _on_heal_all(self) -> None:
        self.network.heal()
        self.network.faults = Faults(
            max_base_ms=self.network.faults.max_base_ms,
            max_jitter_ms=self.network.faults.max_jitter_ms,
        )
        self.network.links = dict(self._normal_links)
        if self.controller_down:
            self._on_controller_up()
        for _, b in sorted(self.brokers.items()):
            if not b.alive:
                self._start(b)
            elif b.paused:
                self._on_resume(b.broker_id)
        self._note("heal all", "")

    # -- checks

    def _check_broker(self, b: Broker) -> None:
        if not b.alive:
            return
        for _, r in sorted(b.replicas.items()):
            hw = r.high_watermark
            if hw < r.last_hw:
                self._violation(f"b{b.broker_id} p{r.partition} high watermark {r.last_hw} -> {hw}")
            r.last_hw = hw
            committed = self.committed[r.partition]
            entries = r.entries
            for offset in range(r.checked_upto, min(hw, len(entries))):
                known = committed.setdefault(offset, entries[offset])
                if known != entries[offset]:
                    self._violation(
                        f"b{b.broker_id} p{r.partition} has {entries[offset]} at {offset} "
                        f"below its high watermark {hw}, where {known} was committed"
                    )
            r.checked_upto = max(r.checked_upto, min(hw, len(entries)))
            if r.checked_upto > self.committed_end[r.partition]:
                self.committed_end[r.partition] = r.checked_upto

    def _check_durable(self) -> None:
        for p, end in self.committed_end.items():
            if end == 0:
                continue
            last = self.committed[p][end - 1]
            holders = [
                b.broker_id for _, b in sorted(self.brokers.items()) if _holds(b, p, end, last)
            ]
            if len(holders) < self.config.min_insync_replicas:
                self._violation(
                    f"p{p} committed record {end - 1} {last} is durable on {holders} only"
                )
                self.committed_end[p] = 0  # reported once; the map is no longer the truth

    def _finish(self) -> None:
        for p, history in sorted(self.histories.items()):
            leader_id = self.leader_of(p)
            assert leader_id != NO_LEADER, f"p{p} has no leader at the end"
            leader_replica = self.brokers[leader_id].replicas[p]
            leader = leader_replica.leader
            assert leader is not None and not leader.is_obsolete, (
                f"p{p}: broker {leader_id} does not lead at the end"
            )
            log = leader_replica.entries
            for replica in self.controller_image.topics_by_name[TOPIC].partitions[p].replicas:
                other = self.brokers[replica].replicas[p].entries
                assert other == log, f"p{p}: replica {replica} differs from leader {leader_id}"
            assert history.acknowledged, f"p{p}: nothing acknowledged"
            read = enumerate(value for _, value in log[: leader.high_watermark])
            self.results[p] = check(history, read)
        late = [v for h in self.histories.values() for v in h.acknowledged if v in self.late]
        assert late, "no produce acknowledged after the quiet period"
        if self.strict:
            bad = {p: r.summary() for p, r in self.results.items() if not r.valid}
            assert not bad, f"checker: {bad}"

    # -- the failure report

    def _report(self, error: BaseException) -> str:
        cfg = self.config
        lines = [
            f"replication simulation failed: {type(error).__name__}: {error}",
            f"seed {self.seed}, scenario {self.scenario}, unsafe {cfg.unsafe}, "
            f"at {self.now} ms after {self.events} events",
            f"replay: pytest tests/replication/test_simulation.py -k 'seed-{self.seed}]'"
            " (set ODRADEK_REPL_SIM_SEEDS above the seed if it is beyond the CI range)",
            f"config: {cfg}",
            f"partition now: {self.network.description}",
            "brokers now:",
        ]
        for _, b in sorted(self.brokers.items()):
            state = "crashed" if not b.alive else ("paused" if b.paused else "running")
            lines.append(f"  b{b.broker_id} {state} epoch={b.broker_epoch} image={b.image.offset}")
            for _, r in sorted(b.replicas.items()):
                role = "leader" if r.leader else ("follower" if r.follower else "-")
                lines.append(
                    f"    p{r.partition} {role} hw={r.high_watermark} "
                    f"log={r.log.log_end_offset} flushed={r.flushed} "
                    f"epochs={r.log.epochs.entries()}"
                )
        lines.append("last events:")
        for at_ms, kind, text in self.trace:
            lines.append(f"  {at_ms:>6} {kind} {str(text)[:300]}")
        return "\n".join(lines)


def _holds(b: Broker, partition: int, end: int, last: tuple[int, str]) -> bool:
    """Whether ``b`` durably holds ``partition``'s records up to ``end`` (ending in
    ``last``), on its disk or on the disk a wipe took from it."""
    r = b.replicas.get(partition)
    if r is not None:
        log = r.local.log  # read once: this runs after every event, for every broker
        if log.recovery_point >= end and log.log_end_offset >= end and r.entries[end - 1] == last:
            return True
    phantom = b.phantoms.get(partition, [])
    return len(phantom) >= end and phantom[end - 1] == last


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
