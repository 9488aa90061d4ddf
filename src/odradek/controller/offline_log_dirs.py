"""The record of a broker's failed log dirs, kept with the broker's configs.

A broker whose log dir fails (a full disk, an I/O error) tells the active controller in
a heartbeat (``OfflineLogDirs``, KIP-858) before it stops. The controller then takes the
broker out of every ISR and leadership at once, as for a fenced broker, and records the
failed dirs in the broker config :data:`OFFLINE_LOG_DIRS_CONFIG`, so that ``odradek
cluster health`` on any node, after any restart or snapshot, names the broker and the
dir, and so that no later heartbeat of that process unfences it: its replicas are gone
with the dir. A new incarnation of the broker (a restart with the disk repaired)
registers its dirs again, and the controller clears the record in the same commit.

Kafka keeps the failed dirs out of the broker's registration (its
``BrokerRegistrationChangeRecord.LogDirs`` lists the dirs still online), which cannot
say "none left": that change record reads an empty list as "unchanged", and a Kafka
broker with no dir left halts without telling anyone. A broker config can.

Pure: the image and the request go in, ``ConfigRecord`` values come out.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Final

from odradek.controller.image import CONFIG_RESOURCE_BROKER, MetadataImage
from odradek.core.kafka_uuid import from_kafka_str, to_kafka_str
from odradek.protocol.metadata import ConfigRecord

__all__ = ["OFFLINE_LOG_DIRS_CONFIG", "clear_record", "offline_log_dirs", "record_offline"]

OFFLINE_LOG_DIRS_CONFIG: Final = "odradek.log.dirs.offline"
"""The broker config that lists a broker's failed log dirs (comma-separated directory
ids); only the controller writes it."""


def offline_log_dirs(image: MetadataImage, broker_id: int) -> list[uuid.UUID]:
    """The log dirs of ``broker_id`` the controller recorded as failed."""
    value = image.configs.get((CONFIG_RESOURCE_BROKER, str(broker_id)), {}).get(
        OFFLINE_LOG_DIRS_CONFIG
    )
    return parse(value)


def parse(value: str | None) -> list[uuid.UUID]:
    """The directory ids a value of :data:`OFFLINE_LOG_DIRS_CONFIG` names (ignoring any
    that do not parse: the value is the controller's, but a reader must not fail)."""
    found = []
    for item in (value or "").split(","):
        try:
            found.append(from_kafka_str(item.strip()))
        except ValueError:
            continue
    return found


def record_offline(
    image: MetadataImage, broker_id: int, directories: Iterable[uuid.UUID]
) -> ConfigRecord | None:
    """The record adding ``directories`` to the broker's failed dirs; None if known."""
    known = offline_log_dirs(image, broker_id)
    added = [d for d in directories if d not in known]
    if not added:
        return None
    every = sorted({*known, *added}, key=to_kafka_str)
    return ConfigRecord(
        resource_type=CONFIG_RESOURCE_BROKER,
        resource_name=str(broker_id),
        name=OFFLINE_LOG_DIRS_CONFIG,
        value=",".join(to_kafka_str(d) for d in every),
    )


def clear_record(image: MetadataImage, broker_id: int) -> ConfigRecord | None:
    """The record removing the broker's failed dirs (a new incarnation registered)."""
    if not offline_log_dirs(image, broker_id):
        return None
    return ConfigRecord(
        resource_type=CONFIG_RESOURCE_BROKER,
        resource_name=str(broker_id),
        name=OFFLINE_LOG_DIRS_CONFIG,
        value=None,
    )
