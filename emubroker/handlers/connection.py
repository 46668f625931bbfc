"""The command handler of one connection: lifetime, task group and dispatch.

``handle_frame`` is called by the session's reader for every frame and never blocks: hot
fire-and-forget commands (SEND, FLOW, ACK, REDELIVER) and cheap queries are handled inline,
requests that wait on something run as tasks in the handler's task group (so pipelined lookups
and subscribes proceed concurrently). The work itself lives in the command groups.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, TypeVarTuple

import anyio

from emubroker.handlers.access import BROKER_FEATURES, ConnectionAccess
from emubroker.handlers.common import SERVER_VERSION, ConnectionInfo
from emubroker.handlers.consumers import ConsumerCommands
from emubroker.handlers.discovery import DiscoveryCommands
from emubroker.handlers.producers import ProducerCommands
from protocol import commands as c
from protocol.connection import negotiated_version
from protocol.errors import ServerError

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from anyio.abc import TaskGroup, TaskStatus

    from emubroker.handlers.common import BrokerServices, SessionPort
    from protocol.framing import Frame
    from protocol.runs import SendRun

__all__ = ["ConnectionHandler"]

log = logging.getLogger(__name__)

Ts = TypeVarTuple("Ts")


class ConnectionHandler:
    """The command handler of one connection (``net.session.FrameHandler``).

    Args:
        services: The broker's shared services.
        session: The connection: where replies go, and the sink handed to topics.
    """

    def __init__(self, services: BrokerServices, session: SessionPort) -> None:
        self._services = services
        self._session = session
        self._send = session.send_command
        self._tg: TaskGroup | None = None
        security = services.security
        self._access: ConnectionAccess | None = None
        if security is not None and security.authentication is not None:
            assert services.clock is not None, "authentication needs the broker's clock"
            self._access = ConnectionAccess(
                security,
                session,
                services.clock,
                self._start,
                server_version=SERVER_VERSION,
                max_message_size=services.config.maxMessageSize,
                peer_certificate=session.peer_certificate,
            )
        access = self._access
        self._info = info = ConnectionInfo()
        self._producers = ProducerCommands(services, session, self._start, access, info)
        self._consumers = ConsumerCommands(services, session, self._start, access, info)
        self._discovery = DiscoveryCommands(services, session, self._start, access)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run the request tasks until cancelled, then release the connection's handles.

        Closing its producers and consumers makes their unacknowledged messages redeliverable
        (spec §9 step 5).
        """
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                task_status.started()
                await anyio.Event().wait()  # requests start in tg; we live until cancelled
        finally:
            with anyio.CancelScope(shield=True):
                await self._producers.release_all()
                await self._consumers.release_all()

    def _start(self, fn: Callable[[*Ts], Coroutine[Any, Any, None]], /, *args: *Ts) -> None:
        assert self._tg is not None, "handle_frame before run() started"
        self._tg.start_soon(fn, *args)

    def handle_frame(self, frame: Frame) -> None:
        """Handle one frame from the client (never blocks)."""
        command = frame.command
        producers, consumers, discovery = self._producers, self._consumers, self._discovery
        # Hot commands first: each case is an isinstance check.
        match command:
            case c.Send():
                producers.on_send(command, frame)
            case c.Flow():
                consumers.on_flow(command)
            case c.Ack():
                consumers.on_ack(command)
            case c.RedeliverUnacknowledgedMessages():
                consumers.on_redeliver(command)
            case c.LookupTopic():
                discovery.start_lookup(command)
            case c.PartitionedTopicMetadata():
                discovery.start_partitioned_metadata(command)
            case c.Producer():
                producers.on_producer(command)
            case c.Subscribe():
                consumers.on_subscribe(command)
            case c.CloseProducer():
                self._start(producers.on_close_producer, command)
            case c.CloseConsumer():
                self._start(consumers.on_close_consumer, command)
            case c.Seek():
                self._start(consumers.on_seek, command)
            case c.Unsubscribe():
                self._start(consumers.on_unsubscribe, command)
            case c.GetLastMessageId():
                consumers.on_get_last_message_id(command)
            case c.GetTopicsOfNamespace():
                discovery.on_get_topics(command)
            case c.ConsumerStats():
                consumers.on_consumer_stats(command)
            case c.GetSchema():
                discovery.on_get_schema(command)
            case c.GetOrCreateSchema():
                discovery.on_get_or_create_schema(command)
            case (
                c.TcClientConnectRequest()
                | c.NewTxn()
                | c.AddPartitionToTxn()
                | c.AddSubscriptionToTxn()
                | c.EndTxn()
            ):
                # No transaction coordinator (Pulsar's transactionCoordinatorEnabled=false, its
                # default): ServerCnx.checkTransactionEnableAndSendError's answer.
                self._send(
                    c.Error(
                        request_id=command.request_id,
                        error=ServerError.NotAllowedError,
                        message="Transactions are not enabled.",
                    )
                )
            case c.Connect():
                self._info.client_version = command.client_version
                if self._access is not None:
                    self._access.on_connect(command)
                    return
                self._send(
                    c.Connected(
                        server_version=SERVER_VERSION,
                        protocol_version=negotiated_version(command.protocol_version),
                        max_message_size=self._services.config.maxMessageSize,
                        feature_flags=BROKER_FEATURES,
                    )
                )
            case c.AuthResponse():
                if self._access is None:
                    self._session.close("AUTH_RESPONSE without authentication")
                    return
                self._access.on_auth_response(command)
            case _:
                # Reached only by commands the core admits but we do not serve.
                self._session.close(f"unexpected {type(command).__name__}")

    def handle_send_run(self, run: SendRun) -> None:
        """Handle a run of one producer's SENDs (``protocol.runs``; never blocks)."""
        self._producers.on_send_run(run)

    def flush(self) -> None:
        """After the frames of one read: publish the SENDs they queued (one write of receipts)."""
        self._producers.flush()

    def writable_again(self) -> None:
        """The connection's outbox drained below its low water mark: resume deliveries."""
        self._consumers.writable_again()

    def consumer_closed_by_broker(self, consumer_id: int) -> None:
        """The topics closed this consumer (unload, seek): forget it."""
        self._consumers.closed_by_broker(consumer_id)

    def producer_closed_by_broker(self, producer_id: int) -> None:
        """The topics closed this producer (unload, fencing): forget it."""
        self._producers.closed_by_broker(producer_id)
