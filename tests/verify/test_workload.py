"""The verify workload's writers, without a cluster."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from odradek.cli.verify.workload import Recorder, Writer
from odradek.verify.history import FAIL


def test_a_writer_replaces_a_producer_that_refuses_sends_as_fatally_failed() -> None:
    class Refusing:
        def produce(self, *args: object, **kwargs: object) -> None:
            raise KafkaException(KafkaError(KafkaError._FATAL))

        def poll(self, timeout: float) -> int:
            return 0

        def purge(self) -> None:
            pass

        def flush(self, timeout: float) -> int:
            return 0

    # No broker is contacted: nothing is sent through the replacement here.
    writer = Writer(0, "127.0.0.1:1", 3, Recorder(), idempotent=True)
    refusing: object = Refusing()
    writer._producer = refusing  # type: ignore[assignment, unused-ignore]
    writer._send()
    writer._poll(0)
    assert writer._producer is not refusing
    assert writer.in_flight == 0
    [failed] = [op for op in writer.recorder.snapshot() if op.type == FAIL]
    assert "Fatal" in str(failed.error) or "FATAL" in str(failed.error)
