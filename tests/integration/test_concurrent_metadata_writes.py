"""Many clients asking at once for what writes metadata (producer id blocks for
InitProducerId, auto-created topics) get one decision each, never two on one image.

A handler's records are decided on the image it saw; a commit applied before its task
first ran once passed for seen, so two requests decided on one image both committed:
one block of producer ids handed out twice (two idempotent producers with one id), a
topic created twice, and every node's image broken by the replay. Seen by `odradek
verify`'s disk-full runs (1 in 26) and at once by 40 clients on one node.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from odradek.protocol.messages import InitProducerIdRequest, MetadataRequest
from odradek.protocol.messages.metadata_request import MetadataRequestTopic
from odradek.shell.peer_client import PeerConnection
from tests.integration.nodes import NodeProcess

CLIENTS = 40
ROUNDS = 30


async def _storm(bootstrap: str) -> list[int]:
    host, port = bootstrap.rsplit(":", 1)
    peers = [PeerConnection(host, int(port), client_id=f"client-{i}") for i in range(CLIENTS)]
    producer_ids: list[int] = []
    try:
        for round_ in range(ROUNDS):
            asked = []
            for i, peer in enumerate(peers):
                if i % 2:
                    asked.append(
                        peer.request(
                            InitProducerIdRequest(
                                transactional_id=None, transaction_timeout_ms=60_000
                            ),
                            4,
                            30,
                        )
                    )
                else:  # six clients at a time auto-create each new topic
                    topic = MetadataRequestTopic(name=f"storm-{round_}-{i % 6}")
                    asked.append(
                        peer.request(
                            MetadataRequest(topics=[topic], allow_auto_topic_creation=True),
                            9,
                            30,
                        )
                    )
            for answer in await asyncio.gather(*asked):
                if hasattr(answer, "producer_id"):
                    producer_ids.append(answer.producer_id)
    finally:
        for peer in peers:
            await peer.close()
    return producer_ids


def test_concurrent_metadata_writes_are_decided_once_each(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path)
    bootstrap = node.start()
    try:
        producer_ids = asyncio.run(_storm(bootstrap))
        assert len(producer_ids) == ROUNDS * CLIENTS // 2
        assert len(set(producer_ids)) == len(producer_ids), "a producer id handed out twice"
        assert node.process is not None and node.process.poll() is None
        log = node.log_path.read_text()
        assert "InvariantError" not in log and "internal error" not in log
    finally:
        node.kill()
