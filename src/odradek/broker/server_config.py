"""The server's configuration: one node's typed, validated ``server.properties``.

This module owns:

* :class:`ServerConfig`, the immutable view of one node's configuration, built from a
  properties file plus ``--override key=value`` entries (:func:`parse_overrides`). Every
  key's typed value is an attribute declared once in
  :class:`~odradek.broker.server_keys.ServerKeys`; this class adds the values Kafka
  derives (log directories, retention in ms, listeners, the security protocol map, the
  quorum voters);
* :meth:`ServerConfig.validate`, the cross-key rules Kafka's ``KafkaConfig`` enforces for
  KRaft (process roles, controller listeners, quorum voters, advertised listeners);
* :func:`majority`, our default ``min.insync.replicas`` for a replication factor.

Keys we do not know are not an error (a Kafka file carries keys for features we lack):
:attr:`ServerConfig.unknown_keys` lists them for the server to report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cached_property
from types import MappingProxyType

from odradek.broker.endpoints import (
    LISTENER_MAX_CONNECTIONS,
    NON_ROUTABLE,
    PER_LISTENER_KEYS,
    Endpoint,
    HostPort,
    Voter,
    host_port,
    listener_int,
    listener_key_name,
    parse_listeners,
    parse_per_ip_overrides,
    parse_protocol_map,
    parse_voters,
)
from odradek.broker.server_keys import BROKER_ROLE, CONTROLLER_ROLE, SERVER_CONFIG_DEF, ServerKeys
from odradek.core.config_keys import ConfigValue
from odradek.core.errors import ConfigError
from odradek.core.properties import parse_properties
from odradek.security.sasl_keys import is_sasl_key
from odradek.security.ssl_keys import effective_ssl_config, is_ssl_key

__all__ = ["ServerConfig", "majority", "parse_overrides"]


def parse_overrides(entries: Iterable[str]) -> dict[str, str]:
    """``--override key=value`` entries as a mapping; the value may itself contain ``=``.

    Kafka's launcher refuses a value with ``=`` in it; we split on the first ``=`` only,
    which accepts everything Kafka accepts.
    """
    result: dict[str, str] = {}
    for entry in entries:
        key, equals, value = entry.partition("=")
        key = key.strip()
        if not equals or not key:
            raise ConfigError(f"Invalid override {entry!r}: expected key=value")
        result[key] = value
    return result


# ---------------------------------------------------------------------------------------
# The typed view
# ---------------------------------------------------------------------------------------


class ServerConfig(ServerKeys):
    """One node's configuration: typed values, the strings they came from, unknown keys.

    Build it with :meth:`from_properties` (a mapping) or :meth:`load` (the text of a
    ``server.properties`` and ``--override`` entries); both validate. The object is
    immutable; derived values are computed once, on first use. Each key's own value is
    the attribute :class:`~odradek.broker.server_keys.ServerKeys` declares for it.
    """

    _values: Mapping[str, ConfigValue]
    _originals: Mapping[str, str]
    _unknown_keys: tuple[str, ...]

    def __init__(
        self,
        values: Mapping[str, ConfigValue],
        originals: Mapping[str, str],
        unknown_keys: Iterable[str] = (),
    ) -> None:
        # object.__setattr__ because __setattr__ below refuses every assignment.
        object.__setattr__(self, "_values", MappingProxyType(dict(values)))
        object.__setattr__(self, "_originals", MappingProxyType(dict(originals)))
        object.__setattr__(self, "_unknown_keys", tuple(unknown_keys))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ServerConfig is immutable; cannot set {name}")

    # -- construction ----------------------------------------------------------------

    @classmethod
    def from_properties(
        cls,
        properties: Mapping[str, str],
        overrides: Mapping[str, str] | None = None,
        *,
        validate: bool = True,
    ) -> ServerConfig:
        """Parse ``properties`` with ``overrides`` on top (an override wins over the file)."""
        merged = {**properties, **(overrides or {})}
        values, unknown = SERVER_CONFIG_DEF.parse(merged)
        # Per-listener values of the keys that have them are known keys, checked here.
        for suffix in PER_LISTENER_KEYS:
            for key in [k for k in unknown if listener_key_name(k, suffix) is not None]:
                listener_int(key, merged[key])
                unknown.remove(key)
        # The TLS and SASL keys are read as strings where they are used
        # (security/ssl_keys.py, security/sasl_keys.py).
        unknown = [k for k in unknown if not is_ssl_key(k) and not is_sasl_key(k)]
        config = cls(values, merged, unknown)
        if validate:
            config.validate()
        return config

    @classmethod
    def load(cls, text: str, overrides: Iterable[str] = ()) -> ServerConfig:
        """Parse the text of a ``server.properties`` and ``key=value`` override entries."""
        return cls.from_properties(parse_properties(text), parse_overrides(overrides))

    # -- raw access ------------------------------------------------------------------

    @property
    def values(self) -> Mapping[str, ConfigValue]:
        """Typed value of every defined key (defaults filled in)."""
        return self._values

    @property
    def originals(self) -> Mapping[str, str]:
        """The strings as given, file and overrides merged, unknown keys included."""
        return self._originals

    @property
    def unknown_keys(self) -> list[str]:
        """Given keys that are not in :data:`SERVER_CONFIG_DEF`, in the order given."""
        return list(self._unknown_keys)

    def get(self, name: str) -> ConfigValue:
        """The typed value of a defined key; an unknown name is a :class:`ConfigError`."""
        if name not in SERVER_CONFIG_DEF:
            raise ConfigError(f"Unknown configuration {name}")
        return self.values[name]

    def is_set(self, name: str) -> bool:
        """Whether ``name`` was given explicitly (in the file or as an override)."""
        return name in self.originals

    # -- identity and roles ----------------------------------------------------------

    @cached_property
    def process_roles(self) -> frozenset[str]:
        return frozenset(self._process_roles)

    @property
    def is_broker(self) -> bool:
        return BROKER_ROLE in self.process_roles

    @property
    def is_controller(self) -> bool:
        return CONTROLLER_ROLE in self.process_roles

    # -- listeners -------------------------------------------------------------------

    @cached_property
    def controller_listener_names(self) -> tuple[str, ...]:
        return tuple(n.strip().upper() for n in self._controller_listener_names)

    @cached_property
    def listener_security_protocol_map(self) -> Mapping[str, str]:
        """Kafka's effective map: when the key is not set and nothing uses SSL or SASL,
        each controller listener name maps to PLAINTEXT, so a minimal KRaft file works.
        """
        raw = self._listener_security_protocol_map
        mapping = parse_protocol_map("listener.security.protocol.map", raw)
        if not self.is_set("listener.security.protocol.map"):
            used = [*self.controller_listener_names, *self._listener_names(self._listeners)]
            if not any(n in ("SSL", "SASL_PLAINTEXT", "SASL_SSL") for n in used):
                for name in self.controller_listener_names:
                    mapping.setdefault(name, "PLAINTEXT")
        return MappingProxyType(mapping)

    def _listener_names(self, entries: Iterable[str]) -> list[str]:
        return [e.split("://", 1)[0].strip().upper() for e in entries]

    @cached_property
    def listeners(self) -> tuple[Endpoint, ...]:
        return parse_listeners("listeners", self._listeners, self.listener_security_protocol_map)

    @cached_property
    def advertised_listeners(self) -> tuple[Endpoint, ...]:
        """``advertised.listeners`` when set, else ``listeners`` (controller ones included)."""
        raw = self._advertised_listeners
        if raw is None:
            return self.listeners
        return parse_listeners(
            "advertised.listeners",
            raw,
            self.listener_security_protocol_map,
            require_distinct_ports=False,
        )

    @property
    def controller_listeners(self) -> tuple[Endpoint, ...]:
        """The listeners this node binds for the controller quorum."""
        names = set(self.controller_listener_names)
        return tuple(e for e in self.listeners if e.listener_name in names)

    @property
    def advertised_broker_listeners(self) -> tuple[Endpoint, ...]:
        """What the broker registers for clients: advertised listeners minus controller ones."""
        names = set(self.controller_listener_names)
        return tuple(e for e in self.advertised_listeners if e.listener_name not in names)

    @property
    def advertised_controller_listeners(self) -> tuple[Endpoint, ...]:
        """One endpoint per controller listener name, as Kafka chooses them.

        The advertised entry when there is one, else the bound listener; a wildcard
        ``0.0.0.0`` host becomes ``None`` (resolved to the host's name by the shell).
        """
        advertised: dict[str, Endpoint] = {}
        if self._advertised_listeners is not None:
            advertised = {e.listener_name: e for e in self.advertised_listeners}
        bound = {e.listener_name: e for e in self.listeners}
        result: list[Endpoint] = []
        for name in self.controller_listener_names:
            if name in advertised:
                result.append(advertised[name])
            elif name in bound:
                endpoint = bound[name]
                if endpoint.host == NON_ROUTABLE:
                    endpoint = Endpoint(name, endpoint.security_protocol, None, endpoint.port)
                result.append(endpoint)
        return tuple(result)

    @property
    def inter_broker_listener_name(self) -> str:
        """``inter.broker.listener.name``, or the name of ``inter.broker.security.protocol``."""
        name = self._inter_broker_listener_name
        if name:
            return name.strip().upper()
        return self._inter_broker_security_protocol.upper()

    # -- quorum ------------------------------------------------------------------------

    @cached_property
    def controller_quorum_voters(self) -> tuple[Voter, ...]:
        return parse_voters("controller.quorum.voters", self._controller_quorum_voters)

    @cached_property
    def controller_quorum_bootstrap_servers(self) -> tuple[HostPort, ...]:
        key = "controller.quorum.bootstrap.servers"
        return tuple(host_port(key, e) for e in self._controller_quorum_bootstrap_servers)

    # -- logs --------------------------------------------------------------------------

    @property
    def log_dirs(self) -> tuple[str, ...]:
        """``log.dirs`` when set, else ``log.dir`` (Kafka's precedence)."""
        dirs = self._log_dirs
        if dirs is None:
            dirs = self._log_dir
        return tuple(dirs)

    @property
    def metadata_log_dir(self) -> str:
        """``metadata.log.dir``, else the first log directory."""
        return self._metadata_log_dir or self.log_dirs[0]

    def replication_factor_for(self, broker_count: int) -> int:
        """Replication factor of a topic created without one, in a cluster of ``broker_count``.

        The explicit setting when there is one; else ``min(3, broker_count)`` (at least 1),
        our safer default in place of Kafka's 1.
        """
        explicit = self.default_replication_factor
        if explicit is not None:
            return explicit
        return max(1, min(3, broker_count))

    def min_insync_replicas_for(self, replication_factor: int) -> int:
        """The broker-wide ``min.insync.replicas`` for a partition of ``replication_factor``.

        The explicit setting when there is one; else a majority, ``rf // 2 + 1``, our
        safer default in place of Kafka's 1.
        """
        explicit = self.min_insync_replicas
        if explicit is not None:
            return explicit
        return majority(replication_factor)

    @property
    def log_roll_ms(self) -> int:
        """``log.roll.ms`` when set, else ``log.roll.hours`` in ms."""
        explicit = self._log_roll_ms
        return explicit if explicit is not None else self._log_roll_hours * 3_600_000

    @property
    def log_retention_ms(self) -> int:
        """Retention in ms: ``.ms`` over ``.minutes`` over ``.hours``; any negative is -1."""
        millis = self._log_retention_ms
        if millis is None:
            minutes = self._log_retention_minutes
            millis = (
                minutes * 60_000 if minutes is not None else self._log_retention_hours * 3_600_000
            )
        return -1 if millis < 0 else millis

    @property
    def log_flush_interval_ms(self) -> int:
        """``log.flush.interval.ms`` when set, else ``log.flush.scheduler.interval.ms``."""
        explicit = self._log_flush_interval_ms
        if explicit is not None:
            return explicit
        return self._log_flush_scheduler_interval_ms

    # -- connections -------------------------------------------------------------------

    def listener_max_connections(self, listener_name: str) -> int:
        """``max.connections`` for one listener: ``listener.name.<name>.max.connections``
        when set (it may only lower the limit, as Kafka applies both), else the
        node-wide value."""
        own = self._listener_ints(LISTENER_MAX_CONNECTIONS).get(listener_name.upper())
        return self.max_connections if own is None else min(own, self.max_connections)

    @cached_property
    def max_connections_per_ip_overrides(self) -> Mapping[str, int]:
        raw = self._max_connections_per_ip_overrides
        return MappingProxyType(parse_per_ip_overrides("max.connections.per.ip.overrides", raw))

    def ssl_config(self, listener_name: str) -> dict[str, str]:
        """``listener_name``'s effective ``ssl.*`` values (see security/ssl_keys.py)."""
        return effective_ssl_config(self.originals, listener_name)

    def _listener_ints(self, suffix: str) -> dict[str, int]:
        """The ``listener.name.<name>.<suffix>`` entries given, by upper-case name."""
        found: dict[str, int] = {}
        for key, raw in self.originals.items():
            name = listener_key_name(key, suffix)
            if name is not None:
                found[name] = listener_int(key, raw)
        return found

    # -- cross-key rules ---------------------------------------------------------------

    def validate(self) -> list[str]:
        """Check the rules that span keys, as Kafka's ``KafkaConfig`` does for KRaft.

        Raises :class:`ConfigError` naming the keys for a configuration Kafka refuses;
        returns warnings (as text) for one Kafka accepts but that is probably a mistake.
        """
        warnings: list[str] = []
        node_id = self.node_id
        broker_id = self.broker_id
        if broker_id is not None and broker_id != node_id:
            raise ConfigError(
                f"broker.id ({broker_id}) and node.id ({node_id}) must be equal when both are set"
            )
        if self.log_roll_ms < 1:
            raise ConfigError("log.roll.ms (or log.roll.hours) must be at least 1 ms")
        if self.log_retention_ms == 0:
            raise ConfigError(
                "log.retention.ms (or log.retention.minutes / log.retention.hours) must be "
                "-1 (unlimited) or at least 1 ms; it is 0"
            )
        if not self.log_dirs:
            raise ConfigError("at least one log directory must be set in log.dirs or log.dir")
        self._validate_replica_fetch()
        if self.broker_heartbeat_interval_ms * 2 > self.broker_session_timeout_ms:
            warnings.append(
                f"broker.heartbeat.interval.ms ({self.broker_heartbeat_interval_ms}) should be "
                f"at most half of broker.session.timeout.ms ({self.broker_session_timeout_ms}), "
                "or brokers lose their lease after one late heartbeat"
            )
        self._validate_inter_broker_listener()
        self._validate_connection_limits()
        # Parse both listener keys now, so that a bad entry fails at start-up, not at bind time.
        _ = self.listeners, self.advertised_listeners
        self._validate_quorum()
        roles = self.process_roles
        if roles == {BROKER_ROLE}:
            self._validate_broker_only()
        elif roles == {CONTROLLER_ROLE}:
            self._validate_controller_only()
        else:
            self._validate_combined()
        if self.is_broker:
            self._validate_broker_listeners()
        for endpoint in (*self.advertised_broker_listeners, *self.advertised_controller_listeners):
            if endpoint.host == NON_ROUTABLE:
                raise ConfigError(
                    f"advertised.listeners cannot use the non-routable address {NON_ROUTABLE} "
                    f"({endpoint.connection_string()}); advertise an address peers can reach"
                )
        warnings.extend(self._safety_warnings())
        return warnings

    def _validate_connection_limits(self) -> None:
        """Kafka's rules for the socket server's limits (``KafkaConfig``)."""
        queued = self.queued_max_request_bytes
        if queued > 0 and queued < self.socket_request_max_bytes:
            raise ConfigError(
                f"queued.max.request.bytes ({queued}) must be -1 (unbounded) or at least "
                f"socket.request.max.bytes ({self.socket_request_max_bytes}), or the "
                "largest request could never be read"
            )
        if self.max_connections_per_ip == 0 and not self.max_connections_per_ip_overrides:
            raise ConfigError(
                "max.connections.per.ip can be set to zero only if "
                "max.connections.per.ip.overrides is set"
            )

    def _validate_replica_fetch(self) -> None:
        wait = self.replica_fetch_wait_max_ms
        socket_timeout = self.replica_socket_timeout_ms
        if wait > socket_timeout:
            raise ConfigError(
                f"replica.fetch.wait.max.ms ({wait}) must not exceed replica.socket.timeout.ms "
                f"({socket_timeout}), or follower fetches time out while waiting"
            )
        if wait > self.replica_lag_time_max_ms:
            raise ConfigError(
                f"replica.fetch.wait.max.ms ({wait}) must not exceed replica.lag.time.max.ms "
                f"({self.replica_lag_time_max_ms}), or followers drop out of the ISR while waiting"
            )

    def _validate_inter_broker_listener(self) -> None:
        if self.is_set("inter.broker.listener.name"):
            if self.is_set("inter.broker.security.protocol"):
                raise ConfigError(
                    "only one of inter.broker.listener.name and inter.broker.security.protocol "
                    "may be set"
                )
            name = self.inter_broker_listener_name
            if name not in self.listener_security_protocol_map:
                raise ConfigError(
                    f"inter.broker.listener.name {name} is not in listener.security.protocol.map"
                )

    def _validate_quorum(self) -> None:
        voters = self.controller_quorum_voters
        bootstrap = self.controller_quorum_bootstrap_servers
        if not voters and not bootstrap:
            raise ConfigError(
                "either controller.quorum.bootstrap.servers must list the bootstrap controllers "
                "or controller.quorum.voters must list the voters"
            )
        for voter in voters:
            if voter.host == NON_ROUTABLE:
                raise ConfigError(
                    f"controller.quorum.voters: voter {voter.node_id} uses the non-routable "
                    f"address {NON_ROUTABLE}"
                )

    def _voter_ids(self) -> set[int]:
        return {v.node_id for v in self.controller_quorum_voters}

    def _validate_node_in_voters(self) -> None:
        ids = self._voter_ids()
        if ids and self.node_id not in ids:
            raise ConfigError(
                f"process.roles contains controller, so node.id {self.node_id} must be one of "
                f"the voters in controller.quorum.voters ({sorted(ids)})"
            )

    def _validate_controller_listeners(self) -> None:
        if not self.advertised_controller_listeners:
            raise ConfigError(
                "controller.listener.names must name at least one listener of listeners when "
                "process.roles contains controller"
            )
        bound = {e.listener_name for e in self.listeners}
        missing = [n for n in self.controller_listener_names if n not in bound]
        if missing:
            raise ConfigError(
                f"controller.listener.names must only name listeners of listeners when "
                f"process.roles contains controller; {', '.join(missing)} is not in listeners"
            )

    def _validate_broker_only(self) -> None:
        ids = self._voter_ids()
        if self.node_id in ids:
            raise ConfigError(
                f"process.roles is just broker, so node.id {self.node_id} must not be one of "
                f"the voters in controller.quorum.voters ({sorted(ids)})"
            )
        if not self.controller_listener_names:
            raise ConfigError(
                "controller.listener.names must name the controllers' listener when "
                "process.roles is just broker"
            )
        bound = {e.listener_name for e in self.listeners}
        clash = [n for n in self.controller_listener_names if n in bound]
        if clash:
            raise ConfigError(
                f"controller.listener.names must not name a listener of listeners when "
                f"process.roles is just broker; {', '.join(clash)} is in listeners"
            )
        for name in self.controller_listener_names:
            if name not in self.listener_security_protocol_map:
                raise ConfigError(
                    f"controller listener {name} (controller.listener.names) has no entry in "
                    "listener.security.protocol.map"
                )

    def _validate_controller_only(self) -> None:
        names = set(self.controller_listener_names)
        others = [e.listener_name for e in self.listeners if e.listener_name not in names]
        if others:
            raise ConfigError(
                f"listeners must only contain controller listeners (controller.listener.names) "
                f"when process.roles is just controller; {', '.join(others)} is not one"
            )
        if self.is_set("inter.broker.listener.name") and self.inter_broker_listener_name in names:
            raise ConfigError(
                "controller.listener.names must not contain inter.broker.listener.name "
                "when process.roles is just controller"
            )
        self._validate_node_in_voters()
        self._validate_controller_listeners()

    def _validate_combined(self) -> None:
        self._validate_node_in_voters()
        self._validate_controller_listeners()

    def _validate_broker_listeners(self) -> None:
        advertised = {e.listener_name for e in self.advertised_broker_listeners}
        if not advertised:
            raise ConfigError(
                "there must be at least one broker listener in advertised.listeners (or "
                "listeners); perhaps every listener is named in controller.listener.names?"
            )
        name = self.inter_broker_listener_name
        if name not in advertised:
            raise ConfigError(
                f"inter.broker.listener.name {name} must be a listener of advertised.listeners; "
                f"the broker listeners are {', '.join(sorted(advertised))}"
            )
        bound = {e.listener_name for e in self.listeners}
        extra = sorted(advertised - bound)
        if extra:
            raise ConfigError(
                f"advertised.listeners names must be among those of listeners; "
                f"{', '.join(extra)} is not in listeners ({', '.join(sorted(bound))})"
            )

    def _safety_warnings(self) -> list[str]:
        warnings: list[str] = []
        rf, isr = self.default_replication_factor, self.min_insync_replicas
        if rf is not None and isr is not None and isr > rf:
            warnings.append(
                f"min.insync.replicas ({isr}) exceeds default.replication.factor ({rf}): "
                "acks=all writes to such topics always fail with NOT_ENOUGH_REPLICAS"
            )
        tx_rf = self.transaction_state_log_replication_factor
        tx_isr = self.transaction_state_log_min_isr
        if tx_isr > tx_rf:
            warnings.append(
                f"transaction.state.log.min.isr ({tx_isr}) exceeds "
                f"transaction.state.log.replication.factor ({tx_rf}): transactions cannot commit"
            )
        if self.unclean_leader_election_enable:
            warnings.append(
                "unclean.leader.election.enable is true: an out-of-sync replica may become "
                "leader and acknowledged records may be lost (they are quarantined, not deleted)"
            )
        return warnings


def majority(replication_factor: int) -> int:
    """The smallest majority of ``replication_factor`` replicas (at least 1)."""
    return max(1, replication_factor // 2 + 1)
