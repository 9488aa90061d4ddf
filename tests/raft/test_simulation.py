"""A small deterministic simulation of RaftNode clusters (3 and 5 voters).

One ``random.Random(seed)`` drives everything: election timeouts, message delay, drop
and duplication, and which node the partition isolates. After every event the safety
invariants are checked; at the end, after the partition healed, proposals must commit.
A failure names its seed; replay it with ``pytest tests/raft/test_simulation.py -k 'seed-N'``.
The shared simulator in ``odradek.testing`` will take this over later.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

import pytest

from odradek.core.errors import InvariantError
from odradek.raft.core import RaftNode, State
from odradek.raft.log import Entry, MemoryRaftLog
from odradek.raft.messages import Message

TICK_MS = 20
PARTITION_AT_MS = 6_000
HEAL_AT_MS = 12_000
STABLE_AT_MS = 16_000
PROPOSALS_END_MS = 20_000
END_MS = 24_000


class CheckedLog(MemoryRaftLog):
    """Remembers the lowest offset it was ever truncated to, for the divergence check."""

    def __init__(self) -> None:
        super().__init__()
        self.lowest_truncation: int | None = None

    def truncate_to(self, offset: int) -> None:
        if offset < self.end_offset():
            low = self.lowest_truncation
            self.lowest_truncation = offset if low is None else min(low, offset)
        super().truncate_to(offset)


@dataclass
class Sim:
    seed: int
    size: int
    rng: random.Random = field(init=False)
    nodes: dict[int, RaftNode] = field(init=False)
    logs: dict[int, CheckedLog] = field(init=False)
    queue: list[tuple[int, int, str, tuple[object, ...]]] = field(default_factory=list)
    seq: int = 0
    now: int = 0
    drop: float = 0.0
    isolated: int | None = None
    leader_of_epoch: dict[int, int] = field(default_factory=dict)
    last_epoch: dict[int, int] = field(default_factory=dict)
    last_hw: dict[int, int] = field(default_factory=dict)
    checked_upto: dict[int, int] = field(default_factory=dict)
    committed: dict[int, Entry] = field(default_factory=dict)
    proposals: list[tuple[int, int, int, bytes]] = field(default_factory=list)  # time, epoch, ..

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.drop = self.rng.uniform(0.0, 0.1)
        voters = frozenset(range(1, self.size + 1))
        self.logs = {i: CheckedLog() for i in sorted(voters)}
        self.nodes = {
            i: RaftNode(i, voters, self.logs[i], random.Random(self.rng.getrandbits(64)), 0)
            for i in sorted(voters)
        }
        for i in self.nodes:
            self.last_epoch[i] = 0
            self.last_hw[i] = 0
            self.checked_upto[i] = 0
            self.schedule(self.rng.randrange(TICK_MS), "tick", (i,))
        self.schedule(PARTITION_AT_MS, "partition", ())
        self.schedule(HEAL_AT_MS, "heal", ())
        for t in range(500, PROPOSALS_END_MS, 200):
            self.schedule(t, "propose", ())

    def schedule(self, at_ms: int, kind: str, payload: tuple[object, ...]) -> None:
        self.seq += 1
        heapq.heappush(self.queue, (at_ms, self.seq, kind, payload))

    def send(self, src: int, messages: list[tuple[int, Message]]) -> None:
        for to, message in messages:
            if self.rng.random() < self.drop:
                continue
            copies = 2 if self.rng.random() < 0.02 else 1
            for _ in range(copies):
                self.schedule(self.now + self.rng.randint(1, 30), "deliver", (src, to, message))

    def leaders(self) -> list[RaftNode]:
        return [n for _, n in sorted(self.nodes.items()) if n.state is State.LEADER]

    def run(self) -> None:
        while self.queue:
            at_ms, _, kind, payload = heapq.heappop(self.queue)
            if at_ms > END_MS:
                break
            self.now = at_ms
            if kind == "tick":
                (i,) = payload
                assert isinstance(i, int)
                self.send(i, self.nodes[i].tick(self.now).messages)
                self.schedule(self.now + TICK_MS, "tick", (i,))
            elif kind == "deliver":
                src, to, message = payload
                assert isinstance(src, int) and isinstance(to, int)
                if self.isolated in (src, to):
                    continue
                ready = self.nodes[to].step(message, src, self.now)  # type: ignore[arg-type]
                self.send(to, ready.messages)
            elif kind == "partition":
                leaders = self.leaders()
                self.isolated = leaders[0].node_id if leaders else self.rng.choice(list(self.nodes))
            elif kind == "heal":
                self.isolated = None
                self.drop = 0.0  # a quiet period for liveness
            elif kind == "propose":
                for leader in self.leaders():
                    payload_bytes = f"v{self.now}@{leader.node_id}".encode()
                    offset = leader.propose(payload_bytes)
                    assert offset is not None
                    self.proposals.append((self.now, leader.epoch, offset, payload_bytes))
            self.check()
        self.check_liveness()

    def check(self) -> None:
        for epoch_leader in self.leaders():
            first = self.leader_of_epoch.setdefault(epoch_leader.epoch, epoch_leader.node_id)
            assert first == epoch_leader.node_id, f"two leaders in epoch {epoch_leader.epoch}"
        for i, n in self.nodes.items():
            assert n.epoch >= self.last_epoch[i], f"node {i} epoch went back"
            assert n.high_watermark >= self.last_hw[i], f"node {i} high watermark went back"
            self.last_epoch[i] = n.epoch
            self.last_hw[i] = n.high_watermark
            log = self.logs[i]
            low = log.lowest_truncation
            assert low is None or low >= self.checked_upto[i], (
                f"node {i} truncated to {low}, below its checked high watermark"
            )
            log.lowest_truncation = None
            for offset in range(self.checked_upto[i], n.high_watermark):
                entry = log.entry_at(offset)
                assert entry is not None
                known = self.committed.setdefault(offset, entry)
                assert known == entry, f"node {i} differs at committed offset {offset}"
            self.checked_upto[i] = n.high_watermark

    def check_liveness(self) -> None:
        leaders = self.leaders()
        assert len(leaders) == 1, f"{len(leaders)} leaders at the end"
        final = leaders[0]
        late = [p for p in self.proposals if p[0] >= STABLE_AT_MS and p[1] == final.epoch]
        assert late, "no proposal after the heal"
        for _, _, offset, payload in late:
            for i, n in self.nodes.items():
                assert n.high_watermark > offset, f"node {i} did not commit offset {offset}"
                entry = n.log.entry_at(offset)
                assert entry is not None and entry.payload == payload


SEEDS = range(50)


@pytest.mark.parametrize("seed", SEEDS, ids=[f"seed-{s}" for s in SEEDS])
def test_simulation(seed: int) -> None:
    size = 3 if seed % 2 == 0 else 5
    sim = Sim(seed, size)
    try:
        sim.run()
    except (AssertionError, InvariantError) as error:
        raise AssertionError(f"seed {seed} ({size} voters) at {sim.now} ms: {error}") from error
    assert sim.committed, "nothing committed"
