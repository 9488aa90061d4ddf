"""The process's open-files limit (``RLIMIT_NOFILE``) and what it allows.

A partition holds its active segment's three files open for its life, and the older
segments being read share a bounded cache (``storage/segment.py``); connections,
checkpoints and the metadata log take the rest. Linux starts most processes with a soft
limit of 1,024 descriptors, far below what thousands of partitions need, while the hard
limit is usually much higher: the node raises the soft limit to the hard one at start,
as Kafka's packaging asks operators to, and says how many partitions that allows.
"""

from __future__ import annotations

import logging
import resource

from odradek.storage.segment import DESCRIPTORS_PER_PARTITION

log = logging.getLogger("odradek.node")

RESERVED_DESCRIPTORS = 1024
"""Kept for client and peer connections, checkpoints and the metadata log."""


def raise_open_files_limit() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit; the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft >= hard:
        return soft
    target = hard
    if hard == resource.RLIM_INFINITY:
        # Linux refuses an infinite soft limit for descriptors; take the largest the
        # kernel accepts (fs.nr_open, 1,048,576 by default).
        target = _nr_open()
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as e:
        log.warning("cannot raise the open-files limit from %d to %d: %s", soft, target, e)
        return soft
    log.info("open-files limit (RLIMIT_NOFILE) raised from %d to %d, the hard limit", soft, target)
    return target


def partitions_allowed(limit: int, open_segments: int) -> int:
    """How many partitions ``limit`` descriptors hold, beside the cache of older
    segments (``open_segments``) and :data:`RESERVED_DESCRIPTORS`."""
    return max(limit - open_segments - RESERVED_DESCRIPTORS, 0) // DESCRIPTORS_PER_PARTITION


def log_partition_capacity(limit: int, open_segments: int, hosted: int) -> None:
    allowed = partitions_allowed(limit, open_segments)
    message = (
        "open-files limit %d: each partition keeps %d files open (its active segment), "
        "older segments being read share at most %d, %d are kept for connections and "
        "the rest: room for about %d partitions; %d in the log dir now"
    )
    args = (limit, DESCRIPTORS_PER_PARTITION, open_segments, RESERVED_DESCRIPTORS, allowed, hosted)
    if hosted > allowed:
        log.error(
            message + "; raise the hard limit (ulimit -Hn, LimitNOFILE= in systemd) or "
            "appends and reads will fail with 'too many open files'",
            *args,
        )
    else:
        log.info(message, *args)


def _nr_open() -> int:
    try:
        with open("/proc/sys/fs/nr_open", encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return 1_048_576
