"""A broker under test: a BrokerState built the way the shell builds one, without the shell.

:class:`Harness` holds a :class:`~odradek.broker.state.BrokerState`, the
:class:`~odradek.broker.server_config.ServerConfig` its handlers read, and a
:class:`~odradek.testing.sim_disk.SimDisk` for the partition logs. Topics and brokers
enter the image only by replaying metadata records, and the partitions this node is a
replica of get a :class:`~odradek.broker.partition.LocalPartition` over a real
:class:`~odradek.storage.log.PartitionLog` on the simulated disk, just as the shell's
``Hosting.sync`` (``shell/hosting.py``) does. :meth:`Harness.carry` plays the shell's part for
``CommitRecords``: it frames the records as the metadata log stores them, replays them
and follows the continuation to the reply.

It also has the helpers every handler test needs: request headers, the versions of a
range, and a wire round trip of a response (``encode`` then ``decode`` at one version),
both for a bare response and through :class:`~odradek.broker.router.Router`.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from odradek.broker.effects import CommitRecords, Outcome, Reply
from odradek.broker.partition import LocalPartition
from odradek.broker.router import Dispatch, Router
from odradek.broker.server_config import ServerConfig
from odradek.broker.state import BrokerSettings, BrokerState
from odradek.controller.image import MetadataImage
from odradek.protocol.api import RequestHeader, decode_response, encode_request
from odradek.protocol.metadata import (
    ConfigRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from odradek.protocol.metadata.register_broker_record import BrokerEndpoint
from odradek.protocol.metadata_record import decode_metadata_record, encode_metadata_record
from odradek.protocol.record_codec import (
    Record,
    encode_batch,
)
from odradek.storage.log import LogConfig, PartitionLog, partition_dir_name
from odradek.testing.sim_disk import SimDisk

NODE_ID = 1
CLUSTER_ID = "test-cluster-id-000000"
HOST = "broker1.test"
PORT = 9092
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
PLAINTEXT = 0

T = TypeVar("T")


def server_config(
    properties: Mapping[str, str] | None = None, node_id: int = NODE_ID
) -> ServerConfig:
    """A valid combined broker-and-controller config, with ``properties`` on top."""
    base = {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": f"{node_id}@localhost:9093",
        "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
        "controller.listener.names": "CONTROLLER",
    }
    return ServerConfig.from_properties({**base, **(properties or {})})


def header(api_key: int, version: int, correlation_id: int = 7) -> RequestHeader:
    return RequestHeader(
        request_api_key=api_key,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id="harness",
    )


def versions(bounds: tuple[int, int]) -> list[int]:
    """Every version of an inclusive ``(low, high)`` range."""
    low, high = bounds
    return list(range(low, high + 1))


def roundtrip(response: T, version: int) -> T:
    """``response`` encoded at ``version`` and decoded again: what a client would read.

    Encoding raises UnsupportedVersionError when a field the version lacks was set, so
    this is also the proof that a handler's answer can be sent at that version.
    """
    data = response.encode(version)  # type: ignore[attr-defined]
    decoded: T = type(response).decode(data, version)  # type: ignore[attr-defined]
    return decoded


def batch(records: int = 3, timestamp: int = 1_000) -> memoryview:
    """A client-style record batch (base offset 0)."""
    return memoryview(
        bytearray(
            encode_batch(
                [
                    Record(offset_delta=i, timestamp=timestamp + i, key=b"k", value=b"v%d" % i)
                    for i in range(records)
                ]
            )
        )
    )


@dataclass
class Harness:
    state: BrokerState
    server: ServerConfig
    disk: SimDisk
    committed: list[list[Any]] = field(default_factory=list)
    """Each batch of records :meth:`carry` committed, in order."""
    _ids: Iterator[int] = field(default_factory=lambda: iter(range(0x100, 1 << 30)))

    @property
    def node_id(self) -> int:
        return self.state.settings.node_id

    @property
    def image(self) -> MetadataImage:
        return self.state.image

    # --- Metadata ---------------------------------------------------------------------

    def replay(self, records: Sequence[Any]) -> None:
        """Replay ``records`` at the next offsets, then host this node's partitions."""
        for record in records:
            self.state.image.replay(record, self.state.image.offset + 1)
        self.sync_partitions()

    def sync_partitions(self) -> None:
        """What the shell does after a commit: a log for each partition this node holds."""
        me = self.node_id
        for topic in self.image.topics_by_name.values():
            for index, p in topic.partitions.items():
                key = (topic.name, index)
                if me not in p.replicas:
                    continue
                current = self.state.partitions.get(key)
                if current is not None:
                    current.leader_epoch = p.leader_epoch
                    current.is_leader = p.leader == me
                    continue
                log = PartitionLog.create(
                    self.disk,
                    f"data/{partition_dir_name(topic.name, index)}",
                    LogConfig(),
                    self.state.now_ms,
                    topic.topic_id,
                )
                self.state.partitions[key] = LocalPartition(
                    topic=topic.name,
                    index=index,
                    topic_id=topic.topic_id,
                    log=log,
                    leader_epoch=p.leader_epoch,
                    flush_before_ack=self.state.settings.flush_before_ack,
                    is_leader=p.leader == me,
                )

    def add_topic(
        self,
        name: str,
        partitions: int | Sequence[Sequence[int]] = 1,
        configs: Mapping[str, str] | None = None,
    ) -> uuid.UUID:
        """A topic as CreateTopics would record it; ``partitions`` is a count (every
        replica on this node) or the replica list of each partition, leader first."""
        topic_id = uuid.UUID(int=next(self._ids))
        assignment = (
            [[self.node_id]] * partitions if isinstance(partitions, int) else list(partitions)
        )
        records: list[Any] = [TopicRecord(name=name, topic_id=topic_id)]
        records += [
            ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=name, name=k, value=v)
            for k, v in sorted((configs or {}).items())
        ]
        records += [
            PartitionRecord(
                partition_id=index,
                topic_id=topic_id,
                replicas=list(replicas),
                isr=list(replicas),
                leader=replicas[0],
                leader_epoch=0,
                partition_epoch=0,
            )
            for index, replicas in enumerate(assignment)
        ]
        self.replay(records)
        return topic_id

    def register_broker(
        self,
        broker_id: int,
        *,
        host: str | None = None,
        port: int | None = None,
        rack: str | None = None,
        fenced: bool = False,
    ) -> None:
        self.replay(
            [
                RegisterBrokerRecord(
                    broker_id=broker_id,
                    incarnation_id=uuid.UUID(int=next(self._ids)),
                    broker_epoch=broker_id * 10,
                    end_points=[
                        BrokerEndpoint(
                            name="PLAINTEXT",
                            host=host or f"broker{broker_id}.test",
                            port=port or PORT + broker_id,
                            security_protocol=PLAINTEXT,
                        )
                    ],
                    rack=rack,
                    fenced=fenced,
                )
            ]
        )

    def set_config(
        self, resource_type: int, resource_name: str, name: str, value: str | None
    ) -> None:
        self.replay(
            [
                ConfigRecord(
                    resource_type=resource_type,
                    resource_name=resource_name,
                    name=name,
                    value=value,
                )
            ]
        )

    # --- Data -------------------------------------------------------------------------

    def partition(self, topic: str, index: int = 0) -> LocalPartition:
        return self.state.partitions[(topic, index)]

    def append(self, topic: str, index: int = 0, batches: int = 1, records: int = 3) -> int:
        """Append ``batches`` batches as leader; return the log end offset."""
        partition = self.partition(topic, index)
        for _ in range(batches):
            partition.log.append_as_leader(
                batch(records), partition.leader_epoch, self.state.now_ms
            )
        return partition.log.log_end_offset

    def flush(self, topic: str, index: int = 0) -> None:
        self.partition(topic, index).log.flush(self.state.now_ms)

    # --- Effects ----------------------------------------------------------------------

    def carry(self, outcome: Outcome) -> Any:
        """Carry ``outcome`` through its commits, as the shell does; return the response."""
        while isinstance(outcome, CommitRecords):
            self.committed.append(list(outcome.records))
            # Through the bytes of the metadata log, as the shell commits them: a record
            # that cannot be framed there would fail here, not on a real node.
            stored = [decode_metadata_record(encode_metadata_record(r))[0] for r in outcome.records]
            assert stored == list(outcome.records)
            self.replay(stored)
            outcome = outcome.then()
        assert isinstance(outcome, Reply), f"expected a reply, got {outcome!r}"
        return outcome.response

    def through_router(
        self,
        api_key: int,
        supported: tuple[int, int],
        handler: Callable[[RequestHeader, Any], Outcome],
        request: Any,
        version: int,
    ) -> Any:
        """Send ``request`` as a wire frame through a Router with ``handler`` registered,
        carry the outcome, encode the reply with ``Router.encode`` and decode it as a
        client would; return the decoded response body."""
        router = Router()
        router.register(api_key, supported, handler)
        routed = router.handle(encode_request(header(api_key, version), request), "harness")
        assert isinstance(routed, Dispatch), routed
        response = self.carry(routed.outcome)
        chunks = Router.encode(routed.header, response, routed.response_version)
        payload = b"".join(
            c if isinstance(c, bytes | bytearray | memoryview) else c.read() for c in chunks
        )
        response_header, body = decode_response(payload, api_key, version)
        assert response_header.correlation_id == routed.header.correlation_id
        return body


def new_harness(
    *,
    node_id: int = NODE_ID,
    properties: Mapping[str, str] | None = None,
    flush_before_ack: bool = True,
    seed: int = 0,
) -> Harness:
    """A broker with an empty image: add topics and brokers with the Harness methods."""
    disk = SimDisk(random.Random(seed))
    disk.makedirs("data")
    disk.fsync_dir("")
    settings = BrokerSettings(
        node_id=node_id,
        cluster_id=CLUSTER_ID,
        host=HOST,
        port=PORT,
        flush_before_ack=flush_before_ack,
    )
    state = BrokerState(settings=settings, image=MetadataImage(), rng=random.Random(seed))
    return Harness(state=state, server=server_config(properties, node_id), disk=disk)
