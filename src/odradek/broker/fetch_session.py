"""Incremental fetch sessions (KIP-227): the broker's half, pure.

A full Fetch names every partition it wants, and its answer carries every one of them,
changed or not. A follower of a broker that leads 17 partitions (``__consumer_offsets``
alone has 50) sends and decodes 17 partitions for each batch of one: most of the cost of
replication at small batches. With a session, the broker remembers what the client
fetches; each later request names only the partitions whose position changed (and those
to forget), and each answer only the partitions with something new: records, an error,
a diverging epoch, or a high watermark, last stable offset or log start the client has
not heard yet.

The request's ``(session_id, session_epoch)`` says which kind of fetch it is:

* ``(0, -1)``: full, no session (every client that knows nothing of sessions); the
  answer's session id is 0;
* ``(id, -1)``: close session ``id``, then the same as above;
* ``(id or 0, 0)``: full, closing ``id`` if given, and a new session if a slot is free
  (``max.incremental.fetch.session.cache.slots``); the answer carries its id, or 0 when
  there is no room, which tells the client to go on with full fetches;
* ``(id, n > 0)``: incremental. An unknown id is FETCH_SESSION_ID_NOT_FOUND, an epoch
  other than the one expected is INVALID_FETCH_SESSION_EPOCH, a switch between topic
  names and topic ids is FETCH_SESSION_TOPIC_ID_ERROR; the client then starts over with
  a full fetch. Otherwise the named partitions are added or updated, the forgotten ones
  removed, the expected epoch moves on, and the fetch covers every partition of the
  session.

One rule is ours: an incremental answer carries every partition the request named, not
only those with news. A client names a partition when its position moved (new records
appended, a truncation, a new leader epoch), and that is when it may have set aside
what it heard before (a follower that changed roles, or whose log changed while the
fetch was out, ignores the answer). Answering it costs one empty partition and means a
follower never keeps a stale high watermark, which its loss accounting after an unclean
election relies on.

A full cache makes room by dropping the session unused longest if it has been idle for
``min.incremental.fetch.session.eviction.ms`` (Kafka's 120 s); a follower may also
displace a consumer's session, since replication must not depend on consumers' luck.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

from odradek.core.invariant import invariant
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import FetchRequest
from odradek.protocol.messages import fetch_request as fq
from odradek.protocol.messages.fetch_response import FetchableTopicResponse, PartitionData

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
SESSIONS_VERSION = 7
"""Fetch v7 added sessions; older requests are always full and sessionless."""
TOPIC_IDS_VERSION = 13
DEFAULT_CACHE_SLOTS = 1000
"""Kafka's ``max.incremental.fetch.session.cache.slots``."""
EVICTION_MS = 120_000
"""Kafka's ``min.incremental.fetch.session.eviction.ms``: how long a session must have
been idle before a new one may take its slot."""

SessionKey = tuple[uuid.UUID, str, int]
"""A partition of a session: topic id (zero before v13), topic name as sent (empty from
v13 on), partition index."""


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session: what the client asked for last, and what it heard."""

    topic: str
    topic_id: uuid.UUID
    wanted: fq.FetchPartition
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    checked_by: object | None = None
    """For a follower's session: the leader state (of one leader epoch) that last found
    ``checked_position`` on its history, None when the last check failed or is stale."""
    checked_position: tuple[int, int] = (-1, -1)
    """The fetch offset and last fetched epoch of that check."""

    def must_answer(self, data: PartitionData) -> bool:
        """Whether an incremental answer carries ``data``; remembers what it says."""
        must = bool(data.records) or data.preferred_read_replica >= 0
        if data.error_code != ErrorCode.NONE:
            # Kafka's rule: forget what the client heard, so that the partition is
            # answered again once the error is gone.
            self.high_watermark = -1
            return True
        if data.diverging_epoch.epoch >= 0 or data.current_leader.leader_id >= 0:
            must = True
        if data.high_watermark != self.high_watermark:
            self.high_watermark = data.high_watermark
            must = True
        if data.last_stable_offset != self.last_stable_offset:
            self.last_stable_offset = data.last_stable_offset
            must = True
        if data.log_start_offset != self.log_start_offset:
            self.log_start_offset = data.log_start_offset
            must = True
        return must


@dataclass(slots=True)
class FetchSession:
    session_id: int
    epoch: int
    """The epoch the next incremental request must carry."""
    uses_topic_ids: bool
    replica_id: int
    """The fetching broker, -1 for a consumer."""
    last_used_ms: int
    partitions: dict[SessionKey, CachedPartition] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FetchContext:
    """What one Fetch covers and how its answer is shaped.

    ``topics`` are the partitions to read, grouped as in a request (for an incremental
    fetch, every partition of the session). The handler answers each of them, in that
    order, and passes the answer through :meth:`shape`.
    """

    topics: list[fq.FetchTopic]
    session_id: int = INVALID_SESSION_ID
    session: FetchSession | None = None
    incremental: bool = False
    named: frozenset[SessionKey] = frozenset()
    """The partitions an incremental request named: always answered."""
    error: ErrorCode = ErrorCode.NONE

    def shape(self, responses: list[FetchableTopicResponse]) -> list[FetchableTopicResponse]:
        """The answer to send: everything for a full fetch (remembering, in a session,
        what the client heard); for an incremental one only what it has not heard."""
        session = self.session
        if session is None:
            return responses
        invariant(len(responses) == len(self.topics), "a fetch answer out of step")
        shaped: list[FetchableTopicResponse] = []
        moved: list[SessionKey] = []
        for topic, out in zip(self.topics, responses, strict=True):
            # A handler may leave out a partition it found quiet (no PartitionData).
            kept: list[PartitionData] = []
            for data in out.partitions:
                key = (topic.topic_id, topic.topic, data.partition_index)
                cached = session.partitions.get(key)
                if cached is None:
                    continue  # forgotten by a request that overtook this one: never here
                if cached.must_answer(data) or not self.incremental or key in self.named:
                    kept.append(data)
                    if data.records:
                        moved.append(key)
            if kept:
                out.partitions = kept
                shaped.append(out)
        for key in moved:
            # Kafka's fairness rule: a partition that got records goes to the back, so
            # that a response size limit does not serve the same partitions first forever.
            session.partitions[key] = session.partitions.pop(key)
        return shaped


class FetchSessionCache:
    """The broker's fetch sessions, by id."""

    def __init__(self, slots: int = DEFAULT_CACHE_SLOTS, eviction_ms: int = EVICTION_MS) -> None:
        self.slots = slots
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}

    def context(
        self,
        request: FetchRequest,
        version: int,
        replica_id: int,
        now_ms: int,
        rng: random.Random,
    ) -> FetchContext:
        """Resolve a Fetch against the cache (this changes the cache: call once per
        request, not once per attempt of a long poll)."""
        if version < SESSIONS_VERSION:
            return FetchContext(request.topics)
        session_id = request.session_id
        epoch = request.session_epoch
        uses_topic_ids = version >= TOPIC_IDS_VERSION
        if epoch == FINAL_EPOCH:
            self.sessions.pop(session_id, None)
            return FetchContext(request.topics)
        if epoch == INITIAL_EPOCH:
            self.sessions.pop(session_id, None)
            session = self._create(uses_topic_ids, replica_id, now_ms, rng)
            if session is None:
                return FetchContext(request.topics)
            for topic in request.topics:
                for wanted in topic.partitions:
                    key = (topic.topic_id, topic.topic, wanted.partition)
                    session.partitions[key] = CachedPartition(topic.topic, topic.topic_id, wanted)
            return FetchContext(request.topics, session.session_id, session)
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext([], error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if epoch != session.epoch:
            return FetchContext([], error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            return FetchContext([], error=ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        named: set[SessionKey] = set()
        for topic in request.topics:
            for wanted in topic.partitions:
                key = (topic.topic_id, topic.topic, wanted.partition)
                named.add(key)
                cached = session.partitions.get(key)
                if cached is None:
                    session.partitions[key] = CachedPartition(topic.topic, topic.topic_id, wanted)
                else:
                    cached.wanted = wanted
        for forgotten in request.forgotten_topics_data:
            for index in forgotten.partitions:
                session.partitions.pop((forgotten.topic_id, forgotten.topic, index), None)
        session.epoch = _next_epoch(session.epoch)
        session.last_used_ms = now_ms
        return FetchContext(_grouped(session), session.session_id, session, True, frozenset(named))

    def _create(
        self, uses_topic_ids: bool, replica_id: int, now_ms: int, rng: random.Random
    ) -> FetchSession | None:
        if self.slots <= 0:
            return None
        if len(self.sessions) >= self.slots and not self._evict_one(replica_id >= 0, now_ms):
            return None
        session_id = rng.randint(1, 2**31 - 1)
        while session_id in self.sessions:
            session_id = rng.randint(1, 2**31 - 1)
        session = FetchSession(session_id, 1, uses_topic_ids, replica_id, now_ms)
        self.sessions[session_id] = session
        return session

    def _evict_one(self, for_follower: bool, now_ms: int) -> bool:
        idle = min(self.sessions.values(), key=lambda s: s.last_used_ms)
        if now_ms - idle.last_used_ms >= self.eviction_ms:
            del self.sessions[idle.session_id]
            return True
        if for_follower:
            consumers = [s for s in self.sessions.values() if s.replica_id < 0]
            if consumers:
                victim = min(consumers, key=lambda s: s.last_used_ms)
                del self.sessions[victim.session_id]
                return True
        return False


def _grouped(session: FetchSession) -> list[fq.FetchTopic]:
    """The session's partitions as request topics, consecutive partitions of one topic
    together (in session order)."""
    topics: list[fq.FetchTopic] = []
    last: tuple[uuid.UUID, str] | None = None
    for cached in session.partitions.values():
        here = (cached.topic_id, cached.topic)
        if here != last:
            topics.append(fq.FetchTopic(topic=cached.topic, topic_id=cached.topic_id))
            last = here
        topics[-1].partitions.append(cached.wanted)
    return topics


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1
