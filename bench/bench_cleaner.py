"""The log cleaner's throughput against a plain read and write of the same bytes.

Fills a partition log on the real filesystem with keyed batches (``--keys`` distinct
keys, ``--records`` records of ``--value-bytes``, ``--batch`` records a batch, in
``--segment-mib`` segments), flushes it, then in alternating runs:

* **copy**: reads every non-active segment in 1 MiB chunks and writes the bytes to a
  new file, synced: what any pass over the same bytes costs in I/O;
* **clean**: one cleaning pass as the broker runs it (the job, the pass with its offset
  map and ``.cleaned`` files, the swap), on a fresh copy of the filled log each run.

Prints MB/s of dirty log read for each, the best and the spread over ``--runs``, and
how much the pass kept. Asserts nothing.

Run: .venv/bin/python bench/bench_cleaner.py [--records N] [--keys K] [--runs R]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

from odradek.protocol.record_codec import Record, encode_batch
from odradek.shell.real_fs import RealFileSystem
from odradek.storage.cleaner.cleaning import run_pass
from odradek.storage.cleaner.plan import CleaningPolicy
from odradek.storage.log import LogConfig, PartitionLog


def fill(root: str, args: argparse.Namespace) -> str:
    fs = RealFileSystem()
    directory = os.path.join(root, "filled", "bench-0")
    config = LogConfig(segment_bytes=args.segment_mib << 20, retention_ms=-1)
    log = PartitionLog.create(fs, directory, config, 0)
    value = b"v" * args.value_bytes
    written = 0
    while written < args.records:
        records = [
            Record(
                offset_delta=i,
                timestamp=1,
                key=b"key-%d" % ((written + i) % args.keys),
                value=value,
            )
            for i in range(args.batch)
        ]
        log.append_as_leader(memoryview(bytearray(encode_batch(records))), 0, 1)
        written += args.batch
    log.flush(1)
    log.close()
    return directory


def copy_run(directory: str, out: str) -> tuple[float, int]:
    names = sorted(n for n in os.listdir(directory) if n.endswith(".log"))[:-1]
    total = 0
    start = time.perf_counter()
    with open(out, "wb") as sink:
        for name in names:
            with open(os.path.join(directory, name), "rb") as source:
                while chunk := source.read(1 << 20):
                    sink.write(chunk)
                    total += len(chunk)
        sink.flush()
        os.fsync(sink.fileno())
    return time.perf_counter() - start, total


def clean_run(filled: str, work: str, config: LogConfig) -> tuple[float, int, int, int]:
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(filled, work)
    fs = RealFileSystem()
    log = PartitionLog.open(fs, work, config, 2, recovery_point=2**63 - 1)
    start = time.perf_counter()
    job = log.cleaning_job(
        policy=CleaningPolicy(min_cleanable_dirty_ratio=0.0),
        checkpoint=None,
        high_watermark=log.log_end_offset,
        now_ms=2,
        last_batch_of_producers=(),
        map_capacity=10_000_000,
    )
    assert job is not None
    result = run_pass(fs, job)
    log.commit_cleaning(result, 2)
    elapsed = time.perf_counter() - start
    log.close()
    return elapsed, result.stats.bytes_read, result.stats.bytes_written, result.stats.records_kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--segment-mib", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="bench-cleaner-", dir=args.dir)
    try:
        filled = fill(root, args)
        config = LogConfig(segment_bytes=args.segment_mib << 20, retention_ms=-1)
        copies, cleans = [], []
        kept = written = 0
        for _ in range(args.runs):
            seconds, total = copy_run(filled, os.path.join(root, "copy.bin"))
            copies.append(total / seconds / 1e6)
            seconds, read, written, kept = clean_run(
                filled, os.path.join(root, "work", "bench-0"), config
            )
            cleans.append(read / seconds / 1e6)
        print(
            f"{args.records:,} records of {args.value_bytes} B over {args.keys:,} keys, "
            f"{args.batch} a batch, {args.segment_mib} MiB segments; {args.runs} alternating runs"
        )
        for name, figures in (("copy (read+write+fsync)", copies), ("clean (one pass)", cleans)):
            spread = f" (spread {min(figures):.1f}-{max(figures):.1f})" if len(figures) > 1 else ""
            print(f"  {name:24} best {max(figures):7.1f} MB/s{spread}")
        print(f"  the pass read {read / 1e6:.1f} MB, wrote {written / 1e6:.2f} MB,", end="")
        print(f" kept {kept:,} records")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
