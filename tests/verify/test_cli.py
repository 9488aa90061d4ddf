"""``odradek verify`` refuses clearly when it cannot run, before touching anything."""

from __future__ import annotations

import os
import shutil

import pytest
from click.testing import CliRunner

from odradek.cli.main import main
from odradek.cli.verify import netns


def test_without_root_it_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    created: list[str] = []
    monkeypatch.setattr(netns, "create", created.append)
    result = CliRunner().invoke(main, ["verify", "--scenario", "seed-000"])
    assert result.exit_code == 1
    assert "root" in result.output and "CAP_NET_ADMIN" in result.output
    assert created == []


def test_without_nft_it_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool == "nft" else real_which(tool))
    assert any("nftables" in m for m in netns.missing_requirements())


def test_seed_000_refuses_combined_nodes() -> None:
    result = CliRunner().invoke(main, ["verify", "--scenario", "seed-000", "--controllers", "0"])
    assert result.exit_code == 2
    assert "controller-only nodes" in result.output
