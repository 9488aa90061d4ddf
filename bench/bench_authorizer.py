"""What authorization costs: the authorizer's decision, its index build, and a Produce
and a Metadata request through their handlers, with 10,000 ACLs against none.

The ACLs: 2,000 principals, each with ALLOW READ and WRITE on its own literal topic,
ALLOW READ on a prefixed group, DESCRIBE on a prefixed topic pattern, and one DENY;
``User:*`` ALLOW DESCRIBE on the wildcard topic for a few. Decisions are timed for a
principal that is allowed (found on its literal topic) and one that is denied (every
matching ACL looked at). The handlers run on a broker state with 200 topics, the same
request with the authorizer off and on, taking turns. Prints figures; asserts nothing.

Run: .venv/bin/python bench/bench_authorizer.py [--acls 10000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

from odradek.broker import produce, topics
from odradek.broker.authorization import Authorization
from odradek.broker.router import Request
from odradek.protocol.messages import MetadataRequest, ProduceRequest
from odradek.protocol.messages import produce_request as pr
from odradek.protocol.metadata import AccessControlEntryRecord
from odradek.security.acls import (
    AclBinding,
    AclOperation,
    Authorizer,
    PatternType,
    ResourceType,
    binding_from_record,
)
from odradek.security.principal import KafkaPrincipal

# The broker tests' harness builds the state; the repository root is not on sys.path
# when this runs as ``python bench/bench_authorizer.py``.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.broker.harness import batch, new_harness


def records(count: int) -> list[AccessControlEntryRecord]:
    rng = random.Random(0)
    made: list[AccessControlEntryRecord] = []
    users = max(count // 5, 1)
    specs = [
        (ResourceType.TOPIC, "topic-{u}", PatternType.LITERAL, AclOperation.READ, 3),
        (ResourceType.TOPIC, "topic-{u}", PatternType.LITERAL, AclOperation.WRITE, 3),
        (ResourceType.GROUP, "group-{u}-", PatternType.PREFIXED, AclOperation.READ, 3),
        (ResourceType.TOPIC, "shared-{u}-", PatternType.PREFIXED, AclOperation.DESCRIBE, 3),
        (ResourceType.TOPIC, "topic-{v}", PatternType.LITERAL, AclOperation.WRITE, 2),
    ]
    for u in range(users):
        for resource, name, pattern, operation, permission in specs:
            made.append(
                AccessControlEntryRecord(
                    id=uuid.UUID(int=rng.getrandbits(128)),
                    resource_type=resource,
                    resource_name=name.format(u=u, v=(u + 1) % users),
                    pattern_type=pattern,
                    principal=f"User:user-{u}",
                    host="*",
                    operation=operation,
                    permission_type=permission,
                )
            )
    return made[:count]


def per_call_us(call: object, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        call()  # type: ignore[operator]
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--acls", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    acls = records(args.acls)
    bindings: list[AclBinding] = [b for b in map(binding_from_record, acls) if b is not None]
    start = time.perf_counter()
    authorizer = Authorizer(bindings)
    build_ms = (time.perf_counter() - start) * 1000
    user = KafkaPrincipal("User", "user-7")
    stranger = KafkaPrincipal("User", "nobody")
    allowed = per_call_us(
        lambda: authorizer.authorize(user, "h", AclOperation.WRITE, ResourceType.TOPIC, "topic-7"),
        100_000,
    )
    denied = per_call_us(
        lambda: authorizer.authorize(
            stranger, "h", AclOperation.READ, ResourceType.TOPIC, "topic-7"
        ),
        100_000,
    )
    any_write = per_call_us(
        lambda: authorizer.authorize_any(user, "h", AclOperation.WRITE, ResourceType.TOPIC), 200
    )
    print(f"{len(bindings)} ACLs: index built in {build_ms:.1f} ms")
    print(f"authorize, allowed (literal topic): {allowed:.2f} us")
    print(f"authorize, denied (no match for the principal): {denied:.2f} us")
    print(f"authorize_any (InitProducerId's WRITE on some topic): {any_write:.0f} us")

    h = new_harness()
    for i in range(200):
        h.add_topic(f"topic-{i}")
    h.replay(acls)
    who = Request(0, 9, 1, "bench", principal=user, host="h")
    produce_request = ProduceRequest(
        acks=1,
        timeout_ms=1000,
        topic_data=[
            pr.TopicProduceData(
                name="topic-7", partition_data=[pr.PartitionProduceData(index=0, records=batch())]
            )
        ],
    )
    metadata_request = MetadataRequest(topics=None)
    results: dict[str, dict[str, list[float]]] = {"produce": {}, "metadata": {}}
    authorization = Authorization(frozenset(), False)
    for _ in range(args.rounds):
        for mode in ("off", "on"):
            h.state.authorization = authorization if mode == "on" else None

            def produce_once() -> None:
                produce_request.topic_data[0].partition_data[0].records = batch()
                h.carry(produce.handle_produce(h.state, who, produce_request))

            results["produce"].setdefault(mode, []).append(per_call_us(produce_once, 2000))
            results["metadata"].setdefault(mode, []).append(
                per_call_us(lambda: topics.handle_metadata(h.state, who, metadata_request), 500)
            )
    for name, modes in results.items():
        off, on = statistics.median(modes["off"]), statistics.median(modes["on"])
        print(
            f"{name:<8} handler: {off:7.1f} us without the authorizer, {on:7.1f} us with "
            f"{len(bindings)} ACLs ({on - off:+.1f} us)"
        )


if __name__ == "__main__":
    main()
