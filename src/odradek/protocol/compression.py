"""Record-batch compression: the codecs a records section may be compressed with, and
the reusable buffer the produce path decompresses into.

The codec list and the bytes of each are Kafka's (attribute bits 0-2, see
:class:`~odradek.protocol.record_batch.Compression`).
"""

from __future__ import annotations

import mmap
import struct

import cramjam

from odradek.core.errors import (
    DecodeError,
    EncodeError,
    InvalidRecordBatchError,
)
from odradek.core.invariant import invariant
from odradek.protocol.primitives import INT32
from odradek.protocol.record_batch import (
    BAD_COMPRESSION,
    DECOMPRESSED_TOO_LARGE,
    RECORDS_OFFSET,
    BatchHeader,
    Buffer,
    Compression,
    byte_view,
)

# Compression ---------------------------------------------------------------------

# snappy-java's SnappyOutputStream (what the Java client uses) writes this 16-byte header
# (magic, version 1, compatible version 1) and then blocks of [int32 length][raw snappy].
# librdkafka and others write a raw snappy stream. Java's SnappyInputStream accepts both
# by looking at the magic, and so do we.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java's default, so our output matches the Java client


def compress(codec: int, data: bytes) -> bytes:
    if codec == Compression.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == Compression.SNAPPY:
        out = bytearray(_XERIAL_HEADER)
        with memoryview(data) as view:
            for start in range(0, len(data), _XERIAL_BLOCK_SIZE):
                block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
                out += INT32.pack(len(block))
                out += block
        return bytes(out)
    if codec == Compression.LZ4:
        # The LZ4 frame format: what Kafka's KafkaLZ4BlockOutputStream writes for magic 2.
        return bytes(cramjam.lz4.compress(data))
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise EncodeError(f"unknown compression codec {codec}")


def decompress(codec: int, data: memoryview) -> bytes:
    """Decompress a records section; raises DecodeError for anything that does not."""
    try:
        if codec == Compression.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == Compression.SNAPPY:
            return _snappy_decompress(data)
        if codec == Compression.LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == Compression.ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as e:
        raise DecodeError(f"records do not decompress with codec {codec}: {e}") from None
    raise DecodeError(f"unknown compression codec {codec}")


def _snappy_decompress(data: memoryview) -> bytes:
    if bytes(data[: len(_XERIAL_MAGIC)]) != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(data))
    # The version fields are not checked: librdkafka ignores them too, and one producer in
    # the wild writes them little-endian.
    if len(data) < len(_XERIAL_HEADER):
        raise DecodeError("xerial snappy header is truncated")
    out = bytearray()
    pos = len(_XERIAL_HEADER)
    end = len(data)
    while pos < end:
        if end - pos < 4:
            raise DecodeError(f"xerial snappy block length truncated at {pos}")
        block_length: int = INT32.unpack_from(data, pos)[0]
        pos += 4
        if block_length < 0 or block_length > end - pos:
            raise DecodeError(f"xerial snappy block of {block_length} bytes at {pos - 4}")
        out += cramjam.snappy.decompress_raw(data[pos : pos + block_length])
        pos += block_length
    return bytes(out)


# Encoding ------------------------------------------------------------------------


# What cramjam says when the output buffer fills before the stream ends (lz4, zstd, gzip).
_OUTPUT_FULL = "whole buffer"

_TRIM_BYTES = 8 * 1024 * 1024
"""After a decompression this large the buffer's pages are handed back to the OS, so one
huge batch does not keep the node's memory up."""


class DecompressBuffer:
    """Decompresses records sections into one reusable buffer of at most ``limit`` bytes.

    The buffer is an anonymous memory map of ``limit + 1`` bytes, made on first use: the
    OS gives it pages only as they are written, so a large limit costs address space, not
    memory, and reusing it spares the page faults and zeroing a new buffer would cost on
    every batch (with a fresh map per batch, a 1 MiB lz4 section decompressed 1.7 times
    slower here). A section that would decompress to more than ``limit`` is refused with
    ``DECOMPRESSED_TOO_LARGE`` as soon as the output passes it: a small compressed batch
    cannot make us produce gigabytes.

    A view returned by :meth:`records` is valid until the next call or :meth:`release`;
    one thread uses one buffer.
    """

    __slots__ = ("_map", "_used", "limit")

    def __init__(self, limit: int) -> None:
        invariant(limit > 0, f"decompression limit {limit}")
        self.limit = limit
        self._map: mmap.mmap | None = None
        self._used = 0

    def records(self, buf: Buffer, header: BatchHeader) -> memoryview:
        """The batch's records section as a byte view: where it lies in ``buf`` when
        uncompressed (no copy), else decompressed into this buffer.

        Raises ``BAD_COMPRESSION`` for a section that does not decompress and
        ``DECOMPRESSED_TOO_LARGE`` for one whose records exceed the limit.
        """
        buf = byte_view(buf)
        with memoryview(buf) as whole:
            section = whole[header.position + RECORDS_OFFSET : header.end]
        codec = header.compression
        if codec == Compression.NONE:
            return section
        self.release()
        if self._map is None:
            self._map = mmap.mmap(-1, self.limit + 1)
        with memoryview(self._map) as out:
            size = self._decompress_into(codec, section, out, header.position)
        self._used = size
        return memoryview(self._map)[:size]

    def release(self) -> None:
        """Hand the pages of a large decompression back to the OS (views go stale)."""
        if self._map is not None and self._used > _TRIM_BYTES:
            self._map.madvise(mmap.MADV_DONTNEED)
        self._used = 0

    def _decompress_into(self, codec: int, section: memoryview, out: memoryview, pos: int) -> int:
        try:
            if codec == Compression.SNAPPY:
                return self._snappy_into(section, out, pos)
            if codec == Compression.GZIP:
                size = int(cramjam.gzip.decompress_into(section, out))
            elif codec == Compression.LZ4:
                size = int(cramjam.lz4.decompress_into(section, out))
            elif codec == Compression.ZSTD:
                size = int(cramjam.zstd.decompress_into(section, out))
            else:
                raise InvalidRecordBatchError(
                    BAD_COMPRESSION, f"batch at {pos}: unknown compression codec {codec}"
                )
        except cramjam.DecompressionError as e:
            if _OUTPUT_FULL in str(e):
                raise self._too_large(pos) from None
            raise InvalidRecordBatchError(
                BAD_COMPRESSION, f"batch at {pos}: records do not decompress: {e}"
            ) from None
        if size > self.limit:
            raise self._too_large(pos)
        return size

    def _snappy_into(self, section: memoryview, out: memoryview, pos: int) -> int:
        # A raw snappy stream starts with its uncompressed length, so the limit is checked
        # before anything is decompressed; xerial framing is a sequence of such streams.
        if bytes(section[: len(_XERIAL_MAGIC)]) != _XERIAL_MAGIC:
            return self._snappy_block(section, out, 0, pos)
        if len(section) < len(_XERIAL_HEADER):
            raise InvalidRecordBatchError(
                BAD_COMPRESSION, f"batch at {pos}: xerial snappy header is truncated"
            )
        size = 0
        cursor = len(_XERIAL_HEADER)
        end = len(section)
        while cursor < end:
            if end - cursor < 4:
                raise InvalidRecordBatchError(
                    BAD_COMPRESSION, f"batch at {pos}: xerial snappy block length truncated"
                )
            block_length: int = INT32.unpack_from(section, cursor)[0]
            cursor += 4
            if block_length < 0 or block_length > end - cursor:
                raise InvalidRecordBatchError(
                    BAD_COMPRESSION,
                    f"batch at {pos}: xerial snappy block of {block_length} bytes",
                )
            size = self._snappy_block(section[cursor : cursor + block_length], out, size, pos)
            cursor += block_length
        return size

    def _snappy_block(self, block: memoryview, out: memoryview, size: int, pos: int) -> int:
        claimed = int(cramjam.snappy.decompress_raw_len(block))
        if claimed > self.limit - size:
            raise self._too_large(pos)
        return size + int(cramjam.snappy.decompress_raw_into(block, out[size : self.limit]))

    def _too_large(self, pos: int) -> InvalidRecordBatchError:
        return InvalidRecordBatchError(
            DECOMPRESSED_TOO_LARGE,
            f"batch at {pos}: records decompress to more than {self.limit} bytes",
        )
