"""A Raft node driven as if its disk flushed at once, for unit and transcript tests.

The core hands the driver the flushes it needs (``Ready.flush``) and hears back through
:meth:`~odradek.raft.core.RaftNode.flushed`; the simulator (:mod:`odradek.testing.raft_sim`)
completes them later, as a disk does. Tests about elections, replication and membership
mostly do not care when the disk answers: :class:`InstantFlushNode` completes every
flush before it returns the Ready, and merges the outputs of ``flushed`` into it, so that
one input gives the outputs a driver with an instant disk would see. Everything else is
the production :class:`~odradek.raft.core.RaftNode`.
"""

from __future__ import annotations

from odradek.raft.core import RaftNode
from odradek.raft.messages import Message
from odradek.raft.ready import LogFlush, Ready


def merge(first: Ready, then: Ready) -> Ready:
    """One Ready with the outputs of ``first`` and then those of ``then``, in order."""
    return Ready(
        messages=first.messages + then.messages,
        persist=then.persist if then.persist is not None else first.persist,
        flush=then.flush,
        high_watermark=then.high_watermark
        if then.high_watermark is not None
        else first.high_watermark,
        committed=first.committed + then.committed,
        snapshot=then.snapshot if then.snapshot is not None else first.snapshot,
        voter_changes=first.voter_changes + then.voter_changes,
    )


class InstantFlushNode(RaftNode):
    """A :class:`RaftNode` whose every Ready comes back with its flush done."""

    def _settle(self, ready: Ready, now_ms: int) -> Ready:
        while ready.flush is not None:
            self.log.flush()
            ready = merge(ready, super().flushed(ready.flush, now_ms))
        return ready

    def ready(self, now_ms: int) -> Ready:
        return self._settle(super().ready(now_ms), now_ms)

    def tick(self, now_ms: int) -> Ready:
        return self._settle(super().tick(now_ms), now_ms)

    def step(self, message: Message, from_node: int, now_ms: int) -> Ready:
        return self._settle(super().step(message, from_node, now_ms), now_ms)

    def leader_unreachable(self, leader: int, now_ms: int) -> Ready:
        return self._settle(super().leader_unreachable(leader, now_ms), now_ms)

    def flushed(self, flush: LogFlush, now_ms: int) -> Ready:
        return self._settle(super().flushed(flush, now_ms), now_ms)
