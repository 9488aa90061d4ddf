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
import time
from dataclasses import dataclass
from typing import Any, Final

from odradek.protocol.api import Body, decode_response, encode_request
from odradek.protocol.error_codes import ErrorCode, error_name
from odradek.protocol.framing import size_prefix
from odradek.protocol.messages import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from odradek.protocol.messages.request_header import RequestHeader
from odradek.security.mechanism import MechanismError
from odradek.security.sasl_client import mechanism_client
from odradek.security.sasl_keys import ClientCredentials

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


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How a client connection proves who it is: TLS with ``tls`` (the peer's host name
    checked as the context says), then a SASL login with ``sasl``; either, both or
    neither (PLAINTEXT)."""

    tls: ssl.SSLContext | None = None
    sasl: ClientCredentials | None = None


PLAINTEXT: Final = ClientSecurity()

# A SASL session with a lifetime (KIP-368) is replaced by a new connection once this
# share of it has passed and nothing waits on the old one, and at the latest at this
# second share: well before the server would close it.
_REAUTH_SOFT: Final = 0.8
_REAUTH_HARD: Final = 0.95
_SASL_HANDSHAKE_VERSION: Final = 1
_SASL_AUTHENTICATE_VERSION: Final = 2


class PeerUnavailable(ConnectionError):
    """The peer could not be reached, or the connection broke before it answered.

    ``refused`` when the peer's host said so (connection refused, reset, or closed):
    the process is gone or restarting, unlike a timeout, which a cut link also gives."""

    def __init__(self, message: str, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


class AuthenticationRefused(PeerUnavailable):
    """The peer refused this node's SASL login (a wrong password, a mechanism it does
    not offer). Retrying does not help until the configuration changes."""


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
        security: ClientSecurity = PLAINTEXT,
    ):
        """``security``: TLS and SASL, both done within the connect timeout."""
        self.host = host
        self.security = security
        # When the SASL session (if it has a lifetime) should be renewed, loop time.
        self._renew_at: tuple[float, float] | None = None
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
        correlation, api_key, frame = self._frame(body, api_version)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[correlation] = (api_key, api_version, future)
        try:
            writer.write(frame)
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
                if not self._session_expiring():
                    return self._writer
                self._broken(ConnectionError("SASL session renewed"))
            tls = self.security.tls
            try:
                local = None if _outgoing_host is None else (_outgoing_host, 0)
                async with asyncio.timeout(self.connect_timeout_s):
                    reader, writer = await asyncio.open_connection(
                        self.host,
                        self.port,
                        local_addr=local,
                        ssl=tls,
                        server_hostname=self.host if tls is not None else None,
                    )
                    if self.security.sasl is not None:
                        try:
                            await self._login(reader, writer, self.security.sasl)
                        except BaseException:
                            writer.close()
                            raise
            except (OSError, TimeoutError, asyncio.IncompleteReadError) as e:
                raise PeerUnavailable(f"{self.host}:{self.port}: {e}", _refused(e)) from None
            self._writer = writer
            self._reader_task = asyncio.create_task(self._read(reader, writer))
            return writer

    def _session_expiring(self) -> bool:
        """Whether the SASL session is due for renewal (a new connection logs in anew)."""
        if self._renew_at is None:
            return False
        soft, hard = self._renew_at
        now = asyncio.get_running_loop().time()
        return now >= hard or (now >= soft and not self._waiting)

    async def _login(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        credentials: ClientCredentials,
    ) -> None:
        """Log in on a new connection, before any other request is sent on it."""
        started = asyncio.get_running_loop().time()
        handshake = await self._exchange(
            reader,
            writer,
            SaslHandshakeRequest(mechanism=credentials.mechanism),
            _SASL_HANDSHAKE_VERSION,
        )
        assert isinstance(handshake, SaslHandshakeResponse)
        if handshake.error_code != ErrorCode.NONE:
            raise AuthenticationRefused(
                f"{self.host}:{self.port}: SASL handshake for {credentials.mechanism}: "
                f"{error_name(handshake.error_code)} (the listener offers "
                f"{', '.join(handshake.mechanisms) or 'nothing'})"
            )
        client = mechanism_client(credentials, time.time())
        token: bytes | None = client.first()
        lifetime_ms = 0
        try:
            while token is not None:
                response = await self._exchange(
                    reader,
                    writer,
                    SaslAuthenticateRequest(auth_bytes=token),
                    _SASL_AUTHENTICATE_VERSION,
                )
                assert isinstance(response, SaslAuthenticateResponse)
                if response.error_code != ErrorCode.NONE:
                    raise AuthenticationRefused(
                        f"{self.host}:{self.port}: SASL {credentials.mechanism} login as "
                        f"{credentials.username!r} refused: {response.error_message}"
                    )
                lifetime_ms = response.session_lifetime_ms
                token = client.next(response.auth_bytes)
        except MechanismError as e:
            raise AuthenticationRefused(f"{self.host}:{self.port}: SASL login: {e}") from None
        self._renew_at = (
            (
                started + lifetime_ms / 1000 * _REAUTH_SOFT,
                started + lifetime_ms / 1000 * _REAUTH_HARD,
            )
            if lifetime_ms > 0
            else None
        )

    def _frame(self, body: Body, version: int) -> tuple[int, int, bytes]:
        """The next correlation id, ``body``'s API key, and the request as sent."""
        correlation = self._next_correlation
        self._next_correlation += 1
        api_key: int = getattr(type(body), "API_KEY")  # noqa: B009 - Body has no API_KEY
        header = RequestHeader(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=correlation,
            client_id=self.client_id,
        )
        payload = encode_request(header, body)
        return correlation, api_key, size_prefix(len(payload)) + payload

    async def _exchange(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, body: Body, version: int
    ) -> Any:
        """One request and its answer on a connection nothing else uses yet."""
        _, api_key, frame = self._frame(body, version)
        writer.write(frame)
        await writer.drain()
        (size,) = _SIZE.unpack(await reader.readexactly(4))
        if not 0 <= size <= MAX_RESPONSE_BYTES:
            raise ConnectionError(f"response of {size} bytes")
        answer = await reader.readexactly(size)
        try:
            _, response = decode_response(answer, api_key, version)
        except Exception as e:
            raise ConnectionError(f"bad response: {e}") from None
        return response

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

    def __init__(self, client_id: str, security: ClientSecurity = PLAINTEXT) -> None:
        self.client_id = client_id
        self.security = security
        self._peers: dict[tuple[str, int], PeerConnection] = {}

    def get(self, address: tuple[str, int]) -> PeerConnection:
        peer = self._peers.get(address)
        if peer is None:
            peer = PeerConnection(*address, client_id=self.client_id, security=self.security)
            self._peers[address] = peer
        return peer

    async def close(self) -> None:
        for peer in self._peers.values():
            await peer.close()
        self._peers.clear()
