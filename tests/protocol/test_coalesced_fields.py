"""Runs of fixed-width fields read and written as one struct behave field by field.

The generated code reads and writes consecutive fixed-width fields with one
``struct.Struct`` (``Reader.unpack``, ``Writer.pack``). These tests hold that to the
field-by-field calls it replaces: the same values, and on bad input the same exception,
message, position and written bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pytest

from odradek.core.errors import DecodeError, EncodeError, UnsupportedVersionError
from odradek.protocol.messages.fetch_request import FetchPartition
from odradek.protocol.messages.fetch_response import EpochEndOffset, PartitionData
from odradek.protocol.primitives import Reader, Writer

METHOD = {
    "b": "int8",
    "h": "int16",
    "H": "uint16",
    "i": "int32",
    "I": "uint32",
    "q": "int64",
    "d": "float64",
    "?": "boolean",
}
LAYOUTS = [">iiqiqi", ">ihqqq", ">ihii?", ">iqq??", ">hdI", ">bH"]


def outcome(fn: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    try:
        return ("ok", fn(*args))
    except Exception as e:
        return ("error", type(e), str(e))


def field_by_field_read(layout: str, r: Reader) -> tuple[Any, ...]:
    return tuple(getattr(r, METHOD[code])() for code in layout[1:])


def field_by_field_write(layout: str, w: Writer, values: list[Any]) -> None:
    for code, value in zip(layout[1:], values, strict=True):
        getattr(w, METHOD[code])(value)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_unpack_is_field_by_field_on_every_truncation(layout: str) -> None:
    data = bytes(range(1, 1 + struct.calcsize(layout)))
    for end in range(len(data) + 1):
        one, each = Reader(data[:end]), Reader(data[:end])
        expected = outcome(field_by_field_read, layout, each)
        assert outcome(one.unpack, struct.Struct(layout)) == expected, end
        assert one.pos == each.pos


def test_unpack_reads_any_nonzero_byte_as_true() -> None:
    assert Reader(b"\x02\x00\xff").unpack(struct.Struct(">???")) == (True, False, True)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("bad", [2**63, -(2**63) - 1, 2**31, 70_000, -129, "1", 1.5, None])
def test_pack_is_field_by_field_on_a_value_that_does_not_fit(layout: str, bad: object) -> None:
    for at in range(len(layout) - 1):
        values: list[Any] = [1] * (len(layout) - 1)
        values[at] = bad
        one, each = Writer(), Writer()
        expected = outcome(field_by_field_write, layout, each, values)
        assert outcome(one.pack, struct.Struct(layout), *values) == expected
        assert one.getvalue() == each.getvalue()


def test_truncated_fetch_partition_fails_on_the_field_that_runs_out() -> None:
    w = Writer()
    FetchPartition(partition=1, fetch_offset=2).write(w, 16)
    with pytest.raises(DecodeError, match="need 8 bytes at position 8, only 2 left"):
        FetchPartition.read(Reader(w.getvalue()[:10]), 16)


def test_a_value_that_does_not_fit_comes_before_a_field_the_version_lacks() -> None:
    # Field by field, partition is written before last_fetched_epoch (v12+) is checked.
    with pytest.raises(EncodeError, match="does not fit in int32"):
        FetchPartition(partition=2**31, last_fetched_epoch=5).write(Writer(), 9)
    with pytest.raises(UnsupportedVersionError, match="last_fetched_epoch"):
        FetchPartition(partition=1, last_fetched_epoch=5).write(Writer(), 9)


def test_a_struct_field_is_sent_when_it_differs_from_its_default() -> None:
    def encoded(value: PartitionData, version: int = 16) -> bytes:
        w = Writer()
        value.write(w, version)
        return w.getvalue()

    default = encoded(PartitionData())
    assert default.endswith(b"\x00\x00")  # null records, no tagged field
    set_in_tags = PartitionData(diverging_epoch=EpochEndOffset(unknown_tagged_fields=[(5, b"")]))
    # One tagged field, tag 0, of 15 bytes: epoch -1, end offset -1 and its own tag 5.
    assert encoded(set_in_tags) == default[:-1] + b"\x01\x00\x0f" + b"\xff" * 12 + b"\x01\x05\x00"

    class Epoch(EpochEndOffset):
        pass

    # As with the dataclass __eq__, an instance of another class is never the default.
    assert encoded(PartitionData(diverging_epoch=Epoch())) != default
    with pytest.raises(UnsupportedVersionError, match="diverging_epoch"):
        encoded(PartitionData(diverging_epoch=EpochEndOffset(epoch=1)), 11)
    encoded(PartitionData(), 11)
