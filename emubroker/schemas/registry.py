"""The schema registry: per-topic schema versions in the metadata store.

Layout: one node per *schema id* at ``/schemas/<tenant>/<namespace>/<topic>``, holding every
version as msgspec JSON. The schema id is Pulsar's (``TopicName.getSchemaName``): the partitioned
topic's name without its domain, so the partitions of a topic, and its persistent and
non-persistent forms, share one history.

Versions are integers from 0, one per registration and one per (soft) deletion, as in Pulsar's
``SchemaRegistryServiceImpl``; on the wire a version is an 8-byte big-endian integer
(spec/wire-protocol.md §6.1 and §11: the first is eight zero bytes). A soft delete appends a
*deleted* marker version: the topic then has no schema, none of the earlier versions can be read,
and the next registration starts a fresh history that is not checked against what came before the
marker (``trimDeletedSchemaAndGetList``).
A forced delete removes the node, and versions start again from 0.

Writes are compare-and-set on the node's metadata version, retried on conflict, so concurrent
producers registering schemas on one topic (or several brokers sharing a store) never lose a
version.
"""

from __future__ import annotations

import contextlib
import logging
import struct
from typing import TYPE_CHECKING, Final

import msgspec

from emubroker.metadata import BadVersionError, NotFoundError
from emubroker.metadata.paths import schema_path
from emubroker.schemas.compat import (
    CompatibilityStrategy,
    SchemaData,
    check_compatible,
    check_consumer_compatible,
    same_schema,
)
from emubroker.schemas.validation import validate_schema_data
from protocol.commands import SchemaType
from protocol.errors import IncompatibleSchemaError

if TYPE_CHECKING:
    from emubroker.metadata import MetadataStore
    from emubroker.naming import TopicName
    from protocol.clock import Clock

__all__ = [
    "SchemaRegistry",
    "StoredSchema",
    "schema_id",
    "version_from_wire",
    "version_to_wire",
]

log = logging.getLogger(__name__)

MAX_WRITE_ATTEMPTS: Final = 16
"""Compare-and-set retries before a registration gives up; each retry means another writer
registered a version meanwhile, so this bounds the work one request can be made to do."""

_VERSION = struct.Struct(">q")


def version_to_wire(version: int) -> bytes:
    """A schema version as ``schema_version`` bytes: 8-byte big-endian (§6.1)."""
    return _VERSION.pack(version)


def version_from_wire(data: bytes) -> int:
    """The schema version in ``schema_version`` bytes.

    Raises:
        ValueError: Not 8 bytes.
    """
    if len(data) != _VERSION.size:
        raise ValueError(f"a schema version is 8 bytes, got {len(data)}")
    value: int = _VERSION.unpack(data)[0]
    return value


def schema_id(topic: TopicName) -> str:
    """Pulsar's schema id: ``tenant/namespace/topic`` of the partitioned topic, no domain.

    The local name is URL-encoded, as in Pulsar's ``TopicName.getSchemaName``: the id is also
    the schema's metadata path.
    """
    return f"{topic.namespace}/{topic.partitioned_topic_name.encoded_local_name}"


class StoredSchema(msgspec.Struct, frozen=True):
    """One version of a topic's schema.

    Attributes:
        version: Its number (0, 1, 2 ...).
        type: The schema type (wire enum).
        data: The definition.
        properties: The schema's properties.
        name: The name the producer gave it.
        timestamp: When it was registered (wall-clock ms).
        deleted: A deletion marker rather than a schema.
    """

    version: int
    type: SchemaType
    data: bytes
    properties: dict[str, str] = msgspec.field(default_factory=dict)
    name: str = ""
    timestamp: int = 0
    deleted: bool = False

    def schema_data(self) -> SchemaData:
        """The schema as the compatibility rules see it."""
        return SchemaData(self.type, self.data, self.properties)


class _History(msgspec.Struct):
    versions: list[StoredSchema] = msgspec.field(default_factory=list)

    def live(self) -> list[StoredSchema]:
        """The versions after the last deletion marker, oldest first."""
        for i in range(len(self.versions) - 1, -1, -1):
            if self.versions[i].deleted:
                return self.versions[i + 1 :]
        return list(self.versions)


_decode_history = msgspec.json.Decoder(_History).decode
_encode = msgspec.json.Encoder().encode


class SchemaRegistry:
    """Schema versions per topic (see the module docstring).

    Args:
        store: Where histories live.
        clock: For registration timestamps.
    """

    def __init__(self, store: MetadataStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    @staticmethod
    def path(topic: TopicName) -> str:
        """The metadata path of a topic's schema history."""
        return schema_path(topic)

    async def _load(self, topic: TopicName) -> tuple[_History, int]:
        found = await self._store.get(self.path(topic))
        if found is None:
            return _History(), -1
        return _decode_history(found.value), found.version

    async def get(self, topic: TopicName, version: int | None = None) -> StoredSchema | None:
        """A version of the topic's schema.

        Args:
            topic: Any topic or partition of the schema id.
            version: The version; ``None`` for the latest.

        Returns:
            The schema, or None when there is none: no such version, or a version at or before
            the last deletion (Pulsar's ``getSchema`` looks a version up only among the live
            ones, so a consumer decoding a message of a deleted version gets an error).
        """
        live = (await self._load(topic))[0].live()
        if version is None:
            return live[-1] if live else None
        return next((stored for stored in live if stored.version == version), None)

    async def versions(self, topic: TopicName) -> list[StoredSchema]:
        """Every live version (after the last deletion), oldest first."""
        history, _ = await self._load(topic)
        return history.live()

    async def version_of(self, topic: TopicName, schema: SchemaData) -> int | None:
        """The version of a live schema equal to ``schema``, if any."""
        history, _ = await self._load(topic)
        return _matching(history.live(), schema)

    async def get_or_create(
        self,
        topic: TopicName,
        schema: SchemaData,
        strategy: CompatibilityStrategy,
        *,
        name: str = "",
        allow_update: bool = True,
    ) -> int:
        """The version of ``schema`` on the topic, registering it if it is new and compatible.

        Pulsar's ``putSchemaIfAbsent``: an equal live version is returned as it is; otherwise the
        schema is checked against the latest version (or every live version, for transitive
        strategies) and stored as the next version.

        Args:
            topic: Any topic or partition of the schema id.
            schema: The schema a producer (or an idle topic's first consumer) brings.
            strategy: The topic's resolved compatibility strategy.
            name: The schema's name, kept with a new version.
            allow_update: False refuses new versions (``isAllowAutoUpdateSchema``).

        Returns:
            The version number.

        Raises:
            InvalidSchemaDataError: The definition is malformed (``validation``), known or not.
            IncompatibleSchemaError: The schema is new and incompatible, or new and updates are
                not allowed.
        """
        validate_schema_data(schema)  # first, as Pulsar's validating registry wrapper
        for _ in range(MAX_WRITE_ATTEMPTS):
            history, node_version = await self._load(topic)
            live = history.live()
            existing = _matching(live, schema)
            if existing is not None:
                return existing
            if not allow_update:
                raise IncompatibleSchemaError(
                    "Schema not found and schema auto updating is disabled."
                )
            check_compatible([s.schema_data() for s in live], schema, strategy)
            version = history.versions[-1].version + 1 if history.versions else 0
            history.versions.append(
                StoredSchema(
                    version=version,
                    type=schema.type,
                    data=schema.data,
                    properties=dict(schema.properties),
                    name=name,
                    timestamp=self._clock.wall_ms(),
                )
            )
            if await self._write(topic, history, node_version):
                log.info("schema of %s: registered version %d", schema_id(topic), version)
                return version
        raise IncompatibleSchemaError(f"schema of {schema_id(topic)} changes too fast; try again")

    async def check_consumer(
        self, topic: TopicName, schema: SchemaData, strategy: CompatibilityStrategy
    ) -> None:
        """Whether a consumer with ``schema`` may subscribe (``checkConsumerCompatibility``).

        Raises:
            IncompatibleSchemaError: It may not, or the topic has no schema to check against.
        """
        live = await self.versions(topic)
        if _matching(live, schema) is not None:
            return
        check_consumer_compatible([s.schema_data() for s in live], schema, strategy)

    async def delete(self, topic: TopicName, *, force: bool = False) -> int | None:
        """Delete the topic's schema.

        Args:
            topic: Any topic or partition of the schema id.
            force: Remove the whole history (versions restart at 0) instead of appending a
                deletion marker.

        Returns:
            The deletion marker's version; None when forced or when there was nothing to delete.
        """
        if force:
            with contextlib.suppress(NotFoundError):  # nothing to delete is fine
                await self._store.delete(self.path(topic))
            return None
        for _ in range(MAX_WRITE_ATTEMPTS):
            history, node_version = await self._load(topic)
            if not history.live():
                return None
            version = history.versions[-1].version + 1
            history.versions.append(
                StoredSchema(
                    version=version,
                    type=SchemaType.NONE,
                    data=b"",
                    timestamp=self._clock.wall_ms(),
                    deleted=True,
                )
            )
            if await self._write(topic, history, node_version):
                return version
        raise IncompatibleSchemaError(f"schema of {schema_id(topic)} changes too fast; try again")

    async def _write(self, topic: TopicName, history: _History, node_version: int) -> bool:
        try:
            await self._store.put(self.path(topic), _encode(history), node_version)
        except BadVersionError:
            return False  # another writer got there first: re-read and decide again
        return True


def _matching(live: list[StoredSchema], schema: SchemaData) -> int | None:
    for stored in live:
        if same_schema(stored.schema_data(), schema):
            return stored.version
    return None
