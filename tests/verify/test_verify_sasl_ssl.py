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
def test_a_short_run_over_sasl_ssl_finds_nothing(tmp_path: Path) -> None:
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
    # The checker's own clients logged in too: cluster health saw node 2 rejoin.
    recoveries = result["recoveries"]
    assert isinstance(recoveries, list)
    assert all(r["after_s"] is not None for r in recoveries), recoveries
    nodes = tmp_path / "report" / "nodes"
    for config in nodes.glob("node-*/server.properties"):
        text = config.read_text()
        assert "listeners=SASL_SSL://" in text and "CONTROLLER:SASL_SSL" in text, text
    assert "sasl.mechanism=SCRAM-SHA-512" in (nodes / "client.properties").read_text()
