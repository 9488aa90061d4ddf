"""The offline-partition alarm of the active controller."""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest

from odradek.protocol.metadata import PartitionChangeRecord
from odradek.shell.controller_service import ControllerService
from tests.broker.harness import new_harness


async def _forward(payload: bytes) -> bytes:
    return payload


def test_a_leaderless_partition_raises_the_alarm_once_and_clears_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = new_harness()
    h.register_broker(2)
    h.add_topic("t", [[2, 1]])
    topic_id = h.image.topics_by_name["t"].topic_id
    service = ControllerService(cast(Any, None), lambda: h.image, "c", 9000, _forward)
    caplog.set_level(logging.WARNING, logger="odradek.controller")
    service.check_offline()
    assert service.offline == {}
    h.replay([PartitionChangeRecord(partition_id=0, topic_id=topic_id, leader=-1, isr=[2])])
    service.check_offline()
    service.check_offline()
    offline_lines = [r for r in caplog.records if "offline" in r.getMessage()]
    assert len(offline_lines) == 1 and "t-0" in offline_lines[0].getMessage()
    assert service.offline == {("t", 0): [2]}
    h.replay([PartitionChangeRecord(partition_id=0, topic_id=topic_id, leader=2)])
    service.check_offline()
    assert service.offline == {}
    assert any("has a leader again" in r.getMessage() for r in caplog.records)
