"""The clients of a verify run (confluent-kafka): writers, group consumers, the final
reader, and the recorder of their history.

Writers send unique values (``wN-M``) round-robin over the partitions with ``acks=all``
and idempotence on, several in flight each; every send is an ``invoke`` and its
delivery report an ``ok`` (with the offset), ``fail`` or ``info`` (no answer in time).
Consumers in one group poll and commit; after the faults are healed, one reader with
no group reads every partition from its start to its high watermark. Every client takes
the run's ``security`` settings (librdkafka's keys: SASL_SSL with SCRAM-SHA-512 under
``--security sasl_ssl``, none on PLAINTEXT).
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.verify.history import FAIL, INFO, INVOKE, OK, Op

TOPIC = "verify"
GROUP = "verify-group"
SEND_INTERVAL_S = 0.01
MAX_IN_FLIGHT = 8
MESSAGE_TIMEOUT_MS = 6000
KEYS = 20
"""Keys a partition's values update in the keyed workload (``--workload keyed``)."""
COMPACTED_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    # Small segments (Kafka's test override), a low ratio and short tombstone retention,
    # so that the cleaner runs many times within a short run.
    "internal.segment.bytes": "8192",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "1000",
}


class Recorder:
    """The history, appended to from every client thread; times from one clock."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.ops: list[Op] = []
        self._lock = threading.Lock()

    def now(self) -> float:
        return round(time.monotonic() - self.start, 4)

    def add(self, process: str, type_: str, f: str, **fields: Any) -> None:
        op = Op(self.now(), process, type_, f, **fields)
        with self._lock:
            self.ops.append(op)

    def snapshot(self) -> list[Op]:
        with self._lock:
            return list(self.ops)


Security = Mapping[str, str]
"""librdkafka's security keys of a run (``security.protocol``, ``sasl.*``, ``ssl.*``)."""


def _client_config(bootstrap: str, security: Security | None) -> dict[str, Any]:
    return {
        **(security or {}),
        "bootstrap.servers": bootstrap,
        "socket.timeout.ms": 5000,
        "topic.metadata.refresh.interval.ms": 1000,
        "metadata.max.age.ms": 3000,
        "reconnect.backoff.max.ms": 1000,
        "log_level": 3,  # errors only: a partitioned broker is expected here
    }


def create_topic(
    bootstrap: str,
    partitions: int,
    replication: int,
    timeout_s: float,
    security: Security | None = None,
    *,
    configs: Mapping[str, str] | None = None,
) -> None:
    admin = AdminClient(_client_config(bootstrap, security))
    deadline = time.monotonic() + timeout_s
    while True:
        futures = admin.create_topics(
            [
                NewTopic(
                    TOPIC, num_partitions=partitions, replication_factor=replication,
                    config=dict(configs or {}),
                )
            ]
        )  # fmt: skip
        try:
            futures[TOPIC].result(timeout=15)
            break
        except KafkaException as e:
            if e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                break
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    while time.monotonic() < deadline:
        if all(leader is not None for leader in leaders(admin, partitions).values()):
            return
        time.sleep(0.5)
    raise RuntimeError(f"topic {TOPIC}: not every partition has a leader")


def leaders(admin: AdminClient, partitions: int) -> dict[int, int | None]:
    """Each partition's leader as the metadata of any reachable broker says."""
    try:
        topic = admin.list_topics(TOPIC, timeout=5).topics.get(TOPIC)
    except KafkaException:
        return dict.fromkeys(range(partitions))
    found: dict[int, int | None] = dict.fromkeys(range(partitions))
    if topic is not None and topic.error is None:
        for p, meta in topic.partitions.items():
            found[p] = meta.leader if meta.leader >= 0 else None
    return found


def admin_client(bootstrap: str, security: Security | None = None) -> AdminClient:
    return AdminClient(_client_config(bootstrap, security))


def _is_fatal(error: object) -> bool:
    return isinstance(error, KafkaError) and (error.fatal() or error.code() == KafkaError._FATAL)


class Writer(threading.Thread):
    def __init__(
        self,
        index: int,
        bootstrap: str,
        partitions: int,
        recorder: Recorder,
        idempotent: bool,
        security: Security | None = None,
        *,
        keys: int | None = None,
    ) -> None:
        super().__init__(name=f"writer-{index}", daemon=True)
        self.idempotent = idempotent
        self.keys = keys
        """The keyed workload: value ``N-M`` updates key ``k<M % keys>`` (the checker
        finds the key from the value)."""
        self.security = security
        self.process = f"writer-{index}"
        self.bootstrap = bootstrap
        self.partitions = partitions
        self.recorder = recorder
        self.stopping = threading.Event()
        self.in_flight = 0
        self.last_ok: dict[int, float] = {}
        self._sent = 0
        self._fatal = threading.Event()
        self._producer = self._new_producer()

    def _new_producer(self) -> Producer:
        # Without idempotence no send is retried, so a value can be written twice only
        # by the cluster: "duplicated" stays a finding about the cluster, not the client.
        # With idempotence, librdkafka resends whatever it still holds under a new
        # producer epoch, with new sequence numbers, after a request that got no answer
        # (its documented recovery, KIP-360): a copy the broker wrote but never
        # acknowledged is then written again, and no broker can tell (mixed seed 14
        # showed 17 such copies). One request in flight, and a socket timeout past the
        # message timeout, leave it nothing to resend: a request without an answer
        # fails its messages (possibly written, reported as unknown) and nothing that
        # was sent is sent again under another epoch.
        delivery = (
            {
                "max.in.flight.requests.per.connection": 1,
                "socket.timeout.ms": MESSAGE_TIMEOUT_MS + 1000,
            }
            if self.idempotent
            else {"retries": 0}
        )
        return Producer(
            {
                **_client_config(self.bootstrap, self.security),
                **delivery,
                "acks": "all",
                "enable.idempotence": self.idempotent,
                "linger.ms": 1,
                "message.timeout.ms": MESSAGE_TIMEOUT_MS,
                "request.timeout.ms": 3000,
                "error_cb": self._error,
            }
        )

    def _error(self, err: KafkaError) -> None:
        if err.fatal():
            self._fatal.set()

    def _report(self, partition: int, value: str) -> Callable[[KafkaError | None, Message], None]:
        def delivered(err: KafkaError | None, msg: Message) -> None:
            self.in_flight -= 1
            if err is None:
                self.recorder.add(
                    self.process, OK, "send", partition=partition, value=value, offset=msg.offset()
                )
                self.last_ok[partition] = self.recorder.now()
            else:
                # A timeout or a retriable error leaves the outcome unknown: the batch may
                # have been appended and committed after all.
                known = not err.retriable() and err.code() != KafkaError._MSG_TIMED_OUT
                self.recorder.add(
                    self.process, FAIL if known else INFO, "send",
                    partition=partition, value=value, error=err.name(),
                )  # fmt: skip

        return delivered

    def run(self) -> None:
        config: dict[str, object] = {"idempotent": self.idempotent}
        if self.keys is not None:
            config["keys"] = self.keys
        self.recorder.add(self.process, INFO, "config", value=config)
        next_send = time.monotonic()
        while not self.stopping.is_set():
            now = time.monotonic()
            if self.in_flight < MAX_IN_FLIGHT and now >= next_send:
                next_send = now + SEND_INTERVAL_S
                self._send()
            self._poll(0.005)
        self._finish()

    def _send(self) -> None:
        partition = self._sent % self.partitions
        value = f"{self.process[7:]}-{self._sent}"
        self.recorder.add(self.process, INVOKE, "send", partition=partition, value=value)
        self._sent += 1
        self.in_flight += 1
        try:
            self._producer.produce(
                TOPIC, value=value.encode(), partition=partition,
                key=None if self.keys is None else f"k{(self._sent - 1) % self.keys}",
                on_delivery=self._report(partition, value),
            )  # fmt: skip
        except (BufferError, KafkaException) as e:
            self.in_flight -= 1
            self.recorder.add(
                self.process, FAIL, "send", partition=partition, value=value, error=str(e)
            )
            if isinstance(e, KafkaException) and _is_fatal(e.args[0]):
                # A producer that failed fatally refuses every send from then on, and
                # error_cb does not always say so first: without this a writer sent
                # nothing more for the rest of the run (2,556 sends failed in 16 s).
                self._fatal.set()

    def _poll(self, timeout_s: float) -> None:
        with contextlib.suppress(KafkaException):  # reported through error_cb too
            self._producer.poll(timeout_s)
        if self._fatal.is_set():
            # An idempotent producer that lost its sequence (after an unclean election,
            # for one) is fatally failed: what it still holds ends as unknown, and a new
            # producer carries on with new values.
            self._fatal.clear()
            self._producer.purge()
            self._producer.flush(1)
            self.in_flight = 0
            self._producer = self._new_producer()

    def _finish(self) -> None:
        self._producer.flush(MESSAGE_TIMEOUT_MS / 1000 + 5)
        if len(self._producer):
            self._producer.purge()
            self._producer.flush(2)


class GroupConsumer(threading.Thread):
    def __init__(
        self, index: int, bootstrap: str, recorder: Recorder, security: Security | None = None
    ) -> None:
        super().__init__(name=f"consumer-{index}", daemon=True)
        self.process = f"consumer-{index}"
        self.recorder = recorder
        self.stopping = threading.Event()
        self.generation = 0
        self.consumer = Consumer(
            {
                **_client_config(bootstrap, security),
                "group.id": GROUP,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 1000,
            }
        )

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.generation += 1
        self.recorder.add(
            self.process, INFO, "assign", value=[tp.partition for tp in partitions],
            generation=self.generation,
        )  # fmt: skip

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.generation += 1

    def run(self) -> None:
        self.consumer.subscribe([TOPIC], on_assign=self._assigned, on_revoke=self._revoked)
        try:
            while not self.stopping.is_set():
                try:
                    messages = self.consumer.consume(num_messages=200, timeout=0.5)
                except KafkaException:
                    continue
                records = [
                    [m.partition(), m.offset(), (m.value() or b"").decode()]
                    for m in messages
                    if m.error() is None
                ]
                if records:
                    self.recorder.add(
                        self.process, OK, "poll", records=records, generation=self.generation
                    )
                    # Nothing to commit, or the coordinator moved: the next poll commits.
                    with contextlib.suppress(KafkaException):
                        self.consumer.commit(asynchronous=True)
        finally:
            with contextlib.suppress(KafkaException, RuntimeError):
                self.consumer.close()


def final_read(
    bootstrap: str,
    partitions: int,
    recorder: Recorder,
    timeout_s: float,
    security: Security | None = None,
) -> dict[int, list[tuple[int, str]]] | None:
    """Every partition from its first offset to its high watermark, read until the high
    watermarks stop moving; None when that did not happen within ``timeout_s``."""
    recorder.add("final", INVOKE, "read")
    consumer = Consumer(
        {
            **_client_config(bootstrap, security),
            "group.id": f"verify-final-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    read: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + timeout_s
    try:
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(partitions)])
        position = dict.fromkeys(range(partitions), -1)
        while time.monotonic() < deadline:
            try:
                ends = {
                    p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=5)[1]
                    for p in range(partitions)
                }
            except KafkaException:
                time.sleep(0.5)
                continue
            while time.monotonic() < deadline and any(
                position[p] + 1 < ends[p] for p in range(partitions)
            ):
                for m in consumer.consume(num_messages=1000, timeout=0.5):
                    p, offset = m.partition(), m.offset()
                    if m.error() is None and p is not None and offset is not None:
                        read[p].append((offset, (m.value() or b"").decode()))
                        position[p] = offset
            try:
                again = {
                    p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=5)[1]
                    for p in range(partitions)
                }
            except KafkaException:
                continue
            if again == ends and all(position[p] + 1 >= ends[p] for p in range(partitions)):
                recorder.add(
                    "final",
                    OK,
                    "read",
                    value={str(p): [list(r) for r in v] for p, v in read.items()},
                )
                return read
        recorder.add("final", FAIL, "read", error="the high watermarks were not reached in time")
        return None
    finally:
        consumer.close()
