"""The asyncio shell on a real socket: pipelining, in-order answers, bad clients."""

from __future__ import annotations

import asyncio
import struct

from odradek.broker.router import Router
from odradek.protocol.api import RequestHeader, decode_response, encode_request
from odradek.protocol.framing import frame
from odradek.protocol.messages import ApiVersionsRequest
from odradek.shell.server import Server


def api_versions(correlation_id: int, version: int = 3) -> bytes:
    header = RequestHeader(
        request_api_key=18, request_api_version=version, correlation_id=correlation_id
    )
    return frame(encode_request(header, ApiVersionsRequest()))


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


async def _scenario() -> None:
    server = Server(Router(), "127.0.0.1", 0, max_frame_bytes=1024)
    await server.start()
    try:
        good_r, good_w = await asyncio.open_connection("127.0.0.1", server.port)
        # Pipelined: three requests in one write, answered in order.
        good_w.write(api_versions(1) + api_versions(2, 0) + api_versions(3, 4))
        ids = []
        for version in (3, 0, 4):
            header, _ = decode_response(await read_frame(good_r), 18, version)
            ids.append(header.correlation_id)
        assert ids == [1, 2, 3]

        # Garbage, then an oversized frame: each such connection is closed...
        for junk in (b"\x00\x00\x00\x04\xde\xad\xbe\xef", b"\x00\x10\x00\x00"):
            bad_r, bad_w = await asyncio.open_connection("127.0.0.1", server.port)
            bad_w.write(junk)
            assert await asyncio.wait_for(bad_r.read(), 5) == b""
            bad_w.close()

        # ...while the good connection keeps being served.
        good_w.write(api_versions(4))
        header, _ = decode_response(await read_frame(good_r), 18, 3)
        assert header.correlation_id == 4
        good_w.close()
    finally:
        await server.stop()


def test_pipelining_and_bad_clients() -> None:
    asyncio.run(asyncio.wait_for(_scenario(), 30))
