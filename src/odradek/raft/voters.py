"""The voter set (KIP-853): who votes, as the last VotersRecord in the log says.

A voter is a replica key (node id and directory id) plus the endpoints other nodes use to
reach it. The directory id is what makes a replaced disk a new replica: a node that comes
back with a fresh disk has a new directory id and is not the voter it used to be, so it
cannot vote with a log it no longer has.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from odradek.core.errors import DecodeError
from odradek.core.invariant import invariant
from odradek.protocol.messages.voters_record import Endpoint as WireEndpoint
from odradek.protocol.messages.voters_record import KRaftVersionFeature, VotersRecord
from odradek.protocol.messages.voters_record import Voter as WireVoter

#: The KRaft protocol version this build speaks; 1 is the one with dynamic voters.
KRAFT_VERSION = 1

ZERO_DIRECTORY = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class VoterEndpoint:
    """A listener of a voter: its name (``CONTROLLER``), host and port."""

    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class ReplicaKey:
    """A replica of the metadata log: node id plus the id of the directory it lives in."""

    node_id: int
    directory_id: uuid.UUID = ZERO_DIRECTORY


@dataclass(frozen=True, slots=True)
class Voter:
    node_id: int
    directory_id: uuid.UUID
    endpoints: tuple[VoterEndpoint, ...] = ()

    @property
    def key(self) -> ReplicaKey:
        return ReplicaKey(self.node_id, self.directory_id)


@dataclass(frozen=True, slots=True)
class VoterSet:
    """An immutable set of voters, unique by node id, kept sorted by node id."""

    voters: tuple[Voter, ...]

    def __post_init__(self) -> None:
        ids = [v.node_id for v in self.voters]
        invariant(len(ids) == len(set(ids)), f"voter set lists a node twice: {ids}")
        invariant(ids == sorted(ids), f"voter set not sorted by node id: {ids}")

    @classmethod
    def of(cls, voters: Iterable[Voter]) -> VoterSet:
        return cls(tuple(sorted(voters, key=lambda v: v.node_id)))

    @classmethod
    def static(cls, node_ids: Iterable[int]) -> VoterSet:
        """Voters known only by id (``controller.quorum.voters``; directory ids unknown)."""
        return cls.of(Voter(i, ZERO_DIRECTORY) for i in node_ids)

    def __iter__(self) -> Iterator[Voter]:
        return iter(self.voters)

    def __len__(self) -> int:
        return len(self.voters)

    @property
    def ids(self) -> frozenset[int]:
        return frozenset(v.node_id for v in self.voters)

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def get(self, node_id: int) -> Voter | None:
        for voter in self.voters:
            if voter.node_id == node_id:
                return voter
        return None

    def is_voter(self, key: ReplicaKey) -> bool:
        """True when ``key`` is a voter; a zero directory id on either side matches any."""
        voter = self.get(key.node_id)
        if voter is None:
            return False
        return (
            voter.directory_id == ZERO_DIRECTORY
            or key.directory_id == ZERO_DIRECTORY
            or voter.directory_id == key.directory_id
        )

    def with_voter(self, voter: Voter) -> VoterSet:
        invariant(self.get(voter.node_id) is None, f"node {voter.node_id} is already a voter")
        return VoterSet.of([*self.voters, voter])

    def without(self, node_id: int) -> VoterSet:
        invariant(self.get(node_id) is not None, f"node {node_id} is not a voter")
        return VoterSet(tuple(v for v in self.voters if v.node_id != node_id))

    def replaced(self, voter: Voter) -> VoterSet:
        return VoterSet.of([*(v for v in self.voters if v.node_id != voter.node_id), voter])

    def encode(self) -> bytes:
        """The value of a VotersRecord control record."""
        record = VotersRecord(
            version=0,
            voters=[
                WireVoter(
                    voter_id=v.node_id,
                    voter_directory_id=v.directory_id,
                    endpoints=[WireEndpoint(e.name, e.host, e.port) for e in v.endpoints],
                    k_raft_version_feature=KRaftVersionFeature(0, KRAFT_VERSION),
                )
                for v in self.voters
            ],
        )
        return record.encode(0)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> VoterSet:
        record = VotersRecord.decode(data, 0)
        voters = [
            Voter(
                w.voter_id,
                w.voter_directory_id,
                tuple(VoterEndpoint(e.name, e.host, e.port) for e in w.endpoints),
            )
            for w in record.voters
        ]
        ids = [v.node_id for v in voters]
        if len(ids) != len(set(ids)):
            raise DecodeError(f"VotersRecord lists a node twice: {ids}")
        return cls.of(voters)
