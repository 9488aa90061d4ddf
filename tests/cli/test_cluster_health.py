"""``odradek cluster health``: the verdict rule by rule, and once against a real node."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli.cluster import (
    HealthReport,
    PartitionState,
    QuorumHealth,
    TopicSafety,
    evaluate,
    format_report,
    offline_log_dirs_from_configs,
    partitions_from_metadata,
    quorum_from_response,
    report_as_dict,
    safety_from_configs,
)
from odradek.cli.main import main
from odradek.controller.image import CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC
from odradek.controller.offline_log_dirs import OFFLINE_LOG_DIRS_CONFIG
from odradek.controller.unclean_history import LossReport, UncleanElection, render_history
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import DescribeConfigsResponse, DescribeQuorumResponse
from odradek.protocol.messages import describe_configs_response as dcr
from odradek.protocol.messages import describe_quorum_response as dq
from odradek.protocol.messages import metadata_response as md
from odradek.raft.wire import METADATA_PARTITION, METADATA_TOPIC
from tests.integration.nodes import NodeProcess

OK = QuorumHealth("ok", "leader 1")
LOSS = LossReport("a", 0, 5, broker=1, high_watermark=128, truncated_to=120, log_end=130)


def partition(
    topic: str, index: int, leader: int, replicas: tuple[int, ...], isr: tuple[int, ...]
) -> PartitionState:
    return PartitionState(topic, index, leader, replicas, isr)


def names(alarms: object) -> list[str]:
    assert isinstance(alarms, tuple)
    return [a.partition.name for a in alarms]


# --- The verdict ----------------------------------------------------------------------


def test_a_fully_replicated_safe_cluster_is_healthy() -> None:
    report = evaluate(
        [partition("orders", 0, 1, (1, 2, 3), (1, 2, 3))],
        {"orders": TopicSafety(min_insync_replicas=2)},
        OK,
    )
    assert report.healthy
    assert not (report.offline or report.under_min_isr or report.under_replicated)
    assert report.warnings == ()


def test_each_partition_is_reported_under_its_worst_alarm() -> None:
    report = evaluate(
        [
            partition("orders", 0, -1, (1, 2, 3), (1,)),  # no leader
            partition("orders", 1, 2, (1, 2, 3), (2,)),  # 1 in sync, 2 needed
            partition("orders", 2, 3, (1, 2, 3), (2, 3)),  # 2 in sync of 3
            partition("orders", 3, 1, (1, 2, 3), (1, 2, 3)),
        ],
        {"orders": TopicSafety(min_insync_replicas=2)},
        OK,
    )
    assert names(report.offline) == ["orders-0"]
    assert names(report.under_min_isr) == ["orders-1"]
    assert names(report.under_replicated) == ["orders-2"]
    assert not report.healthy


def test_under_replicated_alone_is_an_alarm() -> None:
    report = evaluate(
        [partition("t", 0, 1, (1, 2, 3), (1, 2))],
        {"t": TopicSafety(min_insync_replicas=2)},
        OK,
    )
    assert names(report.under_replicated) == ["t-0"]
    assert not report.healthy


def test_a_stalled_quorum_is_an_alarm_and_an_unknown_one_is_not() -> None:
    parts = [partition("t", 0, 1, (1,), (1,))]
    safety = {"t": TopicSafety(min_insync_replicas=1)}
    assert not evaluate(parts, safety, QuorumHealth("stalled", "metadata quorum stalled")).healthy
    assert evaluate(parts, safety, QuorumHealth("unknown", "not answered")).healthy


def test_min_isr_unknown_still_checks_offline_and_replication() -> None:
    report = evaluate(
        [partition("t", 0, 1, (1, 2), (1,)), partition("t", 1, -1, (1, 2), ())],
        {},
        OK,
    )
    assert names(report.offline) == ["t-1"]
    assert names(report.under_replicated) == ["t-0"]
    assert report.warnings == ("topic t: configs not read; min.insync.replicas not checked",)


def test_min_isr_one_with_several_replicas_is_a_warning_not_an_alarm() -> None:
    report = evaluate(
        [partition("weak", 0, 1, (1, 2, 3), (1, 2, 3))],
        {"weak": TopicSafety(min_insync_replicas=1)},
        OK,
    )
    assert report.healthy
    assert len(report.warnings) == 1
    assert "weak" in report.warnings[0] and "min.insync.replicas=1" in report.warnings[0]


def test_min_isr_one_with_one_replica_is_not_a_warning() -> None:
    # With one replica there is nobody else to wait for: min ISR 1 weakens nothing.
    report = evaluate(
        [partition("solo", 0, 1, (1,), (1,))], {"solo": TopicSafety(min_insync_replicas=1)}, OK
    )
    assert report.healthy and report.warnings == ()


def test_unclean_election_enabled_is_a_warning() -> None:
    report = evaluate(
        [partition("risky", 0, 1, (1,), (1,))],
        {"risky": TopicSafety(min_insync_replicas=1, unclean_leader_election=True)},
        OK,
    )
    assert report.healthy
    assert report.warnings == (
        "topic risky: unclean.leader.election.enable=true: an out-of-sync replica can "
        "become leader and drop acknowledged records",
    )


def test_min_isr_above_the_replication_factor_is_explained() -> None:
    report = evaluate(
        [partition("stuck", 0, 1, (1, 2), (1, 2))],
        {"stuck": TopicSafety(min_insync_replicas=3)},
        OK,
    )
    assert names(report.under_min_isr) == ["stuck-0"]
    assert any("exceeds the replication factor 2" in w for w in report.warnings)


def test_widest_partition_decides_the_replication_factor_warning() -> None:
    report = evaluate(
        [partition("mixed", 0, 1, (1,), (1,)), partition("mixed", 1, 2, (2, 3), (2, 3))],
        {"mixed": TopicSafety(min_insync_replicas=1)},
        OK,
    )
    assert any("replication factor 2" in w for w in report.warnings)


def test_unreadable_configs_and_topic_errors_are_warnings() -> None:
    report = evaluate(
        [partition("a", 0, 1, (1,), (1,))],
        {"a": TopicSafety(problem="INVALID_CONFIG")},
        OK,
        {"b": "UNKNOWN_TOPIC_OR_PARTITION"},
    )
    assert report.warnings == (
        "topic b: metadata not available (UNKNOWN_TOPIC_OR_PARTITION)",
        "topic a: configs not read (INVALID_CONFIG); safety not checked",
    )


# --- Responses to values --------------------------------------------------------------


def test_metadata_response_to_partitions() -> None:
    response = md.MetadataResponse(
        topics=[
            md.MetadataResponseTopic(
                name="t",
                partitions=[
                    md.MetadataResponsePartition(
                        error_code=ErrorCode.LEADER_NOT_AVAILABLE,
                        partition_index=1,
                        leader_id=-1,
                        replica_nodes=[1, 2],
                        isr_nodes=[],
                    ),
                    md.MetadataResponsePartition(
                        partition_index=0, leader_id=2, replica_nodes=[1, 2], isr_nodes=[2]
                    ),
                ],
            ),
            md.MetadataResponseTopic(name="gone", error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ]
    )
    partitions, problems = partitions_from_metadata(response)
    assert partitions == [
        PartitionState("t", 1, -1, (1, 2), ()),
        PartitionState("t", 0, 2, (1, 2), (2,)),
    ]
    assert problems == {"gone": "UNKNOWN_TOPIC_OR_PARTITION"}


def test_describe_configs_response_to_safety() -> None:
    def entry(name: str, value: str | None) -> dcr.DescribeConfigsResourceResult:
        return dcr.DescribeConfigsResourceResult(name=name, value=value)

    response = DescribeConfigsResponse(
        results=[
            dcr.DescribeConfigsResult(
                error_code=ErrorCode.NONE,
                resource_type=CONFIG_RESOURCE_TOPIC,
                resource_name="a",
                configs=[
                    entry("min.insync.replicas", "2"),
                    entry("unclean.leader.election.enable", "true"),
                    entry(
                        "odradek.unclean.elections",
                        render_history([UncleanElection(0, 3, 5, 1_000, False, (LOSS,))]),
                    ),
                ],
            ),
            dcr.DescribeConfigsResult(
                error_code=ErrorCode.NONE,
                resource_type=CONFIG_RESOURCE_TOPIC,
                resource_name="b",
                configs=[
                    entry("min.insync.replicas", None),
                    entry("unclean.leader.election.enable", "false"),
                ],
            ),
            dcr.DescribeConfigsResult(
                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                error_message="gone",
                resource_type=CONFIG_RESOURCE_TOPIC,
                resource_name="c",
            ),
        ]
    )
    assert safety_from_configs(response) == {
        "a": TopicSafety(
            min_insync_replicas=2,
            unclean_leader_election=True,
            unclean_elections=(UncleanElection(0, 3, 5, 1_000, False, (LOSS,)),),
        ),
        "b": TopicSafety(min_insync_replicas=None, unclean_leader_election=False),
        "c": TopicSafety(problem="UNKNOWN_TOPIC_OR_PARTITION: gone"),
    }


def quorum_response(message: str | None, leader_id: int = 1, code: int = 0) -> object:
    return DescribeQuorumResponse(
        topics=[
            dq.TopicData(
                topic_name=METADATA_TOPIC,
                partitions=[
                    dq.PartitionData(
                        partition_index=METADATA_PARTITION,
                        error_code=code,
                        error_message=message,
                        leader_id=leader_id,
                        leader_epoch=4,
                        high_watermark=17,
                    )
                ],
            )
        ]
    )


def test_quorum_response_to_status() -> None:
    stalled = "metadata quorum stalled: high watermark 17 unchanged for 12000 ms"
    assert quorum_from_response(quorum_response(stalled)) == QuorumHealth("stalled", stalled)
    assert quorum_from_response(quorum_response(None)) == QuorumHealth(
        "ok", "leader 1, epoch 4, high watermark 17"
    )
    assert quorum_from_response(quorum_response(None, leader_id=-1)).status == "unknown"
    not_leader = quorum_response(None, code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert quorum_from_response(not_leader).status == "unknown"
    top_level = DescribeQuorumResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
    assert quorum_from_response(top_level).status == "unknown"


# --- Output ---------------------------------------------------------------------------


def sick_report() -> HealthReport:
    return evaluate(
        [partition("orders", 0, -1, (1, 2, 3), ()), partition("orders", 1, 2, (1, 2, 3), (2,))],
        {"orders": TopicSafety(min_insync_replicas=1, unclean_leader_election=True)},
        QuorumHealth("stalled", "metadata quorum stalled: high watermark 9 unchanged"),
    )


def test_json_shape() -> None:
    info = report_as_dict(sick_report())
    assert set(info) == {
        "offline_partitions",
        "under_min_isr_partitions",
        "under_replicated_partitions",
        "unclean_elections",
        "offline_log_dirs",
        "metadata_quorum",
        "warnings",
        "healthy",
    }
    assert info["offline_partitions"] == [
        {
            "topic": "orders",
            "partition": 0,
            "leader": -1,
            "replicas": [1, 2, 3],
            "isr": [],
            "min_insync_replicas": 1,
        }
    ]
    assert [p["partition"] for p in info["under_replicated_partitions"]] == [1]
    assert info["unclean_elections"] == []
    assert info["metadata_quorum"]["status"] == "stalled"
    assert len(info["warnings"]) == 2
    assert info["healthy"] is False
    json.dumps(info)  # serialisable as is


def test_table_names_each_alarm() -> None:
    text = "\n".join(format_report(sick_report()))
    assert "offline partitions: 1" in text and "orders-0" in text
    assert "under min.insync.replicas: none" in text
    assert "under-replicated partitions: 1" in text and "orders-1" in text
    assert "unclean elections: none" in text
    assert "metadata quorum: stalled" in text
    assert "warnings: 2" in text
    assert text.endswith("ALARM")


def test_an_unclean_election_is_an_alarm_with_its_loss_until_acknowledged() -> None:
    parts = [partition("a", 0, 3, (1, 2, 3), (1, 2, 3))]
    pending = UncleanElection(0, 3, 5, 1_764_547_200_000, True)
    reported = UncleanElection(0, 3, 5, 1_764_547_200_000, True, (LOSS,))
    for election, loss_text in (
        (pending, "loss unknown until a replica of the old ISR returns"),
        (
            reported,
            "10 records dropped, at least 8 of them acknowledged "
            "(reported by broker 1; in their quarantine)",
        ),
    ):
        report = evaluate(
            parts, {"a": TopicSafety(min_insync_replicas=2, unclean_elections=(election,))}, OK
        )
        assert not report.healthy  # every replica is in sync: the election alone is the alarm
        text = "\n".join(format_report(report))
        assert "unclean elections: 1" in text
        assert (
            "a-0: broker 3 in epoch 5, 2025-12-01 00:00:00 UTC, by request (partitions recover)"
            in text
        )
        assert loss_text in text
        entry = report_as_dict(report)["unclean_elections"][0]
        assert entry["estimated_lost_records"] == (None if election is pending else 10)
        assert entry["acknowledged_lost_at_least"] == (None if election is pending else 8)
    acknowledged = evaluate(parts, {"a": TopicSafety(min_insync_replicas=2)}, OK)
    assert acknowledged.healthy


def test_a_failed_log_dir_is_an_alarm_naming_the_broker_and_the_dir() -> None:
    healthy_partitions = [partition("orders", 0, 1, (1, 2, 3), (1, 2))]
    report = evaluate(
        healthy_partitions,
        {"orders": TopicSafety(min_insync_replicas=2)},
        QuorumHealth("ok"),
        offline_log_dirs={3: ["9l9wrsVcRWaO0tnpmn8CGA"]},
    )
    assert not report.healthy
    lines = format_report(report)
    assert "  broker 3: log dir 9l9wrsVcRWaO0tnpmn8CGA failed; its replicas are offline" in lines
    assert report_as_dict(report)["offline_log_dirs"] == [
        {"broker": 3, "directories": ["9l9wrsVcRWaO0tnpmn8CGA"]}
    ]
    response = DescribeConfigsResponse(
        results=[
            dcr.DescribeConfigsResult(
                resource_type=CONFIG_RESOURCE_BROKER,
                resource_name="3",
                configs=[
                    dcr.DescribeConfigsResourceResult(
                        name=OFFLINE_LOG_DIRS_CONFIG, value="9l9wrsVcRWaO0tnpmn8CGA"
                    )
                ],
            ),
            dcr.DescribeConfigsResult(resource_type=CONFIG_RESOURCE_BROKER, resource_name="1"),
        ]
    )
    assert offline_log_dirs_from_configs(response) == {3: ["9l9wrsVcRWaO0tnpmn8CGA"]}


def test_bad_address_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["cluster", "health", "--bootstrap-server", "nowhere"])
    assert result.exit_code == 2
    assert "HOST:PORT" in result.output


def test_unreachable_broker_exits_2_with_a_message() -> None:
    # Port 1 on loopback: nothing listens there, so the connection is refused at once.
    result = CliRunner().invoke(main, ["cluster", "health", "--bootstrap-server", "127.0.0.1:1"])
    assert result.exit_code == 2
    assert "cannot reach any broker (127.0.0.1:1: " in result.output


# --- Against a real node --------------------------------------------------------------


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    process = NodeProcess(tmp_path_factory.mktemp("health-node"))
    process.start()
    try:
        yield process
    finally:
        process.kill()


def test_health_of_a_real_node_is_healthy(node: NodeProcess, tmp_path: Path) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    topics = [
        NewTopic("health-plain", num_partitions=3, replication_factor=1),
        NewTopic(
            "health-min-isr",
            num_partitions=1,
            replication_factor=1,
            config={"min.insync.replicas": "1"},
        ),
    ]
    for future in admin.create_topics(topics).values():
        future.result(30)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "odradek",
            "cluster",
            "health",
            "--bootstrap-server",
            node.bootstrap,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    info = json.loads(result.stdout)
    assert info["healthy"] is True
    assert info["offline_partitions"] == []
    assert info["under_min_isr_partitions"] == []
    assert info["under_replicated_partitions"] == []
    assert info["unclean_elections"] == []
    # Replication factor 1 with min.insync.replicas=1 is not unsafe: nothing to warn of.
    assert info["warnings"] == []
    # The broker answers DescribeQuorum with its view of the metadata quorum.
    assert info["metadata_quorum"]["status"] == "ok"


def test_health_tries_each_bootstrap_address_until_a_real_node_answers(
    node: NodeProcess,
) -> None:
    # Kafka's form of the flag: a list. The dead address first, then the node.
    result = subprocess.run(
        [sys.executable, "-m", "odradek", "cluster", "health", "--bootstrap-server",
         f"127.0.0.1:1,{node.bootstrap}", "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["metadata_quorum"]["status"] == "ok"
