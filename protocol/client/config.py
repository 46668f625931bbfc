"""Producer and consumer options: frozen values, passed down from the client's factories.

Names follow the Python `pulsar-client` where one exists; times are seconds on the client's
Clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from protocol import commands as c
from protocol.ids import MessageId

__all__ = ["ConsumerConfig", "ProducerConfig", "ReceiptListener"]

ReceiptListener = Callable[[int, int, int, int, int, "BaseException | None"], None]
"""`(first_seq, last_seq, ledger_id, entry_id, first_batch_index, error)`: see `ProducerConfig`."""


@dataclass(frozen=True, kw_only=True)
class ProducerConfig:
    """Producer options (names follow the Python `pulsar-client` where one exists).

    Attributes:
        producer_name: a fixed name; None lets the broker assign one.
        batching_enabled: group messages into batched entries.
        batching_max_messages: a batch is sent once it holds this many messages.
        batching_max_bytes: ... or this many payload bytes.
        batching_max_publish_delay: ... or this many seconds after its first message.
        max_pending_messages: messages sent but not receipted, at most (rule 4).
        send_timeout: seconds before an unreceipted send fails; 0 disables.
        chunking_enabled: split messages larger than the broker's max message size.
        access_mode: the PRODUCER access mode.
        properties: producer metadata sent with PRODUCER.
        initial_sequence_id: the sequence id before the first message; None asks the broker.
        schema: the schema to declare; None for bytes.
        receipt_listener: called once per SEND's outcome, after its futures complete, as
            `listener(first_seq, last_seq, ledger_id, entry_id, first_batch_index, error)`:
            a batch's messages in one call (`first_batch_index` 0; -1 when not batched;
            ledger and entry -1 and `error` set when it failed). For callers that account
            for every message (a load generator) without a callback per message.
    """

    producer_name: str | None = None
    batching_enabled: bool = False
    batching_max_messages: int = 1000
    batching_max_bytes: int = 128 * 1024
    batching_max_publish_delay: float = 0.01
    max_pending_messages: int = 1000
    send_timeout: float = 30.0
    chunking_enabled: bool = False
    access_mode: c.AccessMode = c.AccessMode.SHARED
    properties: Mapping[str, str] | None = None
    initial_sequence_id: int | None = None
    schema: c.Schema | None = None
    receipt_listener: ReceiptListener | None = None


@dataclass(frozen=True, kw_only=True)
class ConsumerConfig:
    """Consumer options (names follow the Python `pulsar-client` where one exists).

    Attributes:
        sub_type: the subscription type.
        initial_position: where a new durable subscription starts.
        receiver_queue_size: messages prefetched at most (FLOW permits).
        consumer_name: a fixed name; None sends a random one, as the C++ client does.
        ack_group_time: seconds acks are grouped for; 0 sends each at once.
        ack_group_max: individual acks that force a flush.
        negative_ack_redelivery_delay: seconds before a nacked message is redelivered.
        batch_index_ack_enabled: ack single messages of a batch (with `ack_set`).
        durable: False for readers' non-durable subscriptions.
        start_message_id: where a non-durable subscription starts.
        start_message_id_inclusive: deliver the start message itself too.
        max_pending_chunked_messages: incomplete chunked messages kept at most.
        properties, subscription_properties, priority_level, read_compacted,
        replicate_subscription_state, key_shared_meta, schema: passed in SUBSCRIBE.
    """

    sub_type: c.SubType = c.SubType.EXCLUSIVE
    initial_position: c.InitialPosition = c.InitialPosition.LATEST
    receiver_queue_size: int = 1000
    consumer_name: str | None = None
    ack_group_time: float = 0.1
    ack_group_max: int = 1000
    negative_ack_redelivery_delay: float = 60.0
    batch_index_ack_enabled: bool = False
    durable: bool = True
    start_message_id: MessageId | None = None
    start_message_id_inclusive: bool = False
    max_pending_chunked_messages: int = 10
    properties: Mapping[str, str] | None = None
    subscription_properties: Mapping[str, str] | None = None
    priority_level: int = 0
    read_compacted: bool = False
    replicate_subscription_state: bool = False
    key_shared_meta: c.KeySharedMeta | None = None
    schema: c.Schema | None = None
