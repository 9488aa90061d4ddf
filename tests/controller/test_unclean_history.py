"""The record of unclean elections: written with the election, completed by the loss
reports of returning replicas (through the heartbeat), bounded, and the controller's
alone to write (operators may only delete it)."""

from __future__ import annotations

from odradek.controller.config_commands import (
    ConfigSchema,
    OpType,
    alter_topic_configs,
    incremental_alter_topic_configs,
)
from odradek.controller.controller import QuorumControllerState
from odradek.controller.elections import unclean_leader_election
from odradek.controller.image import CONFIG_RESOURCE_TOPIC, MetadataImage
from odradek.controller.unclean_history import (
    KEEP,
    LOSS_REPORTS_TAG,
    UNCLEAN_ELECTIONS_CONFIG,
    LossReport,
    UncleanElection,
    decode_loss_reports,
    encode_loss_reports,
    history_records,
    loss_records,
    parse_history,
    truncation_loss,
)
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import BrokerHeartbeatRequest
from odradek.protocol.metadata import ConfigRecord
from tests.controller.test_brokers import CLUSTER_ID, TOPIC, Cluster, registration


def _elected_uncleanly(cluster: Cluster, now_ms: int = 7_000) -> None:
    """Replicas 1,2,3; the ISR {1} dies, then 3 (out of sync) is elected uncleanly."""
    cluster.start(1, 2, 3)
    cluster.partition(0, [1, 2, 3], isr=[1])
    cluster.beat(1, want_fence=True)
    topic = cluster.image.topics_by_id[TOPIC]
    record = unclean_leader_election(
        cluster.image, topic, 0, cluster.get(0), unclean_leader_election_enable=True
    )
    assert record is not None
    history = history_records(cluster.image, [record], now_ms, requested=False)
    cluster.apply([record, *history])


def _history(image: MetadataImage) -> list[UncleanElection]:
    name = image.topics_by_id[TOPIC].name
    configs = image.configs.get((CONFIG_RESOURCE_TOPIC, name), {})
    return parse_history(configs.get(UNCLEAN_ELECTIONS_CONFIG))


def _report(
    epoch: int, broker: int = 1, hw: int = 130, to: int = 120, end: int = 130
) -> LossReport:
    return LossReport(f"t{TOPIC.int:x}", 0, epoch, broker, hw, to, end)


def test_an_unclean_election_is_recorded_with_the_new_leader_and_its_epoch() -> None:
    cluster = Cluster()
    _elected_uncleanly(cluster)
    partition = cluster.get(0)
    assert partition.leader == 2  # the first live replica outside the ISR
    [election] = _history(cluster.image)
    assert election == UncleanElection(0, 2, partition.leader_epoch, 7_000, False)
    assert election.estimated_lost is None  # nobody has come back to tell yet


def test_loss_reports_complete_the_election_whose_epoch_the_broker_followed() -> None:
    cluster = Cluster()
    _elected_uncleanly(cluster)
    epoch = cluster.get(0).leader_epoch
    # A restarted broker: its checkpointed high watermark is behind, so of the ten
    # records it dropped only four are known to have been acknowledged.
    cluster.apply(loss_records(cluster.image, [_report(epoch, broker=1, hw=124, to=120)]))
    # A later epoch of the same history (a leader change after the election) still
    # belongs to it; a second old ISR member reports what it dropped too.
    cluster.apply(
        loss_records(cluster.image, [_report(epoch + 2, broker=4, hw=128, to=120, end=129)])
    )
    [election] = _history(cluster.image)
    assert [(r.broker, r.dropped, r.acknowledged) for r in election.losses] == [
        (1, 10, 4),
        (4, 9, 8),
    ]
    # The old ISR held the same acknowledged records: the largest report of each counts.
    assert (election.estimated_lost, election.acknowledged_lost) == (10, 8)
    # A heartbeat answered after a lost commit repeats the report: nothing changes.
    assert loss_records(cluster.image, [_report(epoch, broker=1, hw=124, to=120)]) == []


def test_a_broker_that_truncates_twice_for_one_election_counts_both() -> None:
    cluster = Cluster()
    _elected_uncleanly(cluster)
    epoch = cluster.get(0).leader_epoch
    # It dropped 120..130, restarted with an older checkpoint and dropped 110..120 too:
    # other records each time, so both count, and the later report replaces nothing.
    cluster.apply(loss_records(cluster.image, [_report(epoch, broker=1, hw=130, to=120)]))
    cluster.apply(loss_records(cluster.image, [_report(epoch, broker=1, hw=115, to=110, end=120)]))
    cluster.apply(loss_records(cluster.image, [_report(epoch, broker=4, hw=129, to=115, end=129)]))
    [election] = _history(cluster.image)
    assert [(r.broker, r.dropped) for r in election.losses] == [(1, 10), (1, 10), (4, 14)]
    assert (election.estimated_lost, election.acknowledged_lost) == (20, 15)


def test_which_truncations_are_losses() -> None:
    cluster = Cluster()
    _elected_uncleanly(cluster)
    epoch = cluster.get(0).leader_epoch
    # Written before the recorded election, dropped now: what the election gave up,
    # whatever a restarted broker's (checkpointed, behind) high watermark says.
    stale_hw = _report(epoch, hw=100, to=120, end=130)
    assert truncation_loss(cluster.image, stale_hw, written_in_epoch=epoch - 1,
                           below_high_watermark=False) == stale_hw  # fmt: skip
    # An uncommitted tail of the new history's own epochs: an ordinary truncation.
    assert truncation_loss(cluster.image, stale_hw, written_in_epoch=epoch,
                           below_high_watermark=False) is None  # fmt: skip
    # Another partition has no election on record; below the high watermark always counts.
    other = LossReport(f"t{TOPIC.int:x}", 1, 9, 1, 100, 120, 130)
    assert truncation_loss(cluster.image, other, written_in_epoch=0,
                           below_high_watermark=False) is None  # fmt: skip
    assert truncation_loss(cluster.image, other, written_in_epoch=0,
                           below_high_watermark=True) == other  # fmt: skip
    # Nothing dropped, nothing to report.
    empty = _report(epoch, hw=130, to=130, end=130)
    assert truncation_loss(cluster.image, empty, written_in_epoch=0,
                           below_high_watermark=True) is None  # fmt: skip


def test_a_report_without_a_recorded_election_is_kept_and_one_for_a_gone_topic_is_not() -> None:
    cluster = Cluster()
    cluster.start(1, 2, 3)
    cluster.partition(0, [1, 2, 3])
    cluster.apply(loss_records(cluster.image, [_report(4)]))
    [election] = _history(cluster.image)
    assert (election.leader, election.leader_epoch, election.estimated_lost) == (-1, 4, 10)
    gone = LossReport("no-such-topic", 0, 4, 1, 130, 120, 130)
    assert loss_records(cluster.image, [gone]) == []


def test_the_history_keeps_the_newest_elections() -> None:
    cluster = Cluster()
    _elected_uncleanly(cluster)
    topic = f"t{TOPIC.int:x}"
    # Each report for a partition without an election on record starts an entry.
    for i in range(1, KEEP + 5):
        cluster.apply(loss_records(cluster.image, [LossReport(topic, i, 4, 1, 130, 120, 130)]))
    history = _history(cluster.image)
    assert len(history) == KEEP
    assert [e.partition for e in history] == list(range(5, KEEP + 5))


def test_the_controller_takes_loss_reports_from_heartbeats_under_the_senders_id() -> None:
    cluster = Cluster()
    _elected_uncleanly(cluster)
    image = cluster.image
    controller = QuorumControllerState(image, cluster_id=CLUSTER_ID, activated_ms=0)
    records, registered = controller.register_broker(registration(1, 1), image.offset + 1, 0)
    cluster.apply(records)
    epoch = cluster.get(0).leader_epoch
    forged = LossReport(f"t{TOPIC.int:x}", 0, epoch, 99, 50, truncated_to=40, log_end=50)
    beat = BrokerHeartbeatRequest(
        broker_id=1,
        broker_epoch=registered.broker_epoch,
        current_metadata_offset=image.offset,
        unknown_tagged_fields=[(LOSS_REPORTS_TAG, encode_loss_reports([forged]))],
    )
    records, response = controller.broker_heartbeat(beat, image.offset + 1, 100)
    assert response.error_code == ErrorCode.NONE
    cluster.apply(records)
    [election] = _history(cluster.image)
    assert [(r.broker, r.dropped) for r in election.losses] == [(1, 10)]
    # A stale broker epoch: the heartbeat is refused and so are its reports.
    stale = BrokerHeartbeatRequest(
        broker_id=1,
        broker_epoch=registered.broker_epoch - 1,
        current_metadata_offset=image.offset,
        unknown_tagged_fields=[(LOSS_REPORTS_TAG, encode_loss_reports([_report(epoch + 1)]))],
    )
    records, response = controller.broker_heartbeat(stale, image.offset + 1, 200)
    assert response.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert not any(isinstance(r, ConfigRecord) for r in records)


def test_reports_survive_the_wire_and_garbage_reads_as_none() -> None:
    reports = [_report(3), _report(4, broker=2)]
    assert decode_loss_reports(encode_loss_reports(reports)) == reports
    assert decode_loss_reports(b"not json") == []
    assert decode_loss_reports(b'[{"topic": "x"}]') == []
    assert parse_history("{broken") == []


ANY = ConfigSchema(validate=lambda configs: configs, list_defaults={})


def test_operators_may_delete_the_history_but_never_set_it() -> None:
    cluster = Cluster()
    _elected_uncleanly(cluster)
    image = cluster.image
    name = image.topics_by_id[TOPIC].name
    assert image.configs[(CONFIG_RESOURCE_TOPIC, name)][UNCLEAN_ELECTIONS_CONFIG]
    for outcome in (
        alter_topic_configs(image, name, [(UNCLEAN_ELECTIONS_CONFIG, "[]")], ANY),
        incremental_alter_topic_configs(
            image, name, [(UNCLEAN_ELECTIONS_CONFIG, OpType.SET, "[]")], ANY
        ),
    ):
        assert outcome.error_code == ErrorCode.INVALID_CONFIG
        assert "written by the controller" in (outcome.error_message or "")
    # The legacy API replaces the whole set, but this key is not the caller's to drop.
    kept = alter_topic_configs(image, name, [("retention.ms", "1000")], ANY)
    assert kept.error_code == ErrorCode.NONE
    assert all(r.name != UNCLEAN_ELECTIONS_CONFIG for r in kept.records)
    deleted = incremental_alter_topic_configs(
        image, name, [(UNCLEAN_ELECTIONS_CONFIG, OpType.DELETE, None)], ANY
    )
    assert deleted.error_code == ErrorCode.NONE
    cluster.apply(deleted.records)
    assert _history(cluster.image) == []
