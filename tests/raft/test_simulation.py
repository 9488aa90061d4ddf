"""Deterministic simulation of KRaft quorums, through :mod:`odradek.testing.raft_sim`.

Every seed picks its scenario (``SCENARIOS[seed % 6]``: leader isolation, kill a
majority, voter changes under faults, snapshot transfer, one-way partitions, a mix) and,
swarm style, which faults are on and how often; the simulator checks the safety
invariants after every event and liveness at the end. A failure names its seed and the
command that replays it::

    pytest tests/raft/test_simulation.py -k 'seed-123]'

CI runs ``CI_SEEDS`` seeds (about half a minute). The long mode runs more:
``ODRADEK_SIM_SEEDS=5000 pytest tests/raft/test_simulation.py`` runs seeds 0..4999
(use it too to replay a seed beyond the CI range).

``REGRESSIONS`` keeps the seeds that found bugs, with what they found; they stay in the
run whatever the seed count.
"""

from __future__ import annotations

import os

import pytest

from odradek.testing.raft_sim import SCENARIOS, SimulationFailure, run_simulation

CI_SEEDS = 300
SEEDS_ENV = "ODRADEK_SIM_SEEDS"

REGRESSIONS = {
    0: "a fetcher at the leader's log start with another last epoch kept a diverged prefix",
    4: "followers of a leader learnt from a hint refused pre-votes: no leader ever again",
    5: "a voter removed while away asked pre-votes forever and never fetched",
    80: "wipe plus an uncommitted self-removal deadlocked the quorum (the sim avoids it)",
    101: "the same deadlock, from a leader that removed itself",
    365: "the durable-majority check must not use a deposed leader's voter set",
    1257: "the simulator answered a restarted replica's old fetches on its new connections",
    2447: "an observer that lost its leader mid snapshot asked for that snapshot forever",
}


def seeds() -> list[int]:
    count = int(os.environ.get(SEEDS_ENV, CI_SEEDS))
    return sorted(set(range(count)) | set(REGRESSIONS))


@pytest.mark.parametrize("seed", seeds(), ids=lambda s: f"seed-{s}")
def test_simulation(seed: int) -> None:
    sim = run_simulation(seed)
    assert sim.committed_end > 0, "nothing committed"


def test_every_scenario_commits_and_exercises_its_faults() -> None:
    """The CI seeds really do what they claim: snapshots get installed, voters change."""
    installed = changes = 0
    for seed in range(24):
        sim = run_simulation(seed)
        assert sim.scenario == SCENARIOS[seed % len(SCENARIOS)]
        installed += sim.snapshots_installed
        changes += sum(1 for _, _, error in sim.voter_changes if error == 0)
    assert installed > 0 and changes > 0


def test_a_seed_replays_exactly() -> None:
    first, second = run_simulation(7), run_simulation(7)
    assert (first.events, first.committed_end, first.now) == (
        second.events,
        second.committed_end,
        second.now,
    )
    assert first.committed == second.committed


def test_a_log_that_never_flushes_is_caught() -> None:
    """The checker can fail: a disk that loses everything it was told to flush."""
    with pytest.raises(SimulationFailure) as failure:
        run_simulation(0, driver="no_flush")
    message = str(failure.value)
    assert "is durable on [] only" in message
    assert "seed 0" in message and "-k 'seed-0]'" in message
    assert "last events:" in message


def test_a_driver_that_persists_after_sending_is_caught() -> None:
    """The checker can fail: quorum state written after the messages went out is lost
    by a crash, and the restarted node goes back to an older epoch (and may vote twice)."""
    failed = []
    for seed in range(1, 60, 6):  # kill_majority seeds: many crashes
        try:
            run_simulation(seed, driver="late_persist")
        except SimulationFailure as failure:
            failed.append((seed, str(failure)))
    assert failed, "the broken driver went unnoticed"
    assert any("epoch" in message for _, message in failed)


def test_crashes_lose_flushes_in_flight() -> None:
    """The disk completes flushes later, and the CI seeds crash nodes in that window: the
    invariants then prove that nothing counted or acknowledged depended on the tail the
    crash took away."""
    lost = sum(run_simulation(seed).crashes_before_flush for seed in range(1, 60, 6))
    assert lost > 0


def test_a_driver_that_reports_a_flush_before_the_disk_is_done_is_caught() -> None:
    """The checker can fail: a driver that tells the core "durable" when it asks for the
    flush lets the leader count entries a crash can still take away."""
    failed = []
    for seed in range(0, 12):
        try:
            run_simulation(seed, driver="early_flushed")
        except SimulationFailure as failure:
            failed.append(str(failure))
    assert failed, "the broken driver went unnoticed"
    assert any("is durable on" in message for message in failed)
