"""A response goes out whole and in order: its size, its bytes, and segment-file ranges
sent with sendfile, also when the socket takes a range only in parts."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from pathlib import Path

from odradek.protocol.primitives import Records
from odradek.shell.connections import send_frame
from odradek.shell.real_fs import RealFileSystem
from odradek.storage.segment import FileRange


def _exchange(tmp_path: Path, position: int, length: int, sndbuf: int | None) -> None:
    content = os.urandom(4 << 20)
    (tmp_path / "segment.log").write_bytes(content)
    handle = RealFileSystem().open(str(tmp_path / "segment.log"))
    chunks: list[Records] = [b"head", FileRange(handle, position, length), b"tail"]

    async def scenario() -> bytes:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if sndbuf is not None:
                writer.get_extra_info("socket").setsockopt(
                    socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf
                )
            await send_frame(writer, chunks)
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.sleep(0.05)  # let the sender fill the socket before reading
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        body = await reader.readexactly(size)
        writer.close()
        server.close()
        await server.wait_closed()
        return body

    body = asyncio.run(scenario())
    handle.close()
    assert body == b"head" + content[position : position + length] + b"tail"


def test_a_range_the_socket_takes_at_once(tmp_path: Path) -> None:
    _exchange(tmp_path, 1000, 16 << 10, sndbuf=None)


def test_a_range_larger_than_the_socket_buffer_goes_out_in_parts(tmp_path: Path) -> None:
    _exchange(tmp_path, 12345, 3 << 20, sndbuf=16 << 10)
