"""The active controller appends ``storage format``'s bootstrap records (``--add-scram``)
once: first, on a log without metadata records, and never on one that holds any."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

from odradek.controller.image import MetadataImage
from odradek.protocol.metadata import (
    NoOpRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from odradek.protocol.metadata_record import decode_metadata_record, encode_metadata_record
from odradek.raft.log import Entry, MemoryRaftLog
from odradek.security.principal import KafkaPrincipal
from odradek.shell.controller_service import ControllerService

CREDENTIAL = UserScramCredentialRecord(
    name="admin", mechanism=2, salt=b"s", stored_key=b"k1", server_key=b"k2", iterations=4096
)
BOOTSTRAP = [encode_metadata_record(CREDENTIAL)]


class LeaderQuorum:
    """A metadata quorum this node leads: each proposal is one entry of its log, committed
    and replayed into the image at once."""

    writable = True
    is_leader = True

    def __init__(self, raft_log: MemoryRaftLog, image: MetadataImage, epoch: int = 1) -> None:
        self.raft = SimpleNamespace(epoch=epoch, log=raft_log)
        self.image = image

    async def propose(self, records: list[bytes]) -> int:
        raft_log: MemoryRaftLog = self.raft.log
        offset = raft_log.end_offset()
        raft_log.append([Entry(offset, self.raft.epoch, tuple(records))])
        for i, value in enumerate(records):
            self.image.replay(decode_metadata_record(value)[0], offset + i)
        return offset


async def _forward(payload: bytes, principal: KafkaPrincipal, host: str) -> bytes:
    return payload


def service(quorum: LeaderQuorum, bootstrap: list[bytes]) -> ControllerService:
    return ControllerService(
        cast(Any, quorum),
        lambda: quorum.image,
        "c",
        9000,
        _forward,
        bootstrap_records=bootstrap,
    )


def logged(raft_log: MemoryRaftLog) -> list[object]:
    """Every metadata record of the log, in order."""
    return [
        decode_metadata_record(value)[0]
        for entry in raft_log.entries_from(0, 1000)
        if entry.control is None
        for value in entry.records
    ]


def test_the_first_write_on_an_empty_log_comes_after_the_bootstrap_records() -> None:
    raft_log, image = MemoryRaftLog(), MetadataImage()
    quorum = LeaderQuorum(raft_log, image)
    # The quorum's own NoOpRecords and control records do not make the log non-empty.
    asyncio.run(quorum.propose([encode_metadata_record(NoOpRecord())]))
    raft_log.append([Entry(raft_log.end_offset(), 1, (b"leader change",), control=2)])
    controller = service(quorum, BOOTSTRAP)

    async def write() -> None:
        async with controller.write_lock:
            await controller.commit([NoOpRecord()])
            await controller.commit([NoOpRecord()])

    asyncio.run(write())
    assert logged(raft_log) == [NoOpRecord(), CREDENTIAL, NoOpRecord(), NoOpRecord()]
    assert set(image.scram_credentials) == {(2, "admin")}


def test_an_idle_new_leader_appends_them_on_its_timer_once() -> None:
    raft_log, image = MemoryRaftLog(), MetadataImage()
    quorum = LeaderQuorum(raft_log, image)
    controller = service(quorum, BOOTSTRAP)
    asyncio.run(controller.expire_sessions())
    asyncio.run(controller.expire_sessions())
    assert logged(raft_log) == [CREDENTIAL]


def test_a_log_that_holds_records_gets_none() -> None:
    raft_log, image = MemoryRaftLog(), MetadataImage()
    quorum = LeaderQuorum(raft_log, image)
    asyncio.run(quorum.propose(BOOTSTRAP))  # an earlier controller bootstrapped this log
    controller = service(quorum, BOOTSTRAP)
    asyncio.run(controller.expire_sessions())
    assert logged(raft_log) == [CREDENTIAL]


def test_deleted_credentials_do_not_come_back_at_the_next_failover() -> None:
    raft_log, image = MemoryRaftLog(), MetadataImage()
    first = LeaderQuorum(raft_log, image, epoch=1)
    asyncio.run(service(first, BOOTSTRAP).expire_sessions())
    removal = RemoveUserScramCredentialRecord(name="admin", mechanism=2)
    asyncio.run(first.propose([encode_metadata_record(removal)]))
    assert image.scram_credentials == {}
    # The image is empty again, but the log remembers: a new leader appends nothing.
    second = LeaderQuorum(raft_log, image, epoch=2)
    asyncio.run(service(second, BOOTSTRAP).expire_sessions())
    assert logged(raft_log) == [CREDENTIAL, removal]
    assert image.scram_credentials == {}


def test_without_bootstrap_records_nothing_is_appended() -> None:
    raft_log, image = MemoryRaftLog(), MetadataImage()
    controller = service(LeaderQuorum(raft_log, image), [])
    asyncio.run(controller.expire_sessions())
    assert raft_log.end_offset() == 0
