"""Carrying outcomes: metadata records are committed only if decided on the current image,
and long polls end when data arrives or their deadline passes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from odradek.broker.effects import CommitRecords, ControllerCall, GroupCall, Outcome, Reply
from odradek.broker.router import Dispatch, Router
from odradek.protocol.api import decode_response, encode_request, encode_response
from odradek.protocol.compression import (
    DecompressBuffer,
)
from odradek.protocol.messages import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    FetchRequest,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ResponseHeader,
)
from odradek.protocol.messages.fetch_request import ReplicaState
from odradek.protocol.metadata import ClientQuotaRecord
from odradek.protocol.metadata.client_quota_record import EntityData
from odradek.shell.clock import monotonic_ms
from odradek.shell.effects import Effects, LongPolls, _joined
from tests.broker.harness import Harness, header, new_harness


class Image:
    def __init__(self) -> None:
        self.generation = 0


class Controller:
    """The active controller: a commit is applied to the image before it returns."""

    def __init__(self, image: Image) -> None:
        self.write_lock = asyncio.Lock()
        self.image = image
        self.committed: list[list[Any]] = []

    async def commit(self, records: list[Any]) -> None:
        self.committed.append(records)
        self.image.generation += 1

    async def handle(self, call: ControllerCall, peer: str = "?") -> Any:
        raise AssertionError("no controller call here")


class Flushes:
    def __init__(self) -> None:
        self.requested = 0

    async def await_flush(self, offsets: dict[tuple[str, int], int]) -> frozenset[tuple[str, int]]:
        return frozenset()

    def request_flush(self) -> None:
        self.requested += 1


class NoChecks:
    async def run(self, check: Callable[[DecompressBuffer], Any]) -> Any:
        raise AssertionError("no record checks here")


class NoGroups:
    async def call(self, call: GroupCall, peer: str) -> Any:
        raise AssertionError("no group calls here")


def test_records_decided_on_an_image_that_moved_on_are_decided_again() -> None:
    async def scenario() -> None:
        h = new_harness()
        image = Image()
        decisions: list[int] = []

        def create_topics(_: Any, body: Any) -> Outcome:
            # Each decision records the image generation it was made on.
            decisions.append(image.generation)
            decided = image.generation
            return CommitRecords([("topic", decided)], lambda: Reply(CreateTopicsResponse()))

        router = Router()
        router.register(CreateTopicsRequest.API_KEY, (0, 7), create_topics)
        effects = _effects(h, router, image)
        controller = Controller(image)
        effects.controller = controller
        payload = bytearray(
            encode_request(header(CreateTopicsRequest.API_KEY, 7), CreateTopicsRequest())
        )
        routed = router.handle(payload)
        assert isinstance(routed, Dispatch)
        answer = effects.answer(routed, payload)
        # Another connection's commit is applied before this request's task first runs.
        image.generation += 1
        assert await answer is not None
        # The first decision, made on the older image, is never committed.
        assert decisions == [0, 1]
        assert controller.committed == [[("topic", 1)]]

    asyncio.run(scenario())


def test_a_long_poll_ends_when_its_partition_gets_data_and_times_out_without() -> None:
    async def scenario() -> None:
        flushes = Flushes()
        polls = LongPolls(flushes, flush_before_ack=False)
        key = ("t", 0)
        waiting = asyncio.ensure_future(polls.wait(frozenset([key]), monotonic_ms() + 60_000))
        await asyncio.sleep(0)
        polls.wake(("other", 0))
        await asyncio.sleep(0)
        assert not waiting.done()
        polls.wake(key)
        assert await waiting is False  # woken, not timed out
        assert await polls.wait(frozenset([key]), monotonic_ms() - 1) is True
        # Without flush-before-ack, data waits for no ack: a poll asks for the flush.
        assert flushes.requested == 2

    asyncio.run(scenario())


def _effects(h: Harness, router: Router, image: Image) -> Effects:
    flushes = Flushes()
    return Effects(
        h.state,
        router,
        image,
        flushes,
        LongPolls(flushes, flush_before_ack=True),
        NoChecks(),
        NoGroups(),
        node_id=h.node_id,
    )


def test_request_time_over_the_quota_throttles_the_answer_and_mutes_the_client() -> None:
    async def scenario() -> None:
        h = new_harness()
        h.replay(
            [
                ClientQuotaRecord(
                    entity=[EntityData("user", None)], key="request_percentage", value=1
                )
            ]
        )
        router = Router()
        router.register(MetadataRequest.API_KEY, (0, 12), lambda _, body: Reply(MetadataResponse()))
        router.register(FetchRequest.API_KEY, (0, 17), lambda _, body: Reply(FetchResponse()))
        effects = _effects(h, router, Image())
        payload = bytearray(encode_request(header(MetadataRequest.API_KEY, 12), MetadataRequest()))
        routed = router.handle(payload)
        assert isinstance(routed, Dispatch)
        # 1% of the loop is 100 ms in the ten seconds the first samples span; 2 s is far over.
        throttle = effects.request_throttle_ms(routed, 2_000_000_000)
        assert throttle == 1000  # bounded by one window, as Kafka bounds request time
        muted: list[int] = []
        answer = await effects.answer(routed, payload, muted.append, throttle)
        assert answer is not None
        _, body = decode_response(_joined(answer), MetadataRequest.API_KEY, 12)
        assert body.throttle_time_ms == 1000
        assert muted == [1000]
        # A follower's fetch is replication: never charged, whatever its handler took.
        follower = bytearray(
            encode_request(
                header(FetchRequest.API_KEY, 17),
                FetchRequest(replica_state=ReplicaState(replica_id=2, replica_epoch=20)),
            )
        )
        fetched = router.handle(follower)
        assert isinstance(fetched, Dispatch)
        assert effects.request_throttle_ms(fetched, 10_000_000_000) == 0

    asyncio.run(scenario())


class Relay:
    """Stands for the active controller: answers a forwarded request with ``response``."""

    def __init__(self, response: bytes) -> None:
        self.response = response

    async def forward(self, payload: bytes, principal: Any, host: str) -> bytes:
        return self.response


def test_a_forwarded_answer_mutes_the_client_for_the_controllers_throttle() -> None:
    async def scenario() -> None:
        h = new_harness()

        def create_topics(_: Any, body: Any) -> Outcome:
            return CommitRecords([("topic", 0)], lambda: Reply(CreateTopicsResponse()))

        router = Router()
        router.register(CreateTopicsRequest.API_KEY, (0, 7), create_topics)
        effects = _effects(h, router, Image())  # no controller here: the write is forwarded
        relayed = encode_response(
            ResponseHeader(correlation_id=1),
            CreateTopicsResponse(throttle_time_ms=1234),
            CreateTopicsRequest.API_KEY,
            7,
        )
        effects.forwarder = Relay(relayed)  # type: ignore[assignment]
        payload = bytearray(
            encode_request(header(CreateTopicsRequest.API_KEY, 7), CreateTopicsRequest())
        )
        routed = router.handle(payload)
        assert isinstance(routed, Dispatch)
        muted: list[int] = []
        answer = await effects.answer(routed, payload, muted.append)
        assert answer == [relayed]  # relayed as it came
        assert muted == [1234]

    asyncio.run(scenario())
