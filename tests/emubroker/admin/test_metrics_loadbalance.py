"""The load manager's ``/metrics`` text: Pulsar's names, label order and Java number spelling."""

from __future__ import annotations

import pytest

from emubroker.admin.metrics_loadbalance import (
    java_double_string,
    java_float_string,
    render_load_balancing_metrics,
)
from emubroker.loadbalance.model.bundle_stats import NamespaceBundleStats
from emubroker.loadbalance.model.usage import ResourceUsage, SystemResourceUsage
from emubroker.loadbalance.reporting.reporter import LoadReportStatistics
from tests.support.prometheus import parse_exposition


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0.0"),
        (1.0, "1.0"),
        (12.5, "12.5"),
        (0.001, "0.001"),
        (0.0001234, "1.234E-4"),
        (1234567.0, "1234567.0"),
        (12345678.0, "1.2345678E7"),
        (-2.5e-9, "-2.5E-9"),
        (float("inf"), "+Inf"),
    ],
)
def test_doubles_are_spelled_as_java_does(value: float, text: str) -> None:
    assert java_double_string(value) == text


def test_usages_are_java_floats() -> None:
    # ResourceUsage.percentUsage() is a float: Java prints its shortest float digits.
    assert java_float_string(ResourceUsage(30, 100).percent_usage()) == "30.000002"
    assert java_float_string(ResourceUsage(999, 1000).percent_usage()) == "99.9"
    assert java_float_string(ResourceUsage(1, 3).percent_usage()) == "33.333336"


def test_rendering_follows_pulsars_generator() -> None:
    stats = LoadReportStatistics(
        usage=SystemResourceUsage(
            cpu=ResourceUsage(50, 200),
            memory=ResourceUsage(30, 100),
            direct_memory=ResourceUsage(0, 100),
            bandwidth_in=ResourceUsage(1, 3),
            bandwidth_out=ResourceUsage(0, 0),
        ),
        bundle_stats={
            "public/default/0x00000000_0x80000000": NamespaceBundleStats(
                msg_rate_in=12.5, topics=3, producer_count=2
            ),
            "public/default/0x80000000_0xffffffff": NamespaceBundleStats(msg_rate_out=1e-4),
        },
        writes=1,
        last_reason=None,
    )
    text = render_load_balancing_metrics(stats, cluster="c1", broker="10.0.0.1", bundles=True)
    lines = text.splitlines()
    lb = '{cluster="c1", broker="10.0.0.1", metric="loadBalancing"}'
    assert lines[:10] == [
        "# TYPE pulsar_lb_bandwidth_in_usage gauge",
        f"pulsar_lb_bandwidth_in_usage{lb} 33.333336",
        "# TYPE pulsar_lb_bandwidth_out_usage gauge",
        f"pulsar_lb_bandwidth_out_usage{lb} 0.0",
        "# TYPE pulsar_lb_cpu_usage gauge",
        f"pulsar_lb_cpu_usage{lb} 25.0",
        "# TYPE pulsar_lb_directMemory_usage gauge",
        f"pulsar_lb_directMemory_usage{lb} 0.0",
        "# TYPE pulsar_lb_memory_usage gauge",
        f"pulsar_lb_memory_usage{lb} 30.000002",
    ]
    first = (
        '{cluster="c1", broker="10.0.0.1", bundle="public/default/0x00000000_0x80000000", '
        'metric="bundle"}'
    )
    second = first.replace("0x00000000_0x80000000", "0x80000000_0xffffffff")
    assert f"pulsar_bundle_msg_rate_in{first} 12.5" in lines
    assert f"pulsar_bundle_msg_rate_out{second} 1.0E-4" in lines
    assert f"pulsar_bundle_topics_count{first} 3" in lines
    assert f"pulsar_bundle_producer_count{first} 2" in lines
    families = parse_exposition(text)
    assert len(families["pulsar_bundle_consumer_count"].samples) == 2
    assert families["pulsar_lb_cpu_usage"].type == "gauge"
    without = render_load_balancing_metrics(stats, cluster="c1", broker="b", bundles=False)
    assert "pulsar_bundle" not in without
