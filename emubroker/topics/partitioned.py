"""Partitioned topics: partition counts, properties, PARTITIONED_METADATA, create, grow, delete.

The counts live in the catalog (``catalog.TopicCatalog.partitioned``), the properties here, and
both are written through to the metadata store when one is given, as Pulsar's admin API stores
them: JSON ``PartitionedTopicMetadata`` at ``metadata.paths.partitioned_topic_path``. Rules:

1. A partitioned topic has at least one partition; its name is not a partition's name, nor a
   non-partitioned topic's that exists.
2. It may grow, never shrink.
3. Every broker of a cluster sees the same counts: :meth:`PartitionedTopics.watch` follows the
   store, so a partitioned topic created, grown or deleted through one broker is known to all.
4. PARTITIONED_METADATA answers N for a partitioned topic and 0 for any other topic that exists,
   partitions included (spec §5.1). A missing topic that the client lets the broker create
   (PIP-344's ``metadata_auto_creation_enabled``) and auto-creation allows (``auto_creation``:
   the namespace's override, else the broker's keys) answers 0, or, where the type is
   ``partitioned``, is created first with its count of partitions; any other missing topic is
   TopicNotFound, as Pulsar's ``ServerCnx`` answers. A partition of a partitioned topic may be
   created below its count only (:meth:`PartitionedTopics.may_create`).
5. A partitioned topic's properties are its own (Pulsar's ``PartitionedTopicMetadata.properties``):
   None until some are given (at creation or by an update), kept when it grows, never copied to
   its partitions. A key given a None value is left out (Pulsar's stored JSON leaves a null
   entry out). A change reads the stored metadata and writes it back at the version it read
   (again on a conflict), so concurrent changes through different brokers are all kept.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio
import msgspec

from emubroker.metadata import BadVersionError, StoreClosedError, WatchOverflowError
from emubroker.metadata.paths import PARTITIONED_TOPICS_ROOT, partitioned_topic_path
from emubroker.metadata.walk import topic_of_path, walk_topics
from protocol.errors import NotAllowedError, TopicNotFoundError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from anyio.abc import TaskStatus

    from emubroker.metadata.store import MetadataStore
    from emubroker.naming import NamespaceName, TopicDomain, TopicName
    from emubroker.topics.auto_creation import AutoTopicCreation
    from emubroker.topics.catalog import TopicCatalog
    from emubroker.topics.namespace_limits import NamespaceRoom

__all__ = ["PartitionedTopics"]

log = logging.getLogger(__name__)


class _PartitionedTopicMetadata(msgspec.Struct):
    # Pulsar's PartitionedTopicMetadata JSON as stored by its admin API; unset properties are
    # left out, as Pulsar's mapper leaves out a null map (a stored null reads as unset).
    partitions: int
    deleted: bool = False
    properties: dict[str, str] | msgspec.UnsetType | None = msgspec.UNSET


def _decode(value: bytes) -> _PartitionedTopicMetadata:
    meta = msgspec.json.decode(value, type=_PartitionedTopicMetadata)
    if meta.properties is None:
        meta.properties = msgspec.UNSET
    return meta


def _properties(meta: _PartitionedTopicMetadata) -> dict[str, str] | None:
    return meta.properties if isinstance(meta.properties, dict) else None


def _without_nones(properties: Mapping[str, str | None]) -> dict[str, str]:
    return {key: value for key, value in properties.items() if value is not None}


class PartitionedTopics:
    """The partitioned-topic metadata of one broker (see the module docstring).

    Args:
        catalog: Where the counts live (and which other topics exist).
        auto_creation: What a missing topic's first use may create (``auto_creation``).
        metadata: Where the counts are written through; None: kept in memory only.
        room: ``maxTopicsPerNamespace``, checked for every partition a create or grow adds.
    """

    def __init__(
        self,
        catalog: TopicCatalog,
        *,
        auto_creation: Callable[[TopicName], AutoTopicCreation],
        room: NamespaceRoom,
        metadata: MetadataStore | None = None,
    ) -> None:
        self._catalog = catalog
        self._room = room
        self._counts = catalog.partitioned
        self._properties: dict[TopicName, dict[str, str]] = {}  # absent: none given (rule 5)
        self._auto_creation = auto_creation
        self._metadata = metadata

    @property
    def metadata_store(self) -> MetadataStore | None:
        """Where the counts are written through; None: kept in memory only."""
        return self._metadata

    async def load(self) -> None:
        """Learn the partitioned topics a previous run left in the store.

        Raises:
            MetadataStoreError: The store failed.
        """
        if self._metadata is None:
            return
        for name, value in await walk_topics(self._metadata, PARTITIONED_TOPICS_ROOT):
            meta = _decode(value)
            if not meta.deleted:
                self._remember(name, meta)

    async def watch(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Follow the stored counts until the store closes (rule 3)."""
        if self._metadata is None:
            task_status.started()
            return
        started = False
        while True:
            try:
                async with self._metadata.watch(PARTITIONED_TOPICS_ROOT) as notifications:
                    if started:
                        await self._reload()  # notifications were lost: read them all again
                    else:
                        task_status.started()
                        started = True
                    async for notification in notifications:
                        await self._changed(notification.path)
                return
            except WatchOverflowError:
                log.warning("partitioned-topic watch lost notifications; reading them again")
            except StoreClosedError:
                return

    async def _changed(self, path: str) -> None:
        assert self._metadata is not None
        name = topic_of_path(PARTITIONED_TOPICS_ROOT, path)
        if name is None:
            return
        node = await self._metadata.get(path)
        meta = None if node is None else _decode(node.value)
        if meta is None or meta.deleted:
            self._counts.pop(name, None)
            self._properties.pop(name, None)
        else:
            self._remember(name, meta)

    async def _reload(self) -> None:
        self._counts.clear()
        self._properties.clear()
        await self.load()

    def _remember(self, name: TopicName, meta: _PartitionedTopicMetadata) -> None:
        self._counts[name] = meta.partitions
        properties = _properties(meta)
        if properties is None:
            self._properties.pop(name, None)
        else:
            self._properties[name] = properties

    def partitions_of(self, name: TopicName) -> int:
        """Partitions of a partitioned topic, 0 for any other name (never creates anything)."""
        return self._counts.get(name, 0)

    def properties_of(self, name: TopicName) -> dict[str, str] | None:
        """A partitioned topic's properties; None when none were ever given (rule 5)."""
        properties = self._properties.get(name)
        return None if properties is None else dict(properties)

    def names(self, ns: NamespaceName, domain: TopicDomain) -> list[str]:
        """Names of a namespace's partitioned topics in one domain, sorted."""
        return sorted(str(t) for t in self._counts if t.namespace == ns and t.domain is domain)

    def may_create(self, name: TopicName) -> bool:
        """Whether a missing ``name`` may be created at its first use (rule 4).

        A partition of a partitioned topic below its count, never above; any other name as
        auto-creation says (Pulsar's ``isAllowAutoTopicCreationAsync``).
        """
        parent = name.partitioned_topic_name
        partitions = self._counts.get(parent) if parent is not name else None
        if partitions is not None:
            return name.partition_index < partitions
        return self._auto_creation(name).allowed

    async def metadata(self, name: TopicName, *, auto_create: bool = True) -> int:
        """Partitions of a topic for PARTITIONED_METADATA (rule 4).

        Without ``auto_create`` (PIP-344's ``metadata_auto_creation_enabled=false``, which the
        Java client's partition auto-update and pattern consumers send) nothing is created.

        Raises:
            TopicNotFoundError: Unknown namespace; or a missing topic that may not be created.
            TooManyTopicsError: A partitioned topic to create finds no room in its namespace.
        """
        self._catalog.check_namespace(name)
        if auto_create and self.may_create(name):
            return await self.metadata_creating(name)
        partitions = self._counts.get(name) if name.partition_index < 0 else None
        if partitions is not None:
            return partitions
        if self._catalog.exists(name):
            return 0
        raise TopicNotFoundError(f"Topic {name} does not exist")

    async def metadata_creating(self, name: TopicName) -> int:
        """Partitions of a topic that may be created, creating it partitioned if the type says.

        Pulsar's ``fetchPartitionedTopicMetadataCheckAllowAutoCreationAsync`` once creation is
        allowed (the caller checked :meth:`may_create`): a partitioned topic's count; 0 for any
        other topic that exists, for a partition's name and for a missing topic to be created
        non-partitioned at its first use.

        Raises:
            TopicNotFoundError: Unknown namespace.
            TooManyTopicsError: The namespace has no room for the new topic's partitions.
        """
        self._catalog.check_namespace(name)
        if name.partition_index >= 0:
            return 0
        partitions = self._counts.get(name)
        if partitions is not None:
            return partitions
        rule = self._auto_creation(name)
        if rule.partitioned and not self._catalog.has_topic(name):
            await self.create(name, rule.partitions)
            return rule.partitions
        return 0

    def known_metadata(self, name: TopicName) -> int | None:
        """:meth:`metadata`'s answer when nothing needs creating or checking, else None.

        A partitioned topic's count, 0 for a partition below its count; None for anything
        else, and for a namespace the catalog does not know.
        """
        try:
            self._catalog.check_namespace(name)
        except TopicNotFoundError:
            return None
        parent = name.partitioned_topic_name
        if parent is name:
            return self._counts.get(name)
        return 0 if name.partition_index < self._counts.get(parent, 0) else None

    async def create(
        self, name: TopicName, partitions: int, properties: Mapping[str, str | None] | None = None
    ) -> None:
        """Create a partitioned topic; its partitions are created on first use (rule 1).

        ``properties`` are the topic's own (rule 5); None: none given.

        Raises:
            TopicNotFoundError: Unknown namespace.
            NotAllowedError: Bad partition count, a partition name, or the topic exists.
            TooManyTopicsError: The namespace has no room for its partitions.
        """
        self._catalog.check_namespace(name)
        if partitions < 1:
            raise NotAllowedError(f"partitioned topic {name} needs at least 1 partition")
        if name.partition_index >= 0:
            raise NotAllowedError(f"{name} is a partition name, not a topic name")
        if name in self._counts or self._catalog.has_topic(name):
            raise NotAllowedError(f"Topic {name} already exists")
        self._room.check(name, partitions)
        meta = _PartitionedTopicMetadata(
            partitions,
            properties=msgspec.UNSET if properties is None else _without_nones(properties),
        )
        self._remember(name, meta)
        if self._metadata is not None:
            await self._metadata.put(partitioned_topic_path(name), msgspec.json.encode(meta))

    async def update(self, name: TopicName, partitions: int) -> None:
        """Grow a partitioned topic to ``partitions`` (same count: no-op; rule 2).

        Raises:
            TopicNotFoundError: Not a partitioned topic.
            NotAllowedError: Fewer partitions than it has.
            TooManyTopicsError: The namespace has no room for the new partitions.
        """
        current = self._counts.get(name)
        if current is None:
            raise TopicNotFoundError(f"Topic {name} is not the partitioned topic.")
        if partitions < current:
            raise NotAllowedError(
                f"Desired partitions {partitions} can't be less than the current partitions "
                f"{current}."
            )
        self._room.check(name, partitions - current)
        await self._change(name, lambda meta: msgspec.structs.replace(meta, partitions=partitions))

    async def update_properties(
        self, name: TopicName, properties: Mapping[str, str | None]
    ) -> None:
        """Add ``properties`` to a partitioned topic's, replacing same keys; None removes (rule 5).

        Raises:
            TopicNotFoundError: Not a partitioned topic.
        """
        added = dict(properties)
        await self._change(
            name,
            lambda meta: msgspec.structs.replace(
                meta, properties=_without_nones({**(_properties(meta) or {}), **added})
            ),
        )

    async def remove_property(self, name: TopicName, key: str) -> None:
        """Remove one key of a partitioned topic's properties (a missing key: no change).

        Raises:
            TopicNotFoundError: Not a partitioned topic.
        """

        def without(meta: _PartitionedTopicMetadata) -> _PartitionedTopicMetadata:
            properties = _properties(meta)
            if properties is None:
                return meta  # none given: they stay none, as Pulsar's null map stays null
            return msgspec.structs.replace(
                meta, properties={k: v for k, v in properties.items() if k != key}
            )

        await self._change(name, without)

    async def _change(
        self,
        name: TopicName,
        change: Callable[[_PartitionedTopicMetadata], _PartitionedTopicMetadata],
    ) -> None:
        # Rule 5: read, change, write back at the version read; a conflict reads again.
        missing = TopicNotFoundError(f"Topic {name} is not the partitioned topic.")
        if self._metadata is None:
            if name not in self._counts:
                raise missing
            current = _PartitionedTopicMetadata(
                self._counts[name], properties=self._properties.get(name, msgspec.UNSET)
            )
            self._remember(name, change(current))
            return
        path = partitioned_topic_path(name)
        while True:
            node = await self._metadata.get(path)
            if node is None or (stored := _decode(node.value)).deleted:
                raise missing
            meta = change(stored)
            try:
                await self._metadata.put(path, msgspec.json.encode(meta), node.version)
            except BadVersionError:
                continue
            self._remember(name, meta)
            return

    async def forget(self, name: TopicName) -> None:
        """Drop a partitioned topic's metadata (its partitions were deleted)."""
        del self._counts[name]
        self._properties.pop(name, None)
        if self._metadata is None:
            return
        path = partitioned_topic_path(name)
        if await self._metadata.exists(path):
            await self._metadata.delete(path)
