"""The log cleaner's own settings as this broker resolves them, dynamic ones included.

``log.cleaner.threads``, ``log.cleaner.dedupe.buffer.size``,
``log.cleaner.io.max.bytes.per.second`` and ``log.cleaner.backoff.ms`` are dynamic in
Kafka: an AlterConfigs of this broker (or of the cluster default) changes a running
cleaner. Each comes from this broker's dynamic config, else the cluster default, else
``server.properties``, else Kafka's default, as every dynamic broker key does.
``log.cleaner.enable`` is read-only: it is read at start only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, TypeVar

from odradek.broker.server_config import ServerConfig
from odradek.broker.server_keys import ServerKeys
from odradek.controller.image import CONFIG_RESOURCE_BROKER
from odradek.core.config_keys import ConfigValue, Setting
from odradek.core.errors import ConfigError

T = TypeVar("T")


LOG_CLEANER_KEYS: Final[frozenset[str]] = frozenset({
    ServerKeys.log_cleaner_threads.name,
    ServerKeys.log_cleaner_dedupe_buffer_size.name,
    ServerKeys.log_cleaner_io_max_bytes_per_second.name,
    ServerKeys.log_cleaner_backoff_ms.name,
})  # fmt: skip
"""The cleaner's dynamic broker keys (per broker or as the cluster default)."""


def check_dynamic_cleaner_key(name: str, value: ConfigValue) -> None:
    """Kafka's check of a reconfiguration: a running cleaner keeps at least one thread
    (``log.cleaner.threads=0`` is for ``server.properties``, with the cleaner off)."""
    if name == ServerKeys.log_cleaner_threads.name and isinstance(value, int) and value < 1:
        raise ConfigError("Log cleaner threads should be at least 1")


@dataclass(frozen=True, slots=True)
class CleanerSettings:
    threads: int
    dedupe_buffer_bytes: int
    io_max_bytes_per_second: float
    backoff_ms: int


def cleaner_settings(
    server: ServerConfig,
    image_configs: Mapping[tuple[int, str], Mapping[str, str]] | None = None,
    node_id: int | None = None,
) -> CleanerSettings:
    """The settings from ``server`` with the image's dynamic broker configs over them.
    A stored value this build does not accept falls back to the next layer (the
    controller validated it when it was written; a newer build may have)."""
    configs = image_configs or {}
    layers = (
        configs.get((CONFIG_RESOURCE_BROKER, str(node_id)), {}) if node_id is not None else {},
        configs.get((CONFIG_RESOURCE_BROKER, ""), {}),
    )

    def value(setting: Setting[T], static: T) -> T:
        for layer in layers:
            raw = layer.get(setting.name)
            if raw is None:
                continue
            try:
                return setting.read(setting.key.parse(raw))
            except ConfigError:
                continue
        return static

    return CleanerSettings(
        threads=value(ServerKeys.log_cleaner_threads, server.log_cleaner_threads),
        dedupe_buffer_bytes=value(
            ServerKeys.log_cleaner_dedupe_buffer_size, server.log_cleaner_dedupe_buffer_size
        ),
        io_max_bytes_per_second=value(
            ServerKeys.log_cleaner_io_max_bytes_per_second,
            server.log_cleaner_io_max_bytes_per_second,
        ),
        backoff_ms=value(ServerKeys.log_cleaner_backoff_ms, server.log_cleaner_backoff_ms),
    )
