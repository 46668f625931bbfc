"""Load balancing: Pulsar's load data model, placement, shedding and bundle splitting.

The pure part (docs/load-balancing.md): the data model (``data``, ``extensible_data``,
``usage``, JSON in ``codec``), the strategies (``shedding``, ``avg_shedder``,
``transfer_shedder``, ``placement``, ``extensible_placement``), the placement pipeline
(``selection``, ``filters``, ``isolation``), splitting (``split``) and the leader's decisions
(``modular``). ``ownership`` maps bundles to their owning broker over the metadata store;
``reporter`` keeps a broker's registration and load report current (with ``usage_sources``,
``psutil_source``, ``bundle_sampler``) and ``broker_registry`` reads the registered brokers.
"""

from __future__ import annotations

from emubroker.loadbalance.avg_shedder import AvgShedder
from emubroker.loadbalance.data import (
    BrokerData,
    BundleData,
    LoadData,
    LocalBrokerData,
    NamespaceBundleStats,
    TimeAverageBrokerData,
    TimeAverageMessageData,
)
from emubroker.loadbalance.extensible_data import (
    BrokerLoadData,
    LoadManagerContext,
    TopBundlesLoadData,
    Unload,
    UnloadDecision,
)
from emubroker.loadbalance.modular import ModularLoadManager
from emubroker.loadbalance.ownership import (
    BrokerInfo,
    NamespaceEphemeralData,
    OwnershipTable,
)
from emubroker.loadbalance.placement import (
    LeastLongTermMessageRate,
    LeastResourceUsageWithWeight,
    RoundRobinBrokerSelector,
)
from emubroker.loadbalance.shedding import OverloadShedder, ThresholdShedder, UniformLoadShedder
from emubroker.loadbalance.transfer_shedder import TransferShedder
from emubroker.loadbalance.usage import ResourceUsage, SystemResourceUsage

__all__ = [
    "AvgShedder",
    "BrokerData",
    "BrokerInfo",
    "BrokerLoadData",
    "BundleData",
    "LeastLongTermMessageRate",
    "LeastResourceUsageWithWeight",
    "LoadData",
    "LoadManagerContext",
    "LocalBrokerData",
    "ModularLoadManager",
    "NamespaceBundleStats",
    "NamespaceEphemeralData",
    "OverloadShedder",
    "OwnershipTable",
    "ResourceUsage",
    "RoundRobinBrokerSelector",
    "SystemResourceUsage",
    "ThresholdShedder",
    "TimeAverageBrokerData",
    "TimeAverageMessageData",
    "TopBundlesLoadData",
    "TransferShedder",
    "UniformLoadShedder",
    "Unload",
    "UnloadDecision",
]
