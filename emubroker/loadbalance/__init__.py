"""Load balancing: Pulsar's load data model, its strategies and its two load managers.

As a library (docs/load-balancing-library.md): this package hands on what a researcher needs
to compose or test a strategy: the data model (``LoadData``, ``LocalBrokerData``,
``BrokerLoadData``...), the shedding and placement strategies, the broker filters and placement
policies, the split algorithms, the strategy registry and the modular manager's decisions.
``from emubroker.loadbalance import ThresholdShedder`` imports that strategy's module at that
moment: the package imports none of its modules before a name is asked for (a broker imports
what it uses when it starts; docs/performance.md).

The subpackages, by concern, from the bottom up: ``model`` (the data model), ``strategies`` (pure
decisions, the modular manager's among them), ``trace`` (the load-balancer trace), ``runtime``
(the leader's load data, shedding and splitting carried out), ``modular`` and ``extensible`` (the
two load managers behind ``load_manager``'s interface, chosen by ``load_managers``), ``leader``
(election and the leader's tasks), ``ownership`` (ownership, lookup, assignment) and
``reporting`` (each broker's load report).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from emubroker.loadbalance.load_manager import (
        LoadManager as LoadManager,
    )
    from emubroker.loadbalance.load_managers import (
        load_manager as load_manager,
    )
    from emubroker.loadbalance.model.codec import (
        decode as decode,
    )
    from emubroker.loadbalance.model.codec import (
        encode as encode,
    )
    from emubroker.loadbalance.model.data import (
        BrokerData as BrokerData,
    )
    from emubroker.loadbalance.model.data import (
        BundleData as BundleData,
    )
    from emubroker.loadbalance.model.data import (
        LoadData as LoadData,
    )
    from emubroker.loadbalance.model.data import (
        LocalBrokerData as LocalBrokerData,
    )
    from emubroker.loadbalance.model.data import (
        NamespaceBundleStats as NamespaceBundleStats,
    )
    from emubroker.loadbalance.model.data import (
        TimeAverageBrokerData as TimeAverageBrokerData,
    )
    from emubroker.loadbalance.model.data import (
        TimeAverageMessageData as TimeAverageMessageData,
    )
    from emubroker.loadbalance.model.data import (
        weighted_max_usage as weighted_max_usage,
    )
    from emubroker.loadbalance.model.extensible_data import (
        BrokerLoadData as BrokerLoadData,
    )
    from emubroker.loadbalance.model.extensible_data import (
        Label as Label,
    )
    from emubroker.loadbalance.model.extensible_data import (
        LoadManagerContext as LoadManagerContext,
    )
    from emubroker.loadbalance.model.extensible_data import (
        Reason as Reason,
    )
    from emubroker.loadbalance.model.extensible_data import (
        TopBundlesLoadData as TopBundlesLoadData,
    )
    from emubroker.loadbalance.model.extensible_data import (
        Unload as Unload,
    )
    from emubroker.loadbalance.model.extensible_data import (
        UnloadDecision as UnloadDecision,
    )
    from emubroker.loadbalance.model.extensible_data import (
        top_k_bundles as top_k_bundles,
    )
    from emubroker.loadbalance.model.usage import (
        NO_USAGE as NO_USAGE,
    )
    from emubroker.loadbalance.model.usage import (
        UNMEASURED as UNMEASURED,
    )
    from emubroker.loadbalance.model.usage import (
        ResourceUsage as ResourceUsage,
    )
    from emubroker.loadbalance.model.usage import (
        SystemResourceUsage as SystemResourceUsage,
    )
    from emubroker.loadbalance.strategies.avg_shedder import (
        AvgShedder as AvgShedder,
    )
    from emubroker.loadbalance.strategies.extensible_placement import (
        LeastResourceUsageWithWeight as ExtensibleLeastResourceUsageWithWeight,
    )
    from emubroker.loadbalance.strategies.extensible_placement import (
        select_extensible_broker as select_extensible_broker,
    )
    from emubroker.loadbalance.strategies.factory import (
        STRATEGIES as STRATEGIES,
    )
    from emubroker.loadbalance.strategies.factory import (
        StrategyEntry as StrategyEntry,
    )
    from emubroker.loadbalance.strategies.factory import (
        create_modular_strategies as create_modular_strategies,
    )
    from emubroker.loadbalance.strategies.filters import (
        BrokerFilterError as BrokerFilterError,
    )
    from emubroker.loadbalance.strategies.filters import (
        filter_brokers_with_large_topic_count as filter_brokers_with_large_topic_count,
    )
    from emubroker.loadbalance.strategies.filters import (
        filter_by_load_manager_class as filter_by_load_manager_class,
    )
    from emubroker.loadbalance.strategies.filters import (
        filter_by_max_topic_count as filter_by_max_topic_count,
    )
    from emubroker.loadbalance.strategies.filters import (
        filter_by_version as filter_by_version,
    )
    from emubroker.loadbalance.strategies.isolation import (
        NamespaceIsolationPolicies as NamespaceIsolationPolicies,
    )
    from emubroker.loadbalance.strategies.isolation import (
        NamespaceIsolationPolicy as NamespaceIsolationPolicy,
    )
    from emubroker.loadbalance.strategies.isolation import (
        PlacementPolicies as PlacementPolicies,
    )
    from emubroker.loadbalance.strategies.modular_manager import (
        ModularLoadManager as ModularLoadManager,
    )
    from emubroker.loadbalance.strategies.placement import (
        LeastLongTermMessageRate as LeastLongTermMessageRate,
    )
    from emubroker.loadbalance.strategies.placement import (
        LeastResourceUsageWithWeight as LeastResourceUsageWithWeight,
    )
    from emubroker.loadbalance.strategies.placement import (
        ModularLoadManagerStrategy as ModularLoadManagerStrategy,
    )
    from emubroker.loadbalance.strategies.placement import (
        RoundRobinBrokerSelector as RoundRobinBrokerSelector,
    )
    from emubroker.loadbalance.strategies.selection import (
        select_broker as select_broker,
    )
    from emubroker.loadbalance.strategies.shedding import (
        LoadSheddingStrategy as LoadSheddingStrategy,
    )
    from emubroker.loadbalance.strategies.shedding import (
        OverloadShedder as OverloadShedder,
    )
    from emubroker.loadbalance.strategies.shedding import (
        ThresholdShedder as ThresholdShedder,
    )
    from emubroker.loadbalance.strategies.shedding import (
        UniformLoadShedder as UniformLoadShedder,
    )
    from emubroker.loadbalance.strategies.split import (
        ALGORITHMS as ALGORITHMS,
    )
    from emubroker.loadbalance.strategies.split import (
        SplitResult as SplitResult,
    )
    from emubroker.loadbalance.strategies.split import (
        find_bundles_to_split as find_bundles_to_split,
    )
    from emubroker.loadbalance.strategies.split import (
        flow_or_qps_equally_divide as flow_or_qps_equally_divide,
    )
    from emubroker.loadbalance.strategies.split import (
        range_equally_divide as range_equally_divide,
    )
    from emubroker.loadbalance.strategies.split import (
        specified_positions_divide as specified_positions_divide,
    )
    from emubroker.loadbalance.strategies.split import (
        split_bundle as split_bundle,
    )
    from emubroker.loadbalance.strategies.split import (
        topic_count_equally_divide as topic_count_equally_divide,
    )
    from emubroker.loadbalance.strategies.transfer_shedder import (
        TransferShedder as TransferShedder,
    )

__all__ = [
    "ALGORITHMS",
    "NO_USAGE",
    "STRATEGIES",
    "UNMEASURED",
    "AvgShedder",
    "BrokerData",
    "BrokerFilterError",
    "BrokerLoadData",
    "BundleData",
    "ExtensibleLeastResourceUsageWithWeight",
    "Label",
    "LeastLongTermMessageRate",
    "LeastResourceUsageWithWeight",
    "LoadData",
    "LoadManager",
    "LoadManagerContext",
    "LoadSheddingStrategy",
    "LocalBrokerData",
    "ModularLoadManager",
    "ModularLoadManagerStrategy",
    "NamespaceBundleStats",
    "NamespaceIsolationPolicies",
    "NamespaceIsolationPolicy",
    "OverloadShedder",
    "PlacementPolicies",
    "Reason",
    "ResourceUsage",
    "RoundRobinBrokerSelector",
    "SplitResult",
    "StrategyEntry",
    "SystemResourceUsage",
    "ThresholdShedder",
    "TimeAverageBrokerData",
    "TimeAverageMessageData",
    "TopBundlesLoadData",
    "TransferShedder",
    "UniformLoadShedder",
    "Unload",
    "UnloadDecision",
    "create_modular_strategies",
    "decode",
    "encode",
    "filter_brokers_with_large_topic_count",
    "filter_by_load_manager_class",
    "filter_by_max_topic_count",
    "filter_by_version",
    "find_bundles_to_split",
    "flow_or_qps_equally_divide",
    "load_manager",
    "range_equally_divide",
    "select_broker",
    "select_extensible_broker",
    "specified_positions_divide",
    "split_bundle",
    "top_k_bundles",
    "topic_count_equally_divide",
    "weighted_max_usage",
]

_EXPORTS: Final[dict[str, tuple[str, str]]] = {
    # the data model
    "BrokerData": ("model.data", "BrokerData"),
    "BundleData": ("model.data", "BundleData"),
    "LoadData": ("model.data", "LoadData"),
    "LocalBrokerData": ("model.data", "LocalBrokerData"),
    "NamespaceBundleStats": ("model.data", "NamespaceBundleStats"),
    "TimeAverageBrokerData": ("model.data", "TimeAverageBrokerData"),
    "TimeAverageMessageData": ("model.data", "TimeAverageMessageData"),
    "weighted_max_usage": ("model.data", "weighted_max_usage"),
    "NO_USAGE": ("model.usage", "NO_USAGE"),
    "UNMEASURED": ("model.usage", "UNMEASURED"),
    "ResourceUsage": ("model.usage", "ResourceUsage"),
    "SystemResourceUsage": ("model.usage", "SystemResourceUsage"),
    "BrokerLoadData": ("model.extensible_data", "BrokerLoadData"),
    "Label": ("model.extensible_data", "Label"),
    "LoadManagerContext": ("model.extensible_data", "LoadManagerContext"),
    "Reason": ("model.extensible_data", "Reason"),
    "TopBundlesLoadData": ("model.extensible_data", "TopBundlesLoadData"),
    "Unload": ("model.extensible_data", "Unload"),
    "UnloadDecision": ("model.extensible_data", "UnloadDecision"),
    "top_k_bundles": ("model.extensible_data", "top_k_bundles"),
    "decode": ("model.codec", "decode"),
    "encode": ("model.codec", "encode"),
    # shedding strategies
    "LoadSheddingStrategy": ("strategies.shedding", "LoadSheddingStrategy"),
    "OverloadShedder": ("strategies.shedding", "OverloadShedder"),
    "ThresholdShedder": ("strategies.shedding", "ThresholdShedder"),
    "UniformLoadShedder": ("strategies.shedding", "UniformLoadShedder"),
    "AvgShedder": ("strategies.avg_shedder", "AvgShedder"),
    "TransferShedder": ("strategies.transfer_shedder", "TransferShedder"),
    # placement strategies
    "LeastLongTermMessageRate": ("strategies.placement", "LeastLongTermMessageRate"),
    "LeastResourceUsageWithWeight": ("strategies.placement", "LeastResourceUsageWithWeight"),
    "ModularLoadManagerStrategy": ("strategies.placement", "ModularLoadManagerStrategy"),
    "RoundRobinBrokerSelector": ("strategies.placement", "RoundRobinBrokerSelector"),
    "ExtensibleLeastResourceUsageWithWeight": (
        "strategies.extensible_placement",
        "LeastResourceUsageWithWeight",
    ),
    "select_extensible_broker": ("strategies.extensible_placement", "select_extensible_broker"),
    "select_broker": ("strategies.selection", "select_broker"),
    # filters and placement policies
    "BrokerFilterError": ("strategies.filters", "BrokerFilterError"),
    "filter_brokers_with_large_topic_count": (
        "strategies.filters",
        "filter_brokers_with_large_topic_count",
    ),
    "filter_by_load_manager_class": ("strategies.filters", "filter_by_load_manager_class"),
    "filter_by_max_topic_count": ("strategies.filters", "filter_by_max_topic_count"),
    "filter_by_version": ("strategies.filters", "filter_by_version"),
    "NamespaceIsolationPolicies": ("strategies.isolation", "NamespaceIsolationPolicies"),
    "NamespaceIsolationPolicy": ("strategies.isolation", "NamespaceIsolationPolicy"),
    "PlacementPolicies": ("strategies.isolation", "PlacementPolicies"),
    # split algorithms
    "ALGORITHMS": ("strategies.split", "ALGORITHMS"),
    "SplitResult": ("strategies.split", "SplitResult"),
    "find_bundles_to_split": ("strategies.split", "find_bundles_to_split"),
    "flow_or_qps_equally_divide": ("strategies.split", "flow_or_qps_equally_divide"),
    "range_equally_divide": ("strategies.split", "range_equally_divide"),
    "specified_positions_divide": ("strategies.split", "specified_positions_divide"),
    "split_bundle": ("strategies.split", "split_bundle"),
    "topic_count_equally_divide": ("strategies.split", "topic_count_equally_divide"),
    # the registry and the modular manager's decisions
    "STRATEGIES": ("strategies.factory", "STRATEGIES"),
    "StrategyEntry": ("strategies.factory", "StrategyEntry"),
    "create_modular_strategies": ("strategies.factory", "create_modular_strategies"),
    "ModularLoadManager": ("strategies.modular_manager", "ModularLoadManager"),
    # the load managers
    "LoadManager": ("load_manager", "LoadManager"),
    "load_manager": ("load_managers", "load_manager"),
}


def __getattr__(name: str) -> Any:
    """Import an exported name's module when the name is first asked for (PEP 562)."""
    try:
        module, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
    globals()[name] = value  # later lookups find it directly
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
