"""``odradek quarantine list|show|republish`` over entries written the way storage writes
them, and republish against a real node read back with confluent-kafka."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli.main import main
from odradek.protocol.control_batch import (
    encode_control_batch,
)
from odradek.protocol.record_batch import (
    Compression,
    ControlType,
)
from odradek.protocol.record_codec import (
    Record,
    encode_batch,
)
from odradek.shell.real_fs import RealFileSystem
from odradek.storage import quarantine as store
from odradek.storage.log import LogConfig, PartitionLog
from tests.integration.nodes import NodeProcess

WHEN_MS = 1_700_000_000_000
LONG_VALUE = b"x" * 200
ENTRY = "001700000000000-00000000000000000010-0000"

# What a consumer should see after republish: (key, value, headers, timestamp).
EXPECTED: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]] = [
    (b"k0", b"v0", [("trace", b"1")], WHEN_MS - 3000),
    (None, b"\x00\xff", [], WHEN_MS - 2000),
    (b"k2", None, [], WHEN_MS - 1000),
    (b"k3", LONG_VALUE, [], WHEN_MS - 500),
    (b"k4", b"v4", [("a", b"x"), ("b", None)], WHEN_MS - 400),
]


def _batches() -> list[bytes]:
    """Offsets 10..17: plain data, gzip data, a committed and an aborted transaction."""
    plain = encode_batch(
        [
            Record(i, ts, key, value, headers)
            for i, (key, value, headers, ts) in enumerate(EXPECTED[:3])
        ],
        base_offset=10,
        partition_leader_epoch=3,
    )
    gzipped = encode_batch(
        [
            Record(i, ts, key, value, headers)
            for i, (key, value, headers, ts) in enumerate(EXPECTED[3:])
        ],
        base_offset=13,
        partition_leader_epoch=3,
        compression=Compression.GZIP,
    )
    commit = encode_control_batch(
        ControlType.COMMIT, b"\x00\x00\x00\x00\x00\x00", base_offset=15, producer_id=7
    )
    aborted_data = encode_batch(
        [Record(0, WHEN_MS, b"never", b"visible")],
        base_offset=16,
        producer_id=9,
        producer_epoch=0,
        is_transactional=True,
    )
    abort = encode_control_batch(
        ControlType.ABORT, b"\x00\x00\x00\x00\x00\x00", base_offset=17, producer_id=9
    )
    return [plain, gzipped, commit, aborted_data, abort]


def make_entry(
    log_dir: Path, topic: str, partition: int, chunks: list[bytes], name: str = ENTRY
) -> None:
    store.add(
        RealFileSystem(),
        str(log_dir / f"{topic}-{partition}"),
        chunks,
        store.QuarantineManifest(
            name=name,
            when_ms=WHEN_MS,
            reason="follower truncation: diverged from leader epoch 4",
            leader_epoch=3,
            start_offset=10,
            end_offset=18,
            batch_count=len(chunks),
            record_count=8,
            size_bytes=sum(len(c) for c in chunks),
        ),
        max_bytes=1 << 30,
    )


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    make_entry(tmp_path, "orders", 1, _batches())
    # A partition directory with no quarantine, and a file that is not a partition.
    (tmp_path / "orders-0").mkdir()
    (tmp_path / "meta.properties").write_text("node.id=1\n")
    return tmp_path


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["quarantine", *args])


def test_list_shows_every_entry_with_its_manifest(log_dir: Path) -> None:
    result = run("list", "--log-dir", str(log_dir))
    assert result.exit_code == 0, result.output
    header, row = result.output.splitlines()
    assert header.split()[:3] == ["PARTITION", "ENTRY", "WHEN"]
    assert row.split()[:3] == ["orders-1", ENTRY, "2023-11-14T22:13:20.000Z"]
    assert "10..17" in row and "follower truncation" in row

    as_json = json.loads(run("list", "--log-dir", str(log_dir), "--json").output)
    assert as_json == [
        {
            "topic": "orders",
            "partition": 1,
            "name": ENTRY,
            "when_ms": WHEN_MS,
            "when": "2023-11-14T22:13:20.000Z",
            "reason": "follower truncation: diverged from leader epoch 4",
            "leader_epoch": 3,
            "start_offset": 10,
            "end_offset": 18,
            "batch_count": 5,
            "record_count": 8,
            "size_bytes": sum(len(c) for c in _batches()),
        }
    ]
    other = run("list", "--log-dir", str(log_dir), "--topic", "payments")
    assert other.exit_code == 0 and "no quarantined records" in other.output
    assert json.loads(run("list", "--log-dir", str(log_dir), "--topic", "x", "--json").output) == []


def test_list_finds_what_a_real_truncation_moved(tmp_path: Path) -> None:
    fs = RealFileSystem()
    directory = str(tmp_path / "events-0")
    partition_log = PartitionLog.create(fs, directory, LogConfig(), now_ms=WHEN_MS)
    for i in range(3):
        batch = bytearray(encode_batch([Record(0, WHEN_MS, f"k{i}".encode(), b"v")]))
        partition_log.append_as_leader(memoryview(batch), leader_epoch=1, now_ms=WHEN_MS)
    partition_log.truncate_to(1, WHEN_MS + 1, "follower truncation", leader_epoch=2)
    partition_log.close()

    rows = json.loads(run("list", "--log-dir", str(tmp_path), "--json").output)
    assert [(r["topic"], r["partition"], r["start_offset"], r["end_offset"]) for r in rows] == [
        ("events", 0, 1, 3)
    ]
    shown = json.loads(
        run(
            "show",
            "--log-dir",
            str(tmp_path),
            "--topic",
            "events",
            "--partition",
            "0",
            "--entry",
            rows[0]["name"],
            "--json",
        ).output
    )
    records = [r for b in shown["batches"] for r in b["records"]]
    assert [(r["offset"], r["key"]) for r in records] == [(1, "k1"), (2, "k2")]


def _show(log_dir: Path, *extra: str) -> Result:
    return run(
        "show",
        "--log-dir",
        str(log_dir),
        "--topic",
        "orders",
        "--partition",
        "1",
        "--entry",
        ENTRY,
        *extra,
    )


def test_show_prints_each_record_as_text_or_hex_cut_to_a_line(log_dir: Path) -> None:
    result = _show(log_dir)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"orders-1 {ENTRY}: follower truncation")
    rows = {line.split()[0]: line for line in lines[2:] if not line.startswith("#")}
    assert rows["10"].split() == ["10", "2023-11-14T22:13:17.000Z", "k0", "1", "v0"]
    assert rows["11"].split()[2:] == ["null", "0", "0x00ff"]
    assert rows["12"].split()[2:] == ["k2", "0", "null"]
    assert rows["13"].endswith("x" * 57 + "...")
    assert rows["16"].split()[2] == "never"
    comments = [line for line in lines if line.startswith("#")]
    assert comments == [
        "# batch 13..14: data, gzip",
        "# batch 15..15: control COMMIT, none",
        "# batch 16..16: transactional, none",
        "# batch 17..17: control ABORT, none",
    ]


def test_show_json_keeps_values_whole_and_limit_stops_early(log_dir: Path) -> None:
    shown = json.loads(_show(log_dir, "--json").output)
    assert shown["name"] == ENTRY and shown["tail_bytes"] == 0 and shown["problem"] is None
    records = [r for b in shown["batches"] for r in b["records"]]
    assert records[1] | {"timestamp_ms": 0} == {
        "offset": 11,
        "timestamp_ms": 0,
        "timestamp": "2023-11-14T22:13:18.000Z",
        "key": None,
        "key_format": "null",
        "value": "00ff",
        "value_format": "hex",
        "headers": 0,
    }
    assert records[3]["value"] == LONG_VALUE.decode()
    limited = json.loads(_show(log_dir, "--json", "--limit", "2").output)
    assert [r["offset"] for b in limited["batches"] for r in b["records"]] == [10, 11]


def test_show_unknown_entry_names_the_directory(log_dir: Path) -> None:
    result = run(
        "show",
        "--log-dir",
        str(log_dir),
        "--topic",
        "orders",
        "--partition",
        "0",
        "--entry",
        ENTRY,
    )
    assert result.exit_code == 1
    assert "no quarantine entry" in result.output and "orders-0" in result.output


def _corrupt_entry(log_dir: Path) -> None:
    """A recovery entry: the first batch failed its CRC, a torn write follows the last."""
    plain, gzipped, *_ = _batches()
    broken = bytearray(plain)
    broken[-1] ^= 0xFF
    make_entry(log_dir, "orders", 1, [bytes(broken), gzipped, gzipped[:20]], name="torn")


def test_show_and_dry_run_name_unreadable_batches_and_torn_tails(log_dir: Path) -> None:
    _corrupt_entry(log_dir)
    shown = run(
        "show",
        "--log-dir",
        str(log_dir),
        "--topic",
        "orders",
        "--partition",
        "1",
        "--entry",
        "torn",
    )
    assert shown.exit_code == 0, shown.output
    assert "# batch 10..12: unreadable, none: BAD_CRC: batch at 0: stored crc" in shown.output
    assert "# 20 bytes after the last whole batch (a torn write)" in shown.output
    dry = run(
        "republish",
        "--log-dir",
        str(log_dir),
        "--topic",
        "orders",
        "--partition",
        "1",
        "--entry",
        "torn",
        "--bootstrap-server",
        "127.0.0.1:1",
        "--dry-run",
    )
    assert dry.exit_code == 0, dry.output
    assert "skipped offsets 10..12: unreadable" in dry.output
    assert "skipped the end of the entry: 20 bytes of a torn write" in dry.output
    assert "would republish 2 records in 1 batches" in dry.output


def test_dry_run_skips_markers_and_aborted_transactions_and_sends_nothing(log_dir: Path) -> None:
    # Port 1 refuses connections: a dry run that tried to produce would fail.
    result = run(
        "republish",
        "--log-dir",
        str(log_dir),
        "--topic",
        "orders",
        "--partition",
        "1",
        "--entry",
        ENTRY,
        "--bootstrap-server",
        "127.0.0.1:1",
        "--dry-run",
    )
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "skipped offsets 15..15: control COMMIT marker",
        "skipped offsets 16..16: aborted transaction of producer 9",
        "skipped offsets 17..17: control ABORT marker",
        f"would republish 5 records in 2 batches from orders-1 entry {ENTRY} to orders-1",
    ]


# Against a real node -------------------------------------------------------------------


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    process = NodeProcess(tmp_path_factory.mktemp("node"))
    process.start()
    admin = AdminClient({"bootstrap.servers": process.bootstrap})
    topics = [
        NewTopic("orders", 2),
        NewTopic("orders-copy", 2),
        NewTopic("narrow", 1),
        NewTopic("damaged", 2),
    ]
    for future in admin.create_topics(topics).values():
        future.result(15)
    yield process
    process.kill()


def consume(bootstrap: str, topic: str, partition: int, expected: int) -> list[tuple[object, ...]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    seen: list[tuple[object, ...]] = []
    deadline = time.monotonic() + 30
    while len(seen) < expected and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        assert message.error() is None, message.error()
        seen.append(
            (
                message.key(),
                message.value(),
                list(message.headers() or []),
                message.timestamp()[1],
                message.partition(),
            )
        )
    consumer.close()
    return seen


def _republish(log_dir: Path, bootstrap: str, *extra: str, entry: str = ENTRY) -> Result:
    return run(
        "republish",
        "--log-dir",
        str(log_dir),
        "--topic",
        "orders",
        "--partition",
        "1",
        "--entry",
        entry,
        "--bootstrap-server",
        bootstrap,
        *extra,
    )


@pytest.mark.clients
def test_republish_produces_every_record_again_and_keeps_the_entry(
    node: NodeProcess, log_dir: Path
) -> None:
    result = _republish(log_dir, node.bootstrap)
    assert result.exit_code == 0, result.output
    # The two batches are consecutive, so they are reported as one run.
    assert "republished offsets 10..14 (5 records) as orders-1 offsets 0..4" in result.output
    assert f"5 of 5 records acknowledged by orders-1; entry {ENTRY} is kept" in result.output
    got = consume(node.bootstrap, "orders", 1, 5)
    assert got == [(k, v, h, ts, 1) for k, v, h, ts in EXPECTED]
    assert store.entries(RealFileSystem(), str(log_dir / "orders-1"))[0].name == ENTRY


@pytest.mark.clients
def test_republish_to_another_topic_keeps_the_partition_number(
    node: NodeProcess, log_dir: Path
) -> None:
    result = _republish(log_dir, node.bootstrap, "--to-topic", "orders-copy")
    assert result.exit_code == 0, result.output
    assert "5 of 5 records acknowledged by orders-copy-1" in result.output
    got = consume(node.bootstrap, "orders-copy", 1, 5)
    assert [(key, value) for key, value, *_ in got] == [(k, v) for k, v, *_ in EXPECTED]


@pytest.mark.clients
def test_republish_refuses_a_missing_topic_or_partition(node: NodeProcess, log_dir: Path) -> None:
    narrow = _republish(log_dir, node.bootstrap, "--to-topic", "narrow")
    assert narrow.exit_code == 1
    assert "topic 'narrow' has no partition 1 (it has 1)" in narrow.output
    missing = _republish(log_dir, node.bootstrap, "--to-topic", "nowhere")
    assert missing.exit_code == 1 and "topic 'nowhere' does not exist" in missing.output


@pytest.mark.clients
def test_republish_of_a_damaged_entry_sends_what_it_can_and_fails(
    node: NodeProcess, log_dir: Path
) -> None:
    _corrupt_entry(log_dir)
    result = _republish(log_dir, node.bootstrap, "--to-topic", "damaged", entry="torn")
    assert result.exit_code == 1, result.output
    assert "2 of 2 records acknowledged by damaged-1" in result.output
    assert "3 records (and any torn end) could not be decoded" in result.output
    got = consume(node.bootstrap, "damaged", 1, 2)
    assert [(key, value) for key, value, *_ in got] == [(k, v) for k, v, *_ in EXPECTED[3:]]


def test_placement_splits_runs_where_batches_were_skipped() -> None:
    from odradek.cli.quarantine import Planned, _placement

    chunk = [Planned(b"", 3, 10, 12), Planned(b"", 2, 13, 14), Planned(b"", 1, 18, 18)]
    assert _placement(chunk, 100, "t-0") == [
        "republished offsets 10..14 (5 records) as t-0 offsets 100..104",
        "republished offsets 18..18 (1 records) as t-0 offsets 105..105",
    ]


def test_a_recovery_entry_without_an_end_offset_shows_an_open_range(tmp_path: Path) -> None:
    plain, *_ = _batches()
    # Recovery writes manifests like this: it cut whole segments without reading them.
    store.add(
        RealFileSystem(),
        str(tmp_path / "orders-2"),
        [plain],
        store.QuarantineManifest("r", WHEN_MS, "recovery: offset gap", -1, 10, 10, 0, 0, 9),
        max_bytes=1 << 30,
    )
    listed = run("list", "--log-dir", str(tmp_path))
    assert listed.output.splitlines()[1].split()[4] == "10.."
    shown = run(
        "show", "--log-dir", str(tmp_path), "--topic", "orders", "--partition", "2", "--entry", "r"
    )
    assert "offsets 10..;" in shown.output and "k0" in shown.output
