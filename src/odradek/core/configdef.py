"""Typed configuration definitions (like Kafka's ``ConfigDef``) and ``.properties`` files.

This module owns three things that every configuration table in Odradek builds on:

* :func:`parse_properties`: the Java ``.properties`` text format that Kafka's
  ``server.properties`` and tool config files use (comments, the three separators,
  line continuations, escapes);
* :class:`ConfigKey` and :class:`ConfigDef`: a table of keys, each with a type, a default
  (or :data:`REQUIRED`), a validator, an importance, a one-line doc and a dynamic flag;
  :meth:`ConfigDef.parse` turns ``{key: string}`` into typed values with Kafka's parsing
  rules and reports the keys it does not know;
* the validators: :class:`Range`, :class:`OneOf`, :class:`NonEmptyString`,
  :class:`ValidList`.

Every invalid value raises :class:`~odradek.core.errors.ConfigError` with a message that
names the key, repeats the value and says what is allowed, so that an operator can fix
the file from the message alone.

The tables themselves live where their keys are used (``odradek.broker.config`` for the
server, ``odradek.broker.topic_config`` for topics); nothing here knows any key name.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final, TypeAlias

from odradek.core.errors import ConfigError

__all__ = [
    "REQUIRED",
    "ConfigDef",
    "ConfigKey",
    "ConfigType",
    "ConfigValue",
    "Importance",
    "NonEmptyString",
    "OneOf",
    "Password",
    "Range",
    "Required",
    "ValidList",
    "Validator",
    "format_value",
    "parse_properties",
    "parse_value",
]


class ConfigType(enum.IntEnum):
    """A config key's type. The values are Kafka's DescribeConfigs ``ConfigType`` ids."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class Importance(enum.Enum):
    """How much an operator should care about a key (Kafka's three levels)."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Required:
    """The type of :data:`REQUIRED`: a key that must be given, for it has no default."""

    _instance: Required | None = None

    def __new__(cls) -> Required:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Final = Required()


class Password:
    """A secret string. It never shows in ``repr`` or ``str``, so it never reaches a log."""

    __slots__ = ("_value",)
    HIDDEN: Final = "[hidden]"

    def __init__(self, value: str) -> None:
        self._value = value

    @property
    def value(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Password({self.HIDDEN})"

    def __str__(self) -> str:
        return self.HIDDEN

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


# A typed value: what ConfigDef.parse returns for one key. None means "not set".
ConfigValue: TypeAlias = bool | int | float | str | list[str] | Password | None


def _invalid(name: str, value: object, reason: str) -> ConfigError:
    shown = Password.HIDDEN if isinstance(value, Password) else _show(value)
    return ConfigError(f"Invalid value {shown} for configuration {name}: {reason}")


def _show(value: object) -> str:
    if isinstance(value, list):
        return repr(",".join(str(v) for v in value))
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, str) else str(value)


# ---------------------------------------------------------------------------------------
# Validators
# ---------------------------------------------------------------------------------------


class Validator:
    """Checks one typed value; raises :class:`ConfigError` naming the key when it is bad.

    ``None`` (a key that is not set and has no default) is always accepted: whether a
    key must be set is the job of :data:`REQUIRED`, not of the validator. Kafka instead
    lets a validator see ``null``, which is why it cannot put a range on keys such as
    ``log.retention.minutes``; we can.
    """

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        raise NotImplementedError

    def __str__(self) -> str:
        """What is allowed, in the words an error message uses."""
        raise NotImplementedError


@dataclass(frozen=True)
class Range(Validator):
    """A number within ``[min, max]``; either bound may be open (``None``)."""

    min: float | None = None
    max: float | None = None

    @classmethod
    def at_least(cls, minimum: float) -> Range:
        return cls(min=minimum)

    @classmethod
    def between(cls, minimum: float, maximum: float) -> Range:
        return cls(min=minimum, max=maximum)

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _invalid(name, value, "Value must be a number")
        if self.min is not None and value < self.min:
            raise _invalid(name, value, f"Value must be at least {_num(self.min)}")
        if self.max is not None and value > self.max:
            raise _invalid(name, value, f"Value must be no more than {_num(self.max)}")

    def __str__(self) -> str:
        if self.min is None and self.max is None:
            return "[...]"
        if self.max is None:
            return f"[{_num(self.min)},...]"
        if self.min is None:
            return f"[...,{_num(self.max)}]"
        return f"[{_num(self.min)},...,{_num(self.max)}]"


def _num(n: float | None) -> str:
    if isinstance(n, float) and n.is_integer():
        return str(int(n))
    return str(n)


@dataclass(frozen=True, init=False)
class OneOf(Validator):
    """A string that is one of a fixed set (Kafka's ``ValidString`` / case-insensitive one).

    With ``case_sensitive=False`` the comparison ignores case, as Kafka's
    ``CaseInsensitiveValidString`` does; the value itself is kept as written.
    """

    allowed: tuple[str, ...]
    case_sensitive: bool = True

    def __init__(self, *allowed: str, case_sensitive: bool = True) -> None:
        object.__setattr__(self, "allowed", tuple(allowed))
        object.__setattr__(self, "case_sensitive", case_sensitive)

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if value is None:
            return
        if not isinstance(value, str):
            raise _invalid(name, value, f"String must be one of: {', '.join(self.allowed)}")
        if self.case_sensitive:
            ok = value in self.allowed
        else:
            ok = value.lower() in {a.lower() for a in self.allowed}
        if not ok:
            raise _invalid(name, value, f"String must be one of: {', '.join(self.allowed)}")

    def __str__(self) -> str:
        suffix = "" if self.case_sensitive else " (case-insensitive)"
        return "[" + ", ".join(self.allowed) + "]" + suffix


@dataclass(frozen=True)
class NonEmptyString(Validator):
    """A string with at least one character that is not white space."""

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if value is None:
            return
        text = value.value if isinstance(value, Password) else value
        if not isinstance(text, str) or not text.strip():
            raise _invalid(name, value, "String must be non-empty")

    def __str__(self) -> str:
        return "non-empty string"


@dataclass(frozen=True, init=False)
class ValidList(Validator):
    """A list whose items are non-empty and, when ``allowed`` is given, each one of them.

    ``allow_empty=False`` also refuses the empty list; ``unique=True`` refuses an item
    that appears twice (a log directory listed twice would be opened twice).
    """

    allowed: tuple[str, ...]
    allow_empty: bool = True
    unique: bool = False

    def __init__(self, *allowed: str, allow_empty: bool = True, unique: bool = False) -> None:
        object.__setattr__(self, "allowed", tuple(allowed))
        object.__setattr__(self, "allow_empty", allow_empty)
        object.__setattr__(self, "unique", unique)

    def ensure_valid(self, name: str, value: ConfigValue) -> None:
        if value is None:
            return
        if not isinstance(value, list):
            raise _invalid(name, value, "Value must be a comma-separated list")
        if not value and not self.allow_empty:
            raise _invalid(name, value, "List must not be empty")
        seen: set[str] = set()
        for item in value:
            if not item:
                raise _invalid(name, value, "List items must not be empty")
            if self.allowed and item not in self.allowed:
                raise _invalid(
                    name, value, f"Item {item!r} is not one of: {', '.join(self.allowed)}"
                )
            if self.unique and item in seen:
                raise _invalid(name, value, f"Item {item!r} appears more than once")
            seen.add(item)

    def __str__(self) -> str:
        if self.allowed:
            return "[" + ", ".join(self.allowed) + "]"
        return "non-empty list" if not self.allow_empty else "list"


# ---------------------------------------------------------------------------------------
# Type parsing (Kafka's ConfigDef.parseType rules)
# ---------------------------------------------------------------------------------------

_INTEGER = re.compile(r"[+-]?[0-9]+")
# Java's Double.parseDouble also takes a d/f suffix; NaN and Infinity are refused on
# purpose, since no Kafka setting means anything with them.
_DOUBLE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[dDfF]?")
_JAVA_IDENT = r"[A-Za-z_$][A-Za-z0-9_$]*"
_CLASS_NAME = re.compile(rf"{_JAVA_IDENT}(?:\.{_JAVA_IDENT})*(?:\${_JAVA_IDENT})*")
# Kafka splits lists on commas with any white space around them, keeping empty items.
_LIST_SPLIT = re.compile(r"\s*,\s*")

_INT_RANGE: Final = {
    ConfigType.SHORT: (-(2**15), 2**15 - 1, "a 16-bit integer"),
    ConfigType.INT: (-(2**31), 2**31 - 1, "a 32-bit integer"),
    ConfigType.LONG: (-(2**63), 2**63 - 1, "a 64-bit integer"),
}


def parse_value(name: str, config_type: ConfigType, raw: str) -> ConfigValue:
    """Parse one string the way Kafka does for ``config_type``; ``name`` is for errors.

    Every type but PASSWORD is trimmed first, as Kafka trims. Integers are decimal
    digits with an optional sign (no ``_``, no ``0x``), range-checked for their width.
    """
    # Kafka trims passwords too; we do the same, so a value copied from Kafka behaves alike.
    trimmed = raw.strip()
    if config_type is ConfigType.BOOLEAN:
        lowered = trimmed.lower()
        if lowered == "true":
            return True
        if lowered == "false":
            return False
        raise _invalid(name, raw, "Expected value to be either true or false")
    if config_type is ConfigType.STRING:
        return trimmed
    if config_type is ConfigType.PASSWORD:
        return Password(trimmed)
    if config_type in _INT_RANGE:
        low, high, what = _INT_RANGE[config_type]
        if not _INTEGER.fullmatch(trimmed):
            raise _invalid(name, raw, f"Not a number of type {config_type.name} ({what})")
        number = int(trimmed)
        if not low <= number <= high:
            raise _invalid(
                name,
                raw,
                f"Not a number of type {config_type.name} ({what}, from {low} to {high})",
            )
        return number
    if config_type is ConfigType.DOUBLE:
        if not _DOUBLE.fullmatch(trimmed):
            raise _invalid(name, raw, "Not a number of type DOUBLE")
        number_f = float(trimmed.rstrip("dDfF"))
        if math.isinf(number_f):
            raise _invalid(name, raw, "Not a number of type DOUBLE (out of range)")
        return number_f
    if config_type is ConfigType.LIST:
        if not trimmed:
            return []
        return _LIST_SPLIT.split(trimmed)
    if config_type is ConfigType.CLASS:
        if not _CLASS_NAME.fullmatch(trimmed):
            raise _invalid(name, raw, "Expected a class name such as org.example.MyClass")
        return trimmed
    raise ConfigError(f"configuration {name} has an unknown type {config_type!r}")


def _check_type(name: str, config_type: ConfigType, value: ConfigValue) -> None:
    """Refuse a typed default that does not fit its key's type (a bug in a key table)."""
    if value is None:
        return
    ok: bool
    if config_type is ConfigType.BOOLEAN:
        ok = isinstance(value, bool)
    elif config_type in _INT_RANGE:
        low, high, _ = _INT_RANGE[config_type]
        ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    elif config_type is ConfigType.DOUBLE:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif config_type is ConfigType.LIST:
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    elif config_type is ConfigType.PASSWORD:
        ok = isinstance(value, Password)
    else:
        ok = isinstance(value, str)
    if not ok:
        raise ConfigError(
            f"default {value!r} of configuration {name} is not of type {config_type.name}"
        )


def format_value(config_type: ConfigType, value: ConfigValue) -> str | None:
    """A typed value as Kafka writes it back (DescribeConfigs): lists joined by commas.

    Passwords come back as ``None``: a secret is never echoed.
    """
    if value is None or isinstance(value, Password) or config_type is ConfigType.PASSWORD:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


# ---------------------------------------------------------------------------------------
# Keys and definitions
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigKey:
    """One key: its name, type, default, validator, importance, doc and update mode.

    ``default`` is a typed value, ``None`` (no default: the key is simply unset) or
    :data:`REQUIRED`. ``dynamic`` says whether the key may be changed on a running
    cluster (Kafka's "cluster-wide" or "per-broker" update modes); ``False`` is Kafka's
    "read-only". The default is checked against the type and the validator when the key
    is made, so a wrong table fails at import, not at a customer's site.
    """

    name: str
    type: ConfigType
    default: ConfigValue | Required = REQUIRED
    validator: Validator | None = None
    importance: Importance = Importance.MEDIUM
    doc: str = ""
    dynamic: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.default, Required):
            _check_type(self.name, self.type, self.default)
            if self.validator is not None:
                self.validator.ensure_valid(self.name, self.default)

    @property
    def required(self) -> bool:
        return isinstance(self.default, Required)

    @property
    def default_value(self) -> ConfigValue:
        """The default as a value; ``None`` for a required key or one with no default."""
        return None if isinstance(self.default, Required) else self.default

    def parse(self, raw: str) -> ConfigValue:
        """Parse and validate one string for this key."""
        value = parse_value(self.name, self.type, raw)
        if self.validator is not None:
            self.validator.ensure_valid(self.name, value)
        return value

    def format(self, value: ConfigValue) -> str | None:
        return format_value(self.type, value)


class ConfigDef:
    """An ordered table of :class:`ConfigKey`; :meth:`parse` applies it to raw strings."""

    def __init__(self, keys: Iterable[ConfigKey] = ()) -> None:
        self._keys: dict[str, ConfigKey] = {}
        for key in keys:
            self.define(key)

    def define(self, key: ConfigKey) -> ConfigDef:
        """Add a key; defining a name twice is a mistake in the table and is refused."""
        if key.name in self._keys:
            raise ConfigError(f"configuration {key.name} is defined twice")
        self._keys[key.name] = key
        return self

    def __contains__(self, name: object) -> bool:
        return name in self._keys

    def __getitem__(self, name: str) -> ConfigKey:
        return self._keys[name]

    def __iter__(self) -> Iterator[ConfigKey]:
        return iter(self._keys.values())

    def __len__(self) -> int:
        return len(self._keys)

    def names(self) -> list[str]:
        return list(self._keys)

    def get(self, name: str) -> ConfigKey | None:
        return self._keys.get(name)

    def default_values(self) -> dict[str, ConfigValue]:
        """Every key's default; required keys and keys without a default map to ``None``."""
        return {k.name: k.default_value for k in self._keys.values()}

    def parse_value(self, name: str, raw: str) -> ConfigValue:
        """Parse one known key; an unknown name is a :class:`ConfigError`."""
        key = self._keys.get(name)
        if key is None:
            raise ConfigError(f"Unknown configuration {name}")
        return key.parse(raw)

    def parse(self, values: Mapping[str, str]) -> tuple[dict[str, ConfigValue], list[str]]:
        """Typed values for every defined key, and the given keys that are not defined.

        A key that is not given takes its default (``None`` when it has none); a
        :data:`REQUIRED` key that is not given, or any invalid value, raises
        :class:`ConfigError`. Unknown keys are returned, not refused: a Kafka file
        carries keys for features we do not have, and the caller decides how loudly to
        report them. They come back in the order they were given.
        """
        typed: dict[str, ConfigValue] = {}
        for key in self._keys.values():
            raw = values.get(key.name)
            if raw is not None:
                typed[key.name] = key.parse(raw)
            elif key.required:
                raise ConfigError(
                    f"Missing required configuration {key.name} which has no default value"
                )
            else:
                typed[key.name] = key.default_value
        unknown = [name for name in values if name not in self._keys]
        return typed, unknown


# ---------------------------------------------------------------------------------------
# Java .properties
# ---------------------------------------------------------------------------------------

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
