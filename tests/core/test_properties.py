"""Java ``.properties`` text as ``java.util.Properties.load`` reads it: separators,
comments, continuations, escapes."""

from __future__ import annotations

from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.core.errors import ConfigError
from odradek.core.properties import parse_properties

# --- .properties ------------------------------------------------------------------------


def test_three_separators_and_white_space_around_them() -> None:
    text = "a=1\nb: 2\nc 3\nd\t=\t4\n  e   :   5\nf:=6\ng = = 7\n"
    assert parse_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "4",
        "e": "5",
        "f": "=6",
        "g": "= 7",
    }


def test_key_without_value_and_trailing_white_space_kept() -> None:
    assert parse_properties("lonely\nempty=\nspaced = value  \n") == {
        "lonely": "",
        "empty": "",
        "spaced": "value  ",
    }


def test_comments_and_blank_lines() -> None:
    text = "# hash\n! bang\n   # indented\n\n   \t\nkey=a#b!c\n"
    assert parse_properties(text) == {"key": "a#b!c"}


def test_line_continuation_drops_leading_white_space_of_next_line() -> None:
    text = "listeners=PLAINTEXT://:9092,\\\n          CONTROLLER://:9093\nnext=1\n"
    assert parse_properties(text) == {
        "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
        "next": "1",
    }


def test_continuation_over_several_lines_and_a_hash_on_a_continued_line() -> None:
    assert parse_properties("k=a\\\n  b\\\n  #c\n") == {"k": "ab#c"}


def test_even_number_of_backslashes_does_not_continue() -> None:
    assert parse_properties("path=C:\\\\\nother=1\n") == {"path": "C:\\", "other": "1"}


def test_comment_ending_in_backslash_is_not_continued() -> None:
    assert parse_properties("# comment \\\nkey=1\n") == {"key": "1"}


def test_continuation_into_an_empty_line_ends_the_value() -> None:
    assert parse_properties("a=x\\\n\nb=y\n") == {"a": "x", "b": "y"}


def test_continuation_at_end_of_input() -> None:
    assert parse_properties("a=x\\") == {"a": "x"}


def test_escapes_in_values_and_keys() -> None:
    text = (
        "tab=a\\tb\nnl=a\\nb\ncr=a\\rb\nff=a\\fb\nuni=\\u0041\\u00e9\n"
        "key\\ with\\ space=1\nk\\=eq=2\nk\\:colon=3\nback=\\\\\nother=\\z\\q\n"
    )
    assert parse_properties(text) == {
        "tab": "a\tb",
        "nl": "a\nb",
        "cr": "a\rb",
        "ff": "a\fb",
        "uni": "Aé",
        "key with space": "1",
        "k=eq": "2",
        "k:colon": "3",
        "back": "\\",
        "other": "zq",
    }


def test_surrogate_pair_escape_makes_one_character() -> None:
    assert parse_properties("smile=\\uD83D\\uDE00") == {"smile": "\U0001f600"}


@pytest.mark.parametrize("bad", ["k=\\u12", "k=\\u12G4", "k=x\\u"])
def test_malformed_unicode_escape_names_the_line(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"line 2: malformed \\uXXXX"):
        parse_properties("ok=1\n" + bad)


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_line_terminators(newline: str) -> None:
    text = newline.join(["# c", "a=1", "b=2\\", "  3", ""])
    assert parse_properties(text) == {"a": "1", "b": "23"}


def test_last_of_two_equal_keys_wins() -> None:
    assert parse_properties("a=1\na=2\n") == {"a": "2"}


def _needs_escape(char: str, index: int, is_key: bool) -> bool:
    if is_key:
        # Separators and white space end a key; # or ! first would make a comment.
        return char in "=: \t\f" or (index == 0 and char in "#!")
    # Leading white space and one leading separator would be eaten as the separator.
    return index == 0 and char in "=: \t\f"


def _escape(text: str, is_key: bool) -> str:
    """Write ``text`` so that Properties.load reads it back unchanged."""
    out: list[str] = []
    for index, char in enumerate(text):
        if char == "\\":
            out.append("\\\\")
        elif _needs_escape(char, index, is_key):
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif ord(char) > 126 or ord(char) < 32:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return "".join(out)


_SURROGATES: tuple[Literal["Cs"]] = ("Cs",)
_TEXT = st.text(
    alphabet=st.characters(exclude_categories=_SURROGATES, max_codepoint=0xFFFF), max_size=12
)


@given(st.dictionaries(_TEXT.filter(bool), _TEXT, max_size=6))
def test_escaped_text_reads_back_unchanged(pairs: dict[str, str]) -> None:
    text = "\n".join(f"{_escape(k, True)}={_escape(v, False)}" for k, v in pairs.items())
    assert parse_properties(text) == pairs
