"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs: the config requests.

This module owns the broker's answers about configuration:

* DescribeConfigs (v0-4) for topics (every topic key with its effective value, source and
  synonyms, from :func:`~odradek.broker.topic_config.effective_topic_config`) and for
  brokers (this node's :class:`~odradek.broker.server_config.ServerConfig`, or the dynamic
  cluster defaults for the resource named ""), with Kafka's per-resource errors;
* AlterConfigs (v0-2) and IncrementalAlterConfigs (v0-1) for topics and brokers, decided
  by the controller's pure commands (``odradek.controller.config_commands``) and answered once
  their ConfigRecords are committed (``CommitRecords``), so a client that was told a
  config changed reads it back at once.

Dynamic broker configs are accepted only for the keys whose sole effect is as the default
of a topic config (:data:`~odradek.broker.topic_config.DYNAMIC_BROKER_TOPIC_KEYS`:
``log.retention.ms``, ``log.segment.bytes``, ``message.max.bytes`` ...) and for the
reassignment throttle (``follower.replication.throttled.rate``), for this broker
(its id) or as the cluster default (""); the node applies them as it resolves each topic's
settings. Any other broker key is refused with POLICY_VIOLATION: nothing on this node
would apply it to the running sockets or threads, so accepting one would make
DescribeConfigs report a value the broker does not use. Those keys are set in
``server.properties`` and take effect at restart.

The handlers take the ServerConfig as an explicit argument: BrokerState holds only what
the other handlers need.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final, Protocol, TypeVar

from odradek.broker.authorization import allowed
from odradek.broker.cleaner_settings import LOG_CLEANER_KEYS
from odradek.broker.config_entries import ConfigEntry, ConfigSource, ConfigSynonym
from odradek.broker.effects import CommitRecords, Outcome, Reply
from odradek.broker.router import Request
from odradek.broker.server_config import ServerConfig
from odradek.broker.server_keys import SERVER_CONFIG_DEF
from odradek.broker.state import BrokerState
from odradek.broker.topic_config import (
    DYNAMIC_BROKER_TOPIC_KEYS,
    REPLICATION_THROTTLE_KEYS,
    TOPIC_CONFIG_DEF,
    effective_topic_config,
    validate_dynamic_broker_configs,
    validate_topic_overrides,
)
from odradek.controller.config_commands import (
    ConfigOutcome,
    ConfigSchema,
    alter_broker_configs,
    alter_topic_configs,
    incremental_alter_broker_configs,
    incremental_alter_topic_configs,
)
from odradek.controller.image import CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC
from odradek.controller.offline_log_dirs import OFFLINE_LOG_DIRS_CONFIG
from odradek.controller.topics import topic_name_problem
from odradek.core.config_keys import ConfigType
from odradek.core.errors import ConfigError
from odradek.protocol.api import RequestHeader
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from odradek.protocol.messages import alter_configs_response as legacy
from odradek.protocol.messages import incremental_alter_configs_response as incremental
from odradek.protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from odradek.protocol.metadata import ConfigRecord
from odradek.security.acls import AclOperation, ResourceType
from odradek.security.ssl_keys import dynamic_ssl_key

__all__ = [
    "ALTER_CONFIGS_VERSIONS",
    "DESCRIBE_CONFIGS_VERSIONS",
    "INCREMENTAL_ALTER_CONFIGS_VERSIONS",
    "broker_config_entries",
    "broker_schema",
    "handle_alter_configs",
    "handle_describe_configs",
    "handle_incremental_alter_configs",
    "topic_config_entries",
    "topic_schema",
]

DESCRIBE_CONFIGS_VERSIONS: Final = (0, 4)
ALTER_CONFIGS_VERSIONS: Final = (0, 2)
INCREMENTAL_ALTER_CONFIGS_VERSIONS: Final = (0, 1)

RESOURCE_BROKER_LOGGER: Final = 8
_SYNONYMS_VERSION: Final = 1
_DOCUMENTATION_VERSION: Final = 3

# Kafka's DynamicBrokerConfig.brokerConfigSynonyms: broker keys that set the same value
# in different units, in order of precedence. Every other key is its own only synonym.
_BROKER_SYNONYM_GROUPS: Final = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)
_BROKER_SYNONYMS: Final[Mapping[str, tuple[str, ...]]] = {
    **{name: group for group in _BROKER_SYNONYM_GROUPS for name in group},
    # The scheduler interval is only the fallback of log.flush.interval.ms, not the reverse.
    "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
}


# ---------------------------------------------------------------------------------------
# Describe
# ---------------------------------------------------------------------------------------


def _dynamic_layers(state: BrokerState) -> tuple[Mapping[str, str], Mapping[str, str]]:
    """This broker's dynamic configs and the dynamic cluster defaults, from the image."""
    configs = state.image.configs
    node = str(state.settings.node_id)
    return (
        configs.get((CONFIG_RESOURCE_BROKER, node), {}),
        configs.get((CONFIG_RESOURCE_BROKER, ""), {}),
    )


def topic_config_entries(
    state: BrokerState, server: ServerConfig, topic: str, *, include_synonyms: bool = True
) -> list[ConfigEntry]:
    """Every config of ``topic`` as this node resolves it; ConfigError for a bad override."""
    dynamic_broker, dynamic_default = _dynamic_layers(state)
    image_topic = state.image.topics_by_name.get(topic)
    replication_factor = None
    if image_topic is not None and 0 in image_topic.partitions:
        replication_factor = len(image_topic.partitions[0].replicas)
    return effective_topic_config(
        server,
        state.image.configs.get((CONFIG_RESOURCE_TOPIC, topic), {}),
        dynamic_broker=dynamic_broker,
        dynamic_default_broker=dynamic_default,
        replication_factor=replication_factor,
        include_synonyms=include_synonyms,
    )


def _broker_synonyms(
    name: str,
    server: ServerConfig,
    dynamic_broker: Mapping[str, str],
    dynamic_default: Mapping[str, str],
    sensitive: bool,
) -> list[ConfigSynonym]:
    """Kafka's ``configSynonyms``: by source (dynamic, cluster default, static, default),
    then by synonym order, cut before the first entry named ``name``."""
    names = _BROKER_SYNONYMS.get(name, (name,))
    defaults: dict[str, str] = {}
    for synonym in names:
        key = SERVER_CONFIG_DEF.get(synonym)
        if key is not None and key.default_value is not None:
            text = key.format(key.default_value)
            if text is not None:
                defaults[synonym] = text
    found: list[ConfigSynonym] = []
    for layer, source in (
        (dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
        (dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (server.originals, ConfigSource.STATIC_BROKER_CONFIG),
        (defaults, ConfigSource.DEFAULT_CONFIG),
    ):
        for synonym_name in names:
            if synonym_name in layer:
                value = None if sensitive else layer[synonym_name]
                found.append(ConfigSynonym(synonym_name, value, source))
    # Kafka drops the synonyms ahead of the key itself (dropWhile), so describing
    # log.retention.hours does not report a log.retention.ms that overrides it.
    for index, entry in enumerate(found):
        if entry.name == name:
            return found[index:]
    return []


def broker_config_entries(
    state: BrokerState, server: ServerConfig, *, per_broker: bool = True
) -> list[ConfigEntry]:
    """The configs of this broker (``per_broker``) or the dynamic cluster defaults.

    For this broker: every server key, with its value as the broker uses it and the
    source it came from. For the cluster defaults (the resource named ""): only the keys
    set as dynamic cluster defaults, as Kafka lists them. Entries are sorted by name.
    """
    dynamic_broker, dynamic_default = _dynamic_layers(state)
    if per_broker:
        names = sorted(SERVER_CONFIG_DEF.names())
        layer_broker: Mapping[str, str] = dynamic_broker
    else:
        names = sorted(dynamic_default)
        layer_broker = {}
    entries: list[ConfigEntry] = []
    for name in names:
        key = SERVER_CONFIG_DEF.get(name)
        # A key we cannot type might be a secret: Kafka reports such keys as sensitive.
        sensitive = key is None or key.type is ConfigType.PASSWORD
        synonyms = _broker_synonyms(name, server, layer_broker, dynamic_default, sensitive)
        if not per_broker:
            # Kafka's ConfigHelper: the cluster default lists only its own layer.
            synonyms = [
                s for s in synonyms if s.source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            ]
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        # After the cut above, the first synonym (if any) is the key's own value.
        own = synonyms[0] if synonyms else None
        value: str | None
        if sensitive:
            value = None
        elif own is not None and own.source in (
            ConfigSource.DYNAMIC_BROKER_CONFIG,
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        ):
            value = own.value
        elif key is not None and own is not None:
            # Static and default values are reported as the broker parsed them.
            value = key.format(server.values.get(name))
        else:
            value = None
        entries.append(
            ConfigEntry(
                name=name,
                value=value,
                source=source,
                is_default=source is ConfigSource.DEFAULT_CONFIG,
                # Only the topic-default keys can be changed at run time here (see the
                # module doc); a tool that offers to edit another should not be told so.
                read_only=name not in DYNAMIC_BROKER_TOPIC_KEYS | REPLICATION_THROTTLE_KEYS,
                sensitive=sensitive,
                synonyms=tuple(synonyms),
                config_type=key.type if key is not None else None,
                documentation=key.doc if key is not None else "",
            )
        )
    return entries


def _entry_result(
    entry: ConfigEntry, version: int, include_synonyms: bool, include_documentation: bool
) -> DescribeConfigsResourceResult:
    # Each field is set only in the versions that carry it: the encoder refuses a
    # non-default value in a version without the field.
    result = DescribeConfigsResourceResult(
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        is_sensitive=entry.sensitive,
    )
    if version == 0:
        result.is_default = entry.is_default
    else:
        result.config_source = int(entry.source)
        if include_synonyms:
            result.synonyms = [
                DescribeConfigsSynonym(
                    name=s.name,
                    value=None if entry.sensitive else s.value,
                    source=int(s.source),
                )
                for s in entry.synonyms
            ]
    if version >= _DOCUMENTATION_VERSION:
        result.config_type = int(entry.config_type) if entry.config_type is not None else 0
        result.documentation = entry.documentation if include_documentation else None
    return result


def _controller_written_entries(state: BrokerState, name: str) -> list[ConfigEntry]:
    """The configs the controller writes for broker ``name`` (today the record of its
    failed log dirs), read from the metadata log: any node can answer them, also for a
    broker that has stopped, which is when an operator asks."""
    value = state.image.configs.get((CONFIG_RESOURCE_BROKER, name), {}).get(OFFLINE_LOG_DIRS_CONFIG)
    if value is None:
        return []
    return [
        ConfigEntry(
            name=OFFLINE_LOG_DIRS_CONFIG,
            value=value,
            source=ConfigSource.DYNAMIC_BROKER_CONFIG,
            is_default=False,
            read_only=True,
            sensitive=False,
            synonyms=(
                ConfigSynonym(OFFLINE_LOG_DIRS_CONFIG, value, ConfigSource.DYNAMIC_BROKER_CONFIG),
            ),
            config_type=ConfigType.LIST,
            documentation="The log dirs of this broker that failed (written by the controller).",
        )
    ]


def _other_broker(state: BrokerState, name: str) -> bool:
    """Whether ``name`` is another registered broker's id. Kafka answers
    INVALID_REQUEST there (a broker knows only its own static configs); here such a
    broker's controller-written configs are answered, and nothing else."""
    return (
        name.isdigit() and int(name) != state.settings.node_id and int(name) in state.image.brokers
    )


def _broker_resource_problem(state: BrokerState, name: str) -> str | None:
    """Why this node cannot describe broker resource ``name`` (Kafka's messages), or None."""
    if name == "":
        return None
    try:
        broker_id = int(name)
    except ValueError:
        return f"Broker id must be an integer, but it is: {name}"
    node_id = state.settings.node_id
    if broker_id != node_id:
        return f"Unexpected broker id, expected {node_id} or empty string, but received {name}"
    return None


def handle_describe_configs(
    state: BrokerState,
    server: ServerConfig,
    header: RequestHeader,
    request: DescribeConfigsRequest,
) -> Outcome:
    version = header.request_api_version
    include_synonyms = request.include_synonyms and version >= _SYNONYMS_VERSION
    include_documentation = request.include_documentation and version >= _DOCUMENTATION_VERSION
    results: list[DescribeConfigsResult] = []
    for resource in request.resources:
        result = DescribeConfigsResult(
            error_code=ErrorCode.NONE,
            error_message=None,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        )
        results.append(result)
        entries: list[ConfigEntry]
        kind = resource.resource_type
        if kind in (CONFIG_RESOURCE_TOPIC, CONFIG_RESOURCE_BROKER) and not _may(
            state, header, AclOperation.DESCRIBE_CONFIGS, kind, resource.resource_name
        ):
            result.error_code = _denied(kind)
            result.error_message = "Authorization failed."
            continue
        if resource.resource_type == CONFIG_RESOURCE_TOPIC:
            # Kafka's Topic.validate: an empty name is an invalid topic here, where the
            # alter APIs call it a (refused) cluster-wide topic default.
            problem = topic_name_problem(resource.resource_name)
            if problem is not None:
                result.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
                result.error_message = problem
                continue
            if resource.resource_name not in state.image.topics_by_name:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                result.error_message = f"The topic '{resource.resource_name}' does not exist."
                continue
            try:
                entries = topic_config_entries(state, server, resource.resource_name)
            except ConfigError as e:
                # Only a stored override this build no longer accepts can get here.
                result.error_code = ErrorCode.INVALID_CONFIG
                result.error_message = str(e)
                continue
        elif resource.resource_type == CONFIG_RESOURCE_BROKER:
            name = resource.resource_name
            message = _broker_resource_problem(state, name)
            if message is not None and not _other_broker(state, name):
                result.error_code = ErrorCode.INVALID_REQUEST
                result.error_message = message
                continue
            entries = _controller_written_entries(state, name)
            if message is None:
                entries = sorted(
                    [*broker_config_entries(state, server, per_broker=name != ""), *entries],
                    key=lambda e: e.name,
                )
        else:
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = _unsupported_type_message(resource.resource_type)
            continue
        # Kafka treats a null and an empty key list alike: every key.
        keys = resource.configuration_keys
        if keys:
            wanted = set(keys)
            entries = [e for e in entries if e.name in wanted]
        result.configs = [
            _entry_result(e, version, include_synonyms, include_documentation) for e in entries
        ]
    return Reply(DescribeConfigsResponse(results=results))


def _may(
    state: BrokerState, header: RequestHeader, operation: AclOperation, kind: int, name: str
) -> bool:
    """A topic's configs are the topic's; a broker's (and the cluster default's) are the
    cluster's, as Kafka authorizes them."""
    if kind == CONFIG_RESOURCE_TOPIC:
        return allowed(state, header, operation, ResourceType.TOPIC, name)
    return allowed(state, header, operation)


def _denied(kind: int) -> ErrorCode:
    if kind == CONFIG_RESOURCE_TOPIC:
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def _unsupported_type_message(resource_type: int) -> str:
    if resource_type == RESOURCE_BROKER_LOGGER:
        return "BROKER_LOGGER resources are not supported: log levels are set at start-up"
    return f"Unsupported resource type: {resource_type}"


# ---------------------------------------------------------------------------------------
# Alter
# ---------------------------------------------------------------------------------------

_LIST_DEFAULTS: Final[Mapping[str, str]] = {
    key.name: key.format(key.default_value) or ""
    for key in TOPIC_CONFIG_DEF
    if key.type is ConfigType.LIST
}


def topic_schema(server: ServerConfig) -> ConfigSchema:
    """The topic config table, in the shape the controller's commands need."""

    def validate(configs: dict[str, str]) -> object:
        return validate_topic_overrides(configs, server)

    return ConfigSchema(validate=validate, list_defaults=_LIST_DEFAULTS)


_BROKER_LIST_DEFAULTS: Final[Mapping[str, str]] = {
    name: SERVER_CONFIG_DEF[name].format(SERVER_CONFIG_DEF[name].default_value) or ""
    for name in sorted(DYNAMIC_BROKER_TOPIC_KEYS)
    if SERVER_CONFIG_DEF[name].type is ConfigType.LIST
}


def broker_schema() -> ConfigSchema:
    """The dynamic broker keys, in the shape the controller's commands need."""

    def validate(configs: dict[str, str]) -> object:
        # The controller's own record is not a client's setting to check (clients cannot
        # set it: it is no dynamic broker key).
        configs = {k: v for k, v in configs.items() if k != OFFLINE_LOG_DIRS_CONFIG}
        return validate_dynamic_broker_configs(configs)

    return ConfigSchema(
        validate=validate,
        list_defaults=_BROKER_LIST_DEFAULTS,
    )


def _broker_refusal(
    state: BrokerState, header: RequestHeader, name: str, keys: Sequence[str]
) -> ConfigOutcome | None:
    """Why a broker resource in AlterConfigs or IncrementalAlterConfigs is refused before
    the controller's command sees it (see the module doc), or None."""
    forwarded = isinstance(header, Request) and header.forwarded
    if name != "" and not forwarded:  # the broker named checked it before forwarding
        try:
            broker_id = int(name)
        except ValueError:
            return ConfigOutcome(
                ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}"
            )
        node_id = state.settings.node_id
        if broker_id != node_id:
            return ConfigOutcome(
                ErrorCode.INVALID_REQUEST,
                f"Unexpected node id. Expected {node_id}, but received {name}",
            )
    if len(set(keys)) != len(keys):
        return ConfigOutcome(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    stores = {k for k in keys if dynamic_ssl_key(k) is not None}
    if stores and name == "":
        return ConfigOutcome(
            ErrorCode.POLICY_VIOLATION,
            "A listener's key and trust stores are set per broker, not as a cluster "
            "default: " + ", ".join(sorted(stores)),
        )
    static = sorted(
        set(keys)
        - DYNAMIC_BROKER_TOPIC_KEYS
        - REPLICATION_THROTTLE_KEYS
        - LOG_CLEANER_KEYS
        - stores
    )
    if not static:
        return None
    return ConfigOutcome(
        ErrorCode.POLICY_VIOLATION,
        "Only the broker defaults of topic configs, follower.replication.throttled.rate, "
        "the log cleaner's threads, dedupe buffer, I/O rate and backoff, "
        "and a listener's key and trust stores (listener.name.<listener>.ssl.keystore.*, "
        "ssl.truststore.*, ssl.key.password) can be changed dynamically: set "
        + ", ".join(static)
        + " in server.properties and restart the node",
    )


def _stores_checked(state: BrokerState, name: str, outcome: ConfigOutcome) -> ConfigOutcome:
    """``outcome``, or INVALID_CONFIG when it would give a listener a key or trust store
    this broker cannot load: the new stores are loaded (as the broker will once the
    record is applied) before anything is committed, as Kafka validates a reconfiguration."""
    touched = {found[0] for r in outcome.records if (found := dynamic_ssl_key(r.name)) is not None}
    if not touched:
        return outcome
    proposed = dict(state.image.configs.get((CONFIG_RESOURCE_BROKER, name), {}))
    for record in outcome.records:
        if record.value is None:
            proposed.pop(record.name, None)
        else:
            proposed[record.name] = record.value
    for listener in sorted(touched):
        problem = state.validate_listener_tls(listener, proposed)
        if problem is not None:
            return ConfigOutcome(ErrorCode.INVALID_CONFIG, problem)
    return outcome


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class _AlterResource(Protocol):
    """What the two APIs' resource classes share."""

    @property
    def resource_type(self) -> int: ...

    @property
    def resource_name(self) -> str: ...

    @property
    def configs(self) -> Sequence[_Named]: ...


R = TypeVar("R", bound=_AlterResource)


def _duplicates(resources: Sequence[_AlterResource]) -> set[tuple[int, str]]:
    seen: set[tuple[int, str]] = set()
    repeated: set[tuple[int, str]] = set()
    for resource in resources:
        key = (resource.resource_type, resource.resource_name)
        (repeated if key in seen else seen).add(key)
    return repeated


def _finish(
    response: AlterConfigsResponse | IncrementalAlterConfigsResponse,
    records: list[ConfigRecord],
    validate_only: bool,
) -> Outcome:
    if validate_only or not records:
        return Reply(response)
    return CommitRecords(list(records), lambda: Reply(response))


def _alter(
    state: BrokerState,
    header: RequestHeader,
    resources: Sequence[R],
    topic_command: Callable[[R], ConfigOutcome],
    broker_command: Callable[[R], ConfigOutcome],
) -> tuple[list[tuple[int, str, ConfigOutcome]], list[ConfigRecord]]:
    """Shared by both alter APIs: one outcome per resource and all the records."""
    repeated = _duplicates(resources)
    outcomes: list[tuple[int, str, ConfigOutcome]] = []
    records: list[ConfigRecord] = []
    for resource in resources:
        kind, name = resource.resource_type, resource.resource_name
        if (kind, name) in repeated:
            outcome = ConfigOutcome(
                ErrorCode.INVALID_REQUEST, "Each resource must appear at most once."
            )
        elif kind in (CONFIG_RESOURCE_TOPIC, CONFIG_RESOURCE_BROKER) and not _may(
            state, header, AclOperation.ALTER_CONFIGS, kind, name
        ):
            outcome = ConfigOutcome(_denied(kind), "Authorization failed.")
        elif kind == CONFIG_RESOURCE_TOPIC:
            outcome = topic_command(resource)
        elif kind == CONFIG_RESOURCE_BROKER:
            refusal = _broker_refusal(state, header, name, [c.name for c in resource.configs])
            outcome = broker_command(resource) if refusal is None else refusal
            forwarded = isinstance(header, Request) and header.forwarded
            if refusal is None and outcome.error_code == ErrorCode.NONE and not forwarded:
                outcome = _stores_checked(state, name, outcome)
        else:
            outcome = ConfigOutcome(ErrorCode.INVALID_REQUEST, _unsupported_type_message(kind))
        outcomes.append((kind, name, outcome))
        records += outcome.records
    return outcomes, records


def handle_alter_configs(
    state: BrokerState,
    server: ServerConfig,
    header: RequestHeader,
    request: AlterConfigsRequest,
) -> Outcome:
    schema, brokers = topic_schema(server), broker_schema()
    outcomes, records = _alter(
        state,
        header,
        request.resources,
        lambda r: alter_topic_configs(
            state.image, r.resource_name, [(c.name, c.value) for c in r.configs], schema
        ),
        lambda r: alter_broker_configs(
            state.image, r.resource_name, [(c.name, c.value) for c in r.configs], brokers
        ),
    )
    response = AlterConfigsResponse(
        responses=[
            legacy.AlterConfigsResourceResponse(
                error_code=o.error_code,
                error_message=o.error_message,
                resource_type=kind,
                resource_name=name,
            )
            for kind, name, o in outcomes
        ]
    )
    return _finish(response, records, request.validate_only)


def handle_incremental_alter_configs(
    state: BrokerState,
    server: ServerConfig,
    header: RequestHeader,
    request: IncrementalAlterConfigsRequest,
) -> Outcome:
    schema, brokers = topic_schema(server), broker_schema()
    outcomes, records = _alter(
        state,
        header,
        request.resources,
        lambda r: incremental_alter_topic_configs(
            state.image,
            r.resource_name,
            [(c.name, c.config_operation, c.value) for c in r.configs],
            schema,
        ),
        lambda r: incremental_alter_broker_configs(
            state.image,
            r.resource_name,
            [(c.name, c.config_operation, c.value) for c in r.configs],
            brokers,
        ),
    )
    response = IncrementalAlterConfigsResponse(
        responses=[
            incremental.AlterConfigsResourceResponse(
                error_code=o.error_code,
                error_message=o.error_message,
                resource_type=kind,
                resource_name=name,
            )
            for kind, name, o in outcomes
        ]
    )
    return _finish(response, records, request.validate_only)
