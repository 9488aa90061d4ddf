"""Typed configuration keys (like Kafka's ``ConfigDef``) and their declarations.

This module owns what every configuration table in Odradek builds on:

* :class:`ConfigKey` and :class:`ConfigDef`: a table of keys, each with a type, a default
  (or :data:`REQUIRED`), a validator, an importance, a one-line doc and a dynamic flag;
  :meth:`ConfigDef.parse` turns ``{key: string}`` into typed values with Kafka's parsing
  rules and reports the keys it does not know;
* the validators: :class:`Range`, :class:`OneOf`, :class:`NonEmptyString`,
  :class:`ValidList`;
* :class:`Setting` and its typed kinds (:class:`IntKey`, :class:`LongKey`,
  :class:`BoolKey`, :class:`ListKey`, :class:`OptionalLongKey` ...): a key declared as an
  attribute of a config class, so that one line gives the key's name, type, default,
  validator and doc, and reading the attribute gives the typed value (``int``, not
  ``ConfigValue``, as mypy sees it); :func:`config_def_of` collects a class's
  declarations into its :class:`ConfigDef`.

Every invalid value raises :class:`~odradek.core.errors.ConfigError` with a message that
names the key, repeats the value and says what is allowed, so that an operator can fix
the file from the message alone.

The tables themselves live where their keys are used (``odradek.broker.server_keys`` for
the server, ``odradek.broker.topic_config`` for topics); nothing here knows any key name.
The ``.properties`` text format is :mod:`odradek.core.properties`.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import (
    ClassVar,
    Final,
    Generic,
    Never,
    NoReturn,
    Protocol,
    Self,
    TypeAlias,
    TypeVar,
    overload,
)

from odradek.core.errors import ConfigError

__all__ = [
    "INT_MAX",
    "LONG_MAX",
    "REQUIRED",
    "BoolKey",
    "ConfigDef",
    "ConfigKey",
    "ConfigType",
    "ConfigValue",
    "ConfigValues",
    "DoubleKey",
    "Importance",
    "IntKey",
    "ListKey",
    "LongKey",
    "NonEmptyString",
    "OneOf",
    "OptionalIntKey",
    "OptionalListKey",
    "OptionalLongKey",
    "OptionalStringKey",
    "Password",
    "Range",
    "Required",
    "Setting",
    "ShortKey",
    "StringKey",
    "ValidList",
    "Validator",
    "config_def_of",
    "format_value",
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

INT_MAX: Final = 2**31 - 1
"""The largest INT (Java's ``Integer.MAX_VALUE``), Kafka's "no limit" for many keys."""
LONG_MAX: Final = 2**63 - 1
"""The largest LONG (Java's ``Long.MAX_VALUE``)."""

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
# Declarations: one attribute per key
# ---------------------------------------------------------------------------------------

T = TypeVar("T")


class ConfigValues(Protocol):
    """What a class that declares :class:`Setting` attributes provides: the typed value
    of every key it declares, as :meth:`ConfigDef.parse` returned them."""

    @property
    def values(self) -> Mapping[str, ConfigValue]: ...


class Setting(Generic[T]):
    """One key, declared as a class attribute of a config class.

    ``log_segment_bytes = IntKey("log.segment.bytes", GIB, "...", validator=...)`` makes
    the :class:`ConfigKey` (``Setting.key``) and, on an instance, reads the key's typed
    value from the instance's ``values``: the attribute is typed ``int``, so mypy checks
    every use, and the name, type, default, validator and doc are written once, where the
    DescribeConfigs answer, the parsing and the documentation all take them from.

    Each kind fixes the type; the ``Optional...`` kinds are the keys with no default
    (``None``: not set), the others have a default or are :data:`REQUIRED`. A kind that
    does not fit its default is a mistake in the table and fails at import.
    """

    config_type: ClassVar[ConfigType]
    optional: ClassVar[bool] = False

    __slots__ = ("attribute", "key")

    def __init__(
        self,
        name: str,
        default: ConfigValue | Required,
        doc: str,
        *,
        validator: Validator | None = None,
        importance: Importance = Importance.MEDIUM,
        dynamic: bool = False,
    ) -> None:
        if (default is None) != self.optional:
            kind = type(self).__name__
            raise ConfigError(
                f"configuration {name}: {kind} "
                + (
                    "has no default; declare it with None"
                    if self.optional
                    else "needs a default or REQUIRED; a key without one is an Optional kind"
                )
            )
        self.key: Final = ConfigKey(
            name=name,
            type=self.config_type,
            default=default,
            validator=validator,
            importance=importance,
            doc=doc,
            dynamic=dynamic,
        )
        self.attribute = ""

    def __set_name__(self, owner: type[object], attribute: str) -> None:
        self.attribute = attribute

    @property
    def name(self) -> str:
        return self.key.name

    @overload
    def __get__(self, instance: None, owner: type[object]) -> Self: ...

    @overload
    def __get__(self, instance: ConfigValues, owner: type[object]) -> T: ...

    def __get__(self, instance: ConfigValues | None, owner: type[object]) -> Self | T:
        if instance is None:
            return self
        return self.read(instance.values[self.key.name])

    def __set__(self, instance: ConfigValues, value: Never) -> NoReturn:
        # A configuration is read, never assigned: the value comes from parsing alone.
        # ``Never`` also makes mypy refuse the assignment before it runs.
        raise AttributeError(f"{self.key.name} is read-only; cannot set {self.attribute}")

    def read(self, value: ConfigValue) -> T:
        """``value`` (this key's parsed value) as the declared type."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.key.name!r})"


def _integer(name: str, value: ConfigValue) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"configuration {name} has no integer value")
    return value


def _string(name: str, value: ConfigValue) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"configuration {name} has no string value")
    return value


def _list(name: str, value: ConfigValue) -> list[str]:
    if not isinstance(value, list):
        raise ConfigError(f"configuration {name} has no list value")
    return value


class _Integer(Setting[int]):
    def read(self, value: ConfigValue) -> int:
        return _integer(self.key.name, value)


class IntKey(_Integer):
    """A 32-bit integer (Kafka's INT)."""

    config_type = ConfigType.INT


class LongKey(_Integer):
    """A 64-bit integer (Kafka's LONG)."""

    config_type = ConfigType.LONG


class ShortKey(_Integer):
    """A 16-bit integer (Kafka's SHORT)."""

    config_type = ConfigType.SHORT


class _OptionalInteger(Setting[int | None]):
    optional = True

    def read(self, value: ConfigValue) -> int | None:
        return None if value is None else _integer(self.key.name, value)


class OptionalIntKey(_OptionalInteger):
    """A 32-bit integer with no default."""

    config_type = ConfigType.INT


class OptionalLongKey(_OptionalInteger):
    """A 64-bit integer with no default."""

    config_type = ConfigType.LONG


class BoolKey(Setting[bool]):
    """``true`` or ``false``."""

    config_type = ConfigType.BOOLEAN

    def read(self, value: ConfigValue) -> bool:
        if not isinstance(value, bool):
            raise ConfigError(f"configuration {self.key.name} has no boolean value")
        return value


class DoubleKey(Setting[float]):
    """A double (Kafka's DOUBLE)."""

    config_type = ConfigType.DOUBLE

    def read(self, value: ConfigValue) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"configuration {self.key.name} has no number value")
        return float(value)


class StringKey(Setting[str]):
    """A string, trimmed."""

    config_type = ConfigType.STRING

    def read(self, value: ConfigValue) -> str:
        return _string(self.key.name, value)


class OptionalStringKey(Setting[str | None]):
    """A string with no default."""

    config_type = ConfigType.STRING
    optional = True

    def read(self, value: ConfigValue) -> str | None:
        return None if value is None else _string(self.key.name, value)


class ListKey(Setting[list[str]]):
    """A comma-separated list."""

    config_type = ConfigType.LIST

    def read(self, value: ConfigValue) -> list[str]:
        return _list(self.key.name, value)


class OptionalListKey(Setting[list[str] | None]):
    """A comma-separated list with no default (unset is not the empty list)."""

    config_type = ConfigType.LIST
    optional = True

    def read(self, value: ConfigValue) -> list[str] | None:
        return None if value is None else _list(self.key.name, value)


def config_def_of(cls: type[object]) -> ConfigDef:
    """The :class:`ConfigDef` of every :class:`Setting` declared on ``cls`` and its bases,
    in the order they are declared (bases first)."""
    table = ConfigDef()
    for klass in reversed(cls.__mro__):
        for attribute in vars(klass).values():
            if isinstance(attribute, Setting):
                table.define(attribute.key)
    return table


class OptionalPasswordKey(Setting[Password | None]):
    """A secret with no default: never shown (DescribeConfigs reports it sensitive)."""

    config_type = ConfigType.PASSWORD
    optional = True

    def read(self, value: ConfigValue) -> Password | None:
        if value is None or isinstance(value, Password):
            return value
        raise ConfigError(f"configuration {self.key.name} has no password value")
