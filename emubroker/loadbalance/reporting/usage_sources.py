"""Where a broker's resource usages come from: the ``ResourceUsageSource`` seam (DESIGN.md §6).

A source turns what the broker did into the five samples of its load report
(``SystemResourceUsage``: CPU, memory, direct memory, bandwidth in and out, each a
``(usage, limit)`` pair in Pulsar's units: CPU in percent of one core against ``100 x
processors``, memory in MiB, bandwidth in kbit/s). Three sources:

- :class:`~emubroker.loadbalance.reporting.psutil_source.PsutilUsageSource` measures this broker's
  own process and traffic (real runs);
- :class:`ModelUsageSource` computes usage from the broker's own message and byte rates, so
  the same traffic always gives the same report (deterministic tests and experiments);
- :class:`ScriptedUsageSource` plays a script of values over time (a TOML or JSON file).

A source is sampled every ``loadBalancerHostUsageCheckIntervalMinutes`` (Pulsar's host usage
check); its ``now`` is the broker's clock in seconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NamedTuple, Protocol

import msgspec

from emubroker.loadbalance.model.usage import ResourceUsage, SystemResourceUsage

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "DEFAULT_MODEL_NIC_SPEED_GBPS",
    "BrokerActivity",
    "ModelUsageSource",
    "ResourceLimits",
    "ResourceUsageSource",
    "ScriptedUsageSource",
    "UsageScript",
    "UsageScriptError",
    "UsageStep",
    "load_usage_script",
]

KBIT_PER_GBIT = 1_000_000
"""Pulsar's ``BitRateUnit.Gigabit.toKilobit``."""

DEFAULT_MODEL_NIC_SPEED_GBPS = 1.0
"""The model's NIC when ``loadBalancerOverrideBrokerNicSpeedGbps`` is unset: the model must not
depend on the host it runs on, so it assumes one 1 Gbit/s interface."""


def bytes_to_kbit(count: float) -> float:
    """Pulsar's ``BitRateUnit.Byte.toKilobit``: bytes * 8 / 1000."""
    return count * 8 / 1000


class BrokerActivity(NamedTuple):
    """What the broker did, as a source may read it.

    Attributes:
        bytes_in: Bytes its client connections read, since it started.
        bytes_out: Bytes they wrote, since it started.
        buffered: Bytes queued for its clients right now.
        msg_rate_in: Messages/s published to its bundles (the sum its report carries).
        msg_rate_out: Messages/s delivered from them.
        msg_throughput_in: Bytes/s published.
        msg_throughput_out: Bytes/s delivered.
    """

    bytes_in: int = 0
    bytes_out: int = 0
    buffered: int = 0
    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    msg_throughput_in: float = 0.0
    msg_throughput_out: float = 0.0


class ResourceLimits(NamedTuple):
    """What a broker may use: the limits of its report's samples.

    Attributes:
        processors: Cores it may use; the CPU limit is ``100 * processors``
            (``emubrokerAvailableProcessors``, Pulsar's ``availableProcessors``).
        memory_mb: The memory and direct-memory limit in MiB (``emubrokerMaxMemoryMB``, the
            JVM's max heap and its default max direct memory).
        nic_kbps: The bandwidth limit each way in kbit/s.
    """

    processors: int
    memory_mb: float
    nic_kbps: float

    @property
    def cpu(self) -> float:
        return 100.0 * self.processors


class ResourceUsageSource(Protocol):
    """Where the resource usages of a load report come from."""

    def sample(self, now: float, activity: BrokerActivity) -> SystemResourceUsage:
        """The usages now.

        Args:
            now: The broker's clock, in seconds.
            activity: What the broker did (counters since start, rates over the last window).
        """
        ...


class ModelUsageSource:
    """Usage as a function of the broker's own traffic.

    CPU: ``100 * (msgRateIn + msgRateOut) / msg_rate_per_core`` percent of one core, against
    ``100 * processors``. Bandwidth: the message throughput in and out (bytes/s of its bundles) in
    kbit/s against the NIC. Memory and direct memory: nothing used, out of the memory limit.

    Args:
        limits: The limits to report against.
        msg_rate_per_core: Messages per second (in plus out) that keep one core busy
            (``emubrokerModelMsgRatePerCore``).
    """

    def __init__(self, limits: ResourceLimits, *, msg_rate_per_core: float) -> None:
        self._limits = limits
        self._per_core = msg_rate_per_core

    def sample(self, now: float, activity: BrokerActivity) -> SystemResourceUsage:
        limits = self._limits
        rate = activity.msg_rate_in + activity.msg_rate_out
        return SystemResourceUsage(
            cpu=ResourceUsage(100.0 * rate / self._per_core, limits.cpu),
            memory=ResourceUsage(0.0, limits.memory_mb),
            direct_memory=ResourceUsage(0.0, limits.memory_mb),
            bandwidth_in=ResourceUsage(bytes_to_kbit(activity.msg_throughput_in), limits.nic_kbps),
            bandwidth_out=ResourceUsage(
                bytes_to_kbit(activity.msg_throughput_out), limits.nic_kbps
            ),
        )


_Percent = Annotated[float, msgspec.Meta(ge=0)]


class UsageStep(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    """From ``at`` seconds on, these percentages of the limits (unnamed ones keep their value).

    Attributes:
        at: Seconds since the broker's first sample.
        cpu: Percent of all processors.
        memory: Percent of the memory limit.
        direct_memory: Percent of the memory limit (``directMemory`` in the file).
        bandwidth_in: Percent of the NIC (``bandwidthIn``).
        bandwidth_out: Percent of the NIC (``bandwidthOut``).
    """

    at: Annotated[float, msgspec.Meta(ge=0)]
    cpu: _Percent | None = None
    memory: _Percent | None = None
    direct_memory: _Percent | None = None
    bandwidth_in: _Percent | None = None
    bandwidth_out: _Percent | None = None


class BrokerScript(msgspec.Struct, forbid_unknown_fields=True):
    """The steps of one broker, by broker id."""

    steps: list[UsageStep] = []


class UsageScript(msgspec.Struct, forbid_unknown_fields=True):
    """A script file: the steps every broker plays, and brokers with steps of their own.

    Attributes:
        steps: For brokers not named in ``brokers``.
        brokers: Broker id (``host:webServicePort``) -> its own steps.
    """

    steps: list[UsageStep] = []
    brokers: dict[str, BrokerScript] = {}

    def steps_of(self, broker_id: str) -> list[UsageStep]:
        """The steps ``broker_id`` plays."""
        own = self.brokers.get(broker_id)
        return own.steps if own is not None else self.steps


class UsageScriptError(ValueError):
    """A usage script cannot be read or is not a valid script."""


def load_usage_script(path: str | Path) -> UsageScript:
    """Read a script: TOML for a ``.toml`` file, JSON otherwise.

    Raises:
        UsageScriptError: Unreadable, not TOML/JSON, or not a script (the message says where).
    """
    import tomllib  # here: only a scripted usage source reads TOML (start-up, docs/performance.md)

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        raw = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
        return msgspec.convert(raw, UsageScript)
    except (OSError, UnicodeDecodeError, ValueError, msgspec.ValidationError) as exc:
        raise UsageScriptError(f"{path}: {exc}") from exc


_FIELDS = ("cpu", "memory", "direct_memory", "bandwidth_in", "bandwidth_out")


class ScriptedUsageSource:
    """Plays a script: at each sample, the values of the last step whose time has come.

    Time 0 is the first sample (the broker's registration). Percentages become usages of the
    limits (CPU of all processors), so the report carries Pulsar's units.

    Args:
        limits: The limits to report against.
        steps: The broker's steps (:meth:`UsageScript.steps_of`), in any order.
    """

    def __init__(self, limits: ResourceLimits, steps: Sequence[UsageStep]) -> None:
        self._limits = limits
        self._steps = sorted(steps, key=lambda step: step.at)
        self._origin: float | None = None

    def sample(self, now: float, activity: BrokerActivity) -> SystemResourceUsage:
        if self._origin is None:
            self._origin = now
        elapsed = now - self._origin
        percent = dict.fromkeys(_FIELDS, 0.0)
        for step in self._steps:
            if step.at > elapsed:
                break
            for field in _FIELDS:
                value = getattr(step, field)
                if value is not None:
                    percent[field] = value
        limits = self._limits
        limit_of = {
            "cpu": limits.cpu,
            "memory": limits.memory_mb,
            "direct_memory": limits.memory_mb,
            "bandwidth_in": limits.nic_kbps,
            "bandwidth_out": limits.nic_kbps,
        }
        return SystemResourceUsage(
            **{
                field: ResourceUsage(percent[field] / 100 * limit_of[field], limit_of[field])
                for field in _FIELDS
            }
        )
