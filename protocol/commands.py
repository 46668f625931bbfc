"""The Pulsar commands as immutable typed records.

Every record mirrors one message of ``protocol/pulsar.proto``: field names are the proto field
names in snake_case (``ledgerId`` -> ``ledger_id``), optional fields default to ``None`` or to the
proto default, and ``required`` fields have no default. ``protocol.codec`` is the only module that
turns these records into protobuf objects and bytes; everything else matches on these types.

Ledger and entry ids are plain signed ints here (``-1`` is a real value); the codec maps them to
and from the wire's uint64 (see spec/wire-protocol.md §1.3).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

import msgspec

from protocol.errors import ServerError

# ---- enums ----------------------------------------------------------------------------------


class SubType(enum.IntEnum):
    """``CommandSubscribe.SubType``."""

    EXCLUSIVE = 0
    SHARED = 1
    FAILOVER = 2
    KEY_SHARED = 3


class InitialPosition(enum.IntEnum):
    """``CommandSubscribe.InitialPosition``."""

    LATEST = 0
    EARLIEST = 1


class AckType(enum.IntEnum):
    """``CommandAck.AckType``."""

    INDIVIDUAL = 0
    CUMULATIVE = 1


class AccessMode(enum.IntEnum):
    """``ProducerAccessMode``."""

    SHARED = 0
    EXCLUSIVE = 1
    WAIT_FOR_EXCLUSIVE = 2
    EXCLUSIVE_WITH_FENCING = 3


class KeySharedMode(enum.IntEnum):
    """``KeySharedMode``."""

    AUTO_SPLIT = 0
    STICKY = 1


class LookupType(enum.IntEnum):
    """``CommandLookupTopicResponse.LookupType``."""

    REDIRECT = 0
    CONNECT = 1
    FAILED = 2


class MetadataResult(enum.IntEnum):
    """``CommandPartitionedTopicMetadataResponse.LookupType``."""

    SUCCESS = 0
    FAILED = 1


class TopicsMode(enum.IntEnum):
    """``CommandGetTopicsOfNamespace.Mode``."""

    PERSISTENT = 0
    NON_PERSISTENT = 1
    ALL = 2


class CompressionType(enum.IntEnum):
    """``CompressionType``."""

    NONE = 0
    LZ4 = 1
    ZLIB = 2
    ZSTD = 3
    SNAPPY = 4


class SchemaType(enum.IntEnum):
    """``Schema.Type``."""

    NONE = 0
    STRING = 1
    JSON = 2
    PROTOBUF = 3
    AVRO = 4
    BOOL = 5
    INT8 = 6
    INT16 = 7
    INT32 = 8
    INT64 = 9
    FLOAT = 10
    DOUBLE = 11
    DATE = 12
    TIME = 13
    TIMESTAMP = 14
    KEY_VALUE = 15
    INSTANT = 16
    LOCAL_DATE = 17
    LOCAL_TIME = 18
    LOCAL_DATE_TIME = 19
    PROTOBUF_NATIVE = 20


# ---- shared records -------------------------------------------------------------------------


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


# ---- commands -------------------------------------------------------------------------------


class Connect(Record, frozen=True, kw_only=True):
    """``CommandConnect`` of pulsar.proto."""

    client_version: str
    auth_method: int | None = None
    auth_data: bytes | None = None
    protocol_version: int = 0
    auth_method_name: str | None = None
    proxy_to_broker_url: str | None = None
    original_principal: str | None = None
    original_auth_data: str | None = None
    original_auth_method: str | None = None
    feature_flags: FeatureFlags | None = None


class Connected(Record, frozen=True, kw_only=True):
    """``CommandConnected`` of pulsar.proto."""

    server_version: str
    protocol_version: int = 0
    max_message_size: int | None = None
    feature_flags: FeatureFlags | None = None


class Ping(Record, frozen=True, kw_only=True):
    """``CommandPing`` of pulsar.proto."""

    pass


class Pong(Record, frozen=True, kw_only=True):
    """``CommandPong`` of pulsar.proto."""

    pass


class AuthData(Record, frozen=True, kw_only=True):
    """A credential (``auth_method_name`` + bytes), or the broker's refresh request."""

    auth_method_name: str | None = None
    auth_data: bytes | None = None


class AuthChallenge(Record, frozen=True, kw_only=True):
    """The broker asks for (fresh) credentials; the client answers AUTH_RESPONSE."""

    server_version: str | None = None
    challenge: AuthData | None = None
    protocol_version: int = 0


class AuthResponse(Record, frozen=True, kw_only=True):
    """``CommandAuthResponse`` of pulsar.proto."""

    client_version: str | None = None
    response: AuthData | None = None
    protocol_version: int = 0


class PartitionedTopicMetadata(Record, frozen=True, kw_only=True):
    """``CommandPartitionedTopicMetadata`` of pulsar.proto."""

    topic: str
    request_id: int
    metadata_auto_creation_enabled: bool = True


class PartitionedTopicMetadataResponse(Record, frozen=True, kw_only=True):
    """``CommandPartitionedTopicMetadataResponse`` of pulsar.proto."""

    request_id: int
    partitions: int | None = None
    response: MetadataResult | None = None
    error: ServerError | None = None
    message: str | None = None


class LookupTopic(Record, frozen=True, kw_only=True):
    """``CommandLookupTopic`` of pulsar.proto."""

    topic: str
    request_id: int
    authoritative: bool = False
    advertised_listener_name: str | None = None


class LookupTopicResponse(Record, frozen=True, kw_only=True):
    """``CommandLookupTopicResponse`` of pulsar.proto."""

    request_id: int
    broker_service_url: str | None = None
    broker_service_url_tls: str | None = None
    response: LookupType | None = None
    authoritative: bool = False
    error: ServerError | None = None
    message: str | None = None
    proxy_through_service_url: bool = False


class GetTopicsOfNamespace(Record, frozen=True, kw_only=True):
    """``CommandGetTopicsOfNamespace`` of pulsar.proto."""

    request_id: int
    namespace: str
    mode: TopicsMode = TopicsMode.PERSISTENT
    topics_pattern: str | None = None
    topics_hash: str | None = None


class GetTopicsOfNamespaceResponse(Record, frozen=True, kw_only=True):
    """``CommandGetTopicsOfNamespaceResponse`` of pulsar.proto."""

    request_id: int
    topics: tuple[str, ...] = ()
    filtered: bool = False
    topics_hash: str | None = None
    changed: bool = True


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


class GetSchema(Record, frozen=True, kw_only=True):
    """``CommandGetSchema`` of pulsar.proto."""

    request_id: int
    topic: str
    schema_version: bytes | None = None


class GetSchemaResponse(Record, frozen=True, kw_only=True):
    """``CommandGetSchemaResponse`` of pulsar.proto."""

    request_id: int
    error_code: ServerError | None = None
    error_message: str | None = None
    schema: Schema | None = None
    schema_version: bytes | None = None


class GetOrCreateSchema(Record, frozen=True, kw_only=True):
    """``CommandGetOrCreateSchema`` of pulsar.proto."""

    request_id: int
    topic: str
    schema: Schema


class GetOrCreateSchemaResponse(Record, frozen=True, kw_only=True):
    """``CommandGetOrCreateSchemaResponse`` of pulsar.proto."""

    request_id: int
    error_code: ServerError | None = None
    error_message: str | None = None
    schema_version: bytes | None = None


class TcClientConnectRequest(Record, frozen=True, kw_only=True):
    """``CommandTcClientConnectRequest`` of pulsar.proto."""

    request_id: int
    tc_id: int = 0


class NewTxn(Record, frozen=True, kw_only=True):
    """``CommandNewTxn`` of pulsar.proto."""

    request_id: int
    txn_ttl_seconds: int = 0
    tc_id: int = 0


class AddPartitionToTxn(Record, frozen=True, kw_only=True):
    """``CommandAddPartitionToTxn`` of pulsar.proto (the partitions are not read)."""

    request_id: int
    txnid_least_bits: int = 0
    txnid_most_bits: int = 0


class AddSubscriptionToTxn(Record, frozen=True, kw_only=True):
    """``CommandAddSubscriptionToTxn`` of pulsar.proto (the subscriptions are not read)."""

    request_id: int
    txnid_least_bits: int = 0
    txnid_most_bits: int = 0


class EndTxn(Record, frozen=True, kw_only=True):
    """``CommandEndTxn`` of pulsar.proto (the action is not read)."""

    request_id: int
    txnid_least_bits: int = 0
    txnid_most_bits: int = 0


TxnRequest = TcClientConnectRequest | NewTxn | AddPartitionToTxn | AddSubscriptionToTxn | EndTxn
"""The transaction coordinator requests a broker without a coordinator refuses."""


class Success(Record, frozen=True, kw_only=True):
    """``CommandSuccess`` of pulsar.proto."""

    request_id: int
    schema: Schema | None = None


class Error(Record, frozen=True, kw_only=True):
    """``CommandError`` of pulsar.proto."""

    request_id: int
    error: ServerError
    message: str


Command = (
    Connect
    | Connected
    | Ping
    | Pong
    | AuthChallenge
    | AuthResponse
    | PartitionedTopicMetadata
    | PartitionedTopicMetadataResponse
    | LookupTopic
    | LookupTopicResponse
    | GetTopicsOfNamespace
    | GetTopicsOfNamespaceResponse
    | Producer
    | ProducerSuccess
    | Send
    | SendReceipt
    | SendError
    | CloseProducer
    | Subscribe
    | Flow
    | Message
    | Ack
    | AckResponse
    | ActiveConsumerChange
    | ReachedEndOfTopic
    | Unsubscribe
    | Seek
    | CloseConsumer
    | RedeliverUnacknowledgedMessages
    | GetLastMessageId
    | GetLastMessageIdResponse
    | ConsumerStats
    | ConsumerStatsResponse
    | GetSchema
    | GetSchemaResponse
    | GetOrCreateSchema
    | GetOrCreateSchemaResponse
    | TcClientConnectRequest
    | NewTxn
    | AddPartitionToTxn
    | AddSubscriptionToTxn
    | EndTxn
    | Success
    | Error
)
"""Every command the codec knows; ``match`` on the concrete types."""

COMMAND_TYPES: tuple[type[Record], ...] = Command.__args__
