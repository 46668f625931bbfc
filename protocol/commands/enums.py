"""The enums of pulsar.proto the commands use (their values are the wire's)."""

from __future__ import annotations

import enum


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
