"""A Kafka protocol listener for command-line tests: each request gets the answer a test
function gives, so that a test decides what a broker (or controller) says, and when it
goes away in the middle of a command.

The stub runs its own event loop in a thread, so a command under test can run
``asyncio.run`` in the test's thread as it does in a terminal.
"""

from __future__ import annotations

import asyncio
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from odradek.protocol.api import decode_request, encode_response
from odradek.protocol.framing import size_prefix
from odradek.protocol.messages.request_header import RequestHeader
from odradek.protocol.messages.response_header import ResponseHeader

_SIZE = struct.Struct(">i")


class _Stop:
    """Answer that closes every connection and the listener without answering: the
    broker was stopped while the request was on its way."""


STOP = _Stop()


class _Hang:
    """Answer that never comes (the connection stays open)."""


HANG = _Hang()

Answer = Callable[[RequestHeader, Any], Any]


@dataclass
class StubBroker:
    answer: Answer
    """Called for every request with its header and decoded body: returns the response
    body, :data:`STOP` or :data:`HANG`."""
    requests: list[tuple[RequestHeader, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """Failures of ``answer`` (a request the test did not expect): assert it is empty."""
    port: int = 0
    stopped: threading.Event = field(default_factory=threading.Event)
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _server: asyncio.Server | None = None
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> StubBroker:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)
        return self

    def close(self) -> None:
        if self._loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        assert self._thread is not None
        self._thread.join(10)
        self._loop.close()
        self._loop = None

    def received(self, api_key: int) -> list[Any]:
        """The bodies of the requests of this API received so far."""
        return [body for header, body in self.requests if header.request_api_key == api_key]

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        self.stopped.set()
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                payload = await reader.readexactly(size)
                header, body = decode_request(payload, allow_trailing=True)
                self.requests.append((header, body))
                try:
                    response = self.answer(header, body)
                except Exception as e:  # the test's answer failed: recorded, asserted on
                    self.errors.append(f"{type(body).__name__}: {e!r}")
                    return
                if response is STOP:
                    await self._stop()
                    return
                if response is HANG:
                    continue
                encoded = encode_response(
                    ResponseHeader(correlation_id=header.correlation_id),
                    response,
                    header.request_api_key,
                    header.request_api_version,
                )
                writer.write(size_prefix(len(encoded)) + encoded)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()


def start(stubs: list[StubBroker], answer: Answer) -> StubBroker:
    """A stub answering with ``answer``, started and added to ``stubs`` (the fixture of
    tests/cli/conftest.py closes and checks it)."""
    stub = StubBroker(answer).start()
    stubs.append(stub)
    return stub
