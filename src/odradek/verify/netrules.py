"""The packet filter for a network state: which directed links drop everything and
which drop a share of their packets, as one nftables ruleset.

The ruleset replaces the previous one atomically (``nft -f``: declare, delete, declare
again), so a heal is the empty state, never a sequence of rule deletions that could
leave one behind. Rules sit on the ``output`` hook: on loopback every packet passes
it once, and dropping A->B also drops B's acknowledgements of A's data.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

TABLE = "odradek_verify"

Link = tuple[str, str]  # (source address, destination address)


@dataclass(slots=True)
class NetworkState:
    """Every active fault's links, by fault index; the union is what the filter drops."""

    drops: dict[int, frozenset[Link]] = field(default_factory=dict)
    losses: dict[int, tuple[frozenset[Link], int]] = field(default_factory=dict)

    def heal(self, fault: int) -> None:
        self.drops.pop(fault, None)
        self.losses.pop(fault, None)

    def ruleset(self) -> str:
        dropped = sorted({link for links in self.drops.values() for link in links})
        lossy: dict[Link, int] = {}
        for links, percent in self.losses.values():
            for link in links:
                lossy[link] = max(percent, lossy.get(link, 0))
        return ruleset(dropped, sorted(lossy.items()))


def ruleset(drops: Iterable[Link], losses: Iterable[tuple[Link, int]] = ()) -> str:
    rules = [f"    ip saddr {a} ip daddr {b} drop\n" for a, b in drops]
    rules += [
        f"    ip saddr {a} ip daddr {b} numgen random mod 100 < {percent} drop\n"
        for (a, b), percent in losses
    ]
    return (
        f"table ip {TABLE}\n"
        f"delete table ip {TABLE}\n"
        f"table ip {TABLE} {{\n"
        "  chain output {\n"
        "    type filter hook output priority 0; policy accept;\n" + "".join(rules) + "  }\n}\n"
    )


def between(group_a: Iterable[str], group_b: Iterable[str]) -> frozenset[Link]:
    """Both directions between every member of ``group_a`` and every member of ``group_b``."""
    a, b = list(group_a), list(group_b)
    return frozenset(
        {(x, y) for x in a for y in b if x != y} | {(y, x) for x in a for y in b if x != y}
    )


def one_way(source: str, targets: Iterable[str]) -> frozenset[Link]:
    """Packets from ``source`` to each target are dropped; the other direction flows."""
    return frozenset((source, t) for t in targets if t != source)
