"""What the Raft simulator (:mod:`odradek.testing.raft_sim`) runs: the scenarios, the
swarm configuration a seed picks (which faults, how often, how slow the disk is), and the
tiny state machine every node applies its committed entries to.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field

from odradek.raft.log import Entry, SnapshotId
from odradek.raft.snapshot import decode_snapshot
from odradek.testing.sim_network import Faults

SCENARIOS = (
    "leader_isolation",
    "kill_majority",
    "membership",
    "snapshot_transfer",
    "one_way",
    "mix",
)
#: Correct, or deliberately broken to prove that the checker can fail.
DRIVERS = ("correct", "late_persist", "no_flush", "early_flushed")

NEMESIS = ("crash", "kill_majority", "pause", "isolate_leader", "partition", "one_way", "wipe")
SCENARIO_NEMESIS = {
    "leader_isolation": ("isolate_leader", ("crash", "pause")),
    "kill_majority": ("kill_majority", ("crash", "pause")),
    "membership": ("crash", ("partition", "pause", "wipe", "isolate_leader")),
    "snapshot_transfer": ("wipe", ("partition", "pause", "crash")),
    "one_way": ("one_way", ("crash", "isolate_leader")),
    "mix": ("partition", NEMESIS),
}


@dataclass(frozen=True)
class Config:
    """What the swarm picked for one seed."""

    seed: int
    scenario: str
    voters: int
    observers: int
    dynamic: bool
    network: Faults
    nemesis: dict[str, int]  # action -> weight
    nemesis_interval_ms: int
    propose_interval_ms: int
    membership_interval_ms: int | None
    snapshot_interval_ms: int | None
    keep_unflushed: bool
    flush_max_ms: int  # the disk's latency: a flush completes up to this long after


def swarm(seed: int, scenario: str, rng: random.Random) -> Config:
    main, extra = SCENARIO_NEMESIS[scenario]
    nemesis = {main: rng.randint(2, 5)}
    for action in extra:
        if rng.random() < 0.6:
            nemesis[action] = rng.randint(1, 3)
    dynamic = scenario in ("membership", "snapshot_transfer") or rng.random() < 0.75
    if not dynamic:
        nemesis.pop("wipe", None)  # a static voter cannot be told from a new disk
    membership = scenario == "membership" or (scenario == "mix" and rng.random() < 0.5)
    snapshots = scenario == "snapshot_transfer" or rng.random() < 0.5

    def sometimes(high: float) -> float:
        return rng.uniform(0, high) if rng.random() < 0.6 else 0.0

    return Config(
        seed=seed,
        scenario=scenario,
        voters=rng.choice((3, 3, 5)),
        observers=rng.randint(1, 2) if dynamic and (membership or snapshots) else 0,
        dynamic=dynamic,
        network=Faults(
            drop=sometimes(0.08),
            duplicate=sometimes(0.04),
            reorder=sometimes(0.05),
            max_base_ms=rng.randint(1, 10),
            max_jitter_ms=rng.randint(0, 30),
        ),
        nemesis=nemesis,
        nemesis_interval_ms=rng.randint(300, 1500),
        propose_interval_ms=rng.randint(50, 300),
        membership_interval_ms=rng.randint(200, 1000) if membership and dynamic else None,
        snapshot_interval_ms=rng.randint(150, 1000) if snapshots else None,
        keep_unflushed=rng.random() < 0.5,
        flush_max_ms=rng.choice((0, 5, 50, 200)),
    )


# ---------------------------------------------------------------------- the state machine


@dataclass
class StateMachine:
    """The committed sequence as a hash chain: ``history[end_offset]`` is the digest of
    everything below ``end_offset``; a snapshot holds one record, that digest."""

    applied_end: int = 0
    digest: bytes = b""
    history: dict[int, bytes] = field(default_factory=lambda: {0: b""})

    def load(self, snapshot_id: SnapshotId, data: bytes) -> None:
        records = decode_snapshot(data).records
        self.applied_end = snapshot_id.end_offset
        self.digest = records[0] if records else b""
        self.history = {self.applied_end: self.digest}

    def apply(self, entry: Entry) -> None:
        if entry.offset != self.applied_end:
            raise AssertionError(f"applied {entry.offset} after {self.applied_end}")
        h = hashlib.blake2b(self.digest, digest_size=16)
        h.update(f"{entry.offset}/{entry.epoch}/{entry.control}".encode())
        for record in entry.records:
            h.update(len(record).to_bytes(4, "big") + record)
        self.digest = h.digest()
        self.applied_end = entry.next_offset
        self.history[self.applied_end] = self.digest
