"""Java ``.properties`` text, as Kafka's ``server.properties`` and tool config files use it.

This module owns :func:`parse_properties`: comments, the three separators, line
continuations and escapes, read the way ``java.util.Properties.load`` reads them. What
the keys mean is the business of the tables that parse the values
(:mod:`odradek.core.config_keys` and the tables built on it).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from odradek.core.errors import ConfigError

__all__ = ["parse_properties"]


_WHITESPACE: Final = " \t\f"
_SEPARATORS: Final = "=:"
_ESCAPES: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """Keys and values of a Java ``.properties`` text, as ``java.util.Properties.load`` reads it.

    * A line whose first non-blank character is ``#`` or ``!`` is a comment; a comment
      is never continued onto the next line.
    * ``key=value``, ``key: value`` and ``key value`` are the same; white space around
      the separator is dropped, white space at the end of the value is kept (Kafka's
      config parser trims it later).
    * A line ending in an odd number of backslashes continues on the next line, whose
      leading white space is dropped.
    * Escapes: ``\\t \\n \\r \\f``, ``\\uXXXX`` (a surrogate pair makes one character),
      and a backslash before any other character stands for that character, so
      ``\\=``, ``\\:``, ``\\ `` and ``\\\\`` put separators and spaces into keys.
    * A key given twice keeps its last value.

    The text is already decoded: Java reads these files as ISO-8859-1 with ``\\u``
    escapes for anything else, and an ASCII file reads the same in any encoding.
    A malformed ``\\u`` escape raises :class:`ConfigError` naming the line.
    """
    result: dict[str, str] = {}
    for line_number, logical in _logical_lines(text):
        key, value = _split_key_value(logical)
        result[_unescape(key, line_number)] = _unescape(value, line_number)
    return result


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Logical lines with continuations joined; comments and blank lines dropped."""
    natural = re.split(r"\r\n|\r|\n", text)
    i = 0
    while i < len(natural):
        first_number = i + 1
        line = natural[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts: list[str] = []
        while True:
            trailing = len(line) - len(line.rstrip("\\"))
            if trailing % 2 == 0:
                parts.append(line)
                break
            # An odd run of backslashes escapes the line end: drop one, join the next line.
            parts.append(line[:-1])
            if i >= len(natural):
                break
            line = natural[i].lstrip(_WHITESPACE)
            i += 1
        yield first_number, "".join(parts)


def _split_key_value(line: str) -> tuple[str, str]:
    """The raw (still escaped) key and value of one logical line."""
    key_end = len(line)
    value_start = len(line)
    has_separator = False
    escaped = False
    for index, char in enumerate(line):
        if not escaped and char in _SEPARATORS:
            key_end, value_start, has_separator = index, index + 1, True
            break
        if not escaped and char in _WHITESPACE:
            key_end, value_start = index, index + 1
            break
        escaped = char == "\\" and not escaped
    while value_start < len(line):
        char = line[value_start]
        if char not in _WHITESPACE:
            # After white space, one '=' or ':' still counts as the separator.
            if not has_separator and char in _SEPARATORS:
                has_separator = True
            else:
                break
        value_start += 1
    return line[:key_end], line[value_start:]


def _unescape(raw: str, line_number: int) -> str:
    if "\\" not in raw:
        return raw
    out: list[str] = []
    i = 0
    while i < len(raw):
        char = raw[i]
        if char != "\\":
            out.append(char)
            i += 1
            continue
        if i + 1 >= len(raw):
            # A lone backslash at the very end (after a continuation at end of input).
            break
        nxt = raw[i + 1]
        if nxt == "u":
            digits = raw[i + 2 : i + 6]
            if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ConfigError(
                    f"line {line_number}: malformed \\uXXXX escape {raw[i : i + 6]!r}"
                )
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    text = "".join(out)
    # \uD83D\uDE00 is one character written as a UTF-16 surrogate pair, as Java sees it.
    if any("\ud800" <= c <= "\udfff" for c in text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text
