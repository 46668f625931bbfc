"""A producer's commands of pulsar.proto: opening it, its SENDs and their receipts, closing."""

from __future__ import annotations

from protocol.commands.enums import AccessMode
from protocol.commands.records import KeyValue, MessageIdData, Record, Schema
from protocol.errors import ServerError


class Producer(Record, frozen=True, kw_only=True):
    """``CommandProducer`` of pulsar.proto."""

    topic: str
    producer_id: int
    request_id: int
    producer_name: str | None = None
    encrypted: bool = False
    metadata: tuple[KeyValue, ...] = ()
    schema: Schema | None = None
    epoch: int = 0
    user_provided_producer_name: bool = True
    producer_access_mode: AccessMode = AccessMode.SHARED
    topic_epoch: int | None = None
    txn_enabled: bool = False
    initial_subscription_name: str | None = None


class ProducerSuccess(Record, frozen=True, kw_only=True):
    """``CommandProducerSuccess`` of pulsar.proto."""

    request_id: int
    producer_name: str
    last_sequence_id: int = -1
    schema_version: bytes | None = None
    topic_epoch: int | None = None
    producer_ready: bool = True


class Send(Record, frozen=True, kw_only=True):
    """``CommandSend`` of pulsar.proto."""

    producer_id: int
    sequence_id: int
    num_messages: int = 1
    highest_sequence_id: int = 0
    is_chunk: bool = False
    marker: bool = False


class SendReceipt(Record, frozen=True, kw_only=True):
    """``CommandSendReceipt`` of pulsar.proto."""

    producer_id: int
    sequence_id: int
    message_id: MessageIdData | None = None
    highest_sequence_id: int = 0


class SendError(Record, frozen=True, kw_only=True):
    """``CommandSendError`` of pulsar.proto."""

    producer_id: int
    sequence_id: int
    error: ServerError
    message: str


class CloseProducer(Record, frozen=True, kw_only=True):
    """``CommandCloseProducer`` of pulsar.proto."""

    producer_id: int
    request_id: int
    assigned_broker_service_url: str | None = None
    assigned_broker_service_url_tls: str | None = None
