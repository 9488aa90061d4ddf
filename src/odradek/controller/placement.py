"""Replica placement: which brokers hold the replicas of each new partition, and in what order.

This module owns the placement rule used by CreateTopics and CreatePartitions, and the
``leadership_after_failure`` helper that measures how well a placement survives the loss
of one broker. It is pure and deterministic: the same brokers, counts and ``start_index``
give the same assignment on every node and in every simulation. Randomness, where a caller
wants it (Kafka picks a random start per topic so that small topics do not all begin on the
same broker), comes from the caller's injected rng through ``start_index``.

The scheme is Kafka's (``AdminUtils.assignReplicasToBrokers``), written afresh here:

* Brokers are sorted by id (or, with racks, arranged in Kafka's rack-alternated order).
* The first replica of partition ``p`` (its preferred leader) is broker
  ``order[(p + start) % n]``: round-robin, so every broker prefers ``floor`` or ``ceil`` of
  ``partitions / n`` partitions.
* The follower replicas sit at offsets ``1 + (shift + j) % (n - 1)`` after the leader,
  ``j = 0 .. rf - 2``, where ``shift = start + p // n`` grows by one every ``n`` partitions.
  Consecutive ``j`` give distinct offsets in ``1 .. n - 1``, so a list never repeats a
  broker or holds its own leader twice.

Why the shift matters (the seed's failover property): the partitions a broker prefers lie
one per block of ``n`` partition ids, so their ``shift`` values are consecutive integers and
their second replicas cycle through all ``n - 1`` other brokers. When that broker dies, the
next replica of each of its partitions takes over, and leadership spreads over all survivors
as evenly as integers allow. The replication design's own formula, "the jth replica of the
kth partition of broker i goes to broker (i + j + k) mod n", cycles over ``n`` values, one
of which is ``i`` itself: for ``k = n - j`` it would place a follower on the leader, and its
second replicas never reach one survivor per ``n - 1`` partitions. Kafka's shift modulo
``n - 1`` is the version of that idea that holds exactly, so it is the one used here.

Guarantees without racks (``tests/controller/test_placement.py`` checks each one), for a
topic whose partitions are ``0 .. P - 1``, ``n`` brokers, replication factor ``rf``:

1. Every partition has exactly ``rf`` distinct replicas, all from the given brokers.
2. Each broker is the preferred replica of ``floor(P / n)`` or ``ceil(P / n)`` partitions.
3. With ``Q = P // n`` and ``r = P % n``, each broker holds between
   ``rf * Q + max(0, r + rf - n)`` and ``rf * Q + min(r, rf)`` replicas. Every full block of
   ``n`` partitions gives each broker exactly ``rf``; only the last partial block is uneven,
   so the spread (max - min) is at most ``min(r, rf, n - r, n - rf)``, and 0 when ``n``
   divides ``P``. The bound is tight: 3 partitions with ``rf = 3`` on 6 brokers give counts
   1, 2, 3, 2, 1, 0. Kafka accepts this and varies ``start_index`` per topic instead.
4. When one broker that preferred ``m`` partitions dies (``rf >= 2``), each of the ``n - 1``
   survivors becomes leader of ``floor(m / (n - 1))`` or ``ceil(m / (n - 1))`` of them. With
   ``m >= n - 1`` every survivor gains at least one; with ``m < n - 1``, exactly ``m``
   survivors gain one each and none gains two.

CreatePartitions passes ``existing`` (or ``first_partition``): partition ``p`` is always
placed by the same function of ``p``, so adding partitions to a topic yields exactly what
creating the topic with the larger count would have, and guarantees 1-4 hold for the whole
grown topic. (Kafka restarts the shift at the start index when it adds partitions; computing
it from the partition id instead is what makes the continuation exact.)

Racks: ``brokers`` may be a mapping from broker id to rack (or None). If every rack is None
the placement is the one above. If every broker has a rack, Kafka's rack-aware variant is
used: brokers are ordered rack-alternated (racks sorted by name, brokers sorted within each
rack, then one broker from each rack in turn), leaders go round-robin over that order, and
each follower is the next candidate from the shifted walk that is on a rack with no replica
yet (until every rack has one) and not already a replica. The first ``min(rf, racks)``
replicas of a partition are then on distinct racks. Guarantees 1 and 2 still hold; 3 and 4
give way to rack diversity and are not promised. A mix of racks and None is an error, as in
Kafka's enforced rack-aware mode.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence

from odradek.core.invariant import invariant

__all__ = ["assign_replicas", "leadership_after_failure", "rack_alternated_order"]


def assign_replicas(
    brokers: Sequence[int] | Mapping[int, str | None],
    partitions: int,
    replication_factor: int,
    *,
    start_index: int = 0,
    first_partition: int = 0,
    existing: Mapping[int, list[int]] | None = None,
) -> dict[int, list[int]]:
    """Place ``partitions`` new partitions on ``brokers``; return partition id -> replicas.

    ``brokers`` is a sequence of broker ids, or a mapping from broker id to rack (see the
    module docstring). The first replica in each list is the preferred leader.

    ``start_index`` chooses the broker (position in the sorted or rack-alternated order,
    taken modulo the broker count) that prefers partition 0, and the starting shift of the
    followers. ``first_partition`` is the id of the first new partition: the result holds
    ids ``first_partition .. first_partition + partitions - 1``, placed exactly as they would
    be in a topic created with all of them at once.

    ``existing`` is the current assignment of the topic, for CreatePartitions. It must hold
    partitions ``0 .. len(existing) - 1`` with ``replication_factor`` replicas in partition 0.
    The new partitions then start at ``len(existing)``, and the start index is recovered
    from the position of partition 0's preferred replica in the placement order (or, if that
    broker is gone, of the next broker id above it, as Kafka does). ``start_index`` and
    ``first_partition`` must then be left at 0 or agree with those values. Only the new
    partitions are returned.

    Raises ValueError for a replication factor above the broker count (callers answer
    INVALID_REPLICATION_FACTOR), a non-positive partition count or replication factor,
    duplicate or negative broker ids, racks given for some brokers only, or an ``existing``
    assignment that does not fit.
    """
    order, racks = _broker_order(brokers)
    if partitions <= 0:
        raise ValueError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise ValueError("Replication factor must be larger than 0.")
    n = len(order)
    if replication_factor > n:
        raise ValueError(
            f"Replication factor: {replication_factor} larger than available brokers: {n}."
        )
    start = start_index % n
    if existing:
        start, first_partition = _continue_from(
            existing, order, replication_factor, start, first_partition
        )
    if first_partition < 0:
        raise ValueError(f"first partition {first_partition} is negative")

    rack_count = 0 if racks is None else len(set(racks.values()))
    result: dict[int, list[int]] = {}
    for partition in range(first_partition, first_partition + partitions):
        if racks is None:
            replicas = _place_rack_unaware(order, partition, replication_factor, start)
        else:
            replicas = _place_rack_aware(
                order, racks, rack_count, partition, replication_factor, start
            )
        invariant(
            len(replicas) == replication_factor and len(set(replicas)) == replication_factor,
            f"partition {partition} placed on {replicas}, not {replication_factor} brokers",
        )
        result[partition] = replicas
    return result


def leadership_after_failure(
    assignment: Mapping[int, Sequence[int]],
    dead_broker: int,
    *,
    brokers: Iterable[int] | None = None,
) -> dict[int, int]:
    """How many of ``dead_broker``'s partitions each surviving broker takes over.

    Assumes every partition is led by its preferred (first) replica, as after a preferred
    leader election. For each partition whose first replica is ``dead_broker``, the next
    replica in its list becomes leader; a partition with no other replica goes offline and
    counts for nobody. The result maps every surviving broker to the number of leaderships
    it gains, zero included: the survivors are the brokers found in ``assignment`` plus
    ``brokers`` if given (pass the cluster's brokers so that a broker holding no replica
    of this topic shows up with 0).
    """
    survivors = {broker for replicas in assignment.values() for broker in replicas}
    if brokers is not None:
        survivors.update(brokers)
    survivors.discard(dead_broker)
    gained = dict.fromkeys(sorted(survivors), 0)
    for replicas in assignment.values():
        if replicas and replicas[0] == dead_broker:
            for broker in replicas[1:]:
                if broker != dead_broker:
                    gained[broker] += 1
                    break
    return gained


def rack_alternated_order(racks: Mapping[int, str]) -> list[int]:
    """Kafka's rack-alternated broker order: one broker from each rack in turn.

    Racks are taken in sorted name order and brokers by id within a rack, so
    ``{0: "r1", 1: "r3", 2: "r3", 3: "r2", 4: "r2", 5: "r1"}`` gives ``[0, 3, 1, 5, 4, 2]``.
    Round-robin over this order puts neighbours on different racks whenever the racks
    allow it, which is what lets the leader walk and the follower walk mix racks.
    """
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    depth = max((len(column) for column in columns), default=0)
    return [column[row] for row in range(depth) for column in columns if row < len(column)]


def _broker_order(
    brokers: Sequence[int] | Mapping[int, str | None],
) -> tuple[list[int], dict[int, str] | None]:
    """The placement order of the brokers, and their racks if rack-aware placement applies."""
    ids = list(brokers)
    if len(set(ids)) != len(ids):
        raise ValueError(f"duplicate broker ids in {sorted(ids)}")
    if any(broker < 0 for broker in ids):
        raise ValueError(f"broker ids must not be negative: {sorted(ids)}")
    if not isinstance(brokers, Mapping):
        return sorted(ids), None
    known = {broker: rack for broker, rack in brokers.items() if rack is not None}
    if not known:
        return sorted(ids), None
    if len(known) != len(ids):
        raise ValueError("Not all brokers have rack information for replica rack aware assignment.")
    return rack_alternated_order(known), known


def _continue_from(
    existing: Mapping[int, list[int]],
    order: list[int],
    replication_factor: int,
    start: int,
    first_partition: int,
) -> tuple[int, int]:
    """Recover (start index, first new partition id) from a topic's current assignment."""
    count = len(existing)
    if set(existing) != set(range(count)):
        raise ValueError(f"existing partitions are not 0..{count - 1}: {sorted(existing)}")
    if len(existing[0]) != replication_factor:
        raise ValueError(
            f"replication factor {replication_factor} differs from the topic's "
            f"{len(existing[0])} (partition 0 has {existing[0]})"
        )
    if first_partition not in (0, count):
        raise ValueError(f"first partition {first_partition} but the topic has {count}")
    # The start index is not stored anywhere; partition 0's preferred replica reveals it.
    # If that broker has left, Kafka takes the next broker id above it; so do we, so that
    # the new partitions still begin their round-robin from a predictable place.
    leader = existing[0][0]
    ids = sorted(order)
    above = bisect_left(ids, leader)
    recovered = order.index(ids[above]) if above < len(ids) else 0
    if start not in (0, recovered):
        raise ValueError(
            f"start index {start} disagrees with the existing assignment, which starts at "
            f"{recovered} (broker {order[recovered]})"
        )
    return recovered, count


def _follower_index(first: int, shift: int, j: int, n: int) -> int:
    """Position of the ``j``-th follower candidate after the leader at position ``first``.

    The offset ``1 + (shift + j) % (n - 1)`` is never 0, so a follower is never the leader,
    and ``n - 1`` consecutive ``j`` visit every other position once.
    """
    return (first + 1 + (shift + j) % (n - 1)) % n


def _place_rack_unaware(
    order: list[int], partition: int, replication_factor: int, start: int
) -> list[int]:
    n = len(order)
    first = (partition + start) % n
    # The shift is a function of the partition id alone (not of where this call began),
    # which is what makes CreatePartitions continue the pattern exactly.
    shift = start + partition // n
    return [order[first]] + [
        order[_follower_index(first, shift, j, n)] for j in range(replication_factor - 1)
    ]


def _place_rack_aware(
    order: list[int],
    racks: Mapping[int, str],
    rack_count: int,
    partition: int,
    replication_factor: int,
    start: int,
) -> list[int]:
    n = len(order)
    first = (partition + start) % n
    # Kafka multiplies the shift by the rack count so that, in the rack-alternated order,
    # each new block of partitions moves the followers to a different rack pattern.
    shift = (start + partition // n) * rack_count
    leader = order[first]
    replicas = [leader]
    racks_used = {racks[leader]}
    candidate = 0
    for _ in range(replication_factor - 1):
        # Within n - 1 steps the walk visits every other broker once, and one of them is
        # acceptable (an unused broker on an unused rack while racks remain, else any unused
        # broker, since replicas < rf <= n); the bound turns a bug into a loud stop.
        for _ in range(n - 1):
            broker = order[_follower_index(first, shift, candidate, n)]
            candidate += 1
            rack_allowed = racks[broker] not in racks_used or len(racks_used) == rack_count
            if rack_allowed and broker not in replicas:
                replicas.append(broker)
                racks_used.add(racks[broker])
                break
        else:
            invariant(False, f"no broker left for partition {partition} in {order}")
    return replicas
