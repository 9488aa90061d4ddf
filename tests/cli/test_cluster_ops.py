"""The cluster operations CLI: its plan output and its arguments (no broker needed)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from odradek.cli.cluster import cluster
from odradek.cli.cluster_ops import format_plan, parse_brokers
from odradek.controller.rebalance import plan_rebalance


def test_the_plan_names_each_change_its_cost_and_the_balance_after() -> None:
    current = {("t", 0): [1, 2], ("t", 1): [2, 1], ("t", 2): [1, 2]}
    sizes = {("t", 0): 5_000_000, ("t", 1): 1_000_000, ("t", 2): 2_000_000}
    plan = plan_rebalance(current, [1, 2, 3], sizes)
    lines = format_plan(plan, current)
    moved = [line for line in lines if line.endswith("(move)")]
    assert len(moved) == plan.moved_replicas == 2
    summary = next(line for line in lines if "replica(s) move" in line)
    assert "the fewest that balance the cluster: 2" in summary
    assert f"({plan.bytes_to_move} bytes" in summary
    assert lines[-2] == "replicas per broker after: 1: 2, 2: 2, 3: 2"
    assert lines[-1] == "preferred leaders per broker after: 1: 1, 2: 1, 3: 1"


def test_broker_lists_are_checked() -> None:
    assert parse_brokers("4, 3,4") == [3, 4]
    with pytest.raises(click.BadParameter):
        parse_brokers("4,x")
    with pytest.raises(click.BadParameter):
        parse_brokers(",")


def test_the_commands_are_under_cluster_and_need_a_bootstrap_server() -> None:
    runner = CliRunner()
    for command in (
        ["add-brokers", "--brokers", "4"],
        ["remove-brokers", "--brokers", "4"],
        ["cancel-reassignments"],
        ["unregister-broker", "--broker", "4"],
    ):
        result = runner.invoke(cluster, command)
        assert result.exit_code == 2, result.output
        assert "give --bootstrap-server HOST:PORT,..." in result.output
    result = runner.invoke(cluster, ["add-brokers", "--help"])
    assert "--throttle" in result.output and "--dry-run" in result.output
