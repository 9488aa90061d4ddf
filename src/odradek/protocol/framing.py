"""Size-prefixed frames: a decoder that takes bytes as they arrive and yields whole frames.

Every Kafka request and response is an int32 size followed by that many bytes. The
decoder is sans-IO: the shell feeds it whatever the socket returned, and gets back
complete payloads. A size above ``max_frame_bytes`` (Kafka's
``socket.request.max.bytes``, 100 MiB by default) raises FrameTooLargeError before any
of it is buffered, so a hostile peer cannot make us allocate.
"""

from __future__ import annotations

import struct

from odradek.core.errors import DecodeError, FrameTooLargeError
from odradek.protocol.primitives import Buffer

DEFAULT_MAX_FRAME_BYTES = 104_857_600
_SIZE = struct.Struct(">i")


def size_prefix(length: int) -> bytes:
    return _SIZE.pack(length)


def frame(payload: Buffer) -> bytes:
    """Prefix one payload with its size."""
    return _SIZE.pack(len(payload)) + bytes(payload)


class FrameDecoder:
    """Accumulates bytes and splits them into frames."""

    __slots__ = ("_buf", "_closed", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._closed = False

    def feed(self, data: Buffer) -> list[bytearray]:
        """Add bytes; return every frame now complete, in order (payloads only).

        Frames are writable, so that the broker can patch offsets into a produce
        request's record batches in place.
        """
        if self._closed:
            raise DecodeError("decoder used after a protocol error")
        buf = self._buf
        buf += data
        frames: list[bytearray] = []
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < 0:
                self._closed = True
                raise DecodeError(f"negative frame size {size}")
            if size > self.max_frame_bytes:
                self._closed = True
                raise FrameTooLargeError(size, self.max_frame_bytes)
            if end - pos - 4 < size:
                break
            frames.append(buf[pos + 4 : pos + 4 + size])
            pos += 4 + size
        if pos:
            del buf[:pos]
        return frames

    def pending_bytes(self) -> int:
        """Bytes received that do not yet make a whole frame."""
        return len(self._buf)

    def pending_frame_bytes(self) -> int | None:
        """The size, prefix included, of the frame that has begun to arrive and is not
        complete, once its size prefix is here (None before, or with nothing pending)."""
        if len(self._buf) < 4:
            return None
        (size,) = _SIZE.unpack_from(self._buf, 0)
        return int(size) + 4
