"""``--slow`` runs the tests marked ``slow``: loops that repeat cluster scenarios to hunt
intermittent failures (each such failure is a bug until its cause is known). CI runs
one pass of each scenario as an ordinary test and skips the loops."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--slow",
        action="store_true",
        default=False,
        help="also run the slow scenarios (repeated cluster runs)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="slow scenario: run with --slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
