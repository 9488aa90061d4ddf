"""``odradek verify`` refuses clearly when it cannot run, before touching anything."""

from __future__ import annotations

import os
import shutil
import sys

import click
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


def _without(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    """Make ``module`` missing, as in an install without the verify extra; the modules
    that imported it are forgotten, so that they are imported again."""
    monkeypatch.setitem(sys.modules, module, None)  # import raises ModuleNotFoundError
    for name in list(sys.modules):
        if name.startswith(("odradek.cli.verify.", f"{module}.")):
            monkeypatch.delitem(sys.modules, name)


@pytest.mark.parametrize("module", ["matplotlib", "confluent_kafka"])
def test_without_the_verify_extra_it_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, module: str
) -> None:
    _without(monkeypatch, module)
    result = CliRunner().invoke(main, ["verify", "--scenario", "seed-000"])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.output.strip().splitlines() == [
        f"Error: odradek verify needs the 'verify' extra, which is not installed (no module "
        f"{module}): pip install 'odradek[verify]' (from a source checkout: "
        "pip install -e '.[verify]')"
    ]


def test_any_command_missing_an_extra_says_which(monkeypatch: pytest.MonkeyPatch) -> None:
    _without(monkeypatch, "matplotlib")

    @click.command("draw")
    def draw() -> None:
        import matplotlib  # noqa: F401

    monkeypatch.setitem(main.commands, "draw", draw)
    result = CliRunner().invoke(main, ["draw"])
    assert result.exit_code == 1
    assert "odradek draw needs the 'verify' extra" in result.output


def test_a_missing_module_of_no_extra_is_not_disguised(monkeypatch: pytest.MonkeyPatch) -> None:
    # Not an extra's: a broken installation or a bug, whose traceback must be seen.
    monkeypatch.setitem(sys.modules, "odradek_no_such_module", None)

    @click.command("broken")
    def broken() -> None:
        import odradek_no_such_module  # type: ignore[import-not-found]  # noqa: F401

    monkeypatch.setitem(main.commands, "broken", broken)
    result = CliRunner().invoke(main, ["broken"])
    assert isinstance(result.exception, ModuleNotFoundError)
