"""The core asks its driver to flush the log, and nothing it counts or reports depends on
an entry before the driver says it is durable (``Ready.flush``, ``RaftNode.flushed``).

These tests drive the plain :class:`RaftNode`, flushing only when they say so; the other
unit tests use :class:`~odradek.testing.instant_disk.InstantFlushNode`, whose disk
answers at once.
"""

from __future__ import annotations

import random

from odradek.raft.core import RaftNode, State
from odradek.raft.log import Entry, MemoryRaftLog
from odradek.raft.messages import (
    BeginQuorumEpoch,
    FetchRequest,
    FetchResponse,
    Message,
    VoteResponse,
)
from odradek.raft.ready import LogFlush
from odradek.raft.voters import ReplicaKey, VoterSet

ET = 1000


def node(node_id: int, voters: tuple[int, ...]) -> RaftNode:
    return RaftNode(
        node_id,
        MemoryRaftLog(),
        random.Random(0),
        0,
        static_voters=VoterSet.static(voters),
        election_timeout_ms=ET,
    )


def fetches(messages: list[tuple[int, Message]]) -> list[FetchRequest]:
    return [m for _, m in messages if isinstance(m, FetchRequest)]


def test_the_leader_counts_its_own_entries_only_once_they_are_durable() -> None:
    n = node(1, (1,))
    ready = n.tick(2 * ET)
    assert n.state is State.LEADER
    # Its leader-change entry is in the log, not yet on the disk: nothing commits.
    assert ready.flush == LogFlush(1, 0)
    assert ready.high_watermark is None and n.high_watermark == 0
    offset = n.propose([b"a"], 2 * ET)
    assert offset == 1
    ready = n.ready(2 * ET)
    assert ready.flush == LogFlush(2, 0) and n.high_watermark == 0
    # The first flush (to 1) completes: the high watermark moves to it and no further.
    ready = n.flushed(LogFlush(1, 0), 2 * ET)
    assert ready.high_watermark == 1 and n.high_watermark == 1
    assert [e.offset for e in ready.committed] == [0]
    ready = n.flushed(LogFlush(2, 0), 2 * ET)
    assert ready.high_watermark == 2
    assert [e.records for e in ready.committed] == [(b"a",)]


def test_a_leader_with_followers_waits_for_its_own_flush_too() -> None:
    n = node(1, (1, 2, 3))
    n.tick(2 * ET)
    n.step(VoteResponse(0, True, True), 2, 2 * ET)
    n.step(VoteResponse(1, True, False), 2, 2 * ET)
    assert n.state is State.LEADER
    # Node 2 holds the leader-change entry durably (its fetch offset says so), but the
    # leader's own copy is not flushed: one durable copy of three commits nothing.
    ready = n.step(FetchRequest(1, ReplicaKey(2), 1, 1, 1), 2, 2 * ET)
    assert ready.high_watermark is None
    ready = n.flushed(LogFlush(1, 0), 2 * ET)
    assert ready.high_watermark == 1


def test_a_follower_reports_what_it_appended_only_once_it_is_durable() -> None:
    n = node(2, (1, 2, 3))
    ready = n.step(BeginQuorumEpoch(1, 1, ReplicaKey(2)), 1, 0)
    (first,) = fetches(ready.messages)
    assert first.fetch_offset == 0
    entries = (Entry(0, 1, (b"a",)), Entry(1, 1, (b"b",)))
    ready = n.step(FetchResponse(1, 1, 0, entries, first.request_id), 1, 10)
    # The next fetch would tell the leader "I hold 0..1", which a crash could undo.
    assert fetches(ready.messages) == []
    assert ready.flush == LogFlush(2, 0)
    # Ticks do not send it either, however long the disk takes (within the fetch
    # timeout), nor ask for the same flush again.
    ready = n.tick(500)
    assert fetches(ready.messages) == [] and ready.flush is None
    ready = n.flushed(LogFlush(2, 0), 600)
    (second,) = fetches(ready.messages)
    assert (second.fetch_offset, second.last_fetched_epoch) == (2, 1)
    # A response to the first fetch, arriving late, is stale.
    assert n.step(FetchResponse(1, 1, 0, (), first.request_id), 1, 610).messages == []
