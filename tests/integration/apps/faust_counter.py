"""A faust-streaming worker for tests/integration/test_stream_processors.py: counts each
word of topic ``words`` in a Table (kept in its compacted changelog topic) and writes
``word=count`` to topic ``counts`` after every update. Run it as faust's users do:
``python -m faust -A tests.integration.apps.faust_counter worker``, with ``BOOTSTRAP``
(host:port) and ``FAUST_DATA`` (its data dir) in the environment."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import faust

app = faust.App(
    "counter",
    broker=f"kafka://{os.environ['BOOTSTRAP']}",
    store="memory://",  # nothing kept locally: a restart restores the Table from Kafka
    datadir=os.environ["FAUST_DATA"],
    topic_partitions=1,
    topic_replication_factor=1,
    web_enabled=False,
    consumer_auto_offset_reset="earliest",
)
words = app.topic("words", key_type=bytes, value_type=bytes, value_serializer="raw")
counts_out = app.topic("counts", key_type=bytes, value_type=bytes, value_serializer="raw")
counts = app.Table("counts", default=int, partitions=1)


@app.agent(words)
async def count(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
    async for word in stream:
        name = word.decode()
        counts[name] += 1
        await counts_out.send(key=word, value=f"{name}={counts[name]}".encode())
        yield None
