"""A consumer's commands of pulsar.proto.

Subscribing, flow control, MESSAGEs, ACKs and redeliveries, seeking, its position and stats,
unsubscribing and closing.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.commands.enums import AckType, InitialPosition, SubType
from protocol.commands.records import (
    KeyLongValue,
    KeySharedMeta,
    KeyValue,
    MessageIdData,
    Record,
    Schema,
)
from protocol.errors import ServerError


class Subscribe(Record, frozen=True, kw_only=True):
    """``CommandSubscribe`` of pulsar.proto."""

    topic: str
    subscription: str
    sub_type: SubType
    consumer_id: int
    request_id: int
    consumer_name: str | None = None
    priority_level: int | None = None
    durable: bool = True
    start_message_id: MessageIdData | None = None
    metadata: tuple[KeyValue, ...] = ()
    read_compacted: bool = False
    schema: Schema | None = None
    initial_position: InitialPosition = InitialPosition.LATEST
    replicate_subscription_state: bool | None = None
    force_topic_creation: bool = True
    start_message_rollback_duration_sec: int = 0
    key_shared_meta: KeySharedMeta | None = None
    subscription_properties: tuple[KeyValue, ...] = ()
    consumer_epoch: int | None = None


class Flow(Record, frozen=True, kw_only=True):
    """``CommandFlow`` of pulsar.proto."""

    consumer_id: int
    message_permits: int


class Message(Record, frozen=True, kw_only=True):
    """``CommandMessage`` of pulsar.proto."""

    consumer_id: int
    message_id: MessageIdData
    redelivery_count: int = 0
    ack_set: tuple[int, ...] = ()
    consumer_epoch: int | None = None


class Ack(Record, frozen=True, kw_only=True):
    """``CommandAck`` of pulsar.proto."""

    consumer_id: int
    ack_type: AckType
    # A sequence, not always a tuple: the broker's decoder gives a grouped ACK of whole entries
    # of one ledger as ``protocol.ids.WholeEntryIds``, records built only when looked at.
    message_id: Sequence[MessageIdData] = ()
    validation_error: int | None = None
    properties: tuple[KeyLongValue, ...] = ()
    request_id: int | None = None


class AckResponse(Record, frozen=True, kw_only=True):
    """``CommandAckResponse`` of pulsar.proto."""

    consumer_id: int
    error: ServerError | None = None
    message: str | None = None
    request_id: int | None = None


class ActiveConsumerChange(Record, frozen=True, kw_only=True):
    """``CommandActiveConsumerChange`` of pulsar.proto."""

    consumer_id: int
    is_active: bool = False


class ReachedEndOfTopic(Record, frozen=True, kw_only=True):
    """``CommandReachedEndOfTopic`` of pulsar.proto."""

    consumer_id: int


class Unsubscribe(Record, frozen=True, kw_only=True):
    """``CommandUnsubscribe`` of pulsar.proto."""

    consumer_id: int
    request_id: int


class Seek(Record, frozen=True, kw_only=True):
    """``CommandSeek`` of pulsar.proto."""

    consumer_id: int
    request_id: int
    message_id: MessageIdData | None = None
    message_publish_time: int | None = None


class CloseConsumer(Record, frozen=True, kw_only=True):
    """``CommandCloseConsumer`` of pulsar.proto."""

    consumer_id: int
    request_id: int
    assigned_broker_service_url: str | None = None
    assigned_broker_service_url_tls: str | None = None


class RedeliverUnacknowledgedMessages(Record, frozen=True, kw_only=True):
    """``CommandRedeliverUnacknowledgedMessages`` of pulsar.proto."""

    consumer_id: int
    message_ids: tuple[MessageIdData, ...] = ()
    consumer_epoch: int | None = None


class GetLastMessageId(Record, frozen=True, kw_only=True):
    """``CommandGetLastMessageId`` of pulsar.proto."""

    consumer_id: int
    request_id: int


class GetLastMessageIdResponse(Record, frozen=True, kw_only=True):
    """``CommandGetLastMessageIdResponse`` of pulsar.proto."""

    last_message_id: MessageIdData
    request_id: int
    consumer_mark_delete_position: MessageIdData | None = None


class ConsumerStats(Record, frozen=True, kw_only=True):
    """``CommandConsumerStats`` of pulsar.proto."""

    request_id: int
    consumer_id: int


class ConsumerStatsResponse(Record, frozen=True, kw_only=True):
    """``CommandConsumerStatsResponse`` of pulsar.proto."""

    request_id: int
    error_code: ServerError | None = None
    error_message: str | None = None
    msg_rate_out: float | None = None
    msg_throughput_out: float | None = None
    msg_rate_redeliver: float | None = None
    consumer_name: str | None = None
    available_permits: int | None = None
    unacked_messages: int | None = None
    blocked_consumer_on_unacked_msgs: bool | None = None
    address: str | None = None
    connected_since: str | None = None
    type: str | None = None
    msg_rate_expired: float | None = None
    msg_backlog: int | None = None
    message_ack_rate: float | None = None
