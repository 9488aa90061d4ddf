"""One verify run, inside the run's network namespace: start the nodes, run the
workload, carry out the nemesis schedule, heal, wait for recovery, read everything,
judge, and write the report. Every node is killed, the packet filter removed and every
disk of the run unmounted on the way out, whatever happened.

A node that ends by itself is recorded in the history as it happens (a watcher checks
every node a few times a second, and the nemesis before it starts a node again): as
the expected effect of its fault when it stopped itself because its disk was full,
otherwise as an anomaly."""

from __future__ import annotations

import json
import shutil
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import FrameType

import click

from odradek.cli.client import (
    ClientSettings,
    ClusterClient,
    ConnectionFailed,
    client_settings,
    parse_addresses,
)
from odradek.cli.cluster import HealthReport, gather_health
from odradek.cli.dev_cluster import (
    CLIENT_PROPERTIES,
    CONTROLLER_PROPERTIES,
    SecureSettings,
    secure_settings,
)
from odradek.cli.verify.clocks import set_offset
from odradek.cli.verify.disks import Disks
from odradek.cli.verify.netns import PacketFilter
from odradek.cli.verify.nodes import NodeProcess, NodeSet
from odradek.cli.verify.plot import timeline
from odradek.cli.verify.provenance import find_copies
from odradek.cli.verify.workload import (
    COMPACTED_TOPIC_CONFIGS,
    KEYS,
    TOPIC,
    GroupConsumer,
    Recorder,
    Security,
    Writer,
    admin_client,
    create_topic,
    final_read,
    leaders,
)
from odradek.shell.peer_client import PLAINTEXT, ClientSecurity
from odradek.verify import nemesis as n
from odradek.verify.checker import Verdict, final_read_of, judge
from odradek.verify.history import FAIL, INFO, INVOKE, NEMESIS, OK, Op, dumps
from odradek.verify.metadata_log import MetadataSummary, summarize
from odradek.verify.netrules import NetworkState, between, one_way
from odradek.verify.provenance import classify, duplicate_offsets
from odradek.verify.report import (
    Aftermath,
    RecordedLoss,
    anomalies_text,
    completions,
    fault_windows,
    recoveries,
    summary_table,
)
from odradek.verify.topology import CLIENT_ADDRESS, Topology

RECOVERY_TIMEOUT_S = 60.0
FINAL_READ_TIMEOUT_S = 60.0
ADD_VOTER_TIMEOUT_S = 30.0
RECORD_WAIT_S = 60.0
DISK_STOP_WAIT_S = 30.0
"""How long a node with a full disk has to stop itself before its disk is repaired
(it stops once the controller answers its report, or 10 s after it asked)."""
EXIT_CHECK_S = 0.2
METADATA_LOG = "__cluster_metadata-0"


@dataclass(frozen=True, slots=True)
class RunOptions:
    scenario: str
    seed: int
    time_s: float
    brokers: int
    controllers: int
    unsafe: bool
    report_dir: Path
    json_path: Path | None
    partitions: int = 3
    writers: int = 3
    consumers: int = 2
    security: str = "plaintext"
    """``plaintext``, or ``sasl_ssl``: every listener SASL_SSL (see :class:`Secured`)."""
    workload: str = "unique"
    """``unique`` values, or ``keyed``: updates of a few keys on a compacted topic."""


SECURITY_CHOICES = ("plaintext", "sasl_ssl")


@dataclass(frozen=True)
class Secured:
    """A run with ``--security sasl_ssl``: the nodes' keys and logins (a CA made for the
    run, each node's certificate naming its address, PLAIN for the nodes, SCRAM-SHA-512
    for the clients), the clients' settings in librdkafka's keys for the workload, and
    the same login for the ``odradek`` commands and ``cluster health``."""

    settings: SecureSettings
    client_config: Path  # for --command-config (broker listener, SCRAM)
    controller_config: Path  # for the quorum commands (controller listener, PLAIN)
    commands: ClientSecurity

    @staticmethod
    def make(topology: Topology, folder: Path) -> Secured:
        hosts = {node.node_id: (node.address,) for node in topology.nodes}
        settings = secure_settings(str(folder / "security"), hosts)
        client_config = folder / CLIENT_PROPERTIES
        controller_config = folder / CONTROLLER_PROPERTIES
        client_config.write_text(settings.client_properties(topology.bootstrap_servers))
        controllers = ",".join(n.controller_endpoint for n in topology.controllers)
        controller_config.write_text(settings.controller_properties(controllers))
        commands = client_settings(
            None, str(client_config), kind="broker", client_id="odradek-verify"
        ).security
        return Secured(settings, client_config, controller_config, commands)

    @property
    def workload(self) -> Security:
        return self.settings.librdkafka()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def say(text: str) -> None:
    click.echo(f"verify: {text}", err=True)


def run_inside(opts: RunOptions) -> int:
    """The run; its exit status: 0 valid, 1 a safety anomaly, 2 the run proved nothing
    (no final read, or nothing acknowledged)."""
    signal.signal(signal.SIGTERM, _interrupt)
    topology = Topology.plan(opts.brokers, opts.controllers)
    opts.report_dir.mkdir(parents=True, exist_ok=True)
    faults = n.schedule(
        opts.scenario, opts.seed, n.fault_phase_s(opts.scenario, opts.time_s), topology,
        opts.partitions,
    )  # fmt: skip
    for fault in faults:
        say(f"planned {fault.describe()}")
    exits = ExitBook()
    disks = Disks()
    packets = PacketFilter()
    nodes: NodeSet | None = None
    watcher: ExitWatcher | None = None
    recorder: Recorder | None = None
    recorded: RecordedLoss | None = None
    watches: list[HealthWatch] = []
    secured: Secured | None = None
    if opts.security == "sasl_ssl":
        secured = Secured.make(topology, opts.report_dir / "nodes")
        say(f"every listener SASL_SSL; clients log in with {secured.client_config}")
    security = None if secured is None else secured.workload
    commands = PLAINTEXT if secured is None else secured.commands
    try:
        packets.heal()
        nodes = NodeSet(
            topology, opts.report_dir / "nodes", opts.unsafe,
            disks=disks, disk_nodes=frozenset(n.disk_nodes(faults)),
            moving_clocks=n.SCENARIOS[opts.scenario].jumps_clocks, on_exit=exits.exited,
            security=None if secured is None else secured.settings,
            controller_config=None if secured is None else secured.controller_config,
        )  # fmt: skip
        say(f"starting {len(topology.nodes)} nodes in {opts.report_dir / 'nodes'}")
        nodes.start_all()
        keys = KEYS if opts.workload == "keyed" else None
        create_topic(
            topology.bootstrap_servers, opts.partitions, min(3, opts.brokers), 60, security,
            configs=COMPACTED_TOPIC_CONFIGS if keys else None,
        )  # fmt: skip
        recorder = Recorder()
        exits.recorder = recorder
        watcher = ExitWatcher(nodes)
        watcher.start()
        # Idempotence is on in combined mode; seed-000 (separate controllers) keeps the
        # non-idempotent writers its recorded runs used (docs/verify.md, "Known problems").
        idempotent = topology.combined
        writers = [
            Writer(
                i,
                topology.bootstrap_servers,
                opts.partitions,
                recorder,
                idempotent,
                security,
                keys=keys,
            )
            for i in range(opts.writers)
        ]
        consumers = [
            GroupConsumer(i, topology.bootstrap_servers, recorder, security)
            for i in range(opts.consumers)
        ]
        for thread in [*writers, *consumers]:
            thread.start()
        nemesis = Nemesis(
            topology, nodes, packets, recorder, opts.partitions, disks, exits, watches,
            security, commands,
        )  # fmt: skip
        nemesis.run(faults, n.fault_phase_s(opts.scenario, opts.time_s))
        healed_at = nemesis.heal_all()
        watches.append(
            HealthWatch(
                topology.bootstrap_servers, recorder, "cluster", "healthy",
                "healthy (cluster health) after the heal", healthy, commands,
            )
        )  # fmt: skip
        watches[-1].start()
        say(f"healed at {healed_at:.1f} s; waiting for every partition to take writes again")
        _wait_recovered(writers, opts.partitions, healed_at, recorder)
        produce_end = recorder.now()
        for thread in writers:
            thread.stopping.set()
        for thread in writers:
            thread.join(30)
        for thread in consumers:
            thread.stopping.set()
        for thread in consumers:
            thread.join(30)
        say("final read")
        final_read(
            topology.bootstrap_servers, opts.partitions, recorder, FINAL_READ_TIMEOUT_S, security
        )
        for watch in watches:
            watch.join(RECORD_WAIT_S)
        recorded = recorded_loss(topology.bootstrap_servers, commands)
    finally:
        # A second Ctrl-C (or the outer process's SIGTERM after the terminal's SIGINT)
        # must not cut the cleanup short.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if watcher is not None:
            watcher.stop()
        for watch in watches:
            watch.stopping.set()
        if nodes is not None:
            nodes.check_exits()  # an end not yet seen is recorded before the kills
            nodes.kill_all()
        packets.remove()
        disks.release()
    assert recorder is not None and nodes is not None  # the run got this far, or raised
    ops = recorder.snapshot()
    # The history first: if judging it fails, it is what shows why.
    (opts.report_dir / "history.jsonl").write_text(dumps(ops))
    verdict = judge(ops, n.WARMUP_S, produce_end)
    causes = duplicate_causes(ops, verdict.duplicated, nodes)
    if causes:
        (opts.report_dir / "duplicates.txt").write_text(
            "".join(f"{line}\n" for lines in causes.values() for line in lines[1])
        )
    recorded_causes = Counter(cause for cause, _ in causes.values())
    metadata = metadata_summary(nodes)
    aftermath = Aftermath(recorded, recorded_causes, metadata, recoveries(ops))
    _write_report(opts, verdict=verdict, faults=faults, recorder=recorder, aftermath=aftermath)
    if verdict.valid:
        # The nodes' data is evidence only when something went wrong (their quarantines
        # hold what a truncation removed); otherwise it is just disk space.
        for proc in nodes.procs.values():
            shutil.rmtree(proc.dir / "data", ignore_errors=True)
    click.echo(summary_table(verdict, opts.scenario, opts.seed, opts.unsafe, aftermath))
    click.echo(f"  report in {opts.report_dir}")
    if not verdict.final_read_complete:
        # Without the final read every acknowledged value would look lost.
        say("INCONCLUSIVE: the final read did not reach every partition's end")
        return 2
    if not verdict.valid:
        return 1
    if not verdict.conclusive:
        say("INCONCLUSIVE: nothing was acknowledged, so nothing could be lost")
        return 2
    return 0


class ExitBook:
    """Records each node process that ended by itself, as the fault's effect when its
    disk was full and it stopped itself for that reason, else as an anomaly."""

    def __init__(self) -> None:
        self.recorder: Recorder | None = None
        self.full_disks: set[int] = set()
        self._lock = threading.Lock()

    def exited(self, proc: NodeProcess, status: int, reason: str) -> None:
        node_id = proc.node.node_id
        with self._lock:
            # The node's own reason, as it logged it, tells a full disk's stop from a
            # crash that happened to come while its disk was full.
            expected = node_id in self.full_disks and reason.startswith("log dir")
        text = f"exit status {status}; " + (
            f"it logged: {reason}" if reason else "no reason logged"
        )
        say(f"node {node_id} ended by itself ({'its fault' if expected else 'UNEXPECTED'}): {text}")
        if self.recorder is not None:
            self.recorder.add(f"node-{node_id}", INFO if expected else FAIL, "exit", value=text)

    def disk_full(self, node_id: int, full: bool) -> None:
        with self._lock:
            if full:
                self.full_disks.add(node_id)
            else:
                self.full_disks.discard(node_id)


class ExitWatcher(threading.Thread):
    """Checks every node for an end a few times a second, so each is recorded when it
    happens, not only when the nemesis next touches the node."""

    def __init__(self, nodes: NodeSet) -> None:
        super().__init__(name="exit-watcher", daemon=True)
        self.nodes = nodes
        self._stopping = threading.Event()

    def run(self) -> None:
        while not self._stopping.wait(EXIT_CHECK_S):
            self.nodes.check_exits()

    def stop(self) -> None:
        self._stopping.set()
        self.join(10)


def metadata_summary(nodes: NodeSet) -> MetadataSummary | None:
    """The longest metadata log among the controllers' data dirs, summarized; None when
    none could be read. (Every voter's log holds every committed record; the longest
    one also holds the most recent.)"""
    best: MetadataSummary | None = None
    for proc in nodes.procs.values():
        if not proc.node.is_controller:
            continue
        segments = sorted((proc.dir / "data" / METADATA_LOG).glob("*.log"))
        try:
            summary = summarize(segment.read_bytes() for segment in segments)
        except (OSError, ValueError) as e:
            say(f"could not read the metadata log of {proc.node.name}: {e}")
            continue
        if best is None or summary.records > best.records:
            best = summary
    return best


def _wait_recovered(
    writers: list[Writer], partitions: int, healed_at: float, recorder: Recorder
) -> None:
    """Until every partition acknowledged a write after the heal (or the timeout)."""
    deadline = time.monotonic() + RECOVERY_TIMEOUT_S
    while time.monotonic() < deadline:
        latest = {p: max((w.last_ok.get(p, -1.0) for w in writers), default=-1.0)
                  for p in range(partitions)}  # fmt: skip
        if all(t > healed_at + 1.0 for t in latest.values()):
            break
        time.sleep(0.2)
    time.sleep(2.0)  # a little load on the recovered cluster before the writers stop


def duplicate_causes(
    ops: list[Op], duplicated: tuple[str, ...], nodes: NodeSet
) -> dict[str, tuple[str, list[str]]]:
    """``value -> (cause, report lines)`` for each duplicated value: which batch (producer
    id, epoch, sequence) wrote each copy, read from the nodes' logs."""
    final = final_read_of(ops) or {}
    data_dirs = [proc.dir / "data" for _, proc in sorted(nodes.procs.items())]
    causes: dict[str, tuple[str, list[str]]] = {}
    for value, (partition, offsets) in sorted(duplicate_offsets(final, duplicated).items()):
        found = find_copies(data_dirs, TOPIC, partition, value, offsets)
        copies = [found.get(o) for o in offsets]
        cause = classify(copies)
        lines = [f"{value} (partition {partition}): {cause}"]
        lines += [
            f"  offset {o}: "
            + (
                f"producer {c.producer_id} epoch {c.producer_epoch} sequence {c.sequence}"
                if c is not None
                else "not found"
            )
            for o, c in zip(offsets, copies, strict=True)
        ]
        causes[value] = (cause, lines)
    return causes


def recorded_loss(
    bootstrap_servers: str, security: ClientSecurity = PLAINTEXT
) -> RecordedLoss | None:
    """What the cluster itself recorded (``cluster health``): at once when it has no
    unclean election; otherwise once every partition is fully replicated again and
    every unclean election has a loss report, or after
    :data:`RECORD_WAIT_S`. A replica that dropped records fetches again only after the
    controller recorded its report, so a full ISR means a complete record; a returning
    replica may take a while to get there (its connections to the leaders time out
    first). None when no broker answers."""
    deadline = time.monotonic() + RECORD_WAIT_S
    while True:
        report = _health(bootstrap_servers, security)
        if report is None:
            return None
        elections = [e for _, e in report.unclean_elections]
        unreported = sum(1 for e in elections if e.estimated_lost is None)
        # Without an unclean election there is nothing a returning replica could add.
        settled = not elections or not (report.offline or report.under_replicated or unreported)
        if settled or time.monotonic() >= deadline:
            return RecordedLoss(
                unclean_elections=len(elections),
                dropped=sum(e.estimated_lost or 0 for e in elections),
                acknowledged_at_least=sum(e.acknowledged_lost or 0 for e in elections),
                unreported=unreported,
            )
        time.sleep(1.0)


def healthy(report: HealthReport) -> bool:
    """Nothing wrong but unclean elections, which stay on record until an operator
    acknowledges them: every partition fully replicated, none offline, no failed log
    dir on record, the quorum not stalled."""
    return not (
        report.offline
        or report.under_min_isr
        or report.under_replicated
        or report.offline_log_dirs
        or report.quorum.status == "stalled"
    )


def in_every_isr(node_id: int) -> Callable[[HealthReport], bool]:
    """Whether ``node_id`` is back in the ISR of every partition it holds, with no
    failed log dir on record."""

    def back(report: HealthReport) -> bool:
        alarms = (*report.offline, *report.under_min_isr, *report.under_replicated)
        if any(node_id in a.partition.replicas and node_id not in a.partition.isr for a in alarms):
            return False
        return all(broker != node_id for broker, _ in report.offline_log_dirs)

    return back


CLOCK_READ_S = 8.0
"""How long the nemesis waits for a node's wall clock to show a jump: libfaketime reads
the offset file again once its cache (FAKETIME_CACHE_DURATION=1) is more than a second
old, counted in whole seconds, at the process's next call for the time."""


def node_clock_offset(proc: NodeProcess, expected_s: int) -> float | None:
    """How far ahead of the real clock the node's wall clock is, as it stamps a log line
    (its SIGUSR1 handler logs its tasks), asked every half second until it is within 2 s
    of ``expected_s`` or :data:`CLOCK_READ_S` passed; the last reading, None when the
    node logged nothing. The run shows that a jump reached the process, not only the
    file."""
    log_file = proc.dir / "node.log"
    seen: float | None = None
    deadline = time.monotonic() + CLOCK_READ_S
    while time.monotonic() < deadline:
        time.sleep(0.5)
        start = log_file.stat().st_size
        proc.signal(signal.SIGUSR1)
        line_deadline = time.monotonic() + 2.0
        reading = None
        while reading is None and time.monotonic() < line_deadline:
            time.sleep(0.05)
            with open(log_file, "rb") as f:
                f.seek(start)
                new = f.read(4096).decode(errors="replace")
            now = time.time()
            for line in new.splitlines():
                try:
                    stamped = datetime.strptime(line[:19], "%Y-%m-%d %H:%M:%S").timestamp()
                except ValueError:
                    continue
                reading = float(round(stamped - now))
                break
        if reading is not None:
            seen = reading
            if abs(seen - expected_s) <= 2:
                return seen
    return seen


class HealthWatch(threading.Thread):
    """Asks ``cluster health`` twice a second until ``done`` holds for its answer (or
    :data:`RECORD_WAIT_S` passed), and records when, as ``ok`` (or ``fail``) of ``f``."""

    def __init__(
        self,
        bootstrap_servers: str,
        recorder: Recorder,
        process: str,
        f: str,
        what: str,
        done: Callable[[HealthReport], bool],
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        super().__init__(name=f"health-{process}", daemon=True)
        self.security = security
        self.bootstrap_servers = bootstrap_servers
        self.recorder = recorder
        self.process = process
        self.f = f
        self.what = what
        self.done = done
        self.stopping = threading.Event()

    def run(self) -> None:
        since = self.recorder.now()
        deadline = time.monotonic() + RECORD_WAIT_S
        while not self.stopping.is_set():
            report = _health(self.bootstrap_servers, self.security)
            if report is not None and self.done(report):
                took = round(self.recorder.now() - since, 1)
                self.recorder.add(
                    self.process, OK, self.f, value={"what": self.what, "after_s": took}
                )
                return
            if time.monotonic() >= deadline:
                self.recorder.add(self.process, FAIL, self.f, value={"what": self.what})
                return
            self.stopping.wait(0.5)


def _health(bootstrap_servers: str, security: ClientSecurity = PLAINTEXT) -> HealthReport | None:
    """``cluster health`` asked of any broker that answers; None when none does. A client
    of its own each time: its connections belong to the event loop of one call, and
    the watchers ask from threads of their own."""
    addresses = parse_addresses(bootstrap_servers, "bootstrap.servers")
    client = ClusterClient(ClientSettings(addresses, "odradek-verify", security=security))
    try:
        return client.run(lambda: gather_health(client))
    except ConnectionFailed:
        return None


def _write_report(
    opts: RunOptions,
    verdict: Verdict,
    faults: list[n.Fault],
    recorder: Recorder,
    aftermath: Aftermath,
) -> None:
    out = opts.report_dir
    ops = recorder.snapshot()
    (out / "anomalies.txt").write_text(anomalies_text(verdict, faults, fault_windows(ops)))
    result = {
        "scenario": opts.scenario,
        "seed": opts.seed,
        "unsafe": opts.unsafe,
        "brokers": opts.brokers,
        "controllers": opts.controllers,
        "security": opts.security,
        **verdict.to_json(),
        **aftermath.to_json(),
    }
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    if opts.json_path is not None:
        opts.json_path.write_text(json.dumps(result, indent=2) + "\n")
    (out / "summary.txt").write_text(
        summary_table(verdict, opts.scenario, opts.seed, opts.unsafe, aftermath) + "\n"
    )
    timeline(
        out / "timeline.png",
        completions(ops),
        fault_windows(ops),
        max((op.time for op in ops), default=1.0),
        f"odradek verify --scenario {opts.scenario} --seed {opts.seed}"
        + (" --unsafe" if opts.unsafe else "")
        + ("" if opts.security == "plaintext" else f" --security {opts.security}")
        + f": {'valid' if verdict.valid else 'INVALID'}",
    )


class Nemesis:
    """Carries out a schedule: resolves each fault's target when it starts, injects it,
    and undoes it at its end."""

    def __init__(
        self,
        topology: Topology,
        nodes: NodeSet,
        packets: PacketFilter,
        recorder: Recorder,
        partitions: int,
        disks: Disks,
        exits: ExitBook,
        watches: list[HealthWatch],
        security: Security | None = None,
        commands: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.topology = topology
        self.commands = commands
        self.nodes = nodes
        self.packets = packets
        self.recorder = recorder
        self.partitions = partitions
        self.disks = disks
        self.exits = exits
        self.watches = watches
        self.admin = admin_client(topology.bootstrap_servers, security)
        self.network = NetworkState()
        self.resolved: dict[int, int] = {}
        self.active: dict[int, tuple[n.Fault, int, str]] = {}
        self.removed_voters: set[int] = set()
        self._lock = threading.Lock()

    def _note(self, text: str) -> None:
        say(text)

    def run(self, faults: list[n.Fault], phase_s: float) -> None:
        events = sorted(
            [(f.start, 1, f) for f in faults] + [(f.end, 0, f) for f in faults],
            key=lambda e: (e[0], e[1], e[2].index),
        )
        for at, starting, fault in events:
            self._sleep_until(at)
            if starting:
                self._start(fault)
            elif fault.index in self.active:
                self._end(fault)
        self._sleep_until(phase_s)

    def _sleep_until(self, at: float) -> None:
        delay = at - self.recorder.now()
        if delay > 0:
            time.sleep(delay)

    def _resolve(self, target: str) -> int | None:
        kind, _, arg = target.partition(":")
        if kind == "node":
            return int(arg)
        if kind == "same":
            return self.resolved.get(int(arg))
        if kind == "leader":
            return leaders(self.admin, self.partitions).get(int(arg))
        if kind == "controller-leader":
            return self.nodes.controller_leader()
        raise ValueError(f"unknown target {target!r}")

    def _start(self, fault: n.Fault) -> None:
        address = {x.node_id: x.address for x in self.topology.nodes}
        if fault.kind == n.SPLIT:
            side = [address[i] for i in fault.group]
            rest = [a for i, a in address.items() if i not in fault.group]
            self.network.drops[fault.index] = between(side, rest)
            self._started(fault, 0, fault.describe())
            return
        node_id = self._resolve(fault.target)
        if node_id is None or node_id not in address:
            self._note(f"skipped {fault.describe()}: target not found")
            self.recorder.add(NEMESIS, FAIL, fault.kind, value=fault.describe(), error="no target")
            return
        self.resolved[fault.index] = node_id
        text = f"{fault.describe()} -> node {node_id}"
        own = address[node_id]
        others = [a for i, a in address.items() if i != node_id]
        if fault.kind == n.ISOLATE_FROM_FOLLOWERS:
            brokers = [b.address for b in self.topology.brokers if b.node_id != node_id]
            self.network.drops[fault.index] = between([own], brokers)
        elif fault.kind == n.ISOLATE:
            self.network.drops[fault.index] = between([own], [*others, CLIENT_ADDRESS])
        elif fault.kind == n.ONE_WAY:
            self.network.drops[fault.index] = one_way(own, others)
        elif fault.kind == n.LOSS:
            peer = self._resolve(fault.peer)
            if peer is None or peer not in address:
                self.recorder.add(NEMESIS, FAIL, fault.kind, value=text, error="no peer")
                return
            self.network.losses[fault.index] = (between([own], [address[peer]]), fault.percent)
        elif fault.kind == n.KILL:
            self.nodes.procs[node_id].kill()
        elif fault.kind == n.PAUSE:
            self.nodes.procs[node_id].pause()
        elif fault.kind == n.REMOVE_VOTER:
            error = self.nodes.remove_voter(node_id)
            if error is not None:
                self._note(f"{text}: {error}")
                self.recorder.add(NEMESIS, FAIL, fault.kind, value=text, error=error)
                return
            self.removed_voters.add(node_id)
        elif fault.kind == n.DISK_FULL:
            # Marked full first: the node may stop itself as soon as the disk shrinks.
            self.exits.disk_full(node_id, True)
            text += f" (its disk shrunk to {self.disks.fill(node_id)} bytes)"
        elif fault.kind == n.CLOCK_JUMP:
            proc = self.nodes.procs[node_id]
            if proc.clock_file is None:
                raise RuntimeError(f"node {node_id} runs without a clock that can jump")
            set_offset(proc.clock_file, fault.jump_s)
            seen = node_clock_offset(proc, fault.jump_s)
            text += " (its clock then read " + (
                "nothing: no log line" if seen is None else f"{seen:+.0f} s)"
            )
        self._started(fault, node_id, text)

    def _started(self, fault: n.Fault, node_id: int, text: str) -> None:
        self.packets.apply(self.network.ruleset())
        self._note(f"{self.recorder.now():.1f}s start {text}")
        self.recorder.add(NEMESIS, INVOKE, fault.kind, value=text)
        self.active[fault.index] = (fault, node_id, text)

    def _end(self, fault: n.Fault) -> None:
        _, node_id, text = self.active.pop(fault.index)
        self.network.heal(fault.index)
        self.packets.apply(self.network.ruleset())
        proc = self.nodes.procs.get(node_id)
        if fault.kind == n.KILL and proc is not None:
            proc.start()
        elif fault.kind == n.PAUSE and proc is not None:
            proc.resume()
        elif fault.kind == n.REMOVE_VOTER:
            self._add_back(node_id)
        elif fault.kind == n.DISK_FULL and proc is not None:
            self._repair_disk(proc)
        elif fault.kind == n.CLOCK_JUMP and proc is not None and proc.clock_file is not None:
            set_offset(proc.clock_file, 0)
        self._note(f"{self.recorder.now():.1f}s end {text}")
        self.recorder.add(NEMESIS, OK, fault.kind, value=text)

    def _repair_disk(self, proc: NodeProcess) -> None:
        """Once the node has stopped itself (or after :data:`DISK_STOP_WAIT_S`), grow its
        disk again and start it: it registers anew and must rejoin every ISR."""
        node_id = proc.node.node_id
        deadline = time.monotonic() + DISK_STOP_WAIT_S
        while proc.running and time.monotonic() < deadline:
            time.sleep(0.1)
        if proc.running:
            self._note(
                f"node {node_id} did not stop within {DISK_STOP_WAIT_S:.0f} s of its disk filling"
            )
            self.recorder.add(
                NEMESIS, INFO, n.DISK_FULL, value=node_id, error="the node did not stop"
            )
        proc.check_exit()  # recorded while its disk is still full
        self.disks.repair(node_id)
        self.exits.disk_full(node_id, False)
        if not proc.running:
            proc.start()
        watch = HealthWatch(
            self.topology.bootstrap_servers, self.recorder, proc.node.name, "rejoin",
            "back in every ISR after its restart on the repaired disk", in_every_isr(node_id),
            self.commands,
        )  # fmt: skip
        self.watches.append(watch)
        watch.start()

    def _add_back(self, node_id: int) -> None:
        deadline = time.monotonic() + ADD_VOTER_TIMEOUT_S
        error: str | None = "not tried"
        while time.monotonic() < deadline:
            error = self.nodes.add_voter(node_id)
            if error is None:
                self.removed_voters.discard(node_id)
                return
            time.sleep(1.0)
        self._note(f"could not add controller {node_id} back: {error}")
        self.recorder.add(NEMESIS, INFO, "add-voter", value=node_id, error=error)

    def heal_all(self) -> float:
        """End every fault still active, heal the network, resume and restart every node,
        and add back every removed voter; the time of the heal."""
        for index in sorted(self.active):
            self._end(self.active[index][0])
        self.network = NetworkState()
        self.packets.heal()
        for proc in self.nodes.procs.values():
            if proc.clock_file is not None:
                set_offset(proc.clock_file, 0)
        restarted = []
        for proc in self.nodes.procs.values():
            if proc.paused:
                proc.resume()
            if not proc.running:
                proc.start()
                restarted.append(proc.node.node_id)
        for node_id in sorted(self.removed_voters):
            self._add_back(node_id)
        healed = self.recorder.now()
        self.recorder.add(NEMESIS, INFO, "heal", value="every fault healed")
        self.nodes.wait_serving(list(self.nodes.procs))
        return healed
