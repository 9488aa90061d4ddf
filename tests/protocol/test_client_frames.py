"""Frames captured from real clients and a real broker, decoded and re-encoded byte for byte.

The fixtures live in ``tests/data/client_frames/<client>/`` (see the README there); they
were recorded by ``tools/capture_client_frames.py``: confluent-kafka (librdkafka),
kafka-python, aiokafka and Debian's kcat talking to Tansu, a Kafka-API broker, through a
recording proxy. Each file is one frame without its 4-byte size prefix, named
``NNN-<api_key>-<ApiName>-v<version>.(request|response).bin``.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import crc32c
import pytest

from odradek.protocol.api import decode_request, decode_response, encode_request, encode_response
from odradek.protocol.record_codec import (
    decode_records,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "client_frames"
FILE_NAME = re.compile(
    r"^(?P<seq>\d{3})-(?P<key>\d+)-(?P<api>[A-Za-z]+)-v(?P<version>\d+)"
    r"\.(?P<kind>request|response)\.bin$"
)
MAX_TOTAL_BYTES = 1024 * 1024

PRODUCE, FETCH, METADATA, FIND_COORDINATOR, JOIN_GROUP = 0, 1, 3, 10, 11
API_VERSIONS, CREATE_TOPICS = 18, 19

# The APIs every client's scripted session must have produced.
SESSION_APIS = {
    "Produce",
    "Fetch",
    "ListOffsets",
    "Metadata",
    "OffsetCommit",
    "OffsetFetch",
    "FindCoordinator",
    "JoinGroup",
    "Heartbeat",
    "LeaveGroup",
    "SyncGroup",
    "ApiVersions",
}
EXTRA_APIS = {
    "confluent": {"CreateTopics", "InitProducerId"},
    "kafka-python": {"CreateTopics", "InitProducerId"},  # idempotent by default
    "aiokafka": {"CreateTopics", "InitProducerId"},
    "kcat": set(),  # no admin mode; idempotence off by default
}

# Tansu writes some tagged fields even when they hold their default values. That is legal
# (KIP-482), but Apache Kafka omits a tagged field that holds its default, and so does our
# codec: the decoded values are the same, the bytes are not. For these (api_key, version)
# pairs only, a response whose re-encoding differs is skipped with the reason below -- and
# only after checking that the re-encoding is shorter and decodes to the very same values.
_DEFAULT_TAGS = "Tansu writes tagged fields at their default values, which Kafka and the codec omit"
NON_CANONICAL_RESPONSES: dict[tuple[int, int], str] = {
    (API_VERSIONS, 3): f"{_DEFAULT_TAGS}: ApiVersionsResponse SupportedFeatures=[] (tag 0), "
    "FinalizedFeaturesEpoch=-1 (tag 1), FinalizedFeatures=[] (tag 2), ZkMigrationReady=false "
    "(tag 3)",
    (API_VERSIONS, 4): f"{_DEFAULT_TAGS}: ApiVersionsResponse SupportedFeatures=[] (tag 0), "
    "FinalizedFeaturesEpoch=-1 (tag 1), FinalizedFeatures=[] (tag 2), ZkMigrationReady=false "
    "(tag 3)",
    (FETCH, 16): f"{_DEFAULT_TAGS}: FetchResponse NodeEndpoints=[] (tag 0)",
    (CREATE_TOPICS, 7): f"{_DEFAULT_TAGS}: CreatableTopicResult TopicConfigErrorCode=0 (tag 0)",
}


def topic_for(client: str) -> str:
    """Same naming as tools/capture_client_frames.py."""
    return f"fixtures-{client}"


def group_for(client: str) -> str:
    return f"fixtures-{client}-group"


@dataclass(frozen=True)
class Frame:
    client: str
    path: Path
    seq: int
    api_key: int
    api_name: str
    api_version: int
    kind: str

    @property
    def id(self) -> str:
        return f"{self.client}/{self.path.name}"

    def partner(self) -> Path:
        other = "response" if self.kind == "request" else "request"
        return self.path.with_name(self.path.name.replace(f".{self.kind}.", f".{other}."))

    def payload(self) -> bytes:
        return self.path.read_bytes()


def _all_frames() -> list[Frame]:
    frames: list[Frame] = []
    if not DATA.is_dir():
        return frames
    for path in sorted(DATA.glob("*/*.bin")):
        match = FILE_NAME.match(path.name)
        if match is None:
            raise AssertionError(f"fixture with an unexpected name: {path}")
        frames.append(
            Frame(
                client=path.parent.name,
                path=path,
                seq=int(match["seq"]),
                api_key=int(match["key"]),
                api_name=match["api"],
                api_version=int(match["version"]),
                kind=match["kind"],
            )
        )
    return frames


FRAMES = _all_frames()
REQUESTS = [f for f in FRAMES if f.kind == "request"]
RESPONSES = [f for f in FRAMES if f.kind == "response"]
CLIENTS = sorted({f.client for f in FRAMES})


@cache
def _request(path: Path) -> tuple[Any, Any]:
    return decode_request(path.read_bytes())


def _params(frames: list[Frame]) -> list[Any]:
    return [pytest.param(f, id=f.id) for f in frames]


# --------------------------------------------------------------------------------------
# Record batches: framing and CRC checked here, records decoded by record_batch
# --------------------------------------------------------------------------------------


def _batches(records: bytes | bytearray | memoryview) -> Iterator[tuple[int, int, int]]:
    """Walk v2 record batches: yield (position, attributes, record count) for each.

    Asserts that the batches tile the field exactly and that every CRC32C matches.
    """
    data = bytes(records)
    pos = 0
    while pos < len(data):
        assert len(data) - pos >= 61, f"truncated batch header at {pos}"
        (batch_length,) = struct.unpack_from(">i", data, pos + 8)
        end = pos + 12 + batch_length
        assert end <= len(data), f"batch at {pos} runs past the records field"
        magic = data[pos + 16]
        assert magic == 2, f"batch at {pos} has magic {magic}"
        (crc,) = struct.unpack_from(">I", data, pos + 17)
        assert crc32c.crc32c(data[pos + 21 : end]) == crc, f"bad CRC32C in batch at {pos}"
        (attributes,) = struct.unpack_from(">h", data, pos + 21)
        (count,) = struct.unpack_from(">i", data, pos + 57)
        yield pos, attributes, count
        pos = end


CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def _check_session_records(client: str, records: bytes | bytearray | memoryview) -> int:
    """Decode every batch (decompressing it) and check it holds what the session produced.

    The capture tool keys each record ``<codec>-k<i>`` after the compression its producer
    was configured with; ``k1`` is the one with a null value and ``k0`` carries a
    ``trace`` header. Returns the number of records seen.
    """
    seen = 0
    for pos, attributes, count in _batches(records):
        codec = CODEC_NAMES[attributes & 0x7]
        decoded = decode_records(records, pos)
        assert len(decoded) == count
        for record in decoded:
            assert record.key is not None
            prefix, _, index = record.key.decode().partition("-k")
            # Clients send a batch uncompressed when compressing would not make it smaller
            # (librdkafka and kafka-python do, for the one-record batches here): only a
            # compressed batch pins down which producer wrote it.
            assert prefix == codec or (codec == "none" and prefix in CODEC_NAMES.values())
            if index == "1":
                assert record.value is None, "the tombstone lost its null value"
            else:
                assert record.value is not None
                assert f" {client}/{codec} ".encode() in record.value
            if index == "0":
                assert "trace" in {name for name, _ in record.headers}
        seen += len(decoded)
    return seen


# --------------------------------------------------------------------------------------
# The fixture set itself
# --------------------------------------------------------------------------------------


def test_fixtures_present() -> None:
    assert REQUESTS, f"no fixtures under {DATA}"
    total = sum(f.path.stat().st_size for f in FRAMES)
    assert total < MAX_TOTAL_BYTES


@pytest.mark.parametrize("frame", _params(FRAMES))
def test_every_frame_has_its_partner(frame: Frame) -> None:
    assert frame.partner().is_file(), f"{frame.id} has no {frame.partner().name}"


@pytest.mark.parametrize("client", CLIENTS)
def test_session_covers_the_consumer_group_lifecycle(client: str) -> None:
    seen = {f.api_name for f in REQUESTS if f.client == client}
    missing = (SESSION_APIS | EXTRA_APIS.get(client, set())) - seen
    assert not missing, f"{client}: no fixture for {sorted(missing)}"


@pytest.mark.parametrize("client", CLIENTS)
def test_produce_fixtures_cover_compression(client: str) -> None:
    codecs: set[int] = set()
    for frame in REQUESTS:
        if frame.client == client and frame.api_key == PRODUCE:
            _, body = _request(frame.path)
            for topic in body.topic_data:
                for partition in topic.partition_data:
                    codecs.update(a & 0x7 for _, a, _ in _batches(partition.records))
    assert {0, 1} <= codecs, f"{client}: Produce codecs {sorted(codecs)}, want none and gzip"


@pytest.mark.parametrize("client", CLIENTS)
def test_some_fetch_response_carries_records(client: str) -> None:
    records = 0
    for frame in RESPONSES:
        if frame.client == client and frame.api_key == FETCH:
            _, body = decode_response(frame.payload(), frame.api_key, frame.api_version)
            for topic in body.responses:
                for partition in topic.partitions:
                    if partition.records is not None:
                        records += _check_session_records(frame.client, partition.records)
    assert records > 0, f"{client}: no Fetch response fixture holds a record"


# --------------------------------------------------------------------------------------
# Requests
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("frame", _params(REQUESTS))
def test_request_round_trip(frame: Frame) -> None:
    payload = frame.payload()
    header, body = decode_request(payload)
    assert header.request_api_key == frame.api_key
    assert header.request_api_version == frame.api_version
    assert header.client_id, "every real client sends a client id"
    assert encode_request(header, body) == payload


@pytest.mark.parametrize("frame", _params([f for f in REQUESTS if f.api_key == PRODUCE]))
def test_produce_request_content(frame: Frame) -> None:
    _, body = _request(frame.path)
    assert body.acks in (-1, 1)
    assert body.topic_data, "a Produce request with no topic"
    for topic in body.topic_data:
        assert topic.name == topic_for(frame.client)
        assert topic.partition_data
        for partition in topic.partition_data:
            assert partition.index in (0, 1)
            assert partition.records is not None
            assert bytes(partition.records)[16] == 2, "record batch magic byte is not 2"
            assert _check_session_records(frame.client, partition.records) > 0


@pytest.mark.parametrize("frame", _params([f for f in REQUESTS if f.api_key == JOIN_GROUP]))
def test_join_group_request_content(frame: Frame) -> None:
    _, body = _request(frame.path)
    assert body.group_id == group_for(frame.client)
    assert body.protocol_type == "consumer"
    assert body.protocols, "JoinGroup offers no assignor"


@pytest.mark.parametrize("frame", _params([f for f in REQUESTS if f.api_key == FIND_COORDINATOR]))
def test_find_coordinator_request_content(frame: Frame) -> None:
    _, body = _request(frame.path)
    keys = body.coordinator_keys if frame.api_version >= 4 else [body.key]
    assert keys == [group_for(frame.client)]


@pytest.mark.parametrize("frame", _params([f for f in REQUESTS if f.api_key == CREATE_TOPICS]))
def test_create_topics_request_content(frame: Frame) -> None:
    _, body = _request(frame.path)
    assert [(t.name, t.num_partitions) for t in body.topics] == [(topic_for(frame.client), 2)]


# --------------------------------------------------------------------------------------
# Responses
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("frame", _params(RESPONSES))
def test_response_round_trip(frame: Frame) -> None:
    payload = frame.payload()
    request_header, _ = _request(frame.partner())
    rheader, rbody = decode_response(payload, frame.api_key, frame.api_version)
    assert rheader.correlation_id == request_header.correlation_id
    encoded = encode_response(rheader, rbody, frame.api_key, frame.api_version)
    reason = NON_CANONICAL_RESPONSES.get((frame.api_key, frame.api_version))
    if encoded != payload and reason is not None:
        # Same values, fewer bytes: only default-valued tagged fields were dropped.
        assert len(encoded) < len(payload)
        assert decode_response(encoded, frame.api_key, frame.api_version) == (rheader, rbody)
        pytest.skip(reason)
    assert encoded == payload


@pytest.mark.parametrize("frame", _params([f for f in RESPONSES if f.api_key == API_VERSIONS]))
def test_api_versions_response_content(frame: Frame) -> None:
    _, body = decode_response(frame.payload(), frame.api_key, frame.api_version)
    assert body.error_code == 0
    keys = {k.api_key for k in body.api_keys}
    assert {PRODUCE, FETCH, METADATA, API_VERSIONS} <= keys


@pytest.mark.parametrize("frame", _params([f for f in RESPONSES if f.api_key == METADATA]))
def test_metadata_response_advertises_the_proxy(frame: Frame) -> None:
    _, body = decode_response(frame.payload(), frame.api_key, frame.api_version)
    assert body.brokers
    assert {b.host for b in body.brokers} == {"127.0.0.1"}


@pytest.mark.parametrize("frame", _params([f for f in RESPONSES if f.api_key == PRODUCE]))
def test_produce_response_content(frame: Frame) -> None:
    _, body = decode_response(frame.payload(), frame.api_key, frame.api_version)
    assert [t.name for t in body.responses] == [topic_for(frame.client)]
    for topic in body.responses:
        for partition in topic.partition_responses:
            assert partition.error_code == 0
            assert partition.base_offset >= 0
