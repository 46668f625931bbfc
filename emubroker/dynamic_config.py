"""Dynamic broker configuration: Pulsar's ``/admin/v2/brokers/configuration`` model.

Pulsar lets an operator change the keys its ``ServiceConfiguration`` marks ``dynamic = true``
while brokers run: ``POST /admin/v2/brokers/configuration/{key}/{value}`` writes the value into
the JSON map at ``/admin/configuration`` in the metadata store, every broker watches that node and
applies the change live, and a broker that starts later applies the stored map over its own
configuration. :class:`DynamicConfig` is that holder: services read :attr:`DynamicConfig.config`
(a frozen :class:`~emubroker.config.BrokerConfig`, replaced as a whole on every change) or
:meth:`DynamicConfig.subscribe` to react.

A key is dynamic here when Pulsar marks it dynamic *and* we emulate it (it is a ``BrokerConfig``
field); :data:`PULSAR_DYNAMIC_KEYS` is Pulsar's full list, so keys become dynamic as soon as
later issues add them to ``BrokerConfig``. Values travel as strings, as in Pulsar, and are
validated by the same msgspec conversion as the configuration file.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any, Final

import anyio
import msgspec

from emubroker.config import BrokerConfig, split_list_values
from emubroker.metadata import BadVersionError, WatchOverflowError
from emubroker.metadata.paths import DYNAMIC_CONFIGURATION_PATH

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import TaskStatus

    from emubroker.metadata import MetadataStore

__all__ = [
    "PULSAR_DYNAMIC_KEYS",
    "DynamicConfig",
    "DynamicConfigError",
    "InvalidDynamicValueError",
    "NotDynamicError",
]

log = logging.getLogger(__name__)

"""Pulsar's ``DynamicConfigurationResources`` node: a JSON object of key -> string value."""

_CAS_ATTEMPTS: Final = 16
"""Read-modify-write retries of the shared map before giving up (see ``policies``)."""

# Every ServiceConfiguration field with @FieldContext(dynamic = true) in Pulsar's broker.
PULSAR_DYNAMIC_KEYS: Final = frozenset(
    """
    allowAutoSubscriptionCreation allowAutoTopicCreation allowAutoTopicCreationType
    allowAutoTopicCreationWithLegacyNamingScheme allowOverrideEntryFilters
    autoSkipNonRecoverableData bookkeeperUseV2WireProtocol brokerClientAuthenticationPlugin
    brokerClientTlsEnabled brokerDeleteInactivePartitionedTopicMetadataEnabled
    brokerDeleteInactiveTopicsEnabled brokerDeleteInactiveTopicsFrequencySeconds
    brokerDeleteInactiveTopicsMaxInactiveDurationSeconds brokerDeleteInactiveTopicsMode
    brokerPublisherThrottlingMaxByteRate brokerPublisherThrottlingMaxMessageRate
    brokerPublisherThrottlingTickTimeMillis brokerShutdownTimeoutMs
    clientLibraryVersionCheckEnabled configurationMetadataSyncEventTopic
    defaultNamespaceBundleSplitAlgorithm defaultNumPartitions defaultNumberOfNamespaceBundles
    dispatchThrottlingOnBatchMessageEnabled dispatchThrottlingOnNonBacklogConsumerEnabled
    dispatchThrottlingRateInByte dispatchThrottlingRateInMsg
    dispatchThrottlingRatePerReplicatorInByte dispatchThrottlingRatePerReplicatorInMsg
    dispatchThrottlingRatePerSubscriptionInByte dispatchThrottlingRatePerSubscriptionInMsg
    dispatchThrottlingRatePerTopicInByte dispatchThrottlingRatePerTopicInMsg
    dispatchThrottlingRateRelativeToPublishRate dispatcherDispatchMessagesInSubscriptionThread
    dispatcherEntryFilterRescheduledMessageDelay dispatcherMaxReadBatchSize
    dispatcherMaxReadSizeBytes dispatcherMaxRoundRobinBatchSize dispatcherMinReadBatchSize
    dispatcherPauseOnAckStatePersistentEnabled dispatcherReadFailureBackoffInitialTimeInMs
    dispatcherReadFailureBackoffMandatoryStopTimeInMs dispatcherReadFailureBackoffMaxTimeInMs
    entryFilterNames entryFiltersDirectory exposeBundlesMetricsInPrometheus
    failureDomainsEnabled flowOrQpsDifferenceThresholdPercentage forceDeleteNamespaceAllowed
    forceDeleteTenantAllowed httpRequestsFailOnUnknownPropertiesEnabled
    isAllowAutoUpdateSchemaEnabled keySharedLookAheadMsgInReplayThresholdPerConsumer
    keySharedLookAheadMsgInReplayThresholdPerSubscription keySharedUnblockingIntervalMs
    loadBalanceSheddingDelayInSeconds loadBalancerAutoBundleSplitEnabled
    loadBalancerAutoUnloadSplitBundlesEnabled
    loadBalancerAverageResourceUsageDifferenceThresholdPercentage
    loadBalancerAvgShedderHighThreshold loadBalancerAvgShedderHitCountHighThreshold
    loadBalancerAvgShedderHitCountLowThreshold loadBalancerAvgShedderLowThreshold
    loadBalancerBandwidthInResourceWeight loadBalancerBandwidthOutResourceWeight
    loadBalancerBandwithInResourceWeight loadBalancerBandwithOutResourceWeight
    loadBalancerBrokerLoadDataTTLInSeconds loadBalancerBrokerLoadTargetStd
    loadBalancerBrokerMaxTopics loadBalancerBrokerOverloadedThresholdPercentage
    loadBalancerBrokerThresholdShedderPercentage loadBalancerBundleUnloadMinThroughputThreshold
    loadBalancerCPUResourceWeight loadBalancerDebugModeEnabled
    loadBalancerDirectMemoryResourceWeight loadBalancerDistributeBundlesEvenlyEnabled
    loadBalancerHistoryResourcePercentage loadBalancerHostUsageCheckIntervalMinutes
    loadBalancerLoadSheddingStrategy loadBalancerMaxNumberOfBrokerSheddingPerCycle
    loadBalancerMaxNumberOfBundlesInBundleLoadReport
    loadBalancerMaxNumberOfBundlesToSplitPerCycle loadBalancerMemoryResourceWeight
    loadBalancerMsgRateDifferenceShedderThreshold
    loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold
    loadBalancerNamespaceBundleMaxBandwidthMbytes loadBalancerNamespaceBundleMaxMsgRate
    loadBalancerNamespaceBundleMaxSessions loadBalancerNamespaceBundleMaxTopics
    loadBalancerNamespaceBundleSplitConditionHitCountThreshold
    loadBalancerNamespaceMaximumBundles loadBalancerReportUpdateMaxIntervalMinutes
    loadBalancerReportUpdateMinIntervalMillis loadBalancerReportUpdateThresholdPercentage
    loadBalancerServiceUnitStateMaxConcurrentOverrides loadBalancerServiceUnitTableViewSyncer
    loadBalancerSheddingBundlesWithPoliciesEnabled
    loadBalancerSheddingConditionHitCountThreshold loadBalancerSheddingEnabled
    loadBalancerSheddingExcludedNamespaces loadBalancerSheddingGracePeriodMinutes
    loadBalancerSheddingIntervalMinutes loadBalancerTransferEnabled loadManagerClassName
    managedLedgerCacheEvictionExtendTTLOfEntriesWithRemainingExpectedReadsMaxTimes
    managedLedgerCacheEvictionExtendTTLOfRecentlyAccessed
    managedLedgerCacheEvictionTimeThresholdMillis managedLedgerCacheEvictionWatermark
    managedLedgerCacheSizeMB managedLedgerCursorResetLedgerCloseTimestampMaxClockSkewMillis
    managedLedgerForceRecovery managedLedgerInactiveLedgerRolloverTimeSeconds
    managedLedgerInactiveOffloadedLedgerEvictionTimeSeconds
    managedLedgerMaxBacklogBetweenCursorsForCaching managedLedgerMinimumBacklogCursorsForCaching
    managedLedgerMinimumBacklogEntriesForCaching managedLedgerTraceTaskExecution
    maxConcurrentLookupRequest maxConcurrentTopicLoadRequest maxMessagePublishBufferSizeInMB
    maxNamespacesPerTenant maxNumPartitionsPerPartitionedTopic maxPublishRatePerTopicInBytes
    maxPublishRatePerTopicInMessages maxTenants maxTopicsPerNamespace
    maxUnloadBundleNumPerShedding maxUnloadPercentage metadataSyncEventTopic minUnloadMessage
    minUnloadMessageThroughput namespaceBundleUnloadingTimeoutMs preciseDispatcherFlowControl
    preferLaterVersions replicationProducerQueueSize replicationStartAt
    resourceUsageTransportPublishIntervalInSecs schemaLedgerForceRecovery
    skipBrokerShutdownOnOOM strictlyVerifySubscriptionName
    subscribeRatePeriodPerConsumerInSecond subscribeThrottlingRatePerConsumer
    subscriptionKeySharedEnable subscriptionKeySharedUseClassicPersistentImplementation
    subscriptionRedeliveryTrackerEnabled subscriptionSharedUseClassicPersistentImplementation
    subscriptionTypesEnabled superUserRoles supportedNamespaceBundleSplitAlgorithms
    topicFactoryClassName topicNameCacheMaxCapacity topicPublisherThrottlingTickTimeMillis
    transactionLogBatchedWriteEnabled transactionPendingAckBatchedWriteEnabled
    unblockStuckSubscriptionEnabled
    """.split()  # noqa: SIM905 -- 157 names, one word each, read better than a list literal
)

_MAP = msgspec.json.Decoder(dict[str, str])


@functools.cache
def _boolean_keys() -> frozenset[str]:
    # At the first override, not at import: the fields' types are ~1.6 ms to evaluate.
    return frozenset(
        field.name for field in msgspec.structs.fields(BrokerConfig) if field.type is bool
    )


def _java_boolean(value: Any) -> Any:
    # Pulsar parses a boolean key with Boolean.valueOf: "true" in any case is true, anything
    # else false, never an error (the stored text stays as it was sent).
    return value.lower() == "true" if isinstance(value, str) else value


class DynamicConfigError(ValueError):
    """A dynamic configuration update was refused; the message says why."""


class NotDynamicError(DynamicConfigError):
    """The key is unknown or cannot change at runtime."""


class InvalidDynamicValueError(DynamicConfigError):
    """The value does not convert to the key's type or breaks its bounds."""


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, frozenset):
        return ",".join(sorted(value))
    if isinstance(value, tuple):
        return ",".join(value)
    return "" if value is None else str(value)


class DynamicConfig:
    """The broker's live configuration (see the module docstring).

    Args:
        base: The configuration the broker started with (file, environment, flags).
        store: Where the shared map lives; without one, updates are local only.
    """

    def __init__(self, base: BrokerConfig, store: MetadataStore | None = None) -> None:
        self._base = base
        self._store = store
        self._config = base
        self._overrides: dict[str, str] = {}
        self._subscribers: list[Callable[[BrokerConfig], None]] = []

    @property
    def config(self) -> BrokerConfig:
        """The current configuration: the base with every dynamic override applied."""
        return self._config

    @staticmethod
    def dynamic_keys() -> list[str]:
        """The keys that may change at runtime, sorted."""
        return sorted(PULSAR_DYNAMIC_KEYS.intersection(BrokerConfig.__struct_fields__))

    def overrides(self) -> dict[str, str]:
        """The dynamic values set so far, as stored (``GET .../configuration/values``)."""
        return dict(self._overrides)

    def runtime(self) -> dict[str, str]:
        """Every key of the current configuration as a string (``.../configuration/runtime``)."""
        return {k: _as_text(v) for k, v in msgspec.structs.asdict(self._config).items()}

    def subscribe(self, callback: Callable[[BrokerConfig], None]) -> Callable[[], None]:
        """Call ``callback(config)`` after every change; returns a function that unsubscribes."""
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback)

    def check(self, key: str, value: str) -> BrokerConfig:
        """The configuration ``key = value`` would give, without applying it.

        Raises:
            NotDynamicError: ``key`` is not a dynamic key.
            InvalidDynamicValueError: ``value`` is not valid for ``key``.
        """
        if key not in PULSAR_DYNAMIC_KEYS or key not in BrokerConfig.__struct_fields__:
            raise NotDynamicError("Can't update non-dynamic configuration")
        return self._build({**self._overrides, key: value}, strict_key=key)

    async def update(self, key: str, value: str) -> None:
        """Set a dynamic key for every broker of the cluster and apply it here at once.

        Raises:
            NotDynamicError: ``key`` is not a dynamic key.
            InvalidDynamicValueError: ``value`` is not valid for ``key``.
        """
        self.check(key, value)
        await self._write(lambda current: {**current, key: value})

    async def delete(self, key: str) -> None:
        """Drop a dynamic override: the key goes back to its start-up value.

        Raises:
            NotDynamicError: ``key`` is not a dynamic key.
        """
        if key not in PULSAR_DYNAMIC_KEYS or key not in BrokerConfig.__struct_fields__:
            raise NotDynamicError("Can't delete non-dynamic configuration")
        await self._write(lambda current: {k: v for k, v in current.items() if k != key})

    async def load(self) -> None:
        """Apply the stored map (a broker joining a cluster whose config was changed)."""
        if self._store is not None:
            node = await self._store.get(DYNAMIC_CONFIGURATION_PATH)
            self._apply(_MAP.decode(node.value) if node is not None else {})

    async def watch(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Follow changes made by any broker until cancelled (no-op without a store)."""
        if self._store is None:
            task_status.started()
            await anyio.Event().wait()
            return
        while True:
            async with self._store.watch(DYNAMIC_CONFIGURATION_PATH) as notifications:
                await self.load()
                task_status.started()
                task_status = anyio.TASK_STATUS_IGNORED
                try:
                    async for _ in notifications:
                        await self.load()
                except WatchOverflowError:
                    continue
            return  # the store was closed

    async def _write(self, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        store = self._store
        if store is None:
            self._apply(change(self._overrides))
            return
        for _ in range(_CAS_ATTEMPTS):
            node = await store.get(DYNAMIC_CONFIGURATION_PATH)
            current = _MAP.decode(node.value) if node is not None else {}
            updated = change(current)
            try:
                await store.put(
                    DYNAMIC_CONFIGURATION_PATH,
                    msgspec.json.encode(updated),
                    expected_version=-1 if node is None else node.version,
                )
            except BadVersionError:
                continue
            self._apply(updated)
            return
        raise DynamicConfigError("Concurrent modification of the dynamic configuration")

    def _build(self, overrides: dict[str, str], *, strict_key: str | None = None) -> BrokerConfig:
        values = msgspec.structs.asdict(self._base)
        for key, text in split_list_values(overrides).items():
            value = _java_boolean(text) if key in _boolean_keys() else text
            if key not in BrokerConfig.__struct_fields__:
                continue  # written by a broker that emulates more keys than this one
            try:
                msgspec.convert({**values, key: value}, BrokerConfig, strict=False)
            except msgspec.ValidationError as exc:
                if key == strict_key:
                    raise InvalidDynamicValueError(
                        f" Invalid dynamic-config value: {exc}"
                    ) from None
                log.warning("ignoring stored dynamic config %s=%r: %s", key, value, exc)
                continue
            values[key] = value
        return msgspec.convert(values, BrokerConfig, strict=False)

    def _apply(self, overrides: dict[str, str]) -> None:
        config = self._build(overrides)
        self._overrides = dict(overrides)
        if config == self._config:
            return
        self._config = config
        for callback in list(self._subscribers):
            callback(config)
