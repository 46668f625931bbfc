"""One dispatch rate limiter per level (broker, topic or subscription), in both Pulsar flavours.

Pulsar's abstract ``service.persistent.DispatchRateLimiter`` has two implementations, chosen by
``dispatchRateLimiterFactoryClassName`` (spec §1.5; default: the token bucket):

``ClassicDispatchRateLimiter`` (``DispatchRateLimiterClassicImpl``)
    A message and a byte ``common.util.RateLimiter`` in dispatch mode. A live rate change calls
    ``setRate`` on the existing limiter: the debt carried over is kept and the renewal schedule
    restarts at the change. In relative mode the initial permits are the configured rate; each
    renewal replaces them with ``floor(avg publish rate) + rate`` (spec §1.1).

``TokenBucketDispatchRateLimiter`` (``DispatchRateLimiterAsyncTokenBucketImpl``)
    A message and a byte ``AsyncTokenBucket``: ``rate`` tokens per ``max(period, 1) s``, capacity
    and initial balance ``rate``, refill resolution equal to the period. Every
    ``updateDispatchRate`` builds new, full buckets (so a live change forgives any debt). In
    relative mode the buckets are dynamic: rate and capacity are re-evaluated on every access.

Common rules: a bucket exists only for a rate ``> 0``; a missing bucket reports ``-1``
(unlimited) and ignores charges; available permits are never negative; charges of 0 are skipped.
All methods take ``now`` (monotonic seconds) and the limiters hold no clock.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from typing import ClassVar, Protocol

import msgspec

from emubroker.ratelimit.bucket import (
    NANOS_PER_SECOND,
    AsyncTokenBucket,
    ClassicRateLimiter,
    DynamicRateTokenBucket,
    FinalRateTokenBucket,
    to_nanos,
)
from emubroker.ratelimit.quotas import (
    ASYNC_TOKEN_BUCKET_FACTORY,
    CLASSIC_FACTORY,
    DispatchRate,
)

__all__ = [
    "LIMITER_FACTORIES",
    "ClassicDispatchRateLimiter",
    "DispatchRateLimiter",
    "LastUpdatedAvgPublishRate",
    "LimiterLevel",
    "PublishRateSource",
    "TokenBucketDispatchRateLimiter",
    "create_dispatch_rate_limiter",
]


class LimiterLevel(enum.StrEnum):
    """The three levels, in the order a dispatcher consults them (spec §1.1)."""

    BROKER = "broker"
    TOPIC = "topic"
    SUBSCRIPTION = "subscription"


class PublishRateSource(Protocol):
    """The topic's smoothed publish rates, read by relative-to-publish-rate limiters."""

    def avg_publish_rate_in_msg(self) -> float:
        """``lastUpdatedAvgPublishRateInMsg``."""
        ...

    def avg_publish_rate_in_byte(self) -> float:
        """``lastUpdatedAvgPublishRateInByte``."""
        ...


class LastUpdatedAvgPublishRate:
    """``PersistentTopic.lastUpdatedAvgPublishRateIn{Msg,Byte}``, refreshed per stats update.

    At every topic stats update (``statsUpdateFrequencyInSecs``, default 60 s) a higher aggregate
    publish rate is taken as is, a lower one averaged with the previous value (spec §1.1).
    """

    __slots__ = ("_byte", "_msg")

    def __init__(self) -> None:
        self._msg = 0.0
        self._byte = 0.0

    def update(self, msg_rate_in: float, byte_rate_in: float) -> None:
        """Fold in the aggregate publish rates of the latest stats interval."""
        self._msg = msg_rate_in if msg_rate_in > self._msg else (self._msg + msg_rate_in) / 2
        self._byte = byte_rate_in if byte_rate_in > self._byte else (self._byte + byte_rate_in) / 2

    def avg_publish_rate_in_msg(self) -> float:
        return self._msg

    def avg_publish_rate_in_byte(self) -> float:
        return self._byte


class DispatchRateLimiter(ABC):
    """A level's message and byte limits (Pulsar's abstract ``DispatchRateLimiter``).

    Args:
        level: Which level this limiter serves; the broker level is never relative.
        rate: The effective rate (see ``quotas.resolve_*``); None or a disabled rate = no limit.
        now: Creation time.
        publish_rate: The topic's publish rates, for relative mode (missing = rate 0).
    """

    implementation: ClassVar[str]
    factory_class_name: ClassVar[str]

    #: ``isDispatchRateLimitingEnabled``: a message or a byte limit exists.
    enabled: bool = False
    #: Whether a message (resp. byte) limit exists; kept as attributes for the hot path.
    limits_msg: bool = False
    limits_byte: bool = False

    def __init__(
        self,
        level: LimiterLevel,
        rate: DispatchRate | None,
        now: float,
        *,
        publish_rate: PublishRateSource | None = None,
    ) -> None:
        self.level = level
        self._publish_rate = publish_rate
        self._rate: DispatchRate | None = None
        self.update_rate(rate, now)

    @property
    def dispatch_rate(self) -> DispatchRate | None:
        """The rate last applied (None when disabled)."""
        return self._rate

    def update_rate(self, rate: DispatchRate | None, now: float) -> None:
        """``updateDispatchRate``: apply a new effective rate (live change, no reconnect)."""
        if rate is not None and not rate.enabled:
            rate = None
        if rate is not None and self.level is LimiterLevel.BROKER and rate.relativeToPublishRate:
            # The broker-level rate is built with relativeToPublishRate forced to false (§8.6).
            rate = msgspec.structs.replace(rate, relativeToPublishRate=False)
        self._rate = rate
        self._apply(rate, now)
        self.limits_msg = self.rate_on_msg() > 0
        self.limits_byte = self.rate_on_byte() > 0
        self.enabled = self.limits_msg or self.limits_byte

    @abstractmethod
    def _apply(self, rate: DispatchRate | None, now: float) -> None: ...

    def available_msg(self, now: float) -> int:
        """``getAvailableDispatchRateLimitOnMsg``: ``>= 0``, or -1 without a message limit.

        Evaluates the byte bucket too (a refill is due or not regardless of who asks).
        """
        return self.available_ns(to_nanos(now))[0]

    def available_byte(self, now: float) -> int:
        """``getAvailableDispatchRateLimitOnByte``: ``>= 0``, or -1 without a byte limit."""
        return self.available_ns(to_nanos(now))[1]

    def consume(self, messages: int, size: int, now: float) -> None:
        """``consumeDispatchQuota``: charge message tokens and bytes after a send."""
        self.consume_ns(messages, size, to_nanos(now))

    @abstractmethod
    def available_ns(self, now_ns: int) -> tuple[int, int]:
        """Message then byte availability at ``now_ns``, evaluated in that order (hot path)."""

    @abstractmethod
    def consume_ns(self, messages: int, size: int, now_ns: int) -> None:
        """:meth:`consume` at ``now_ns`` nanoseconds (hot path)."""

    @abstractmethod
    def rate_on_msg(self) -> int:
        """``getDispatchRateOnMsg``: the current message rate, or -1."""

    @abstractmethod
    def rate_on_byte(self) -> int:
        """``getDispatchRateOnByte``: the current byte rate, or -1."""

    @abstractmethod
    def period_index(self, now: float) -> int:
        """The current rate period, counted from when the current limit took effect; -1 if off.

        Classic: the number of renewals since the schedule (re)started. Token bucket: whole
        periods since the buckets were built. For trace records only.
        """

    def _relative_msg(self, configured: int) -> int:
        # (long) lastUpdatedAvgPublishRateInMsg + configured; Java's cast truncates toward zero.
        source = self._publish_rate
        if source is None:
            return configured
        return int(source.avg_publish_rate_in_msg()) + configured

    def _relative_byte(self, configured: int) -> int:
        source = self._publish_rate
        if source is None:
            return configured
        return int(source.avg_publish_rate_in_byte()) + configured


class ClassicDispatchRateLimiter(DispatchRateLimiter):
    """``DispatchRateLimiterClassicImpl``: period-based limiters with fixed-rate renewals."""

    implementation: ClassVar[str] = "classic"
    factory_class_name: ClassVar[str] = CLASSIC_FACTORY

    _msg: ClassicRateLimiter | None = None
    _byte: ClassicRateLimiter | None = None

    def _apply(self, rate: DispatchRate | None, now: float) -> None:
        msg_rate = rate.dispatchThrottlingRateInMsg if rate else 0
        byte_rate = rate.dispatchThrottlingRateInByte if rate else 0
        period = rate.ratePeriodInSecond if rate else 1
        relative = rate.relativeToPublishRate if rate else False
        if msg_rate > 0:
            msg_updater = (lambda: self._relative_msg(msg_rate)) if relative else None
            if self._msg is None:
                self._msg = ClassicRateLimiter(msg_rate, period, permit_updater=msg_updater)
            else:
                self._msg.set_rate(msg_rate, period, now, msg_updater)
        else:
            self._msg = None
        if byte_rate > 0:
            byte_updater = (lambda: self._relative_byte(byte_rate)) if relative else None
            if self._byte is None:
                self._byte = ClassicRateLimiter(byte_rate, period, permit_updater=byte_updater)
            else:
                self._byte.set_rate(byte_rate, period, now, byte_updater)
        else:
            self._byte = None

    def available_ns(self, now_ns: int) -> tuple[int, int]:
        msg, byte = self._msg, self._byte
        return (
            -1 if msg is None else msg.available_ns(now_ns),
            -1 if byte is None else byte.available_ns(now_ns),
        )

    def consume_ns(self, messages: int, size: int, now_ns: int) -> None:
        if messages > 0 and self._msg is not None:
            self._msg.try_acquire_ns(messages, now_ns)
        if size > 0 and self._byte is not None:
            self._byte.try_acquire_ns(size, now_ns)

    def rate_on_msg(self) -> int:
        return -1 if self._msg is None else self._msg.rate

    def rate_on_byte(self) -> int:
        return -1 if self._byte is None else self._byte.rate

    def period_index(self, now: float) -> int:
        limiter = self._msg if self._msg is not None else self._byte
        return -1 if limiter is None else limiter.renewals(now)


class TokenBucketDispatchRateLimiter(DispatchRateLimiter):
    """``DispatchRateLimiterAsyncTokenBucketImpl``: lazily refilled token buckets (PIP-322)."""

    implementation: ClassVar[str] = "token-bucket"
    factory_class_name: ClassVar[str] = ASYNC_TOKEN_BUCKET_FACTORY

    _msg: AsyncTokenBucket | None = None
    _byte: AsyncTokenBucket | None = None
    _built_ns: int = 0
    _period_ns: int = NANOS_PER_SECOND

    def _apply(self, rate: DispatchRate | None, now: float) -> None:
        msg_rate = rate.dispatchThrottlingRateInMsg if rate else 0
        byte_rate = rate.dispatchThrottlingRateInByte if rate else 0
        relative = rate.relativeToPublishRate if rate else False
        period_ns = max(rate.ratePeriodInSecond if rate else 1, 1) * NANOS_PER_SECOND
        self._period_ns = period_ns
        self._built_ns = to_nanos(now)
        self._msg = self._build(msg_rate, period_ns, now, relative, self._relative_msg)
        self._byte = self._build(byte_rate, period_ns, now, relative, self._relative_byte)

    @staticmethod
    def _build(
        rate: int,
        period_ns: int,
        now: float,
        relative: bool,
        relative_rate: _RelativeRate,
    ) -> AsyncTokenBucket | None:
        if rate <= 0:
            return None
        if relative:
            return DynamicRateTokenBucket(
                lambda: relative_rate(rate), period_ns, now, resolution_ns=period_ns
            )
        # Resolution = period: tokens arrive in one chunk per period, like the classic renewal.
        return FinalRateTokenBucket(rate, period_ns, now, resolution_ns=period_ns)

    def available_ns(self, now_ns: int) -> tuple[int, int]:
        msg, byte = self._msg, self._byte
        # Message bucket first, then bytes (both may refill); a debt reports 0 available.
        on_msg = on_byte = -1
        if msg is not None:
            on_msg = msg.tokens_ns(now_ns)
            if on_msg < 0:
                on_msg = 0
        if byte is not None:
            on_byte = byte.tokens_ns(now_ns)
            if on_byte < 0:
                on_byte = 0
        return on_msg, on_byte

    def consume_ns(self, messages: int, size: int, now_ns: int) -> None:
        if messages > 0 and self._msg is not None:
            self._msg.consume(messages)
        if size > 0 and self._byte is not None:
            self._byte.consume(size)

    def rate_on_msg(self) -> int:
        return -1 if self._msg is None else self._msg.rate()

    def rate_on_byte(self) -> int:
        return -1 if self._byte is None else self._byte.rate()

    def period_index(self, now: float) -> int:
        if not self.enabled:
            return -1
        return (to_nanos(now) - self._built_ns) // self._period_ns


class _RelativeRate(Protocol):
    def __call__(self, configured: int, /) -> int: ...


LIMITER_FACTORIES: dict[str, type[DispatchRateLimiter]] = {
    CLASSIC_FACTORY: ClassicDispatchRateLimiter,
    ASYNC_TOKEN_BUCKET_FACTORY: TokenBucketDispatchRateLimiter,
}


def create_dispatch_rate_limiter(
    factory_class_name: str,
    level: LimiterLevel,
    rate: DispatchRate | None,
    now: float,
    *,
    publish_rate: PublishRateSource | None = None,
) -> DispatchRateLimiter:
    """Build a limiter the way ``dispatchRateLimiterFactoryClassName`` selects it.

    Raises:
        ValueError: An unknown factory class name (the message lists the known ones).
    """
    try:
        cls = LIMITER_FACTORIES[factory_class_name]
    except KeyError:
        known = ", ".join(sorted(LIMITER_FACTORIES))
        raise ValueError(
            f"unknown dispatchRateLimiterFactoryClassName {factory_class_name!r}; known: {known}"
        ) from None
    return cls(level, rate, now, publish_rate=publish_rate)
