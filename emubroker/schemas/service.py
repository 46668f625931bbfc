"""Schema decisions under the namespace's policy: for PRODUCER, SUBSCRIBE, GET_SCHEMA and REST.

Pulsar's ``ServerCnx`` rules (spec/wire-protocol.md §6.1, §7.1, §11):

* PRODUCER with a schema registers it, or finds its version (``putSchemaIfAbsent``), under the
  namespace's strategy; PRODUCER_SUCCESS carries the version as 8 big-endian bytes. Without a
  schema (bytes) nothing is registered and no version is sent, unless schema validation is
  enforced and the topic has a schema: then ``IncompatibleSchema``.
* SUBSCRIBE with a schema on an *idle* topic without a schema (no producers, no consumers, no
  entries) registers it; otherwise the consumer's schema is checked for reading
  (``addSchemaIfIdleOrCheckCompatible``); an active topic without a schema refuses it unless
  the strategy is ``ALWAYS_COMPATIBLE``.
* GET_SCHEMA answers the latest or the asked version with the schema id as its name; a topic
  without that schema gets ``TopicNotFound`` ("Topic not found or no-schema"), which the Python
  Avro decoder handles by using its own reader schema.
* The REST schema routes register (:meth:`SchemaService.register`) and check
  (:meth:`SchemaService.compatibility`) under the same policy; reads and deletes go to
  :attr:`SchemaService.registry`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from emubroker.schemas.compat import (
    CompatibilityStrategy,
    SchemaData,
    check_compatible,
    same_schema,
)
from emubroker.schemas.registry import (
    SchemaRegistry,
    StoredSchema,
    schema_id,
    version_from_wire,
    version_to_wire,
)
from protocol import commands as c
from protocol.errors import IncompatibleSchemaError, ServerError

if TYPE_CHECKING:
    from emubroker.naming import TopicName

__all__ = [
    "SchemaPolicyLike",
    "SchemaPolicySource",
    "SchemaService",
    "schema_data_of",
    "wire_schema",
]


class SchemaPolicyLike(Protocol):
    """How a topic treats schemas (``topics.features.SchemaPolicy``)."""

    @property
    def strategy(self) -> CompatibilityStrategy:
        """The compatibility strategy (never ``UNDEFINED``)."""
        ...

    @property
    def allow_update(self) -> bool:
        """Producers may register new versions."""
        ...

    @property
    def validation_enforced(self) -> bool:
        """Clients without a schema are refused on a topic that has one."""
        ...


class SchemaPolicySource(Protocol):
    """Where a topic's schema policy is read (``topics.features.TopicFeatures``)."""

    async def schema_policy(self, topic: TopicName) -> SchemaPolicyLike:
        """The policy in force for ``topic`` (namespace switches over the broker's)."""
        ...


def schema_data_of(schema: c.Schema) -> SchemaData:
    """The registry's view of a wire ``Schema``."""
    return SchemaData(schema.type, schema.schema_data, {p.key: p.value for p in schema.properties})


def wire_schema(topic: TopicName, stored: StoredSchema) -> c.Schema:
    """A stored version as a wire ``Schema`` named by its schema id (``SchemaInfoUtil``)."""
    return c.Schema(
        name=schema_id(topic),
        schema_data=stored.data,
        type=stored.type,
        properties=tuple(c.KeyValue(key=k, value=v) for k, v in sorted(stored.properties.items())),
    )


class SchemaService:
    """Schema decisions for the handlers (see the module docstring).

    Args:
        registry: The schema registry.
        features: The namespace switches (strategy, auto update, validation).
    """

    def __init__(self, registry: SchemaRegistry, features: SchemaPolicySource) -> None:
        self.registry = registry
        self._features = features

    async def producer_schema(self, topic: TopicName, schema: c.Schema | None) -> bytes | None:
        """The ``schema_version`` for a producer's PRODUCER_SUCCESS.

        A schema of type NONE (the Go client's bytes schema) is registered like any other, as
        Pulsar's ``ServerCnx.handleProducer`` keeps it; GET_OR_CREATE_SCHEMA passes None for it.

        Returns:
            The version's 8 bytes, or None for a producer without a schema.

        Raises:
            IncompatibleSchemaError: The schema is incompatible, new while updates are disabled,
                or missing while validation is enforced on a topic with a schema.
        """
        policy = await self._features.schema_policy(topic)
        if schema is None:
            if policy.validation_enforced and await self.registry.get(topic) is not None:
                raise IncompatibleSchemaError(
                    "Producers cannot connect or send message without a schema to topics with a "
                    "schema when SchemaValidationEnforced is enabled"
                )
            return None
        version = await self.registry.get_or_create(
            topic,
            schema_data_of(schema),
            policy.strategy,
            name=schema.name,
            allow_update=policy.allow_update,
        )
        return version_to_wire(version)

    async def consumer_schema(
        self, topic: TopicName, schema: c.Schema | None, *, topic_active: bool
    ) -> None:
        """Admit a consumer's schema (SUBSCRIBE).

        Args:
            topic: The topic (or partition).
            schema: The consumer's schema; None (bytes) is always admitted.
            topic_active: The topic has producers, consumers or entries.

        Raises:
            IncompatibleSchemaError: The schema cannot read the topic's, or the topic is active
                and has no schema.
        """
        if schema is None or schema.type is c.SchemaType.NONE:
            return
        policy = await self._features.schema_policy(topic)
        data = schema_data_of(schema)
        if not topic_active and await self.registry.get(topic) is None:
            await self.registry.get_or_create(
                topic, data, policy.strategy, name=schema.name, allow_update=policy.allow_update
            )
            return
        try:
            await self.registry.check_consumer(topic, data, policy.strategy)
        except IncompatibleSchemaError as exc:
            if "does not have schema" in str(exc):
                raise IncompatibleSchemaError(
                    "Failed to add schema to an active topic with empty(BYTES) schema: new schema "
                    f"type {schema.type.name}"
                ) from None
            raise

    async def get_schema(self, cmd: c.GetSchema, topic: TopicName) -> c.GetSchemaResponse:
        """GET_SCHEMA's answer (never raises for a missing schema: §4.2 failure form)."""
        version: int | None = None
        if cmd.schema_version is not None:
            try:
                version = version_from_wire(cmd.schema_version)
            except ValueError:
                return c.GetSchemaResponse(
                    request_id=cmd.request_id,
                    error_code=ServerError.IncompatibleSchema,
                    error_message="Empty schema version"
                    if not cmd.schema_version
                    else "A schema version is 8 bytes",
                )
        stored = await self.registry.get(topic, version)
        if stored is None:
            return c.GetSchemaResponse(
                request_id=cmd.request_id,
                error_code=ServerError.TopicNotFound,
                error_message=f"Topic not found or no-schema {cmd.topic}",
            )
        return c.GetSchemaResponse(
            request_id=cmd.request_id,
            schema=wire_schema(topic, stored),
            schema_version=version_to_wire(stored.version),
        )

    async def register(self, topic: TopicName, schema: SchemaData, *, name: str = "") -> int:
        """Register a schema as a producer would (REST ``POST .../schema``, ``postSchema``).

        Returns:
            Its version (an existing one if the schema is known).

        Raises:
            IncompatibleSchemaError: As for :meth:`producer_schema`.
        """
        policy = await self._features.schema_policy(topic)
        return await self.registry.get_or_create(
            topic, schema, policy.strategy, name=name, allow_update=policy.allow_update
        )

    async def get_or_create(self, topic: TopicName, schema: c.Schema) -> bytes:
        """:meth:`register` for a wire ``Schema``; the version as 8 bytes.

        Raises:
            IncompatibleSchemaError: As for :meth:`producer_schema`.
        """
        version = await self.register(topic, schema_data_of(schema), name=schema.name)
        return version_to_wire(version)

    async def strategy(self, topic: TopicName) -> CompatibilityStrategy:
        """The compatibility strategy in force for ``topic`` (topic, namespace, broker)."""
        return (await self._features.schema_policy(topic)).strategy

    async def compatibility(
        self, topic: TopicName, schema: SchemaData
    ) -> tuple[bool, CompatibilityStrategy]:
        """Whether ``schema`` could be registered now (REST ``POST .../compatibility``).

        Returns:
            ``(compatible, strategy)``; a schema equal to a live version is compatible.
        """
        policy = await self._features.schema_policy(topic)
        live = await self.registry.versions(topic)
        if any(same_schema(v.schema_data(), schema) for v in live):
            return True, policy.strategy
        try:
            check_compatible([v.schema_data() for v in live], schema, policy.strategy)
        except IncompatibleSchemaError:
            return False, policy.strategy
        return True, policy.strategy
