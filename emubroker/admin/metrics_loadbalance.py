"""The load manager's figures on ``/metrics``, as Pulsar's modular load manager exports them.

``ModularLoadManagerImpl.updateLocalBrokerData`` keeps one ``Metrics`` record with dimensions
``broker`` (the advertised address) and ``metric="loadBalancing"`` holding the resource usages
of the latest sample in percent (``brk_lb_cpu_usage``, ``brk_lb_memory_usage``,
``brk_lb_directMemory_usage``, ``brk_lb_bandwidth_in_usage``, ``brk_lb_bandwidth_out_usage``),
and, with ``exposeBundlesMetricsInPrometheus``, one record per bundle with dimensions ``broker``,
``bundle`` and ``metric="bundle"`` (``brk_bundle_msg_rate_in`` ... ``brk_bundle_topics_count``).
``PrometheusMetricsGenerator`` writes them as gauges with ``brk_`` replaced by ``pulsar_``,
``cluster`` first and the other labels in name order (``Metrics`` keeps them in a ``TreeMap``),
separated by ", ", and the values with Java's ``toString`` (the usages are Java floats:
``30.000002``, not ``30.000001907348633``).

One departure: Pulsar writes the per-bundle records one bundle after another, so the samples of
one family are interleaved with the others'; the exposition format wants a family's samples
together, so here each family lists every bundle before the next family starts.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import TYPE_CHECKING, Final

from emubroker.loadbalance.load_managers import load_manager
from emubroker.loadbalance.model.usage import f32

if TYPE_CHECKING:
    from collections.abc import Callable

    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.leader.tasks import LoadBalancerLeader
    from emubroker.loadbalance.model.bundle_stats import NamespaceBundleStats
    from emubroker.loadbalance.model.extensible_data import UnloadCounter
    from emubroker.loadbalance.model.usage import ResourceUsage, SystemResourceUsage
    from emubroker.loadbalance.reporting.reporter import LoadReportStatistics
    from emubroker.loadbalance.runtime.shedding_runtime import ModularUnloadCounters

__all__ = [
    "java_double_string",
    "java_float_string",
    "render_leader_unload_metrics",
    "render_load_balancing_metrics",
    "render_split_metrics",
    "render_unload_metrics",
]

_USAGES: Final[tuple[tuple[str, Callable[[SystemResourceUsage], ResourceUsage]], ...]] = (
    ("pulsar_lb_bandwidth_in_usage", lambda u: u.bandwidth_in),
    ("pulsar_lb_bandwidth_out_usage", lambda u: u.bandwidth_out),
    ("pulsar_lb_cpu_usage", lambda u: u.cpu),
    ("pulsar_lb_directMemory_usage", lambda u: u.direct_memory),
    ("pulsar_lb_memory_usage", lambda u: u.memory),
)
_BUNDLE: Final[tuple[tuple[str, Callable[[NamespaceBundleStats], str]], ...]] = (
    ("pulsar_bundle_consumer_count", lambda s: str(s.consumer_count)),
    ("pulsar_bundle_msg_rate_in", lambda s: java_double_string(s.msg_rate_in)),
    ("pulsar_bundle_msg_rate_out", lambda s: java_double_string(s.msg_rate_out)),
    ("pulsar_bundle_msg_throughput_in", lambda s: java_double_string(s.msg_throughput_in)),
    ("pulsar_bundle_msg_throughput_out", lambda s: java_double_string(s.msg_throughput_out)),
    ("pulsar_bundle_producer_count", lambda s: str(s.producer_count)),
    ("pulsar_bundle_topics_count", lambda s: str(s.topics)),
)


def _java_format(shortest: str) -> str:
    """Java's ``toString`` layout of a finite number given its shortest decimal digits."""
    sign, digit_tuple, exponent = Decimal(shortest).as_tuple()
    assert isinstance(exponent, int)  # finite
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    prefix = "-" if sign else ""
    if not digits:
        return prefix + "0.0"
    # The value is 0.d1d2... x 10^(point): d1 sits at 10^(point - 1).
    point = len(digit_tuple) + exponent
    scientific = point - 1
    if -3 <= scientific < 7:
        if point <= 0:
            return f"{prefix}0.{'0' * -point}{digits}"
        whole = digits[:point].ljust(point, "0")
        return f"{prefix}{whole}.{digits[point:] or '0'}"
    return f"{prefix}{digits[0]}.{digits[1:] or '0'}E{scientific}"


def _special(value: float) -> str | None:
    # The exposition format's spellings (Java would write Infinity).
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return None


def java_double_string(value: float) -> str:
    """``Double.toString``: the shortest digits that read back, ``1.0E-5`` style exponents."""
    return _special(value) or _java_format(repr(value))


def java_float_string(value: float) -> str:
    """``Float.toString`` of a float32 value (the shortest digits that read back as that float)."""
    special = _special(value)
    if special is not None:
        return special
    for precision in range(1, 10):
        text = f"{value:.{precision - 1}e}"
        if f32(float(text)) == value:
            return _java_format(text)
    return _java_format(repr(value))


def _labels(cluster: str, **labels: str) -> str:
    # PrometheusMetricsGenerator.parseMetricsToPrometheusMetrics: cluster, then the dimensions.
    parts = [f'cluster="{cluster}"'] + [f'{k}="{labels[k]}"' for k in sorted(labels)]
    return "{" + ", ".join(parts) + "}"


def render_load_balancing_metrics(
    stats: LoadReportStatistics, *, cluster: str, broker: str, bundles: bool
) -> str:
    """The ``pulsar_lb_*`` usages (and ``pulsar_bundle_*`` when ``bundles``) as Prometheus text.

    Args:
        stats: The load reporter's statistics.
        cluster: ``clusterName``.
        broker: The ``broker`` label: the advertised address, as Pulsar labels it.
        bundles: ``exposeBundlesMetricsInPrometheus``.
    """
    lines: list[str] = []
    labels = _labels(cluster, broker=broker, metric="loadBalancing")
    for name, get in _USAGES:
        lines.append(f"# TYPE {name} gauge")
        lines.append(f"{name}{labels} {java_float_string(get(stats.usage).percent_usage())}")
    if bundles and stats.bundle_stats:
        per_bundle = [
            (_labels(cluster, broker=broker, bundle=bundle, metric="bundle"), bundle_stats)
            for bundle, bundle_stats in stats.bundle_stats.items()
        ]
        for name, value in _BUNDLE:
            lines.append(f"# TYPE {name} gauge")
            lines.extend(f"{name}{bundle_labels} {value(s)}" for bundle_labels, s in per_bundle)
    lines.append("")
    return "\n".join(lines)


def render_unload_metrics(
    modular: ModularUnloadCounters | None,
    extensible: UnloadCounter | None,
    *,
    cluster: str,
    broker: str,
) -> str:
    """The leader's unload counters, as the load manager in use exports them.

    Modular (``ModularLoadManagerImpl.updateBundleUnloadingMetrics``), once this broker ran a
    shedding cycle: ``pulsar_lb_unload_broker_total`` and ``pulsar_lb_unload_bundle_total`` with
    ``metric="bundleUnloading"``. Extensible (``UnloadCounter.toMetrics``): the same two with the
    ``broker`` label, ``pulsar_lb_unload_broker_breakdown_total`` per result and reason, and
    ``pulsar_lb_resource_usage_stats`` (the last cycle's load average and deviation) when both
    are positive. Pulsar exports them all as gauges.

    Args:
        modular: The modular counters, or None if this broker never ran a modular cycle.
        extensible: The extensible counter, or None if the extensible manager is not in use.
        cluster: ``clusterName``.
        broker: The advertised address (the extensible ``broker`` label).
    """
    lines: list[str] = []
    if modular is not None:
        labels = _labels(cluster, metric="bundleUnloading")
        for name, value in (
            ("pulsar_lb_unload_broker_total", modular.unload_broker_count),
            ("pulsar_lb_unload_bundle_total", modular.unload_bundle_count),
        ):
            lines += [f"# TYPE {name} gauge", f"{name}{labels} {value}"]
    if extensible is not None:
        labels = _labels(cluster, broker=broker, metric="bundleUnloading")
        for name, value in (
            ("pulsar_lb_unload_broker_total", extensible.unload_broker_count),
            ("pulsar_lb_unload_bundle_total", extensible.unload_bundle_count),
        ):
            lines += [f"# TYPE {name} gauge", f"{name}{labels} {value}"]
        name = "pulsar_lb_unload_broker_breakdown_total"
        lines.append(f"# TYPE {name} gauge")
        for label, counts in extensible.breakdown_counters.items():
            for reason, count in counts.items():
                breakdown = _labels(
                    cluster, broker=broker, metric="bundleUnloading", reason=reason, result=label
                )
                lines.append(f"{name}{breakdown} {count}")
        if extensible.load_avg > 0 and extensible.load_std > 0:
            name = "pulsar_lb_resource_usage_stats"
            lines.append(f"# TYPE {name} gauge")
            for stat, figure in (("avg", extensible.load_avg), ("std", extensible.load_std)):
                stat_labels = _labels(
                    cluster, broker=broker, feature="max_ema", metric="bundleUnloading", stat=stat
                )
                lines.append(f"{name}{stat_labels} {java_double_string(figure)}")
    if lines:
        lines.append("")
    return "\n".join(lines)


def render_leader_unload_metrics(leader: LoadBalancerLeader, conf: BrokerConfig) -> str:
    """This broker's unload and split counters, once it ran a shedding cycle or split check."""
    counters = load_manager(conf).exported_counters(leader)
    text = ""
    if counters.modular is not None or counters.extensible is not None:
        text = render_unload_metrics(
            counters.modular,
            counters.extensible,
            cluster=conf.clusterName,
            broker=conf.advertised_host(),
        )
    if counters.bundles_split is not None:
        text += render_split_metrics(counters.bundles_split, cluster=conf.clusterName)
    return text


def render_split_metrics(split_count: int, *, cluster: str) -> str:
    """``pulsar_lb_bundles_split_total`` (``ModularLoadManagerImpl.updateBundleSplitMetrics``).

    Bundles the leader split automatically, with ``metric="bundlesSplit"``; Pulsar exports it
    once the leader ran a split check, as a gauge.
    """
    name = "pulsar_lb_bundles_split_total"
    labels = _labels(cluster, metric="bundlesSplit")
    return f"# TYPE {name} gauge\n{name}{labels} {split_count}\n"
