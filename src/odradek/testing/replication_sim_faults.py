"""The nemesis of :mod:`odradek.testing.replication_sim`: faults, and their healing.

Every ``nemesis_interval_ms`` or so the ``mix`` scenario draws one action from the
seed's weights (``FAULTS``): network partitions of several shapes, a leader cut from its
followers only, a broker cut from the controller only, crashes (SimDisk's power loss),
pauses, slow links, controller failovers and wiped disks. Each schedules its own end
(heal, restart, resume, fast, controller up). The ``seed000`` scenario replays Jepsen's
Kafka 0.8 case step by step instead. At ``FAULTS_END_MS`` everything heals
(``on_heal_all``) for the quiet period the final checks need."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from odradek.controller.controller import QuorumControllerState
from odradek.controller.image import NO_LEADER, MetadataImage
from odradek.storage.log import PartitionLog
from odradek.testing.replication_sim_broker_loop import broker_receive
from odradek.testing.replication_sim_checks import check_broker
from odradek.testing.replication_sim_config import (
    CLUSTER_ID,
    CONTROLLER,
    FAULTS_END_MS,
    TOPIC_ID,
)
from odradek.testing.sim_broker import (
    LOG_CONFIG,
    TOPIC,
    log_dir,
)
from odradek.testing.sim_network import Faults

if TYPE_CHECKING:
    from odradek.testing.replication_sim import Simulation


def on_nemesis(sim: Simulation) -> None:
    if sim.now >= FAULTS_END_MS:
        return
    if sim.scenario == "seed000":
        _seed000_start(sim)
        return
    interval = sim.config.nemesis_interval_ms
    sim.schedule(sim.now + sim.rng.randint(interval // 2, 2 * interval), "nemesis", ())
    actions = sorted(sim.config.nemesis)
    action = sim.rng.choices(actions, [sim.config.nemesis[a] for a in actions])[0]
    FAULTS[action](sim)


def _partition_for(sim: Simulation, duration_ms: int) -> None:
    sim.note("partition", sim.network.description)
    sim.schedule(sim.now + duration_ms, "heal", (sim.network.cut,))


def on_heal(sim: Simulation, cut: frozenset[tuple[int, int]]) -> None:
    if sim.network.cut == cut:
        sim.network.heal()
        sim.note("heal", "")


def _fault_partition(sim: Simulation) -> None:
    ids = [CONTROLLER, *sim.broker_ids]
    sim.rng.shuffle(ids)
    shape = sim.rng.choice(("alone", "split", "bridge", "one_way"))
    if shape == "alone":
        sim.network.isolate(ids[0])
    elif shape == "split":
        cut = sim.rng.randint(1, len(ids) - 1)
        sim.network.split(ids[:cut], ids[cut:])
    elif shape == "bridge":
        cut = sim.rng.randint(1, len(ids) - 2)
        sim.network.bridge(ids[:cut], ids[cut], ids[cut + 1 :])
    else:
        sim.network.split([ids[0]], ids[1:], one_way=True)
    _partition_for(sim, sim.rng.randint(200, 3000))


def _fault_leader_from_followers(sim: Simulation) -> None:
    """Seed 000's first step: the leader loses its followers but not the controller."""
    leader = sim.leader_of(sim.rng.randrange(sim.config.partitions))
    if leader == NO_LEADER:
        return
    sim.network.split([leader], [b for b in sim.broker_ids if b != leader])
    _partition_for(sim, sim.rng.randint(200, 3000))


def _fault_from_controller(sim: Simulation) -> None:
    broker = sim.rng.choice(sim.broker_ids)
    sim.network.split([broker], [CONTROLLER])
    _partition_for(sim, sim.rng.randint(200, 3000))


def _fault_crash(sim: Simulation) -> None:
    alive = [i for i in sim.broker_ids if sim.brokers[i].alive]
    if not alive:
        return
    b = sim.brokers[sim.rng.choice(alive)]
    b.alive = False
    for _, r in sorted(b.replicas.items()):
        lost = r.log.log_end_offset - r.flushed
        sim.note("crash", f"b{b.broker_id} p{r.partition}: {lost} unflushed")
    # What the disk kept of the unflushed writes is SimDisk's to decide (per file:
    # nothing, all, or a prefix, a torn write); the logs recover from what is there.
    b.disk.crash()
    for p, r in sorted(b.replicas.items()):
        log = PartitionLog.open(b.disk, log_dir(p), LOG_CONFIG, sim.now)
        r.local = sim.local_partition(p, log, sim.now)
        r.forget_process()
        r.entries = []
        r.sync()
    sim.schedule(sim.now + sim.rng.randint(50, 2500), "restart", (b.broker_id,))


def _fault_controller_failover(sim: Simulation) -> None:
    """The active controller dies; another is elected after a while. The metadata log
    is the Raft-replicated one (committed records survive, every request in flight
    is lost); the new controller knows no broker session and starts them all now."""
    if sim.controller_down:
        return
    sim.controller_down = True
    sim.note("controller down", "")
    sim.schedule(sim.now + sim.rng.randint(100, 2500), "controller_up", ())


def on_controller_up(sim: Simulation) -> None:
    sim.controller = QuorumControllerState(
        sim.controller_image,
        cluster_id=CLUSTER_ID,
        activated_ms=sim.now,
        session_timeout_ms=sim.config.session_timeout_ms,
    )
    sim.controller_down = False
    sim.note("controller up", "")


def _fault_wipe(sim: Simulation) -> None:
    """A broker's disk is replaced: it crashes and comes back empty, with a new log
    directory id. Only where every committed record is durable on min.insync.replicas
    other brokers that a clean election may choose (a wipe beyond that is a loss or
    an outage no protocol prevents); what is under test is that no empty replica is
    then elected."""
    alive = [i for i in sim.broker_ids if sim.brokers[i].alive]
    spare = [i for i in alive if _copies_elsewhere(sim, i) >= sim.config.min_insync_replicas]
    if not spare:
        return
    b = sim.brokers[sim.rng.choice(spare)]
    b.alive = False
    b.disk_number += 1
    b.disk = sim.new_disk()
    b.image = MetadataImage()  # the metadata log was on the replaced disk too
    for p, r in sorted(b.replicas.items()):
        b.phantoms[p] = r.entries[: r.flushed]
        log = PartitionLog.create(b.disk, log_dir(p), LOG_CONFIG, sim.now, TOPIC_ID)
        r.local = sim.local_partition(p, log, sim.now)
        r.entries = []
        r.hw_checkpoint = 0
        r.last_hw = r.checked_upto = 0
        r.forget_process()
    sim.note("wipe", f"b{b.broker_id}")
    sim.schedule(sim.now + sim.rng.randint(50, 2500), "restart", (b.broker_id,))


def _copies_elsewhere(sim: Simulation, broker_id: int) -> int:
    """The fewest brokers other than ``broker_id`` holding any partition's committed
    records durably and electable: in the ISR or the eligible leader replicas in the
    controller's image. A copy on a broker outside both is one no clean election can
    use, so wiping the last electable one is a loss (or an outage) no protocol
    prevents."""
    fewest = len(sim.broker_ids)
    partitions = sim.controller_image.topics_by_name[TOPIC].partitions
    for p, end in sim.committed_end.items():
        if end == 0:
            continue
        last = sim.committed[p][end - 1]
        electable = {*partitions[p].isr, *partitions[p].eligible_leader_replicas}
        holders = sum(
            1
            for other_id, other in sim.brokers.items()
            if other_id != broker_id
            and other_id in electable
            and (r := other.replicas.get(p)) is not None
            and r.flushed >= end
            and r.entries[end - 1] == last
        )
        fewest = min(fewest, holders)
    return fewest


def on_restart(sim: Simulation, broker_id: int) -> None:
    b = sim.brokers[broker_id]
    if not b.alive:
        sim.start(b)
        sim.note("restart", f"b{broker_id}")


def _fault_pause(sim: Simulation) -> None:
    running = [i for i in sim.broker_ids if sim.brokers[i].alive and not sim.brokers[i].paused]
    if running:
        broker_id = sim.rng.choice(running)
        sim.brokers[broker_id].paused = True
        sim.note("pause", f"b{broker_id}")
        sim.schedule(sim.now + sim.rng.randint(100, 2500), "resume", (broker_id,))


def on_resume(sim: Simulation, broker_id: int) -> None:
    b = sim.brokers[broker_id]
    if not b.alive or not b.paused:
        return
    b.paused = False
    held, b.held = b.held, []
    for src, message in held:
        if b.alive:
            broker_receive(sim, b, src, message)
    check_broker(sim, b)


def _fault_slow(sim: Simulation) -> None:
    nodes = [CONTROLLER, *sim.broker_ids]
    a, c = sim.rng.sample(nodes, 2)
    slow = sim.rng.randint(50, 400)
    for link in ((a, c), (c, a)):
        sim.network.links[link] = (slow, sim.network.links[link][1])
    sim.note("slow", f"{a}<->{c} {slow} ms")
    sim.schedule(sim.now + sim.rng.randint(200, 3000), "fast", (a, c))


def on_fast(sim: Simulation, a: int, c: int) -> None:
    for link in ((a, c), (c, a)):
        sim.network.links[link] = sim.normal_links[link]


def _seed000_start(sim: Simulation) -> None:
    leader = sim.leader_of(0)
    if leader == NO_LEADER:
        sim.schedule(sim.now + 200, "nemesis", ())
        return
    others = [b for b in sim.broker_ids if b != leader]
    sim.network.split([leader], others)
    sim.note("seed000", f"leader {leader} cut from its followers {others}")
    # Long enough for the ISR to shrink to the leader now and then, not always.
    lag = sim.config.replica_lag_time_max_ms
    at = sim.now + sim.rng.randint(lag // 2, 3 * lag)
    sim.schedule(at, "seed000_isolate", (leader, sim.network.cut))


def on_seed000_isolate(sim: Simulation, leader: int, cut: frozenset[tuple[int, int]]) -> None:
    if sim.network.cut != cut:
        return
    sim.network.isolate(leader)
    sim.note("seed000", f"leader {leader} cut from the controller too")
    session = sim.config.session_timeout_ms
    at = sim.now + sim.rng.randint(session // 2, 3 * session)
    sim.schedule(at, "seed000_heal", (sim.network.cut,))


def on_seed000_heal(sim: Simulation, cut: frozenset[tuple[int, int]]) -> None:
    if sim.network.cut == cut:
        sim.network.heal()
        sim.note("seed000", "healed")
    sim.schedule(sim.now + sim.rng.randint(300, 1500), "nemesis", ())


def on_heal_all(sim: Simulation) -> None:
    sim.network.heal()
    sim.network.faults = Faults(
        max_base_ms=sim.network.faults.max_base_ms,
        max_jitter_ms=sim.network.faults.max_jitter_ms,
    )
    sim.network.links = dict(sim.normal_links)
    if sim.controller_down:
        on_controller_up(sim)
    for _, b in sorted(sim.brokers.items()):
        if not b.alive:
            sim.start(b)
        elif b.paused:
            on_resume(sim, b.broker_id)
    sim.note("heal all", "")


# The nemesis' actions, by the names ``Config.nemesis`` weighs them under.
FAULTS: dict[str, Callable[[Simulation], None]] = {
    "partition": _fault_partition,
    "leader_from_followers": _fault_leader_from_followers,
    "from_controller": _fault_from_controller,
    "crash": _fault_crash,
    "pause": _fault_pause,
    "slow": _fault_slow,
    "controller_failover": _fault_controller_failover,
    "wipe": _fault_wipe,
}
