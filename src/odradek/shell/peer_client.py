"""A Kafka protocol client connection for node-to-node requests (Raft, broker lifecycle).

One TCP connection, pipelined: requests carry increasing correlation ids and a reader
task hands each response to the request that waits for it. A broken connection fails
every waiting request with :class:`PeerUnavailable` and is reopened by the next request,
so callers only retry; nothing here sleeps.

A node binds its outgoing connections to its own listener address
(:func:`bind_outgoing_connections`), so that a packet filter can tell its traffic from
another node's when several share one host (``odradek verify`` cuts links between
nodes on 127.0.0.x with nft rules on source and destination address).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import ssl
import struct
from typing import Any

from odradek.protocol.api import Body, decode_response, encode_request
from odradek.protocol.framing import size_prefix
from odradek.protocol.messages.request_header import RequestHeader

log = logging.getLogger("odradek.peer")

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 256 * 1024 * 1024


# The local address of every PeerConnection opened in this process from now on; None
# lets the kernel choose. Set once at node start, before any connection is opened.
_outgoing_host: str | None = None


def bind_outgoing_connections(host: str) -> None:
    """Open this process's node-to-node connections from ``host`` when it is one
    specific IP address (a wildcard or a host name leaves the choice to the kernel)."""
    global _outgoing_host
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return
    if not address.is_unspecified:
        _outgoing_host = str(address)


class PeerUnavailable(ConnectionError):
    """The peer could not be reached, or the connection broke before it answered.

    ``refused`` when the peer's host said so (connection refused, reset, or closed):
    the process is gone or restarting, unlike a timeout, which a cut link also gives."""

    def __init__(self, message: str, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


_REFUSED = (ConnectionRefusedError, ConnectionResetError, BrokenPipeError, EOFError)


def _refused(error: BaseException) -> bool:
    if isinstance(error, PeerUnavailable):
        return error.refused
    return isinstance(error, _REFUSED)


class PeerConnection:
    def __init__(
        self,
        host: str,
        port: int,
        client_id: str,
        connect_timeout_s: float = 1.0,
        tls: ssl.SSLContext | None = None,
    ):
        """``tls``: connect over TLS with this context (the peer's host name checked as
        the context says), within the same connect timeout."""
        self.host = host
        self.tls = tls
        self.port = port
        self.client_id = client_id
        self.connect_timeout_s = connect_timeout_s
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._waiting: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}
        self._next_correlation = 1
        self._connecting: asyncio.Lock = asyncio.Lock()

    async def request(self, body: Body, api_version: int, timeout_s: float) -> Any:
        """Send ``body`` and return the response body; PeerUnavailable or TimeoutError."""
        writer = await self._connected()
        correlation = self._next_correlation
        self._next_correlation += 1
        api_key: int = getattr(type(body), "API_KEY")  # noqa: B009 - Body has no API_KEY
        header = RequestHeader(
            request_api_key=api_key,
            request_api_version=api_version,
            correlation_id=correlation,
            client_id=self.client_id,
        )
        payload = encode_request(header, body)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[correlation] = (api_key, api_version, future)
        try:
            writer.write(size_prefix(len(payload)) + payload)
            await writer.drain()
            async with asyncio.timeout(timeout_s):
                return await future
        except TimeoutError:
            # As Kafka's network client does, a request without an answer in time ends
            # its connection (which may be stuck), and the others waiting on it fail too.
            error = TimeoutError(f"no answer in {timeout_s:g} s")
            self._broken(error)
            raise PeerUnavailable(f"{self.host}:{self.port}: {error}") from None
        except (ConnectionError, OSError) as e:
            self._broken(e)
            raise PeerUnavailable(f"{self.host}:{self.port}: {e}", _refused(e)) from None
        finally:
            self._waiting.pop(correlation, None)

    async def _connected(self) -> asyncio.StreamWriter:
        async with self._connecting:
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            try:
                local = None if _outgoing_host is None else (_outgoing_host, 0)
                async with asyncio.timeout(self.connect_timeout_s):
                    reader, writer = await asyncio.open_connection(
                        self.host,
                        self.port,
                        local_addr=local,
                        ssl=self.tls,
                        server_hostname=self.host if self.tls is not None else None,
                    )
            except (OSError, TimeoutError) as e:
                raise PeerUnavailable(f"{self.host}:{self.port}: {e}", _refused(e)) from None
            self._writer = writer
            self._reader_task = asyncio.create_task(self._read(reader, writer))
            return writer

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                if not 0 <= size <= MAX_RESPONSE_BYTES:
                    raise ConnectionError(f"response of {size} bytes")
                payload = await reader.readexactly(size)
                (correlation,) = _SIZE.unpack_from(payload, 0)
                waiting = self._waiting.get(correlation)
                if waiting is None:
                    continue  # its caller timed out and left
                api_key, api_version, future = waiting
                try:
                    _, body = decode_response(payload, api_key, api_version)
                except Exception as e:  # a response we cannot read fails that request
                    if not future.done():
                        future.set_exception(PeerUnavailable(f"bad response: {e}"))
                    continue
                if not future.done():
                    future.set_result(body)
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as e:
            self._broken(e)
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    def _broken(self, error: BaseException) -> None:
        if self._writer is not None:
            self._writer.close()
        self._writer = None
        for _, _, future in self._waiting.values():
            if not future.done():
                future.set_exception(
                    PeerUnavailable(f"{self.host}:{self.port}: {error}", _refused(error))
                )

    async def close(self) -> None:
        task = self._reader_task
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


class PeerPool:
    """One :class:`PeerConnection` per address, opened on first use, all closed together."""

    def __init__(self, client_id: str, tls: ssl.SSLContext | None = None) -> None:
        self.client_id = client_id
        self.tls = tls
        self._peers: dict[tuple[str, int], PeerConnection] = {}

    def get(self, address: tuple[str, int]) -> PeerConnection:
        peer = self._peers.get(address)
        if peer is None:
            peer = PeerConnection(*address, client_id=self.client_id, tls=self.tls)
            self._peers[address] = peer
        return peer

    async def close(self) -> None:
        for peer in self._peers.values():
            await peer.close()
        self._peers.clear()
