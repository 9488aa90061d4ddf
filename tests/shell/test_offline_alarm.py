"""The active controller's partition alarms: offline partitions, unclean elections."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace
from typing import Any, cast

import pytest

from odradek.protocol.metadata import PartitionChangeRecord
from odradek.protocol.metadata_record import decode_metadata_record
from odradek.security.principal import KafkaPrincipal
from odradek.shell.controller_service import ControllerService
from tests.broker.harness import CLUSTER_ID, new_harness


async def _forward(payload: bytes, principal: KafkaPrincipal, host: str) -> bytes:
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


class FakeQuorum:
    """The leader side of the metadata quorum: proposals commit at once into the image."""

    writable = True

    def __init__(self, replay: Any) -> None:
        self.replay = replay
        self.raft = SimpleNamespace(epoch=1)

    async def propose(self, records: list[bytes]) -> int:
        self.replay([decode_metadata_record(r)[0] for r in records])
        return 0


def test_unclean_election_only_where_enabled_and_logged_as_loss(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = new_harness()
    h.register_broker(2)
    h.register_broker(3)
    h.add_topic("safe", [[2, 3]])
    h.add_topic("unsafe", [[2, 3]])
    for name in ("safe", "unsafe"):
        topic_id = h.image.topics_by_name[name].topic_id
        # Broker 2, the last ISR member, is gone; broker 3 is alive but out of sync.
        h.replay([PartitionChangeRecord(partition_id=0, topic_id=topic_id, leader=-1, isr=[2])])
    h.register_broker(2, fenced=True)
    service = ControllerService(
        cast(Any, FakeQuorum(h.replay)), lambda: h.image, CLUSTER_ID, 9000, _forward
    )
    caplog.set_level(logging.ERROR, logger="odradek.controller")
    asyncio.run(service.unclean_elections(lambda topic: topic == "unsafe"))
    assert h.image.topics_by_name["safe"].partitions[0].leader == -1
    unsafe = h.image.topics_by_name["unsafe"].partitions[0]
    assert (unsafe.leader, unsafe.isr) == (3, [3])
    assert any("UNCLEAN leader election for unsafe-0" in r.getMessage() for r in caplog.records)


def test_many_partitions_going_offline_at_once_make_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A single-node cluster that stops takes every partition offline at once: the alarm
    # names them in one line per topic, so that a partition that differs stands out.
    h = new_harness()
    h.register_broker(2)
    h.add_topic("t", [[2]] * 1000)
    topic_id = h.image.topics_by_name["t"].topic_id
    service = ControllerService(cast(Any, None), lambda: h.image, "c", 9000, _forward)
    caplog.set_level(logging.WARNING, logger="odradek.controller")
    service.check_offline()
    gone = [i for i in range(1000) if i != 500]
    h.replay(
        [PartitionChangeRecord(partition_id=i, topic_id=topic_id, leader=-1, isr=[2]) for i in gone]
    )
    service.check_offline()
    lines = [r.getMessage() for r in caplog.records if "offline" in r.getMessage()]
    assert len(lines) == 1
    assert "999 partitions of t (0-499, 501-999) offline" in lines[0]
    assert len(service.offline) == 999
    h.replay([PartitionChangeRecord(partition_id=i, topic_id=topic_id, leader=2) for i in gone])
    service.check_offline()
    back = [r.getMessage() for r in caplog.records if "leader again" in r.getMessage()]
    assert back == ["999 partitions of t (0-499, 501-999) have a leader again"]
