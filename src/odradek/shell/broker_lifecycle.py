"""A broker's life with the controller: register, heartbeat, get unfenced (KIP-631).

The broker registers with the active controller (BrokerRegistration: its id, a new
incarnation id per process start, its listeners and log dirs) and gets a broker epoch.
It then heartbeats with the metadata offset it has applied; the controller unfences it
once it has caught up to its own registration, and fences it again when heartbeats stop
for ``broker.session.timeout.ms``. While fenced the broker heartbeats often, so that it
joins quickly; afterwards every ``broker.heartbeat.interval.ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable

from odradek.controller.unclean_history import LOSS_REPORTS_TAG, LossReport, encode_loss_reports
from odradek.protocol.error_codes import ErrorCode
from odradek.protocol.messages import BrokerHeartbeatRequest, BrokerRegistrationRequest
from odradek.protocol.messages.broker_registration_request import Listener
from odradek.shell.peer_client import (
    PLAINTEXT,
    ClientSecurity,
    PeerConnection,
    PeerPool,
    PeerUnavailable,
)
from odradek.shell.quorum import QuorumDriver

log = logging.getLogger("odradek.broker")

FENCED_HEARTBEAT_MS = 100
NO_CONTROLLER_GIVE_UP_S = 2.0
REGISTRATION_VERSION = 4
HEARTBEAT_VERSION = 1


class BrokerLifecycle:
    def __init__(
        self,
        *,
        broker_id: int,
        cluster_id: str,
        listeners: list[tuple[str, str, int, int]],
        rack: str | None,
        log_dirs: list[uuid.UUID],
        quorum: QuorumDriver,
        metadata_offset: Callable[[], int],
        heartbeat_interval_ms: int,
        request_timeout_ms: int,
        previous_broker_epoch: int = -1,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        """``security``: how to connect to the controller listener (TLS, SASL)."""
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.listeners = listeners
        self.rack = rack
        self.log_dirs = log_dirs
        self.quorum = quorum
        self.metadata_offset = metadata_offset
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.request_timeout_ms = request_timeout_ms
        self.incarnation_id = uuid.uuid4()
        # The epoch this broker had when it last stopped cleanly (-1: it did not): the
        # controller then lets the new incarnation replace the old one at once.
        self.previous_broker_epoch = previous_broker_epoch
        self.broker_epoch = -1
        self.fenced = True
        self.unfenced = asyncio.Event()
        self._peers = PeerPool(f"broker-{broker_id}", security)
        # Reports not yet committed by the controller, each with the event its
        # partition's fetcher waits on (see :meth:`report_loss`).
        self._loss_reports: list[tuple[LossReport, asyncio.Event]] = []
        self._wake = asyncio.Event()
        # Log dirs that failed here (KIP-858): every heartbeat names them from then on,
        # and the event is set once the controller has answered one that did.
        self.offline_log_dirs: list[uuid.UUID] = []
        self._offline_told = asyncio.Event()
        self._rotation = -1

    async def run(self) -> None:
        while True:
            address = self._controller_address()
            delay_ms = FENCED_HEARTBEAT_MS
            if address is not None:
                try:
                    if self.broker_epoch < 0:
                        await self._register(address)
                    else:
                        await self._heartbeat(address)
                    if not self.fenced and not self._loss_reports and not self.offline_log_dirs:
                        # (A report not yet recorded is tried again soon: its replica
                        # waits for it.)
                        delay_ms = self.heartbeat_interval_ms
                except (PeerUnavailable, TimeoutError) as e:
                    # Try again soon: the controller fences a broker whose heartbeat
                    # connection closed unless it hears from it again within
                    # broker.session.connection.loss.ms.
                    log.debug("controller %s unreachable: %s", address, e)
            # A loss report wakes the loop early: its replica waits for it to be recorded.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay_ms / 1000)
            self._wake.clear()

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask the controller to move leadership off this broker before it stops
        (heartbeats with want_shut_down); True once the controller says it may stop."""
        if self.broker_epoch < 0:
            return True  # never registered: nothing to hand over
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        unreachable_since: float | None = None
        while loop.time() < deadline:
            address = self._controller_address()
            response = None
            if address is not None:
                try:
                    response = await self._peer(address).request(
                        BrokerHeartbeatRequest(
                            broker_id=self.broker_id,
                            broker_epoch=self.broker_epoch,
                            current_metadata_offset=self.metadata_offset(),
                            want_fence=False,
                            want_shut_down=True,
                            offline_log_dirs=list(self.offline_log_dirs),
                        ),
                        HEARTBEAT_VERSION,
                        self.request_timeout_ms / 1000,
                    )
                except (PeerUnavailable, TimeoutError):
                    response = None
            if response is not None and response.error_code == ErrorCode.NONE:
                unreachable_since = None
                if response.should_shut_down:
                    log.info("broker %d: leadership handed over; stopping", self.broker_id)
                    return True
            else:
                # No controller answers (the other nodes may be stopping too): nobody can
                # take the leaderships, so waiting the whole timeout helps nothing.
                unreachable_since = unreachable_since or loop.time()
                if loop.time() - unreachable_since > NO_CONTROLLER_GIVE_UP_S:
                    break
            await asyncio.sleep(FENCED_HEARTBEAT_MS / 1000)
        log.warning(
            "broker %d: controlled shutdown did not finish (no controller took the "
            "leaderships); stopping anyway",
            self.broker_id,
        )
        return False

    async def close(self) -> None:
        await self._peers.close()

    def _controller_address(self) -> tuple[str, int] | None:
        node = self.quorum.node
        if node is None:
            return None
        if self.quorum.halted is not None:
            # This replica left the quorum (its metadata log failed) and follows it no
            # more: ask the last leader it knew, then every other voter in turn, until
            # the active controller answers.
            me = self.broker_id
            candidates = list(
                dict.fromkeys(
                    [
                        *([node.leader] if node.leader not in (None, me) else []),
                        *(v.node_id for v in node.voters if v.node_id != me),
                    ]
                )
            )
            if not candidates:
                return None
            self._rotation += 1
            return self.quorum.address_of(candidates[self._rotation % len(candidates)])
        if node.leader is None:
            return None
        return self.quorum.address_of(node.leader)

    def _peer(self, address: tuple[str, int]) -> PeerConnection:
        return self._peers.get(address)

    async def _register(self, address: tuple[str, int]) -> None:
        request = BrokerRegistrationRequest(
            broker_id=self.broker_id,
            cluster_id=self.cluster_id,
            incarnation_id=self.incarnation_id,
            listeners=[
                Listener(name=name, host=host, port=port, security_protocol=protocol)
                for name, host, port, protocol in self.listeners
            ],
            features=[],
            rack=self.rack,
            log_dirs=self.log_dirs,
            previous_broker_epoch=self.previous_broker_epoch,
        )
        response = await self._peer(address).request(
            request, REGISTRATION_VERSION, self.request_timeout_ms / 1000
        )
        if response.error_code != ErrorCode.NONE:
            log.warning(
                "broker registration refused by %s: %s",
                address,
                ErrorCode(response.error_code).name,
            )
            return
        self.broker_epoch = response.broker_epoch
        log.info("broker %d registered with epoch %d", self.broker_id, self.broker_epoch)
        await self._heartbeat(address)

    def report_offline_log_dirs(self, directories: list[uuid.UUID]) -> asyncio.Event:
        """Tell the active controller now, in a heartbeat, that these log dirs failed;
        the event is set once it has answered (it moved this broker's leaderships and
        took it out of every ISR before answering)."""
        for directory in directories:
            if directory not in self.offline_log_dirs:
                self.offline_log_dirs.append(directory)
        self._wake.set()
        return self._offline_told

    def report_loss(self, report: LossReport) -> asyncio.Event:
        """Tell the active controller, with a heartbeat sent now, that this broker
        dropped records an unclean election gave up. The returned event is set once
        the controller has committed the report: the replica fetches again only then,
        so a partition is fully in sync again only when its record of losses is whole.
        (Held in memory: after a crash the quarantine still has the records, and the
        truncation's log line.)"""
        delivered = asyncio.Event()
        self._loss_reports.append((report, delivered))
        self._wake.set()
        return delivered

    async def _heartbeat(self, address: tuple[str, int]) -> None:
        pending = list(self._loss_reports)
        reports = [report for report, _ in pending]
        request = BrokerHeartbeatRequest(
            broker_id=self.broker_id,
            broker_epoch=self.broker_epoch,
            current_metadata_offset=self.metadata_offset(),
            want_fence=False,
            want_shut_down=False,
            offline_log_dirs=list(self.offline_log_dirs),
            unknown_tagged_fields=(
                [(LOSS_REPORTS_TAG, encode_loss_reports(reports))] if reports else []
            ),
        )
        told = bool(self.offline_log_dirs)
        response = await self._peer(address).request(
            request, HEARTBEAT_VERSION, self.request_timeout_ms / 1000
        )
        if told and response.error_code == ErrorCode.NONE:
            self._offline_told.set()
        if response.error_code == ErrorCode.NONE and pending:
            # Answered after the controller committed them.
            del self._loss_reports[: len(pending)]
            for _, delivered in pending:
                delivered.set()
        if response.error_code == ErrorCode.STALE_BROKER_EPOCH:
            log.warning("broker epoch %d is stale; registering again", self.broker_epoch)
            self.broker_epoch = -1
            return
        if response.error_code != ErrorCode.NONE:
            return  # NOT_CONTROLLER and the like: ask the next leader
        if response.is_fenced != self.fenced:
            self.fenced = response.is_fenced
            log.info("broker %d is %s", self.broker_id, "fenced" if self.fenced else "unfenced")
        if not self.fenced:
            self.unfenced.set()
