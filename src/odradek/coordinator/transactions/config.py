"""The transaction coordinator's settings, each under the Kafka key it comes from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["TransactionConfig"]


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    """Limits and timers of the transaction coordinator; the defaults are Kafka's.

    :meth:`from_values` reads them from a broker's typed configuration (``{key: value}``,
    e.g. ``ServerConfig.values``).
    """

    transaction_state_log_num_partitions: int = 50
    """``transaction.state.log.num.partitions``: fixed once the topic exists."""
    transaction_max_timeout_ms: int = 900_000
    """``transaction.max.timeout.ms``: an InitProducerId asking more (or not more than 0)
    gets INVALID_TRANSACTION_TIMEOUT."""
    transactional_id_expiration_ms: int = 604_800_000
    """``transactional.id.expiration.ms``: how long an idle transactional id (Empty or
    completed) is kept after its last update."""

    @classmethod
    def from_values(cls, values: Mapping[str, object]) -> TransactionConfig:
        """Read Kafka's keys from ``values``; a key that is absent keeps its default."""

        def get(key: str, default: int) -> int:
            value = values.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else default

        d = cls()
        return cls(
            transaction_state_log_num_partitions=get(
                "transaction.state.log.num.partitions", d.transaction_state_log_num_partitions
            ),
            transaction_max_timeout_ms=get(
                "transaction.max.timeout.ms", d.transaction_max_timeout_ms
            ),
            transactional_id_expiration_ms=get(
                "transactional.id.expiration.ms", d.transactional_id_expiration_ms
            ),
        )
