"""``--security sasl_ssl``'s node configs: every role's ``server.properties`` (combined,
broker-only, controller-only) loads, with SASL_SSL on the broker and controller
listeners, and a certificate of its own."""

from __future__ import annotations

from pathlib import Path

from odradek.broker.server_config import ServerConfig
from odradek.cli.dev_cluster import secure_settings
from odradek.cli.verify.nodes import secured_properties
from odradek.verify.topology import Topology


def test_every_role_gets_sasl_ssl_listeners_and_its_own_certificate(tmp_path: Path) -> None:
    for topology in (Topology.plan(3, 0), Topology.plan(3, 3)):
        hosts = {n.node_id: (n.address,) for n in topology.nodes}
        settings = secure_settings(str(tmp_path / "security"), hosts)
        for node in topology.nodes:
            text = topology.server_properties(node, str(tmp_path / node.name), unsafe=False)
            config = ServerConfig.load(secured_properties(text, node, settings))
            protocols = {e.listener_name: e.security_protocol for e in config.listeners}
            if node.is_broker:
                assert protocols["SASL_SSL"] == "SASL_SSL"
                assert "PLAINTEXT" not in protocols
            if node.is_controller:
                assert protocols["CONTROLLER"] == "SASL_SSL"
            assert config.originals["ssl.keystore.location"] == settings.keystore_path(node.node_id)
            assert Path(settings.keystore_path(node.node_id)).exists()
