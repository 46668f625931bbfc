"""Dispatch throttling exactly as Pulsar does it (spec/pulsar-behaviour.md §1).

Modules, bottom up:

- :mod:`~emubroker.ratelimit.bucket`: the pure primitives, ``common.util.RateLimiter``
  (:class:`ClassicRateLimiter`) and PIP-322's ``AsyncTokenBucket``.
- :mod:`~emubroker.ratelimit.quotas`: the ``DispatchRate`` policy value, its validation, the
  broker settings, and the topic > namespace > broker precedence per level.
- :mod:`~emubroker.ratelimit.limiter`: one :class:`DispatchRateLimiter` per level, in the
  implementation ``dispatchRateLimiterFactoryClassName`` names.
- :mod:`~emubroker.ratelimit.readsize`: read sizing and :class:`ThrottleChain`, the seam the
  dispatcher calls (``plan_read`` before a read, ``charge`` after a send).
- :mod:`~emubroker.ratelimit.trace`: the per-dispatch trace record and its Parquet writer.
"""

from __future__ import annotations

from emubroker.ratelimit.bucket import (
    AsyncTokenBucket,
    ClassicRateLimiter,
    DynamicRateTokenBucket,
    FinalRateTokenBucket,
)
from emubroker.ratelimit.limiter import (
    ClassicDispatchRateLimiter,
    DispatchRateLimiter,
    LastUpdatedAvgPublishRate,
    LimiterLevel,
    PublishRateSource,
    TokenBucketDispatchRateLimiter,
    create_dispatch_rate_limiter,
)
from emubroker.ratelimit.quotas import (
    ASYNC_TOKEN_BUCKET_FACTORY,
    CLASSIC_FACTORY,
    DEFAULT_FACTORY,
    DispatchPolicies,
    DispatchRate,
    DispatchThrottlingConfig,
    EffectiveRates,
    InvalidDispatchRateError,
    decode_dispatch_rate,
    encode_dispatch_rate,
    resolve_effective_rates,
    throttling_config_from,
    validate_dispatch_rate,
)
from emubroker.ratelimit.readsize import (
    MESSAGE_RATE_BACKOFF,
    LedgerSize,
    MessagesPerEntryAverage,
    ReadBatchSize,
    ReadPlan,
    ThrottleChain,
    ThrottleStats,
    cap_entries_by_average,
    entries_for_permits,
    estimate_entry_count_by_bytes,
    multiple_consumers_permits,
    single_consumer_permits,
    wait_for_read_plan,
)

__all__ = [
    "ASYNC_TOKEN_BUCKET_FACTORY",
    "CLASSIC_FACTORY",
    "DEFAULT_FACTORY",
    "MESSAGE_RATE_BACKOFF",
    "AsyncTokenBucket",
    "ClassicDispatchRateLimiter",
    "ClassicRateLimiter",
    "DispatchPolicies",
    "DispatchRate",
    "DispatchRateLimiter",
    "DispatchThrottlingConfig",
    "DynamicRateTokenBucket",
    "EffectiveRates",
    "FinalRateTokenBucket",
    "InvalidDispatchRateError",
    "LastUpdatedAvgPublishRate",
    "LedgerSize",
    "LimiterLevel",
    "MessagesPerEntryAverage",
    "PublishRateSource",
    "ReadBatchSize",
    "ReadPlan",
    "ThrottleChain",
    "ThrottleStats",
    "TokenBucketDispatchRateLimiter",
    "cap_entries_by_average",
    "create_dispatch_rate_limiter",
    "decode_dispatch_rate",
    "encode_dispatch_rate",
    "entries_for_permits",
    "estimate_entry_count_by_bytes",
    "multiple_consumers_permits",
    "resolve_effective_rates",
    "single_consumer_permits",
    "throttling_config_from",
    "validate_dispatch_rate",
    "wait_for_read_plan",
]
