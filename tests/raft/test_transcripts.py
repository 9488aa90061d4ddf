"""Transcript tests for the Raft core, in the style of etcd-io/raft's ``testdata/*.txt``.

Every ``tests/raft/transcripts/*.txt`` is a list of blocks::

    # comments and blank lines are kept as they are
    <command> [args...]
    ----
    <expected output, one item a line, no blank lines>

The commands run against fresh nodes of one file, with one simulated clock (``now``, in ms)
and a network of pending messages that only moves when told to:

``add-nodes N [observers=M] [dynamic=1] [seed=S] [election-timeout=MS] [fetch-timeout=MS]``
    Voters 1..N (then observers N+1..N+M), each with a ``MemoryRaftLog`` and
    ``random.Random(S * 1000 + id)``. Static voters (``controller.quorum.voters``) unless
    ``dynamic=1``: then every node gets directory id ``id``, a bootstrap snapshot (with
    the voters for 1..N, without for observers) and voters 1..N as bootstrap servers.
``tick [IDS...] [ms=MS]``
    Advance the clock by MS (default 0), then tick the listed nodes (all when none).
``propose ID payload=TEXT[,TEXT...]``
    ``RaftNode.propose`` of one batch on node ID, then its ``ready`` (as a driver does).
``add-voter LEADER ID`` / ``remove-voter LEADER ID`` / ``resign ID``
    ``add_voter`` / ``remove_voter`` on the leader (then its ``ready``); ``resign`` a leader.
``deliver [FILTERS...]`` / ``drop [FILTERS...]``
    Deliver (or discard) the pending messages matching ``A->B`` (``*`` is a wildcard; no
    filter matches all), in the order sent. Only the messages pending when the command
    starts are delivered; the replies are queued. A message crossing a partition is lost.
``stabilize``
    ``deliver`` until no message is pending.
``partition 1 | 2 3`` / ``heal``
    Cut (or restore) the links between the groups; a node not named is alone.
``status``
    One line per node: state, epoch, vote, leader, high watermark and log.

Output lines: ``A->B Message ...`` for a message, indented under a delivered message
for the reactions of its receiver; ``N state A -> B``, ``N persist ...``,
``N log truncate to O``, ``N log append ...``, ``N hw A -> B commit ...``,
``N voter change at O: ERROR``. Log entries read ``offset/epoch:records`` (records joined
with ``,``), ``leader-change`` and ``voters(1,2,3)`` for control entries. A message to a
bootstrap server shows the server's node id. ``ok`` when there is nothing to show.

Set ``ODRADEK_REWRITE_TRANSCRIPTS=1`` to rewrite the files with the actual outputs instead
of comparing them (review the result with ``git diff``).
"""

from __future__ import annotations

import difflib
import functools
import os
import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.record_batch import (
    ControlType,
)
from odradek.raft.core import RaftNode
from odradek.raft.log import Entry, MemoryRaftLog
from odradek.raft.messages import (
    BeginQuorumEpoch,
    EndQuorumEpoch,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    VoteRequest,
    VoteResponse,
    bootstrap_index,
)
from odradek.raft.ready import Ready
from odradek.raft.snapshot import BOOTSTRAP_SNAPSHOT_ID, bootstrap_snapshot
from odradek.raft.voters import ReplicaKey, Voter, VoterSet
from odradek.testing.instant_disk import InstantFlushNode

TRANSCRIPTS = Path(__file__).parent / "transcripts"
REWRITE_ENV = "ODRADEK_REWRITE_TRANSCRIPTS"
SEPARATOR = "----"
MAX_STABILIZE_ROUNDS = 1000


# ---------------------------------------------------------------------- the file format


@dataclass
class Block:
    """A command, the comment and blank lines before it, and its expected output."""

    line: int  # 1-based line number of the command
    preamble: list[str]
    command: str
    expected: list[str]


@dataclass
class Transcript:
    blocks: list[Block]
    trailer: list[str]  # comment and blank lines after the last block


def parse(text: str, name: str) -> Transcript:
    lines = text.splitlines()
    blocks: list[Block] = []
    pending: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.startswith("#"):
            pending.append(line)
            i += 1
            continue
        if i + 1 >= len(lines) or lines[i + 1] != SEPARATOR:
            raise ValueError(f"{name}:{i + 2}: expected {SEPARATOR!r} after {line!r}")
        j = i + 2
        expected: list[str] = []
        while j < len(lines) and lines[j].strip():
            expected.append(lines[j])
            j += 1
        blocks.append(Block(i + 1, pending, line, expected))
        pending = []
        i = j
    return Transcript(blocks, pending)


def render(transcript: Transcript, outputs: Sequence[Sequence[str]]) -> str:
    lines: list[str] = []
    for block, output in zip(transcript.blocks, outputs, strict=True):
        lines += [*block.preamble, block.command, SEPARATOR, *output]
    lines += transcript.trailer
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- formatting


def fmt_id(value: int | ReplicaKey | None) -> str:
    if isinstance(value, ReplicaKey):
        return str(value.node_id)
    return "none" if value is None else str(value)


def fmt_error(code: int) -> str:
    return ErrorCode(code).name if code else ""


def fmt_entry(entry: Entry) -> str:
    if entry.control == ControlType.LEADER_CHANGE:
        body = "leader-change"
    elif entry.control == ControlType.VOTERS:
        ids = ",".join(str(v.node_id) for v in VoterSet.decode(entry.records[0]))
        body = f"voters({ids})"
    else:
        body = ",".join(r.decode() for r in entry.records)
    return f"{entry.offset}/{entry.epoch}:{body}"


def fmt_entries(entries: Sequence[Entry]) -> str:
    return "[" + " ".join(fmt_entry(e) for e in entries) + "]"


def fmt_message(message: Message) -> str:
    if isinstance(message, VoteRequest):
        kind = "PreVoteRequest" if message.pre_vote else "VoteRequest"
        return (
            f"{kind} epoch={message.epoch} candidate={fmt_id(message.candidate)} "
            f"last-epoch={message.last_epoch} last-offset={message.last_offset}"
        )
    if isinstance(message, VoteResponse):
        kind = "PreVoteResponse" if message.pre_vote else "VoteResponse"
        verdict = "granted" if message.granted else "refused"
        text = f"{kind} epoch={message.epoch} {verdict} leader={fmt_id(message.leader)}"
        return text + (f" error={fmt_error(message.error)}" if message.error else "")
    if isinstance(message, BeginQuorumEpoch):
        return f"BeginQuorumEpoch epoch={message.epoch} leader={message.leader}"
    if isinstance(message, EndQuorumEpoch):
        successors = ",".join(map(str, message.preferred_successors))
        return (
            f"EndQuorumEpoch epoch={message.epoch} leader={message.leader} successors={successors}"
        )
    if isinstance(message, FetchRequest):
        return (
            f"FetchRequest epoch={message.epoch} offset={message.fetch_offset} "
            f"last-epoch={message.last_fetched_epoch} id={message.request_id} "
            f"wait={message.max_wait_ms}"
        )
    if isinstance(message, FetchSnapshotRequest):
        return (
            f"FetchSnapshotRequest epoch={message.epoch} snapshot={message.snapshot_id.end_offset}"
            f"/{message.snapshot_id.epoch} position={message.position} id={message.request_id}"
        )
    if isinstance(message, FetchSnapshotResponse):
        text = (
            f"FetchSnapshotResponse epoch={message.epoch} leader={fmt_id(message.leader)} "
            f"snapshot={message.snapshot_id.end_offset}/{message.snapshot_id.epoch} "
            f"size={message.size} position={message.position} id={message.request_id}"
        )
        return text + (f" error={fmt_error(message.error)}" if message.error else "")
    assert isinstance(message, FetchResponse)
    text = (
        f"FetchResponse epoch={message.epoch} leader={fmt_id(message.leader)} "
        f"hw={message.high_watermark} id={message.request_id}"
    )
    if message.error:
        text += f" error={fmt_error(message.error)}"
    elif message.snapshot_id is not None:
        text += f" snapshot={message.snapshot_id.end_offset}/{message.snapshot_id.epoch}"
    elif message.diverging_epoch is not None:
        text += (
            f" diverging-epoch={message.diverging_epoch}"
            f" diverging-end-offset={fmt_id(message.diverging_end_offset)}"
        )
    else:
        text += f" entries={fmt_entries(message.entries)}"
    return text


def all_entries(node: RaftNode) -> list[Entry]:
    return node.log.entries_from(node.log.start_offset(), node.log.end_offset())


def fmt_status(node: RaftNode) -> str:
    return (
        f"{node.node_id} {node.state.value} epoch={node.epoch} vote={fmt_id(node.voted_for)} "
        f"leader={fmt_id(node.leader)} hw={node.high_watermark} "
        f"log={fmt_entries(all_entries(node))}" + ("" if node.is_voter else " observer")
    )


# ---------------------------------------------------------------------- the runner


@dataclass
class Pending:
    src: int
    to: int
    message: Message


@dataclass
class Env:
    nodes: dict[int, RaftNode] = field(default_factory=dict)
    now: int = 0
    pending: list[Pending] = field(default_factory=list)
    groups: list[frozenset[int]] | None = None
    bootstrap: list[int] = field(default_factory=list)

    # -- helpers

    def node(self, text: str) -> RaftNode:
        node_id = int(text)
        if node_id not in self.nodes:
            raise ValueError(f"no node {node_id}")
        return self.nodes[node_id]

    def connected(self, a: int, b: int) -> bool:
        if self.groups is None:
            return True
        return any(a in g and b in g for g in self.groups)

    def react(
        self, node: RaftNode, action: Callable[[], Ready], indent: str, out: list[str]
    ) -> None:
        """Run one input on ``node`` and describe what changed and what it sent."""
        state, log = node.state, all_entries(node)
        old_hw = node.high_watermark
        ready = action()
        n = node.node_id
        if node.state is not state:
            out.append(f"{indent}{n} state {state.value} -> {node.state.value}")
        if ready.persist is not None:
            q = ready.persist
            out.append(
                f"{indent}{n} persist epoch={q.epoch} vote={fmt_id(q.voted_for)} "
                f"leader={fmt_id(q.leader)}"
            )
        out.extend(f"{indent}{line}" for line in log_changes(n, log, all_entries(node)))
        if ready.high_watermark is not None:
            out.append(
                f"{indent}{n} hw {old_hw} -> {ready.high_watermark} "
                f"commit {fmt_entries(ready.committed)}"
            )
        for offset, error in ready.voter_changes:
            out.append(f"{indent}{n} voter change at {offset}: {ErrorCode(error).name}")
        for to, message in ready.messages:
            index = bootstrap_index(to)
            if index is not None:
                to = self.bootstrap[index]
            out.append(f"{indent}{n}->{to} {fmt_message(message)}")
            self.pending.append(Pending(n, to, message))

    def take(self, filters: Sequence[str]) -> list[Pending]:
        matchers = [parse_filter(f) for f in filters]

        def matches(p: Pending) -> bool:
            return not matchers or any(
                (a is None or a == p.src) and (b is None or b == p.to) for a, b in matchers
            )

        taken = [p for p in self.pending if matches(p)]
        self.pending = [p for p in self.pending if not matches(p)]
        return taken

    def deliver(self, filters: Sequence[str], out: list[str]) -> None:
        for p in self.take(filters):
            header = f"{p.src}->{p.to} {fmt_message(p.message)}"
            if not self.connected(p.src, p.to):
                out.append(f"{header} LOST (partition)")
                continue
            out.append(header)
            to = self.nodes[p.to]
            self.react(to, functools.partial(to.step, p.message, p.src, self.now), "  ", out)

    # -- commands

    def run(self, command: str) -> list[str]:
        name, *words = command.split()
        args = [w for w in words if "=" not in w]
        opts = dict(w.split("=", 1) for w in words if "=" in w)
        out: list[str] = []
        if name == "add-nodes":
            if self.nodes:
                raise ValueError("add-nodes twice")
            (count,) = args
            seed = int(opts.get("seed", "0"))
            voter_ids = list(range(1, int(count) + 1))
            observers = int(opts.get("observers", "0"))
            dynamic = opts.get("dynamic") == "1"
            initial = VoterSet.of(Voter(i, directory(i)) for i in voter_ids)
            if dynamic:
                self.bootstrap = voter_ids
            for i in range(1, len(voter_ids) + observers + 1):
                log = MemoryRaftLog()
                if dynamic:
                    voters = initial if i in voter_ids else None
                    log.write_snapshot(BOOTSTRAP_SNAPSHOT_ID, bootstrap_snapshot(voters))
                self.nodes[i] = InstantFlushNode(
                    i,
                    log,
                    random.Random(seed * 1000 + i),
                    self.now,
                    directory_id=directory(i) if dynamic else ZERO,
                    static_voters=None if dynamic else VoterSet.static(voter_ids),
                    bootstrap_servers=len(self.bootstrap),
                    election_timeout_ms=int(opts.get("election-timeout", "1000")),
                    fetch_timeout_ms=int(opts.get("fetch-timeout", "2000")),
                )
            self.status(out)
        elif name == "tick":
            self.now += int(opts.get("ms", "0"))
            out.append(f"now={self.now}")
            ticked = [self.node(a) for a in args] or [self.nodes[i] for i in sorted(self.nodes)]
            for n in ticked:
                self.react(n, functools.partial(n.tick, self.now), "", out)
        elif name == "propose":
            (arg,) = args
            n = self.node(arg)
            records = [r.encode() for r in opts["payload"].split(",")]
            before = all_entries(n)
            if n.propose(records, self.now) is None:
                out.append(f"{n.node_id} propose rejected ({n.state.value})")
            else:
                self.react_to_command(n, before, out)
        elif name in ("add-voter", "remove-voter"):
            leader, target = (self.node(a) for a in args)
            before = all_entries(leader)
            key = Voter(target.node_id, target.key.directory_id)
            if name == "add-voter":
                outcome = leader.add_voter(key, self.now)
            else:
                outcome = leader.remove_voter(key.key, self.now)
            out.append(
                f"{leader.node_id} {name} {target.node_id}: {ErrorCode(outcome.error).name}"
                + (f" offset={outcome.offset}" if outcome.offset is not None else "")
            )
            self.react_to_command(leader, before, out)
        elif name == "resign":
            (arg,) = args
            n = self.node(arg)
            before = all_entries(n)
            n.resign(self.now)
            self.react_to_command(n, before, out)
        elif name in ("deliver", "drop"):
            if name == "deliver":
                self.deliver(args, out)
            else:
                out.extend(
                    f"{p.src}->{p.to} {fmt_message(p.message)} DROPPED" for p in self.take(args)
                )
        elif name == "stabilize":
            rounds = 0
            while self.pending:
                rounds += 1
                if rounds > MAX_STABILIZE_ROUNDS:
                    raise RuntimeError("stabilize does not converge")
                self.deliver([], out)
        elif name == "partition":
            groups = [frozenset(int(x) for x in g.split()) for g in " ".join(args).split("|")]
            named = frozenset().union(*groups)
            groups += [frozenset({i}) for i in self.nodes if i not in named]
            self.groups = groups
            out.append("partition " + " | ".join(" ".join(map(str, sorted(g))) for g in groups))
        elif name == "heal":
            self.groups = None
        elif name == "status":
            out.append(f"now={self.now} pending={len(self.pending)}")
            self.status(out)
        else:
            raise ValueError(f"unknown command {name!r}")
        return out or ["ok"]

    def react_to_command(self, node: RaftNode, before: list[Entry], out: list[str]) -> None:
        """The command's own appends, then the Ready a driver takes right after it."""
        out.extend(log_changes(node.node_id, before, all_entries(node)))
        self.react(node, functools.partial(node.ready, self.now), "", out)

    def status(self, out: list[str]) -> None:
        out.extend(fmt_status(self.nodes[i]) for i in sorted(self.nodes))


ZERO = uuid.UUID(int=0)


def directory(node_id: int) -> uuid.UUID:
    return uuid.UUID(int=node_id)


def parse_filter(text: str) -> tuple[int | None, int | None]:
    src, sep, to = text.partition("->")
    if not sep:
        raise ValueError(f"bad message filter {text!r}, want A->B")
    return (None if src == "*" else int(src)), (None if to == "*" else int(to))


def log_changes(node_id: int, before: list[Entry], after: list[Entry]) -> list[str]:
    common = 0
    while common < min(len(before), len(after)) and before[common] == after[common]:
        common += 1
    lines = []
    if common < len(before):
        lines.append(f"{node_id} log truncate to {common}")
    if common < len(after):
        lines.append(f"{node_id} log append {fmt_entries(after[common:])}")
    return lines


def run_transcript(transcript: Transcript, name: str) -> list[list[str]]:
    env = Env()
    outputs = []
    for block in transcript.blocks:
        try:
            outputs.append(env.run(block.command))
        except Exception as error:
            raise AssertionError(f"{name}:{block.line}: {block.command!r} failed") from error
    return outputs


def check_transcript(path: Path, rewrite: bool) -> None:
    text = path.read_text()
    transcript = parse(text, path.name)
    actual = render(transcript, run_transcript(transcript, path.name))
    if actual == text:
        return
    if rewrite:
        path.write_text(actual)
        return
    diff = difflib.unified_diff(
        text.splitlines(keepends=True),
        actual.splitlines(keepends=True),
        f"{path.name} (expected)",
        f"{path.name} (actual)",
    )
    pytest.fail(
        f"transcript {path.name} differs (rerun with {REWRITE_ENV}=1 to accept):\n" + "".join(diff),
        pytrace=False,
    )


@pytest.mark.parametrize("path", sorted(TRANSCRIPTS.glob("*.txt")), ids=lambda p: p.stem)
def test_transcript(path: Path) -> None:
    check_transcript(path, rewrite=os.environ.get(REWRITE_ENV) == "1")


def test_transcripts_exist() -> None:
    assert sorted(TRANSCRIPTS.glob("*.txt")), "no transcripts found"


def test_a_differing_output_fails_with_a_diff(tmp_path: Path) -> None:
    path = tmp_path / "wrong.txt"
    path.write_text("# one voter\nadd-nodes 1\n----\n1 leader epoch=9\n")
    with pytest.raises(pytest.fail.Exception) as failure:
        check_transcript(path, rewrite=False)
    message = str(failure.value)
    assert "-1 leader epoch=9" in message
    assert "+1 unattached epoch=0 vote=none leader=none hw=0 log=[]" in message
    # The rewrite mode accepts the actual output, keeping the comment.
    check_transcript(path, rewrite=True)
    assert path.read_text().startswith("# one voter\nadd-nodes 1\n----\n1 unattached ")
    check_transcript(path, rewrite=False)
