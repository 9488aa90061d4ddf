"""Codec throughput: decode + validate + re-encode a Produce request.

Two shapes, as the foundation issue asks: one 1 MiB record batch, and 1,000 small
batches (about 1 KiB each, spread over 10 partitions). For each: decode the whole
request (records stay views into the frame), validate every batch header and CRC32C
and patch its base offset in place, then encode the request again. No record is ever
decoded on this path. Prints figures; asserts nothing about time.

Run: .venv/bin/python bench/bench_codec.py
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from odradek.protocol.api import RequestHeader, decode_request, encode_request
from odradek.protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from odradek.protocol.record_batch import Record, encode_batch, set_base_offset, validate_batches

VERSION = 9


def produce_request(partitions: list[bytes]) -> bytes:
    body = ProduceRequest(
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            TopicProduceData(
                name="bench",
                partition_data=[
                    PartitionProduceData(index=i, records=data) for i, data in enumerate(partitions)
                ],
            )
        ],
    )
    header = RequestHeader(
        request_api_key=0, request_api_version=VERSION, correlation_id=1, client_id="bench"
    )
    return encode_request(header, body)


def batch(count: int, value_size: int, offset: int = 0) -> bytes:
    value = os.urandom(value_size)
    records = [
        Record(offset_delta=i, timestamp=1_700_000_000_000, value=value) for i in range(count)
    ]
    return encode_batch(records, base_offset=offset)


def handle(frame: bytearray) -> int:
    """What the broker's produce path does to a frame before appending it."""
    header, body = decode_request(memoryview(frame))
    batches = 0
    for topic in body.topic_data:
        for partition in topic.partition_data:
            for h in validate_batches(partition.records):
                set_base_offset(partition.records, h.position, 42)
                batches += 1
    encode_request(header, body)
    return batches


def measure(name: str, frame: bytes, fn: Callable[[bytearray], int]) -> None:
    buf = bytearray(frame)
    batches = fn(buf)
    runs = max(20, int(200 * 1_048_576 / len(frame)))
    start = time.perf_counter()
    for _ in range(runs):
        fn(buf)
    elapsed = (time.perf_counter() - start) / runs
    copy_start = time.perf_counter()
    for _ in range(runs):
        bytes(buf)
    copy = (time.perf_counter() - copy_start) / runs
    print(
        f"{name:<34} {len(frame) / 1e6:6.2f} MB  {elapsed * 1e3:8.3f} ms/request  "
        f"{len(frame) / elapsed / 1e6:8.0f} MB/s  {batches / elapsed / 1e3:8.0f}k batches/s  "
        f"({elapsed / copy:5.1f}x one bytes() copy)"
    )


def main() -> None:
    big = produce_request([batch(1024, 1000)])
    assert len(big) > 1_000_000
    small = produce_request([b"".join(batch(1, 950, i) for i in range(100)) for _ in range(10)])
    print(f"Produce v{VERSION}: decode + validate (CRC32C) + patch + re-encode")
    measure("one 1 MiB batch", big, handle)
    measure("1,000 batches of ~1 KiB", small, handle)


if __name__ == "__main__":
    main()
