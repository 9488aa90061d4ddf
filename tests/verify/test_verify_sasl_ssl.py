"""``odradek verify --security sasl_ssl``: the same run with every listener SASL_SSL (a CA
made for the run, PLAIN for the nodes, SCRAM-SHA-512 for the workload's clients and the
checker's ``cluster health``) counts every acknowledged write and finds nothing.

Needs what every verify run needs (root, ``ip``, ``nft``); skipped elsewhere.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.cli.verify.netns import missing_requirements
from tests.verify.test_verify_runs import carried_out, runs, verify

pytestmark = pytest.mark.skipif(
    bool(missing_requirements()), reason="; ".join(missing_requirements()) or "ok"
)


@runs("disk-full")
def test_a_full_disk_over_sasl_ssl_stops_its_node_which_rejoins_once_repaired(
    tmp_path: Path,
) -> None:
    """The disk-full scenario, run over SASL_SSL: one run proves both (the fault and its
    repair do not depend on the transport; CI time). The long runs
    (ODRADEK_VERIFY_LONG=1) take every scenario over PLAINTEXT."""
    status, result = verify(
        tmp_path, "--scenario", "disk-full", "--time", "20", "--seed", "1",
        "--security", "sasl_ssl",
    )  # fmt: skip
    assert result["security"] == "sasl_ssl"
    assert result["valid"] is True and result["conclusive"] is True, result
    assert status == 0
    acknowledged = result["acknowledged"]
    assert isinstance(acknowledged, int) and acknowledged > 0
    assert result["lost"] == 0 and result["duplicated"] == 0, result
    assert len(carried_out(tmp_path, "disk-full")) == 1
    # Node 2 stopped itself when its disk filled, which is the fault's effect, not an
    # anomaly; it was started again on the repaired disk and is back in every ISR.
    assert result["expected_exits"] == 1 and result["unexpected_exits"] == 0, result
    # The checker's own clients logged in too: cluster health saw node 2 rejoin.
    recoveries = result["recoveries"]
    assert isinstance(recoveries, list)
    assert [r["process"] for r in recoveries] == ["node-2", "cluster"], recoveries
    assert all(r["after_s"] is not None for r in recoveries), recoveries
    # The controller fenced it when it reported its failed dir.
    metadata = result["cluster_metadata"]
    assert isinstance(metadata, dict) and 2 in metadata["fenced"], metadata
    nodes = tmp_path / "report" / "nodes"
    for config in nodes.glob("node-*/server.properties"):
        text = config.read_text()
        assert "listeners=SASL_SSL://" in text and "CONTROLLER:SASL_SSL" in text, text
    assert "sasl.mechanism=SCRAM-SHA-512" in (nodes / "client.properties").read_text()
