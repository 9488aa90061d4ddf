"""A follower's fetcher survives what one partition's data or disk does to it: records
from the leader that do not validate are never appended and are fetched again later,
a disk error takes only that log offline, and an offline log is never fetched (nor its
log end reported to the leader) again. The other partitions go on in every case."""

from __future__ import annotations

import asyncio
import dataclasses
import errno

from odradek.protocol.messages import FetchResponse
from odradek.protocol.messages.fetch_response import FetchableTopicResponse, PartitionData
from odradek.protocol.record_codec import (
    Record,
    encode_batch,
)
from odradek.replication.fetch_session import Answer
from odradek.shell.clock import monotonic_ms
from odradek.shell.replication import NodeControllerChannel, NodeStorage, ReplicationService
from odradek.shell.supervisor import Supervisor
from tests.broker.harness import new_harness

LEADER = 2


async def _flushed(offsets: dict[tuple[str, int], int]) -> frozenset[tuple[str, int]]:
    return frozenset()


def _batch(base_offset: int, count: int = 2) -> bytes:
    data = bytearray(
        encode_batch([Record(offset_delta=i, timestamp=1, value=b"v") for i in range(count)])
    )
    data[0:8] = base_offset.to_bytes(8, "big")
    return bytes(data)


def test_bad_records_and_disk_errors_touch_only_their_partition() -> None:
    async def scenario() -> None:
        h = new_harness()
        h.register_broker(LEADER)
        topic_id = h.add_topic("t", [[LEADER, h.node_id]] * 3)
        service = ReplicationService(
            h.state,
            h.server,
            NodeStorage(_flushed, lambda key: None),
            NodeControllerChannel(lambda: 1, lambda: None),
        )
        images = h.image.topics_by_name["t"].partitions
        for index in (0, 1, 2):
            service.new_role(h.partition("t", index), images[index], 0)
        service._fetchers.pop(LEADER).cancel()  # the test plays the fetcher's loop
        held = service._awaits_loss_record  # the shell holds these back

        fetches = service.manager.next_fetches(LEADER, 0, set(), held)
        assert set(fetches) == {("t", 0), ("t", 1), ("t", 2)}
        garbage = bytearray(_batch(0))
        garbage[-1] ^= 0xFF  # the CRC no longer matches
        h.disk.fail_next("append", errno.ENOSPC, path=h.partition("t", 2).log.directory)
        response = FetchResponse(
            responses=[
                FetchableTopicResponse(
                    topic_id=topic_id,
                    partitions=[
                        PartitionData(partition_index=0, high_watermark=2, records=_batch(0)),
                        PartitionData(partition_index=1, high_watermark=2, records=garbage),
                        PartitionData(partition_index=2, high_watermark=2, records=_batch(0)),
                    ],
                )
            ],
        )
        flush = service._carry_out_all(
            service.manager.apply_fetch(fetches, response, Answer.FULL, monotonic_ms())
        )
        # Partition 0 appended and asks for its flush; 1 appended nothing; 2 is offline.
        assert flush == {("t", 0): 2}
        assert h.partition("t", 0).log.log_end_offset == 2
        assert h.partition("t", 1).log.log_end_offset == 0
        assert h.partition("t", 1).log.offline is None
        assert h.partition("t", 2).log.offline is not None
        # After its backoff partition 1 is fetched again from the same offset; the
        # offline partition 2 never again: its log end may not be on its disk.
        later = service.manager.next_fetches(LEADER, monotonic_ms() + 5_000, set(), held)
        assert set(later) == {("t", 0), ("t", 1)}
        assert later[("t", 1)][1].fetch_offset == 0

    asyncio.run(scenario())


def test_a_fetcher_that_fails_on_a_bug_is_fatal_not_silent() -> None:
    """A fetcher runs under the node's supervisor: an error no partition's handling
    covers stops the node, where before the task ended and its replicas looked alive."""
    fatal: list[str] = []

    async def scenario() -> None:
        h = new_harness()
        h.register_broker(LEADER)
        h.add_topic("t", [[LEADER, h.node_id]])
        service = ReplicationService(
            h.state,
            h.server,
            NodeStorage(_flushed, lambda key: None),
            NodeControllerChannel(lambda: 1, lambda: None),
            supervisor=Supervisor(lambda name, error: fatal.append(name)),
        )

        def broken(leader_id: int) -> tuple[str, int] | None:
            raise RuntimeError("a bug in the fetch loop")

        service._broker_address = broken  # type: ignore[method-assign,assignment]
        service.new_role(h.partition("t", 0), h.image.topics_by_name["t"].partitions[0], 0)
        await asyncio.sleep(0.05)

    asyncio.run(scenario())
    assert fatal == [f"fetcher-{LEADER}"]


def test_a_log_gone_offline_takes_a_new_leader_epoch_without_failing_the_node() -> None:
    """The scrub may take a log offline at any time, also just before the controller
    gives its partition a new leader epoch: the partition stays offline here (its
    requests get KAFKA_STORAGE_ERROR) and the other partitions take their roles."""

    async def scenario() -> None:
        h = new_harness()
        h.add_topic("t", [[h.node_id]] * 2)
        service = ReplicationService(
            h.state,
            h.server,
            NodeStorage(_flushed, lambda key: None),
            NodeControllerChannel(lambda: 1, lambda: None),
        )
        broken = h.partition("t", 0)
        broken.log.offline = "scrub: corrupt batch in 00000000000000000000.log at position 0"
        images = h.image.topics_by_name["t"].partitions
        newer = [dataclasses.replace(images[i], leader_epoch=5) for i in (0, 1)]
        service.new_role(broken, newer[0], 0)
        service.new_role(h.partition("t", 1), newer[1], 0)
        assert broken.leader_state is not None
        assert h.partition("t", 1).log.epochs.latest_epoch() == 5

    asyncio.run(scenario())
