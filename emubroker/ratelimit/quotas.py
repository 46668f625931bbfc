"""Where dispatch limits come from: Pulsar's ``DispatchRate`` value, its validation, and precedence.

Spec §1.1. Three limiters can apply to one subscription's dispatcher; each level's effective
``DispatchRate`` is the first *present* value in its chain (highest priority first):

=============  ===========================================================================
broker         broker config ``dispatchThrottlingRateInMsg/InByte`` only; period 1 s, never
               relative (``dispatchThrottlingRateRelativeToPublishRate`` is dead code, §8.6)
topic          topic policy (local) -> topic policy (global) -> namespace
               ``topicDispatchRate[cluster]`` (or, only when that is absent, the legacy
               ``clusterDispatchRate[cluster]``) -> broker ``dispatchThrottlingRatePerTopic*``
subscription   per-subscription policy (PIP-152) -> topic policy ``subscriptionDispatchRate``
               (local, then global) -> namespace ``subscriptionDispatchRate[cluster]`` -> broker
               ``dispatchThrottlingRatePerSubscription*``
=============  ===========================================================================

A policy value whose message and byte rates are both ``<= 0`` is normalised to "absent"
(``DispatchRateImpl.normalize``), so the next level applies; the broker-config fallback is not
normalised, and a resolved value that is not enabled means "no limiter" (Pulsar creates topic and
subscription limiters lazily, only for enabled rates). ``-1`` and ``0`` both mean "unlimited".

Validation is ours (Pulsar's admin API accepts any number): a rate below ``-1`` or a period
below 1 s is refused with the 412 Pulsar uses for invalid policy values; JSON that does not parse
into the Java types (``int`` message rate and period, ``long`` byte rate) is refused with 400.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from emubroker.config.throttling import (
    ASYNC_TOKEN_BUCKET_FACTORY,
    CLASSIC_FACTORY,
    DEFAULT_FACTORY,
    DispatchThrottlingConfig,
    FactoryClassName,
)

__all__ = [
    "ASYNC_TOKEN_BUCKET_FACTORY",
    "CLASSIC_FACTORY",
    "DEFAULT_FACTORY",
    "DispatchPolicies",
    "DispatchRate",
    "DispatchThrottlingConfig",
    "EffectiveRates",
    "FactoryClassName",
    "InvalidDispatchRateError",
    "decode_dispatch_rate",
    "encode_dispatch_rate",
    "normalize",
    "resolve_broker_rate",
    "resolve_effective_rates",
    "resolve_subscription_rate",
    "resolve_topic_rate",
    "throttling_config_from",
    "validate_dispatch_rate",
]

# Java field types of DispatchRateImpl: int message rate and period, long byte rate.
JAVA_INT_MAX = 2**31 - 1
JAVA_LONG_MAX = 2**63 - 1

_JavaInt = Annotated[int, msgspec.Meta(ge=-(2**31), le=JAVA_INT_MAX)]
_JavaLong = Annotated[int, msgspec.Meta(ge=-(2**63), le=JAVA_LONG_MAX)]

HTTP_BAD_REQUEST = 400
HTTP_PRECONDITION_FAILED = 412


class InvalidDispatchRateError(ValueError):
    """A dispatch rate cannot be accepted.

    Attributes:
        http_status: The status the admin API answers with (400 bad JSON, 412 bad value).
    """

    def __init__(self, message: str, http_status: int) -> None:
        super().__init__(message)
        self.http_status = http_status


class DispatchRate(msgspec.Struct, frozen=True, omit_defaults=False):
    """Pulsar's ``DispatchRate`` policy value, in its JSON shape (``DispatchRateImpl``).

    Attributes:
        dispatchThrottlingRateInMsg: Messages per period; ``<= 0`` disables the message limit.
        dispatchThrottlingRateInByte: Bytes per period; ``<= 0`` disables the byte limit.
        relativeToPublishRate: Limit = ``floor(topic's last average publish rate) + rate``.
        ratePeriodInSecond: Period length in seconds.
    """

    dispatchThrottlingRateInMsg: _JavaInt = -1
    dispatchThrottlingRateInByte: _JavaLong = -1
    relativeToPublishRate: bool = False
    ratePeriodInSecond: _JavaInt = 1

    @property
    def enabled(self) -> bool:
        """Whether either limit is on (``isDispatchRateEnabled``)."""
        return self.dispatchThrottlingRateInMsg > 0 or self.dispatchThrottlingRateInByte > 0


def normalize(rate: DispatchRate | None) -> DispatchRate | None:
    """``DispatchRateImpl.normalize``: a policy value that limits nothing counts as absent."""
    return rate if rate is not None and rate.enabled else None


def validate_dispatch_rate(rate: DispatchRate) -> DispatchRate:
    """Check a policy value for things no Pulsar deployment means.

    Returns:
        ``rate`` unchanged.

    Raises:
        InvalidDispatchRateError: (412) a rate below -1 or a period below 1 s.
    """
    for name in ("dispatchThrottlingRateInMsg", "dispatchThrottlingRateInByte"):
        value = getattr(rate, name)
        if value < -1:
            raise InvalidDispatchRateError(
                f"{name} must be -1 (unlimited), 0 (disabled) or positive, got {value}",
                HTTP_PRECONDITION_FAILED,
            )
    if rate.ratePeriodInSecond < 1:
        raise InvalidDispatchRateError(
            f"ratePeriodInSecond must be at least 1, got {rate.ratePeriodInSecond}",
            HTTP_PRECONDITION_FAILED,
        )
    return rate


_decoder = msgspec.json.Decoder(DispatchRate)
_encoder = msgspec.json.Encoder()


def decode_dispatch_rate(data: bytes | str) -> DispatchRate:
    """Parse and validate a ``DispatchRate`` JSON body (unknown keys ignored, like Jackson here).

    Raises:
        InvalidDispatchRateError: 400 for malformed JSON, wrong types or values outside the Java
            field types; 412 for values rejected by :func:`validate_dispatch_rate`.
    """
    try:
        rate = _decoder.decode(data)
    except msgspec.DecodeError as exc:  # ValidationError is a subclass
        raise InvalidDispatchRateError(f"invalid DispatchRate: {exc}", HTTP_BAD_REQUEST) from exc
    except RecursionError:  # msgspec stops at a fixed nesting depth; a DispatchRate is flat
        raise InvalidDispatchRateError(
            "invalid DispatchRate: nested too deeply", HTTP_BAD_REQUEST
        ) from None
    return validate_dispatch_rate(rate)


def encode_dispatch_rate(rate: DispatchRate) -> bytes:
    """Serialise a ``DispatchRate`` to the JSON Pulsar's admin API returns."""
    return _encoder.encode(rate)


def throttling_config_from(source: object) -> DispatchThrottlingConfig:
    """Build the throttling settings from any object with ``broker.conf`` attributes or keys.

    Missing attributes take Pulsar's defaults, so the broker's config struct can grow these keys
    one at a time.

    Raises:
        msgspec.ValidationError: A present value has the wrong type or is out of range.
    """
    if isinstance(source, dict):
        return msgspec.convert(source, DispatchThrottlingConfig, strict=False)
    return msgspec.convert(source, DispatchThrottlingConfig, from_attributes=True)


class DispatchPolicies(msgspec.Struct, frozen=True, kw_only=True):
    """The policy values that bear on one subscription's dispatch limits (all optional).

    Namespace maps are keyed by cluster in Pulsar; pass the entries for this broker's cluster.

    Attributes:
        topic_local: Topic policy ``dispatchRate`` (local).
        topic_global: Topic policy ``dispatchRate`` (global).
        namespace_topic: Namespace ``topicDispatchRate[cluster]``.
        namespace_cluster: Legacy namespace ``clusterDispatchRate[cluster]``.
        per_subscription: Topic policy ``subscriptionPolicies[sub].dispatchRate`` (PIP-152).
        subscription_local: Topic policy ``subscriptionDispatchRate`` (local).
        subscription_global: Topic policy ``subscriptionDispatchRate`` (global).
        namespace_subscription: Namespace ``subscriptionDispatchRate[cluster]``.
    """

    topic_local: DispatchRate | None = None
    topic_global: DispatchRate | None = None
    namespace_topic: DispatchRate | None = None
    namespace_cluster: DispatchRate | None = None
    per_subscription: DispatchRate | None = None
    subscription_local: DispatchRate | None = None
    subscription_global: DispatchRate | None = None
    namespace_subscription: DispatchRate | None = None


class EffectiveRates(msgspec.Struct, frozen=True):
    """The rate each level's limiter should run with; None means "no limiter at this level".

    Attributes:
        broker: The broker-wide rate (None when both broker rates are off).
        topic: The topic's rate.
        subscription: The subscription's rate.
    """

    broker: DispatchRate | None
    topic: DispatchRate | None
    subscription: DispatchRate | None


def _first_present(*candidates: DispatchRate | None) -> DispatchRate | None:
    for candidate in candidates:
        normalized = normalize(candidate)
        if normalized is not None:
            return normalized
    return None


def _enabled_or_none(rate: DispatchRate) -> DispatchRate | None:
    return rate if rate.enabled else None


def resolve_broker_rate(config: DispatchThrottlingConfig) -> DispatchRate | None:
    """The broker level: config only, 1 s period, never relative (spec §1.1)."""
    return _enabled_or_none(
        DispatchRate(config.dispatchThrottlingRateInMsg, config.dispatchThrottlingRateInByte)
    )


def resolve_topic_rate(
    config: DispatchThrottlingConfig, policies: DispatchPolicies
) -> DispatchRate | None:
    """The topic level (``AbstractTopic.getDispatchRate`` via ``PolicyHierarchyValue``)."""
    namespace = policies.namespace_topic
    if namespace is None:
        # updateNamespaceDispatchRate falls back to the legacy map only when the key is absent,
        # and normalises afterwards.
        namespace = policies.namespace_cluster
    policy = _first_present(policies.topic_local, policies.topic_global, namespace)
    if policy is not None:
        return policy
    return _enabled_or_none(
        DispatchRate(
            config.dispatchThrottlingRatePerTopicInMsg, config.dispatchThrottlingRatePerTopicInByte
        )
    )


def resolve_subscription_rate(
    config: DispatchThrottlingConfig, policies: DispatchPolicies
) -> DispatchRate | None:
    """The subscription level (``AbstractTopic.getSubscriptionDispatchRate``, PIP-152 first)."""
    policy = _first_present(
        policies.per_subscription,
        policies.subscription_local,
        policies.subscription_global,
        policies.namespace_subscription,
    )
    if policy is not None:
        return policy
    return _enabled_or_none(
        DispatchRate(
            config.dispatchThrottlingRatePerSubscriptionInMsg,
            config.dispatchThrottlingRatePerSubscriptionInByte,
        )
    )


def resolve_effective_rates(
    config: DispatchThrottlingConfig, policies: DispatchPolicies | None = None
) -> EffectiveRates:
    """All three levels at once, in consult order broker -> topic -> subscription."""
    if policies is None:
        policies = DispatchPolicies()
    return EffectiveRates(
        broker=resolve_broker_rate(config),
        topic=resolve_topic_rate(config, policies),
        subscription=resolve_subscription_rate(config, policies),
    )
