"""Produce hot path on record batches: validate (CRC included), patch the base offset,
and the record scan of Kafka's LogValidator checks.

Header and CRC, two shapes: one 1 MiB batch, and 1,000 batches of about 1 KiB in one
buffer (what a produce request spread over many partitions looks like). Each figure is
set against bare ``crc32c.crc32c`` over the same bytes, the floor for any validation that
checks the CRC: once as one call over the whole buffer, once as one call per batch on
memoryview slices.

Record scan (``scan_records`` after ``DecompressBuffer.records``): one 1 MiB batch of
1 KiB records and one of 100 B records, uncompressed (walked where it lies) and with lz4
and zstd (decompressed once into the reusable buffer, then walked), against the CRC
check of the same batch and against bare ``cramjam`` decompression. Then what deciding
where to run it needs: the cost of handing a check to the record-check thread and back
(against ``asyncio.to_thread``), and whether decompression overlaps with Python running
on the event loop's thread (it releases the GIL; the walk does not).

Prints figures only; nothing here asserts a time. Run: ``python bench/bench_record_batch.py``.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable

import cramjam
import crc32c

from odradek.protocol.compression import (
    DecompressBuffer,
)
from odradek.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    RECORDS_OFFSET,
    Compression,
    set_base_offset,
    validate_batch,
    validate_batches,
)
from odradek.protocol.record_codec import (
    Record,
    encode_batch,
)
from odradek.protocol.record_scan import (
    scan_records,
)
from odradek.shell.record_check import RecordCheckThread

BUDGET_SECONDS = 2.0  # per measurement; six measurements keep the run well under 20 s


def _best_seconds(run: Callable[[], object], budget: float = BUDGET_SECONDS) -> float:
    """Best time of repeated runs within ``budget``: the least disturbed by the machine."""
    best = float("inf")
    deadline = time.perf_counter() + budget
    runs = 0
    while runs < 3 or time.perf_counter() < deadline:
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
        runs += 1
    return best


def _batch(rng: random.Random, records: int, value_bytes: int, base_offset: int) -> bytes:
    return encode_batch(
        [
            Record(
                offset_delta=i,
                timestamp=1_700_000_000_000 + i,
                key=f"key-{i}".encode(),
                value=rng.randbytes(value_bytes),
            )
            for i in range(records)
        ],
        base_offset=base_offset,
    )


def _report(name: str, seconds: float, nbytes: int, batches: int) -> None:
    print(
        f"  {name:<34} {seconds * 1e3:9.3f} ms  {nbytes / seconds / 1e6:9.1f} MB/s  "
        f"{batches / seconds:12,.0f} batches/s"
    )


def bench_one_large(rng: random.Random) -> None:
    batch = bytearray(_batch(rng, records=1024, value_bytes=1000, base_offset=0))
    size = len(batch)
    print(f"one batch of {size:,} bytes (1,024 records of ~1 KiB)")

    def validate_and_patch() -> None:
        header = validate_batch(batch, 0)
        set_base_offset(batch, header.position, 42)

    def bare_crc() -> None:
        crc32c.crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:])

    ours = _best_seconds(validate_and_patch)
    floor = _best_seconds(bare_crc)
    _report("validate + set_base_offset", ours, size, 1)
    _report("bare crc32c over the CRC range", floor, size, 1)
    print(f"  ratio to bare crc32c: {ours / floor:.2f}x")


def bench_many_small(rng: random.Random) -> None:
    parts = [_batch(rng, records=8, value_bytes=100, base_offset=0) for _ in range(1000)]
    buf = bytearray(b"".join(parts))
    size = len(buf)
    print(f"1,000 batches in one buffer of {size:,} bytes (~{size // 1000} bytes each)")

    def validate_and_patch() -> None:
        next_offset = 0
        for header in validate_batches(buf):
            set_base_offset(buf, header.position, next_offset)
            next_offset += header.last_offset_delta + 1

    ranges = []
    pos = 0
    for part in parts:
        ranges.append((pos + ATTRIBUTES_OFFSET, pos + len(part)))
        pos += len(part)

    def bare_crc_per_batch() -> None:
        with memoryview(buf) as view:
            for start, end in ranges:
                crc32c.crc32c(view[start:end])

    def bare_crc_one_call() -> None:
        crc32c.crc32c(buf)

    ours = _best_seconds(validate_and_patch)
    per_batch = _best_seconds(bare_crc_per_batch)
    one_call = _best_seconds(bare_crc_one_call)
    _report("validate_batches + set_base_offset", ours, size, 1000)
    _report("bare crc32c, one call per batch", per_batch, size, 1000)
    _report("bare crc32c, one call for all", one_call, size, 1000)
    print(f"  ratio to bare crc32c per batch: {ours / per_batch:.2f}x")
    print(f"  ratio to bare crc32c one call:  {ours / one_call:.2f}x")
    print(f"  per batch: {ours / 1000 * 1e6:.2f} us (floor {per_batch / 1000 * 1e6:.2f} us)")


def _vocabulary(size: int = 2000) -> list[str]:
    rng = random.Random(11)
    return [rng.randbytes(rng.randint(2, 5)).hex() for _ in range(size)]


_WORDS = _vocabulary()


def _text(rng: random.Random, size: int) -> bytes:
    """A value that compresses somewhat as text does (about 2.5x with lz4, 3x with zstd):
    words of a fixed vocabulary, as ``bench_broker.py --compression`` makes them."""
    words = []
    length = 0
    while length < size:
        word = rng.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words).encode()[:size]


def bench_record_scan(rng: random.Random) -> None:
    buffer = DecompressBuffer(100 * 1024 * 1024)
    for value_bytes in (1000, 100):
        count = (1 << 20) // (value_bytes + 10)
        values = [_text(rng, value_bytes) for _ in range(count)]
        records = [
            Record(offset_delta=i, timestamp=1_700_000_000_000 + i, value=values[i])
            for i in range(count)
        ]
        print(f"record scan: one batch of {count:,} records of {value_bytes} B (about 1 MiB)")
        crc_seconds = 0.0
        for codec in (Compression.NONE, Compression.LZ4, Compression.ZSTD):
            batch = bytearray(encode_batch(records, compression=codec))
            header = validate_batch(batch)
            uncompressed = len(encode_batch(records)) - RECORDS_OFFSET

            def scan(batch: bytearray = batch, header: object = header) -> None:
                h = validate_batch(batch)
                data = buffer.records(batch, h)
                scan_records(data, h)
                data.release()

            def crc_only(batch: bytearray = batch) -> None:
                validate_batch(batch)

            seconds = _best_seconds(scan, 1.0)
            name = codec.name.lower()
            if codec == Compression.NONE:
                crc_seconds = _best_seconds(crc_only, 1.0)
                _report("validate_batch (header, CRC)", crc_seconds, len(batch), 1)
                _report("validate_batch + scan_records", seconds, len(batch), 1)
                print(
                    f"  the scan adds {(seconds - crc_seconds) / count * 1e9:.0f} ns a record; "
                    f"{uncompressed / (seconds - crc_seconds) / 1e6:,.0f} MB/s of records"
                )
                continue
            section = bytes(batch[RECORDS_OFFSET:])
            module = cramjam.lz4 if codec == Compression.LZ4 else cramjam.zstd

            def bare(section: bytes = section, module: object = module) -> None:
                module.decompress(section)  # type: ignore[attr-defined]

            bare_seconds = _best_seconds(bare, 1.0)
            ratio = uncompressed / len(section)
            print(
                f"  {name} ({ratio:.1f}x): decompress + scan {seconds * 1e3:.3f} ms "
                f"({uncompressed / seconds / 1e6:,.0f} MB/s of records); "
                f"bare cramjam decompress {bare_seconds * 1e3:.3f} ms"
            )


def bench_handoff() -> None:
    print("handing a check to another thread and back (no work), per check")

    async def handoffs() -> tuple[float, float]:
        thread = RecordCheckThread(1024)
        n = 2000
        await thread.run(lambda buffer: None)  # the thread starts once
        began = time.perf_counter()
        for _ in range(n):
            await thread.run(lambda buffer: None)
        ours = (time.perf_counter() - began) / n
        thread.stop()
        began = time.perf_counter()
        for _ in range(n):
            await asyncio.to_thread(int)
        return ours, (time.perf_counter() - began) / n

    ours, to_thread = asyncio.run(handoffs())
    print(
        f"  RecordCheckThread.run: {ours * 1e6:.0f} us; asyncio.to_thread: {to_thread * 1e6:.0f} us"
    )


def bench_gil_overlap(rng: random.Random) -> None:
    print("decompression beside Python work on another thread (the GIL)")
    raw = b"".join(_text(rng, 1000) for _ in range(4096))
    section = bytes(cramjam.zstd.compress(raw))
    rounds = 30

    def decompress() -> None:
        for _ in range(rounds):
            cramjam.zstd.decompress(section)

    def python_work() -> None:
        total = 0
        for i in range(3_000_000):
            total += i & 7

    for name, work in (("zstd decompression", decompress), ("a Python loop", python_work)):
        began = time.perf_counter()
        python_work()
        work()
        alone = time.perf_counter() - began
        other = threading.Thread(target=work)
        began = time.perf_counter()
        other.start()
        python_work()
        other.join()
        together = time.perf_counter() - began
        print(
            f"  a Python loop and {name}: {alone:.2f} s one after the other, "
            f"{together:.2f} s on two threads ({alone / together:.2f}x)"
        )


if __name__ == "__main__":
    rng = random.Random(7)  # fixed seed: the same bytes on every run
    print(f"crc32c hardware acceleration: {crc32c.hardware_based}")
    started = time.perf_counter()
    bench_one_large(rng)
    bench_many_small(rng)
    bench_record_scan(rng)
    bench_handoff()
    bench_gil_overlap(rng)
    print(f"total {time.perf_counter() - started:.1f} s")
