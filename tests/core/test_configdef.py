"""Config definitions and .properties files: Java's format, Kafka's type rules, validators."""

from __future__ import annotations

from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.core.configdef import (
    REQUIRED,
    ConfigDef,
    ConfigKey,
    ConfigType,
    ConfigValue,
    NonEmptyString,
    OneOf,
    Password,
    Range,
    ValidList,
    format_value,
    parse_properties,
    parse_value,
)
from odradek.core.errors import ConfigError

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


# --- type parsing -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"), [("true", True), ("TRUE", True), (" False ", False), ("fAlSe", False)]
)
def test_boolean_is_case_insensitive(raw: str, expected: bool) -> None:
    assert parse_value("x.enable", ConfigType.BOOLEAN, raw) is expected


@pytest.mark.parametrize("raw", ["yes", "1", "", "t"])
def test_boolean_error_names_key_value_and_choices(raw: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_value("auto.create.topics.enable", ConfigType.BOOLEAN, raw)
    message = str(info.value)
    assert "auto.create.topics.enable" in message
    assert repr(raw) in message
    assert "true or false" in message


@pytest.mark.parametrize(
    ("config_type", "raw", "expected"),
    [
        (ConfigType.INT, "42", 42),
        (ConfigType.INT, " +7 ", 7),
        (ConfigType.INT, "-3", -3),
        (ConfigType.INT, "2147483647", 2**31 - 1),
        (ConfigType.INT, "-2147483648", -(2**31)),
        (ConfigType.SHORT, "32767", 32767),
        (ConfigType.LONG, "9223372036854775807", 2**63 - 1),
        (ConfigType.LONG, "-9223372036854775808", -(2**63)),
    ],
)
def test_integers_within_their_width(config_type: ConfigType, raw: str, expected: int) -> None:
    assert parse_value("k", config_type, raw) == expected


@pytest.mark.parametrize(
    ("config_type", "raw"),
    [
        (ConfigType.INT, "2147483648"),
        (ConfigType.INT, "-2147483649"),
        (ConfigType.SHORT, "32768"),
        (ConfigType.LONG, "9223372036854775808"),
        (ConfigType.INT, "1_000"),
        (ConfigType.INT, "0x10"),
        (ConfigType.INT, "1.0"),
        (ConfigType.INT, "1e3"),
        (ConfigType.INT, ""),
        (ConfigType.LONG, "ten"),
        (ConfigType.INT, "٣"),  # a non-ASCII digit, which Python's int() would take
    ],
)
def test_integer_errors_name_key_value_and_type(config_type: ConfigType, raw: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_value("num.partitions", config_type, raw)
    message = str(info.value)
    assert "num.partitions" in message
    assert repr(raw) in message
    assert config_type.name in message


@pytest.mark.parametrize(
    ("raw", "expected"), [("0.5", 0.5), ("1e3", 1000.0), (".5", 0.5), ("1.", 1.0), ("2d", 2.0)]
)
def test_double(raw: str, expected: float) -> None:
    assert parse_value("ratio", ConfigType.DOUBLE, raw) == expected


@pytest.mark.parametrize("raw", ["NaN", "Infinity", "abc", "1e999", "", "0x1p3"])
def test_double_errors(raw: str) -> None:
    with pytest.raises(ConfigError, match=r"ratio.*DOUBLE"):
        parse_value("ratio", ConfigType.DOUBLE, raw)


def test_string_is_trimmed() -> None:
    assert parse_value("s", ConfigType.STRING, "  CreateTime \t") == "CreateTime"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("a, b ,c", ["a", "b", "c"]),
        ("", []),
        ("   ", []),
        ("one", ["one"]),
        ("a,,b", ["a", "", "b"]),
        ("a,", ["a", ""]),
    ],
)
def test_list_splits_on_commas_with_white_space(raw: str, expected: list[str]) -> None:
    assert parse_value("l", ConfigType.LIST, raw) == expected


def test_class_names() -> None:
    assert parse_value("c", ConfigType.CLASS, " org.example.My$Inner ") == "org.example.My$Inner"
    with pytest.raises(ConfigError, match=r"authorizer.class.name"):
        parse_value("authorizer.class.name", ConfigType.CLASS, "not a class")


def test_password_never_shows() -> None:
    secret = parse_value("ssl.key.password", ConfigType.PASSWORD, " s3cret ")
    assert isinstance(secret, Password)
    assert secret.value == "s3cret"
    assert "s3cret" not in repr(secret)
    assert "s3cret" not in str(secret)
    assert format_value(ConfigType.PASSWORD, secret) is None


def test_password_in_an_error_is_hidden() -> None:
    key = ConfigKey("p", ConfigType.PASSWORD, None, NonEmptyString())
    with pytest.raises(ConfigError) as info:
        key.parse("   ")
    assert "[hidden]" in str(info.value)
    assert key.parse("x") == Password("x")


@pytest.mark.parametrize(
    ("config_type", "value", "expected"),
    [
        (ConfigType.BOOLEAN, True, "true"),
        (ConfigType.BOOLEAN, False, "false"),
        (ConfigType.LIST, ["a", "b"], "a,b"),
        (ConfigType.LIST, [], ""),
        (ConfigType.DOUBLE, 0.5, "0.5"),
        (ConfigType.LONG, -1, "-1"),
        (ConfigType.STRING, None, None),
    ],
)
def test_format_value(config_type: ConfigType, value: ConfigValue, expected: str | None) -> None:
    assert format_value(config_type, value) == expected


# --- validators -------------------------------------------------------------------------


def test_range_at_least() -> None:
    v = Range.at_least(1)
    v.ensure_valid("num.partitions", 1)
    v.ensure_valid("num.partitions", None)
    with pytest.raises(ConfigError, match=r"Invalid value 0 for configuration num.partitions.*"):
        v.ensure_valid("num.partitions", 0)
    with pytest.raises(ConfigError, match=r"at least 1"):
        v.ensure_valid("num.partitions", -5)


def test_range_between() -> None:
    v = Range.between(0, 1)
    v.ensure_valid("r", 0.0)
    v.ensure_valid("r", 1)
    with pytest.raises(ConfigError, match=r"r: Value must be no more than 1"):
        v.ensure_valid("r", 1.5)
    with pytest.raises(ConfigError, match=r"at least 0"):
        v.ensure_valid("r", -0.1)
    assert str(v) == "[0,...,1]"


def test_one_of() -> None:
    v = OneOf("CreateTime", "LogAppendTime")
    v.ensure_valid("t", "CreateTime")
    with pytest.raises(ConfigError) as info:
        v.ensure_valid("log.message.timestamp.type", "createtime")
    assert "'createtime'" in str(info.value)
    assert "CreateTime, LogAppendTime" in str(info.value)
    OneOf("PLAINTEXT", case_sensitive=False).ensure_valid("p", "plaintext")


def test_non_empty_string() -> None:
    NonEmptyString().ensure_valid("s", "x")
    with pytest.raises(ConfigError, match=r"s: String must be non-empty"):
        NonEmptyString().ensure_valid("s", "  ")


def test_valid_list() -> None:
    roles = ValidList("broker", "controller", allow_empty=False)
    roles.ensure_valid("process.roles", ["broker", "controller"])
    with pytest.raises(ConfigError, match=r"process.roles.*'worker' is not one of"):
        roles.ensure_valid("process.roles", ["broker", "worker"])
    with pytest.raises(ConfigError, match=r"process.roles: List must not be empty"):
        roles.ensure_valid("process.roles", [])
    with pytest.raises(ConfigError, match=r"items must not be empty"):
        ValidList().ensure_valid("l", ["a", ""])
    with pytest.raises(ConfigError, match=r"'/d' appears more than once"):
        ValidList(unique=True).ensure_valid("log.dirs", ["/d", "/d"])
    ValidList().ensure_valid("l", ["a", "a"])


# --- keys and definitions ---------------------------------------------------------------


def test_a_default_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"k"):
        ConfigKey("k", ConfigType.INT, "1")
    with pytest.raises(ConfigError, match=r"k"):
        ConfigKey("k", ConfigType.INT, True)
    with pytest.raises(ConfigError, match=r"k"):
        ConfigKey("k", ConfigType.INT, 2**31)


def test_a_default_the_validator_refuses_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"k.*at least 1"):
        ConfigKey("k", ConfigType.INT, 0, Range.at_least(1))


def _definition() -> ConfigDef:
    return ConfigDef(
        [
            ConfigKey("node.id", ConfigType.INT, REQUIRED, Range.at_least(0)),
            ConfigKey("num.partitions", ConfigType.INT, 1, Range.at_least(1)),
            ConfigKey("log.dirs", ConfigType.LIST, None),
            ConfigKey("flag", ConfigType.BOOLEAN, False),
        ]
    )


def test_parse_fills_defaults_and_returns_unknown_keys_in_order() -> None:
    values, unknown = _definition().parse(
        {"zeta.unknown": "1", "node.id": "7", "alpha.unknown": "x", "flag": "TRUE"}
    )
    assert values == {"node.id": 7, "num.partitions": 1, "log.dirs": None, "flag": True}
    assert unknown == ["zeta.unknown", "alpha.unknown"]


def test_parse_missing_required_key_names_it() -> None:
    with pytest.raises(ConfigError, match=r"Missing required configuration node.id"):
        _definition().parse({"num.partitions": "3"})


def test_parse_invalid_value_names_key_value_and_rule() -> None:
    with pytest.raises(ConfigError) as info:
        _definition().parse({"node.id": "1", "num.partitions": "0"})
    assert str(info.value) == (
        "Invalid value 0 for configuration num.partitions: Value must be at least 1"
    )


def test_definition_refuses_a_name_twice_and_unknown_names() -> None:
    definition = _definition()
    with pytest.raises(ConfigError, match=r"defined twice"):
        definition.define(ConfigKey("flag", ConfigType.BOOLEAN, True))
    with pytest.raises(ConfigError, match=r"Unknown configuration nope"):
        definition.parse_value("nope", "1")
    assert definition.parse_value("num.partitions", "4") == 4
    assert "flag" in definition
    assert definition.names() == ["node.id", "num.partitions", "log.dirs", "flag"]
    assert definition["node.id"].required
    assert definition.default_values()["num.partitions"] == 1
