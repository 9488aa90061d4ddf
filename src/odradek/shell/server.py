"""The asyncio network shell: accept connections, split frames, answer in order.

Every connection reads frames with a :class:`FrameDecoder` and hands each to the
:class:`Router`, writing replies in request order (Kafka clients pipeline requests and
match responses by order as well as by correlation id). A protocol error closes that
connection only, with one log line; the server keeps serving everyone else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from odradek.broker.router import Close, Router
from odradek.core.errors import RemoteProtocolError
from odradek.protocol.framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, size_prefix

log = logging.getLogger("odradek.server")


class Server:
    def __init__(
        self,
        router: Router,
        host: str = "127.0.0.1",
        port: int = 9092,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        self.router = router
        self.host = host
        self.port = port
        self.max_frame_bytes = max_frame_bytes
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        log.info("listening on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peername = writer.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if peername else "?"
        decoder = FrameDecoder(self.max_frame_bytes)
        try:
            while data := await reader.read(65536):
                try:
                    frames = decoder.feed(data)
                except RemoteProtocolError as e:
                    log.warning("closing connection from client %s: %s", peer, e)
                    return
                for payload in frames:
                    reply = self.router.handle(payload, peer)
                    if isinstance(reply, Close):
                        log.warning("closing connection: %s", reply.reason)
                        return
                    size = sum(len(c) for c in reply.chunks)
                    writer.writelines([size_prefix(size), *reply.chunks])
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


async def serve_forever(server: Server, ready: asyncio.Event | None = None) -> None:
    """Run until SIGINT or SIGTERM, then stop accepting and return."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    if ready is not None:
        ready.set()
    print(f"bootstrap.servers={server.host}:{server.port}", flush=True)
    await stop.wait()
    await server.stop()
