"""What one seed of :mod:`odradek.testing.replication_sim` runs with: the
simulated cluster's timings (scaled down from Kafka's defaults so that a run takes
seconds of simulated time), and the swarm's choice of faults and rates for a seed.

``swarm`` draws from the simulation's generator in a fixed order, and the actions added
later from a generator of their own, so that every seed keeps the history it had."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

from odradek.testing.sim_network import Faults

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
