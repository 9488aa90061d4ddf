"""Incremental fetch sessions (KIP-227): the follower's half, pure (Kafka's
``FetchSessionHandler``), one per leader it fetches from.

The leader keeps what the session fetches (:mod:`odradek.broker.fetch_session`). The
first request is full and asks for a session (epoch 0); if the answer carries a session
id, each later request names only the partitions whose position changed since the last
answered request, and forgets those no longer wanted. The answer to an incremental
request leaves out every partition without news: such a partition is unchanged, and the
follower simply asks again.

Anything that may have put the two halves out of step starts over with a full request
that closes the old session: a request without an answer, or a session error from the
leader (FETCH_SESSION_ID_NOT_FOUND after a leader restart, INVALID_FETCH_SESSION_EPOCH,
FETCH_SESSION_TOPIC_ID_ERROR). A leader without room for a session answers session id
0, and every request stays full.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass

from odradek.protocol.error_codes import ErrorCode

__all__ = [
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "Answer",
    "FetchSessionHandler",
    "PartitionKey",
    "Position",
    "SessionRequest",
]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1

PartitionKey = tuple[uuid.UUID, int]
"""Topic id and partition index."""
Position = tuple[int, int, int, int]
"""What a fetch of one partition names: current leader epoch, fetch offset, last fetched
epoch, partition max bytes. A partition is named again when any of them changes."""

_SESSION_ERRORS = frozenset(
    {
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
    }
)


class Answer(enum.Enum):
    """How to read the partitions of a request that an answer leaves out."""

    FULL = "full"
    """The answer is full: a partition left out got no answer."""
    INCREMENTAL = "incremental"
    """A partition left out has nothing new: ask again."""
    RETRY = "retry"
    """The session failed; nothing was read: ask again at once (a full request)."""


@dataclass(frozen=True, slots=True)
class SessionRequest:
    session_id: int
    session_epoch: int
    send: dict[PartitionKey, Position]
    """The partitions to name in the request."""
    forget: list[PartitionKey]
    """The partitions to list in ``forgotten_topics_data``."""
    wanted: dict[PartitionKey, Position]
    """Every partition fetched: the session's content once this request is answered."""

    @property
    def incremental(self) -> bool:
        return self.session_epoch > INITIAL_EPOCH


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self._session: dict[PartitionKey, Position] = {}

    def build(self, wanted: dict[PartitionKey, Position]) -> SessionRequest:
        """The next request for the partitions ``wanted`` (all of them, with their
        positions); send it, then report its outcome to :meth:`on_answer` or
        :meth:`on_failure` before building another."""
        if self.epoch == INITIAL_EPOCH:
            return SessionRequest(self.session_id, INITIAL_EPOCH, wanted, [], wanted)
        session = self._session
        send = {k: v for k, v in wanted.items() if session.get(k) != v}
        forget = [k for k in session if k not in wanted]
        return SessionRequest(self.session_id, self.epoch, send, forget, wanted)

    def on_answer(self, request: SessionRequest, error_code: int, session_id: int) -> Answer:
        """The leader answered ``request`` with this top-level error and session id."""
        if error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
            self._reset(close=False)
            return Answer.RETRY
        if error_code in _SESSION_ERRORS:
            self._reset(close=True)
            return Answer.RETRY
        if error_code != ErrorCode.NONE:
            # Some other failure of the whole request: what the leader kept is unknown.
            self._reset(close=True)
            return Answer.FULL
        if not request.incremental:
            if session_id == 0:
                self._reset(close=False)  # no room on the leader: full requests from now on
            else:
                self.session_id = session_id
                self.epoch = 1
                self._session = request.wanted
            return Answer.FULL
        self.epoch = 1 if self.epoch >= 2**31 - 1 else self.epoch + 1
        self._session = request.wanted
        return Answer.INCREMENTAL

    def on_failure(self) -> None:
        """``request`` got no answer: the leader may or may not have applied it."""
        self._reset(close=True)

    def _reset(self, close: bool) -> None:
        # With ``close`` the next full request names the old session, which the leader
        # then drops instead of keeping it until it is evicted.
        if not close:
            self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self._session = {}
