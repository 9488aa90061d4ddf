"""Several broker listeners: every one is served with its own security, the inter-broker
one is what followers fetch with, and only that one needs a login of the node's own."""

from __future__ import annotations

import uuid

import pytest

from odradek.broker.server_config import ServerConfig
from odradek.core.errors import ConfigError
from odradek.shell.boot import node_config

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="secret";'
BASE = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "controller.quorum.voters": "1@127.0.0.1:19501",
    "log.dirs": "/tmp/odradek-boot-listeners",
    "listeners": "INTERNAL://0.0.0.0:19500,EXTERNAL://0.0.0.0:19502,CONTROLLER://127.0.0.1:19501",
    "advertised.listeners": "INTERNAL://10.0.0.1:19500,EXTERNAL://broker1.example.com:9092",
    "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT,"
    "CONTROLLER:PLAINTEXT",
    "inter.broker.listener.name": "INTERNAL",
    "listener.name.external.sasl.enabled.mechanisms": "PLAIN",
    "listener.name.external.plain.sasl.jaas.config": JAAS,
}


def config(**changes: str) -> ServerConfig:
    return ServerConfig.from_properties({**BASE, **changes})


def test_every_broker_listener_is_served_and_advertised_as_configured() -> None:
    node = node_config(config(), "cluster", uuid.uuid4())
    served = {
        b.name: (b.listen_port, b.advertised_host, b.advertised_port, b.security)
        for b in node.broker_listeners
    }
    assert set(served) == {"INTERNAL", "EXTERNAL"}
    assert served["INTERNAL"][:3] == (19500, "10.0.0.1", 19500)
    assert served["INTERNAL"][3] is None  # PLAINTEXT
    external = served["EXTERNAL"]
    assert external[:3] == (19502, "broker1.example.com", 9092)
    assert external[3] is not None and external[3].sasl is not None
    # Nobody fetches over EXTERNAL: the node needs no login of its own there.
    assert external[3].client.sasl is None
    # Followers fetch over the inter-broker listener, PLAINTEXT here.
    assert node.broker_security is None
    assert (node.settings.host, node.settings.port) == ("10.0.0.1", 19500)


def test_the_inter_broker_listener_needs_the_nodes_own_login() -> None:
    with pytest.raises(ConfigError, match="username"):
        node_config(
            config(
                **{
                    "inter.broker.listener.name": "EXTERNAL",
                    "sasl.mechanism.inter.broker.protocol": "PLAIN",
                }
            ),
            "c",
            uuid.uuid4(),
        )
