"""acks=all waits for the in-sync replicas up to the request's timeout, and then answers
REQUEST_TIMED_OUT for each partition not done, as Kafka does: the wait never ends in
anything else (a cancelled wait would leave the connection without answers)."""

from __future__ import annotations

import asyncio

from odradek.protocol.error_codes import ErrorCode
from odradek.shell.replication import NodeControllerChannel, NodeStorage, ReplicationService
from tests.broker.harness import new_harness

FOLLOWER = 2


async def _flushed(offsets: dict[tuple[str, int], int]) -> frozenset[tuple[str, int]]:
    return frozenset()


def test_a_produce_the_replicas_do_not_confirm_in_time_gets_request_timed_out() -> None:
    async def scenario() -> None:
        h = new_harness()
        h.register_broker(FOLLOWER)
        h.add_topic("t", [[h.node_id, FOLLOWER]] * 2)
        service = ReplicationService(
            h.state,
            h.server,
            NodeStorage(_flushed, lambda key: None),
            NodeControllerChannel(lambda: 1, lambda: None),
        )
        images = h.image.topics_by_name["t"].partitions
        for index in (0, 1):
            partition = h.partition("t", index)
            service.new_role(partition, images[index], 0)
            leader = partition.leader_state
            assert leader is not None
            leader.on_append(h.append("t", index))
        # One partition, then two: the follower never fetches, so neither is confirmed.
        assert await service.await_replication({("t", 0): 3}, 20) == {
            ("t", 0): ErrorCode.REQUEST_TIMED_OUT
        }
        both = await service.await_replication({("t", 0): 3, ("t", 1): 3}, 20)
        assert both == {
            ("t", 0): ErrorCode.REQUEST_TIMED_OUT,
            ("t", 1): ErrorCode.REQUEST_TIMED_OUT,
        }
        assert all(not waiters for waiters in service._waiters.values())

    asyncio.run(scenario())
