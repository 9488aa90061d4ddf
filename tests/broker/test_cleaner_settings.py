"""The log cleaner's dynamic keys: resolved per broker over the cluster default over
``server.properties``, checked as Kafka checks a reconfiguration, and taken up by a
running cleaner."""

from __future__ import annotations

import re
from typing import Any

import pytest

from odradek.broker.cleaner_settings import CleanerSettings, cleaner_settings
from odradek.broker.topic_config import validate_dynamic_broker_configs
from odradek.controller.image import CONFIG_RESOURCE_BROKER
from odradek.core.errors import ConfigError
from odradek.shell.log_cleaner import LogCleaner
from odradek.storage.cleaner.offset_map import OffsetMap
from tests.broker.test_topic_config import server

NODE = 1


def configs(
    broker: dict[str, str] | None = None, default: dict[str, str] | None = None
) -> dict[tuple[int, str], dict[str, str]]:
    return {
        (CONFIG_RESOURCE_BROKER, str(NODE)): broker or {},
        (CONFIG_RESOURCE_BROKER, ""): default or {},
    }


def test_kafkas_defaults_then_server_properties_then_the_cluster_default_then_the_broker() -> None:
    assert cleaner_settings(server()) == CleanerSettings(
        threads=1, dedupe_buffer_bytes=128 << 20, io_max_bytes_per_second=1.7976931348623157e308,
        backoff_ms=15_000,
    )  # fmt: skip
    static = server(**{"log.cleaner.threads": "2", "log.cleaner.backoff.ms": "1000"})
    assert cleaner_settings(static).threads == 2 and cleaner_settings(static).backoff_ms == 1000
    default = {"log.cleaner.backoff.ms": "500", "log.cleaner.io.max.bytes.per.second": "1e6"}
    broker = {"log.cleaner.backoff.ms": "200", "log.cleaner.dedupe.buffer.size": "1048576"}
    assert cleaner_settings(static, configs(broker, default), NODE) == CleanerSettings(
        threads=2, dedupe_buffer_bytes=1 << 20, io_max_bytes_per_second=1e6, backoff_ms=200
    )
    # Another broker's dynamic configs are not this one's.
    assert cleaner_settings(static, configs(broker, default), 2).backoff_ms == 500


def test_a_stored_value_this_build_refuses_falls_back_to_the_next_layer() -> None:
    stored = configs({"log.cleaner.threads": "many"}, {"log.cleaner.threads": "3"})
    assert cleaner_settings(server(), stored, NODE).threads == 3


def test_the_cleaners_keys_are_dynamic_and_a_running_cleaner_keeps_a_thread() -> None:
    typed = validate_dynamic_broker_configs({
        "log.cleaner.threads": "4", "log.cleaner.dedupe.buffer.size": "1048576",
        "log.cleaner.io.max.bytes.per.second": "5e6", "log.cleaner.backoff.ms": "100",
    })  # fmt: skip
    assert typed == {
        "log.cleaner.threads": 4, "log.cleaner.dedupe.buffer.size": 1 << 20,
        "log.cleaner.io.max.bytes.per.second": 5e6, "log.cleaner.backoff.ms": 100,
    }  # fmt: skip
    with pytest.raises(ConfigError, match="at least 1"):
        validate_dynamic_broker_configs({"log.cleaner.threads": "0"})
    with pytest.raises(ConfigError, match=re.escape("log.cleaner.backoff.ms")):
        validate_dynamic_broker_configs({"log.cleaner.backoff.ms": "-1"})
    # log.cleaner.enable stays static, as in Kafka.
    with pytest.raises(ConfigError, match=re.escape("log.cleaner.enable")):
        validate_dynamic_broker_configs({"log.cleaner.enable": "false"})


def test_a_reconfigured_cleaner_shares_the_rate_and_the_dedupe_buffer_among_its_workers() -> None:
    current = {"log.cleaner.threads": "1"}
    unused: Any = None  # not run: only its settings are asked
    cleaner = LogCleaner(
        unused, unused, unused, unused, lambda: cleaner_settings(server(), configs(current), NODE)
    )
    assert cleaner.rate_share >= 1e300  # Kafka's default: no throttle to share
    current.update({
        "log.cleaner.threads": "4", "log.cleaner.io.max.bytes.per.second": "8000000",
        "log.cleaner.dedupe.buffer.size": str(64 << 20),
    })  # fmt: skip
    cleaner.reconfigure()
    assert cleaner.settings.threads == 4
    assert cleaner.rate_share == 2_000_000  # four processes, 8 MB/s together
    assert cleaner.map_capacity == OffsetMap.for_buffer(64 << 20, 4).capacity
    assert cleaner.map_capacity < OffsetMap.for_buffer(64 << 20, 1).capacity
