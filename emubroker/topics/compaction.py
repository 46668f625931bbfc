"""Topic compaction as a service: trigger it, ask its status (Pulsar's REST ``compaction`` calls).

``trigger(topic)`` starts a compaction in the background and returns at once, as
``PUT /admin/v2/persistent/{tenant}/{ns}/{topic}/compaction`` does (a partitioned topic compacts
each partition); ``status(topic)`` answers ``GET .../compaction`` with Pulsar's
``LongRunningProcessStatus``: ``NOT_RUN``, ``RUNNING``, ``SUCCESS`` or ``ERROR`` with
``lastError``. A second trigger while one runs fails with :class:`CompactionInProgressError`
(Pulsar answers 409 Conflict).

A run reads the topic's entries up to its current last entry in ranges, yielding to the event
loop between ranges so a long topic does not stall the broker, and hands the resulting
:class:`~emubroker.topics.compacted.CompactedView` to the topic, which applies it to its
``read_compacted`` subscriptions. The view lives with the topic's state, so it survives unloads.
"""

from __future__ import annotations

import enum
import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final, Self

import anyio
import msgspec

from emubroker.topics.compacted import CompactedView, Compactor
from emubroker.topics.topic import Topic
from protocol.errors import NotAllowedError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from anyio.abc import TaskGroup, TaskStatus

    from emubroker.naming import TopicName
    from emubroker.topics.service import TopicService
    from protocol.clock import Clock

__all__ = [
    "CompactionInProgressError",
    "CompactionRecord",
    "CompactionService",
    "CompactionStatus",
    "LongRunningProcessStatus",
]

log = logging.getLogger(__name__)

READ_RANGE: Final = 500
"""Entries read and compacted between two yields to the event loop."""


class CompactionStatus(enum.StrEnum):
    """Pulsar's ``LongRunningProcessStatus.Status``."""

    NOT_RUN = "NOT_RUN"
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    ERROR = "ERROR"


class CompactionRecord(msgspec.Struct, frozen=True):
    """A topic's last compactions, as Pulsar's ``CompactionRecord`` reports them in topic stats.

    Attributes:
        removed_events: Of the last successful run: values replaced, tombstones, keyless
            messages dropped (``lastCompactionRemovedEventCount``; a run reads the whole topic,
            where Pulsar's reads on from its previous horizon).
        succeed_ms: Epoch ms the last successful run ended, 0 before one.
        failed_ms: Epoch ms the last failed run ended, 0 before one.
        duration_ms: How long the last successful run took.
    """

    removed_events: int = 0
    succeed_ms: int = 0
    failed_ms: int = 0
    duration_ms: int = 0


class LongRunningProcessStatus(msgspec.Struct, frozen=True):
    """Pulsar's ``LongRunningProcessStatus`` JSON: ``{"status": ..., "lastError": ...}``."""

    status: CompactionStatus
    lastError: str = ""


class CompactionInProgressError(NotAllowedError):
    """A compaction of that topic is already running (REST: 409 Conflict)."""


class CompactionService:
    """Runs compactions in its own task group (``async with service.running()``, or ``run``).

    Args:
        topics: The topic registry.
        clock: For the records' times (:meth:`record`).
        retain_null_key: ``topicCompactionRetainNullKey``.
    """

    def __init__(
        self, topics: TopicService, *, clock: Clock, retain_null_key: bool = False
    ) -> None:
        self._topics = topics
        self._clock = clock
        self._retain_null = retain_null_key
        self._status: dict[TopicName, LongRunningProcessStatus] = {}
        self._records: dict[TopicName, CompactionRecord] = {}
        self._tg: TaskGroup | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Self]:
        """Run compactions in a task group for the duration of the block; cancel them after."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield self
            finally:
                self._tg = None
                tg.cancel_scope.cancel()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; for ``await task_group.start(service.run)``."""
        async with self.running():
            task_status.started()
            await anyio.Event().wait()

    async def trigger(self, name: TopicName) -> None:
        """Start compacting a topic (each partition of a partitioned topic) in the background.

        Raises:
            TopicNotFoundError: The topic does not exist (or its namespace does not).
            NotAllowedError: A non-persistent topic.
            CompactionInProgressError: A compaction of it is running.
        """
        if self._tg is None:
            raise RuntimeError("CompactionService is not running")
        partitions = self._topics.partitions_of(name)
        targets = [name.partition(i) for i in range(partitions)] if partitions else [name]
        topics: list[Topic] = []
        for target in targets:
            if self.status(target).status is CompactionStatus.RUNNING:
                raise CompactionInProgressError(f"Compaction already in progress for {target}")
            topic = (await self._topics.get_topic(target, create=False)).as_persistent()
            if topic is None:
                raise NotAllowedError(f"{target} is not persistent: nothing to compact")
            topics.append(topic)
        for topic in topics:
            self._status[topic.name] = LongRunningProcessStatus(CompactionStatus.RUNNING)
            self._tg.start_soon(self._run, topic, name=f"compaction {topic.name}")

    def status(self, name: TopicName) -> LongRunningProcessStatus:
        """The state of the last compaction of a topic.

        A partitioned topic's status combines its partitions': ``RUNNING`` while one runs, else
        ``ERROR`` if one failed, ``SUCCESS`` once all succeeded, ``NOT_RUN`` otherwise.
        """
        partitions = self._topics.partitions_of(name)
        if not partitions:
            return self._status.get(name, LongRunningProcessStatus(CompactionStatus.NOT_RUN))
        each = [self.status(name.partition(i)) for i in range(partitions)]
        for wanted in (CompactionStatus.RUNNING, CompactionStatus.ERROR):
            for status in each:
                if status.status is wanted:
                    return status
        if all(s.status is CompactionStatus.SUCCESS for s in each):
            return LongRunningProcessStatus(CompactionStatus.SUCCESS)
        return LongRunningProcessStatus(CompactionStatus.NOT_RUN)

    def record(self, name: TopicName) -> CompactionRecord | None:
        """The topic's last compactions since this broker started (None: never run here)."""
        return self._records.get(name)

    async def _run(self, topic: Topic) -> None:
        try:
            await self.compact(topic)
        except Exception as exc:
            log.exception("compaction of %s failed", topic.name)
            record = self._records.get(topic.name, CompactionRecord())
            self._records[topic.name] = msgspec.structs.replace(
                record, failed_ms=self._clock.wall_ms()
            )
            self._status[topic.name] = LongRunningProcessStatus(
                CompactionStatus.ERROR, f"{type(exc).__name__}: {exc}"
            )
        else:
            self._status[topic.name] = LongRunningProcessStatus(CompactionStatus.SUCCESS)

    async def compact(self, topic: Topic) -> CompactedView:
        """Compact a loaded topic now, up to its current last entry, and install the view.

        Returns:
            The new compacted view.

        Raises:
            RemoteProtocolError: A stored entry is not a valid payload section.
            StorageError: Its entries cannot be read.
        """
        began = self._clock.now()
        ledger = topic.ledger
        count = ledger.count
        compactor = Compactor(retain_null_key=self._retain_null)
        index = ledger.first_index  # trimmed ledgers are gone (every cursor was past them)
        while index < count:
            _, _, sections = await ledger.read_entries(index, min(count, index + READ_RANGE) - 1)
            compactor.feed(enumerate(sections, start=index))
            index += len(sections)
            await anyio.lowlevel.checkpoint()
        view = compactor.result(count)
        topic.install_compacted(view)
        record = self._records.get(topic.name, CompactionRecord())
        self._records[topic.name] = msgspec.structs.replace(
            record,
            removed_events=compactor.removed_events,
            succeed_ms=self._clock.wall_ms(),
            duration_ms=round((self._clock.now() - began) * 1000),
        )
        log.info(
            "compacted %s up to entry index %d: %d entries compacted out",
            topic.name,
            view.horizon,
            len(view.dropped),
        )
        return view
