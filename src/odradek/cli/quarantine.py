"""``odradek quarantine``: look at the records a replica removed, and publish them again.

A truncation (a follower whose log diverged from its new leader's, an unclean election, a
torn tail cut at recovery) never deletes records: storage copies them into
``<log dir>/<topic>-<partition>/quarantine/<entry>/`` (see
:mod:`odradek.storage.quarantine`). This module is the operator's side of that folder:

* ``list`` reads every entry's manifest in one log dir;
* ``show`` decodes an entry's batches and prints its records;
* ``republish`` produces an entry's records again, with acks=all, through the broker
  that leads the target partition, and reports what was acknowledged.

It reads the files directly, so it runs on the host that holds the log dir; it needs
no running node except for ``republish``.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import click

from odradek.cli.client import (
    Address,
    ClusterClient,
    bootstrap_server_option,
    command_config_option,
    connect,
)
from odradek.core.errors import DecodeError, EncodeError, InvalidRecordBatchError
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import MetadataRequest, ProduceRequest
from odradek.protocol.messages import metadata_request as mreq
from odradek.protocol.messages import produce_request as preq
from odradek.protocol.record_batch import (
    BatchHeader,
    Compression,
    ControlType,
    TimestampType,
    iter_batches,
)
from odradek.protocol.record_codec import (
    Record,
    decode_records,
    encode_batch,
)
from odradek.shell.peer_client import PeerConnection, PeerUnavailable
from odradek.shell.real_fs import RealFileSystem
from odradek.storage import quarantine as store
from odradek.storage.fs import join
from odradek.storage.log import parse_partition_dir_name, partition_dir_name

TIMEOUT_S = 10.0
PRODUCE_VERSION = 9
METADATA_VERSION = 12
MAX_REQUEST_BYTES = 1024 * 1024
"""Batches are grouped into Produce requests up to this size, so that one request stays
well under a broker's socket.request.max.bytes; a single larger batch goes alone."""
LEADER_ATTEMPTS = 10
"""How often a produce is retried after an answer that says nothing was appended (no
leader yet, leader moved, ISR too small): leader changes settle within seconds."""
RETRY_DELAY_S = 0.5
SHOW_WIDTH = 60
"""Characters of a key or value that ``show`` prints before cutting it, so that one
record stays on one terminal line."""

# Only answers that guarantee the batch was not appended are retried: retrying anything
# else (a timeout, NOT_ENOUGH_REPLICAS_AFTER_APPEND) could write the records twice.
_RETRIABLE = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_ENOUGH_REPLICAS,
    }
)


# Reading entries ------------------------------------------------------------------


def _iso(ms: int) -> str:
    if ms < 0:
        return "-"
    when = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _offsets(start_offset: int, end_offset: int) -> str:
    """An entry's offsets, inclusive as people read them. Recovery cuts whole segments
    without reading their batches, so its manifests know where the cut began but not
    where it ended (end_offset == start_offset)."""
    return f"{start_offset}..{end_offset - 1}" if end_offset > start_offset else f"{start_offset}.."


def partition_dirs(fs: RealFileSystem, log_dir: str, topic: str | None) -> list[tuple[str, int]]:
    """The (topic, partition) of every partition directory in ``log_dir``, sorted."""
    found = []
    for name in fs.listdir(log_dir):
        parsed = parse_partition_dir_name(name)
        if parsed is None or not fs.is_dir(join(log_dir, name)):
            continue
        if topic is None or parsed[0] == topic:
            found.append(parsed)
    return sorted(found)


def list_entries(fs: RealFileSystem, log_dir: str, topic: str | None) -> list[dict[str, Any]]:
    rows = []
    for name, partition in partition_dirs(fs, log_dir, topic):
        directory = join(log_dir, partition_dir_name(name, partition))
        for manifest in store.entries(fs, directory):
            rows.append(
                {"topic": name, "partition": partition}
                | asdict(manifest)
                | {"when": _iso(manifest.when_ms)}
            )
    return rows


def _entry(
    fs: RealFileSystem, log_dir: str, topic: str, partition: int, name: str
) -> tuple[store.QuarantineManifest, bytes]:
    directory = join(log_dir, partition_dir_name(topic, partition))
    manifest = next((e for e in store.entries(fs, directory) if e.name == name), None)
    if manifest is None:
        raise click.ClickException(
            f"no quarantine entry {name!r} in {directory} (see `odradek quarantine list`)"
        )
    return manifest, fs.read_file(store.records_path(directory, name))


@dataclass(frozen=True, slots=True)
class QuarantinedBatch:
    header: BatchHeader
    records: list[Record]
    problem: str | None = None
    """Why the batch could not be decoded; its records are then unknown."""

    @property
    def log_append_time_ms(self) -> int | None:
        """For LOG_APPEND_TIME the broker's time is what consumers saw, not the record's."""
        if self.header.timestamp_type == TimestampType.LOG_APPEND_TIME:
            return self.header.max_timestamp
        return None


@dataclass(frozen=True, slots=True)
class DecodedEntry:
    batches: list[QuarantinedBatch]
    tail_bytes: int
    """Bytes after the last whole batch (a torn write that recovery cut off)."""
    problem: str | None
    """Why the walk stopped early (a batch length that cannot be), if it did."""


def decode_entry(data: bytes) -> DecodedEntry:
    """Every batch of a records.log. A bad batch is kept, with its problem, and the walk
    goes on by the length fields: a recovery entry starts with the batch that failed its
    check, and the batches after it are usually sound."""
    batches: list[QuarantinedBatch] = []
    walk = iter_batches(data)
    problem = None
    try:
        for header in walk:
            try:
                batches.append(QuarantinedBatch(header, decode_records(data, header.position)))
            except (InvalidRecordBatchError, DecodeError) as e:
                batches.append(QuarantinedBatch(header, [], str(e)))
    except InvalidRecordBatchError as e:
        problem = str(e)
    return DecodedEntry(batches, walk.tail_bytes, problem)


def _control_type(batch: QuarantinedBatch) -> int | None:
    """The control type of a readable control batch (control_batch.control_record_type
    reads it from a buffer; the records are already decoded here)."""
    if not batch.header.is_control or not batch.records:
        return None
    key = batch.records[0].key or b""
    # The key is version int16 then type int16; Kafka ignores any bytes after them.
    return int.from_bytes(key[2:4], "big") if len(key) >= 4 else None


def _aborted_producers(batches: Iterable[QuarantinedBatch]) -> set[int]:
    """Producers whose transaction an ABORT marker in this entry ended."""
    return {b.header.producer_id for b in batches if _control_type(b) == ControlType.ABORT}


def _render(data: bytes | None, width: int | None) -> tuple[str | None, str]:
    """Text when the bytes are printable UTF-8, else hex; cut to ``width`` characters."""
    if data is None:
        return None, "null"
    try:
        text = data.decode("utf-8")
        kind = "text" if text.isprintable() else "hex"
    except UnicodeDecodeError:
        kind = "hex"
    if kind == "hex":
        text = data.hex()
    if width is not None and len(text) > width:
        text = text[: width - 3] + "..."
    return text, kind


def _record_dict(batch: QuarantinedBatch, record: Record, width: int | None) -> dict[str, Any]:
    timestamp = record.timestamp if batch.log_append_time_ms is None else batch.log_append_time_ms
    key, key_format = _render(record.key, width)
    value, value_format = _render(record.value, width)
    return {
        "offset": batch.header.base_offset + record.offset_delta,
        "timestamp_ms": timestamp,
        "timestamp": _iso(timestamp),
        "key": key,
        "key_format": key_format,
        "value": value,
        "value_format": value_format,
        "headers": len(record.headers),
    }


def _batch_kind(batch: QuarantinedBatch) -> str:
    if batch.problem is not None:
        return "unreadable"
    if batch.header.is_control:
        control = _control_type(batch)
        try:
            return "control" if control is None else f"control {ControlType(control).name}"
        except ValueError:
            # A newer Kafka may define control types this one does not know.
            return "control"
    return "transactional" if batch.header.is_transactional else "data"


# The commands ------------------------------------------------------------------------


@click.group()
def quarantine() -> None:
    """Inspect and republish records that a replica removed by truncation."""


_log_dir = click.option(
    "--log-dir",
    required=True,
    type=click.Path(exists=True, file_okay=False),
    help="A broker's log dir (log.dirs), holding <topic>-<partition> directories.",
)
_topic = click.option("--topic", required=True, help="The topic the records were removed from.")
_partition = click.option("--partition", type=int, required=True, help="The partition number.")
_entry_name = click.option("--entry", "name", required=True, help="The entry (from `list`).")


@quarantine.command("list")
@_log_dir
@click.option("--topic", default=None, help="Only this topic's partitions.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def list_command(log_dir: str, topic: str | None, as_json: bool) -> None:
    """Every quarantine entry of every partition in a log dir, oldest first."""
    rows = list_entries(RealFileSystem(), log_dir, topic)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo(f"no quarantined records in {log_dir}")
        return
    click.echo(
        f"{'PARTITION':<24} {'ENTRY':<42} {'WHEN':<24} {'EPOCH':>5} {'OFFSETS':<21} "
        f"{'BATCHES':>7} {'RECORDS':>7} {'BYTES':>10}  REASON"
    )
    for r in rows:
        offsets = _offsets(r["start_offset"], r["end_offset"])
        click.echo(
            f"{r['topic'] + '-' + str(r['partition']):<24} {r['name']:<42} {r['when']:<24} "
            f"{r['leader_epoch']:>5} {offsets:<21} {r['batch_count']:>7} "
            f"{r['record_count']:>7} {r['size_bytes']:>10}  {r['reason']}"
        )


@quarantine.command()
@_log_dir
@_topic
@_partition
@_entry_name
@click.option("--json", "as_json", is_flag=True, help="Print JSON (keys and values uncut).")
@click.option("--limit", type=click.IntRange(min=0), default=None, help="At most N records.")
def show(
    log_dir: str, topic: str, partition: int, name: str, as_json: bool, limit: int | None
) -> None:
    """Decode an entry's batches and print each record: offset, time, key, value, headers.

    Keys and values are printed as text when they are printable UTF-8, else as hex; the
    table cuts them to fit a line, --json does not.
    """
    manifest, data = _entry(RealFileSystem(), log_dir, topic, partition, name)
    decoded = decode_entry(data)
    width = None if as_json else SHOW_WIDTH
    batches: list[dict[str, Any]] = []
    shown = 0
    for batch in decoded.batches:
        records = []
        for record in batch.records:
            if limit is not None and shown >= limit:
                break
            records.append(_record_dict(batch, record, width))
            shown += 1
        batches.append(
            {
                "base_offset": batch.header.base_offset,
                "last_offset": batch.header.last_offset,
                "kind": _batch_kind(batch),
                "compression": _codec_name(batch.header.compression),
                "problem": batch.problem,
                "records": records,
            }
        )
        if limit is not None and shown >= limit:
            break
    if as_json:
        info = asdict(manifest) | {
            "topic": topic,
            "partition": partition,
            "when": _iso(manifest.when_ms),
            "batches": batches,
            "tail_bytes": decoded.tail_bytes,
            "problem": decoded.problem,
        }
        click.echo(json.dumps(info, indent=2))
        return
    offsets = _offsets(manifest.start_offset, manifest.end_offset)
    click.echo(
        f"{topic}-{partition} {manifest.name}: {manifest.reason}; leader epoch "
        f"{manifest.leader_epoch}; offsets {offsets}; "
        f"{manifest.record_count} records in {manifest.batch_count} batches, "
        f"{manifest.size_bytes} bytes"
    )
    click.echo(f"{'OFFSET':>10}  {'TIMESTAMP':<24}  {'KEY':<24}  {'HEADERS':>7}  VALUE")
    for b in batches:
        if b["kind"] != "data" or b["compression"] != "none":
            extra = f": {b['problem']}" if b["problem"] else ""
            click.echo(
                f"# batch {b['base_offset']}..{b['last_offset']}: {b['kind']}, "
                f"{b['compression']}{extra}"
            )
        for r in b["records"]:
            key = "null" if r["key"] is None else r["key"]
            value = "null" if r["value"] is None else r["value"]
            if r["key_format"] == "hex":
                key = "0x" + key
            if r["value_format"] == "hex":
                value = "0x" + value
            click.echo(
                f"{r['offset']:>10}  {r['timestamp']:<24}  {key:<24}  {r['headers']:>7}  {value}"
            )
    if decoded.tail_bytes:
        click.echo(f"# {decoded.tail_bytes} bytes after the last whole batch (a torn write)")
    if decoded.problem:
        click.echo(f"# the walk stopped: {decoded.problem}")


def _codec_name(codec: int) -> str:
    try:
        return Compression(codec).name.lower()
    except ValueError:
        return f"codec {codec}"


# Republish --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Planned:
    """One batch to produce: the quarantined batch's records, renumbered from 0."""

    batch: bytes
    record_count: int
    first_offset: int
    last_offset: int
    """The original offsets, so the report can say which records went where."""


@dataclass(frozen=True, slots=True)
class Plan:
    batches: list[Planned]
    skipped: list[str]
    """Batches left out on purpose (control batches, aborted transactions)."""
    unreadable_records: int
    """Records in batches that cannot be decoded, so cannot be produced again."""


def plan_republish(decoded: DecodedEntry) -> Plan:
    """The batches to produce for an entry, one per quarantined data batch.

    Batch boundaries and codecs are kept: each original batch was accepted once, so it
    fits the broker's limits again. Producer ids and sequences are dropped (the records
    are new writes of a tool, not retries of the old producer), and control batches are
    skipped: a transaction marker cannot be produced, and records of a transaction that
    an ABORT marker in the entry ended were never visible to read_committed consumers.
    """
    aborted = _aborted_producers(decoded.batches)
    planned: list[Planned] = []
    skipped: list[str] = []
    unreadable = 0
    for batch in decoded.batches:
        header = batch.header
        span = f"offsets {header.base_offset}..{header.last_offset}"
        if batch.problem is not None:
            unreadable += header.records_count
            skipped.append(f"{span}: unreadable ({batch.problem})")
            continue
        if header.is_control:
            skipped.append(f"{span}: {_batch_kind(batch)} marker")
            continue
        if header.is_transactional and header.producer_id in aborted:
            skipped.append(f"{span}: aborted transaction of producer {header.producer_id}")
            continue
        if not batch.records:
            continue  # compaction can leave a batch with no records: nothing to send
        timestamp = batch.log_append_time_ms
        records = [
            Record(
                offset_delta=i,
                timestamp=record.timestamp if timestamp is None else timestamp,
                key=record.key,
                value=record.value,
                headers=record.headers,
            )
            for i, record in enumerate(batch.records)
        ]
        try:
            encoded = encode_batch(records, compression=Compression(header.compression))
        except EncodeError as e:
            unreadable += len(records)
            skipped.append(f"{span}: cannot be encoded again ({e})")
            continue
        planned.append(
            Planned(
                encoded,
                len(records),
                header.base_offset + batch.records[0].offset_delta,
                header.base_offset + batch.records[-1].offset_delta,
            )
        )
    return Plan(planned, skipped, unreadable)


def _chunks(batches: Sequence[Planned]) -> list[list[Planned]]:
    """Consecutive batches grouped into requests of at most MAX_REQUEST_BYTES each."""
    out: list[list[Planned]] = []
    size = 0
    for planned in batches:
        if not out or size + len(planned.batch) > MAX_REQUEST_BYTES:
            out.append([])
            size = 0
        out[-1].append(planned)
        size += len(planned.batch)
    return out


def _placement(chunk: Sequence[Planned], base_offset: int, where: str) -> list[str]:
    """Which original offsets got which new ones, one line per run of consecutive
    original offsets, so that skipped batches between them are not hidden in a range."""
    runs: list[list[Planned]] = []
    for planned in chunk:
        dense = planned.record_count == planned.last_offset - planned.first_offset + 1
        if runs and dense and runs[-1][-1].last_offset + 1 == planned.first_offset:
            runs[-1].append(planned)
        else:
            runs.append([planned])
    lines = []
    for run in runs:
        count = sum(p.record_count for p in run)
        lines.append(
            f"republished offsets {run[0].first_offset}..{run[-1].last_offset} ({count} "
            f"records) as {where} offsets {base_offset}..{base_offset + count - 1}"
        )
        base_offset += count
    return lines


async def _leader(client: ClusterClient, topic: str, partition: int) -> Address:
    """The address of the broker leading ``topic``-``partition``, from Metadata."""
    for _ in range(LEADER_ATTEMPTS):
        response = await client.request(
            MetadataRequest(
                topics=[mreq.MetadataRequestTopic(name=topic)],
                # Republishing into a topic that does not exist is a typo more often
                # than a wish; the operator creates it with the partitions they want.
                allow_auto_topic_creation=False,
            ),
            METADATA_VERSION,
            TIMEOUT_S,
        )
        found = response.topics[0]
        if found.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise click.ClickException(f"topic {topic!r} does not exist")
        if found.error_code not in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE):
            raise click.ClickException(f"topic {topic!r}: {ErrorCode(found.error_code).name}")
        state = next((p for p in found.partitions if p.partition_index == partition), None)
        if state is None and found.error_code == ErrorCode.NONE:
            raise click.ClickException(
                f"topic {topic!r} has no partition {partition} "
                f"(it has {len(found.partitions)}); records keep their partition number"
            )
        broker = next(
            (b for b in response.brokers if state is not None and b.node_id == state.leader_id),
            None,
        )
        if broker is not None:
            return broker.host, broker.port
        await asyncio.sleep(RETRY_DELAY_S)
    raise click.ClickException(f"{topic}-{partition} has no leader")


def _connection(client: ClusterClient, leader: Address) -> PeerConnection:
    """A connection of its own to the partition's leader: a Produce goes to the leader
    only, and is never sent again once it may have been appended."""
    settings = client.settings
    return PeerConnection(
        *leader,
        client_id=settings.client_id,
        connect_timeout_s=settings.connect_timeout_s,
        security=settings.security,
    )


@dataclass(slots=True)
class Outcome:
    acknowledged: int = 0
    failure: str | None = None


async def _produce(
    client: ClusterClient, topic: str, partition: int, plan: Plan, echo: Any
) -> Outcome:
    """Send the plan's batches in order, each request only after the one before was
    acknowledged, so that the records keep their order in the partition. The first
    failure stops the rest: what is left can be judged and sent again by hand without
    records landing out of order."""
    outcome = Outcome()
    leader = await _leader(client, topic, partition)
    peer = _connection(client, leader)
    try:
        for chunk in _chunks(plan.batches):
            request = ProduceRequest(
                acks=-1,
                timeout_ms=int(TIMEOUT_S * 1000),
                topic_data=[
                    preq.TopicProduceData(
                        name=topic,
                        partition_data=[
                            preq.PartitionProduceData(
                                index=partition, records=b"".join(p.batch for p in chunk)
                            )
                        ],
                    )
                ],
            )
            first, last = chunk[0].first_offset, chunk[-1].last_offset
            count = sum(p.record_count for p in chunk)
            for attempt in range(LEADER_ATTEMPTS):
                try:
                    response = await peer.request(request, PRODUCE_VERSION, TIMEOUT_S + 5)
                except (PeerUnavailable, TimeoutError) as e:
                    # The request may or may not have been appended: say so, do not guess.
                    outcome.failure = (
                        f"offsets {first}..{last}: no answer from {leader[0]}:{leader[1]} "
                        f"({e}); they may or may not have been written"
                    )
                    return outcome
                result = response.responses[0].partition_responses[0]
                error = ErrorCode(result.error_code)
                if error == ErrorCode.NONE:
                    outcome.acknowledged += count
                    for line in _placement(chunk, result.base_offset, f"{topic}-{partition}"):
                        echo(line)
                    break
                if error not in _RETRIABLE or attempt == LEADER_ATTEMPTS - 1:
                    detail = f": {result.error_message}" if result.error_message else ""
                    outcome.failure = f"offsets {first}..{last}: {error.name}{detail}"
                    return outcome
                await asyncio.sleep(RETRY_DELAY_S)
                if error != ErrorCode.NOT_ENOUGH_REPLICAS:
                    await peer.close()
                    leader = await _leader(client, topic, partition)
                    peer = _connection(client, leader)
    finally:
        await peer.close()
    return outcome


@quarantine.command()
@_log_dir
@_topic
@_partition
@_entry_name
@bootstrap_server_option
@command_config_option
@click.option(
    "--to-topic", default=None, help="Produce into this topic instead (same partition number)."
)
@click.option("--dry-run", is_flag=True, help="Say what would be produced, and produce nothing.")
def republish(
    log_dir: str,
    topic: str,
    partition: int,
    name: str,
    bootstrap_server: str | None,
    command_config: str | None,
    to_topic: str | None,
    dry_run: bool,
) -> None:
    """Produce an entry's records again (key, value, headers, original timestamp).

    They go to the same partition, or to the same partition number of --to-topic, with
    acks=all, in their original order and batches, and get new offsets. Control batches
    and records of transactions aborted within the entry are left out. The entry is NOT
    deleted: once satisfied, remove its directory by hand (running this twice writes the
    records twice). Records keep their timestamps, so retention.ms counts from those.
    The exit status is nonzero unless every record was acknowledged.
    """
    client = connect(bootstrap_server, command_config, client_id="odradek-quarantine")
    target = to_topic or topic
    manifest, data = _entry(RealFileSystem(), log_dir, topic, partition, name)
    decoded = decode_entry(data)
    plan = plan_republish(decoded)
    for line in plan.skipped:
        click.echo(f"skipped {line}")
    total = sum(p.record_count for p in plan.batches)
    if decoded.tail_bytes or decoded.problem:
        what = decoded.problem or f"{decoded.tail_bytes} bytes of a torn write"
        click.echo(f"skipped the end of the entry: {what}")
    if dry_run:
        click.echo(
            f"would republish {total} records in {len(plan.batches)} batches from "
            f"{topic}-{partition} entry {manifest.name} to {target}-{partition}"
        )
        return
    outcome = client.run(lambda: _produce(client, target, partition, plan, click.echo))
    click.echo(
        f"{outcome.acknowledged} of {total} records acknowledged by {target}-{partition}; "
        f"entry {manifest.name} is kept in {topic}-{partition}"
    )
    if outcome.failure is not None:
        raise click.ClickException(f"republish stopped at {outcome.failure}")
    if plan.unreadable_records or decoded.tail_bytes or decoded.problem:
        raise click.ClickException(
            f"{plan.unreadable_records} records (and any torn end) could not be decoded, "
            "so were not republished"
        )
