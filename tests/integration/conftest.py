"""On a failed integration test, show the end of every node's log: a failure on a CI
machine is often one that cannot be made to happen again at will."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from tests.integration.cluster import ServerProcess

LOG_TAIL_BYTES = 4000


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call" and report.failed:
        for process in ServerProcess.created:
            path = process.dir / "node.log"
            if path.exists():
                data = path.read_bytes()[-LOG_TAIL_BYTES:].decode("utf-8", "replace")
                report.sections.append((f"{process.dir.name}/node.log (end)", data))
    if report.when == "teardown":
        ServerProcess.created.clear()
    return report
