"""Topic discovery (spec §5) and schemas (§11): PARTITIONED_METADATA, LOOKUP, topics, schemas.

Failures use each request's own failure form: PARTITIONED_METADATA and LOOKUP answer themselves
with ``response=Failed`` (an ERROR for them is ignored by the client, which then hangs until its
timeout), GET_TOPICS_OF_NAMESPACE answers ERROR, GET_SCHEMA answers itself with ``error_code``.
PARTITIONED_METADATA and LOOKUP run as tasks, at most ``maxConcurrentLookupRequest`` at once over
the broker (``lookups``); past it they are answered ``TooManyRequests`` without a task. A LOOKUP
whose owner the broker knows without the store (a bundle it serves, or another broker's as its
ownership cache keeps it) is answered at once, without a task (most lookups of a large cluster's
start), when no authorization or listener asks for more; so is a PARTITIONED_METADATA of a
partition or of a partitioned topic the broker knows (nothing to create).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from emubroker.auth import NamespaceOperation, TopicOperation
from emubroker.handlers.common import CommandGroup, as_broker_error, topic_name
from emubroker.handlers.lookups import TOO_MANY_LOOKUPS
from emubroker.handlers.producers import SCHEMA_VERSION_ZERO
from emubroker.loadbalance.ownership.lookup import LookupAnswer
from emubroker.naming import InvalidNameError, NamespaceName, TopicName
from protocol import commands as c
from protocol.errors import (
    AuthorizationError,
    InvalidTopicNameError,
    ServerError,
    ServiceNotReadyError,
    TopicNotFoundError,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = ["DiscoveryCommands"]

R = TypeVar("R", c.LookupTopic, c.PartitionedTopicMetadata)


class DiscoveryCommands(CommandGroup):
    """Lookups and metadata queries of one connection."""

    def start_partitioned_metadata(self, cmd: c.PartitionedTopicMetadata) -> None:
        """Answer PARTITIONED_METADATA at once if the count is known, else in a task (or refuse)."""
        lookups = self._services.lookups
        if lookups.try_acquire():
            known = self._known_partitions(cmd)
            if known is None:
                self._start(self._counted, self.on_partitioned_metadata, cmd)
            else:
                lookups.release()
                self._send(
                    c.PartitionedTopicMetadataResponse(
                        request_id=cmd.request_id,
                        partitions=known,
                        response=c.MetadataResult.SUCCESS,
                    )
                )
            return
        self._send(
            c.PartitionedTopicMetadataResponse(
                request_id=cmd.request_id,
                response=c.MetadataResult.FAILED,
                error=ServerError.TooManyRequests,
                message=TOO_MANY_LOOKUPS,
            )
        )

    def start_lookup(self, cmd: c.LookupTopic) -> None:
        """Answer LOOKUP at once if the owner is known, else in a task (or refuse it)."""
        lookups = self._services.lookups
        if lookups.try_acquire():
            # Counted like any lookup (Pulsar's pending lookups), if only for an instant.
            known = self._known_answer(cmd)
            if known is None:
                self._start(self._counted, self.on_lookup, cmd)
            else:
                lookups.release()
                self._send(self._response(cmd, known, ""))
            return
        self._send(
            c.LookupTopicResponse(
                request_id=cmd.request_id,
                response=c.LookupType.FAILED,
                error=ServerError.TooManyRequests,
                message=TOO_MANY_LOOKUPS,
            )
        )

    async def _counted(self, lookup: Callable[[R], Awaitable[None]], cmd: R) -> None:
        try:
            await lookup(cmd)
        finally:
            self._services.lookups.release()

    async def on_partitioned_metadata(self, cmd: c.PartitionedTopicMetadata) -> None:
        """PARTITIONED_METADATA: the partition count, or the Failed form (§5.1)."""
        try:
            name = topic_name(cmd.topic)
            if self._access is not None:
                await self._access.require_topic(
                    name,
                    TopicOperation.LOOKUP,
                    "Get Partition Metadata",
                    missing_tenant=TopicNotFoundError(
                        f"Tenant or namespace or topic does not exist: {name.namespace}"
                    ),
                )
            # Learns of a namespace created through another broker a moment ago.
            await self._namespace_known(name.namespace)
            partitions = await self._topics.partitioned_metadata(
                name, auto_create=cmd.metadata_auto_creation_enabled
            )
        except Exception as exc:
            failure = as_broker_error(exc, "PARTITIONED_METADATA")
            # §4.2: the failure form is this response with response=Failed, never ERROR.
            self._send(
                c.PartitionedTopicMetadataResponse(
                    request_id=cmd.request_id,
                    response=c.MetadataResult.FAILED,
                    error=failure.code,
                    message=failure.message,
                )
            )
            return
        self._send(
            c.PartitionedTopicMetadataResponse(
                request_id=cmd.request_id,
                partitions=partitions,
                response=c.MetadataResult.SUCCESS,
            )
        )

    async def on_lookup(self, cmd: c.LookupTopic) -> None:
        """LOOKUP: Connect to the owner, Redirect to the broker to ask, or the Failed form.

        Spec §5.2; spec/pulsar-behaviour.md §3.1 (``loadbalance.ownership.lookup``).
        """
        services = self._services
        try:
            name = topic_name(cmd.topic)
            if self._access is not None:
                await self._access.require_topic(
                    name,
                    TopicOperation.LOOKUP,
                    "Lookup",
                    missing_tenant=AuthorizationError(
                        "Exception occurred while trying to authorize lookup"
                    ),
                )
            listener = cmd.advertised_listener_name or ""
            if listener and listener not in services.listeners:
                # Pulsar's wording; the client turns "the broker do not have test listener"
                # into a non-retried ConnectError (§4.3, test_listener_name_client).
                raise ServiceNotReadyError(f"the broker do not have {listener} listener")
            if not await self._namespace_known(name.namespace):
                raise TopicNotFoundError(f"Namespace {name.namespace} does not exist")
            answer = await self._lookup(name, cmd.authoritative)
        except Exception as exc:
            failure = as_broker_error(exc, "LOOKUP")
            self._send(
                c.LookupTopicResponse(
                    request_id=cmd.request_id,
                    response=c.LookupType.FAILED,
                    error=failure.code,
                    message=failure.message,
                )
            )
            return
        self._send(self._response(cmd, answer, listener))

    def _known_answer(self, cmd: c.LookupTopic) -> LookupAnswer | None:
        services = self._services
        if cmd.advertised_listener_name or services.lookup is None:
            return None
        name = self._known_namespace_topic(cmd.topic)
        return None if name is None else services.lookup.known(name)

    def _known_partitions(self, cmd: c.PartitionedTopicMetadata) -> int | None:
        name = self._known_namespace_topic(cmd.topic)
        return None if name is None else self._topics.known_partitioned_metadata(name)

    def _known_namespace_topic(self, topic: str) -> TopicName | None:
        """The topic, when a request about it may be answered at once.

        That is: no authorization to ask, a valid name (the task answers a bad one with its
        error) and a namespace this broker knows.
        """
        if self._access is not None:
            return None
        try:
            name = TopicName.parse(topic)
        except InvalidNameError:
            return None
        return name if self._services.namespace_exists(name.namespace) else None

    def _response(
        self, cmd: c.LookupTopic, answer: LookupAnswer, listener: str
    ) -> c.LookupTopicResponse:
        owner = answer.broker
        url = owner.service_url
        if listener and owner == self._services.ownership.me:
            url = self._services.listeners[listener]
        return c.LookupTopicResponse(
            request_id=cmd.request_id,
            broker_service_url=url,
            # The client connects here when its own service URL is pulsar+ssl:// (§5.2).
            broker_service_url_tls=owner.service_url_tls or None,
            response=c.LookupType.REDIRECT if answer.redirect else c.LookupType.CONNECT,
            authoritative=answer.authoritative,
        )

    async def _namespace_known(self, namespace: NamespaceName) -> bool:
        services = self._services
        if services.namespace_exists(namespace):
            return True
        return services.read_namespace is not None and await services.read_namespace(namespace)

    async def _lookup(self, name: TopicName, authoritative: bool) -> LookupAnswer:
        services = self._services
        if services.lookup is not None:
            return await services.lookup.lookup_topic(name, authoritative=authoritative)
        # No cluster view (component tests): every bundle is this broker's.
        bundle = services.ownership.bundle_of(name)
        return LookupAnswer((await services.ownership.try_acquire(bundle)).broker)

    def on_get_topics(self, cmd: c.GetTopicsOfNamespace) -> None:
        """GET_TOPICS_OF_NAMESPACE: the namespace's topics, or ERROR (§5.3)."""
        if self._access is not None and self._access.enforced:
            self._start(self._get_topics_authorized, cmd)
            return
        self._get_topics(cmd)

    async def _get_topics_authorized(self, cmd: c.GetTopicsOfNamespace) -> None:
        assert self._access is not None
        try:
            namespace = _namespace(cmd.namespace)
            await self._access.require_namespace(
                namespace, NamespaceOperation.GET_TOPICS, "GetTopicsOfNamespace"
            )
        except Exception as exc:
            failure = as_broker_error(exc, "GET_TOPICS_OF_NAMESPACE")
            self._send(
                c.Error(request_id=cmd.request_id, error=failure.code, message=failure.message)
            )
            return
        self._get_topics(cmd)

    def _get_topics(self, cmd: c.GetTopicsOfNamespace) -> None:
        try:
            namespace = _namespace(cmd.namespace)
            # Pulsar lists the namespace's topic nodes: an unknown namespace has none (an empty
            # answer, not an error, which the Go client would retry until its timeout).
            topics = (
                self._topics.topics_of_namespace(namespace, cmd.mode)
                if self._services.namespace_exists(namespace)
                else []
            )
        except Exception as exc:
            failure = as_broker_error(exc, "GET_TOPICS_OF_NAMESPACE")
            self._send(
                c.Error(request_id=cmd.request_id, error=failure.code, message=failure.message)
            )
            return
        self._send(c.GetTopicsOfNamespaceResponse(request_id=cmd.request_id, topics=tuple(topics)))

    def on_get_schema(self, cmd: c.GetSchema) -> None:
        """GET_SCHEMA: the registry's version, answered in a request task (§11)."""
        self._start(self._get_schema, cmd)

    async def _get_schema(self, cmd: c.GetSchema) -> None:
        schemas = self._services.schemas
        try:
            name = topic_name(cmd.topic)
            if schemas is None:
                # No registry: TopicNotFound is not retried and makes the Python Avro decoder
                # fall back to the reader schema (spec §11).
                raise TopicNotFoundError(f"Topic not found or no-schema {cmd.topic}")
            reply = await schemas.get_schema(cmd, name)
        except Exception as exc:
            failure = as_broker_error(exc, "GET_SCHEMA")
            # §4.2: an ERROR for GET_SCHEMA is ignored by the client; answer in its own form.
            reply = c.GetSchemaResponse(
                request_id=cmd.request_id, error_code=failure.code, error_message=failure.message
            )
        self._send(reply)

    def on_get_or_create_schema(self, cmd: c.GetOrCreateSchema) -> None:
        """GET_OR_CREATE_SCHEMA: register a schema as a producer would, in a request task.

        A producer sending messages of several schemas (the Go and Java clients) asks for each
        new one before sending with it. As Pulsar's ``ServerCnx.handleGetOrCreateSchema``: only
        an existing topic (else TopicNotFound), the namespace's compatibility check and
        switches as for PRODUCER (a NONE schema is the empty version, unless validation is
        enforced on a topic with a schema), answered in its own form with ``schema_version`` or
        ``error_code``. The C++ client never sends it, so never receives the response.
        """
        self._start(self._get_or_create_schema, cmd)

    async def _get_or_create_schema(self, cmd: c.GetOrCreateSchema) -> None:
        schemas = self._services.schemas
        try:
            name = topic_name(cmd.topic)
            await self._check_serving(name)
            if not self._topics.topic_exists(name):
                raise TopicNotFoundError(f"Topic not found {cmd.topic}")
            await self._topics.get_topic(name, create=False)
            # ServerCnx.handleGetOrCreateSchema: a NONE schema is no schema (the empty version).
            schema = None if cmd.schema.type is c.SchemaType.NONE else cmd.schema
            if schemas is None:
                version = b"" if schema is None else SCHEMA_VERSION_ZERO
            else:
                version = await schemas.producer_schema(name, schema) or b""
        except Exception as exc:
            failure = as_broker_error(exc, "GET_OR_CREATE_SCHEMA")
            self._send(
                c.GetOrCreateSchemaResponse(
                    request_id=cmd.request_id,
                    error_code=failure.code,
                    error_message=failure.message,
                )
            )
            return
        self._send(c.GetOrCreateSchemaResponse(request_id=cmd.request_id, schema_version=version))


def _namespace(text: str) -> NamespaceName:
    try:
        return NamespaceName.parse(text)
    except InvalidNameError as exc:
        raise InvalidTopicNameError(str(exc)) from None
