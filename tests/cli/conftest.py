"""Fixtures of the command-line tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cli.broker_stub import StubBroker


@pytest.fixture
def stubs() -> Iterator[list[StubBroker]]:
    """Stubs a test starts; every one is closed afterwards and must have met only the
    requests its test expected."""
    started: list[StubBroker] = []
    yield started
    for stub in started:
        stub.close()
    assert [e for stub in started for e in stub.errors] == []
