"""From a Kafka-style ``server.properties`` to a runnable node configuration.

A node is a broker, a controller or both (``process.roles``). Controllers serve the
metadata quorum on their controller listener (``controller.listener.names``); the
quorum is static (``controller.quorum.voters``) or dynamic
(``controller.quorum.bootstrap.servers``, voters in the metadata log, KIP-853). What this
build cannot serve (several log dirs, GSSAPI) is refused
with a message that names the keys, rather than started half right.
"""

from __future__ import annotations

import logging
import uuid

from odradek.broker.authorization import authorization_from
from odradek.broker.endpoints import Endpoint
from odradek.broker.server_config import ServerConfig
from odradek.broker.state import BrokerSettings
from odradek.broker.topic_config import (
    topic_log_config,
    validate_topic_overrides,
)
from odradek.core.errors import ConfigError
from odradek.raft.voters import VoterEndpoint
from odradek.security.principal import parse_mapping_rules
from odradek.security.sasl_keys import (
    CONTROLLER_MECHANISM,
    INTER_BROKER_MECHANISM,
    client_credentials,
    sasl_listener_config,
)
from odradek.shell.node import BrokerListener, ListenerSecurity, NodeConfig
from odradek.shell.peer_client import PLAINTEXT, ClientSecurity
from odradek.shell.quorum import QuorumConfig
from odradek.shell.tls import client_context, server_context

log = logging.getLogger("odradek.boot")

SUPPORTED_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})


def node_config(server: ServerConfig, cluster_id: str, directory_id: uuid.UUID) -> NodeConfig:
    """Check what this build can serve and derive the node's configuration.

    ``directory_id`` is the metadata log dir's ``directory.id`` (from meta.properties):
    with the node id, it names this replica of the metadata log.
    """
    if not (server.is_broker or server.is_controller):
        raise ConfigError("process.roles must name broker, controller or both")
    controller_names = set(server.controller_listener_names)
    broker_listeners = [e for e in server.listeners if e.listener_name not in controller_names]
    for endpoint in server.listeners:
        protocol = endpoint.security_protocol
        if protocol not in SUPPORTED_PROTOCOLS:
            raise ConfigError(
                f"listeners: {endpoint.connection_string()} uses {protocol}, which is not "
                "a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)"
            )
    controller_security = _controller_security(server)
    advertised = [e for e in server.advertised_listeners if e.listener_name not in controller_names]
    served = (
        tuple(_broker_listener(server, e, advertised) for e in broker_listeners)
        if server.is_broker
        else ()
    )
    inter_broker = next((b for b in served if b.name == server.inter_broker_listener_name), None)
    if served and inter_broker is None:
        raise ConfigError(
            f"inter.broker.listener.name: {server.inter_broker_listener_name} is not a "
            f"broker listener of listeners ({', '.join(b.name for b in served)})"
        )
    broker_security = inter_broker.security if inter_broker is not None else None
    if server.is_broker and (not broker_listeners or not advertised):
        raise ConfigError("listeners: no broker listener (one not in controller.listener.names)")
    controller_listeners = list(server.controller_listeners)
    if server.is_controller and not controller_listeners:
        raise ConfigError(
            "listeners: a controller needs a listener named in controller.listener.names"
        )
    if not server.controller_quorum_voters and not server.controller_quorum_bootstrap_servers:
        raise ConfigError(
            "set controller.quorum.voters (static quorum) or "
            "controller.quorum.bootstrap.servers (dynamic quorum)"
        )
    if len(server.log_dirs) != 1:
        raise ConfigError(
            f"log.dirs: {len(server.log_dirs)} directories given; one is supported for now"
        )
    unknown = server.unknown_keys
    if unknown:
        log.warning("ignoring unknown configuration keys: %s", ", ".join(sorted(unknown)))
    for warning in server.validate():
        log.warning("configuration: %s", warning)
    listen = broker_listeners[0] if broker_listeners else None
    public = next(
        (e for e in advertised if listen and e.listener_name == listen.listener_name), None
    )
    public = public or (advertised[0] if advertised else None)
    settings = BrokerSettings(
        node_id=server.node_id,
        cluster_id=cluster_id,
        host=(public.host if public else "") or "127.0.0.1",
        port=public.port if public else 0,
        rack=server.broker_rack,
        num_partitions=server.num_partitions,
        default_replication_factor=server.default_replication_factor,
        auto_create_topics=server.auto_create_topics_enable,
        message_max_bytes=server.message_max_bytes,
        flush_before_ack=server.flush_before_ack,
        fetch_session_cache_slots=server.max_incremental_fetch_session_cache_slots,
        is_broker=server.is_broker,
    )
    controller_listen = controller_listeners[0] if controller_listeners else None
    return NodeConfig(
        broker_security=broker_security,
        broker_listeners=served,
        controller_security=controller_security,
        authorization=authorization_from(
            server.authorizer_class_name,
            server.super_users,
            server.allow_everyone_if_no_acl_found,
        ),
        settings=settings,
        log_dir=server.log_dirs[0],
        metadata_log_dir=server.metadata_log_dir,
        listen_host=((listen.host if listen else "") or "0.0.0.0"),
        listen_port=listen.port if listen else 0,
        log_config=topic_log_config(server, {}),
        max_frame_bytes=server.socket_request_max_bytes,
        retention_check_interval_ms=server.log_retention_check_interval_ms,
        checkpoint_interval_ms=server.log_flush_offset_checkpoint_interval_ms,
        high_watermark_checkpoint_interval_ms=server.replica_high_watermark_checkpoint_interval_ms,
        producer_id_expiration_ms=server.producer_id_expiration_ms,
        producer_id_expiration_check_interval_ms=server.producer_id_expiration_check_interval_ms,
        scrub_bytes_per_second=server.log_scrub_bytes_per_second,
        connections_max_idle_ms=server.connections_max_idle_ms,
        validate_topic_configs=lambda overrides: _validated(server, overrides),
        server=server,
        is_broker=server.is_broker,
        is_controller=server.is_controller,
        controller_listen_host=(
            (controller_listen.host or "0.0.0.0") if controller_listen else None
        ),
        controller_listen_port=controller_listen.port if controller_listen else 0,
        quorum=quorum_config(server, cluster_id, directory_id, controller_security),
        broker_session_timeout_ms=server.broker_session_timeout_ms,
        broker_session_connection_loss_ms=server.broker_session_connection_loss_ms,
        broker_heartbeat_interval_ms=server.broker_heartbeat_interval_ms,
    )


def quorum_config(
    server: ServerConfig,
    cluster_id: str,
    directory_id: uuid.UUID,
    controller_security: ListenerSecurity | None = None,
) -> QuorumConfig:
    static = {v.node_id: (v.host, v.port) for v in server.controller_quorum_voters} or None
    if static is not None:
        bootstrap = list(static.values())
    else:
        bootstrap = [(hp.host, hp.port) for hp in server.controller_quorum_bootstrap_servers]
    names = server.controller_listener_names
    return QuorumConfig(
        node_id=server.node_id,
        cluster_id=cluster_id,
        directory_id=directory_id,
        static_voters=static,
        bootstrap_servers=bootstrap,
        controller_listener=names[0] if names else "CONTROLLER",
        own_endpoints=tuple(_voter_endpoint(e) for e in server.advertised_controller_listeners),
        election_timeout_ms=server.controller_quorum_election_timeout_ms,
        fetch_timeout_ms=server.controller_quorum_fetch_timeout_ms,
        request_timeout_ms=server.controller_quorum_request_timeout_ms,
        retry_backoff_ms=server.controller_quorum_retry_backoff_ms,
        max_idle_interval_ms=server.metadata_max_idle_interval_ms,
        stall_alarm_ms=server.metadata_quorum_stall_alarm_ms,
        security=controller_security.client if controller_security is not None else PLAINTEXT,
    )


def _voter_endpoint(endpoint: Endpoint) -> VoterEndpoint:
    # A wildcard host cannot be dialled; Kafka publishes "localhost" for it as well.
    host = endpoint.host if endpoint.host not in (None, "", "0.0.0.0", "::") else "localhost"
    assert host is not None
    return VoterEndpoint(endpoint.listener_name, host, endpoint.port)


def _validated(server: ServerConfig, overrides: dict[str, str]) -> dict[str, str]:
    # Kafka keeps a topic config as the text the client sent; checking it is enough.
    validate_topic_overrides(overrides, server)
    return dict(overrides)


def _broker_listener(
    server: ServerConfig, bound: Endpoint, advertised: list[Endpoint]
) -> BrokerListener:
    """One broker listener: where it binds, what it registers (its
    ``advertised.listeners`` entry, else where it binds), and its security, built at
    start so that a bad key store or setting stops the node naming the key. Only the
    inter-broker listener needs a login of this node's own (followers fetch there)."""
    name = bound.listener_name
    public = next((e for e in advertised if e.listener_name == name), bound)
    security = None
    if bound.security_protocol != "PLAINTEXT":
        security = _listener_security(
            server,
            name,
            bound.security_protocol,
            INTER_BROKER_MECHANISM,
            serve=True,
            connect=name == server.inter_broker_listener_name,
        )
    return BrokerListener(
        name=name,
        listen_host=bound.host or "0.0.0.0",
        listen_port=bound.port,
        advertised_host=public.host or "127.0.0.1",
        advertised_port=public.port,
        security=security,
    )


def _controller_security(server: ServerConfig) -> ListenerSecurity | None:
    """The controller listener's (``controller.listener.names``' first) security when it
    is not PLAINTEXT: a controller serves it; every node (the controllers' Raft traffic,
    a broker's registration, heartbeats, forwards and ISR changes) connects with it."""
    names = server.controller_listener_names
    if not names:
        return None
    name = names[0]
    protocol = server.listener_security_protocol_map.get(name, "PLAINTEXT")
    if protocol == "PLAINTEXT":
        return None
    security = _listener_security(
        server, name, protocol, CONTROLLER_MECHANISM, serve=server.is_controller
    )
    credentials = security.client.sasl
    if credentials is not None and credentials.mechanism.startswith("SCRAM-"):
        # SCRAM credentials live in the metadata log, which the controllers serve: a
        # controller could not check a login before it has the log.
        raise ConfigError(
            f"{CONTROLLER_MECHANISM}: {credentials.mechanism} cannot be used on the "
            "controller listener (its credentials are in the metadata log); use PLAIN "
            "over SASL_SSL, or SSL with client certificates"
        )
    return security


def _listener_security(
    server: ServerConfig,
    name: str,
    protocol: str,
    mechanism_key: str,
    *,
    serve: bool,
    connect: bool = True,
) -> ListenerSecurity:
    """``connect``: this node connects to the listener too (the inter-broker and the
    controller listener), so it needs a login of its own for it."""
    tls = protocol in ("SSL", "SASL_SSL")
    config = server.ssl_config(name) if tls else {}
    sasl = sasl_listener_config(server.originals, name) if protocol.startswith("SASL_") else None
    credentials = None
    if sasl is not None and connect:
        credentials = client_credentials(server.originals, name, mechanism_key)
        if credentials.mechanism not in sasl.mechanisms:
            raise ConfigError(
                f"{mechanism_key} is {credentials.mechanism}, which listener {name} does not "
                f"enable (sasl.enabled.mechanisms: {', '.join(sasl.mechanisms)})"
            )
    return ListenerSecurity(
        listener=name,
        protocol=protocol,
        server_tls=server_context(config, name) if tls and serve else None,
        client=ClientSecurity(client_context(config) if tls and connect else None, credentials),
        principal_rules=(
            parse_mapping_rules(config.get("ssl.principal.mapping.rules", ""))
            if protocol == "SSL"
            else ()
        ),
        sasl=sasl,
    )
