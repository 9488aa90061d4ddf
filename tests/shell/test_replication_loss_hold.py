"""A replica that dropped records an unclean election gave up fetches that partition
again only once the controller has recorded its loss report: a replica back in the ISR
then means the record of what the partition lost is complete (ADR 0012)."""

from __future__ import annotations

import asyncio

from odradek.controller.unclean_history import LossReport
from odradek.protocol.messages.fetch_response import PartitionData
from odradek.replication.follower import FollowerAction, FollowerDecision
from odradek.shell.replication import NodeControllerChannel, NodeStorage, ReplicationService
from tests.broker.harness import new_harness

LEADER = 2


async def _flushed(offsets: dict[tuple[str, int], int]) -> frozenset[tuple[str, int]]:
    return frozenset()


def test_a_replica_that_dropped_records_waits_for_its_report_before_fetching_again() -> None:
    async def scenario() -> None:
        h = new_harness()
        h.register_broker(LEADER)
        h.add_topic("t", [[LEADER, h.node_id], [LEADER, h.node_id]])
        recorded = asyncio.Event()
        reports: list[LossReport] = []

        def report_loss(report: LossReport) -> asyncio.Event:
            reports.append(report)
            return recorded

        service = ReplicationService(
            h.state,
            h.server,
            NodeStorage(_flushed, lambda key: None),
            NodeControllerChannel(lambda: 1, lambda: None, report_loss),
        )
        partitions = h.image.topics_by_name["t"].partitions
        for index in (0, 1):
            h.append("t", index, batches=2)  # offsets 0..5, all below the high watermark
            service.new_role(h.partition("t", index), partitions[index], 6)
        # Only the state matters here, not a fetcher talking to a leader.
        service._fetchers.pop(LEADER).cancel()
        held = service._awaits_loss_record  # the shell holds these back

        # Partition 0 truncates below its high watermark (an unclean election): a loss.
        dropped = h.partition("t", 0)
        assert dropped.follower_state is not None
        truncation = FollowerDecision(
            FollowerAction.TRUNCATE, 3, offset=3, below_high_watermark=True, reason="test"
        )
        service._carry_out(dropped, dropped.follower_state, truncation, PartitionData(), 0, {}, 6)
        assert [(r.topic, r.partition, r.truncated_to, r.log_end) for r in reports] == [
            ("t", 0, 3, 6)
        ]
        # Until the controller has it, only the other partition is fetched.
        assert set(service.manager.next_fetches(LEADER, 0, set(), held)) == {("t", 1)}
        in_flight = service.manager.next_fetches(LEADER, 0, set(), held)
        assert set(in_flight) == set()  # ("t", 1) is in flight
        recorded.set()
        fetches = service.manager.next_fetches(LEADER, 0, set(), held)
        assert set(fetches) == {("t", 0)}
        assert fetches[("t", 0)][1].fetch_offset == 3

    asyncio.run(scenario())
