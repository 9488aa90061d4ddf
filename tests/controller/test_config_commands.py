"""Topic config commands: resource checks, full replacement, incremental operations,
validation of the resulting set, and records that replay to exactly the intended configs."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.controller.config_commands import (
    ConfigSchema,
    OpType,
    alter_broker_configs,
    alter_topic_configs,
    check_broker_resource,
    check_topic_resource,
    incremental_alter_broker_configs,
    incremental_alter_topic_configs,
)
from odradek.controller.image import CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC, MetadataImage
from odradek.core.errors import ConfigError
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.metadata import ConfigRecord, TopicRecord

TOPIC = "orders"
KNOWN = {"retention.ms", "segment.bytes", "cleanup.policy", "throttled", "flag"}


def _validate(configs: dict[str, str]) -> object:
    # A small stand-in for the broker's topic table: known keys, integer values for
    # the ".ms"/".bytes" keys, list items from a fixed set for cleanup.policy.
    for key, value in configs.items():
        if key not in KNOWN:
            raise ConfigError(f"Unknown topic config name: {key}")
        if key.endswith((".ms", ".bytes")) and not value.lstrip("-").isdigit():
            raise ConfigError(f"Invalid value {value} for configuration {key}: not a number")
        if key == "cleanup.policy":
            for item in value.split(","):
                if item not in ("delete", "compact"):
                    raise ConfigError(f"Invalid value {value} for configuration {key}: {item}")
    return configs


SCHEMA = ConfigSchema(
    validate=_validate, list_defaults={"cleanup.policy": "delete", "throttled": ""}
)


def image_with(configs: dict[str, str] | None = None) -> MetadataImage:
    image = MetadataImage()
    image.replay(TopicRecord(name=TOPIC, topic_id=uuid.UUID(int=5)), 0)
    for key, value in sorted((configs or {}).items()):
        image.replay(
            ConfigRecord(
                resource_type=CONFIG_RESOURCE_TOPIC, resource_name=TOPIC, name=key, value=value
            ),
            image.offset + 1,
        )
    return image


def applied(image: MetadataImage, records: list[ConfigRecord]) -> dict[str, str]:
    for record in records:
        image.replay(record, image.offset + 1)
    return image.configs.get((CONFIG_RESOURCE_TOPIC, TOPIC), {})


def changes(records: list[ConfigRecord]) -> list[tuple[str, str | None]]:
    assert all(
        r.resource_type == CONFIG_RESOURCE_TOPIC and r.resource_name == TOPIC for r in records
    )
    return [(r.name, r.value) for r in records]


# --- the resource -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "code", "message"),
    [
        ("", ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed."),
        ("bad/name", ErrorCode.INVALID_TOPIC_EXCEPTION, "characters other than"),
        ("..", ErrorCode.INVALID_TOPIC_EXCEPTION, "cannot be"),
        ("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'missing' does not exist."),
    ],
)
def test_a_resource_that_is_not_an_existing_topic_is_refused(
    name: str, code: ErrorCode, message: str
) -> None:
    image = image_with()
    problem = check_topic_resource(image, name)
    assert problem is not None
    assert problem.error_code == code
    assert message in (problem.error_message or "")
    for outcome in (
        alter_topic_configs(image, name, [("retention.ms", "1")], SCHEMA),
        incremental_alter_topic_configs(image, name, [("retention.ms", 0, "1")], SCHEMA),
    ):
        assert (outcome.error_code, outcome.records) == (code, [])
    assert check_topic_resource(image, TOPIC) is None


# --- AlterConfigs: replace the whole set ----------------------------------------------------


def test_alter_replaces_the_whole_set_with_records_for_changes_only() -> None:
    image = image_with({"retention.ms": "1000", "segment.bytes": "2048", "flag": "x"})
    outcome = alter_topic_configs(
        image,
        TOPIC,
        [("retention.ms", "1000"), ("segment.bytes", "4096"), ("throttled", "*")],
        SCHEMA,
    )
    assert outcome.error_code == ErrorCode.NONE
    # retention.ms is unchanged (no record); flag was not named, so it is deleted.
    assert changes(outcome.records) == [
        ("flag", None),
        ("segment.bytes", "4096"),
        ("throttled", "*"),
    ]
    assert applied(image, outcome.records) == {
        "retention.ms": "1000",
        "segment.bytes": "4096",
        "throttled": "*",
    }


def test_alter_with_nothing_clears_every_override() -> None:
    image = image_with({"retention.ms": "1000", "flag": "x"})
    outcome = alter_topic_configs(image, TOPIC, [], SCHEMA)
    assert changes(outcome.records) == [("flag", None), ("retention.ms", None)]
    assert applied(image, outcome.records) == {}
    assert (CONFIG_RESOURCE_TOPIC, TOPIC) not in image.configs


@pytest.mark.parametrize(
    ("configs", "code", "message"),
    [
        ([("retention.ms", "abc")], ErrorCode.INVALID_CONFIG, "retention.ms"),
        (
            [("no.such.key", "1")],
            ErrorCode.INVALID_CONFIG,
            "Unknown topic config name: no.such.key",
        ),
        ([("retention.ms", None)], ErrorCode.INVALID_CONFIG, "Null value not supported"),
        (
            [("retention.ms", "1"), ("retention.ms", "2")],
            ErrorCode.INVALID_REQUEST,
            "duplicate config keys: retention.ms",
        ),
    ],
)
def test_alter_refuses_bad_entries_and_changes_nothing(
    configs: list[tuple[str, str | None]], code: ErrorCode, message: str
) -> None:
    outcome = alter_topic_configs(image_with({"flag": "x"}), TOPIC, configs, SCHEMA)
    assert outcome.error_code == code
    assert message in (outcome.error_message or "")
    assert outcome.records == []


@given(
    before=st.dictionaries(st.sampled_from(sorted(KNOWN - {"cleanup.policy"})), st.just("7")),
    after=st.dictionaries(
        st.sampled_from(sorted(KNOWN - {"cleanup.policy"})), st.sampled_from(["7", "8"])
    ),
)
def test_alter_records_replay_to_exactly_the_requested_set(
    before: dict[str, str], after: dict[str, str]
) -> None:
    image = image_with(before)
    outcome = alter_topic_configs(image, TOPIC, sorted(after.items()), SCHEMA)
    assert outcome.error_code == ErrorCode.NONE
    assert len(outcome.records) == len(
        {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    )
    assert applied(image, outcome.records) == after


# --- IncrementalAlterConfigs --------------------------------------------------------------


def test_set_and_delete_change_only_the_named_keys() -> None:
    image = image_with({"retention.ms": "1000", "flag": "x"})
    outcome = incremental_alter_topic_configs(
        image,
        TOPIC,
        [
            ("retention.ms", OpType.SET, "5"),
            ("flag", OpType.DELETE, None),
            ("throttled", 1, "ignored"),
        ],
        SCHEMA,
    )
    assert outcome.error_code == ErrorCode.NONE
    # Deleting "throttled", which is not set, is a no-op and needs no record.
    assert changes(outcome.records) == [("flag", None), ("retention.ms", "5")]
    assert applied(image, outcome.records) == {"retention.ms": "5"}


def test_setting_the_current_value_writes_nothing() -> None:
    image = image_with({"retention.ms": "1000"})
    outcome = incremental_alter_topic_configs(image, TOPIC, [("retention.ms", 0, "1000")], SCHEMA)
    assert (outcome.error_code, outcome.records) == (ErrorCode.NONE, [])


def test_append_starts_from_the_default_and_skips_items_already_there() -> None:
    image = image_with()
    outcome = incremental_alter_topic_configs(
        image, TOPIC, [("cleanup.policy", OpType.APPEND, "compact,delete,compact")], SCHEMA
    )
    assert changes(outcome.records) == [("cleanup.policy", "delete,compact")]
    applied(image, outcome.records)
    again = incremental_alter_topic_configs(
        image, TOPIC, [("cleanup.policy", OpType.APPEND, "compact")], SCHEMA
    )
    assert (again.error_code, again.records) == (ErrorCode.NONE, [])


def test_subtract_removes_every_named_item() -> None:
    image = image_with({"cleanup.policy": "delete,compact"})
    outcome = incremental_alter_topic_configs(
        image, TOPIC, [("cleanup.policy", OpType.SUBTRACT, "delete,absent")], SCHEMA
    )
    assert changes(outcome.records) == [("cleanup.policy", "compact")]


def test_subtracting_everything_from_an_empty_default_leaves_an_empty_list() -> None:
    outcome = incremental_alter_topic_configs(
        image_with(), TOPIC, [("throttled", OpType.SUBTRACT, "1:2")], SCHEMA
    )
    assert changes(outcome.records) == [("throttled", "")]


@pytest.mark.parametrize(
    ("operations", "code", "message"),
    [
        (
            [("retention.ms", OpType.APPEND, "5")],
            ErrorCode.INVALID_CONFIG,
            "Can't APPEND to key retention.ms because its type is not LIST.",
        ),
        (
            [("flag", OpType.SUBTRACT, "x")],
            ErrorCode.INVALID_CONFIG,
            "Can't SUBTRACT to key flag because its type is not LIST.",
        ),
        ([("retention.ms", 9, "5")], ErrorCode.INVALID_REQUEST, "Unknown operation type 9"),
        ([("retention.ms", OpType.SET, None)], ErrorCode.INVALID_REQUEST, "retention.ms"),
        ([("cleanup.policy", OpType.APPEND, None)], ErrorCode.INVALID_REQUEST, "Null value"),
        (
            [("flag", OpType.SET, "a"), ("flag", OpType.DELETE, None)],
            ErrorCode.INVALID_REQUEST,
            "duplicate config keys: flag",
        ),
        ([("retention.ms", OpType.SET, "soon")], ErrorCode.INVALID_CONFIG, "retention.ms"),
        ([("cleanup.policy", OpType.APPEND, "shred")], ErrorCode.INVALID_CONFIG, "cleanup.policy"),
        ([("mystery", OpType.SET, "1")], ErrorCode.INVALID_CONFIG, "mystery"),
    ],
)
def test_incremental_refuses_bad_operations_and_changes_nothing(
    operations: list[tuple[str, int, str | None]], code: ErrorCode, message: str
) -> None:
    outcome = incremental_alter_topic_configs(image_with({"flag": "x"}), TOPIC, operations, SCHEMA)
    assert outcome.error_code == code
    assert message in (outcome.error_message or "")
    assert outcome.records == []


def test_deleting_an_unknown_key_is_harmless_but_setting_one_is_not() -> None:
    image = image_with()
    deleted = incremental_alter_topic_configs(
        image, TOPIC, [("mystery", OpType.DELETE, None)], SCHEMA
    )
    assert (deleted.error_code, deleted.records) == (ErrorCode.NONE, [])
    added = incremental_alter_topic_configs(image, TOPIC, [("mystery", OpType.SET, "1")], SCHEMA)
    assert added.error_code == ErrorCode.INVALID_CONFIG


def _refuse_stale_retention(configs: dict[str, str]) -> object:
    if configs.get("retention.ms") == "1000":
        raise ConfigError("Invalid value 1000 for configuration retention.ms: too small")
    return configs


def test_the_whole_resulting_set_is_validated() -> None:
    # A stored value the schema now refuses blocks any change until it is fixed too.
    image = image_with({"retention.ms": "1000"})
    strict = ConfigSchema(validate=_refuse_stale_retention, list_defaults={})
    blocked = incremental_alter_topic_configs(image, TOPIC, [("flag", OpType.SET, "y")], strict)
    assert blocked.error_code == ErrorCode.INVALID_CONFIG
    assert "retention.ms" in (blocked.error_message or "")
    fixed = incremental_alter_topic_configs(
        image, TOPIC, [("flag", OpType.SET, "y"), ("retention.ms", OpType.SET, "5")], strict
    )
    assert fixed.error_code == ErrorCode.NONE
    assert changes(fixed.records) == [("flag", "y"), ("retention.ms", "5")]


def _refuse_compact(configs: dict[str, str]) -> None:
    if configs.get("cleanup.policy") == "compact":
        raise ConfigError("cleanup.policy=compact is not taken")


def test_validate_changes_sees_only_the_values_a_request_changes() -> None:
    # A value this build no longer takes, already stored, neither blocks other changes nor
    # may be set anew; the legacy API naming it unchanged is no change.
    picky = ConfigSchema(
        validate=_validate,
        list_defaults={"cleanup.policy": "delete"},
        validate_changes=_refuse_compact,
    )
    stored = image_with({"cleanup.policy": "compact"})
    other = incremental_alter_topic_configs(stored, TOPIC, [("flag", OpType.SET, "y")], picky)
    assert (other.error_code, changes(other.records)) == (ErrorCode.NONE, [("flag", "y")])
    same = alter_topic_configs(stored, TOPIC, [("cleanup.policy", "compact")], picky)
    assert (same.error_code, same.records) == (ErrorCode.NONE, [])
    fresh = image_with({})
    for outcome in (
        incremental_alter_topic_configs(
            fresh, TOPIC, [("cleanup.policy", OpType.SET, "compact")], picky
        ),
        alter_topic_configs(fresh, TOPIC, [("cleanup.policy", "compact")], picky),
    ):
        assert outcome.error_code == ErrorCode.INVALID_CONFIG
        assert outcome.error_message == "cleanup.policy=compact is not taken"
        assert outcome.records == []


# --- broker resources -------------------------------------------------------------------------


def broker_image(name: str, configs: dict[str, str]) -> MetadataImage:
    image = image_with({"retention.ms": "1"})
    for key, value in sorted(configs.items()):
        image.replay(
            ConfigRecord(
                resource_type=CONFIG_RESOURCE_BROKER, resource_name=name, name=key, value=value
            ),
            image.offset + 1,
        )
    return image


@pytest.mark.parametrize("name", ["", "1", "7"])
def test_broker_alter_replaces_its_set_null_deletes_and_records_are_type_4(name: str) -> None:
    image = broker_image(name, {"retention.ms": "5", "segment.bytes": "9", "flag": "x"})
    outcome = alter_broker_configs(
        image, name, [("retention.ms", None), ("segment.bytes", "9"), ("flag", "y")], SCHEMA
    )
    assert outcome.error_code == ErrorCode.NONE
    assert [(r.resource_type, r.resource_name, r.name, r.value) for r in outcome.records] == [
        (CONFIG_RESOURCE_BROKER, name, "flag", "y"),
        (CONFIG_RESOURCE_BROKER, name, "retention.ms", None),
    ]
    for record in outcome.records:
        image.replay(record, image.offset + 1)
    assert image.configs[(CONFIG_RESOURCE_BROKER, name)] == {"segment.bytes": "9", "flag": "y"}
    # The topic of the same key is untouched.
    assert image.configs[(CONFIG_RESOURCE_TOPIC, TOPIC)] == {"retention.ms": "1"}


def test_broker_incremental_operations_on_the_broker_resource() -> None:
    image = broker_image("", {"retention.ms": "5"})
    outcome = incremental_alter_broker_configs(
        image,
        "",
        [
            ("retention.ms", OpType.DELETE, None),
            ("cleanup.policy", OpType.APPEND, "compact"),
            ("segment.bytes", OpType.SET, "10"),
        ],
        SCHEMA,
    )
    assert outcome.error_code == ErrorCode.NONE
    assert all(r.resource_type == CONFIG_RESOURCE_BROKER for r in outcome.records)
    for record in outcome.records:
        image.replay(record, image.offset + 1)
    assert image.configs[(CONFIG_RESOURCE_BROKER, "")] == {
        "cleanup.policy": "delete,compact",
        "segment.bytes": "10",
    }


@pytest.mark.parametrize(
    ("name", "entries", "code", "needle"),
    [
        ("x", [("retention.ms", "1")], ErrorCode.INVALID_REQUEST, "Node id must be an integer"),
        ("1", [("retention.ms", "1"), ("retention.ms", "2")], ErrorCode.INVALID_REQUEST, "dup"),
        ("1", [("segment.bytes", "big")], ErrorCode.INVALID_CONFIG, "segment.bytes"),
        ("", [("nope", "1")], ErrorCode.INVALID_CONFIG, "nope"),
    ],
)
def test_broker_commands_refuse_bad_entries(
    name: str, entries: list[tuple[str, str]], code: ErrorCode, needle: str
) -> None:
    image = broker_image(name, {})
    for outcome in (
        alter_broker_configs(image, name, list(entries), SCHEMA),
        incremental_alter_broker_configs(
            image, name, [(k, OpType.SET, v) for k, v in entries], SCHEMA
        ),
    ):
        assert (outcome.error_code, outcome.records) == (code, [])
        assert needle in (outcome.error_message or "")


def test_check_broker_resource() -> None:
    assert check_broker_resource("") is None
    assert check_broker_resource("3") is None
    problem = check_broker_resource("three")
    assert problem is not None and problem.error_code == ErrorCode.INVALID_REQUEST
