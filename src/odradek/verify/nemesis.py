"""The nemesis: which faults a scenario injects, and when, from a seed.

A schedule is a list of :class:`Fault` steps, each with a start and an end (its heal),
chosen from the seed alone, so the same seed gives the same schedule. A fault names its
target by role where the role is only known at run time: ``leader:P`` (the leader of
partition P when the fault starts), ``controller-leader``, ``same:K`` (the node that
fault K hit), or a node by id (``node:N``). The runner resolves those and carries the
fault out; this module decides nothing that needs the cluster.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from odradek.verify.topology import (
    BROKER_SESSION_TIMEOUT_MS,
    REPLICA_LAG_TIME_MAX_MS,
    Topology,
)

# Fault kinds.
ISOLATE_FROM_FOLLOWERS = "isolate-from-followers"  # a leader from the other brokers
ISOLATE = "isolate"  # a node from every other node and the clients
SPLIT = "split"  # two groups of nodes cut from each other
ONE_WAY = "one-way"  # a node's packets to every other node are dropped
LOSS = "loss"  # a share of the packets on a link (both ways) dropped
KILL = "kill"  # SIGKILL, restarted at the end
PAUSE = "pause"  # SIGSTOP, SIGCONT at the end
REMOVE_VOTER = "remove-voter"  # a controller removed from the voters, added back at the end
DISK_FULL = "disk-full"  # a broker's log dir fills up; grown again and restarted at the end
CLOCK_JUMP = "clock-jump"  # a node's wall clock jumps forward, and back at the end

WARMUP_S = 4.0
"""Writes before the first fault, so every partition has a leader and a history."""
SETTLE_S = 6.0
"""No new fault in the last seconds of the fault phase: recovery is measured apart."""
DISK_FULL_MIN_S = 8.0
"""A full disk lasts at least this long: the node fills it, reports it and stops."""


@dataclass(frozen=True, slots=True)
class Fault:
    index: int
    kind: str
    start: float
    end: float
    target: str
    group: tuple[int, ...] = ()
    """For a split: the node ids on one side (the target names nothing then)."""
    peer: str = ""
    """For packet loss: the other end of the link."""
    percent: int = 0
    jump_s: int = 0
    """For a clock jump: how far the wall clock jumps forward (it jumps back at the end)."""

    def describe(self) -> str:
        what = {
            ISOLATE_FROM_FOLLOWERS: f"isolate {self.target} from the other brokers",
            ISOLATE: f"isolate {self.target} from everyone",
            SPLIT: f"split nodes {list(self.group)} from the rest",
            ONE_WAY: f"drop packets from {self.target} to every other node",
            LOSS: f"drop {self.percent}% of packets between {self.target} and {self.peer}",
            KILL: f"SIGKILL {self.target}, restart at the end",
            PAUSE: f"SIGSTOP {self.target}, SIGCONT at the end",
            REMOVE_VOTER: f"remove controller {self.target} from the voters, add it back",
            DISK_FULL: f"fill the log dir of {self.target}, repair it and restart the node",
            CLOCK_JUMP: f"jump the wall clock of {self.target} {self.jump_s:+d} s, then back",
        }[self.kind]
        return f"#{self.index} {what} ({self.start:.1f}s-{self.end:.1f}s)"


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    about: str
    choices: tuple[str, ...]  # names of the fault makers below; empty for seed-000
    needs_separate_controllers: bool = False
    needs_controllers: int = 1

    @property
    def jumps_clocks(self) -> bool:
        """Its nodes run with a wall clock the nemesis can move (libfaketime)."""
        return "clock_jump" in self.choices


SCENARIOS = {
    s.name: s
    for s in (
        Scenario(
            "seed-000",
            "Jepsen's seed 000: a partition leader cut from its followers (its ISR shrinks "
            "to itself), then from everyone (the controller fences it and elects another)",
            (),
            needs_separate_controllers=True,
        ),
        Scenario("kill-leaders", "SIGKILL partition leaders and restart them", ("kill_leader",)),
        Scenario(
            "partition-random",
            "network partitions: a node alone, majority/minority splits, one-way cuts, "
            "a leader cut from its followers, packet loss on a link",
            ("isolate", "split", "one_way", "from_followers", "loss"),
        ),
        Scenario("pause-random", "SIGSTOP and SIGCONT random nodes", ("pause",)),
        Scenario(
            "controller-loss",
            "isolate and kill the active controller",
            ("isolate_controller", "kill_controller"),
        ),
        Scenario(
            "membership",
            "remove a controller voter and add it back, under load",
            ("remove_voter",),
            needs_controllers=3,
        ),
        Scenario(
            "disk-full",
            "a broker's log dir (with the metadata log) fills up: the node stops itself; "
            "the disk is repaired and the node restarted",
            ("disk_full",),
        ),
        Scenario(
            "clock-jump",
            "the active controller's wall clock jumps forward (by several broker sessions, "
            "or an hour), then back",
            ("clock_jump",),
        ),
        Scenario(
            "mixed",
            "every fault above, one at a time",
            (
                "kill_leader",
                "isolate",
                "split",
                "one_way",
                "from_followers",
                "loss",
                "pause",
                "isolate_controller",
                "kill_controller",
                "remove_voter",
                "disk_full",
                "clock_jump",
            ),
            needs_controllers=3,
        ),
    )
}


def schedule(
    scenario: str, seed: int, duration_s: float, topology: Topology, partitions: int
) -> list[Fault]:
    """The faults of ``scenario`` for a fault phase of ``duration_s`` seconds."""
    rng = random.Random(f"{scenario}:{seed}")
    if scenario == "seed-000":
        return _seed_000(rng)
    maker = _Maker(rng, topology, partitions, duration_s)
    faults: list[Fault] = []
    t = WARMUP_S
    last_start = max(duration_s - SETTLE_S, WARMUP_S + 1)
    choices = SCENARIOS[scenario].choices
    while t < last_start:
        end = min(t + rng.uniform(3.0, 8.0), duration_s - 1.0)
        fault = getattr(maker, rng.choice(choices))(len(faults), t, end)
        faults.append(fault)
        t = fault.end + rng.uniform(2.0, 5.0)
    return faults


def disk_nodes(faults: list[Fault]) -> set[int]:
    """The nodes whose log dir a fault of ``faults`` fills: they run on a disk of their
    own from the start, since a disk cannot be put under a running node."""
    return {int(f.target.removeprefix("node:")) for f in faults if f.kind == DISK_FULL}


def fault_phase_s(scenario: str, duration_s: float) -> float:
    """How long the fault phase of a run lasts: ``duration_s``, or as long as seed 000's
    two steps need."""
    if scenario == "seed-000":
        return max(duration_s, max(f.end for f in _seed_000(random.Random(0))) + 1.0)
    return duration_s


def _seed_000(rng: random.Random) -> list[Fault]:
    # Step 1 lasts long enough for the followers to fall out of the ISR (after
    # replica.lag.time.max.ms) and for the leader to acknowledge writes alone for a few
    # seconds; step 2 long enough for the controller to fence the leader (after
    # broker.session.timeout.ms) and elect another. The jitter keeps the seed meaningful.
    lag = REPLICA_LAG_TIME_MAX_MS / 1000
    session = BROKER_SESSION_TIMEOUT_MS / 1000
    step_1 = WARMUP_S
    step_2 = step_1 + 2.5 * lag + rng.uniform(0.0, 1.0)
    heal = step_2 + 2.5 * session + rng.uniform(0.0, 1.0)
    return [
        Fault(0, ISOLATE_FROM_FOLLOWERS, step_1, heal, "leader:0"),
        Fault(1, ISOLATE, step_2, heal, "same:0"),
    ]


class _Maker:
    """One method per fault a random scenario may choose."""

    def __init__(
        self, rng: random.Random, topology: Topology, partitions: int, duration_s: float
    ) -> None:
        self.rng = rng
        self.topology = topology
        self.partitions = partitions
        self.duration_s = duration_s

    def _any_node(self) -> str:
        return f"node:{self.rng.choice(self.topology.nodes).node_id}"

    def _leader(self) -> str:
        return f"leader:{self.rng.randrange(self.partitions)}"

    def kill_leader(self, i: int, start: float, end: float) -> Fault:
        return Fault(i, KILL, start, end, self._leader())

    def isolate(self, i: int, start: float, end: float) -> Fault:
        target = self._leader() if self.rng.random() < 0.5 else self._any_node()
        return Fault(i, ISOLATE, start, end, target)

    def split(self, i: int, start: float, end: float) -> Fault:
        ids = [n.node_id for n in self.topology.nodes]
        self.rng.shuffle(ids)
        minority = self.rng.randint(1, (len(ids) - 1) // 2 or 1)
        return Fault(i, SPLIT, start, end, "", group=tuple(sorted(ids[:minority])))

    def one_way(self, i: int, start: float, end: float) -> Fault:
        return Fault(i, ONE_WAY, start, end, self._leader())

    def from_followers(self, i: int, start: float, end: float) -> Fault:
        return Fault(i, ISOLATE_FROM_FOLLOWERS, start, end, self._leader())

    def loss(self, i: int, start: float, end: float) -> Fault:
        a, b = self.rng.sample(list(self.topology.nodes), 2)
        percent = self.rng.choice((20, 40, 60))
        return Fault(
            i, LOSS, start, end, f"node:{a.node_id}", peer=f"node:{b.node_id}", percent=percent
        )

    def pause(self, i: int, start: float, end: float) -> Fault:
        target = self._leader() if self.rng.random() < 0.5 else self._any_node()
        return Fault(i, PAUSE, start, min(end, start + 5.0), target)

    def isolate_controller(self, i: int, start: float, end: float) -> Fault:
        return Fault(i, ISOLATE, start, end, "controller-leader")

    def kill_controller(self, i: int, start: float, end: float) -> Fault:
        return Fault(i, KILL, start, end, "controller-leader")

    def disk_full(self, i: int, start: float, end: float) -> Fault:
        # A node by id, never by role: its disk must be in place before it starts.
        # The window is long enough for the disk to fill and the node to stop itself,
        # which it does once the controller has answered its report (ADR 0013).
        broker = self.rng.choice(self.topology.brokers).node_id
        end = min(max(end, start + DISK_FULL_MIN_S), self.duration_s - 1.0)
        return Fault(i, DISK_FULL, start, end, f"node:{broker}")

    def clock_jump(self, i: int, start: float, end: float) -> Fault:
        # Several broker sessions forward: before its timers ran on a monotonic clock,
        # the controller fenced every broker at once. An hour: past any timeout.
        session_s = BROKER_SESSION_TIMEOUT_MS // 1000
        jump_s = self.rng.choice((3 * session_s, 5 * session_s, 3600))
        return Fault(i, CLOCK_JUMP, start, end, "controller-leader", jump_s=jump_s)

    def remove_voter(self, i: int, start: float, end: float) -> Fault:
        if len(self.topology.controllers) < 3:
            return self.kill_controller(i, start, end)
        if self.rng.random() < 0.3:
            target = "controller-leader"
        else:
            target = f"node:{self.rng.choice(self.topology.controllers).node_id}"
        return Fault(i, REMOVE_VOTER, start, end, target)
