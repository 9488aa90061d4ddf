"""Storage throughput on the real filesystem: PartitionLog appends and sendfile reads.

Appends: ``PartitionLog.append_as_leader`` (validate with CRC32C, patch offsets and
epoch in place, one ``write``, index upkeep) with 16 KiB and 1 MiB batches, in three
durability modes: ``flush`` after every append, group commit (one ``flush`` every N
appends) and page cache only (no fsync). Each figure is set against plain ``os.write``
of the same buffer to a plain file, the same number of times, in the same mode
(``os.fsync`` after every write; one ``os.fsync`` every N writes; no fsync). The two
take turns in chunks of about 8 MiB, so both see the same machine state. One batch
buffer per size is reused: the log patches its offsets in place on every append.

Every ``os.fsync`` is counted. ``flush`` syncs the ``.log``, ``.index`` and
``.timeindex`` of a changed segment, so the log makes 3 fsync calls per flush. The
reused batch keeps its timestamps, so here the ``.timeindex`` gets one entry and is
clean afterwards; with rising timestamps (a real producer) it changes on every flush too.

Reads: ``PartitionLog.read`` of 1 MiB from offset 0 to the end of the page-cache logs
written above (a few hundred MB each), each range sent with ``os.sendfile`` into a
loopback TCP socket (127.0.0.1) that a thread drains, against bare ``os.sendfile`` of
the same ranges over the same socket. The cost of ``read()`` alone is timed apart.
Those logs were just written, so reads come from the page cache, not from the disk.

Everything lives in a temporary directory removed at the end. Disk use peaks at about
800 MB (two kept logs, one log and one plain file being written). Each measurement is
bounded by a count and a time budget; the whole run takes 10 to 30 s. Prints figures;
asserts nothing about time.

Run: .venv/bin/python bench/bench_storage.py
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import crc32c

from odradek.protocol.record_codec import (
    Record,
    encode_batch,
)
from odradek.shell.real_fs import RealFileSystem
from odradek.storage.log import LogConfig, PartitionLog

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike

KiB = 1024
MiB = 1024 * KiB
EPOCH = 7
VALUE_BYTES = 1000
BATCH_SIZES = ((16 * KiB, 32), (1 * MiB, 8))  # (batch bytes, N for group commit)
MAX_BYTES = 256 * MiB  # per append measurement; the page-cache logs are kept for reads
APPEND_SECONDS = 2.5  # per append measurement and side (log or os.write)
CHUNK_BYTES = 8 * MiB  # the two sides take turns writing about this much
FETCH_BYTES = 1 * MiB
READ_ROUNDS = 9
READ_SECONDS = 6.0  # per log: all rounds of read + sendfile and bare sendfile
LOOKUP_SECONDS = 0.5  # per log: read() alone
LOOKUP_PASSES = 1000
_OPEN_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT  # as RealFileSystem opens a segment

# Every os.fsync in the process goes through this counter (RealFileSystem calls
# os.fsync, so the log's fsyncs are counted without touching it).
_real_fsync = os.fsync
_fsyncs = 0


def _counting_fsync(fd: FileDescriptorLike) -> None:
    global _fsyncs
    _fsyncs += 1
    _real_fsync(fd)


def now_ms() -> int:
    return int(time.time() * 1000)


def build_batch(target: int) -> bytearray:
    """The largest batch of ~1 KiB records that fits in ``target`` bytes, as writable bytes."""
    value = os.urandom(VALUE_BYTES)

    def encode(count: int) -> bytes:
        records = [
            Record(offset_delta=i, timestamp=1_700_000_000_000 + i, value=value)
            for i in range(count)
        ]
        return encode_batch(records)

    count = max(1, target // (VALUE_BYTES + 16))
    data = encode(count)
    while len(data) <= target:
        count += 1
        data = encode(count)
    while len(data) > target:
        count -= 1
        data = encode(count)
    return bytearray(data)


class Side:
    """One writer under test: its writes, flushes, fsyncs and the time spent in them."""

    def __init__(self, write: Callable[[], None], sync: Callable[[], None], size: int) -> None:
        self.write = write
        self.sync = sync
        self.size = size
        self.writes = 0
        self.flushes = 0
        self.fsyncs = 0
        self.seconds = 0.0

    def chunk(self, count: int, every: int) -> None:
        """``count`` writes, a sync after every ``every`` of them (0: never)."""
        fsyncs_before = _fsyncs
        start = time.perf_counter()
        for _ in range(count):
            self.write()
            self.writes += 1
            if every and self.writes % every == 0:
                self.sync()
                self.flushes += 1
        self.seconds += time.perf_counter() - start
        self.fsyncs += _fsyncs - fsyncs_before

    @property
    def mb_per_s(self) -> float:
        return self.writes * self.size / self.seconds / 1e6

    @property
    def fsyncs_per_s(self) -> float:
        return self.fsyncs / self.seconds


def interleave(sides: tuple[Side, Side], every: int) -> None:
    """Chunks of writes, taking turns (ABBA), until MAX_BYTES each or the time is up.

    Taking turns puts both sides under the same machine state: the page cache growing,
    writeback, and on a VM the first touch of guest memory, which costs more than the
    write itself. A chunk is a whole number of groups, so each ends durable.
    """
    size = sides[0].size
    chunk = max(1, CHUNK_BYTES // size)
    if every:
        chunk = max(every, chunk // every * every)
    rounds = max(1, (MAX_BYTES // size - 1) // chunk)
    deadline = time.perf_counter() + 2 * APPEND_SECONDS
    for i in range(rounds):
        for side in sides if i % 2 == 0 else sides[::-1]:
            side.chunk(chunk, every)
        if time.perf_counter() > deadline:
            break


def log_side(directory: str, batch: bytearray) -> tuple[Side, PartitionLog]:
    plog = PartitionLog.create(RealFileSystem(), directory, LogConfig(), now_ms())
    view = memoryview(batch)
    # The first append also writes the leader-epoch checkpoint: keep it out of the time.
    plog.append_as_leader(view, EPOCH, now_ms())
    plog.flush(now_ms())

    def write() -> None:
        plog.append_as_leader(view, EPOCH, now_ms())

    def sync() -> None:
        plog.flush(now_ms())

    return Side(write, sync, len(batch)), plog


def file_side(fd: int, batch: bytearray) -> Side:
    size = len(batch)
    os.write(fd, batch)
    _counting_fsync(fd)

    def write() -> None:
        if os.write(fd, batch) != size:
            raise OSError("short write")

    def sync() -> None:
        _counting_fsync(fd)

    return Side(write, sync, size)


# The page-cache log is kept for the reads, so it comes last: disk use peaks lower.
MODES = ("fsync/batch", "group commit", "page cache")


def bench_appends(root: str) -> list[tuple[int, PartitionLog]]:
    """Print the append table; return the page-cache logs (batch size, log) for reads."""
    print(
        "Append: PartitionLog.append_as_leader vs os.write of the same buffer, interleaved\n"
        f"{'batch':>9} {'mode':<12} {'N':>3} {'writes':>6} {'log MB/s':>9} "
        f"{'write MB/s':>10} {'ratio':>5} {'log fsync/s':>11} {'per flush':>9} "
        f"{'write fsync/s':>13}"
    )
    kept: list[tuple[int, PartitionLog]] = []
    for target, group in BATCH_SIZES:
        batch = build_batch(target)
        for mode in MODES:
            every = {"page cache": 0, "fsync/batch": 1, "group commit": group}[mode]
            directory = os.path.join(root, f"log-{target}-{every}")
            plain_path = os.path.join(root, "plain.bin")
            ours, plog = log_side(directory, batch)
            fd = os.open(plain_path, _OPEN_FLAGS, 0o644)
            try:
                plain = file_side(fd, batch)
                interleave((ours, plain), every)
            finally:
                os.close(fd)
                os.remove(plain_path)
            if every:
                plog.close()
                shutil.rmtree(directory)
            else:
                plog.flush(now_ms())  # untimed: no writeback left to disturb what follows
                kept.append((len(batch), plog))
            n = str(every) if every else "-"
            per_flush = f"{ours.fsyncs / ours.flushes:9.1f}" if ours.flushes else f"{'-':>9}"
            print(
                f"{len(batch):>9,} {mode:<12} {n:>3} {ours.writes:>6} {ours.mb_per_s:>9.0f} "
                f"{plain.mb_per_s:>10.0f} {ours.mb_per_s / plain.mb_per_s:>5.2f} "
                f"{ours.fsyncs_per_s:>11.0f} {per_flush} {plain.fsyncs_per_s:>13.0f}"
            )
    return kept


class Drain(threading.Thread):
    """Reads a socket to its end, counting bytes; ``reached`` is set at the target."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(daemon=True)
        self.sock = sock
        self.received = 0
        self.target = 0
        self.reached = threading.Event()

    def expect(self, nbytes: int) -> None:
        """Call only when nothing is in flight."""
        self.reached.clear()
        self.target = self.received + nbytes

    def run(self) -> None:
        buf = bytearray(4 * MiB)
        while True:
            n = self.sock.recv_into(buf)
            if n == 0:
                return
            self.received += n
            if self.received >= self.target:
                self.reached.set()

    def wait(self) -> None:
        if not self.reached.wait(timeout=30):
            raise TimeoutError(f"reader got {self.received} of {self.target} bytes")


def send_range(out_fd: int, in_fd: int, position: int, length: int) -> None:
    while length:
        sent = os.sendfile(out_fd, in_fd, position, length)
        if sent <= 0:
            raise OSError(f"sendfile sent {sent} bytes")
        position += sent
        length -= sent


def fetch_all(plog: PartitionLog, batch_bytes: int, per_batch: int, out_fd: int) -> int:
    """read() 1 MiB at a time from offset 0 to the log end; send each range if ``out_fd``.

    Returns the number of read() calls. Every batch of these logs has the same size, so
    the next offset follows from the end position of the range.
    """
    offset = 0
    end = plog.log_end_offset
    calls = 0
    while offset < end:
        found = plog.read(offset, FETCH_BYTES)
        if found is None:
            raise AssertionError(f"nothing at offset {offset} below {end}")
        calls += 1
        if out_fd >= 0:
            in_fd = found.handle.fileno()
            assert in_fd is not None
            send_range(out_fd, in_fd, found.position, found.length)
        stop = found.position + found.length
        assert stop % batch_bytes == 0
        offset = stop // batch_bytes * per_batch
    return calls


def bench_reads(kept: list[tuple[int, PartitionLog]]) -> None:
    print(
        f"\nRead: PartitionLog.read({FETCH_BYTES // KiB} KiB) + os.sendfile to 127.0.0.1 TCP "
        f"vs bare os.sendfile of the same ranges (medians of {READ_ROUNDS} rounds; page cache)\n"
        f"{'batch':>9} {'log MB':>7} {'fetches':>7} {'log MB/s':>9} {'sendfile MB/s':>13} "
        f"{'ratio':>5} {'per round':>9} {'read() µs':>9}"
    )
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname()[:2])
    server, _ = listener.accept()
    with listener, client, server:
        drain = Drain(client)
        drain.start()
        for batch_bytes, plog in kept:
            bench_read_one(plog, batch_bytes, server.fileno(), drain)
        server.shutdown(socket.SHUT_WR)
        drain.join(timeout=30)


def bench_read_one(plog: PartitionLog, batch_bytes: int, out_fd: int, drain: Drain) -> None:
    segment = plog.segments[0]
    assert len(plog.segments) == 1 and segment.size % batch_bytes == 0
    per_batch = plog.log_end_offset * batch_bytes // segment.size
    total = segment.size

    # read() alone, also collecting the ranges that bare sendfile will send.
    ranges: list[tuple[int, int, int]] = []
    offset = 0
    while offset < plog.log_end_offset:
        found = plog.read(offset, FETCH_BYTES)
        assert found is not None
        in_fd = found.handle.fileno()
        assert in_fd is not None
        ranges.append((in_fd, found.position, found.length))
        offset = (found.position + found.length) // batch_bytes * per_batch
    calls = 0
    passes = 0
    start = time.perf_counter()
    deadline = start + LOOKUP_SECONDS
    while passes < LOOKUP_PASSES and time.perf_counter() < deadline:
        calls += fetch_all(plog, batch_bytes, per_batch, -1)
        passes += 1
    lookup_us = (time.perf_counter() - start) / calls * 1e6

    def through_log() -> None:
        fetch_all(plog, batch_bytes, per_batch, out_fd)

    def bare() -> None:
        for in_fd, position, length in ranges:
            send_range(out_fd, in_fd, position, length)

    # Loopback throughput swings by 2x from pass to pass on a small VM: take turns (ABBA)
    # and report medians, with the spread of the per-round ratios.
    times: dict[str, list[float]] = {"log": [], "bare": []}
    deadline = time.perf_counter() + READ_SECONDS
    rounds = 0
    while rounds < READ_ROUNDS and (rounds < 3 or time.perf_counter() < deadline):
        order = (("log", through_log), ("bare", bare))
        for name, run in order if rounds % 2 == 0 else order[::-1]:
            drain.expect(total)
            start = time.perf_counter()
            run()
            drain.wait()
            times[name].append(time.perf_counter() - start)
        rounds += 1
    ours = total / statistics.median(times["log"]) / 1e6
    plain = total / statistics.median(times["bare"]) / 1e6
    ratios = [b / a for a, b in zip(times["log"], times["bare"], strict=True)]
    spread = f"{min(ratios):.2f}-{max(ratios):.2f}"
    print(
        f"{batch_bytes:>9,} {total / 1e6:>7.0f} {len(ranges):>7} {ours:>9.0f} {plain:>13.0f} "
        f"{ours / plain:>5.2f} {spread:>9} {lookup_us:>9.1f}"
    )


def filesystem_type(path: str) -> str:
    """The type of the filesystem holding ``path``, from /proc/mounts (Linux)."""
    path = os.path.realpath(path)
    best, kind = "", "unknown"
    try:
        with open("/proc/mounts") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) < 3:
                    continue
                point = fields[1].replace("\\040", " ")
                inside = path == point or path.startswith(point.rstrip("/") + "/")
                if inside and len(point) > len(best):
                    best, kind = point, fields[2]
    except OSError:
        pass
    return kind


def main() -> None:
    root = tempfile.mkdtemp(prefix="odradek-bench-storage-")
    os.fsync = _counting_fsync
    try:
        crc = "hardware" if crc32c.hardware_based else "software"
        print(f"filesystem: {filesystem_type(root)}; crc32c: {crc}; {os.cpu_count()} CPUs")
        kept = bench_appends(root)
        bench_reads(kept)
        for _, plog in kept:
            plog.close()
    finally:
        os.fsync = _real_fsync
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
