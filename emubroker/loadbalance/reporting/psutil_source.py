"""Resource usage of this broker's own process and traffic, measured with ``psutil``.

Pulsar's ``LinuxBrokerHostUsageImpl`` measures the *host* (all CPUs, all NICs) and
``LoadManagerShared.getSystemResourceUsage`` then replaces memory and direct memory with the
JVM's. Several emulated brokers share one host, and host-wide figures would make them identical
to the load manager, so each broker measures itself (DESIGN.md decision 11):

============== ======================================= ======================================
sample         Pulsar                                  here
============== ======================================= ======================================
CPU            host busy share x ``100 x processors``  this process's CPU time per second, in
                                                       percent of one core, against ``100 x
                                                       emubrokerAvailableProcessors``
memory         JVM heap used / max heap (MiB)          process RSS / ``emubrokerMaxMemoryMB``
direct memory  JVM direct memory used / max (MiB)      bytes queued for clients in the
                                                       sessions (Netty's direct write buffers
                                                       in Pulsar) / ``emubrokerMaxMemoryMB``
bandwidth      NIC rx/tx kbit/s / NIC speed            bytes this broker's client connections
                                                       read / wrote, in kbit/s, against
                                                       ``loadBalancerOverrideBrokerNicSpeedGbps``
============== ======================================= ======================================

As in Pulsar, the first sample reports no CPU and no bandwidth (there is no interval yet), and a
sample taken with no time elapsed repeats the previous one.
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import psutil

from emubroker.loadbalance.model.usage import ResourceUsage, SystemResourceUsage
from emubroker.loadbalance.reporting.usage_sources import KBIT_PER_GBIT, bytes_to_kbit

if TYPE_CHECKING:
    from emubroker.loadbalance.reporting.usage_sources import BrokerActivity, ResourceLimits

__all__ = [
    "PsutilUsageSource",
    "host_memory_mb",
    "host_nic_speed_kbps",
    "host_processors",
]

log = logging.getLogger(__name__)

MIB = 1024 * 1024
_SYS_NET = Path("/sys/class/net")


class _CpuTimes(Protocol):
    @property
    def user(self) -> float: ...

    @property
    def system(self) -> float: ...


class _MemoryInfo(Protocol):
    @property
    def rss(self) -> int: ...


class _Process(Protocol):
    """The part of ``psutil.Process`` the source reads (tests pass a fake)."""

    def cpu_times(self) -> _CpuTimes: ...

    def memory_info(self) -> _MemoryInfo: ...


def host_processors() -> int:
    """The CPUs this process may run on, as the JVM's ``availableProcessors`` counts them."""
    affinity = getattr(os, "sched_getaffinity", None)  # Linux only
    if affinity is not None:
        return len(affinity(0))
    return os.cpu_count() or 1


def host_memory_mb() -> float:
    """A quarter of physical memory in MiB: the JVM's default max heap (and max direct memory)."""
    total: int = psutil.virtual_memory().total
    return total / MIB / 4


def host_nic_speed_kbps() -> float:
    """The summed speed of the host's usable physical NICs in kbit/s (Pulsar's fallback).

    Pulsar (``LinuxInfoUtils.getUsablePhysicalNICs``) counts interfaces that are up and not
    virtual (``/sys/class/net/<nic>`` does not resolve under ``/virtual/``). Elsewhere than Linux
    every interface that is up and not loopback counts. 0 when none reports a speed.
    """
    total = 0.0
    for name, stats in psutil.net_if_stats().items():
        if not stats.isup or stats.speed <= 0 or "loopback" in stats.flags.split(","):
            continue
        if _SYS_NET.is_dir() and "/virtual/" in str((_SYS_NET / name).resolve()):
            continue
        total += stats.speed * 1000  # Mbit/s
    return total


def nic_speed_kbps(override_gbps: float | None) -> float:
    """``loadBalancerOverrideBrokerNicSpeedGbps`` in kbit/s, else the host's physical NICs."""
    if override_gbps is not None:
        return override_gbps * KBIT_PER_GBIT
    speed = host_nic_speed_kbps()
    if speed <= 0:
        _note_unmeasured_bandwidth()
    return speed


@functools.cache
def _note_unmeasured_bandwidth() -> None:
    # Once per process: the host is the same for every broker this process runs (an in-process
    # cluster would repeat it per broker), and at INFO: common on virtual machines and
    # containers, and only the bandwidth share of the load reports is affected.
    log.info(
        "no network interface reports a speed: bandwidth usage reads as zero "
        "(set loadBalancerOverrideBrokerNicSpeedGbps to measure it)"
    )


class PsutilUsageSource:
    """This broker's process CPU and memory, and its own traffic (see the module docstring).

    Args:
        limits: The limits to report against.
        process: The process to measure; this one by default.
    """

    def __init__(self, limits: ResourceLimits, *, process: _Process | None = None) -> None:
        self._limits = limits
        self._process: _Process = process if process is not None else psutil.Process()
        self._last: tuple[float, float, int, int] | None = None  # now, cpu s, bytes in, out
        self._usage: SystemResourceUsage | None = None

    def sample(self, now: float, activity: BrokerActivity) -> SystemResourceUsage:
        times = self._process.cpu_times()
        cpu_seconds = times.user + times.system
        limits = self._limits
        cpu = bandwidth_in = bandwidth_out = 0.0
        if self._last is not None:
            last_now, last_cpu, last_in, last_out = self._last
            elapsed = now - last_now
            if elapsed <= 0 and self._usage is not None:
                return self._usage  # Pulsar skips a round with no elapsed time
            if elapsed > 0:
                cpu = 100.0 * max(cpu_seconds - last_cpu, 0.0) / elapsed
                bandwidth_in = bytes_to_kbit(activity.bytes_in - last_in) / elapsed
                bandwidth_out = bytes_to_kbit(activity.bytes_out - last_out) / elapsed
        self._last = (now, cpu_seconds, activity.bytes_in, activity.bytes_out)
        self._usage = SystemResourceUsage(
            cpu=ResourceUsage(cpu, limits.cpu),
            memory=ResourceUsage(self._process.memory_info().rss / MIB, limits.memory_mb),
            direct_memory=ResourceUsage(activity.buffered / MIB, limits.memory_mb),
            bandwidth_in=ResourceUsage(bandwidth_in, limits.nic_kbps),
            bandwidth_out=ResourceUsage(bandwidth_out, limits.nic_kbps),
        )
        return self._usage
