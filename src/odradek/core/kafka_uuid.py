"""Kafka's text form of a UUID: URL-safe base64 of the 16 bytes, without padding.

Topic ids, cluster ids and directory ids are written this way in ``meta.properties``,
``partition.metadata`` and on the command line (``odradek storage random-uuid``).
"""

from __future__ import annotations

import base64
import binascii
import uuid


def to_kafka_str(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def from_kafka_str(text: str) -> uuid.UUID:
    """Parse Kafka's 22-character form; raise ValueError for anything else."""
    if len(text) != 22:
        raise ValueError(f"not a Kafka uuid (22 base64 characters): {text!r}")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError):
        raise ValueError(f"not a Kafka uuid: {text!r}") from None
    if len(raw) != 16:
        raise ValueError(f"not a Kafka uuid: {text!r}")
    return uuid.UUID(bytes=raw)
