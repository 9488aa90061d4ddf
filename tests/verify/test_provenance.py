"""Which batch wrote each copy of a duplicated value, and what that says about the cause."""

from __future__ import annotations

from pathlib import Path

from odradek.cli.verify.provenance import find_copies
from odradek.protocol.record_codec import (
    Record,
    encode_batch,
)
from odradek.verify.provenance import (
    ACROSS_EPOCHS,
    SAME_SEQUENCE,
    UNKNOWN,
    WITHIN_EPOCH,
    Copy,
    classify,
    duplicate_offsets,
)


def test_the_final_read_gives_each_duplicated_values_offsets() -> None:
    final = {0: [(0, "a"), (1, "b"), (2, "a")], 1: [(0, "c"), (1, "c")]}
    assert duplicate_offsets(final, ["a", "c", "b"]) == {"a": (0, [0, 2]), "c": (1, [0, 1])}


def test_the_cause_follows_from_the_batch_identities() -> None:
    first = Copy(4, producer_id=7, producer_epoch=0, sequence=12)
    assert classify([first, Copy(9, 7, 0, 12)]) == SAME_SEQUENCE  # the broker's fault
    assert classify([first, Copy(9, 7, 1, 0)]) == ACROSS_EPOCHS  # a bump, then a resend
    assert classify([first, Copy(9, 8, 0, 0)]) == ACROSS_EPOCHS  # a new producer
    assert classify([first, Copy(9, 7, 0, 15)]) == WITHIN_EPOCH
    assert classify([first, None]) == UNKNOWN


def _segment(directory: Path, batches: list[bytes]) -> None:
    directory.mkdir(parents=True)
    (directory / "00000000000000000000.log").write_bytes(b"".join(batches))


def _batch(base: int, values: list[str], pid: int, epoch: int, seq: int) -> bytes:
    records = [Record(i, 1_000, value=v.encode()) for i, v in enumerate(values)]
    return encode_batch(
        records, base_offset=base, producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )


def test_copies_are_read_from_the_node_that_holds_the_value(tmp_path: Path) -> None:
    # Node 1 was down at the end with another history at offset 3; node 2 holds the
    # partition as the final read saw it: "x" at 1 (epoch 0) and again at 3 (epoch 1).
    _segment(tmp_path / "n1" / "verify-0", [_batch(0, ["w", "x", "y", "z"], 5, 0, 0)])
    _segment(
        tmp_path / "n2" / "verify-0",
        [_batch(0, ["w", "x", "y"], 5, 0, 0), _batch(3, ["x"], 5, 1, 0)],
    )
    found = find_copies([tmp_path / "n1", tmp_path / "n2"], "verify", 0, "x", [1, 3])
    assert found == {1: Copy(1, 5, 0, 1), 3: Copy(3, 5, 1, 0)}
    assert classify([found[1], found[3]]) == ACROSS_EPOCHS
    assert find_copies([tmp_path / "n1"], "verify", 0, "x", [3]) == {}
