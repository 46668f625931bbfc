"""The records the commands share.

``Record`` (every command's base), ids, keys and values, schemas, and the metadata headers a
producer writes and the broker stores untouched.
"""

from __future__ import annotations

import msgspec

from protocol.commands.enums import CompressionType, KeySharedMode, SchemaType


class Record(msgspec.Struct, frozen=True, kw_only=True):
    """Base of every record; frozen so a decoded command can be shared safely."""


class KeyValue(Record, frozen=True, kw_only=True):
    """``KeyValue`` of pulsar.proto."""

    key: str
    value: str


class KeyLongValue(Record, frozen=True, kw_only=True):
    """``KeyLongValue`` of pulsar.proto."""

    key: str
    value: int


class IntRange(Record, frozen=True, kw_only=True):
    """``IntRange`` of pulsar.proto."""

    start: int
    end: int


class Schema(Record, frozen=True, kw_only=True):
    """``Schema`` of pulsar.proto."""

    name: str
    schema_data: bytes
    type: SchemaType
    properties: tuple[KeyValue, ...] = ()


class MessageIdData(Record, frozen=True, kw_only=True):
    """``MessageIdData`` of pulsar.proto."""

    ledger_id: int
    entry_id: int
    partition: int = -1
    batch_index: int = -1
    ack_set: tuple[int, ...] = ()
    batch_size: int | None = None
    first_chunk_message_id: MessageIdData | None = None


class FeatureFlags(Record, frozen=True, kw_only=True):
    """``FeatureFlags`` of pulsar.proto."""

    supports_auth_refresh: bool = False
    supports_broker_entry_metadata: bool = False
    supports_partial_producer: bool = False
    supports_topic_watchers: bool = False
    supports_get_partitioned_metadata_without_auto_creation: bool = False


class KeySharedMeta(Record, frozen=True, kw_only=True):
    """``KeySharedMeta`` of pulsar.proto."""

    key_shared_mode: KeySharedMode
    hash_ranges: tuple[IntRange, ...] = ()
    allow_out_of_order_delivery: bool = False


class EncryptionKeys(Record, frozen=True, kw_only=True):
    """``EncryptionKeys`` of pulsar.proto."""

    key: str
    value: bytes
    metadata: tuple[KeyValue, ...] = ()


class MessageMetadata(Record, frozen=True, kw_only=True):
    """The per-entry header a producer writes (stored and replayed untouched by the broker)."""

    producer_name: str
    sequence_id: int
    publish_time: int
    properties: tuple[KeyValue, ...] = ()
    replicated_from: str | None = None
    partition_key: str | None = None
    replicate_to: tuple[str, ...] = ()
    compression: CompressionType | None = None
    uncompressed_size: int | None = None
    num_messages_in_batch: int | None = None
    event_time: int | None = None
    encryption_keys: tuple[EncryptionKeys, ...] = ()
    encryption_algo: str | None = None
    encryption_param: bytes | None = None
    schema_version: bytes | None = None
    partition_key_b64_encoded: bool | None = None
    ordering_key: bytes | None = None
    deliver_at_time: int | None = None
    marker_type: int | None = None
    highest_sequence_id: int | None = None
    null_value: bool | None = None
    uuid: str | None = None
    num_chunks_from_msg: int | None = None
    total_chunk_msg_size: int | None = None
    chunk_id: int | None = None
    null_partition_key: bool | None = None


class SingleMessageMetadata(Record, frozen=True, kw_only=True):
    """The header of one message inside a batched entry."""

    payload_size: int
    properties: tuple[KeyValue, ...] = ()
    partition_key: str | None = None
    compacted_out: bool | None = None
    event_time: int | None = None
    partition_key_b64_encoded: bool | None = None
    ordering_key: bytes | None = None
    sequence_id: int | None = None
    null_value: bool | None = None
    null_partition_key: bool | None = None


class BrokerEntryMetadata(Record, frozen=True, kw_only=True):
    """``BrokerEntryMetadata`` of pulsar.proto."""

    broker_timestamp: int | None = None
    index: int | None = None
