"""A consumer group member in its own process, for the group tests.

Prints one JSON line per event on stdout: {"assigned": [...]}, {"revoked": [...]},
{"record": [partition, offset, value]}. Commits after each record. Stops cleanly on
SIGTERM (leaving the group); SIGKILL makes it vanish, as a crashed member does.
"""

from __future__ import annotations

import json
import signal
import sys
from typing import Any

from confluent_kafka import Consumer


def main() -> None:
    bootstrap, group, topic, name = sys.argv[1:5]
    running = True

    def stop(*_: object) -> None:
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, stop)

    def say(event: dict[str, Any]) -> None:
        print(json.dumps({"member": name, **event}), flush=True)

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
    consumer.subscribe(
        [topic],
        on_assign=lambda c, ps: say({"assigned": sorted(p.partition for p in ps)}),
        on_revoke=lambda c, ps: say({"revoked": sorted(p.partition for p in ps)}),
    )
    while running:
        message = consumer.poll(0.2)
        if message is None or message.error() is not None:
            continue
        say({"record": [message.partition(), message.offset(), (message.value() or b"").decode()]})
        consumer.commit(message=message, asynchronous=False)
    consumer.close()
    say({"closed": True})


if __name__ == "__main__":
    main()
