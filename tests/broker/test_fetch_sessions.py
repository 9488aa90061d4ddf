"""Incremental fetch sessions (KIP-227) on the broker: what a session remembers, what an
incremental answer carries, and every way a session request is refused."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from typing import Any

from odradek.broker.effects import AwaitData, Outcome, Reply
from odradek.broker.fetch import handle_fetch
from odradek.broker.fetch_session import EVICTION_MS, FetchSessionCache
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import FetchRequest
from odradek.protocol.messages.fetch_request import (
    FetchPartition,
    FetchTopic,
    ForgottenTopic,
    ReplicaState,
)
from odradek.shell.clock import monotonic_ms
from odradek.shell.replication import NodeControllerChannel, NodeStorage, ReplicationService
from tests.broker.harness import Harness, batch, header, new_harness

VERSION = 16  # topic ids
FOLLOWER = 2


def consumer_harness(partitions: int = 3) -> tuple[Harness, uuid.UUID]:
    h = new_harness()
    topic_id = h.add_topic("t", partitions)
    for index in range(partitions):
        h.append("t", index, batches=1, records=3)
        h.flush("t", index)
    return h, topic_id


def fetch(
    h: Harness,
    positions: dict[int, int],
    topic_id: uuid.UUID,
    session_id: int = 0,
    epoch: int = -1,
    forget: list[int] | None = None,
    version: int = VERSION,
    replica: int = -1,
    wait_ms: int = 0,
    current_leader_epoch: int = -1,
) -> Outcome:
    request = FetchRequest(
        replica_state=ReplicaState(replica_id=replica, replica_epoch=FOLLOWER * 10),
        max_wait_ms=wait_ms,
        min_bytes=1,
        session_id=session_id,
        session_epoch=epoch,
        topics=(
            [
                FetchTopic(
                    topic="t" if version < 13 else "",
                    topic_id=topic_id if version >= 13 else uuid.UUID(int=0),
                    partitions=[
                        FetchPartition(
                            partition=p,
                            fetch_offset=o,
                            partition_max_bytes=1 << 20,
                            current_leader_epoch=current_leader_epoch,
                        )
                        for p, o in positions.items()
                    ],
                )
            ]
            if positions
            else []
        ),
        forgotten_topics_data=(
            [ForgottenTopic(topic_id=topic_id, partitions=forget)] if forget else []
        ),
    )
    return handle_fetch(h.state, header(1, version), request)


def answer(outcome: Outcome) -> Any:
    if isinstance(outcome, AwaitData):
        outcome = outcome.then(True)  # the long poll times out
    assert isinstance(outcome, Reply)
    return outcome.response


def answered(response: Any) -> dict[int, tuple[int, int, int]]:
    """partition -> (error, high watermark, record bytes)."""
    return {
        p.partition_index: (p.error_code, p.high_watermark, len(p.records or b""))
        for t in response.responses
        for p in t.partitions
    }


def test_a_full_fetch_at_epoch_0_opens_a_session_and_answers_everything() -> None:
    h, topic_id = consumer_harness()
    response = answer(fetch(h, {0: 0, 1: 0, 2: 3}, topic_id, epoch=0))
    assert response.error_code == ErrorCode.NONE and response.session_id != 0
    seen = answered(response)
    assert set(seen) == {0, 1, 2}
    assert seen[2][2] == 0 and seen[0][2] > 0  # at the end: no records, still answered


def test_an_incremental_answer_carries_only_news_and_what_was_named() -> None:
    h, topic_id = consumer_harness()
    first = answer(fetch(h, {0: 3, 1: 3, 2: 3}, topic_id, epoch=0))
    session = first.session_id
    # Nothing new anywhere: an empty answer (after the long poll).
    quiet = answer(fetch(h, {}, topic_id, session, 1, wait_ms=100))
    assert quiet.error_code == ErrorCode.NONE and quiet.session_id == session
    assert answered(quiet) == {}
    # Records on partition 1 only: only partition 1 comes back, with them.
    h.append("t", 1, batches=1, records=2)
    h.flush("t", 1)
    news = answer(fetch(h, {}, topic_id, session, 2))
    assert answered(news) == {1: (ErrorCode.NONE, 5, answered(news)[1][2])}
    assert answered(news)[1][2] > 0
    # The client names partition 1 at its new position: answered although nothing new.
    named = answer(fetch(h, {1: 5}, topic_id, session, 3))
    assert answered(named) == {1: (ErrorCode.NONE, 5, 0)}
    # A high watermark move alone is news too.
    h.append("t", 2, batches=1, records=1)
    quiet_again = answer(fetch(h, {}, topic_id, session, 4))
    assert answered(quiet_again) == {}  # appended but not flushed: the high watermark holds
    h.flush("t", 2)
    moved = answer(fetch(h, {}, topic_id, session, 5))
    assert set(answered(moved)) == {2} and answered(moved)[2][1] == 4


def test_the_session_keeps_the_positions_it_was_told() -> None:
    h, topic_id = consumer_harness()
    session = answer(fetch(h, {0: 0, 1: 3}, topic_id, epoch=0)).session_id
    # Partition 0 moved on to 3; partition 1 is not named and stays at 3.
    answer(fetch(h, {0: 3}, topic_id, session, 1))
    h.append("t", 1, batches=1, records=2)
    h.flush("t", 1)
    response = answer(fetch(h, {}, topic_id, session, 2))
    part = response.responses[0].partitions
    assert [p.partition_index for p in part] == [1]
    # Records from offset 3, where the session holds partition 1, not from 0.
    assert part[0].records.position > 0 and answered(response)[1][1] == 5


def test_a_forgotten_partition_is_no_longer_fetched() -> None:
    h, topic_id = consumer_harness()
    session = answer(fetch(h, {0: 3, 1: 3}, topic_id, epoch=0)).session_id
    answer(fetch(h, {}, topic_id, session, 1, forget=[1]))
    h.append("t", 1, batches=1, records=2)
    h.flush("t", 1)
    assert answered(answer(fetch(h, {}, topic_id, session, 2))) == {}


def test_an_error_is_answered_every_time() -> None:
    h, topic_id = consumer_harness()
    # Leader epoch 5 is in the future here: UNKNOWN_LEADER_EPOCH, every time.
    session = answer(fetch(h, {0: 3}, topic_id, epoch=0, current_leader_epoch=5)).session_id
    for epoch in (1, 2):
        again = answer(fetch(h, {}, topic_id, session, epoch))
        assert answered(again)[0][0] == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_session_errors() -> None:
    h, topic_id = consumer_harness()
    session = answer(fetch(h, {0: 3}, topic_id, epoch=0)).session_id
    unknown = answer(fetch(h, {}, topic_id, session + 1, 1))
    assert unknown.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert unknown.session_id == 0 and unknown.responses == []
    wrong_epoch = answer(fetch(h, {}, topic_id, session, 7))
    assert wrong_epoch.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    names = answer(fetch(h, {0: 3}, topic_id, session, 1, version=12))
    assert names.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    # None of these used up the epoch: epoch 1 still works.
    assert answer(fetch(h, {}, topic_id, session, 1)).error_code == ErrorCode.NONE


def test_epoch_minus_one_closes_the_session_and_epoch_0_replaces_it() -> None:
    h, topic_id = consumer_harness()
    session = answer(fetch(h, {0: 3}, topic_id, epoch=0)).session_id
    closed = answer(fetch(h, {0: 3}, topic_id, session, -1))
    assert closed.session_id == 0 and set(answered(closed)) == {0}  # full, sessionless
    gone = answer(fetch(h, {}, topic_id, session, 1))
    assert gone.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    second = answer(fetch(h, {0: 3}, topic_id, epoch=0)).session_id
    third = answer(fetch(h, {0: 3}, topic_id, second, 0)).session_id
    assert third not in (0, second)
    assert list(h.state.fetch_sessions.sessions) == [third]


def test_old_versions_and_sessionless_fetches_get_no_session() -> None:
    h, topic_id = consumer_harness()
    assert answer(fetch(h, {0: 3}, topic_id, epoch=-1)).session_id == 0
    # Fetch v6 has no session fields: a request at epoch 0 is still sessionless.
    old = answer(fetch(h, {0: 3}, topic_id, epoch=0, version=6))
    assert old.session_id == 0 and set(answered(old)) == {0}
    assert h.state.fetch_sessions.sessions == {}


def test_a_full_cache_refuses_new_sessions_until_one_is_idle_long_enough() -> None:
    h, topic_id = consumer_harness()
    h.state.fetch_sessions = FetchSessionCache(slots=1)
    first = answer(fetch(h, {0: 3}, topic_id, epoch=0)).session_id
    assert first != 0
    h.state.monotonic_ms = EVICTION_MS - 1  # sessions age on the monotonic clock
    refused = answer(fetch(h, {0: 3}, topic_id, epoch=0))
    assert refused.session_id == 0 and set(answered(refused)) == {0}  # served, full
    h.state.monotonic_ms = EVICTION_MS
    taken = answer(fetch(h, {0: 3}, topic_id, epoch=0)).session_id
    assert taken not in (0, first)
    assert list(h.state.fetch_sessions.sessions) == [taken]


def test_a_follower_displaces_a_consumer_session_from_a_full_cache() -> None:
    h = new_harness()
    h.register_broker(FOLLOWER)
    topic_id = h.add_topic("t", [[h.node_id, FOLLOWER]])
    h.state.fetch_sessions = FetchSessionCache(slots=1)
    consumer = answer(fetch(h, {0: 0}, topic_id, epoch=0)).session_id
    assert consumer != 0
    follower = answer(fetch(h, {0: 0}, topic_id, epoch=0, replica=FOLLOWER)).session_id
    assert follower not in (0, consumer)
    # A consumer cannot displace the follower in turn.
    assert answer(fetch(h, {0: 0}, topic_id, epoch=0)).session_id == 0


async def _flushed(offsets: dict[tuple[str, int], int]) -> frozenset[tuple[str, int]]:
    return frozenset()


def test_a_follower_in_a_session_stays_caught_up_while_it_names_nothing() -> None:
    """The leader counts every partition of the session as fetched again, so a follower
    at the log end of a quiet partition keeps its caught-up time fresh (and its place in
    the ISR) although its incremental requests name nothing."""

    async def scenario() -> None:
        h = new_harness()
        h.register_broker(FOLLOWER)
        topic_id = h.add_topic("t", [[h.node_id, FOLLOWER]] * 2)
        service = ReplicationService(
            h.state,
            h.server,
            NodeStorage(_flushed, lambda key: None),
            NodeControllerChannel(lambda: 1, lambda: None),
        )
        partitions = h.image.topics_by_name["t"].partitions
        for index in (0, 1):
            service.new_role(h.partition("t", index), partitions[index], 0)
        leader = h.partition("t", 1).leader_state
        assert leader is not None
        base = monotonic_ms() + 10_000  # the leader started on the real clock
        h.state.monotonic_ms = base
        session = answer(
            fetch(h, {0: 0, 1: 0}, topic_id, epoch=0, replica=FOLLOWER, current_leader_epoch=0)
        ).session_id
        follower = leader.follower_state(FOLLOWER)
        assert follower is not None and follower.last_caught_up_time_ms == base
        h.state.monotonic_ms = base + 25_000
        quiet = answer(fetch(h, {}, topic_id, session, 1, replica=FOLLOWER))
        assert answered(quiet) == {}
        follower = leader.follower_state(FOLLOWER)
        assert follower is not None and follower.last_caught_up_time_ms == base + 25_000

    asyncio.run(scenario())


def _leader_with_follower(partitions: int = 2) -> tuple[Harness, uuid.UUID, Any]:
    h = new_harness()
    h.register_broker(FOLLOWER)
    topic_id = h.add_topic("t", [[h.node_id, FOLLOWER]] * partitions)
    service = ReplicationService(
        h.state,
        h.server,
        NodeStorage(_flushed, lambda k: None),
        NodeControllerChannel(lambda: 1, lambda: None),
    )
    images = h.image.topics_by_name["t"].partitions
    for index in range(partitions):
        service.new_role(h.partition("t", index), images[index], 0)
    h.state.monotonic_ms = monotonic_ms() + 10_000  # the leaders started on the real clock
    return h, topic_id, service


def _follower_fetch(
    h: Harness,
    topic_id: uuid.UUID,
    positions: dict[int, tuple[int, int]],
    session_id: int = 0,
    epoch: int = 0,
) -> Any:
    """A follower's fetch: partition -> (fetch offset, last fetched epoch)."""
    request = FetchRequest(
        replica_state=ReplicaState(replica_id=FOLLOWER, replica_epoch=FOLLOWER * 10),
        max_wait_ms=0,
        min_bytes=1,
        session_id=session_id,
        session_epoch=epoch,
        topics=(
            [
                FetchTopic(
                    topic_id=topic_id,
                    partitions=[
                        FetchPartition(
                            partition=p,
                            fetch_offset=o,
                            last_fetched_epoch=e,
                            current_leader_epoch=0,
                            partition_max_bytes=1 << 20,
                        )
                        for p, (o, e) in positions.items()
                    ],
                )
            ]
            if positions
            else []
        ),
    )
    return answer(handle_fetch(h.state, header(1, VERSION), request))


def test_a_quiet_partition_is_left_out_until_records_or_a_new_high_watermark() -> None:
    async def scenario() -> None:
        h, topic_id, _ = _leader_with_follower()
        for index in (0, 1):
            h.partition("t", index).leader_state.on_append(h.append("t", index))  # type: ignore[union-attr]
        session = _follower_fetch(h, topic_id, {0: (3, 0), 1: (3, 0)}).session_id
        assert answered(_follower_fetch(h, topic_id, {}, session, 1)) == {}
        # Records on partition 0: answered, from the follower's offset.
        h.partition("t", 0).leader_state.on_append(h.append("t", 0))  # type: ignore[union-attr]
        news = _follower_fetch(h, topic_id, {}, session, 2)
        assert set(answered(news)) == {0} and answered(news)[0][2] > 0
        # A new high watermark on partition 1 (flushed, both replicas at 3): answered.
        leader = h.partition("t", 1).leader_state
        assert leader is not None
        h.flush("t", 1)
        leader.on_flush(3)
        assert leader.high_watermark == 3
        # The follower names partition 0 at its new end: answered (named), no records.
        moved = _follower_fetch(h, topic_id, {0: (6, 0)}, session, 3)
        assert answered(moved) == {0: (ErrorCode.NONE, 0, 0), 1: (ErrorCode.NONE, 3, 0)}
        assert answered(_follower_fetch(h, topic_id, {}, session, 4)) == {}

    asyncio.run(scenario())


def test_a_diverging_follower_is_told_on_every_fetch_until_it_truncates() -> None:
    """The shortcut for quiet partitions never skips the check of the follower's
    position against the leader's history: a follower whose last epoch the leader does
    not have hears the diverging epoch again on each fetch, even while it names
    nothing and stands at the leader's log end."""

    async def scenario() -> None:
        h, topic_id, _ = _leader_with_follower(1)
        leader = h.partition("t", 0).leader_state
        assert leader is not None
        log = h.partition("t", 0).log
        log.append_as_leader(batch(2), 0, h.state.now_ms)  # offsets 0-1 in epoch 0
        log.assign_leader_epoch(1)
        log.append_as_leader(batch(3), 1, h.state.now_ms)  # offsets 2-4 in epoch 1
        leader.on_append(5)
        # The follower stands at the leader's end, 5, but says offset 4 was written in
        # epoch 0, which ends at 2 here: its records 2-4 are another history.
        first = _follower_fetch(h, topic_id, {0: (5, 0)})
        data = first.responses[0].partitions[0]
        assert (data.diverging_epoch.epoch, data.diverging_epoch.end_offset) == (0, 2)
        for epoch in (1, 2):
            again = _follower_fetch(h, topic_id, {}, first.session_id, epoch)
            diverging = again.responses[0].partitions[0].diverging_epoch
            assert (diverging.epoch, diverging.end_offset) == (0, 2)
        # Never counted as holding those records: the high watermark stays at 0.
        h.flush("t", 0)
        leader.on_flush(5)
        assert leader.high_watermark == 0

    asyncio.run(scenario())


def test_a_new_leader_epoch_here_is_checked_again_although_the_follower_names_nothing() -> None:
    """A quiet partition is settled without checks only for the leader (of one leader
    epoch) that checked it. When this node leads again in a newer epoch, a follower that
    has not seen the new metadata and names nothing is told FENCED_LEADER_EPOCH at once,
    instead of being counted as fetching under an epoch it does not know."""

    async def scenario() -> None:
        h, topic_id, service = _leader_with_follower(1)
        partition = h.partition("t", 0)
        leader = partition.leader_state
        assert leader is not None
        leader.on_append(h.append("t", 0))
        first = _follower_fetch(h, topic_id, {0: (3, 0)})
        assert answered(_follower_fetch(h, topic_id, {}, first.session_id, 1)) == {}
        image = h.image.topics_by_name["t"].partitions[0]
        service.new_role(partition, dataclasses.replace(image, leader_epoch=1), 0)
        assert partition.leader_state is not None and partition.leader_state is not leader
        again = _follower_fetch(h, topic_id, {}, first.session_id, 2)
        assert answered(again) == {0: (ErrorCode.FENCED_LEADER_EPOCH, -1, 0)}

    asyncio.run(scenario())
