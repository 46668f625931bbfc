"""Questions about topics and their schemas, as pulsar.proto writes them.

Partitioned metadata, lookup, a namespace's topics, and fetching or registering a schema.
"""

from __future__ import annotations

from protocol.commands.enums import LookupType, MetadataResult, TopicsMode
from protocol.commands.records import Record, Schema
from protocol.errors import ServerError


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
