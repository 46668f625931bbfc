"""The dispatch-throttling keys of ``broker.conf``: declared once, read by ``ratelimit``.

:class:`DispatchThrottlingConfig` is one of the key families ``BrokerConfig`` stacks (its
base chain: this, :class:`~emubroker.config.security.SecurityConfig`,
:class:`~emubroker.config.loadbalancer.LoadBalancerConfig`); the throttling code takes only this
part (``ratelimit.quotas.throttling_config_from(config)``), so the keys, their types and Pulsar's
defaults (spec/pulsar-behaviour.md §7) are written here and nowhere else.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

__all__ = [
    "ASYNC_TOKEN_BUCKET_FACTORY",
    "CLASSIC_FACTORY",
    "DEFAULT_FACTORY",
    "DispatchThrottlingConfig",
    "FactoryClassName",
]

# dispatchRateLimiterFactoryClassName values (spec §1.5 history, §7 default).
FactoryClassName = Literal[
    "org.apache.pulsar.broker.service.persistent.DispatchRateLimiterFactoryClassic",
    "org.apache.pulsar.broker.service.persistent.DispatchRateLimiterFactoryAsyncTokenBucket",
]
CLASSIC_FACTORY: FactoryClassName = (
    "org.apache.pulsar.broker.service.persistent.DispatchRateLimiterFactoryClassic"
)
ASYNC_TOKEN_BUCKET_FACTORY: FactoryClassName = (
    "org.apache.pulsar.broker.service.persistent.DispatchRateLimiterFactoryAsyncTokenBucket"
)
DEFAULT_FACTORY: FactoryClassName = ASYNC_TOKEN_BUCKET_FACTORY

_Rate = Annotated[int, msgspec.Meta(ge=-1)]


class DispatchThrottlingConfig(msgspec.Struct, frozen=True):
    """The broker settings throttling reads, under their ``broker.conf`` names (defaults: §7).

    Attributes:
        dispatchRateLimiterFactoryClassName: Which limiter implementation (spec §1.5).
        dispatchThrottlingRateInMsg: Broker-wide message limit per second (``<= 0``: off).
        dispatchThrottlingRateInByte: Broker-wide byte limit per second.
        dispatchThrottlingRatePerTopicInMsg: Default per-topic message limit.
        dispatchThrottlingRatePerTopicInByte: Default per-topic byte limit.
        dispatchThrottlingRatePerSubscriptionInMsg: Default per-subscription message limit.
        dispatchThrottlingRatePerSubscriptionInByte: Default per-subscription byte limit.
        dispatchThrottlingRateRelativeToPublishRate: Accepted and ignored, as in Pulsar (§8.6).
        dispatchThrottlingOnBatchMessageEnabled: Charge entries instead of messages (§1.3).
        dispatchThrottlingOnNonBacklogConsumerEnabled: Throttle consumers reading the tail too.
        dispatchThrottlingForFilteredEntriesEnabled: Charge entries removed by entry filters.
        preciseDispatcherFlowControl: Size reads by average messages per entry (§1.2).
        dispatcherMaxReadBatchSize: Largest read, in entries.
        dispatcherMinReadBatchSize: Read size after a read failure.
        dispatcherMaxReadSizeBytes: Byte budget of one read.
    """

    dispatchRateLimiterFactoryClassName: FactoryClassName = DEFAULT_FACTORY
    dispatchThrottlingRateInMsg: _Rate = 0
    dispatchThrottlingRateInByte: _Rate = 0
    dispatchThrottlingRatePerTopicInMsg: _Rate = 0
    dispatchThrottlingRatePerTopicInByte: _Rate = 0
    dispatchThrottlingRatePerSubscriptionInMsg: _Rate = 0
    dispatchThrottlingRatePerSubscriptionInByte: _Rate = 0
    dispatchThrottlingRateRelativeToPublishRate: bool = False
    dispatchThrottlingOnBatchMessageEnabled: bool = False
    dispatchThrottlingOnNonBacklogConsumerEnabled: bool = True
    dispatchThrottlingForFilteredEntriesEnabled: bool = False
    preciseDispatcherFlowControl: bool = False
    dispatcherMaxReadBatchSize: Annotated[int, msgspec.Meta(ge=1)] = 100
    dispatcherMinReadBatchSize: Annotated[int, msgspec.Meta(ge=1)] = 1
    dispatcherMaxReadSizeBytes: Annotated[int, msgspec.Meta(ge=1)] = 5 * 1024 * 1024
