"""Known answers and round trips for every primitive of the protocol guide."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.core.errors import DecodeError, EncodeError
from odradek.protocol.primitives import (
    Reader,
    Writer,
    decode_varint,
    decode_varlong,
    encode_unsigned_varint,
    encode_varint,
    encode_varlong,
)


def written(fn_name: str, value: object) -> bytes:
    w = Writer()
    getattr(w, fn_name)(value)
    return w.getvalue()


@pytest.mark.parametrize(
    ("method", "value", "expected"),
    [
        ("int8", -1, b"\xff"),
        ("int16", 258, b"\x01\x02"),
        ("int32", -2, b"\xff\xff\xff\xfe"),
        ("int64", 1, b"\x00" * 7 + b"\x01"),
        ("uint16", 65535, b"\xff\xff"),
        ("uint32", 4294967295, b"\xff\xff\xff\xff"),
        ("float64", 1.5, b"\x3f\xf8" + b"\x00" * 6),
        ("boolean", True, b"\x01"),
        ("unsigned_varint", 300, b"\xac\x02"),
        ("string", "ab", b"\x00\x02ab"),
        ("nullable_string", None, b"\xff\xff"),
        ("compact_string", "ab", b"\x03ab"),
        ("compact_nullable_string", None, b"\x00"),
        ("bytes_", b"\x01", b"\x00\x00\x00\x01\x01"),
        ("nullable_bytes", None, b"\xff\xff\xff\xff"),
        ("compact_bytes", b"", b"\x01"),
        ("compact_nullable_bytes", None, b"\x00"),
        ("records", None, b"\xff\xff\xff\xff"),
        ("compact_records", b"xy", b"\x03xy"),
    ],
)
def test_known_encodings(method: str, value: object, expected: bytes) -> None:
    assert written(method, value) == expected
    r = Reader(expected)
    assert getattr(r, method)() == value
    assert r.remaining() == 0


def test_uuid_is_sixteen_raw_bytes() -> None:
    u = uuid.UUID("01234567-89ab-cdef-0123-456789abcdef")
    assert written("uuid", u) == u.bytes
    assert Reader(u.bytes).uuid() == u


@pytest.mark.parametrize(
    ("value", "expected"),
    # Zigzag: 0 -> 0, -1 -> 1, 1 -> 2, -2 -> 3, 63 -> 126, -64 -> 127, 64 -> 128.
    [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-2, b"\x03"), (-64, b"\x7f"), (64, b"\x80\x01")],
)
def test_zigzag_varint(value: int, expected: bytes) -> None:
    assert encode_varint(value) == expected
    assert encode_varlong(value) == expected
    assert decode_varint(expected, 0) == (value, len(expected))


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(value: int) -> None:
    data = encode_varint(value)
    assert len(data) <= 5
    assert decode_varint(data, 0) == (value, len(data))


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(value: int) -> None:
    data = encode_varlong(value)
    assert len(data) <= 10
    assert decode_varlong(data, 0) == (value, len(data))


@given(st.integers(0, 2**32 - 1))
def test_unsigned_varint_round_trip(value: int) -> None:
    data = encode_unsigned_varint(value)
    r = Reader(data)
    assert r.unsigned_varint() == value
    assert r.remaining() == 0


def test_out_of_range_values_are_encode_errors() -> None:
    with pytest.raises(EncodeError):
        written("int8", 128)
    with pytest.raises(EncodeError):
        written("uint16", -1)
    with pytest.raises(EncodeError):
        encode_varint(2**31)
    with pytest.raises(EncodeError):
        written("string", None)
    with pytest.raises(EncodeError):
        written("string", "x" * 40000)


@pytest.mark.parametrize(
    ("method", "data"),
    [
        ("int32", b"\x00\x00"),
        ("string", b"\x00\x05ab"),
        ("string", b"\xff\xff"),  # null where a string is required
        ("string", b"\x00\x02\xff\xfe"),  # not UTF-8
        ("compact_string", b"\x00"),
        ("bytes_", b"\xff\xff\xff\xfe"),
        ("unsigned_varint", b"\x80\x80\x80\x80\x80\x01"),  # too long
        ("unsigned_varint", b"\xff\xff\xff\xff\x7f"),  # more than 32 bits
        ("array_length", b"\x7f\xff\xff\xff"),  # count larger than the buffer
    ],
)
def test_malformed_input_is_a_decode_error(method: str, data: bytes) -> None:
    with pytest.raises(DecodeError):
        getattr(Reader(data), method)()


def test_records_decode_without_copying() -> None:
    data = bytearray(b"\x00\x00\x00\x03abc")
    view = Reader(data).records()
    assert view is not None
    data[4] = ord("z")
    assert bytes(view) == b"zbc"


def test_large_records_stay_separate_chunks() -> None:
    big = bytes(100_000)
    w = Writer()
    w.int32(7)
    w.records(big)
    w.int16(1)
    chunks = w.chunks()
    assert any(c is big for c in chunks)
    assert (
        b"".join(c if isinstance(c, bytes | bytearray | memoryview) else c.read() for c in chunks)
        == w.getvalue()
    )
    assert len(w) == 4 + 4 + len(big) + 2


def test_tagged_fields_are_written_in_tag_order() -> None:
    w = Writer()
    w.tagged_fields([(5, b"\x01"), (1, b"")])
    assert w.getvalue() == b"\x02\x01\x00\x05\x01\x01"
    with pytest.raises(EncodeError):
        Writer().tagged_fields([(1, b""), (1, b"")])
