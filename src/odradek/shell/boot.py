"""From a Kafka-style ``server.properties`` to a runnable node configuration.

Until the controller quorum lands, a node is broker and controller at once and is the
single voter of its own metadata log; any other shape is refused with a message that
names the keys, rather than started half right.
"""

from __future__ import annotations

import logging

from odradek.broker.config import ServerConfig
from odradek.broker.state import BrokerSettings
from odradek.broker.topic_config import topic_log_config, validate_topic_overrides
from odradek.core.errors import ConfigError
from odradek.shell.node import NodeConfig

log = logging.getLogger("odradek.boot")

SUPPORTED_PROTOCOLS = frozenset({"PLAINTEXT"})


def node_config(server: ServerConfig, cluster_id: str) -> NodeConfig:
    """Check what this build can serve and derive the node's configuration."""
    if not (server.is_broker and server.is_controller):
        raise ConfigError(
            "process.roles must be broker,controller for now: separate roles come with the "
            "controller quorum"
        )
    voters = server.controller_quorum_voters
    if voters and [v.node_id for v in voters] != [server.node_id]:
        raise ConfigError(
            "controller.quorum.voters must name only this node for now: multi-node quorums "
            "come with the controller quorum"
        )
    for endpoint in server.listeners:
        if endpoint.security_protocol not in SUPPORTED_PROTOCOLS:
            raise ConfigError(
                f"listeners: {endpoint.connection_string()} uses "
                f"{endpoint.security_protocol}, which is not supported yet (only PLAINTEXT); "
                "refusing to serve it in plaintext"
            )
    controller_names = set(server.controller_listener_names)
    broker_listeners = [e for e in server.listeners if e.listener_name not in controller_names]
    advertised = [e for e in server.advertised_listeners if e.listener_name not in controller_names]
    if not broker_listeners or not advertised:
        raise ConfigError("listeners: no broker listener (one not in controller.listener.names)")
    if len(server.log_dirs) != 1:
        raise ConfigError(
            f"log.dirs: {len(server.log_dirs)} directories given; one is supported for now"
        )
    listen = broker_listeners[0]
    public = advertised[0]
    unknown = server.unknown_keys
    if unknown:
        log.warning("ignoring unknown configuration keys: %s", ", ".join(sorted(unknown)))
    for warning in server.validate():
        log.warning("configuration: %s", warning)
    settings = BrokerSettings(
        node_id=server.node_id,
        cluster_id=cluster_id,
        host=public.host or "127.0.0.1",
        port=public.port,
        rack=server.broker_rack,
        num_partitions=server.num_partitions,
        default_replication_factor=server.default_replication_factor,
        auto_create_topics=server.auto_create_topics_enable,
        message_max_bytes=server.message_max_bytes,
        flush_before_ack=server.flush_before_ack,
    )
    return NodeConfig(
        settings=settings,
        log_dir=server.log_dirs[0],
        metadata_log_dir=server.metadata_log_dir,
        listen_host=listen.host or "0.0.0.0",
        listen_port=listen.port,
        log_config=topic_log_config(server, {}),
        max_frame_bytes=server.socket_request_max_bytes,
        retention_check_interval_ms=server.log_retention_check_interval_ms,
        checkpoint_interval_ms=server.log_flush_offset_checkpoint_interval_ms,
        connections_max_idle_ms=server.connections_max_idle_ms,
        validate_topic_configs=lambda overrides: _validated(server, overrides),
        server=server,
    )


def _validated(server: ServerConfig, overrides: dict[str, str]) -> dict[str, str]:
    # Kafka keeps a topic config as the text the client sent; checking it is enough.
    validate_topic_overrides(overrides, server)
    return dict(overrides)
