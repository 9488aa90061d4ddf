"""The acks=all writer the real-process tests share: numbered values to one topic, and
which of them were acknowledged."""

from __future__ import annotations

import threading
from typing import Any

from confluent_kafka import Producer


class Writer(threading.Thread):
    """Produces increasing values (``0``, ``1``, ...) with acks=all until stopped and
    records the acknowledged ones, in acknowledgement order, and the failures."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        *,
        idempotent: bool = True,
        linger_ms: int = 2,
        message_timeout_ms: int = 60_000,
        pause_s: float = 0.002,
    ) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.pause_s = pause_s
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": idempotent,
                "linger.ms": linger_ms,
                "message.timeout.ms": message_timeout_ms,
            }
        )
        self.acknowledged: list[int] = []
        self.failed = 0
        self.stopping = threading.Event()

    def delivered(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acknowledged.append(int(msg.value()))
        else:
            self.failed += 1

    def run(self) -> None:
        value = 0
        while not self.stopping.is_set():
            self.producer.produce(self.topic, str(value).encode(), callback=self.delivered)
            value += 1
            self.producer.poll(self.pause_s)
        self.producer.flush(90)
