"""What the group coordinator hands back: responses to send and records to persist.

The coordinator never waits. Each call returns an :class:`Output`:

* ``completions``: responses that are ready, each for the request whose opaque ``token``
  the caller passed in. A JoinGroup that waits for a rebalance, or a SyncGroup follower
  that waits for the leader, is completed by a later call (another request, a
  :meth:`~odradek.coordinator.group.GroupCoordinator.tick`, or a write completion);
  every token is completed exactly once.
* ``writes``: records to append to one partition of ``__consumer_offsets``. The caller
  appends each write's records as one batch, writes of one partition in the order they
  are returned, and reports the outcome with
  :meth:`~odradek.coordinator.group.GroupCoordinator.write_completed` once the records are
  durable (or have failed). Responses that depend on a write (OffsetCommit, the leader's
  SyncGroup and with it the followers', DeleteGroups, a static member's rejoin) are only
  completed then, so nothing is acknowledged that a crash could lose.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeAlias

__all__ = ["Completion", "Output", "Record", "Token", "Write"]

Token: TypeAlias = object
"""Whatever the caller uses to find a request again (connection, correlation id, version)."""

Record: TypeAlias = tuple[bytes, bytes | None]
"""A ``__consumer_offsets`` record: key bytes and value bytes, None for a tombstone."""


@dataclass(frozen=True, slots=True)
class Completion:
    """The response to the request identified by ``token``: a generated response object."""

    token: Token
    response: Any


@dataclass(frozen=True, slots=True)
class Write:
    """Records to append to ``__consumer_offsets`` partition ``partition``, then report
    with ``write_completed(write_id, ...)``."""

    write_id: int
    partition: int
    records: tuple[Record, ...]


@dataclass(slots=True)
class Output:
    completions: list[Completion] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.completions or self.writes)

    def extend(self, other: Output) -> None:
        self.completions.extend(other.completions)
        self.writes.extend(other.writes)
