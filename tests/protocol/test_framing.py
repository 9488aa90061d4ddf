"""The frame decoder: partial input, many frames at once, and the size limit."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.core.errors import DecodeError, FrameTooLargeError
from odradek.protocol.framing import FrameDecoder, frame


@given(
    payloads=st.lists(st.binary(max_size=50), max_size=6),
    cuts=st.lists(st.integers(0, 400), max_size=8),
)
def test_frames_survive_any_split(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(frame(p) for p in payloads)
    points = sorted({c for c in cuts if c < len(stream)} | {0, len(stream)})
    decoder = FrameDecoder()
    out: list[bytearray] = []
    for a, b in itertools.pairwise(points):
        out += decoder.feed(stream[a:b])
    assert out == payloads
    assert decoder.pending_bytes() == 0


def test_partial_frame_is_held_back() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(b"\x00\x00\x00\x05abc") == []
    assert decoder.pending_bytes() == 7
    assert decoder.feed(b"de\x00\x00") == [b"abcde"]
    assert decoder.pending_bytes() == 2


def test_the_size_of_the_frame_arriving_is_known_once_its_prefix_is_here() -> None:
    decoder = FrameDecoder()
    assert decoder.pending_frame_bytes() is None
    decoder.feed(b"\x00\x00\x00")
    assert decoder.pending_frame_bytes() is None  # three bytes of the prefix
    decoder.feed(b"\x05ab")
    assert decoder.pending_frame_bytes() == 9
    assert decoder.feed(b"cde\x00\x00\x01\x00x") == [b"abcde"]
    assert decoder.pending_frame_bytes() == 260  # the next frame's


def test_oversized_frame_is_refused_before_buffering() -> None:
    decoder = FrameDecoder(max_frame_bytes=10)
    with pytest.raises(FrameTooLargeError) as info:
        decoder.feed(b"\x00\x00\x00\x0b")
    assert info.value.size == 11
    assert "maximum of 10 bytes" in str(info.value)
    with pytest.raises(DecodeError):
        decoder.feed(b"")


def test_negative_size_is_an_error() -> None:
    with pytest.raises(DecodeError):
        FrameDecoder().feed(b"\xff\xff\xff\xff")
