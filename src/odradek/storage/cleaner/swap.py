"""Swapping cleaned segments in, crash-safe, and finishing a swap at start-up.

Kafka's protocol on this engine's terms. A cleaned segment is written as
``<base>.log.cleaned`` with its ``.index.cleaned`` and ``.timeindex.cleaned`` (and
``.txnindex.cleaned`` where its sources had aborted transactions), all synced
(:mod:`.cleaning`); its base is the base of the first segment it replaces. Then:

1. each ``.cleaned`` file is renamed to ``.swap``, the ``.log`` last, and the directory
   synced. ``<base>.log.swap`` existing and durable is the commit point: from here a
   start finishes the swap, before it a start removes the ``.cleaned`` files and keeps
   the old segments;
2. the replaced segments' files are removed, the ``.swap`` files renamed to their
   segment names (the ``.log`` last, over the first old segment's), and the directory
   synced.

At start-up (:func:`finish_interrupted_swaps`, before the segments are listed) every
``.cleaned`` file is removed, and for every ``<base>.log.swap`` every segment file with
a base in ``[base, the swap's end)`` is removed and the swap files renamed. The end is
read from the swap's last batch: the log is dense batch by batch (fillers cover what
cleaning emptied), so it is the next segment's base. A crash at any step therefore
leaves the old segments or the new one, never both and never a gap. An index file
lost with the old segment's is rebuilt from the batches when first used.
"""

from __future__ import annotations

import logging

from odradek.core.errors import CorruptLogError
from odradek.protocol.record_batch import LOG_OVERHEAD, RECORD_BATCH_OVERHEAD, header_at
from odradek.storage.cleaner.cleaning import (
    CLEANED_SUFFIX,
    SEGMENT_FILES,
    SWAP_SUFFIX,
    CleanedSegment,
    cleaned_path,
)
from odradek.storage.fs import FileSystem, join
from odradek.storage.segment import segment_name
from odradek.storage.txn_index import TXN_INDEX_SUFFIX

log = logging.getLogger("odradek.storage")


_RENAMED = (".index", ".timeindex", TXN_INDEX_SUFFIX, ".log")
"""The files of a cleaned segment in the order they are renamed: the ``.log`` last, as
its rename is the commit point. The transaction index exists only where a source
segment had one."""
_OLD_FILES = (*SEGMENT_FILES, TXN_INDEX_SUFFIX)
"""The files of a replaced segment."""


def _swap_path(directory: str, base: int, suffix: str) -> str:
    return join(directory, segment_name(base, suffix) + SWAP_SUFFIX)


def mark_swap(fs: FileSystem, directory: str, cleaned: CleanedSegment) -> None:
    """Step 1: the commit point (the ``.log.swap`` rename, then a directory sync)."""
    for suffix in _RENAMED:
        source = cleaned_path(directory, cleaned.base_offset, suffix)
        if suffix == TXN_INDEX_SUFFIX and not fs.exists(source):
            continue  # made only where a source segment had aborted transactions
        fs.rename(source, _swap_path(directory, cleaned.base_offset, suffix))
    fs.fsync_dir(directory)


def replace_sources(fs: FileSystem, directory: str, cleaned: CleanedSegment) -> None:
    """Step 2: the old files gone and the swap files under the segment's names. The
    caller has let go of the old segments first."""
    base = cleaned.base_offset
    for source in cleaned.sources:
        for suffix in _OLD_FILES:
            path = join(directory, segment_name(source.base_offset, suffix))
            if source.base_offset == base and suffix == ".log":
                continue  # replaced by the rename below, never missing in between
            if fs.exists(path):
                fs.remove(path)
    for suffix in _RENAMED:
        swapped = _swap_path(directory, base, suffix)
        if suffix == TXN_INDEX_SUFFIX and not fs.exists(swapped):
            continue
        fs.rename(swapped, join(directory, segment_name(base, suffix)))
    fs.fsync_dir(directory)


def _swap_end(fs: FileSystem, path: str) -> int:
    """The next offset after the swap file's last batch (headers only: the file was
    synced whole before it became a swap; recovery or the scrub checks its CRCs)."""
    handle = fs.open(path)
    try:
        size = handle.size()
        position = 0
        end = -1
        while position + RECORD_BATCH_OVERHEAD <= size:
            header = header_at(handle.read(position, RECORD_BATCH_OVERHEAD), 0)
            if header.batch_length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
                raise CorruptLogError(path, position, "not a batch header")
            end = header.next_offset
            position += header.batch_length + LOG_OVERHEAD
        if position != size or end < 0:
            raise CorruptLogError(path, position, "a swap file that is not whole batches")
        return end
    finally:
        handle.close()


def finish_interrupted_swaps(fs: FileSystem, directory: str) -> list[str]:
    """Remove every ``.cleaned`` file and finish every swap; return what was done, one
    line each, for the log."""
    done: list[str] = []
    names = fs.listdir(directory)
    for name in names:
        if name.endswith(CLEANED_SUFFIX):
            fs.remove(join(directory, name))
            done.append(f"removed {name}, a cleaning pass the stop interrupted")
    for name in sorted(names):
        if not name.endswith(".log" + SWAP_SUFFIX):
            continue
        stem = name.split(".")[0]
        if not stem.isdigit():
            continue
        base = int(stem)
        end = _swap_end(fs, join(directory, name))
        replaced = sorted(
            int(n[:-4])
            for n in fs.listdir(directory)
            if n.endswith(".log") and n[:-4].isdigit() and base <= int(n[:-4]) < end
        )
        for old in replaced:
            for suffix in _OLD_FILES:
                path = join(directory, segment_name(old, suffix))
                if (old != base or suffix != ".log") and fs.exists(path):
                    fs.remove(path)
        for suffix in _RENAMED:
            swap = _swap_path(directory, base, suffix)
            if fs.exists(swap):
                fs.rename(swap, join(directory, segment_name(base, suffix)))
        done.append(
            f"finished swapping in the cleaned segment {base} (offsets {base} to {end - 1}), "
            f"replacing {len(replaced)} segments"
        )
    for name in fs.listdir(directory):
        if name.endswith(SWAP_SUFFIX):  # an index swap whose log never became one
            fs.remove(join(directory, name))
            done.append(f"removed {name}, left by a swap that never reached its commit point")
    if done:
        fs.fsync_dir(directory)
    return done
