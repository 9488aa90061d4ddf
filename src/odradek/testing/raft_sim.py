"""The deterministic simulator of a KRaft quorum: production ``RaftNode`` cores, simulated
everything else.

One thread, one priority queue of events ordered by (time ms, sequence number), one
``random.Random(seed)`` from which every choice and every child generator (each node's
election jitter) is drawn. Nothing reads the wall clock. A seed replays byte for byte;
the seed also picks the scenario (``SCENARIOS[seed % len(SCENARIOS)]``) and, swarm
style, which faults are on and how often.

What is modelled
================

* **Nodes**: the production :class:`~odradek.raft.core.RaftNode` and a driver that does
  what the real one must with every ``Ready``: make ``persist`` durable (a per-node copy
  of the quorum-state file), then send the messages, then apply the snapshot and the
  committed entries to a tiny state machine (a hash chain over the committed sequence).
  A ``Ready.flush`` goes to the node's disk, which completes flushes in order after a
  latency the seed picks (up to ``flush_max_ms``); only then is the log durable and the
  core told (``RaftNode.flushed``). Nodes tick every ``TICK_MS``.
* **Network** (:mod:`odradek.testing.sim_network`): per-link delays, drop, duplicate,
  reorder; partitions (a node alone, two groups, one-way, a bridge); messages to a
  process that restarted since they were sent are lost (the connection died), and so
  are the answers to messages from one. Bootstrap destinations (negative) go to the
  bootstrap voters.
* **Disk** (:mod:`odradek.testing.sim_raft_log`): a crash keeps what was flushed (and,
  when the seed says so, a random prefix of the rest); a crash while flushes are in
  flight loses what they were to make durable, so the checks below prove that nothing
  acknowledged or counted depended on an unflushed entry. Snapshots and the quorum
  state written through ``Ready.persist`` are durable.
* **Processes**: crash and restart (a new ``RaftNode`` from the durable log and quorum
  state, same directory id), pause and resume (messages wait, ticks stop), wipe (a new
  disk formatted without voters: a new directory id, the node comes back an observer).
* **Clients**: proposals of unique payloads to the leader at random times; voter changes
  through the leader's API (add a caught-up observer, remove a voter, dead slots of wiped
  voters first); snapshots taken at random committed offsets so that lagging and wiped
  nodes need FetchSnapshot.

Invariants
==========

After every event: at most one leader per epoch over the whole run; a replica's epoch
never decreases (across restarts too) and its high watermark never decreases within a
process lifetime; every entry below a node's high watermark equals the one in the global
committed map; every state machine sees the same hash chain, snapshots included; no log
ever drops an entry equal to a committed one; the latest committed entry is held durably
by a majority of every voter set in force (the committed one and every leader's; with a
wiped voter in the set, by enough live voters to meet every majority that can still
vote); a leader's log holds at most one uncommitted voter change. At the end, after
healing, restarting everything and a quiet period: exactly one leader, every node's high
watermark equals the leader's, and every proposal made after the quiet period committed.

The scenarios, the swarm configuration and the state machine are in
:mod:`odradek.testing.raft_swarm`.

A violation raises :class:`SimulationFailure` (an ``AssertionError``) naming the seed, the
time, the command that replays it and the last events.
"""

from __future__ import annotations

import heapq
import random
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from odradek.protocol.record_batch import (
    ControlType,
)
from odradek.raft.core import RaftNode, State
from odradek.raft.log import Entry
from odradek.raft.messages import Message, bootstrap_index
from odradek.raft.ready import LogFlush, QuorumState, Ready
from odradek.raft.snapshot import BOOTSTRAP_SNAPSHOT_ID, bootstrap_snapshot
from odradek.raft.voters import ZERO_DIRECTORY, Voter, VoterEndpoint, VoterSet
from odradek.testing.raft_swarm import DRIVERS, SCENARIOS, Config, StateMachine, swarm
from odradek.testing.sim_network import Faults, SimNetwork
from odradek.testing.sim_raft_log import NoFlushRaftLog, SimRaftLog

TICK_MS = 20
ELECTION_TIMEOUT_MS = 500
FETCH_TIMEOUT_MS = 1000
FETCH_MAX_WAIT_MS = 200
REQUEST_TIMEOUT_MS = 200
FAULTS_END_MS = 12_000  # faults and voter changes stop; everything heals and restarts
STABLE_MS = FAULTS_END_MS + 4_000  # after the quiet period: proposals must commit
END_MS = STABLE_MS + 3_000

_ALL = 1 << 62


class SimulationFailure(AssertionError):
    """A broken invariant, with the seed and the way to replay it."""


# ---------------------------------------------------------------------- processes


@dataclass
class Process:
    """One node: its disk (log, quorum state) survives a crash, the rest does not."""

    node_id: int
    directory_id: uuid.UUID
    log: SimRaftLog
    quorum: QuorumState | None = None  # the durable quorum-state file
    node: RaftNode | None = None  # None while crashed
    generation: int = 0  # bumped by every start: messages to an older one are lost
    paused: bool = False
    held: list[tuple[int, int, Message]] = field(default_factory=list)  # src, its gen
    held_flushes: list[LogFlush] = field(default_factory=list)  # done while paused
    flush_done_ms: int = 0  # when the last flush handed to the disk completes
    machine: StateMachine = field(default_factory=StateMachine)
    max_epoch: int = 0  # over every lifetime of this directory
    last_hw: int = 0  # within this lifetime
    checked_upto: int = 0

    @property
    def running(self) -> RaftNode | None:
        return None if self.paused else self.node


# ---------------------------------------------------------------------- the simulation


class Simulation:
    def __init__(self, seed: int, scenario: str | None = None, driver: str = "correct") -> None:
        if driver not in DRIVERS:
            raise ValueError(f"unknown driver {driver!r}")
        self.seed = seed
        self.scenario = scenario or SCENARIOS[seed % len(SCENARIOS)]
        self.driver = driver
        self.rng = random.Random(seed)
        self.config = swarm(seed, self.scenario, self.rng)
        self.now = 0
        self._queue: list[tuple[int, int, str, tuple[Any, ...]]] = []
        self._seq = 0
        self.trace: deque[tuple[int, str, tuple[Any, ...]]] = deque(maxlen=40)
        cfg = self.config
        self.voter_ids = list(range(1, cfg.voters + 1))
        ids = list(range(1, cfg.voters + cfg.observers + 1))
        self.network = SimNetwork(random.Random(self.rng.getrandbits(64)), ids, cfg.network)
        self.procs: dict[int, Process] = {}
        for i in ids:
            self.procs[i] = Process(i, self._new_directory(), self._new_log())
        initial = [self._voter(self.procs[i]) for i in self.voter_ids]
        self.initial_voters = (
            VoterSet.of(initial) if cfg.dynamic else VoterSet.static(self.voter_ids)
        )
        # The global view the checks compare against.
        self.committed: dict[int, Entry] = {}
        self.committed_end = 0
        self.committed_last: Entry | None = None
        self.committed_voters = self.initial_voters
        self.digests: dict[int, bytes] = {0: b""}
        self.leader_of_epoch: dict[int, int] = {}
        self.proposals: list[tuple[int, int, int, bytes]] = []  # time, node, offset, payload
        self.voter_changes: list[tuple[int, str, int]] = []  # time, change, error
        for i in ids:
            p = self.procs[i]
            if cfg.dynamic:
                voters = self.initial_voters if i in self.voter_ids else None
                p.log.write_snapshot(BOOTSTRAP_SNAPSHOT_ID, bootstrap_snapshot(voters))
            self._start(p)
        self.snapshots_installed = 0
        self.crashes_before_flush = 0  # crashes that lost a flush in flight
        self.events = 0
        self._schedule(0, "client_propose", ())
        self._schedule(self.rng.randint(0, cfg.nemesis_interval_ms), "nemesis", ())
        if cfg.membership_interval_ms is not None:
            self._schedule(cfg.membership_interval_ms, "client_membership", ())
        if cfg.snapshot_interval_ms is not None:
            self._schedule(cfg.snapshot_interval_ms, "client_snapshot", ())
        self._schedule(FAULTS_END_MS, "heal_all", ())

    # -- building blocks

    def _new_directory(self) -> uuid.UUID:
        return uuid.UUID(int=self.rng.getrandbits(128))

    def _new_log(self) -> SimRaftLog:
        log = NoFlushRaftLog() if self.driver == "no_flush" else SimRaftLog()
        log.on_drop = self._on_drop
        return log

    def _voter(self, p: Process) -> Voter:
        endpoint = VoterEndpoint("CONTROLLER", f"node{p.node_id}", 9000 + p.node_id)
        return Voter(p.node_id, p.directory_id, (endpoint,))

    def _start(self, p: Process) -> None:
        cfg = self.config
        p.generation += 1
        p.paused = False
        p.held = []
        p.held_flushes = []
        p.node = RaftNode(
            p.node_id,
            p.log,
            random.Random(self.rng.getrandbits(64)),
            self.now,
            directory_id=p.directory_id,
            static_voters=None if cfg.dynamic else self.initial_voters,
            bootstrap_servers=len(self.voter_ids) if cfg.dynamic else 0,
            election_timeout_ms=ELECTION_TIMEOUT_MS,
            fetch_timeout_ms=FETCH_TIMEOUT_MS,
            quorum_state=p.quorum,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
            fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
        )
        p.machine = StateMachine()
        snapshot = p.log.latest_snapshot()
        if snapshot is not None:
            data = p.log.read_snapshot(snapshot)
            assert data is not None
            p.machine.load(snapshot, data)
        p.last_hw = p.node.high_watermark
        p.checked_upto = p.node.high_watermark
        self._check(p)
        self._schedule(self.now + self.rng.randrange(1, TICK_MS + 1), "tick", (p.node_id,))

    def _schedule(self, at_ms: int, kind: str, args: tuple[Any, ...]) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at_ms, self._seq, kind, args))

    def _destination(self, to: int) -> int:
        index = bootstrap_index(to)
        return self.voter_ids[index] if index is not None else to

    def _send(self, src: int, to: int, message: Message) -> None:
        dst = self._destination(to)
        target = self.procs.get(dst)
        if target is None or target.node is None:
            return  # no process to connect to
        source = self.procs[src].generation
        for delay in self.network.delays(src, dst):
            self._schedule(
                self.now + delay, "deliver", (src, source, dst, target.generation, message)
            )

    def leaders(self) -> list[RaftNode]:
        return [
            p.node
            for _, p in sorted(self.procs.items())
            if p.node is not None and p.node.state is State.LEADER
        ]

    def _client_leader(self) -> RaftNode | None:
        """The leader a client reaches: the running one of the highest epoch."""
        running = [p.running for _, p in sorted(self.procs.items())]
        leaders = [n for n in running if n is not None and n.state is State.LEADER]
        return max(leaders, key=lambda n: n.epoch) if leaders else None

    # -- the driver: what a real process does with a Ready

    def _handle(self, p: Process, ready: Ready, dead_link: int | None = None) -> None:
        if ready.persist is not None:
            if self.driver == "late_persist":
                # Broken on purpose: the quorum state reaches the disk after the messages.
                delay = self.rng.randint(1, 100)
                self._schedule(
                    self.now + delay, "persist", (p.node_id, p.generation, ready.persist)
                )
            else:
                p.quorum = ready.persist
        for to, message in ready.messages:
            if dead_link is not None and self._destination(to) == dead_link:
                # The answer to a message from a process that has restarted since it
                # sent it: the connection it came on died with that process.
                continue
            self._send(p.node_id, to, message)
        if ready.flush is not None:
            self._flush(p, ready.flush)
        if ready.snapshot is not None:
            data = p.log.read_snapshot(ready.snapshot)
            assert data is not None, f"installed snapshot {ready.snapshot} not in the log"
            p.machine.load(ready.snapshot, data)
            self.snapshots_installed += 1
        for entry in ready.committed:
            p.machine.apply(entry)
        for offset, error in ready.voter_changes:
            self.voter_changes.append((self.now, f"node {p.node_id} offset {offset}", error))
        self._check(p)
        if ready.flush is not None and self.driver == "early_flushed" and p.node is not None:
            # Broken on purpose: the core hears "durable" before the disk is.
            self._handle(p, p.node.flushed(ready.flush, self.now))

    def _flush(self, p: Process, flush: LogFlush) -> None:
        """Hand the log's writes so far to the disk: one sync thread, so flushes
        complete in order, each some time after it was asked for."""
        mark = p.log.begin_flush()
        latency = self.rng.randint(0, self.config.flush_max_ms)
        p.flush_done_ms = max(p.flush_done_ms, self.now + latency)
        self._schedule(p.flush_done_ms, "flushed", (p.node_id, p.generation, mark, flush))

    # -- events

    def run(self) -> Simulation:
        try:
            while self._queue:
                at_ms, _, kind, args = heapq.heappop(self._queue)
                if at_ms > END_MS:
                    break
                self.now = at_ms
                self.events += 1
                self.trace.append((at_ms, kind, args))
                getattr(self, "_on_" + kind)(*args)
                self._check_durable_majority()
            self._check_end()
        except Exception as error:  # a core invariant, a check, or a simulator bug
            raise SimulationFailure(self._report(error)) from error
        return self

    def _on_tick(self, node_id: int) -> None:
        p = self.procs[node_id]
        if p.node is None:
            return  # crashed: the restart starts a new tick loop
        self._schedule(self.now + TICK_MS, "tick", (node_id,))
        if not p.paused:
            self._handle(p, p.node.tick(self.now))

    def _on_refused(self, node_id: int, dead: int) -> None:
        p = self.procs[node_id]
        if p.node is None or p.paused:
            return
        self._handle(p, p.node.leader_unreachable(dead, self.now))

    def _on_deliver(
        self, src: int, source: int, dst: int, generation: int, message: Message
    ) -> None:
        p = self.procs[dst]
        if p.node is None or p.generation != generation or not self.network.connected(src, dst):
            return
        if p.paused:
            p.held.append((src, source, message))
            return
        self._step(p, src, source, message)

    def _step(self, p: Process, src: int, source: int, message: Message) -> None:
        """Deliver ``message``, sent by ``src`` in its lifetime ``source``."""
        assert p.node is not None
        ready = p.node.step(message, src, self.now)
        self._handle(p, ready, src if self.procs[src].generation != source else None)

    def _on_flushed(self, node_id: int, generation: int, mark: int, flush: LogFlush) -> None:
        p = self.procs[node_id]
        if p.node is None or p.generation != generation:
            return  # crashed meanwhile: the flush never completed
        p.log.finish_flush(mark)
        if self.driver == "early_flushed":
            return  # it told the core long ago
        if p.paused:
            p.held_flushes.append(flush)  # the disk is done; the process hears of it later
            return
        self._handle(p, p.node.flushed(flush, self.now))

    def _on_persist(self, node_id: int, generation: int, state: QuorumState) -> None:
        p = self.procs[node_id]
        if p.generation == generation and p.node is not None:
            p.quorum = state

    def _on_client_propose(self) -> None:
        if self.now < END_MS - 1_000:
            self._schedule(
                self.now + self.rng.randint(1, 2 * self.config.propose_interval_ms),
                "client_propose",
                (),
            )
        leader = self._client_leader()
        if leader is None:
            return
        count = self.rng.randint(1, 3)
        payloads = [f"v{self.now}.{len(self.proposals)}.{i}".encode() for i in range(count)]
        offset = leader.propose(payloads, self.now)
        assert offset is not None
        self.proposals.append((self.now, leader.node_id, offset, payloads[0]))
        self._handle(self.procs[leader.node_id], leader.ready(self.now))

    def _on_client_membership(self) -> None:
        interval = self.config.membership_interval_ms
        assert interval is not None
        if self.now + interval < FAULTS_END_MS:
            self._schedule(self.now + self.rng.randint(1, 2 * interval), "client_membership", ())
        leader = self._client_leader()
        if leader is None:
            return
        voters = leader.voters
        dead = [v for v in voters if not self._live(v)]
        observers = [
            p
            for _, p in sorted(self.procs.items())
            if p.node is not None and p.node_id not in voters.ids
        ]
        if dead:
            change = f"remove dead {dead[0].node_id}"
            outcome = leader.remove_voter(dead[0].key, self.now)
        elif observers and (len(voters) < 3 or self.rng.random() < 0.5):
            chosen = self.rng.choice(observers)
            change = f"add {chosen.node_id}"
            outcome = leader.add_voter(self._voter(chosen), self.now)
        elif len(voters) >= 3 and not self._dead_slot_in_play():
            removed = self.rng.choice(list(voters))
            change = f"remove {removed.node_id}"
            outcome = leader.remove_voter(removed.key, self.now)
        else:
            return
        self.voter_changes.append((self.now, f"{change} on {leader.node_id}", outcome.error))
        self._handle(self.procs[leader.node_id], leader.ready(self.now))

    def _on_client_snapshot(self) -> None:
        interval = self.config.snapshot_interval_ms
        assert interval is not None
        if self.now + interval < FAULTS_END_MS:
            self._schedule(self.now + self.rng.randint(1, 2 * interval), "client_snapshot", ())
        running = [p for _, p in sorted(self.procs.items()) if p.running is not None]
        if not running:
            return
        p = self.rng.choice(running)
        assert p.node is not None
        start = p.log.start_offset()
        ends = sorted(e for e in p.machine.history if start < e <= p.node.high_watermark)
        if not ends:
            return
        end = self.rng.choice(ends)
        p.node.create_snapshot(end, [p.machine.history[end]], self.now)
        p.machine.history = {e: d for e, d in p.machine.history.items() if e >= end}
        self.trace.append((self.now, "snapshot", (p.node_id, end)))

    # -- faults

    def _on_nemesis(self) -> None:
        if self.now >= FAULTS_END_MS:
            return
        interval = self.config.nemesis_interval_ms
        self._schedule(self.now + self.rng.randint(interval // 2, 2 * interval), "nemesis", ())
        actions = sorted(self.config.nemesis)
        weights = [self.config.nemesis[a] for a in actions]
        action = self.rng.choices(actions, weights)[0]
        getattr(self, "_fault_" + action)()

    def _fault_crash(self, node_id: int | None = None) -> None:
        alive = [i for i, p in sorted(self.procs.items()) if p.node is not None]
        if node_id is None:
            if not alive:
                return
            node_id = self.rng.choice(alive)
        p = self.procs[node_id]
        if p.node is None:
            return
        lost = p.log.unflushed
        if p.flush_done_ms > self.now and lost:
            self.crashes_before_flush += 1
        p.node = None
        p.log = p.log.crashed(self.rng, self.config.keep_unflushed)
        p.log.on_drop = self._on_drop
        self.trace.append((self.now, "crashed", (node_id, f"{lost} unflushed operations")))
        self._schedule(self.now + self.rng.randint(50, 3000), "restart", (node_id,))
        # A dead process's host refuses or resets connections: the nodes it could reach
        # hear so (the shell's leader_unreachable), the others only time out.
        for other in sorted(self.procs):
            if other != node_id and self.network.connected(other, node_id):
                self._schedule(self.now + self.rng.randint(0, 20), "refused", (other, node_id))

    def _fault_kill_majority(self) -> None:
        leader = self._client_leader()
        voters = sorted((leader.voters if leader else self.committed_voters).ids)
        for node_id in self.rng.sample(voters, len(voters) // 2 + 1):
            self._fault_crash(node_id)

    def _on_restart(self, node_id: int) -> None:
        p = self.procs[node_id]
        if p.node is None:
            self._start(p)

    def _fault_pause(self) -> None:
        running = [i for i, p in sorted(self.procs.items()) if p.running is not None]
        if running:
            node_id = self.rng.choice(running)
            self.procs[node_id].paused = True
            self._schedule(self.now + self.rng.randint(100, 3000), "resume", (node_id,))

    def _on_resume(self, node_id: int) -> None:
        p = self.procs[node_id]
        if p.node is None or not p.paused:
            return
        p.paused = False
        flushes, p.held_flushes = p.held_flushes, []
        for flush in flushes:
            if p.node is not None:
                self._handle(p, p.node.flushed(flush, self.now))
        held, p.held = p.held, []
        for src, source, message in held:
            if p.node is not None:
                self._step(p, src, source, message)

    def _partition_for(self, duration_ms: int) -> None:
        self.trace.append((self.now, "partition", (self.network.description,)))
        self._schedule(self.now + duration_ms, "heal", (self.network.cut,))

    def _on_heal(self, cut: frozenset[tuple[int, int]]) -> None:
        if self.network.cut == cut:
            self.network.heal()

    def _fault_isolate_leader(self) -> None:
        leader = self._client_leader()
        node_id = leader.node_id if leader else self.rng.choice(sorted(self.procs))
        self.network.isolate(node_id)
        self._partition_for(self.rng.randint(300, 4000))

    def _fault_partition(self) -> None:
        ids = sorted(self.procs)
        self.rng.shuffle(ids)
        shape = self.rng.choice(("alone", "split", "bridge"))
        if shape == "alone":
            self.network.isolate(ids[0])
        elif shape == "split":
            cut = self.rng.randint(1, len(ids) - 1)
            self.network.split(ids[:cut], ids[cut:])
        elif len(ids) >= 3:
            cut = self.rng.randint(1, len(ids) - 2)
            self.network.bridge(ids[:cut], ids[cut], ids[cut + 1 :])
        self._partition_for(self.rng.randint(300, 4000))

    def _fault_one_way(self) -> None:
        ids = sorted(self.procs)
        leader = self._client_leader()
        node_id = leader.node_id if leader and self.rng.random() < 0.5 else self.rng.choice(ids)
        others = [i for i in ids if i != node_id]
        if self.rng.random() < 0.5:
            self.network.split([node_id], others, one_way=True)  # it cannot send
        else:
            self.network.split(others, [node_id], one_way=True)  # it cannot hear
        self._partition_for(self.rng.randint(300, 4000))

    def _fault_wipe(self) -> None:
        """A new disk: formatted without voters, under a new directory id."""
        candidates = [
            i
            for i, p in sorted(self.procs.items())
            if all(i not in v.ids or len(v) >= 3 for v in self._voter_sets_in_play())
        ]
        # Only with every voter set in agreement: a voter removed by an uncommitted change
        # never campaigns, and with a voter slot lost for good the others may need it
        # (a known limitation of the core, found by seed 80).
        settled = all(
            p.node is not None and p.node.voters == self.committed_voters
            for p in self.procs.values()
        )
        if not candidates or not settled or self._dead_slot_in_play():
            return
        p = self.procs[self.rng.choice(candidates)]
        p.node = None
        p.directory_id = self._new_directory()
        p.log = self._new_log()
        p.log.write_snapshot(BOOTSTRAP_SNAPSHOT_ID, bootstrap_snapshot(None))
        p.quorum = None
        p.max_epoch = 0
        self.trace.append((self.now, "wiped", (p.node_id, str(p.directory_id))))
        self._schedule(self.now + self.rng.randint(50, 2000), "restart", (p.node_id,))

    def _on_heal_all(self) -> None:
        self.network.heal()
        self.network.faults = Faults(
            max_base_ms=self.network.faults.max_base_ms,
            max_jitter_ms=self.network.faults.max_jitter_ms,
        )
        for _, p in sorted(self.procs.items()):
            if p.node is None:
                self._start(p)
            elif p.paused:
                self._on_resume(p.node_id)

    # -- checks

    def _live(self, voter: Voter) -> bool:
        """False for a voter slot whose disk was wiped (the replica is gone for good)."""
        p = self.procs.get(voter.node_id)
        return p is not None and voter.directory_id in (ZERO_DIRECTORY, p.directory_id)

    def _voter_sets_in_play(self) -> list[VoterSet]:
        sets = [self.committed_voters]
        sets += [p.node.voters for _, p in sorted(self.procs.items()) if p.node is not None]
        return sets

    def _dead_slot_in_play(self) -> bool:
        return any(not self._live(v) for s in self._voter_sets_in_play() for v in s)

    def _on_drop(self, entries: Sequence[Entry], why: str) -> None:
        for entry in entries:
            if self.committed.get(entry.offset) == entry:
                raise AssertionError(f"{why} drops committed entry {_entry(entry)}")

    def _check(self, p: Process) -> None:
        n = p.node
        if n is None:
            return
        if n.state is State.LEADER:
            first = self.leader_of_epoch.setdefault(n.epoch, n.node_id)
            assert first == n.node_id, f"two leaders in epoch {n.epoch}: {first} and {n.node_id}"
            self._check_voter_changes(n)
        assert n.epoch >= p.max_epoch, f"node {n.node_id} epoch {p.max_epoch} -> {n.epoch}"
        p.max_epoch = n.epoch
        hw = n.high_watermark
        assert hw >= p.last_hw, f"node {n.node_id} high watermark {p.last_hw} -> {hw}"
        p.last_hw = hw
        offset = max(p.checked_upto, n.log.start_offset())
        while offset < hw:
            entries = n.log.entries_from(offset, 256)
            assert entries, f"node {n.node_id} has no entry at {offset} below hw {hw}"
            for entry in entries:
                if entry.offset >= hw:
                    break
                self._commit(n.node_id, entry)
                offset = entry.next_offset
        p.checked_upto = hw
        m = p.machine
        assert m.applied_end == hw, f"node {n.node_id} applied to {m.applied_end}, hw {hw}"
        known = self.digests.setdefault(hw, m.digest)
        assert known == m.digest, f"node {n.node_id} state differs at {hw}"

    def _commit(self, node_id: int, entry: Entry) -> None:
        known = self.committed.setdefault(entry.offset, entry)
        assert known == entry, (
            f"node {node_id} has {_entry(entry)} below its high watermark where "
            f"{_entry(known)} was committed"
        )
        if entry.next_offset > self.committed_end:
            self.committed_end = entry.next_offset
            self.committed_last = entry
            if entry.control == ControlType.VOTERS:
                self.committed_voters = VoterSet.decode(entry.records[0])

    def _check_voter_changes(self, leader: RaftNode) -> None:
        # Entries below the leader's own high watermark are committed (checked above).
        changes = [
            e.offset
            for e in leader.log.entries_from(leader.high_watermark, _ALL)
            if e.control == ControlType.VOTERS and self.committed.get(e.offset) != e
        ]
        assert len(changes) <= 1, f"leader {leader.node_id} has voter changes at {changes}"

    def _holds(self, p: Process, last: Entry) -> bool:
        durable = p.log.durable
        snapshot = durable.latest_snapshot()
        if snapshot is not None and snapshot.end_offset >= last.next_offset:
            return True
        return durable.entry_at(last.offset) == last

    def _check_durable_majority(self) -> None:
        last = self.committed_last
        if last is None:
            return
        # The sets that can elect: the committed one and the newest leader's (a deposed
        # leader's uncommitted change will be truncated; it cannot win with it).
        sets = [self.committed_voters]
        leaders = self.leaders()
        if leaders:
            sets.append(max(leaders, key=lambda n: n.epoch).voters)
        for voters in sets:
            live = [v for v in voters if self._live(v)]
            holders = [v.node_id for v in live if self._holds(self.procs[v.node_id], last)]
            # Every majority that can still vote (a wiped voter never votes again) must
            # include a holder; for an odd-sized set of live voters that is a majority.
            need = len(live) - voters.majority + 1
            assert len(holders) >= need, (
                f"committed {_entry(last)} is durable on {holders} only, voters "
                f"{sorted(voters.ids)} (live {[v.node_id for v in live]})"
            )

    def _check_end(self) -> None:
        leaders = [n for n in self.leaders()]
        assert len(leaders) == 1, f"{len(leaders)} leaders at the end"
        (leader,) = leaders
        for _, p in sorted(self.procs.items()):
            assert p.node is not None
            assert p.node.high_watermark == leader.high_watermark, (
                f"node {p.node_id} high watermark {p.node.high_watermark}, leader "
                f"{leader.node_id} {leader.high_watermark}"
            )
        late = [x for x in self.proposals if x[0] >= STABLE_MS]
        assert late, "no proposal after the quiet period"
        for _, _, offset, payload in late:
            entry = self.committed.get(offset)
            assert entry is not None and entry.records[0] == payload, (
                f"proposal {payload!r} at {offset} not committed"
            )

    def _report(self, error: BaseException) -> str:
        lines = [
            f"raft simulation failed: {type(error).__name__}: {error}",
            f"seed {self.seed}, scenario {self.scenario}, driver {self.driver}, "
            f"at {self.now} ms after {self.events} events",
            f"replay: pytest tests/raft/test_simulation.py -k 'seed-{self.seed}]'"
            " (set ODRADEK_SIM_SEEDS above the seed if it is beyond the CI range)",
            f"config: {self.config}",
            f"partition now: {self.network.description}",
            "nodes now:",
        ]
        for _, p in sorted(self.procs.items()):
            n = p.node
            if n is None:
                lines.append(f"  {p.node_id} crashed")
                continue
            lines.append(
                f"  {p.node_id}{' (paused)' if p.paused else ''} {n.state.value} "
                f"epoch={n.epoch} leader={n.leader} hw={n.high_watermark} "
                f"log={n.log.start_offset()}..{n.log.end_offset()} "
                f"voters={sorted(n.voters.ids)} voter={n.is_voter}"
            )
        lines.append("last events:")
        for at_ms, kind, args in self.trace:
            lines.append(f"  {at_ms:>6} {kind} {_brief(args)}")
        return "\n".join(lines)


def _entry(entry: Entry) -> str:
    body = f"control {entry.control}" if entry.control is not None else list(entry.records)[:2]
    return f"{entry.offset}/{entry.epoch}:{body}"


def _brief(args: tuple[Any, ...]) -> str:
    text = " ".join(str(a) for a in args)
    return text if len(text) < 240 else text[:237] + "..."


def run_simulation(seed: int, scenario: str | None = None, driver: str = "correct") -> Simulation:
    """Run one seed; raise :class:`SimulationFailure` on a violation."""
    return Simulation(seed, scenario, driver).run()


__all__ = [
    "DRIVERS",
    "SCENARIOS",
    "Config",
    "Simulation",
    "SimulationFailure",
    "run_simulation",
]
