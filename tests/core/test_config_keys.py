"""Config keys: Kafka's type rules, validators, tables, and keys declared as attributes."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from odradek.core.config_keys import (
    REQUIRED,
    BoolKey,
    ConfigDef,
    ConfigKey,
    ConfigType,
    ConfigValue,
    DoubleKey,
    Importance,
    IntKey,
    ListKey,
    LongKey,
    NonEmptyString,
    OneOf,
    OptionalIntKey,
    OptionalListKey,
    OptionalLongKey,
    OptionalStringKey,
    Password,
    Range,
    Setting,
    ShortKey,
    StringKey,
    ValidList,
    config_def_of,
    format_value,
    parse_value,
)
from odradek.core.errors import ConfigError

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


# --- keys declared as attributes ---------------------------------------------------------


class _Declared:
    """A config class as the server's is built: one attribute per key."""

    retries = IntKey("retries", 3, "Retries.", validator=Range.at_least(0))
    size_bytes = LongKey("size.bytes", REQUIRED, "Size.", importance=Importance.HIGH)
    width = ShortKey("width", 2, "Width.")
    enabled = BoolKey("enabled", True, "On.", dynamic=True)
    ratio = DoubleKey("ratio", 0.5, "Ratio.", validator=Range.between(0, 1))
    label = StringKey("label", "x", "Label.", validator=OneOf("x", "y"))
    hosts = ListKey("hosts", [], "Hosts.")
    count = OptionalIntKey("count", None, "Count.")
    timeout_ms = OptionalLongKey("timeout.ms", None, "Timeout.")
    rack = OptionalStringKey("rack", None, "Rack.")
    dirs = OptionalListKey("dirs", None, "Dirs.")

    def __init__(self, raw: Mapping[str, str]) -> None:
        self._values, _ = config_def_of(_Declared).parse(raw)

    @property
    def values(self) -> Mapping[str, ConfigValue]:
        return self._values


class _Values:
    """Hand-made values, to show what reading a value of the wrong type does."""

    retries = IntKey("retries", 3, "Retries.")

    def __init__(self, values: Mapping[str, ConfigValue]) -> None:
        self.values = values


def test_declarations_make_the_table_in_declaration_order() -> None:
    table = config_def_of(_Declared)
    assert table.names() == [
        "retries",
        "size.bytes",
        "width",
        "enabled",
        "ratio",
        "label",
        "hosts",
        "count",
        "timeout.ms",
        "rack",
        "dirs",
    ]
    assert [k.type for k in table] == [
        ConfigType.INT,
        ConfigType.LONG,
        ConfigType.SHORT,
        ConfigType.BOOLEAN,
        ConfigType.DOUBLE,
        ConfigType.STRING,
        ConfigType.LIST,
        ConfigType.INT,
        ConfigType.LONG,
        ConfigType.STRING,
        ConfigType.LIST,
    ]
    assert table["retries"] == ConfigKey(
        "retries", ConfigType.INT, 3, Range.at_least(0), Importance.MEDIUM, "Retries."
    )
    assert table["size.bytes"].required and table["size.bytes"].importance is Importance.HIGH
    assert table["enabled"].dynamic and not table["retries"].dynamic
    assert table["count"].default_value is None


def test_on_the_class_an_attribute_is_its_declaration() -> None:
    setting = _Declared.timeout_ms
    assert isinstance(setting, Setting)
    assert (setting.name, setting.attribute) == ("timeout.ms", "timeout_ms")
    assert config_def_of(_Declared)["timeout.ms"] is setting.key


def test_on_an_instance_an_attribute_is_its_typed_value() -> None:
    declared = _Declared({"size.bytes": "10", "hosts": "a, b", "timeout.ms": "7", "ratio": "1"})
    assert declared.retries == 3 and declared.size_bytes == 10 and declared.width == 2
    assert declared.enabled is True and declared.label == "x"
    assert declared.ratio == 1.0 and isinstance(declared.ratio, float)
    assert declared.hosts == ["a", "b"]
    assert declared.timeout_ms == 7
    assert (declared.count, declared.rack, declared.dirs) == (None, None, None)


def test_parsing_through_the_declarations_keeps_every_rule() -> None:
    with pytest.raises(
        ConfigError, match=r"^Missing required configuration size.bytes which has no default"
    ):
        _Declared({})
    with pytest.raises(ConfigError, match=r"^Invalid value -1 for configuration retries: "):
        _Declared({"size.bytes": "1", "retries": "-1"})
    with pytest.raises(ConfigError, match=r"^Invalid value 'z' for configuration label: "):
        _Declared({"size.bytes": "1", "label": "z"})


def test_a_declared_key_cannot_be_assigned() -> None:
    declared = _Declared({"size.bytes": "1"})
    with pytest.raises(AttributeError, match=r"^retries is read-only; cannot set retries$"):
        declared.retries = 4  # type: ignore[assignment]
    assert declared.retries == 3


def test_a_value_of_another_type_is_refused_when_read() -> None:
    with pytest.raises(ConfigError, match=r"^configuration retries has no integer value$"):
        _ = _Values({"retries": "5"}).retries
    with pytest.raises(ConfigError, match=r"^configuration retries has no integer value$"):
        _ = _Values({"retries": True}).retries


def test_a_kind_that_does_not_fit_its_default_fails_when_declared() -> None:
    with pytest.raises(ConfigError, match=r"^configuration x: IntKey needs a default or REQUIRED"):
        IntKey("x", None, "")
    with pytest.raises(ConfigError, match=r"^configuration x: OptionalIntKey has no default"):
        OptionalIntKey("x", 3, "")
    with pytest.raises(ConfigError, match=r"^default '3' of configuration x is not of type INT"):
        IntKey("x", "3", "")
    with pytest.raises(ConfigError, match=r"^Invalid value 0 for configuration x: "):
        IntKey("x", 0, "", validator=Range.at_least(1))


def test_a_subclass_declares_after_its_bases_and_never_a_name_twice() -> None:
    class More(_Declared):
        extra = IntKey("extra", 1, "Extra.")

    assert config_def_of(More).names()[-2:] == ["dirs", "extra"]

    class Twice(_Declared):
        again = IntKey("retries", 1, "Again.")

    with pytest.raises(ConfigError, match=r"^configuration retries is defined twice$"):
        config_def_of(Twice)
