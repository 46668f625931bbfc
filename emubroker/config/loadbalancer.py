"""The load manager's ``broker.conf`` keys, with Pulsar's names, types and defaults.

:class:`~emubroker.config.BrokerConfig` inherits these fields; they live here because there are
many of them and they change for one reason (the load manager). Each is documented in
docs/load-balancing.md. Departures from Pulsar:

- the minute-valued interval keys accept fractions (DESIGN.md decision 12:
  ``loadBalancerSheddingIntervalMinutes=0.05`` sheds every 3 s);
- strategy and algorithm names are checked at start-up (the strategies' names and checks are
  ``emubroker.config.strategies``'): Pulsar loads any class by reflection
  and fails (or, for the extensible manager, falls back to TransferShedder) when it cannot; we
  accept exactly the class names of the strategies we emulate and stop naming the key otherwise;
- list keys (``loadBalancerSheddingExcludedNamespaces``, ``supportedNamespaceBundleSplit
  Algorithms``) are comma-separated in a properties file, as in Pulsar, and arrays in TOML.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

import msgspec

from emubroker.config.security import SecurityConfig
from emubroker.config.strategies import (
    EXTENSIBLE_LOAD_MANAGER,
    MODULAR_LOAD_MANAGER,
    LoadManagerClassName,
    PlacementStrategyName,
    SheddingStrategyName,
    combination_errors,
)

__all__ = [
    "EXTENSIBLE_LOAD_MANAGER",
    "MODULAR_LOAD_MANAGER",
    "LoadBalancerConfig",
    "PlacementStrategyName",
    "SheddingStrategyName",
    "SplitAlgorithmName",
]

AVG_SHEDDER: Final = "org.apache.pulsar.broker.loadbalance.impl.AvgShedder"
THRESHOLD_SHEDDER: Final = "org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder"
TRANSFER_SHEDDER: Final = (
    "org.apache.pulsar.broker.loadbalance.extensions.scheduler.TransferShedder"
)

SplitAlgorithmName = Literal[
    "range_equally_divide",
    "topic_count_equally_divide",
    "specified_positions_divide",
    "flow_or_qps_equally_divide",
]

_Percent = Annotated[int, msgspec.Meta(ge=0)]
_Count = Annotated[int, msgspec.Meta(ge=0)]
_Weight = Annotated[float, msgspec.Meta(ge=0)]
_Minutes = Annotated[float, msgspec.Meta(gt=0)]
_Fraction = Annotated[float, msgspec.Meta(ge=0, le=1)]


class LoadBalancerConfig(SecurityConfig, frozen=True, forbid_unknown_fields=True):
    """The load manager's keys (Pulsar's defaults; see docs/load-balancing.md).

    It derives from :class:`~emubroker.config.security.SecurityConfig` only because msgspec
    structs take fields from one base: ``BrokerConfig`` stacks the key families in a line.
    """

    loadBalancerEnabled: bool = True
    loadManagerClassName: LoadManagerClassName = (
        "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl"
    )
    loadBalancerLoadPlacementStrategy: PlacementStrategyName = (
        "org.apache.pulsar.broker.loadbalance.impl.LeastLongTermMessageRate"
    )
    loadBalancerLoadSheddingStrategy: SheddingStrategyName = (
        "org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder"
    )
    # Reports (each broker).
    loadBalancerReportUpdateThresholdPercentage: _Percent = 10
    # Pulsar schedules the report task at this fixed rate, which must be positive.
    loadBalancerReportUpdateMinIntervalMillis: Annotated[int, msgspec.Meta(gt=0)] = 5000
    loadBalancerReportUpdateMaxIntervalMinutes: _Minutes = 15.0
    loadBalancerHostUsageCheckIntervalMinutes: _Minutes = 1.0
    loadBalancerResourceQuotaUpdateIntervalMinutes: _Minutes = 15.0
    loadBalancerMaxNumberOfBundlesInBundleLoadReport: int = 10
    # None: the host's physical NICs (psutil source) or 1 Gbit/s (model source).
    loadBalancerOverrideBrokerNicSpeedGbps: Annotated[float, msgspec.Meta(gt=0)] | None = None
    exposeBundlesMetricsInPrometheus: bool = False
    # Ours (emubroker*): where a broker's resource usage comes from and its limits
    # (docs/load-balancing.md, "Load reports").
    emubrokerResourceUsageSource: Literal["psutil", "model"] = "psutil"
    emubrokerResourceUsageScript: str = ""
    emubrokerAvailableProcessors: _Count = 0
    emubrokerMaxMemoryMB: _Count = 0
    emubrokerModelMsgRatePerCore: Annotated[float, msgspec.Meta(gt=0)] = 100_000.0
    # Ours: where the broker writes its load-balancer trace (docs/load-balancer-trace.md).
    emubrokerLoadBalancerTraceDir: str = ""
    # Resource weights (spec §0.2); the misspelt Bandwith keys are Pulsar's deprecated aliases.
    loadBalancerCPUResourceWeight: _Weight = 1.0
    loadBalancerMemoryResourceWeight: _Weight = 0.0
    loadBalancerDirectMemoryResourceWeight: _Weight = 0.0
    loadBalancerBandwidthInResourceWeight: _Weight = 1.0
    loadBalancerBandwidthOutResourceWeight: _Weight = 1.0
    loadBalancerBandwithInResourceWeight: _Weight = 1.0
    loadBalancerBandwithOutResourceWeight: _Weight = 1.0
    loadBalancerHistoryResourcePercentage: _Fraction = 0.9
    # Placement (spec §3).
    loadBalancerDistributeBundlesEvenlyEnabled: bool = True
    loadBalancerBrokerMaxTopics: _Count = 50_000
    loadBalancerBrokerOverloadedThresholdPercentage: _Percent = 85
    loadBalancerAverageResourceUsageDifferenceThresholdPercentage: _Percent = 10
    preferLaterVersions: bool = False
    failureDomainsEnabled: bool = False
    # Shedding (spec §4).
    loadBalancerSheddingEnabled: bool = True
    loadBalancerSheddingIntervalMinutes: _Minutes = 1.0
    loadBalancerSheddingGracePeriodMinutes: Annotated[float, msgspec.Meta(ge=0)] = 30.0
    loadBalancerSheddingExcludedNamespaces: frozenset[str] = frozenset()
    loadBalancerBrokerThresholdShedderPercentage: _Percent = 10
    loadBalancerBundleUnloadMinThroughputThreshold: Annotated[float, msgspec.Meta(ge=0)] = 10.0
    lowerBoundarySheddingEnabled: bool = False
    loadBalancerMsgRateDifferenceShedderThreshold: float = 50.0
    loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold: float = 4.0
    maxUnloadPercentage: Annotated[float, msgspec.Meta(ge=0)] = 0.2
    minUnloadMessage: int = 1000
    minUnloadMessageThroughput: int = 1024 * 1024
    maxUnloadBundleNumPerShedding: Annotated[int, msgspec.Meta(ge=-1)] = -1
    loadBalancerAvgShedderLowThreshold: _Percent = 15
    loadBalancerAvgShedderHighThreshold: _Percent = 40
    loadBalancerAvgShedderHitCountLowThreshold: _Count = 8
    loadBalancerAvgShedderHitCountHighThreshold: _Count = 2
    # Extensible load manager (spec §4.7).
    loadBalancerDebugModeEnabled: bool = False
    loadBalancerBrokerLoadTargetStd: Annotated[float, msgspec.Meta(ge=0)] = 0.25
    loadBalancerSheddingConditionHitCountThreshold: _Count = 3
    loadBalancerTransferEnabled: bool = True
    # An unload with a destination transfers the bundle (ownership.unloading rule 5).
    loadBalancerMultiPhaseBundleUnload: bool = True
    loadBalancerMaxNumberOfBrokerSheddingPerCycle: _Count = 3
    loadBalanceSheddingDelayInSeconds: _Count = 180
    loadBalancerBrokerLoadDataTTLInSeconds: _Count = 1800
    loadBalancerSheddingBundlesWithPoliciesEnabled: bool = False
    loadBalancerSplitIntervalMinutes: _Minutes = 1.0
    loadBalancerMaxNumberOfBundlesToSplitPerCycle: _Count = 10
    loadBalancerNamespaceBundleSplitConditionHitCountThreshold: _Count = 3
    # Bundle splitting (spec §5.3, §5.4).
    loadBalancerAutoBundleSplitEnabled: bool = True
    loadBalancerAutoUnloadSplitBundlesEnabled: bool = True
    loadBalancerNamespaceBundleMaxTopics: _Count = 1000
    loadBalancerNamespaceBundleMaxSessions: int = 1000
    loadBalancerNamespaceBundleMaxMsgRate: _Count = 30_000
    loadBalancerNamespaceBundleMaxBandwidthMbytes: _Count = 100
    loadBalancerNamespaceMaximumBundles: Annotated[int, msgspec.Meta(ge=1)] = 128
    supportedNamespaceBundleSplitAlgorithms: tuple[SplitAlgorithmName, ...] = (
        "range_equally_divide",
        "topic_count_equally_divide",
        "specified_positions_divide",
        "flow_or_qps_equally_divide",
    )
    defaultNamespaceBundleSplitAlgorithm: SplitAlgorithmName = "range_equally_divide"
    flowOrQpsDifferenceThresholdPercentage: _Percent = 10

    def __post_init__(self) -> None:
        """Reject combinations Pulsar refuses at start-up (``config.strategies``).

        Raises:
            ValueError: AvgShedder placement without AvgShedder shedding (``ModularLoadManager
                Impl.initialize``), or TransferShedder with the modular load manager (it is not
                a ``LoadSheddingStrategy``).
        """
        errors = combination_errors(
            self.loadManagerClassName,
            self.loadBalancerLoadPlacementStrategy,
            self.loadBalancerLoadSheddingStrategy,
        )
        if errors:
            raise ValueError(errors[0])
