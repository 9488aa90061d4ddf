"""A Fetch that names a follower counts towards the high watermark only when it comes
from that broker as registered now (its broker epoch). Before, any client could put a
follower's id in a Fetch at the log end and move the high watermark past records the
follower never had: acks=all then acknowledged what one copy held."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from odradek.broker.fetch import handle_fetch
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import FetchRequest
from odradek.protocol.messages.fetch_request import FetchPartition, FetchTopic, ReplicaState
from odradek.shell.replication import NodeControllerChannel, NodeStorage, ReplicationService
from tests.broker.harness import Harness, header, new_harness
from tests.broker.test_fetch_sessions import answer

FOLLOWER = 2
REGISTERED_EPOCH = FOLLOWER * 10  # the harness registers broker b with epoch 10 * b
STRANGER = 5


async def _flushed(offsets: dict[tuple[str, int], int]) -> frozenset[tuple[str, int]]:
    return frozenset()


def _fetch(h: Harness, topic_id: uuid.UUID, replica: int, epoch: int, offset: int) -> Any:
    request = FetchRequest(
        replica_state=ReplicaState(replica_id=replica, replica_epoch=epoch),
        max_wait_ms=0,
        min_bytes=1,
        topics=[
            FetchTopic(
                topic_id=topic_id,
                partitions=[
                    FetchPartition(
                        partition=0,
                        fetch_offset=offset,
                        last_fetched_epoch=0,
                        current_leader_epoch=0,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
    )
    return answer(handle_fetch(h.state, header(1, 16), request))


def test_only_the_registered_follower_moves_the_high_watermark() -> None:
    async def scenario() -> None:
        h = new_harness()
        h.register_broker(FOLLOWER)
        h.register_broker(STRANGER)
        topic_id = h.add_topic("t", [[h.node_id, FOLLOWER]])
        service = ReplicationService(
            h.state,
            h.server,
            NodeStorage(_flushed, lambda key: None),
            NodeControllerChannel(lambda: 1, lambda: None),
        )
        partition = h.partition("t", 0)
        service.new_role(partition, h.image.topics_by_name["t"].partitions[0], 0)
        leader = partition.leader_state
        assert leader is not None
        end = h.append("t", 0, batches=2)
        leader.on_append(end)
        h.flush("t", 0)
        service.on_flushed(partition)
        assert leader.high_watermark == 0  # the follower holds nothing yet

        def refused(replica: int, epoch: int) -> None:
            data = _fetch(h, topic_id, replica, epoch, end).responses[0].partitions[0]
            assert data.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert leader.high_watermark == 0

        refused(FOLLOWER, -1)  # a client naming the follower, without its epoch
        refused(FOLLOWER, REGISTERED_EPOCH - 1)  # a process of an older registration
        refused(STRANGER, STRANGER * 10)  # a registered broker, but no replica of it
        data = _fetch(h, topic_id, FOLLOWER, REGISTERED_EPOCH, end).responses[0].partitions[0]
        assert data.error_code == ErrorCode.NONE
        assert leader.high_watermark == end

    asyncio.run(scenario())
