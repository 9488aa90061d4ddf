"""The group coordinator's settings, each under the Kafka key it comes from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["GroupConfig"]

_INT_MAX = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Limits and timers of the classic group protocol and of committed offsets.

    The defaults are Kafka's. :meth:`from_values` reads them from a broker's typed
    configuration (``{key: value}``, e.g. ``ServerConfig.values``).
    """

    min_session_timeout_ms: int = 6000
    """``group.min.session.timeout.ms``: a JoinGroup asking less gets INVALID_SESSION_TIMEOUT."""
    max_session_timeout_ms: int = 1_800_000
    """``group.max.session.timeout.ms``: a JoinGroup asking more gets INVALID_SESSION_TIMEOUT."""
    initial_rebalance_delay_ms: int = 3000
    """``group.initial.rebalance.delay.ms``: how long an empty group waits for more members."""
    max_size: int = _INT_MAX
    """``group.max.size``: members one group may have (GROUP_MAX_SIZE_REACHED beyond)."""
    offsets_topic_num_partitions: int = 50
    """``offsets.topic.num.partitions``: fixed once the topic exists."""
    offsets_retention_ms: int = 10080 * 60_000
    """``offsets.retention.minutes`` in ms: how long offsets of an empty group are kept."""
    offsets_retention_check_interval_ms: int = 600_000
    """``offsets.retention.check.interval.ms``: how often expired offsets are looked for."""
    offset_metadata_max_bytes: int = 4096
    """``offset.metadata.max.bytes``: longest metadata string of one committed offset."""
    new_member_join_timeout_ms: int = 300_000
    """How long a new member's first JoinGroup may wait in a rebalance (Kafka's constant).

    A new member cannot heartbeat before it has a member id, so its session timeout
    cannot apply; without this bound a client that disconnected during a long rebalance
    would stay a member forever.
    """

    @classmethod
    def from_values(cls, values: Mapping[str, object]) -> GroupConfig:
        """Read Kafka's keys from ``values``; a key that is absent keeps its default."""

        def get(key: str, default: int) -> int:
            value = values.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else default

        d = cls()
        return cls(
            min_session_timeout_ms=get("group.min.session.timeout.ms", d.min_session_timeout_ms),
            max_session_timeout_ms=get("group.max.session.timeout.ms", d.max_session_timeout_ms),
            initial_rebalance_delay_ms=get(
                "group.initial.rebalance.delay.ms", d.initial_rebalance_delay_ms
            ),
            max_size=get("group.max.size", d.max_size),
            offsets_topic_num_partitions=get(
                "offsets.topic.num.partitions", d.offsets_topic_num_partitions
            ),
            offsets_retention_ms=get("offsets.retention.minutes", 10080) * 60_000,
            offsets_retention_check_interval_ms=get(
                "offsets.retention.check.interval.ms", d.offsets_retention_check_interval_ms
            ),
            offset_metadata_max_bytes=get("offset.metadata.max.bytes", d.offset_metadata_max_bytes),
        )
