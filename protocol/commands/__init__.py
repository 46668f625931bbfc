"""The Pulsar commands as immutable typed records.

Every record mirrors one message of ``protocol/pulsar.proto``: field names are the proto field
names in snake_case (``ledgerId`` -> ``ledger_id``), optional fields default to ``None`` or to the
proto default, and ``required`` fields have no default. ``protocol.codec`` is the only module that
turns these records into protobuf objects and bytes; everything else matches on these types.

Ledger and entry ids are plain signed ints here (``-1`` is a real value); the codec maps them to
and from the wire's uint64 (see spec/wire-protocol.md §1.3).

The records live by concern: the enums (``enums``), the shared records and metadata headers
(``records``), a connection's own commands (``session``), lookups and schemas (``lookup``), a
producer's (``producing``) and a consumer's (``consuming``). Import them from here: this package
is the closed union every ``match`` reads.
"""

from __future__ import annotations

from protocol.commands.consuming import (
    Ack,
    AckResponse,
    ActiveConsumerChange,
    CloseConsumer,
    ConsumerStats,
    ConsumerStatsResponse,
    Flow,
    GetLastMessageId,
    GetLastMessageIdResponse,
    Message,
    ReachedEndOfTopic,
    RedeliverUnacknowledgedMessages,
    Seek,
    Subscribe,
    Unsubscribe,
)
from protocol.commands.enums import (
    AccessMode,
    AckType,
    CompressionType,
    InitialPosition,
    KeySharedMode,
    LookupType,
    MetadataResult,
    SchemaType,
    SubType,
    TopicsMode,
)
from protocol.commands.lookup import (
    GetOrCreateSchema,
    GetOrCreateSchemaResponse,
    GetSchema,
    GetSchemaResponse,
    GetTopicsOfNamespace,
    GetTopicsOfNamespaceResponse,
    LookupTopic,
    LookupTopicResponse,
    PartitionedTopicMetadata,
    PartitionedTopicMetadataResponse,
)
from protocol.commands.producing import (
    CloseProducer,
    Producer,
    ProducerSuccess,
    Send,
    SendError,
    SendReceipt,
)
from protocol.commands.records import (
    BrokerEntryMetadata,
    EncryptionKeys,
    FeatureFlags,
    IntRange,
    KeyLongValue,
    KeySharedMeta,
    KeyValue,
    MessageIdData,
    MessageMetadata,
    Record,
    Schema,
    SingleMessageMetadata,
)
from protocol.commands.session import (
    AddPartitionToTxn,
    AddSubscriptionToTxn,
    AuthChallenge,
    AuthData,
    AuthResponse,
    Connect,
    Connected,
    EndTxn,
    Error,
    NewTxn,
    Ping,
    Pong,
    Success,
    TcClientConnectRequest,
    TxnRequest,
)

__all__ = [
    "COMMAND_TYPES",
    "AccessMode",
    "Ack",
    "AckResponse",
    "AckType",
    "ActiveConsumerChange",
    "AddPartitionToTxn",
    "AddSubscriptionToTxn",
    "AuthChallenge",
    "AuthData",
    "AuthResponse",
    "BrokerEntryMetadata",
    "CloseConsumer",
    "CloseProducer",
    "Command",
    "CompressionType",
    "Connect",
    "Connected",
    "ConsumerStats",
    "ConsumerStatsResponse",
    "EncryptionKeys",
    "EndTxn",
    "Error",
    "FeatureFlags",
    "Flow",
    "GetLastMessageId",
    "GetLastMessageIdResponse",
    "GetOrCreateSchema",
    "GetOrCreateSchemaResponse",
    "GetSchema",
    "GetSchemaResponse",
    "GetTopicsOfNamespace",
    "GetTopicsOfNamespaceResponse",
    "InitialPosition",
    "IntRange",
    "KeyLongValue",
    "KeySharedMeta",
    "KeySharedMode",
    "KeyValue",
    "LookupTopic",
    "LookupTopicResponse",
    "LookupType",
    "Message",
    "MessageIdData",
    "MessageMetadata",
    "MetadataResult",
    "NewTxn",
    "PartitionedTopicMetadata",
    "PartitionedTopicMetadataResponse",
    "Ping",
    "Pong",
    "Producer",
    "ProducerSuccess",
    "ReachedEndOfTopic",
    "Record",
    "RedeliverUnacknowledgedMessages",
    "Schema",
    "SchemaType",
    "Seek",
    "Send",
    "SendError",
    "SendReceipt",
    "SingleMessageMetadata",
    "SubType",
    "Subscribe",
    "Success",
    "TcClientConnectRequest",
    "TopicsMode",
    "TxnRequest",
    "Unsubscribe",
]


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
