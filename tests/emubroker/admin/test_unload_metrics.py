"""The leader's unload counters on /metrics, spelt as Pulsar's PrometheusMetricsGenerator does."""

from __future__ import annotations

from emubroker.admin.metrics_loadbalance import render_unload_metrics
from emubroker.loadbalance.model.extensible_data import Label, Reason, UnloadCounter
from emubroker.loadbalance.runtime.shedding_runtime import ModularUnloadCounters


def test_modular_counters() -> None:
    text = render_unload_metrics(
        ModularUnloadCounters(unload_broker_count=2, unload_bundle_count=5, cycles=3),
        None,
        cluster="c1",
        broker="10.0.0.1",
    )
    assert text == (
        "# TYPE pulsar_lb_unload_broker_total gauge\n"
        'pulsar_lb_unload_broker_total{cluster="c1", metric="bundleUnloading"} 2\n'
        "# TYPE pulsar_lb_unload_bundle_total gauge\n"
        'pulsar_lb_unload_bundle_total{cluster="c1", metric="bundleUnloading"} 5\n'
    )


def test_extensible_counters_with_breakdown_and_load_stats() -> None:
    counter = UnloadCounter()
    counter.update(Label.Success, Reason.Overloaded)
    counter.update(Label.Skip, Reason.HitCount)
    counter.unload_broker_count = 1
    counter.update_load_data(0.5, 0.25)
    lines = render_unload_metrics(None, counter, cluster="c1", broker="10.0.0.1").splitlines()
    labels = 'cluster="c1", broker="10.0.0.1", metric="bundleUnloading"'
    assert f"pulsar_lb_unload_broker_total{{{labels}}} 1" in lines
    assert f"pulsar_lb_unload_bundle_total{{{labels}}} 1" in lines
    assert (
        f'pulsar_lb_unload_broker_breakdown_total{{{labels}, reason="Overloaded", '
        'result="Success"} 1'
    ) in lines
    assert (
        f'pulsar_lb_unload_broker_breakdown_total{{{labels}, reason="HitCount", result="Skip"}} 1'
    ) in lines
    assert (
        'pulsar_lb_resource_usage_stats{cluster="c1", broker="10.0.0.1", feature="max_ema", '
        'metric="bundleUnloading", stat="std"} 0.25'
    ) in lines
    # Every label and reason Pulsar counts is listed, zeros included (3 Success, 7 Skip, 1 Failure).
    assert sum(line.startswith("pulsar_lb_unload_broker_breakdown_total") for line in lines) == 11


def test_nothing_before_a_cycle() -> None:
    assert render_unload_metrics(None, None, cluster="c1", broker="b") == ""
