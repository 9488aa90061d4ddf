"""The shape of a DescribeConfigs answer, shared by broker and topic resources.

This module owns :class:`ConfigEntry` (one row: name, value, source, flags, synonyms,
type, documentation), :class:`ConfigSynonym` and :class:`ConfigSource` (Kafka's ids).
The broker's rows are made by :mod:`odradek.broker.config_requests`, the topic's by
:mod:`odradek.broker.topic_config`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from odradek.core.config_keys import ConfigType

__all__ = ["ConfigEntry", "ConfigSource", "ConfigSynonym"]


class ConfigSource(enum.IntEnum):
    """Where a config value came from: Kafka's DescribeConfigs ``ConfigSource`` ids."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


@dataclass(frozen=True)
class ConfigSynonym:
    """One place a value for a config could come from, as DescribeConfigs lists them."""

    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    """One row of a DescribeConfigs answer."""

    name: str
    value: str | None
    source: ConfigSource
    is_default: bool
    read_only: bool
    sensitive: bool
    synonyms: tuple[ConfigSynonym, ...] = ()
    config_type: ConfigType | None = None
    documentation: str = ""
