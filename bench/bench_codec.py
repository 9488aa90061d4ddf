"""Codec throughput: decode + validate + re-encode a Produce request; per-call codec cost.

Two shapes, as the foundation issue asks: one 1 MiB record batch, and 1,000 small
batches (about 1 KiB each, spread over 10 partitions). For each: decode the whole
request (records stay views into the frame), validate every batch header and CRC32C
and patch its base offset in place, then encode the request again. No record is ever
decoded on this path.

Then the per-call cost of the generated codec alone on the messages replication sends
most often: a follower's Fetch v16 (one topic, 17 partitions), the leader's Fetch v16
response (17 partitions, one with a 16 KiB record set), and a Produce v9 request with
one small batch; decode and encode each, best of a few repeats, in microseconds.
Prints figures; asserts nothing about time.

Run: .venv/bin/python bench/bench_codec.py
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable

from odradek.protocol.api import (
    RequestHeader,
    ResponseHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    write_response,
)
from odradek.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from odradek.protocol.messages.fetch_response import (
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from odradek.protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from odradek.protocol.primitives import Writer
from odradek.protocol.record_batch import (
    set_base_offset,
    validate_batches,
)
from odradek.protocol.record_codec import (
    Record,
    encode_batch,
)

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


FETCH_VERSION = 16
PARTITIONS = 17
TOPIC_ID = uuid.UUID(int=0x6F64726164656B)


def fetch_request() -> FetchRequest:
    """What a follower sends: every partition of one topic it replicates."""
    return FetchRequest(
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=10_485_760,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchTopic(
                topic_id=TOPIC_ID,
                partitions=[
                    FetchPartition(
                        partition=i,
                        current_leader_epoch=3,
                        fetch_offset=1_000_000 + i,
                        last_fetched_epoch=3,
                        log_start_offset=0,
                        partition_max_bytes=1_048_576,
                    )
                    for i in range(PARTITIONS)
                ],
            )
        ],
    )


def fetch_response(records: bytes) -> FetchResponse:
    """The leader's answer: one partition has a record set, the others are caught up."""
    return FetchResponse(
        responses=[
            FetchableTopicResponse(
                topic_id=TOPIC_ID,
                partitions=[
                    PartitionData(
                        partition_index=i,
                        high_watermark=1_000_000 + i,
                        last_stable_offset=1_000_000 + i,
                        log_start_offset=0,
                        aborted_transactions=None,
                        records=records if i == 0 else b"",
                    )
                    for i in range(PARTITIONS)
                ],
            )
        ],
    )


def best_us(fn: Callable[[], object], budget: float = 0.3, repeats: int = 5) -> float:
    """The best per-call time over a few timed repeats, in microseconds."""
    fn()
    loops = 1
    while True:
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        if time.perf_counter() - start > budget / repeats / 4:
            break
        loops *= 2
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        best = min(best, (time.perf_counter() - start) / loops)
    return best * 1e6


def per_call() -> None:
    print(f"\nPer call, generated codec only (best of 5, {PARTITIONS} partitions where it says)")
    header = RequestHeader(
        request_api_key=1,
        request_api_version=FETCH_VERSION,
        correlation_id=7,
        client_id="broker-2-fetcher-0",
    )
    request = fetch_request()
    request_frame = encode_request(header, request)

    response = fetch_response(batch(16, 1011))  # one batch of 16,381 bytes
    response_header = ResponseHeader(correlation_id=7)

    def encode_fetch_response() -> object:
        # As the broker sends it: the record set stays a chunk of its own, uncopied.
        w = Writer()
        write_response(w, response_header, response, FETCH_VERSION)
        return w.chunks()

    response_frame = encode_response(response_header, response, 1, FETCH_VERSION)

    produce = produce_request([batch(1, 100)])
    produce_header, produce_body = decode_request(produce)

    cases: list[tuple[str, int, Callable[[], object], Callable[[], object]]] = [
        (
            f"Fetch v{FETCH_VERSION} request, 1 topic",
            len(request_frame),
            lambda: decode_request(request_frame),
            lambda: encode_request(header, request),
        ),
        (
            f"Fetch v{FETCH_VERSION} response, 16 KiB in one",
            len(response_frame),
            lambda: decode_response(response_frame, 1, FETCH_VERSION),
            encode_fetch_response,
        ),
        (
            f"Produce v{VERSION} request, one small batch",
            len(produce),
            lambda: decode_request(produce),
            lambda: encode_request(produce_header, produce_body),
        ),
    ]
    for name, size, decode, encode in cases:
        print(
            f"{name:<36} {size:7d} B  decode {best_us(decode):8.2f} us  "
            f"encode {best_us(encode):8.2f} us"
        )


def main() -> None:
    big = produce_request([batch(1024, 1000)])
    assert len(big) > 1_000_000
    small = produce_request([b"".join(batch(1, 950, i) for i in range(100)) for _ in range(10)])
    print(f"Produce v{VERSION}: decode + validate (CRC32C) + patch + re-encode")
    measure("one 1 MiB batch", big, handle)
    measure("1,000 batches of ~1 KiB", small, handle)
    per_call()


if __name__ == "__main__":
    main()
