"""A broker whose log dir failed names it in a heartbeat (OfflineLogDirs, KIP-858): the
controller takes it out of every ISR and leadership at once, records the dir in the
broker's configs for `cluster health`, and never unfences that process again; a new
incarnation that registers its dirs clears the record."""

from __future__ import annotations

import uuid

from odradek.controller.image import CONFIG_RESOURCE_BROKER
from odradek.controller.offline_log_dirs import OFFLINE_LOG_DIRS_CONFIG, offline_log_dirs
from odradek.protocol.error_codes import ErrorCode
from tests.controller.test_brokers import Cluster, kinds


def dir_of(broker_id: int) -> uuid.UUID:
    return uuid.UUID(int=0xD000 + broker_id)  # what registration() registers


def test_a_failed_log_dir_moves_leadership_to_the_isr_and_fences_the_broker() -> None:
    cluster = Cluster()
    cluster.start(1, 2, 3)
    cluster.partition(0, [3, 1, 2])  # led by 3
    cluster.partition(1, [1, 2, 3])  # 3 follows
    outcome = cluster.beat(3, offline_log_dirs=[dir_of(3)])
    assert outcome.response.error_code == ErrorCode.NONE
    assert outcome.response.is_fenced
    assert "ConfigRecord" in kinds(outcome.records)
    led, followed = cluster.get(0), cluster.get(1)
    assert led.leader == 1 and 3 not in led.isr
    assert followed.leader == 1 and 3 not in followed.isr
    assert cluster.image.brokers[3].fenced
    assert offline_log_dirs(cluster.image, 3) == [dir_of(3)]
    assert OFFLINE_LOG_DIRS_CONFIG in cluster.image.configs[(CONFIG_RESOURCE_BROKER, "3")]
    # The same process heartbeating again (caught up) is not unfenced: its replicas
    # went with the dir; nor does its report repeat any record.
    again = cluster.beat(3, offline_log_dirs=[dir_of(3)])
    assert again.response.is_fenced and again.records == []
    assert cluster.beat(3).response.is_fenced


def test_a_shutting_down_broker_with_a_failed_dir_may_stop_at_once() -> None:
    cluster = Cluster()
    cluster.start(1, 2)
    cluster.partition(0, [2, 1])
    outcome = cluster.beat(2, offline_log_dirs=[dir_of(2)], want_shut_down=True)
    assert outcome.response.should_shut_down
    assert cluster.get(0).leader == 1


def test_a_dir_the_broker_never_registered_changes_nothing() -> None:
    cluster = Cluster()
    cluster.start(1)
    outcome = cluster.beat(1, offline_log_dirs=[uuid.UUID(int=0xBAD0)])
    assert not outcome.response.is_fenced
    assert offline_log_dirs(cluster.image, 1) == []


def test_a_new_incarnation_clears_the_record_and_serves_again() -> None:
    cluster = Cluster()
    cluster.start(1, 2)
    cluster.beat(2, offline_log_dirs=[dir_of(2)])
    outcome = cluster.register(2, generation=1)
    assert outcome.error_code == ErrorCode.NONE
    assert offline_log_dirs(cluster.image, 2) == []
    assert not cluster.beat(2).response.is_fenced
