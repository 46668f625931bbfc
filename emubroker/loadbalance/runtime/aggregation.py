"""The leader's ``LoadData``, kept from the brokers' reports and written back (spec §2.4).

:class:`LeaderAggregation` is the metadata-store side of ``ModularLoadManagerImpl.updateAll``
and ``writeBundleDataOnZooKeeper``; the arithmetic is
:class:`~emubroker.loadbalance.strategies.modular_manager.ModularLoadManager`'s. What it does,
as Pulsar's leader does it:

- :meth:`load_stored_bundle_data`: a new leader reads ``/loadbalance/bundle-data``, so a bundle
  seen for the first time starts from the averages the previous leader stored
  (``getBundleDataOrDefault``); default data otherwise.
- :meth:`refresh` (on every change under ``/loadbalance/brokers``): read every registered
  broker's report and run ``updateAll``: each bundle in a report's ``lastStats`` gets one more
  sample, so the short-term window (10 samples) counts report events, not seconds. Brokers that
  vanished lose their ``broker-time-average`` node and bundles no broker reports lose their
  ``bundle-data`` node.
- :meth:`write_bundle_data` (every ``loadBalancerResourceQuotaUpdateIntervalMinutes``): one more
  ``updateBundleData``, then the top ``loadBalancerMaxNumberOfBundlesInBundleLoadReport ×
  brokers`` bundles' data and every broker's time average, in Pulsar's JSON.

Bad nodes never stop the leader: a report that does not parse leaves the broker's previous
report in place (Pulsar logs the read error and keeps its ``BrokerData``), a stored bundle-data
node that does not parse is logged and the bundle starts from the defaults.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

import msgspec

from emubroker.config.loadbalancer import THRESHOLD_SHEDDER, TRANSFER_SHEDDER
from emubroker.loadbalance.model.codec import LoadDataDecodeError, decode, encode
from emubroker.loadbalance.model.data import BundleData
from emubroker.loadbalance.model.extensible_data import (
    BrokerLoadData,
    TopBundlesLoadData,
    top_k_bundles,
)
from emubroker.loadbalance.model.usage import SystemResourceUsage
from emubroker.loadbalance.runtime.broker_registry import available_brokers, decode_report
from emubroker.loadbalance.strategies.modular_manager import ModularLoadManager
from emubroker.metadata import InvalidPathError, NotFoundError
from emubroker.metadata.paths import (
    BUNDLE_DATA_ROOT,
    broker_time_average_path,
    load_report_path,
)

if TYPE_CHECKING:
    import random
    from collections.abc import Callable, Collection

    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.model.data import LocalBrokerData
    from emubroker.loadbalance.strategies.isolation import PlacementPolicies
    from emubroker.loadbalance.strategies.modular_manager import UpdateResult
    from emubroker.metadata import MetadataStore

__all__ = ["LeaderAggregation", "bundle_data_node"]

log = logging.getLogger(__name__)

# /loadbalance/bundle-data/<tenant>/<ns>/<range>; a V1 namespace has a cluster level more.
_MAX_BUNDLE_DEPTH = 4


def bundle_data_node(bundle: str) -> str:
    """``/loadbalance/bundle-data/<bundle>`` (``tenant/ns/0x..._0x...``)."""
    return f"{BUNDLE_DATA_ROOT}/{bundle}"


class LeaderAggregation:
    """One leadership term's ``LoadData`` and its reads and writes of the metadata store.

    Args:
        store: The leader's metadata session.
        conf: The configuration at the start of the term (``manager.conf`` takes later ones).
        policies: The placement policies.
        rng: Randomness of the placement strategy.
        owned_bundles: The bundles the leader broker itself owns (Pulsar keeps a preallocation
            only while the leader's namespace service owns the bundle).
        now_ms: Wall-clock milliseconds (the extensible loads' ``updatedAt``).
        has_policies: Whether a bundle's namespace has isolation or anti-affinity policies
            (left out of the extensible top bundles).
    """

    def __init__(
        self,
        store: MetadataStore,
        conf: BrokerConfig,
        *,
        policies: PlacementPolicies | None = None,
        rng: random.Random | None = None,
        owned_bundles: Callable[[], Collection[str]] = list,
        now_ms: Callable[[], int] = lambda: 0,
        has_policies: Callable[[str], bool] = lambda _bundle: False,
    ) -> None:
        self._store = store
        if conf.loadBalancerLoadSheddingStrategy == TRANSFER_SHEDDER:
            # The extensible manager sheds with TransferShedder (not a modular strategy); the
            # modular data keeps the default shedder, which nothing calls.
            conf = msgspec.structs.replace(conf, loadBalancerLoadSheddingStrategy=THRESHOLD_SHEDDER)
        self.manager = ModularLoadManager(
            conf, policies=policies, stored_bundle_data=self.stored_bundle_data, rng=rng
        )
        self._owned_bundles = owned_bundles
        self._now_ms = now_ms
        self._has_policies = has_policies
        self._stored: dict[str, BundleData] = {}
        self._reports: dict[str, LocalBrokerData] = {}
        self.updates = 0
        # The extensible load manager's view of each broker (spec §4.7), derived from the
        # reports: Pulsar's brokers publish these to system topics, ours publish LocalBrokerData.
        self.broker_loads: dict[str, BrokerLoadData] = {}
        self.top_bundles: dict[str, TopBundlesLoadData] = {}

    # ---- reading ---------------------------------------------------------------------------

    def stored_bundle_data(self, bundle: str) -> BundleData | None:
        """The stored data of a bundle seen for the first time this term (consumed once)."""
        return self._stored.pop(bundle, None)

    async def load_stored_bundle_data(self) -> int:
        """Read every ``/loadbalance/bundle-data`` node; returns how many parsed.

        Raises:
            MetadataStoreError: The store failed.
        """
        self._stored = {}
        await self._read_tree(BUNDLE_DATA_ROOT, [], 0)
        log.debug("read the stored data of %d bundles", len(self._stored))
        return len(self._stored)

    async def _read_tree(self, path: str, parts: list[str], depth: int) -> None:
        if depth >= 3:  # tenant/ns/range (or tenant/cluster/ns/range)
            node = await self._store.get(path)
            if node is not None:
                bundle = "/".join(parts)
                try:
                    self._stored[bundle] = decode(node.value, BundleData)
                except LoadDataDecodeError as exc:
                    log.warning("ignoring the stored bundle data %s: %s", path, exc)
        if depth >= _MAX_BUNDLE_DEPTH:
            return
        for child in await self._store.children(path):
            await self._read_tree(f"{path}/{child}", [*parts, child], depth + 1)

    async def read_reports(self) -> dict[str, LocalBrokerData]:
        """Every registered broker's report; a node that does not parse keeps the last one.

        Raises:
            MetadataStoreError: The store failed.
        """
        reports: dict[str, LocalBrokerData] = {}
        for broker in await available_brokers(self._store):
            node = await self._store.get(load_report_path(broker))
            if node is None:
                continue  # gone between the listing and the read
            report = decode_report(broker, node.value)
            if report is None:
                report = self._reports.get(broker)
            if report is not None:
                reports[broker] = report
        self._reports = reports
        return reports

    # ---- updateAll -------------------------------------------------------------------------

    async def refresh(self) -> UpdateResult:
        """Read the reports and update the load data (``updateAll``), then clean the store.

        Raises:
            MetadataStoreError: The store failed.
        """
        reports = await self.read_reports()
        result = self.manager.update_all(reports, leader_owned_bundles=self._leader_owned())
        self.updates += 1
        self._update_broker_loads(reports)
        for broker in result.dead_brokers:
            log.info("broker %s is gone: deleting its time-average data", broker)
            await self._delete(broker_time_average_path(broker))
        await self.delete_bundle_data(result.removed_bundles)
        return result

    def _leader_owned(self) -> set[str]:
        return {str(b) for b in self._owned_bundles()}

    def _update_broker_loads(self, reports: dict[str, LocalBrokerData]) -> None:
        for broker in [b for b in self.broker_loads if b not in reports]:
            del self.broker_loads[broker]
        conf = self.manager.conf
        k = conf.loadBalancerMaxNumberOfBundlesInBundleLoadReport
        self.top_bundles = {
            broker: top_k_bundles(report.last_stats, k, conf, has_policies=self._has_policies)
            for broker, report in reports.items()
        }

    def sample_broker_loads(self) -> None:
        """Move each broker's extensible load averages by one sample of its latest report.

        Pulsar's brokers update their ``BrokerLoadData`` moving averages every
        ``loadBalancerReportUpdateMinIntervalMillis`` whether or not they publish it; ours
        publish only ``LocalBrokerData``, written when it moved beyond the threshold, so the
        latest written report stands for each sample in between (the leader calls this at the
        brokers' report rate).
        """
        conf = self.manager.conf
        now = self._now_ms()
        for broker, report in self._reports.items():
            load = self.broker_loads.setdefault(broker, BrokerLoadData())
            load.update(
                SystemResourceUsage(
                    cpu=report.cpu,
                    memory=report.memory,
                    direct_memory=report.direct_memory,
                    bandwidth_in=report.bandwidth_in,
                    bandwidth_out=report.bandwidth_out,
                ),
                report.msg_throughput_in,
                report.msg_throughput_out,
                report.msg_rate_in,
                report.msg_rate_out,
                len(report.bundles),
                report.num_topics,
                conf,
                now,
            )
            load.reported_at = report.last_update

    # ---- writeBundleDataOnZooKeeper --------------------------------------------------------

    async def write_bundle_data(self) -> int:
        """Update the bundle data once more and store the top bundles and the time averages.

        Returns:
            How many bundle-data nodes were written.

        Raises:
            MetadataStoreError: The store failed.
        """
        manager = self.manager
        removed = manager.update_bundle_data(leader_owned_bundles=self._leader_owned())
        await self.delete_bundle_data(removed)
        bundle_data = manager.load_data.bundle_data
        written = 0
        for bundle in manager.bundles_to_write():
            try:
                await self._store.put(bundle_data_node(bundle), encode(bundle_data[bundle]))
                written += 1
            except InvalidPathError:
                log.warning("bundle %r cannot be stored: not a bundle name", bundle)
        for broker, data in manager.load_data.broker_data.items():
            await self._store.put(broker_time_average_path(broker), encode(data.time_average_data))
        log.debug(
            "wrote the data of %d bundles and the time averages of %d brokers",
            written,
            len(manager.load_data.broker_data),
        )
        return written

    async def delete_bundle_data(self, bundles: list[str]) -> None:
        """Forget these bundles' stored data and delete their ``bundle-data`` nodes."""
        for bundle in bundles:
            self._stored.pop(bundle, None)
            with contextlib.suppress(InvalidPathError):  # a name that was never stored
                await self._delete(bundle_data_node(bundle))

    async def _delete(self, path: str) -> None:
        with contextlib.suppress(NotFoundError):
            await self._store.delete(path)
