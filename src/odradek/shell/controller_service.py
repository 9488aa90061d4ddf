"""The controller listener: the KRaft RPCs and the active controller's commands.

Requests that arrive on a controller listener (``controller.listener.names``):

* the quorum's own RPCs (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch of the metadata
  partition, FetchSnapshot) go to the :class:`~odradek.shell.quorum.QuorumDriver`;
* DescribeQuorum, AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter are answered from
  the Raft core (voter changes once committed);
* Envelope carries a client's admin request that a broker forwards because it writes
  metadata (KIP-590): the active controller runs it through its own broker handlers;
* BrokerRegistration, BrokerHeartbeat and AlterPartition are commands of the active
  controller (:class:`~odradek.controller.controller.QuorumControllerState`): decided on
  the image, their records appended as one batch, answered once committed.

A controller formatted with ``--add-scram`` holds bootstrap records
(``bootstrap.checkpoint``). The first time it leads a metadata log that holds no
metadata records yet (NoOpRecords aside: the quorum writes those itself), it appends
them before anything else it writes, as Kafka's QuorumController does with its
bootstrap metadata on an empty log. A controller that becomes active later finds the
log holding records and appends nothing, so they enter the log once.

Commands run one at a time under :attr:`ControllerService.write_lock` and wait for
their commit before the next one is decided, so every decision sees the committed result
of the one before (the same guarantee Kafka's controller gets from applying its records
before commit, without a speculative image to roll back on failover).
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from odradek.broker.authorization import Authorization
from odradek.broker.effects import ControllerCall, Outcome
from odradek.broker.router import Request
from odradek.controller.controller import QuorumControllerState
from odradek.controller.elections import unclean_leader_election
from odradek.controller.elr import cluster_min_isr_record
from odradek.controller.image import MetadataImage
from odradek.controller.preferred import imbalanced_partitions, preferred_election
from odradek.controller.reassignment import complete_reassignments
from odradek.controller.unclean_history import history_records
from odradek.core.errors import DecodeError
from odradek.protocol.api import RESPONSES
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BeginQuorumEpochRequest,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    DescribeQuorumRequest,
    EndQuorumEpochRequest,
    EnvelopeRequest,
    EnvelopeResponse,
    FetchRequest,
    FetchSnapshotRequest,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    UpdateRaftVoterRequest,
    UpdateRaftVoterResponse,
    VoteRequest,
)
from odradek.protocol.metadata import NoOpRecord
from odradek.protocol.metadata_record import decode_metadata_record, encode_metadata_record
from odradek.raft.core import RaftNode
from odradek.raft.voters import ReplicaKey, Voter, VoterEndpoint
from odradek.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from odradek.security.principal import KafkaPrincipal, deserialize_principal

# Broker sessions are timeouts: the monotonic clock. Only what is stamped into the
# metadata (an unclean election's time) is wall-clock time.
from odradek.shell.clock import monotonic_ms, now_ms
from odradek.shell.quorum import NotController, QuorumDriver

log = logging.getLogger("odradek.controller")

#: The versions served on the controller listener.
CONTROLLER_APIS: dict[int, tuple[int, int]] = {
    VoteRequest.API_KEY: (0, 1),
    BeginQuorumEpochRequest.API_KEY: (0, 1),
    EndQuorumEpochRequest.API_KEY: (0, 1),
    FetchRequest.API_KEY: (13, 17),
    FetchSnapshotRequest.API_KEY: (0, 1),
    DescribeQuorumRequest.API_KEY: (0, 2),
    AddRaftVoterRequest.API_KEY: (0, 0),
    RemoveRaftVoterRequest.API_KEY: (0, 0),
    UpdateRaftVoterRequest.API_KEY: (0, 0),
    BrokerRegistrationRequest.API_KEY: (0, 4),
    BrokerHeartbeatRequest.API_KEY: (0, 1),
    AlterPartitionRequest.API_KEY: (0, 3),
    EnvelopeRequest.API_KEY: (0, 0),
}

CONTROLLER_OPERATIONS: dict[int, AclOperation] = {
    DescribeQuorumRequest.API_KEY: AclOperation.DESCRIBE,
    AddRaftVoterRequest.API_KEY: AclOperation.ALTER,
    RemoveRaftVoterRequest.API_KEY: AclOperation.ALTER,
}
"""What the controller APIs need on the cluster besides CLUSTER_ACTION (the default)."""

RAFT_APIS = frozenset(
    {
        VoteRequest.API_KEY,
        BeginQuorumEpochRequest.API_KEY,
        EndQuorumEpochRequest.API_KEY,
        FetchRequest.API_KEY,
        FetchSnapshotRequest.API_KEY,
    }
)


def route(header: Any, body: Any) -> Outcome:
    """The router's handler for every controller API: the service answers it."""
    return ControllerCall(header, body)


class ControllerService:
    def __init__(
        self,
        quorum: QuorumDriver,
        image: Callable[[], MetadataImage],
        cluster_id: str,
        session_timeout_ms: int,
        forwarded: Callable[[bytes, KafkaPrincipal, str], Awaitable[bytes]],
        connection_loss_ms: int = -1,
        authorization: Authorization | None = None,
        bootstrap_records: Sequence[bytes] = (),
    ) -> None:
        self.quorum = quorum
        self.authorization = authorization
        self._bootstrap_records = list(bootstrap_records)
        self._bootstrap_checked_epoch: int | None = None
        self.connection_loss_ms = connection_loss_ms
        # Which broker heartbeats on which inbound connection (by peer address), so
        # that a closed connection can end that broker's session early.
        self._heartbeat_peers: dict[str, int] = {}
        self._silent_voters_checked = False
        self._latest_peer: dict[int, str] = {}
        self.forwarded = forwarded
        self.image = image
        self.cluster_id = cluster_id
        self.session_timeout_ms = session_timeout_ms
        self.write_lock = asyncio.Lock()
        self._state: QuorumControllerState | None = None
        self._state_epoch: int | None = None
        self.offline: dict[tuple[str, int], list[int]] = {}

    # ------------------------------------------------------------------ dispatch

    def connection_closed(self, peer: str) -> None:
        """An inbound connection closed; if a broker heartbeated on it, it is fenced
        after ``broker.session.connection.loss.ms`` unless it heartbeats again."""
        broker_id = self._heartbeat_peers.pop(peer, None)
        if broker_id is None or self._latest_peer.get(broker_id) != peer:
            return  # it heartbeats on a newer connection already
        if self._state is None or not self.quorum.writable:
            return
        if self._state_epoch != self.quorum.raft.epoch:
            return
        log.info("broker %d: heartbeat connection from %s closed", broker_id, peer)
        self._state.heartbeats.connection_lost(broker_id, monotonic_ms())

    async def handle(self, call: ControllerCall, peer: str = "?") -> Any:
        header, body = call.header, call.body
        refusal = self._refusal(header, peer)
        if refusal is not None:
            return refusal
        if isinstance(body, BrokerRegistrationRequest | BrokerHeartbeatRequest):
            self._heartbeat_peers[peer] = body.broker_id
            self._latest_peer[body.broker_id] = peer
        api_key = header.request_api_key
        if api_key in RAFT_APIS:
            return await self.quorum.handle(body)
        if isinstance(body, DescribeQuorumRequest):
            response = self.quorum.describe()
            if not self.quorum.is_leader:
                # Only the leader knows every replica's progress: send the asker there.
                response.topics[0].partitions[0].error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            return response
        if isinstance(body, AddRaftVoterRequest):
            return await self._add_voter(body)
        if isinstance(body, RemoveRaftVoterRequest):
            return await self._remove_voter(body)
        if isinstance(body, UpdateRaftVoterRequest):
            return await self._update_voter(body)
        if isinstance(body, BrokerRegistrationRequest):
            return await self._command(
                lambda s, nxt: s.register_broker(body, nxt, monotonic_ms()),
                lambda error: BrokerRegistrationResponse(error_code=error, broker_epoch=-1),
            )
        if isinstance(body, BrokerHeartbeatRequest):
            return await self._command(
                lambda s, nxt: s.broker_heartbeat(body, nxt, monotonic_ms()),
                lambda error: BrokerHeartbeatResponse(error_code=error, is_fenced=True),
            )
        if isinstance(body, EnvelopeRequest):
            # A broker forwards a client's admin request that writes metadata (KIP-590):
            # run it here, as the active controller, and send back the whole response.
            if not self.quorum.writable:
                return EnvelopeResponse(error_code=ErrorCode.NOT_CONTROLLER)
            try:
                principal = deserialize_principal(body.request_principal or b"")
                host = str(ipaddress.ip_address(body.client_host_address or b""))
            except (DecodeError, ValueError):
                return EnvelopeResponse(error_code=ErrorCode.INVALID_REQUEST)
            try:
                data = await self.forwarded(body.request_data, principal, host)
            except NotController:
                return EnvelopeResponse(error_code=ErrorCode.NOT_CONTROLLER)
            return EnvelopeResponse(response_data=data, error_code=ErrorCode.NONE)
        if isinstance(body, AlterPartitionRequest):
            version = header.request_api_version
            return await self._command(
                lambda s, nxt: s.alter_partition(body, version),
                lambda error: AlterPartitionResponse(error_code=error),
            )
        raise AssertionError(f"no controller handler for API {api_key}")

    def _refusal(self, header: Any, peer: str) -> Any:
        """CLUSTER_AUTHORIZATION_FAILED when the principal may not make this request: the
        quorum's and the brokers' own requests need CLUSTER_ACTION (only nodes make
        them), DescribeQuorum DESCRIBE and a voter change ALTER on the cluster."""
        if self.authorization is None or not isinstance(header, Request):
            return None
        api_key = header.request_api_key
        operation = CONTROLLER_OPERATIONS.get(api_key, AclOperation.CLUSTER_ACTION)
        authorizer = self.authorization.authorizer(self.image().acls)
        if authorizer.authorize(
            header.principal, header.host, operation, ResourceType.CLUSTER, CLUSTER_NAME
        ):
            return None
        log.warning(
            "refused %s from %s (%s): it needs %s on the cluster",
            RESPONSES[api_key].NAME.removesuffix("Response"),
            peer,
            header.principal,
            operation.name,
        )
        return RESPONSES[api_key](error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)

    # ------------------------------------------------------------------ commands

    def _controller_state(self) -> QuorumControllerState | None:
        """The command state while this node is the active controller (new each epoch:
        broker sessions are not in the log and start afresh after a failover)."""
        if not self.quorum.writable:
            return None
        epoch = self.quorum.raft.epoch
        if self._state is None or self._state_epoch != epoch:
            self._silent_voters_checked = False
            self._state = QuorumControllerState(
                self.image(),
                cluster_id=self.cluster_id,
                activated_ms=monotonic_ms(),
                session_timeout_ms=self.session_timeout_ms,
                connection_loss_ms=self.connection_loss_ms,
            )
            self._state_epoch = epoch
        self._state.image = self.image()
        return self._state

    async def _command(
        self,
        decide: Callable[[QuorumControllerState, int], Any],
        not_controller: Callable[[int], Any],
    ) -> Any:
        async with self.write_lock:
            state = self._controller_state()
            if state is None:
                return not_controller(ErrorCode.NOT_CONTROLLER)
            result = decide(state, self.quorum.raft.log.end_offset())
            if result.records:
                try:
                    await self.commit(result.records)
                except NotController:
                    return not_controller(ErrorCode.NOT_CONTROLLER)
            return result.response

    async def commit(self, records: list[Any]) -> None:
        """Append ``records`` as one batch and wait until committed (and applied).

        The caller holds :attr:`write_lock`."""
        # Every metadata write of this controller passes here, so no record can reach
        # an empty log ahead of the bootstrap records.
        await self._append_bootstrap_records()
        await self.quorum.propose([encode_metadata_record(r) for r in records])

    async def _append_bootstrap_records(self) -> None:
        """Append the bootstrap records, once per leadership epoch at most, if the log
        holds no metadata records yet. The caller holds :attr:`write_lock`."""
        if not self._bootstrap_records or not self.quorum.is_leader:
            return
        epoch = self.quorum.raft.epoch
        if self._bootstrap_checked_epoch == epoch:
            return
        self._bootstrap_checked_epoch = epoch
        if self._log_holds_metadata():
            return
        log.info(
            "the metadata log is empty: appending %d bootstrap records from storage format",
            len(self._bootstrap_records),
        )
        await self.quorum.propose(list(self._bootstrap_records))

    def _log_holds_metadata(self) -> bool:
        """Whether any metadata record other than a NoOpRecord was ever written.

        Read from the leader's log, which holds every committed entry, not from the
        image, which may still be catching up, and which an emptied cluster (every
        credential deleted, nothing else written) would show as empty again: that log
        still holds the removals, so deleted credentials are not brought back."""
        if dataclasses.replace(self.image(), offset=-1) != MetadataImage():
            return True
        raft_log = self.quorum.raft.log
        if raft_log.start_offset() > 0:
            # A snapshot replaced the start of the log: what it covered is unknown here,
            # so take it as written (a cluster snapshots only after it has run a while).
            return True
        offset, end = 0, raft_log.end_offset()
        while offset < end:
            entries = raft_log.entries_from(offset, 100)
            if not entries:
                break
            for entry in entries:
                if entry.control is None and any(
                    not isinstance(decode_metadata_record(value)[0], NoOpRecord)
                    for value in entry.records
                ):
                    return True
            offset = entries[-1].next_offset
        return False

    def check_offline(self) -> None:
        """The offline-partition alarm: a partition with no leader (no eligible replica
        is alive) is logged when it goes offline and again when it has a leader back.
        Nothing is elected from outside the ISR to end it (see unclean.leader.election)."""
        image = self.image()
        now_offline: dict[tuple[str, int], list[int]] = {}
        for topic in image.topics_by_name.values():
            for index, partition in topic.partitions.items():
                if partition.leader < 0:
                    now_offline[(topic.name, index)] = sorted(
                        {*partition.isr, *partition.eligible_leader_replicas}
                    )
        # One line per topic and set of eligible replicas, not per partition: a
        # single-node cluster that stops takes every partition offline at once, and
        # 1,000 lines of the same alarm hide the one that differs.
        went: dict[tuple[str, tuple[int, ...]], list[int]] = {}
        for (name, index), eligible in sorted(now_offline.items()):
            if (name, index) not in self.offline:
                went.setdefault((name, tuple(eligible)), []).append(index)
        for (name, eligible_ids), indexes in went.items():
            log.error(
                "%s offline: no eligible leader is alive (ISR and eligible replicas %s); "
                "it stays offline until one of them returns",
                _partitions(name, indexes),
                list(eligible_ids),
            )
        back: dict[str, list[int]] = {}
        for name, index in sorted(set(self.offline) - set(now_offline)):
            back.setdefault(name, []).append(index)
        for name, indexes in back.items():
            log.warning(
                "%s %s a leader again",
                _partitions(name, indexes),
                "has" if len(indexes) == 1 else "have",
            )
        self.offline = now_offline

    async def unclean_elections(self, enabled_for: Callable[[str], bool]) -> None:
        """Elect an out-of-sync replica for a leaderless partition, only where the
        operator enabled ``unclean.leader.election.enable`` for its topic (default
        false). It is logged as the data loss it may be: records only the old ISR held
        are gone, and every replica that must drop them moves them into quarantine."""
        async with self.write_lock:
            state = self._controller_state()
            if state is None:
                return
            image = self.image()
            records = []
            for name in sorted(image.topics_by_name):
                if not enabled_for(name):
                    continue
                topic = image.topics_by_name[name]
                for index in sorted(topic.partitions):
                    record = unclean_leader_election(
                        image,
                        topic,
                        index,
                        topic.partitions[index],
                        unclean_leader_election_enable=True,
                    )
                    if record is not None:
                        log.error(
                            "UNCLEAN leader election for %s-%d: replica %d was out of sync "
                            "(ISR %s) and now leads; acknowledged records only the old ISR "
                            "held are lost (replicas that truncate move them to quarantine)",
                            name,
                            index,
                            record.leader,
                            topic.partitions[index].isr,
                        )
                        records.append(record)
            if records:
                history = history_records(image, records, now_ms(), requested=False)
                try:
                    await self.commit([*records, *history])
                except NotController:
                    return

    async def rebalance_leaders(self, threshold_percent: int) -> None:
        """Automatic preferred leader election (``auto.leader.rebalance.enable``): move
        leadership back to preferred replicas where a broker's imbalance exceeds
        ``leader.imbalance.per.broker.percentage``."""
        async with self.write_lock:
            state = self._controller_state()
            if state is None:
                return
            image = self.image()
            records, _ = preferred_election(image, imbalanced_partitions(image, threshold_percent))
            if records:
                log.info(
                    "rebalancing leadership to preferred replicas: %d partitions", len(records)
                )
                try:
                    await self.commit(list(records))
                except NotController:
                    return

    async def adopt_static_min_isr(self, static_value: int | None) -> None:
        """Write this controller's static ``min.insync.replicas`` as the cluster default
        when the log has none, so that controller and leaders read one value (KIP-966;
        :mod:`odradek.controller.elr`)."""
        async with self.write_lock:
            if self._controller_state() is None:
                return
            record = cluster_min_isr_record(self.image(), static_value)
            if record is None:
                return
            log.info("min.insync.replicas=%s becomes the cluster default", record.value)
            try:
                await self.commit([record])
            except NotController:
                return

    def _suspect_silent_voters(self, state: QuorumControllerState) -> None:
        """A new active controller knows no broker session, and a broker that died with
        the old controller (a combined node) never heartbeats to it: it would wait the
        whole ``broker.session.timeout.ms``. Voters hear of a new leader at once
        (BeginQuorumEpoch) and fetch from it; so a voter that is also a broker and has
        not fetched within ``broker.session.connection.loss.ms`` of the election is
        treated as a closed connection at the election, and so fenced now unless it
        has heartbeated meanwhile. Checked once per activation; a wrong guess costs a
        leadership move."""
        grace = self.connection_loss_ms
        if self._silent_voters_checked or grace < 0 or not self.quorum.is_leader:
            return
        now = monotonic_ms()
        activated = state.heartbeats.activated_ms
        if now - activated < grace:
            return
        self._silent_voters_checked = True
        image = self.image()
        for voter in sorted(self.quorum.raft.silent_voters()):
            broker = image.brokers.get(voter)
            heard = state.heartbeats.last_contact_ms(voter) > activated
            if broker is not None and not broker.fenced and not heard:
                log.warning(
                    "broker %d: its controller has not fetched from this new leader; "
                    "fencing it unless it heartbeats",
                    voter,
                )
                # Counted from the election: the grace has passed already.
                state.heartbeats.connection_lost(voter, activated)

    async def complete_reassignments(self, min_insync_replicas: Callable[[str, int], int]) -> None:
        """Complete every partition reassignment whose adding replicas have all joined the
        ISR (KIP-455): the removed replicas leave, the leader moves if it was one of them.
        Run after every change on the active controller, so a reassignment a previous
        controller started completes here too."""
        async with self.write_lock:
            if self._controller_state() is None:
                return
            records = complete_reassignments(self.image(), min_insync_replicas)
            if records:
                log.info("completing %d partition reassignment(s)", len(records))
                try:
                    await self.commit(list(records))
                except NotController:
                    return

    async def expire_sessions(self) -> None:
        """Fence the brokers whose session timed out (run on a timer)."""
        async with self.write_lock:
            state = self._controller_state()
            if state is None:
                return
            # This timer runs on every active controller, so an idle new cluster gets
            # its bootstrap records within a tick of the election, not at its first write.
            try:
                await self._append_bootstrap_records()
            except NotController:
                return
            self._suspect_silent_voters(state)
            records = state.fence_stale_brokers(monotonic_ms())
            if records:
                log.warning("fencing brokers without a heartbeat: %d records", len(records))
                try:
                    await self.commit(records)
                except NotController:
                    return

    # ------------------------------------------------------------------ voters

    async def _add_voter(self, body: AddRaftVoterRequest) -> AddRaftVoterResponse:
        if body.cluster_id and body.cluster_id != self.cluster_id:
            return AddRaftVoterResponse(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID)
        voter = _voter(body)
        error, message = await self.quorum.change_voters(
            lambda node, now: node.add_voter(voter, now), max(body.timeout_ms, 1)
        )
        return AddRaftVoterResponse(error_code=error, error_message=message or None)

    async def _remove_voter(self, body: RemoveRaftVoterRequest) -> RemoveRaftVoterResponse:
        if body.cluster_id and body.cluster_id != self.cluster_id:
            return RemoveRaftVoterResponse(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID)
        key = ReplicaKey(body.voter_id, body.voter_directory_id)

        def change(node: RaftNode, now: int) -> Any:
            return node.remove_voter(key, now)

        error, message = await self.quorum.change_voters(change, 30_000)
        return RemoveRaftVoterResponse(error_code=error, error_message=message or None)

    async def _update_voter(self, body: UpdateRaftVoterRequest) -> UpdateRaftVoterResponse:
        if body.cluster_id and body.cluster_id != self.cluster_id:
            return UpdateRaftVoterResponse(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID)
        voter = _voter(body)
        error, _ = await self.quorum.change_voters(
            lambda node, now: node.update_voter(voter, now), 30_000
        )
        return UpdateRaftVoterResponse(error_code=error)


def _voter(body: AddRaftVoterRequest | UpdateRaftVoterRequest) -> Voter:
    """The voter an AddRaftVoter or UpdateRaftVoter request names."""
    return Voter(
        body.voter_id,
        body.voter_directory_id,
        tuple(VoterEndpoint(e.name, e.host, e.port) for e in body.listeners),
    )


def _partitions(topic: str, indexes: list[int]) -> str:
    """``partition t-3``, or ``3 partitions of t (0-1, 5)`` for several (sorted input)."""
    if len(indexes) == 1:
        return f"partition {topic}-{indexes[0]}"
    runs: list[str] = []
    start = previous = indexes[0]
    for index in [*indexes[1:], None]:
        if index is not None and index == previous + 1:
            previous = index
            continue
        runs.append(str(start) if start == previous else f"{start}-{previous}")
        if index is not None:
            start = previous = index
    return f"{len(indexes)} partitions of {topic} ({', '.join(runs)})"
