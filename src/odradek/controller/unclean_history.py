"""The record of unclean elections and what they lost, kept with each topic's configs.

An unclean election (the topic's ``unclean.leader.election.enable``, or ``odradek
partitions recover``) may drop acknowledged records, and only later, when the replicas
of the old ISR come back and truncate, does anyone learn how many. ``odradek cluster
health`` must show both, on any node, after any restart and any snapshot; the operator
must be able to say "seen". So the history is one topic config,
:data:`UNCLEAN_ELECTIONS_CONFIG`, written by the active controller only (ADR 0012):

* when it elects uncleanly, it appends an :class:`UncleanElection` (partition, new
  leader, its leader epoch, time) in the same commit as the ``PartitionChangeRecord``;
* a broker that truncates records the new history lacks, either below its high
  watermark (acknowledged for certain) or written before a recorded unclean election of
  the partition, reports a :class:`LossReport` in a heartbeat sent at once (Odradek's
  tagged field :data:`LOSS_REPORTS_TAG`) and fetches that partition again only once it
  is recorded; the controller adds it to the election whose epoch the broker followed.

The value is JSON, a list of elections, the newest :data:`KEEP` per topic. Deleting the
key (IncrementalAlterConfigs DELETE) is the operator's acknowledgement; nothing else
may set it.

Pure: images and values go in, ``ConfigRecord`` values come out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Final

from odradek.controller.image import CONFIG_RESOURCE_TOPIC, MetadataImage
from odradek.protocol.metadata import ConfigRecord, PartitionChangeRecord

__all__ = [
    "KEEP",
    "LOSS_REPORTS_TAG",
    "UNCLEAN_ELECTIONS_CONFIG",
    "LossReport",
    "UncleanElection",
    "decode_loss_reports",
    "encode_loss_reports",
    "history_records",
    "loss_records",
    "parse_history",
    "render_history",
    "truncation_loss",
]

UNCLEAN_ELECTIONS_CONFIG: Final = "odradek.unclean.elections"
"""The topic config that holds the history (JSON); only the controller writes it."""

LOSS_REPORTS_TAG: Final = 10_001
"""Odradek's tagged field of BrokerHeartbeatRequest: JSON list of :class:`LossReport`."""

KEEP: Final = 20
"""Elections kept per topic: enough for an operator to see a pattern, small in snapshots."""


@dataclass(frozen=True, slots=True)
class LossReport:
    """One replica's truncation: its records from ``truncated_to`` to ``log_end`` are not
    in the partition's new history; they are in that broker's quarantine. Those below
    its ``high_watermark`` were acknowledged for certain; the others may have been (a
    restarted broker's high watermark is the checkpointed one, behind the real one)."""

    topic: str
    partition: int
    leader_epoch: int  # the epoch the broker followed when it truncated
    broker: int
    high_watermark: int
    truncated_to: int
    log_end: int

    @property
    def dropped(self) -> int:
        return max(0, self.log_end - self.truncated_to)

    @property
    def acknowledged(self) -> int:
        """Of the dropped records, those certainly acknowledged."""
        return max(0, min(self.high_watermark, self.log_end) - self.truncated_to)


@dataclass(frozen=True, slots=True)
class UncleanElection:
    partition: int
    leader: int  # -1 when a loss was reported for an election not on record
    leader_epoch: int
    time_ms: int
    requested: bool  # by ``odradek partitions recover`` rather than the topic config
    losses: tuple[LossReport, ...] = field(default=())

    @property
    def estimated_lost(self) -> int | None:
        """The records this election dropped, as far as known: every replica of the old
        ISR held the acknowledged ones, so the most any one broker reported (the sum of
        its truncations: each drops other records); None while no replica has reported."""
        return self._most_by_one_broker(lambda report: report.dropped)

    @property
    def acknowledged_lost(self) -> int | None:
        """Of :attr:`estimated_lost`, the records certainly acknowledged (a lower bound)."""
        return self._most_by_one_broker(lambda report: report.acknowledged)

    def _most_by_one_broker(self, count: Callable[[LossReport], int]) -> int | None:
        if not self.losses:
            return None
        by_broker: dict[int, int] = {}
        for report in self.losses:
            by_broker[report.broker] = by_broker.get(report.broker, 0) + count(report)
        return max(by_broker.values())


def parse_history(value: str | None) -> list[UncleanElection]:
    """The elections in a config value (oldest first); a damaged value reads as none
    rather than hiding the rest of the health report."""
    if not value:
        return []
    try:
        items = json.loads(value)
        return [
            UncleanElection(
                partition=int(item["partition"]),
                leader=int(item["leader"]),
                leader_epoch=int(item["leader_epoch"]),
                time_ms=int(item["time_ms"]),
                requested=bool(item["requested"]),
                losses=tuple(LossReport(**loss) for loss in item.get("losses", ())),
            )
            for item in items
        ]
    except (ValueError, TypeError, KeyError):
        return []


def render_history(elections: Sequence[UncleanElection]) -> str:
    return json.dumps([asdict(e) for e in elections[-KEEP:]], separators=(",", ":"), sort_keys=True)


def _history(image: MetadataImage, topic: str) -> list[UncleanElection]:
    configs = image.configs.get((CONFIG_RESOURCE_TOPIC, topic), {})
    return parse_history(configs.get(UNCLEAN_ELECTIONS_CONFIG))


def _record(topic: str, elections: Sequence[UncleanElection]) -> ConfigRecord:
    return ConfigRecord(
        resource_type=CONFIG_RESOURCE_TOPIC,
        resource_name=topic,
        name=UNCLEAN_ELECTIONS_CONFIG,
        value=render_history(elections),
    )


def history_records(
    image: MetadataImage,
    changes: Iterable[PartitionChangeRecord],
    now_ms: int,
    *,
    requested: bool,
) -> list[ConfigRecord]:
    """The records that add each unclean election in ``changes`` to its topic's history.

    ``changes`` are the ``PartitionChangeRecord`` values of unclean elections, not yet
    replayed: each new leader's epoch is the partition's current one plus one."""
    added: dict[str, list[UncleanElection]] = {}
    for change in changes:
        topic = image.topics_by_id.get(change.topic_id)
        if topic is None or change.partition_id not in topic.partitions:
            continue
        partition = topic.partitions[change.partition_id]
        added.setdefault(topic.name, []).append(
            UncleanElection(
                partition=change.partition_id,
                leader=change.leader,
                leader_epoch=partition.leader_epoch + 1,
                time_ms=now_ms,
                requested=requested,
            )
        )
    return [
        _record(name, [*_history(image, name), *elections])
        for name, elections in sorted(added.items())
    ]


def loss_records(image: MetadataImage, reports: Iterable[LossReport]) -> list[ConfigRecord]:
    """The records that add each report to the election whose epoch the broker followed:
    the newest one of its partition at or below ``report.leader_epoch``. A report that
    matches none (the operator acknowledged the election before the replica returned)
    starts an entry of its own with leader -1, so no loss goes unrecorded. A report
    already on record (a heartbeat answered after the commit was lost) is not added
    twice. Reports for topics that no longer exist are dropped."""
    histories: dict[str, list[UncleanElection]] = {}
    for report in reports:
        if report.topic not in image.topics_by_name:
            continue
        history = histories.setdefault(report.topic, _history(image, report.topic))
        matches = [
            i
            for i, e in enumerate(history)
            if e.partition == report.partition and e.leader_epoch <= report.leader_epoch
        ]
        if not matches:
            history.append(
                UncleanElection(report.partition, -1, report.leader_epoch, 0, False, (report,))
            )
            continue
        index = max(matches, key=lambda i: (history[i].leader_epoch, i))
        election = history[index]
        if report in election.losses:
            continue
        history[index] = replace(election, losses=(*election.losses, report))
    changed = {
        name: elections
        for name, elections in histories.items()
        if render_history(elections) != render_history(_history(image, name))
    }
    return [_record(name, elections) for name, elections in sorted(changed.items())]


def encode_loss_reports(reports: Sequence[LossReport]) -> bytes:
    return json.dumps([asdict(r) for r in reports], separators=(",", ":")).encode()


def decode_loss_reports(data: bytes) -> list[LossReport]:
    """The reports in a heartbeat's tagged field; malformed data reads as none (a loss
    report must never make a heartbeat fail: the session is what keeps a broker alive)."""
    try:
        return [LossReport(**item) for item in json.loads(data)]
    except (ValueError, TypeError):
        return []


def truncation_loss(
    image: MetadataImage,
    report: LossReport,
    *,
    written_in_epoch: int,
    below_high_watermark: bool,
) -> LossReport | None:
    """``report`` if a follower's truncation (described by it) dropped what the
    partition gave up, else None.

    That is the case when it truncated below its high watermark (records acknowledged
    for certain: only an unclean history leads there), or when it dropped records
    written in an epoch older than the partition's newest recorded unclean election
    (``written_in_epoch``, the epoch of the first dropped record): records of the old
    ISR's history that the new leader lacks. An ordinary truncation of an uncommitted
    tail after a clean election is neither."""
    if report.log_end <= report.truncated_to:
        return None
    if below_high_watermark:
        return report
    epochs = [
        e.leader_epoch for e in _history(image, report.topic) if e.partition == report.partition
    ]
    if epochs and written_in_epoch < max(epochs):
        return report
    return None
