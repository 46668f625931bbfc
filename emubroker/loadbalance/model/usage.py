"""Resource samples and the usage arithmetic every strategy shares (spec/pulsar-behaviour.md §0).

Defaults, as Pulsar's constructors have them and on purpose different: a load record
(``LocalBrokerData``, ``BrokerLoadData``) starts at :data:`NO_USAGE`, ``(0, 0)``: no load yet,
0 % to every strategy; a measurement (``SystemResourceUsage``) starts at :data:`UNMEASURED`,
``(-1, -1)``: a resource its source does not measure, whose limit is unknown (0 % as well, as
``percent_usage`` reads a limit that is not positive).

``ResourceUsage.percentUsage()`` is computed in 32-bit floats in Pulsar; the error is visible
(``30/100`` gives ``30.000001907348633``) and Pulsar's tests assert such values, so we round
through float32 at the same steps. Weighted maxima combine those percentages in doubles.
"""

from __future__ import annotations

import math
import struct
from typing import TYPE_CHECKING, Final, NamedTuple

import msgspec

if TYPE_CHECKING:
    from emubroker.config import BrokerConfig

__all__ = [
    "NO_USAGE",
    "UNMEASURED",
    "ResourceUsage",
    "ResourceWeights",
    "SystemResourceUsage",
    "f32",
    "java_div",
    "max_with_weights",
    "resource_weights",
]

_FLOAT = struct.Struct("<f")


def f32(value: float) -> float:
    """Round a double to the nearest float32, as Java's ``(float)`` cast does (inf on overflow)."""
    try:
        return float(_FLOAT.unpack(_FLOAT.pack(value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


def java_div(dividend: float, divisor: float) -> float:
    """Double division with Java's results for a zero divisor (infinities and NaN, no error)."""
    if divisor != 0:
        return dividend / divisor
    if dividend == 0 or math.isnan(dividend):
        return math.nan
    return math.copysign(math.inf, dividend) * math.copysign(1.0, divisor)


class ResourceUsage(msgspec.Struct, frozen=True):
    """One resource sample: ``usage`` out of ``limit`` (Pulsar's ``ResourceUsage``).

    Attributes:
        usage: Amount in use (CPU percent of one core times cores, MiB, kbit/s).
        limit: Amount available in the same unit; ``<= 0`` means unknown.
    """

    usage: float = 0.0
    limit: float = 0.0

    def percent_usage(self) -> float:
        """``usage / limit * 100`` in float32 arithmetic, 0 when the limit is not positive."""
        proportion = 0.0
        if self.limit > 0:
            # A positive limit can still round to a float32 zero: Java then divides by 0.0.
            proportion = f32(java_div(f32(self.usage), f32(self.limit)))
        return f32(proportion * f32(100.0))


NO_USAGE: Final = ResourceUsage(0.0, 0.0)
"""A load record's resource before any report: Pulsar's ``new ResourceUsage()``."""
UNMEASURED: Final = ResourceUsage(-1.0, -1.0)
"""A sample of a resource not measured: ``SystemResourceUsage``'s ``new ResourceUsage(-1, -1)``."""


class SystemResourceUsage(msgspec.Struct, rename="camel"):
    """The five samples a broker measures; unmeasured ones are :data:`UNMEASURED`."""

    bandwidth_in: ResourceUsage = UNMEASURED
    bandwidth_out: ResourceUsage = UNMEASURED
    cpu: ResourceUsage = UNMEASURED
    memory: ResourceUsage = UNMEASURED
    direct_memory: ResourceUsage = UNMEASURED


class ResourceWeights(NamedTuple):
    """The ``loadBalancer*ResourceWeight`` keys, resolved as Pulsar's getters resolve them."""

    cpu: float
    memory: float
    direct_memory: float
    bandwidth_in: float
    bandwidth_out: float


def resource_weights(conf: BrokerConfig) -> ResourceWeights:
    """The resource weights of ``conf``.

    The bandwidth weights honour the misspelt deprecated keys (``loadBalancerBandwith*``) only
    while the new key keeps its default 1.0, as ``ServiceConfiguration`` does.
    """

    def bandwidth(new: float, old: float) -> float:
        if new != 1.0:
            return new
        return old if old != 1.0 else 1.0

    return ResourceWeights(
        cpu=conf.loadBalancerCPUResourceWeight,
        memory=conf.loadBalancerMemoryResourceWeight,
        direct_memory=conf.loadBalancerDirectMemoryResourceWeight,
        bandwidth_in=bandwidth(
            conf.loadBalancerBandwidthInResourceWeight, conf.loadBalancerBandwithInResourceWeight
        ),
        bandwidth_out=bandwidth(
            conf.loadBalancerBandwidthOutResourceWeight, conf.loadBalancerBandwithOutResourceWeight
        ),
    )


def max_with_weights(*weighted: tuple[ResourceUsage, float]) -> float:
    """``max(percent_usage * weight) / 100`` over the given samples (Pulsar's ``max`` helper).

    Pulsar starts from negative infinity and keeps strictly greater values, so a NaN never wins
    and an empty or all-NaN list gives ``-inf / 100``.
    """
    best = -math.inf
    for sample, weight in weighted:
        value = sample.percent_usage() * weight
        if value > best:
            best = value
    return best / 100
