"""SUBSCRIBE and the consumer commands (spec §7): the consumers of one connection.

FLOW, ACK and REDELIVER are fire-and-forget and go straight to the topic's consumer handle;
GET_LAST_MESSAGE_ID and CONSUMER_STATS are answered inline; SUBSCRIBE, SEEK, UNSUBSCRIBE and
CLOSE_CONSUMER wait on the topic and run as request tasks.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from emubroker.auth import TopicOperation
from emubroker.handlers.common import CommandGroup, as_broker_error, topic_name
from emubroker.topics import SubscribeRequest
from emubroker.topics.limits import check_topic_consumers
from protocol import commands as c
from protocol.errors import BrokerError, ConsumerNotFoundError, MetadataError, ServerError

if TYPE_CHECKING:
    from emubroker.handlers.access import ConnectionAccess
    from emubroker.handlers.common import (
        BrokerServices,
        ConnectionInfo,
        SessionPort,
        StartSoon,
    )
    from emubroker.topics import ConsumerHandle

__all__ = ["ConsumerCommands"]

log = logging.getLogger(__name__)

CONSUMER_NOT_FOUND = "Consumer not found"
"""UNSUBSCRIBE, SEEK and GET_LAST_MESSAGE_ID for an unknown consumer id: Pulsar's ``ServerCnx``
answers MetadataError with this text (ACK and CONSUMER_STATS use ConsumerNotFound)."""


class _Consumer:
    """A consumer of this connection: the topic's handle and the partition it reads."""

    __slots__ = ("handle", "partition")

    def __init__(self, handle: ConsumerHandle, partition: int) -> None:
        self.handle = handle
        self.partition = partition


class ConsumerCommands(CommandGroup):
    """The consumers of one connection."""

    def __init__(
        self,
        services: BrokerServices,
        session: SessionPort,
        start: StartSoon,
        access: ConnectionAccess | None = None,
        info: ConnectionInfo | None = None,
    ) -> None:
        super().__init__(services, session, start, access, info)
        self._consumers: dict[int, _Consumer] = {}
        # Creations in flight: id -> "closed by the client meanwhile" (see ProducerCommands).
        self._pending_consumers: dict[int, bool] = {}

    def on_flow(self, cmd: c.Flow) -> None:
        """FLOW: more permits for a consumer (unknown ids are ignored, as Pulsar does)."""
        consumer = self._consumers.get(cmd.consumer_id)
        if consumer is not None:
            consumer.handle.flow(cmd.message_permits)

    def on_redeliver(self, cmd: c.RedeliverUnacknowledgedMessages) -> None:
        """REDELIVER_UNACKNOWLEDGED_MESSAGES: empty ids mean all unacked (§7.4)."""
        consumer = self._consumers.get(cmd.consumer_id)
        if consumer is not None:
            consumer.handle.redeliver(cmd.message_ids or None)

    def writable_again(self) -> None:
        """The connection takes more again: let each consumer's deliveries resume."""
        for consumer in list(self._consumers.values()):
            consumer.handle.resume_delivery()

    async def release_all(self) -> None:
        """Close every consumer of the connection: their unacked messages become redeliverable."""
        consumers, self._consumers = self._consumers, {}
        for consumer_id, consumer in consumers.items():
            try:
                await consumer.handle.close()
            except Exception:
                log.exception("closing consumer %d failed", consumer_id)

    def on_subscribe(self, cmd: c.Subscribe) -> None:
        """SUBSCRIBE: create the consumer in a task; SUCCESS or ERROR (§7.1)."""
        if cmd.consumer_id in self._consumers:
            self._send(c.Success(request_id=cmd.request_id))
            return
        if cmd.consumer_id in self._pending_consumers:
            self._send(
                c.Error(
                    request_id=cmd.request_id,
                    error=ServerError.ServiceNotReady,
                    message="Consumer is already present on the connection",
                )
            )
            return
        self._pending_consumers[cmd.consumer_id] = False
        self._start(self._create_consumer, cmd)

    async def _create_consumer(self, cmd: c.Subscribe) -> None:
        try:
            name = topic_name(cmd.topic)
            if self._access is not None:
                await self._access.require_topic(
                    name, TopicOperation.CONSUME, "subscribe", subscription=cmd.subscription
                )
            await self._check_serving(name)
            topic = await self._topics.get_topic(name, create=cmd.force_topic_creation)
            # Before the schema, as ServerCnx.handleSubscribe checks it (``limits``).
            check_topic_consumers(topic.limits(), topic.consumer_count)
            schemas = self._services.schemas
            if schemas is not None and cmd.schema is not None:
                # §7.1/§11: an idle topic adopts the consumer's schema, else it must be readable.
                active = topic.producer_count > 0 or topic.consumer_count > 0
                stored = topic.as_persistent()
                if stored is not None:
                    active = active or stored.ledger.count > 0
                await schemas.consumer_schema(name, cmd.schema, topic_active=active)
            request = SubscribeRequest(
                subscription=cmd.subscription,
                sub_type=cmd.sub_type,
                consumer_id=cmd.consumer_id,
                consumer_name=cmd.consumer_name or "",
                durable=cmd.durable,
                initial_position=cmd.initial_position,
                start_message_id=cmd.start_message_id,
                priority_level=cmd.priority_level or 0,
                key_shared_meta=cmd.key_shared_meta,
                read_compacted=cmd.read_compacted,
                metadata={kv.key: kv.value for kv in cmd.metadata},
                client=self._client(),
            )
            handle = await topic.subscribe(request, self._session)
        except Exception as exc:
            self._pending_consumers.pop(cmd.consumer_id, None)
            failure = as_broker_error(exc, "SUBSCRIBE")
            self._send(
                c.Error(request_id=cmd.request_id, error=failure.code, message=failure.message)
            )
            return
        if self._pending_consumers.pop(cmd.consumer_id, False):
            await handle.close()
            self._send(
                c.Error(
                    request_id=cmd.request_id,
                    error=ServerError.ServiceNotReady,
                    message="Closed consumer before creation was complete",
                )
            )
            return
        self._consumers[cmd.consumer_id] = _Consumer(handle, name.partition_index)
        self._send(c.Success(request_id=cmd.request_id))

    def closed_by_broker(self, consumer_id: int) -> None:
        """The topics closed this consumer (unload, seek): forget it."""
        self._consumers.pop(consumer_id, None)

    def on_ack(self, cmd: c.Ack) -> None:
        """ACK: apply it; ACK_RESPONSE only when the client asked with a request id (§7.3)."""
        consumer = self._consumers.get(cmd.consumer_id)
        error: BrokerError | None = None
        if consumer is None:
            error = ConsumerNotFoundError(f"consumer {cmd.consumer_id} not found")
        else:
            if cmd.validation_error is not None:
                log.warning(
                    "consumer %d discarded %s (validation error %d)",
                    cmd.consumer_id,
                    cmd.message_id,
                    cmd.validation_error,
                )
            try:
                consumer.handle.ack(cmd.ack_type, cmd.message_id)
            except Exception as exc:
                error = as_broker_error(exc, "ACK")
        if cmd.request_id is not None:
            self._send(
                c.AckResponse(
                    consumer_id=cmd.consumer_id,
                    request_id=cmd.request_id,
                    error=None if error is None else error.code,
                    message=None if error is None else error.message,
                )
            )

    async def on_close_consumer(self, cmd: c.CloseConsumer) -> None:
        """CLOSE_CONSUMER: detach the consumer (unacked become redeliverable), SUCCESS."""
        consumer = self._consumers.pop(cmd.consumer_id, None)
        if cmd.consumer_id in self._pending_consumers:
            self._pending_consumers[cmd.consumer_id] = True
        if consumer is not None:
            try:
                await consumer.handle.close()
            except Exception:
                log.exception("closing consumer %d failed", cmd.consumer_id)
        # Unknown ids get SUCCESS too: the client only wants to stop waiting (§7.7).
        self._send(c.Success(request_id=cmd.request_id))

    async def on_seek(self, cmd: c.Seek) -> None:
        """SEEK: reset the cursor (the topic closes the consumers), then SUCCESS (§7.5)."""
        consumer = self._consumers.get(cmd.consumer_id)
        try:
            if consumer is None:
                raise MetadataError(CONSUMER_NOT_FOUND)
            # The topic resets the cursor and closes every consumer of the subscription (CLOSE_
            # CONSUMER goes out before our SUCCESS, §7.5 steps 1-3).
            await consumer.handle.seek(
                message_id=cmd.message_id, publish_time=cmd.message_publish_time
            )
        except Exception as exc:
            failure = as_broker_error(exc, "SEEK")
            self._send(
                c.Error(request_id=cmd.request_id, error=failure.code, message=failure.message)
            )
            return
        self._send(c.Success(request_id=cmd.request_id))

    async def on_unsubscribe(self, cmd: c.Unsubscribe) -> None:
        """UNSUBSCRIBE: delete the subscription, SUCCESS or ERROR (§7.7)."""
        consumer = self._consumers.get(cmd.consumer_id)
        try:
            if consumer is None:
                raise MetadataError(CONSUMER_NOT_FOUND)
            await consumer.handle.unsubscribe()
        except Exception as exc:
            failure = as_broker_error(exc, "UNSUBSCRIBE")
            self._send(
                c.Error(request_id=cmd.request_id, error=failure.code, message=failure.message)
            )
            return
        self._consumers.pop(cmd.consumer_id, None)
        self._send(c.Success(request_id=cmd.request_id))

    def on_get_last_message_id(self, cmd: c.GetLastMessageId) -> None:
        """GET_LAST_MESSAGE_ID: the topic's last id and the mark-delete (§7.6)."""
        consumer = self._consumers.get(cmd.consumer_id)
        if consumer is None:
            self._send(
                c.Error(
                    request_id=cmd.request_id,
                    error=ServerError.MetadataError,
                    message=CONSUMER_NOT_FOUND,
                )
            )
            return
        try:
            (ledger_id, entry_id, batch_index), (md_ledger, md_entry) = (
                consumer.handle.last_message_id()
            )
        except BrokerError as exc:
            self._send(c.Error(request_id=cmd.request_id, error=exc.code, message=exc.message))
            return
        self._send(
            c.GetLastMessageIdResponse(
                request_id=cmd.request_id,
                # §7.6: partition index for partitions, batch index for a batched last entry,
                # entry -1 for an empty topic.
                last_message_id=c.MessageIdData(
                    ledger_id=ledger_id,
                    entry_id=entry_id,
                    partition=consumer.partition,
                    batch_index=batch_index,
                ),
                consumer_mark_delete_position=c.MessageIdData(
                    ledger_id=md_ledger, entry_id=md_entry
                ),
            )
        )

    def on_consumer_stats(self, cmd: c.ConsumerStats) -> None:
        """CONSUMER_STATS: a response with zeros (§7.8)."""
        consumer = self._consumers.get(cmd.consumer_id)
        if consumer is None:
            self._send(
                c.ConsumerStatsResponse(
                    request_id=cmd.request_id,
                    error_code=ServerError.ConsumerNotFound,
                    error_message=f"consumer {cmd.consumer_id} not found",
                )
            )
            return
        # §7.8: any numeric fields will do; rates are not tracked per consumer yet.
        self._send(
            c.ConsumerStatsResponse(
                request_id=cmd.request_id,
                msg_rate_out=0.0,
                msg_throughput_out=0.0,
                msg_rate_redeliver=0.0,
                consumer_name="",
                available_permits=0,
                unacked_messages=0,
                blocked_consumer_on_unacked_msgs=False,
                address=self._session.peer,
                connected_since="",
                type="",
                msg_rate_expired=0.0,
                msg_backlog=0,
                message_ack_rate=0.0,
            )
        )
