"""The load manager's leader tasks, started and stopped with the leadership (spec §2.4, §4.1, §6.2).

Pulsar's ``PulsarService`` starts two periodic tasks when its broker is elected and cancels them
when it is not the leader any more; :class:`LoadBalancerLeader` does the same with one task
group per leadership term. While leading, on the injected clock:

- **aggregation**: the term reads the stored bundle data, then watches ``/loadbalance/brokers``
  and runs ``updateAll`` on every change (:class:`~emubroker.loadbalance.runtime.aggregation.
  LeaderAggregation`);
- **bundle-data writer**: every ``loadBalancerResourceQuotaUpdateIntervalMinutes`` (fixed rate,
  first run one interval after the election, ``LoadResourceQuotaUpdaterTask``), the top bundles'
  data and the brokers' time averages are written (the modular manager only: the extensible
  manager's wrapper makes this a no-op);
- **extensible loads** (extensible manager): every ``loadBalancerReportUpdateMinIntervalMillis``
  each broker's ``BrokerLoadData`` moving averages take a sample of its latest report
  (:meth:`~emubroker.loadbalance.runtime.aggregation.LeaderAggregation.sample_broker_loads`);
- **shedding**: every ``loadBalancerSheddingIntervalMinutes``, with a fixed delay after each run
  for the modular manager (``LoadSheddingTask``) and at a fixed rate for the extensible one
  (``UnloadScheduler``), the configured shedder runs and its decisions are unloaded through the
  injected :class:`~emubroker.loadbalance.runtime.shedding_runtime.BundleUnloader`;
- **automatic split** (modular manager): after every ``updateAll``, as Pulsar's
  ``checkNamespaceBundleSplit``, hot bundles are split at their owner through the injected
  :class:`~emubroker.loadbalance.runtime.split_runtime.BundleSplitRequest`.

Intervals are read from the live configuration at each wait, so a dynamic change applies from
the next run; minute-valued keys accept fractions (``0.05`` is 3 s).

Departure: Pulsar's followers run ``updateAll`` too, so a newly elected leader already holds the
averages it built while following. Here only the leader aggregates; a new leader starts from the
bundle data the previous one stored (what a freshly started Pulsar leader has).
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING, Final, Protocol

import anyio
import msgspec

from emubroker.loadbalance.leader.election import LeaderElectionState
from emubroker.loadbalance.load_manager import LeaderTerm
from emubroker.loadbalance.load_managers import load_manager
from emubroker.loadbalance.runtime.aggregation import LeaderAggregation
from emubroker.loadbalance.runtime.shedding_runtime import SheddingRunner
from emubroker.loadbalance.runtime.split_runtime import SplitRunner
from emubroker.loadbalance.strategies.isolation import PlacementPolicies
from emubroker.loadbalance.strategies.transfer_shedder import TransferShedder
from emubroker.metadata import MetadataStoreError, StoreClosedError, WatchOverflowError
from emubroker.metadata.paths import LOAD_REPORTS_ROOT

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Collection

    from anyio.abc import TaskGroup, TaskStatus

    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.runtime.shedding_runtime import BundleUnloader
    from emubroker.loadbalance.runtime.split_runtime import BundleSplitRequest, NamespaceLayout
    from emubroker.loadbalance.trace.records import TraceSink
    from emubroker.metadata import MetadataStore
    from protocol.clock import Clock

__all__ = ["Leadership", "LoadBalancerLeader", "LoadBalancerLeaderStatistics"]

log = logging.getLogger(__name__)

RETRY_DELAY: Final = 5.0
"""Seconds before a failed watch of ``/loadbalance/brokers`` is opened again."""


class Leadership(Protocol):
    """The leader election as the leader tasks read it (``LeaderElectionService``)."""

    def is_leader(self) -> bool:
        """Whether this broker leads."""
        ...

    def subscribe(self, listener: Callable[[LeaderElectionState], None]) -> Callable[[], None]:
        """Call ``listener`` on every state change; returns the unsubscriber."""
        ...


class LoadBalancerLeaderStatistics(msgspec.Struct, frozen=True):
    """A snapshot of the leader tasks (for ``/metrics`` and tests).

    Attributes:
        leading: Whether a leadership term is running.
        terms: Terms started since the broker started.
        updates: ``updateAll`` runs in the current term.
        bundle_data_writes: Bundle-data writer runs in the current term.
        shedding_cycles: Shedding cycles run since the broker started.
        unload_broker_count: ``pulsar_lb_unload_broker_total``.
        unload_bundle_count: ``pulsar_lb_unload_bundle_total``.
        split_checks: Automatic split checks run since the broker started.
        bundles_split: ``pulsar_lb_bundles_split_total``.
    """

    leading: bool
    terms: int
    updates: int
    bundle_data_writes: int
    shedding_cycles: int
    unload_broker_count: int
    unload_bundle_count: int
    split_checks: int = 0
    bundles_split: int = 0


class LoadBalancerLeader:
    """The leader's load-manager tasks; run :meth:`run` in the broker's task group.

    Args:
        store: The broker's metadata session.
        clock: Drives every wait.
        broker_id: This broker's id.
        config: The live configuration.
        leadership: This broker's leader election.
        unload: Unloads a bundle (optionally to a destination broker).
        split: Splits a bundle at its owner (None: no automatic split).
        layout: The namespaces' current bundles (the split check's bundle counts).
        owned_bundles: The bundles this broker owns (``str`` of each).
        policies: The placement policies (isolation, anti-affinity, failure domains).
        trace: Where ``shed`` rows go.
        seed: Seed of the placement strategy's randomness (a new term reseeds it).
    """

    def __init__(
        self,
        store: MetadataStore,
        clock: Clock,
        *,
        broker_id: str,
        config: Callable[[], BrokerConfig],
        leadership: Leadership,
        unload: BundleUnloader,
        split: BundleSplitRequest | None = None,
        layout: NamespaceLayout | None = None,
        owned_bundles: Callable[[], Collection[object]] = list,
        policies: Callable[[], PlacementPolicies] | None = None,
        trace: TraceSink | None = None,
        seed: int = 0,
    ) -> None:
        self._store = store
        self._clock = clock
        self._broker_id = broker_id
        self._config = config
        self._leadership = leadership
        self._owned_bundles = owned_bundles
        self._policies = policies
        self._seed = seed
        self.unload = unload  # what every shedding decision goes through
        self.split = split  # what every automatic split goes through
        self.runner = SheddingRunner(clock, broker_id=broker_id, unload=unload, trace=trace)
        self.transfer_shedder = TransferShedder(self.runner.extensible)
        self.splits = (
            None
            if split is None or layout is None
            else SplitRunner(clock, broker_id=broker_id, split=split, trace=trace)
        )
        self._layout = layout
        self._tg: TaskGroup | None = None
        self._scope: anyio.CancelScope | None = None
        self._term: LeaderTerm | None = None
        self._terms = 0
        self._cycles = 0

    # ---- what the rest of the broker reads -------------------------------------------------

    @property
    def term(self) -> LeaderAggregation | None:
        """The current term's aggregation (None when not leading)."""
        return self._term.aggregation if self._term is not None else None

    def statistics(self) -> LoadBalancerLeaderStatistics:
        term = self._term
        unload_brokers, unload_bundles = load_manager(self._config()).unload_counts(self)
        return LoadBalancerLeaderStatistics(
            leading=term is not None,
            terms=self._terms,
            updates=term.aggregation.updates if term is not None else 0,
            bundle_data_writes=term.bundle_data_writes if term is not None else 0,
            shedding_cycles=self._cycles,
            unload_broker_count=unload_brokers,
            unload_bundle_count=unload_bundles,
            split_checks=self.split_checks,
            bundles_split=self.bundles_split,
        )

    @property
    def shedding_cycles(self) -> int:
        """Shedding cycles run since the broker started."""
        return self._cycles

    @property
    def split_checks(self) -> int:
        """Automatic split checks run since the broker started."""
        return self.splits.checks if self.splits is not None else 0

    @property
    def bundles_split(self) -> int:
        """Bundles split automatically since the broker started."""
        return self.splits.split_count if self.splits is not None else 0

    # ---- the service -----------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Lead whenever this broker is the leader, until cancelled."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            unsubscribe = self._leadership.subscribe(self._on_state)
            try:
                if self._leadership.is_leader():
                    self._start_term()
                task_status.started()
                await anyio.Event().wait()
            finally:
                unsubscribe()
                self._tg = None

    def _on_state(self, state: LeaderElectionState) -> None:
        if state is LeaderElectionState.LEADING:
            self._start_term()
        elif self._scope is not None:
            log.info("not the leader any more: stopping the load manager's leader tasks")
            self._scope.cancel()
            self._scope = None
            self._term = None  # the cancelled tasks unwind at their next checkpoint

    def _start_term(self) -> None:
        if self._scope is not None or self._tg is None:
            return
        scope = anyio.CancelScope()
        self._scope = scope
        self._tg.start_soon(self._lead, scope)

    async def _lead(self, scope: anyio.CancelScope) -> None:
        with scope:
            self._terms += 1
            conf = self._config()
            aggregation = LeaderAggregation(
                self._store,
                conf,
                policies=self._current_policies(),
                rng=random.Random(self._seed),
                owned_bundles=lambda: [str(b) for b in self._owned_bundles()],
                now_ms=self._clock.wall_ms,
                has_policies=lambda bundle: self._current_policies().has_policies(bundle),
            )
            term = self._term = LeaderTerm(aggregation)
            log.debug("leading: starting the load manager's leader tasks (%s)", self._broker_id)
            try:
                try:
                    await aggregation.load_stored_bundle_data()
                except MetadataStoreError as exc:
                    log.warning("could not read the stored bundle data (%s); using defaults", exc)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._watch_reports, aggregation)
                    tg.start_soon(load_manager(conf).run_term_task, self, term)
                    tg.start_soon(self._shedding_loop, term)
            finally:
                if self._term is term:
                    self._term = None
        if self._scope is scope:
            self._scope = None

    def _current_policies(self) -> PlacementPolicies:
        return self._policies() if self._policies is not None else PlacementPolicies()

    # ---- aggregation -----------------------------------------------------------------------

    async def _watch_reports(self, aggregation: LeaderAggregation) -> None:
        while True:
            try:
                async with self._store.watch(LOAD_REPORTS_ROOT) as notifications:
                    await self._refresh(aggregation)  # what changed before the watch opened
                    async for _ in notifications:
                        await self._refresh(aggregation)
                return  # the stream ends when the store is closed
            except WatchOverflowError:
                log.warning("load reports: notifications were lost; reading them all again")
            except StoreClosedError:
                return
            except MetadataStoreError as exc:
                log.warning("watching %s failed (%s); retrying", LOAD_REPORTS_ROOT, exc)
                await self._clock.sleep(RETRY_DELAY)

    async def _refresh(self, aggregation: LeaderAggregation) -> None:
        aggregation.manager.conf = self._config()
        aggregation.manager.policies = self._current_policies()  # the split check reads them
        await self._guarded(aggregation.refresh, "updating the load data")
        await load_manager(self._config()).after_update(self, aggregation)

    async def check_splits(self, aggregation: LeaderAggregation) -> None:
        """Split the hot bundles (``checkNamespaceBundleSplit``), if splitting is wired."""
        if self.splits is None or self._layout is None:
            return
        splits, layout = self.splits, self._layout
        await self._guarded(
            lambda: splits.check(aggregation, self._config(), layout, aggregation.updates),
            "checking bundles to split",
        )

    async def _guarded(self, action: Callable[[], Awaitable[object]], what: str) -> None:
        try:
            await action()
        except StoreClosedError:
            raise
        except Exception:
            # Task boundary (STYLE.md §1.17): a failed round is logged; the next one runs.
            log.exception("load manager leader: %s failed", what)

    # ---- periodic tasks --------------------------------------------------------------------

    async def write_bundle_data_periodically(self, term: LeaderTerm) -> None:
        """``LoadResourceQuotaUpdaterTask``: write the bundle data at its interval, forever."""
        deadline = self._clock.now()
        while True:
            deadline += self._config().loadBalancerResourceQuotaUpdateIntervalMinutes * 60
            await self._clock.sleep_until(deadline)
            term.aggregation.manager.conf = self._config()
            await self._guarded(term.aggregation.write_bundle_data, "writing the bundle data")
            term.bundle_data_writes += 1

    async def sample_loads_periodically(self, aggregation: LeaderAggregation) -> None:
        """Sample every broker's ``BrokerLoadData`` at the report interval, forever."""
        deadline = self._clock.now()
        while True:
            deadline += self._config().loadBalancerReportUpdateMinIntervalMillis / 1000
            await self._clock.sleep_until(deadline)
            aggregation.manager.conf = self._config()
            aggregation.sample_broker_loads()

    async def _shedding_loop(self, term: LeaderTerm) -> None:
        deadline = self._clock.now()
        while True:
            conf = self._config()
            interval = conf.loadBalancerSheddingIntervalMinutes * 60
            deadline = await load_manager(conf).wait_for_shedding(self._clock, deadline, interval)
            await self._guarded(lambda: self._shed(term), "load shedding")

    async def _shed(self, term: LeaderTerm) -> None:
        conf = self._config()
        manager = term.aggregation.manager
        manager.conf = conf
        manager.policies = self._current_policies()  # what shedding's policy checks read
        term.cycle += 1
        self._cycles += 1
        await load_manager(conf).shed(self, term, conf)
