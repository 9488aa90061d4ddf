"""Every generated message class, every version: encode, decode, compare, re-encode."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol import messages, metadata
from tests.protocol.strategies import message_value


def _all_classes() -> list[Any]:
    classes = [getattr(messages, n) for n in messages.__all__]
    classes += [getattr(metadata, n) for n in metadata.__all__]
    return classes


CASES = [
    pytest.param(cls, v, id=f"{cls.NAME}-v{v}")
    for cls in _all_classes()
    for v in range(cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1] + 1)
]


def test_every_schema_was_generated() -> None:
    names = {c.NAME for c in _all_classes()}
    # The APIs the foundation issue names, plus the control records.
    for required in (
        "ApiVersionsRequest",
        "MetadataResponse",
        "ProduceRequest",
        "FetchResponse",
        "VoteRequest",
        "AddRaftVoterRequest",
        "UpdateRaftVoterResponse",
        "BrokerHeartbeatRequest",
        "AlterPartitionRequest",
        "ControlledShutdownRequest",
        "LeaderChangeMessage",
        "VotersRecord",
        "KRaftVersionRecord",
        "SnapshotHeaderRecord",
        "SnapshotFooterRecord",
        "PartitionChangeRecord",
        "RegisterBrokerRecord",
        "NoOpRecord",
    ):
        assert required in names, required


@pytest.mark.parametrize(("cls", "version"), CASES)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip(cls: Any, version: int, data: st.DataObject) -> None:
    value = data.draw(message_value(cls, version))
    encoded = value.encode(version)
    decoded = cls.decode(encoded, version)
    assert decoded == value
    assert decoded.encode(version) == encoded
