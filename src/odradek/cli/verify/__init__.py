"""``odradek verify``: check on real processes that nothing acknowledged is lost.

The command runs in two processes. The outer one (this module) checks that it may
(root, ``ip``, ``nft``), creates a network namespace ``odradek-verify-<pid>``, runs the
inner one inside it (``ip netns exec``, the same command with ``--inside-namespace``),
and removes the namespace afterwards, killing anything still running in it: after a
normal end, a safety anomaly, a crash, Ctrl-C or SIGTERM. The inner one
(:mod:`odradek.cli.verify.runner`) does the run.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from types import FrameType

import click

from odradek.cli.extras import needs_extra
from odradek.cli.verify import netns
from odradek.verify.nemesis import SCENARIOS

__all__ = ["verify"]


@click.command()
@click.option(
    "--scenario",
    type=click.Choice(sorted(SCENARIOS)),
    default="seed-000",
    show_default=True,
    help="Which faults: " + "; ".join(f"{s.name}: {s.about}" for s in SCENARIOS.values()),
)
@click.option("--seed", default=0, show_default=True, help="Seed of the fault schedule.")
@click.option(
    "--time", "time_s", default=30.0, show_default=True, help="Seconds of the fault phase."
)
@click.option("--nodes", default=3, show_default=True, help="Brokers.")
@click.option(
    "--controllers",
    type=int,
    default=None,
    help="Controller-only nodes holding the quorum; 0: the brokers are combined nodes "
    "and hold it themselves. [default: 3 for seed-000, which needs them; else 0]",
)
@click.option(
    "--unsafe",
    is_flag=True,
    help="Run with min.insync.replicas=1 and unclean.leader.election.enable=true.",
)
@click.option(
    "--security",
    type=click.Choice(["plaintext", "sasl_ssl"]),
    default="plaintext",
    show_default=True,
    help="sasl_ssl: every listener SASL_SSL with a CA made for the run, PLAIN for the "
    "nodes, SCRAM-SHA-512 (bootstrapped with --add-scram) for the workload's clients.",
)
@click.option(
    "--workload",
    type=click.Choice(["unique", "keyed"]),
    default="unique",
    show_default=True,
    help="keyed: the writers update a few keys of a compacted topic while the log cleaner "
    "runs, and the final read must hold every key's last acknowledged value or a later one.",
)
@click.option(
    "--json", "json_path", type=click.Path(dir_okay=False), help="Write the verdict here too."
)
@click.option(
    "--report",
    "report_dir",
    type=click.Path(file_okay=False),
    help="Report folder [default: verify-report/SCENARIO-seedN-TIME].",
)
@click.option("--inside-namespace", hidden=True, default=None)
def verify(
    scenario: str,
    seed: int,
    time_s: float,
    nodes: int,
    controllers: int | None,
    unsafe: bool,
    security: str,
    workload: str,
    json_path: str | None,
    report_dir: str | None,
    inside_namespace: str | None,
) -> None:
    """Run a cluster of real nodes under faults and check what clients saw.

    Needs root: the nodes run in a network namespace of their own on 127.0.0.x, where
    nftables rules cut links between them. Writers produce unique values with acks=all,
    a consumer group polls and commits, a nemesis injects the scenario's faults on a
    schedule from the seed, then everything is healed and one reader reads every
    partition. Prints a summary; exit status 1 on any safety anomaly (lost, duplicated,
    inconsistent offsets, non-monotonic or skipping polls, aborted reads) or a node that
    ended by itself where no fault stops it, 2 when the run could not be made. The
    clock-jump faults need libfaketime (Debian package faketime).
    """
    # The runner needs the verify extra (confluent-kafka, matplotlib); it is imported
    # here, not at the top, so that every other command works without it.
    with needs_extra("odradek verify"):
        from odradek.cli.verify.runner import RunOptions, run_inside

    scenario_def = SCENARIOS[scenario]
    if nodes < 1:
        raise click.UsageError("--nodes must be 1 or more")
    if controllers is None:
        # Combined nodes let the writers be idempotent producers (see docs/verify.md), so
        # a duplicate is the cluster's doing, never a client's retry.
        controllers = 3 if scenario_def.needs_separate_controllers else 0
    if scenario_def.needs_separate_controllers and controllers == 0:
        raise click.UsageError(
            f"{scenario} cuts a leader from its followers but not from the controller "
            "quorum, which needs controller-only nodes: use --controllers 1 or more"
        )
    quorum_size = controllers or nodes
    if quorum_size < scenario_def.needs_controllers:
        raise click.UsageError(
            f"{scenario} needs {scenario_def.needs_controllers} controllers or more"
        )
    if report_dir is None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        report_dir = f"verify-report/{scenario}-seed{seed}-{stamp}"
    report = Path(report_dir).resolve()
    opts = RunOptions(
        scenario=scenario,
        seed=seed,
        time_s=time_s,
        brokers=nodes,
        controllers=controllers,
        unsafe=unsafe,
        security=security,
        workload=workload,
        report_dir=report,
        json_path=None if json_path is None else Path(json_path).resolve(),
    )
    if inside_namespace is not None:
        try:
            sys.exit(run_inside(opts))
        except KeyboardInterrupt:
            click.echo("verify: interrupted; nodes stopped", err=True)
            sys.exit(130)
        except Exception as e:
            # The run could not be made (a node did not start, a topic was not created):
            # status 2, never 1, which means a safety anomaly.
            traceback.print_exc()
            click.echo(f"verify: the run failed: {e}", err=True)
            sys.exit(2)
    missing = netns.missing_requirements(scenario)
    if missing:
        raise click.ClickException(
            "odradek verify cannot run here; missing:\n  - " + "\n  - ".join(missing)
        )
    # The inner process gets this command line again, with the report folder fixed.
    sys.exit(_outer([*sys.argv[1:], "--report", str(report)]))


def _outer(argv: list[str]) -> int:
    """Create the namespace, run the inner process in it, always remove it."""
    netns.remove_stale()
    name = f"{netns.NAMESPACE_PREFIX}{os.getpid()}"
    netns.create(name)
    atexit.register(netns.remove, name)
    child: subprocess.Popen[bytes] | None = None

    def forward(signum: int, frame: FrameType | None) -> None:
        # A terminal's Ctrl-C reaches the inner process too (one process group); a
        # SIGTERM to this one is passed on. Either way the inner run stops its nodes.
        if child is not None and child.poll() is None:
            child.send_signal(signal.SIGTERM)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        child = subprocess.Popen(
            ["ip", "netns", "exec", name, sys.executable, "-m", "odradek", *argv,
             "--inside-namespace", name],
        )  # fmt: skip
        while True:
            try:
                return child.wait()
            except KeyboardInterrupt:
                continue
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        netns.remove(name)
