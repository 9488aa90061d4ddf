"""A broker's loss reports reach the controller at once, and their replica learns when
they are recorded (it fetches again only then: see ``ReplicationService``)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, cast

from odradek.controller.unclean_history import LOSS_REPORTS_TAG, LossReport, decode_loss_reports
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import BrokerHeartbeatRequest, BrokerHeartbeatResponse
from odradek.shell.broker_lifecycle import BrokerLifecycle

REPORT = LossReport(
    topic="t", partition=0, leader_epoch=3, broker=1, high_watermark=50, truncated_to=20,
    log_end=60,
)  # fmt: skip


class FakeController:
    """Answers heartbeats with the next queued error code (NONE when none is queued)."""

    def __init__(self) -> None:
        self.heartbeats: list[tuple[float, BrokerHeartbeatRequest]] = []
        self.errors: list[int] = []

    async def request(self, request: Any, version: int, timeout_s: float) -> Any:
        assert isinstance(request, BrokerHeartbeatRequest)
        self.heartbeats.append((asyncio.get_running_loop().time(), request))
        error = self.errors.pop(0) if self.errors else ErrorCode.NONE
        return BrokerHeartbeatResponse(error_code=error, is_fenced=False)


def reports_in(request: BrokerHeartbeatRequest) -> list[LossReport]:
    return [
        report
        for tag, data in request.unknown_tagged_fields
        if tag == LOSS_REPORTS_TAG
        for report in decode_loss_reports(data)
    ]


def lifecycle(controller: FakeController) -> BrokerLifecycle:
    broker = BrokerLifecycle(
        broker_id=1,
        cluster_id="c",
        listeners=[],
        rack=None,
        log_dirs=[uuid.uuid4()],
        quorum=cast(Any, None),
        metadata_offset=lambda: 0,
        heartbeat_interval_ms=60_000,  # only a loss report can make it heartbeat again
        request_timeout_ms=1000,
    )
    broker.broker_epoch = 7
    broker._controller_address = lambda: ("127.0.0.1", 1)  # type: ignore[method-assign]
    broker._peer = lambda address: cast(Any, controller)  # type: ignore[method-assign]
    return broker


async def until(check: Any, timeout_s: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not check():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_a_loss_report_is_sent_at_once_and_marked_recorded_when_answered() -> None:
    async def scenario() -> None:
        controller = FakeController()
        broker = lifecycle(controller)
        task = asyncio.create_task(broker.run())
        await until(lambda: len(controller.heartbeats) == 1)  # the first, then a long wait
        assert reports_in(controller.heartbeats[0][1]) == []
        recorded = broker.report_loss(REPORT)
        assert not recorded.is_set()
        await until(recorded.is_set)
        assert [reports_in(r) for _, r in controller.heartbeats] == [[], [REPORT]]
        # Recorded once: the next heartbeat carries nothing.
        broker._wake.set()
        await until(lambda: len(controller.heartbeats) == 3)
        assert reports_in(controller.heartbeats[2][1]) == []
        task.cancel()

    asyncio.run(scenario())


def test_a_refused_heartbeat_keeps_the_report_and_its_replica_waiting() -> None:
    async def scenario() -> None:
        controller = FakeController()
        broker = lifecycle(controller)
        broker.fenced = False
        # The controller moved: the report must go to the next one, and the replica wait.
        controller.errors = [ErrorCode.NONE, ErrorCode.NOT_CONTROLLER]
        task = asyncio.create_task(broker.run())
        await until(lambda: len(controller.heartbeats) == 1)
        recorded = broker.report_loss(REPORT)
        await until(lambda: len(controller.heartbeats) == 2)
        assert reports_in(controller.heartbeats[1][1]) == [REPORT]
        assert not recorded.is_set()
        # Tried again soon, not after the heartbeat interval.
        await until(recorded.is_set)
        assert reports_in(controller.heartbeats[2][1]) == [REPORT]
        task.cancel()

    asyncio.run(scenario())
