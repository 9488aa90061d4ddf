"""The framing of one metadata record as it is stored in the ``__cluster_metadata`` log.

This module owns the bytes of a record *value* in the metadata log (the key is null)
and nothing else: the record batches around it are ``odradek.protocol.record_batch`` (and
``record_codec``),
and the record bodies are the generated classes in ``odradek.protocol.metadata``.

Kafka's layout (``MetadataRecordSerde``, built on ``AbstractApiMessageSerde``)::

    value => frame_version api_key version body
      frame_version  unsigned varint, always 1 (0 was the 2.8 KRaft preview; never read)
      api_key        unsigned varint, the metadata record type (``RECORDS`` key)
      version        unsigned varint, the version the body was written in
      body           the record, in that version's (flexible) encoding

Decoding is strict in the same places Kafka is: an unknown frame version, an unknown
record type, a version outside the schema's range and bytes left over after the body
are all :class:`~odradek.core.errors.DecodeError`.
"""

from __future__ import annotations

from typing import ClassVar, Protocol

from odradek.core.errors import DecodeError, EncodeError, UnsupportedVersionError
from odradek.protocol.metadata import RECORDS
from odradek.protocol.primitives import Reader, Writer

__all__ = [
    "FRAME_VERSION",
    "MetadataRecord",
    "decode_metadata_record",
    "encode_metadata_record",
]

FRAME_VERSION = 1
"""The only frame version Kafka writes or accepts."""


class MetadataRecord(Protocol):
    """What every generated metadata record class offers to the framing."""

    NAME: ClassVar[str]
    API_KEY: ClassVar[int]
    VALID_VERSIONS: ClassVar[tuple[int, int]]

    def write(self, w: Writer, version: int) -> None: ...


def encode_metadata_record(record: MetadataRecord, version: int | None = None) -> bytes:
    """Frame ``record`` as a metadata log record value.

    ``version`` defaults to the highest version the schema defines. A record whose
    class is not a registered metadata record, or a version outside the schema's
    range, is our bug and raises :class:`EncodeError` before anything is written.
    """
    cls = type(record)
    api_key = getattr(cls, "API_KEY", None)
    if api_key is None or RECORDS.get(api_key) is not cls:
        raise EncodeError(f"{cls.__name__} is not a metadata record")
    low, high = record.VALID_VERSIONS
    if version is None:
        version = high
    if not low <= version <= high:
        raise UnsupportedVersionError(
            f"{record.NAME} has versions {low}-{high}, not version {version}"
        )
    w = Writer()
    w.unsigned_varint(FRAME_VERSION)
    w.unsigned_varint(api_key)
    w.unsigned_varint(version)
    record.write(w, version)
    return w.getvalue()


def decode_metadata_record(
    data: bytes | bytearray | memoryview,
) -> tuple[MetadataRecord, int]:
    """Parse one metadata log record value; return the record and its version."""
    r = Reader(data)
    frame_version = r.unsigned_varint()
    if frame_version == 0:
        # Kafka names this case: frame version 0 only existed in the 2.8 preview.
        raise DecodeError(
            "metadata record with frame version 0 (the KRaft preview in Kafka 2.8) cannot be read"
        )
    if frame_version != FRAME_VERSION:
        raise DecodeError(
            f"metadata record with unknown frame version {frame_version} "
            f"(only {FRAME_VERSION} is supported)"
        )
    api_key = r.unsigned_varint()
    cls = RECORDS.get(api_key)
    if cls is None:
        raise DecodeError(f"unknown metadata record type {api_key}")
    version = r.unsigned_varint()
    low, high = cls.VALID_VERSIONS
    if not low <= version <= high:
        raise DecodeError(f"{cls.NAME} has versions {low}-{high}, not version {version}")
    record: MetadataRecord = cls.read(r, version)
    if r.remaining():
        raise DecodeError(f"{r.remaining()} bytes left over after {cls.NAME} v{version}")
    return record, version
