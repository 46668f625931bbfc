"""Every broker's load report, as Pulsar's ``ModularLoadManagerImpl`` keeps it (spec §2.2, §2.3).

At start the broker registers: it samples its usage and bundles, then creates the **ephemeral**
node ``/loadbalance/brokers/<host:webServicePort>`` holding its ``LocalBrokerData`` JSON (Pulsar's
``brokersData.acquireLock``) and writes an empty ``/loadbalance/broker-time-average/<id>``. The
composition root does this before the broker serves lookups. The node lives as long as the
broker's metadata session; while the broker runs it watches the node and writes it again if it
goes (its session expired and it carries on with a new one, as Pulsar's lock revalidation does).

Three loops on the injected clock, as Pulsar schedules them:

- every ``loadBalancerHostUsageCheckIntervalMinutes``: sample the ``ResourceUsageSource``;
- every ``statsUpdateFrequencyInSecs``: sample the bundles' stats from the loaded topics;
- every ``loadBalancerReportUpdateMinIntervalMillis`` (fixed rate), while ``loadBalancerEnabled``:
  update the report from the latest samples and write it if ``needBrokerDataUpdate`` says so
  (a change beyond ``loadBalancerReportUpdateThresholdPercentage``, or
  ``loadBalancerReportUpdateMaxIntervalMinutes`` since the last write); the log line names the
  term that decided.

Registration refuses to take over a node that another broker with the same id holds (Pulsar's
``LockBusyException`` stops that broker's start); a node left by this broker's earlier session
(a restart before the old session expired), or one that does not parse, is replaced.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Final

import anyio
import msgspec

from emubroker.loadbalance.model.codec import encode
from emubroker.loadbalance.model.data import LocalBrokerData, TimeAverageBrokerData
from emubroker.loadbalance.model.usage import SystemResourceUsage
from emubroker.loadbalance.reporting.bundle_sampler import BundleStatsSampler
from emubroker.loadbalance.reporting.report_update import MAX_INTERVAL, report_update_reason
from emubroker.loadbalance.reporting.usage_sources import BrokerActivity
from emubroker.loadbalance.runtime.broker_registry import decode_report
from emubroker.metadata import (
    BadVersionError,
    MetadataStoreError,
    NotFoundError,
    NotificationKind,
    StoreClosedError,
    WatchOverflowError,
)
from emubroker.metadata.paths import broker_time_average_path, load_report_path

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable

    from anyio.abc import TaskStatus

    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.model.bundle_stats import NamespaceBundleStats
    from emubroker.loadbalance.reporting.bundle_sampler import TopicTraffic
    from emubroker.loadbalance.reporting.report_update import ReportUpdateReason
    from emubroker.loadbalance.reporting.usage_sources import ResourceUsageSource
    from emubroker.metadata import MetadataStore
    from protocol.clock import Clock

__all__ = [
    "BrokerRegistrationError",
    "LoadReportStatistics",
    "LoadReporter",
]

log = logging.getLogger(__name__)

FIRST_REASON: Final = "first"
CHANGE_REASON: Final = "change"
MAX_INTERVAL_REASON: Final = "max_interval"
"""Why a report was written, as the load-balancer trace spells it."""

RETRY_DELAY: Final = 5.0
"""Seconds before a failed re-registration is tried again."""

# Each round of registration either ends or replaces a stale node; this many rounds in a row
# without an answer means the node is being rewritten in a loop.
_MAX_ROUNDS: Final = 16
# Releasing the node on shutdown must not hang a stopping broker on a dead store; the session's
# end removes the node anyway.
_RELEASE_TIMEOUT: Final = 2.0


class BrokerRegistrationError(MetadataStoreError):
    """Another broker with the same id holds the registration node."""


class LoadReportStatistics(msgspec.Struct, frozen=True):
    """A snapshot of a broker's reporting (for ``/metrics``).

    Attributes:
        usage: The latest resource usage sample.
        bundle_stats: The latest bundle stats, by bundle.
        writes: Reports written since the broker started (registration included).
        last_reason: Why the last report was written (None: the registration).
    """

    usage: SystemResourceUsage
    bundle_stats: dict[str, NamespaceBundleStats]
    writes: int
    last_reason: ReportUpdateReason | None


class LoadReporter:
    """One broker's load report; run :meth:`run` in a task group.

    Args:
        store: The broker's metadata session (the registration node is ephemeral in it).
        clock: Drives the loops; its wall clock stamps ``lastUpdate``.
        broker_id: ``host:webServicePort``.
        initial: The report's fixed part: URLs, listeners, version, load manager class, topic
            kinds (Pulsar's ``LocalBrokerData`` as ``start()`` builds it).
        config: The live configuration (intervals and threshold are read at each use).
        usage: Where resource usages come from.
        topics: The loaded topics' counters, each with its bundle.
        traffic: The broker's session byte totals ``(in, out, buffered)``.
        on_written: Called with each report written and why: ``first`` (registration, and
            registering again after the session was lost), ``change`` or ``max_interval`` (the
            load-balancer trace's ``reason``).
    """

    def __init__(
        self,
        store: MetadataStore,
        clock: Clock,
        *,
        broker_id: str,
        initial: LocalBrokerData,
        config: Callable[[], BrokerConfig],
        usage: ResourceUsageSource,
        topics: Callable[[], Iterable[TopicTraffic]],
        traffic: Callable[[], tuple[int, int, int]],
        on_written: Callable[[LocalBrokerData, str], None] | None = None,
    ) -> None:
        self._store = store
        self._on_written = on_written
        self._clock = clock
        self.broker_id = broker_id
        self.path = load_report_path(broker_id)
        self._config = config
        self._source = usage
        self._topics = topics
        self._traffic = traffic
        self._local = initial
        self._last = LocalBrokerData()  # Pulsar's lastData: what was last written
        self._usage = SystemResourceUsage()
        self._sampler = BundleStatsSampler()
        self._bundle_stats: dict[str, NamespaceBundleStats] = {}
        self._writes = 0
        self._reason: ReportUpdateReason | None = None
        self._registered = False
        self._disabled = False

    # ---- what the rest of the broker reads -------------------------------------------------

    def load_report(self) -> LocalBrokerData:
        """The report brought up to date with the latest samples (``GET .../load-report``).

        Pulsar's ``updateLocalBrokerData``: usages and bundle stats are the last sampled ones.
        """
        self._local.update(self._usage, dict(self._bundle_stats))
        return self._local

    def statistics(self) -> LoadReportStatistics:
        return LoadReportStatistics(
            self._usage, dict(self._bundle_stats), self._writes, self._reason
        )

    # ---- sampling ---------------------------------------------------------------------------

    def sample_usage(self) -> None:
        """Take a resource usage sample (the host usage check)."""
        bytes_in, bytes_out, buffered = self._traffic()
        stats = self._bundle_stats.values()
        self._usage = self._source.sample(
            self._clock.now(),
            BrokerActivity(
                bytes_in=bytes_in,
                bytes_out=bytes_out,
                buffered=buffered,
                msg_rate_in=sum(s.msg_rate_in for s in stats),
                msg_rate_out=sum(s.msg_rate_out for s in stats),
                msg_throughput_in=sum(s.msg_throughput_in for s in stats),
                msg_throughput_out=sum(s.msg_throughput_out for s in stats),
            ),
        )

    def sample_bundles(self) -> None:
        """Take the bundles' stats from the loaded topics (the topic stats update)."""
        self._bundle_stats = self._sampler.sample(self._clock.now(), self._topics())

    # ---- writing ----------------------------------------------------------------------------

    async def write_if_needed(self) -> ReportUpdateReason | None:
        """Update the report and write it if ``needBrokerDataUpdate`` says so.

        Returns:
            Why it was written, or None if it was not.

        Raises:
            MetadataStoreError: The write failed.
        """
        now_ms = self._now_ms()
        current = self.load_report()
        reason = report_update_reason(self._last, current, self._config(), now_ms)
        if reason is not None:
            await self._write(now_ms)
            self._reason = reason
            self._written(MAX_INTERVAL_REASON if reason.term == MAX_INTERVAL else CHANGE_REASON)
            log.info(
                "load report written to %s: %s (%s)",
                self.path,
                reason.describe(),
                current.print_resource_usage(),
            )
        return reason

    async def _write(self, now_ms: int) -> None:
        self._local.last_update = now_ms
        await self._store.put(self.path, encode(self._local), ephemeral=True)
        self._local.clean_deltas()
        self._last.update_from(self._local)
        self._writes += 1

    def _written(self, why: str) -> None:
        if self._on_written is not None:
            try:
                self._on_written(self._local, why)
            except Exception:
                log.exception("load report of %s: recording the write failed", self.broker_id)

    def _now_ms(self) -> int:
        return self._clock.wall_ms()

    # ---- registration -----------------------------------------------------------------------

    async def register(self) -> None:
        """Sample, then create the registration node and the empty time-average node.

        Raises:
            BrokerRegistrationError: Another broker with this id is registered.
            MetadataStoreError: The store failed.
        """
        self.sample_bundles()
        self.sample_usage()
        now_ms = self._now_ms()
        self._local.start_timestamp = self._local.last_update = now_ms
        self.load_report()
        await self._acquire()
        self._local.clean_deltas()
        self._last.update_from(self._local)
        self._writes += 1
        self._registered = True
        self._written(FIRST_REASON)
        await self._store.put(
            broker_time_average_path(self.broker_id), encode(TimeAverageBrokerData())
        )
        log.debug("registered broker %s at %s", self.broker_id, self.path)

    async def _acquire(self) -> None:
        """Create the node, or take over our own stale one (``ResourceLockImpl.revalidate``)."""
        payload = encode(self._local)
        for _ in range(_MAX_ROUNDS):
            try:
                await self._store.put(self.path, payload, expected_version=-1, ephemeral=True)
                return
            except BadVersionError:
                pass
            node = await self._store.get(self.path)
            if node is None:
                continue  # gone in between: create it again
            if node.created_by_self:
                await self._store.put(self.path, payload, expected_version=node.version)
                return
            existing = decode_report(self.broker_id, node.value)
            if existing is not None and not existing.same_broker(self._local):
                raise BrokerRegistrationError(
                    f"broker {self.broker_id} is already registered at {self.path} by "
                    f"{existing.web_service_url} ({existing.pulsar_service_url})"
                )
            log.info("replacing the registration %s left by an earlier session", self.path)
            with contextlib.suppress(NotFoundError, BadVersionError):
                await self._store.delete(self.path, expected_version=node.version)
        raise MetadataStoreError(f"{self.path} keeps changing; cannot register")

    async def disable(self) -> None:
        """Unregister for good before a graceful shutdown (Pulsar's ``disableBroker``).

        The leader places no bundle here any more while this broker unloads its own.
        """
        self._disabled = True
        await self._release()

    async def _restore(self) -> None:
        """Write the node again if it is gone (the session that held it ended)."""
        if self._disabled or await self._store.exists(self.path):
            return
        log.warning(
            "registration %s was lost (metadata session ended); registering again", self.path
        )
        self._local.last_update = self._now_ms()
        self.load_report()
        await self._acquire()
        self._writes += 1
        self._written(FIRST_REASON)

    async def _release(self) -> None:
        if not self._registered:
            return
        self._registered = False
        with anyio.CancelScope(shield=True), anyio.move_on_after(_RELEASE_TIMEOUT):
            try:
                node = await self._store.get(self.path)
                if node is not None and node.created_by_self:
                    await self._store.delete(self.path, expected_version=node.version)
                    log.debug("unregistered broker %s", self.broker_id)
            except (NotFoundError, BadVersionError, StoreClosedError):
                pass  # already gone (session ended) or no longer ours
            except MetadataStoreError as exc:
                log.warning("could not remove %s (%s); it goes with the session", self.path, exc)

    # ---- the service ------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Register, then keep the report current until cancelled; unregisters on the way out.

        ``task_status.started()`` is called once the broker is registered. A store closed under
        the service ends it.

        Raises:
            BrokerRegistrationError: Another broker with this id is registered.
            MetadataStoreError: The registration failed (the broker cannot start).
        """
        try:
            await self.register()
            task_status.started()
            async with anyio.create_task_group() as tg:
                self._start_loops(tg)
                await self._keep_registered()
                tg.cancel_scope.cancel()  # the store was closed: nothing more to report to
        finally:
            await self._release()

    async def _keep_registered(self) -> None:
        """Watch the node and write it again whenever it goes; returns when the store closes."""
        while True:
            try:
                async with self._store.watch(self.path) as notifications:
                    # Anything that happened before the watch opened is seen here.
                    await self._restore()
                    async for notification in notifications:
                        if notification.kind is NotificationKind.DELETED:
                            await self._restore()
                return  # the stream ends when the store is closed
            except WatchOverflowError:
                log.warning("registration %s: notifications were lost; checking it", self.path)
            except StoreClosedError:
                return
            except MetadataStoreError as exc:
                log.warning(
                    "registration %s failed (%s); retrying in %s s", self.path, exc, RETRY_DELAY
                )
                await self._clock.sleep(RETRY_DELAY)

    def _start_loops(self, tg: anyio.abc.TaskGroup) -> None:
        config = self._config
        tg.start_soon(
            self._every,
            lambda: config().loadBalancerHostUsageCheckIntervalMinutes * 60,
            self._usage_round,
            "sampling the resource usage",
        )
        tg.start_soon(
            self._every,
            lambda: float(config().statsUpdateFrequencyInSecs),
            self._stats_round,
            "sampling the bundle stats",
        )
        tg.start_soon(
            self._every,
            lambda: config().loadBalancerReportUpdateMinIntervalMillis / 1000,
            self._report_round,
            "writing the report",
        )

    async def _usage_round(self) -> None:
        self.sample_usage()

    async def _stats_round(self) -> None:
        self.sample_bundles()

    async def _report_round(self) -> None:
        # Pulsar schedules the report task only while the load balancer is enabled.
        if self._config().loadBalancerEnabled:
            await self.write_if_needed()

    async def _every(
        self, interval: Callable[[], float], action: Callable[[], Awaitable[object]], what: str
    ) -> None:
        """Run ``action`` at a fixed rate (Pulsar's ``scheduleAtFixedRate``), logging failures."""
        deadline = self._clock.now()
        while True:
            deadline += interval()
            await self._clock.sleep_until(deadline)
            try:
                await action()
            except StoreClosedError:
                return
            except Exception:
                # Task boundary (STYLE.md §1.17): a failed round is logged, the next one runs.
                log.exception("load report of %s: %s failed", self.broker_id, what)
