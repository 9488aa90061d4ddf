"""The checks of :mod:`odradek.testing.replication_sim`: the invariants after
every event, the final read judged like Jepsen's, and the report a failure prints.

``check_broker`` holds invariants 2 and 3 (a high watermark never falls; what lies below
it is the committed record), ``check_durable`` invariant 5 (the last committed record is
on min.insync.replicas disks); invariants 1 and 4 are checked where roles are built and
logs truncated (:mod:`odradek.testing.replication_sim_broker_loop`). ``finish`` runs
after the quiet period; ``report`` names the seed, how to replay it, the cluster's state
and the last events."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.controller.image import NO_LEADER
from odradek.testing.produce_history import check
from odradek.testing.sim_broker import (
    TOPIC,
    Broker,
)

if TYPE_CHECKING:
    from odradek.testing.replication_sim import Simulation


def check_broker(sim: Simulation, b: Broker) -> None:
    if not b.alive:
        return
    for _, r in sorted(b.replicas.items()):
        hw = r.high_watermark
        if hw < r.last_hw:
            sim.violation(f"b{b.broker_id} p{r.partition} high watermark {r.last_hw} -> {hw}")
        r.last_hw = hw
        committed = sim.committed[r.partition]
        entries = r.entries
        for offset in range(r.checked_upto, min(hw, len(entries))):
            known = committed.setdefault(offset, entries[offset])
            if known != entries[offset]:
                sim.violation(
                    f"b{b.broker_id} p{r.partition} has {entries[offset]} at {offset} "
                    f"below its high watermark {hw}, where {known} was committed"
                )
        r.checked_upto = max(r.checked_upto, min(hw, len(entries)))
        if r.checked_upto > sim.committed_end[r.partition]:
            sim.committed_end[r.partition] = r.checked_upto


def check_durable(sim: Simulation) -> None:
    for p, end in sim.committed_end.items():
        if end == 0:
            continue
        last = sim.committed[p][end - 1]
        holders = [b.broker_id for _, b in sorted(sim.brokers.items()) if _holds(b, p, end, last)]
        if len(holders) < sim.config.min_insync_replicas:
            sim.violation(f"p{p} committed record {end - 1} {last} is durable on {holders} only")
            sim.committed_end[p] = 0  # reported once; the map is no longer the truth


def finish(sim: Simulation) -> None:
    for p, history in sorted(sim.histories.items()):
        leader_id = sim.leader_of(p)
        assert leader_id != NO_LEADER, f"p{p} has no leader at the end"
        leader_replica = sim.brokers[leader_id].replicas[p]
        leader = leader_replica.leader
        assert leader is not None and not leader.is_obsolete, (
            f"p{p}: broker {leader_id} does not lead at the end"
        )
        log = leader_replica.entries
        for replica in sim.controller_image.topics_by_name[TOPIC].partitions[p].replicas:
            other = sim.brokers[replica].replicas[p].entries
            assert other == log, f"p{p}: replica {replica} differs from leader {leader_id}"
        assert history.acknowledged, f"p{p}: nothing acknowledged"
        read = enumerate(value for _, value in log[: leader.high_watermark])
        sim.results[p] = check(history, read)
    late = [v for h in sim.histories.values() for v in h.acknowledged if v in sim.late]
    assert late, "no produce acknowledged after the quiet period"
    if sim.strict:
        bad = {p: r.summary() for p, r in sim.results.items() if not r.valid}
        assert not bad, f"checker: {bad}"


def report(sim: Simulation, error: BaseException) -> str:
    cfg = sim.config
    lines = [
        f"replication simulation failed: {type(error).__name__}: {error}",
        f"seed {sim.seed}, scenario {sim.scenario}, unsafe {cfg.unsafe}, "
        f"at {sim.now} ms after {sim.events} events",
        f"replay: pytest tests/replication/test_simulation.py -k 'seed-{sim.seed}]'"
        " (set ODRADEK_REPL_SIM_SEEDS above the seed if it is beyond the CI range)",
        f"config: {cfg}",
        f"partition now: {sim.network.description}",
        "brokers now:",
    ]
    for _, b in sorted(sim.brokers.items()):
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
    for at_ms, kind, text in sim.trace:
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
