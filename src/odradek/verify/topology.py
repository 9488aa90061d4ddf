"""Where the nodes of a verify run live: one address each on 127.0.0.x, and their
``server.properties``.

Every node has its own loopback address inside the run's network namespace (node
addresses from 127.0.0.2; the clients connect from 127.0.0.1, the kernel's choice for
loopback), so a packet filter can cut any pair by source and destination address.
Nodes bind their outgoing connections to their own address for that reason.
"""

from __future__ import annotations

from dataclasses import dataclass

CLIENT_ADDRESS = "127.0.0.1"
BROKER_PORT = 9092
CONTROLLER_PORT = 9093
FIRST_CONTROLLER_ID = 101

# Timing of a verify run, shorter than the defaults so that a fault and its
# consequences (an ISR shrink, a broker fenced, an election) fit in a short run. The
# safety settings (min.insync.replicas, unclean election, flush before ack) are not
# touched here; --unsafe changes those.
REPLICA_LAG_TIME_MAX_MS = 2000
BROKER_SESSION_TIMEOUT_MS = 4000
BROKER_HEARTBEAT_INTERVAL_MS = 1000

TIMING_PROPERTIES = (
    f"replica.lag.time.max.ms={REPLICA_LAG_TIME_MAX_MS}\n"
    f"broker.session.timeout.ms={BROKER_SESSION_TIMEOUT_MS}\n"
    f"broker.heartbeat.interval.ms={BROKER_HEARTBEAT_INTERVAL_MS}\n"
    "group.initial.rebalance.delay.ms=0\n"
    # 50 offsets partitions, replicated three ways, would cost more than the workload.
    "offsets.topic.num.partitions=3\n"
    # The keyed workload's compacted topic is cleaned within a short run.
    "log.cleaner.backoff.ms=500\n"
)
UNSAFE_PROPERTIES = "min.insync.replicas=1\nunclean.leader.election.enable=true\n"


@dataclass(frozen=True, slots=True)
class Node:
    node_id: int
    roles: str  # "broker", "controller" or "broker,controller"
    address: str

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def bootstrap(self) -> str:
        return f"{self.address}:{BROKER_PORT}"

    @property
    def controller_endpoint(self) -> str:
        return f"{self.address}:{CONTROLLER_PORT}"

    @property
    def name(self) -> str:
        return f"node-{self.node_id}"


@dataclass(frozen=True, slots=True)
class Topology:
    nodes: tuple[Node, ...]

    @staticmethod
    def plan(brokers: int, controllers: int) -> Topology:
        """``brokers`` broker nodes (ids 1..); with ``controllers`` 0 they are combined
        nodes and the controller quorum too, else that many controller-only nodes
        (ids 101..) hold the quorum."""
        if brokers < 1 or controllers < 0:
            raise ValueError(f"{brokers} brokers, {controllers} controllers")
        roles = "broker" if controllers else "broker,controller"
        nodes = [Node(i, roles, f"127.0.0.{1 + i}") for i in range(1, brokers + 1)]
        nodes += [
            Node(FIRST_CONTROLLER_ID + j, "controller", f"127.0.0.{2 + brokers + j}")
            for j in range(controllers)
        ]
        return Topology(tuple(nodes))

    @property
    def brokers(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.is_broker)

    @property
    def controllers(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.is_controller)

    @property
    def combined(self) -> bool:
        return all(n.is_broker and n.is_controller for n in self.nodes)

    def node(self, node_id: int) -> Node:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise KeyError(node_id)

    def by_address(self, address: str) -> Node:
        for n in self.nodes:
            if n.address == address:
                return n
        raise KeyError(address)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.bootstrap for n in self.brokers)

    def initial_controllers(self, directory_ids: dict[int, str]) -> str:
        """``--initial-controllers`` for ``odradek storage format``."""
        return ",".join(
            f"{n.node_id}@{n.controller_endpoint}:{directory_ids[n.node_id]}"
            for n in self.controllers
        )

    def server_properties(self, node: Node, log_dir: str, unsafe: bool) -> str:
        listeners = []
        if node.is_broker:
            listeners.append(f"PLAINTEXT://{node.bootstrap}")
        if node.is_controller:
            listeners.append(f"CONTROLLER://{node.controller_endpoint}")
        quorum = ",".join(n.controller_endpoint for n in self.controllers)
        return (
            "# Written by odradek verify.\n"
            f"process.roles={node.roles}\n"
            f"node.id={node.node_id}\n"
            f"listeners={','.join(listeners)}\n"
            "controller.listener.names=CONTROLLER\n"
            f"controller.quorum.bootstrap.servers={quorum}\n"
            f"log.dirs={log_dir}\n" + TIMING_PROPERTIES + (UNSAFE_PROPERTIES if unsafe else "")
        )
