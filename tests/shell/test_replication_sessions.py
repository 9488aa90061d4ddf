"""The fetcher in an incremental fetch session: after the first full fetch it names only
what moved, and a partition the answer leaves out is fetched again at once (it had
nothing new), where a full answer without it means a failed fetch and a pause."""

from __future__ import annotations

import asyncio

from odradek.protocol.messages import FetchResponse
from odradek.protocol.messages.fetch_response import FetchableTopicResponse, PartitionData
from odradek.replication.fetch_session import Answer, FetchSessionHandler
from odradek.shell.clock import monotonic_ms
from odradek.shell.replication import NodeControllerChannel, NodeStorage, ReplicationService
from tests.broker.harness import new_harness

LEADER = 2
SESSION = 9


async def _flushed(offsets: dict[tuple[str, int], int]) -> frozenset[tuple[str, int]]:
    return frozenset()


def test_the_fetcher_names_only_what_moved_and_refetches_what_was_left_out() -> None:
    async def scenario() -> None:
        h = new_harness()
        h.register_broker(LEADER)
        topic_id = h.add_topic("t", [[LEADER, h.node_id], [LEADER, h.node_id]])
        service = ReplicationService(
            h.state,
            h.server,
            NodeStorage(_flushed, lambda key: None),
            NodeControllerChannel(lambda: 1, lambda: None),
        )
        partitions = h.image.topics_by_name["t"].partitions
        for index in (0, 1):
            service.new_role(h.partition("t", index), partitions[index], 0)
        service._fetchers.pop(LEADER).cancel()  # the test plays the fetcher's loop
        held = service._awaits_loss_record  # the shell holds these back
        session = FetchSessionHandler()

        fetches = service.manager.next_fetches(LEADER, 0, set(), held)
        request, asked = service.manager.fetch_request(
            fetches, service.broker_epoch(), session, set(), wait_ms=500, max_bytes=1 << 20
        )
        assert (request.session_id, request.session_epoch) == (0, 0)
        assert [p.partition for t in request.topics for p in t.partitions] == [0, 1]
        full = FetchResponse(
            session_id=SESSION,
            responses=[
                FetchableTopicResponse(
                    topic_id=topic_id,
                    partitions=[
                        PartitionData(partition_index=i, high_watermark=0, records=b"")
                        for i in (0, 1)
                    ],
                )
            ],
        )
        answer = session.on_answer(asked, full.error_code, full.session_id)
        assert answer is Answer.FULL
        service._carry_out_all(service.manager.apply_fetch(fetches, full, answer, monotonic_ms()))

        # Nothing moved: the incremental request names nothing, and its empty answer
        # leaves both partitions ready to fetch again at once.
        fetches = service.manager.next_fetches(LEADER, 0, set(), held)
        request, asked = service.manager.fetch_request(
            fetches, service.broker_epoch(), session, set(), wait_ms=500, max_bytes=1 << 20
        )
        assert (request.session_id, request.session_epoch) == (SESSION, 1)
        assert request.topics == [] and request.forgotten_topics_data == []
        empty = FetchResponse(session_id=SESSION)
        answer = session.on_answer(asked, empty.error_code, empty.session_id)
        assert answer is Answer.INCREMENTAL
        service._carry_out_all(service.manager.apply_fetch(fetches, empty, answer, monotonic_ms()))
        again = service.manager.next_fetches(LEADER, 0, set(), held)
        assert set(again) == {("t", 0), ("t", 1)}

        # The same empty answer read as a full one is two failed fetches: both pause.
        service._carry_out_all(
            service.manager.apply_fetch(again, empty, Answer.FULL, monotonic_ms())
        )
        assert service.manager.next_fetches(LEADER, 0, set(), held) == {}

        # Partition 1 appended records: the next request names it alone, at its new end.
        h.append("t", 1, batches=1, records=3)
        after_the_pause = monotonic_ms() + 5_000
        fetches = service.manager.next_fetches(LEADER, after_the_pause, set(), held)
        assert set(fetches) == {("t", 0), ("t", 1)}
        request, asked = service.manager.fetch_request(
            fetches, service.broker_epoch(), session, set(), wait_ms=500, max_bytes=1 << 20
        )
        named = [(p.partition, p.fetch_offset) for t in request.topics for p in t.partitions]
        assert named == [(1, 3)] and request.session_epoch == 2

    asyncio.run(scenario())
