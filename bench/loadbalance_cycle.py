"""The computation of one modular load-manager leader cycle, by cluster size.

Usage: python bench/loadbalance_cycle.py [--bundles 10,100,1000] [--brokers 3,5,10,20]
                                         [--cycles N] [--strategy CLASS] [--seed S]
                                         [--path pure|runtime|both]

For each size, bundles are spread over brokers with seeded random traffic (a third of the
brokers carry twice their share, so shedding has work to do) and the leader runs ``--cycles``
cycles of what Pulsar's leader computes, each on fresh reports:

- ``decode``: parse every broker's ``LocalBrokerData`` JSON (what the leader reads from the store);
- ``update``: ``update_all`` (bundle short/long-term averages, broker time averages, ranges);
- ``shed``: ``do_load_shedding`` (the strategy, then a destination per bundle through the
  placement pipeline);
- ``place``: ten ``select_broker_for_assignment`` calls for new bundles;
- ``unloads/cycle``: how many bundles the cycle moved, on average (shedding with nothing to do
  is cheap; the heavy third of the brokers gives it work in the first cycles);
- ``baseline``: touching every bundle sample once (sum of its four rates), the least any
  per-bundle cycle costs in Python; ``ratio`` is the cycle (update + shed + place) against it.

With ``--path runtime`` (or ``both``) the same cycle runs through the leader's runtime
(``LeaderAggregation``, ``SheddingRunner``) over an in-memory metadata store, as a leading
broker runs it:

- ``refresh``: list ``/loadbalance/brokers``, read and decode every report node, ``update_all``,
  delete what vanished (``LeaderAggregation.refresh``);
- ``shed``: ``modular_kind.shed``: the decisions, each explained (log line and
  ``shed`` trace row) and passed to a no-op unloader;
- ``write``: ``write_bundle_data`` (one more ``updateBundleData``, the top-K bundle data and the
  time averages encoded and stored; Pulsar runs it every 15 minutes, not every cycle);
- ``place``: as above.

Prints milliseconds per cycle (median); asserts nothing. Compare rows of one run: a shared
machine moves absolute numbers between runs.
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import sys
import time
from collections.abc import Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio

from emubroker.config import BrokerConfig
from emubroker.loadbalance.model.codec import decode, encode
from emubroker.loadbalance.model.data import LocalBrokerData, NamespaceBundleStats
from emubroker.loadbalance.model.usage import ResourceUsage, SystemResourceUsage
from emubroker.loadbalance.modular.kind import shed as modular_shed
from emubroker.loadbalance.runtime.aggregation import LeaderAggregation
from emubroker.loadbalance.runtime.shedding_runtime import SheddingRunner
from emubroker.loadbalance.strategies.modular_manager import ModularLoadManager
from emubroker.metadata import MemoryMetadataTree
from emubroker.metadata.paths import load_report_path
from protocol.clock import FakeClock

MIB = 1024 * 1024
AVERAGE_USAGE = 0.4
"""NICs are sized so that the average broker uses 40 % of its bandwidth (heavy ones ~60 %)."""


def bundle_names(count: int) -> list[str]:
    step = 2**32 // count
    namespaces = 4
    return [
        f"tenant/ns{i % namespaces}/0x{i * step:08x}_0x{min((i + 1) * step, 0xFFFFFFFF):08x}"
        for i in range(count)
    ]


def make_reports(
    rng: random.Random, owners: dict[str, list[str]], weights: dict[str, float], nic_bytes: float
) -> dict[str, bytes]:
    """Each broker's report as JSON, with fresh jittered stats for its bundles."""
    reports = {}
    for broker, bundles in owners.items():
        stats = {}
        for bundle in bundles:
            mib = weights[bundle] * rng.uniform(0.9, 1.1)
            stats[bundle] = NamespaceBundleStats(
                msg_rate_in=mib * 100,
                msg_rate_out=mib * 100,
                msg_throughput_in=mib * MIB,
                msg_throughput_out=mib * MIB,
                topics=rng.randrange(1, 50),
                producer_count=2,
                consumer_count=2,
            )
        total = sum(s.msg_throughput_in for s in stats.values())
        nic = ResourceUsage(total, nic_bytes)
        idle = ResourceUsage(rng.uniform(1, 30), 100)
        local = LocalBrokerData(
            web_service_url=f"http://{broker}",
            pulsar_service_url=f"pulsar://{broker.split(':')[0]}:6650",
            load_manager_class_name="org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl",
        )
        local.update(SystemResourceUsage(nic, nic, idle, idle, idle), stats)
        reports[broker] = encode(local)
    return reports


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def cluster(
    bundles: int, brokers: int, strategy: str | None, seed: int
) -> tuple[random.Random, dict[str, list[str]], dict[str, float], float, BrokerConfig]:
    """Seeded owners and bundle weights (a third of the brokers heavy), NIC size, config."""
    rng = random.Random(seed)
    names = bundle_names(bundles)
    broker_ids = [f"broker-{i}:8080" for i in range(brokers)]
    heavy = set(broker_ids[: max(1, brokers // 3)])
    owners: dict[str, list[str]] = {b: [] for b in broker_ids}
    for name in names:
        owners[rng.choice(broker_ids)].append(name)
    weights = {}
    for broker, owned in owners.items():
        for name in owned:
            weights[name] = rng.uniform(0.5, 5.0) * (2 if broker in heavy else 1)
    nic_bytes = sum(weights.values()) * MIB / brokers / AVERAGE_USAGE
    conf = BrokerConfig()
    if strategy:
        conf = BrokerConfig(loadBalancerLoadSheddingStrategy=strategy)  # type: ignore[arg-type]  # CLI
    return rng, owners, weights, nic_bytes, conf


def baseline(reports: Iterable[LocalBrokerData]) -> float:
    """Touch every bundle sample once: the least any per-bundle cycle costs in Python."""
    touched = 0.0
    for report in reports:
        for stats in report.last_stats.values():
            touched += stats.msg_rate_in + stats.msg_rate_out
            touched += stats.msg_throughput_in + stats.msg_throughput_out
    return touched


def run_case(bundles: int, brokers: int, cycles: int, strategy: str | None, seed: int) -> str:
    rng, owners, weights, nic_bytes, conf = cluster(bundles, brokers, strategy, seed)
    manager = ModularLoadManager(conf, rng=random.Random(seed))
    timings: dict[str, list[float]] = {k: [] for k in ("decode", "update", "shed", "place", "base")}
    unloaded = 0
    now = 0
    for cycle in range(cycles + 2):  # two warm-up cycles
        raw = make_reports(rng, owners, weights, nic_bytes)
        now += 60_000
        t0 = time.perf_counter()
        reports = {b: decode(data, LocalBrokerData) for b, data in raw.items()}
        t1 = time.perf_counter()
        manager.update_all(reports)
        t2 = time.perf_counter()
        unloads = manager.do_load_shedding(now)
        t3 = time.perf_counter()
        for i in range(10):
            manager.select_broker_for_assignment(f"tenant/new{cycle}/0x{i:08x}_0x{i + 1:08x}")
        t4 = time.perf_counter()
        baseline(reports.values())
        t5 = time.perf_counter()
        for unload in unloads:  # apply the plan, so the next cycle sees the move
            owners[unload.source_broker].remove(unload.service_unit)
            owners[unload.dest_broker or unload.source_broker].append(unload.service_unit)
        if cycle >= 2:
            unloaded += len(unloads)
            for key, start, end in (
                ("decode", t0, t1),
                ("update", t1, t2),
                ("shed", t2, t3),
                ("place", t3, t4),
                ("base", t4, t5),
            ):
                timings[key].append(end - start)
    decode_ms, update_ms, shed_ms, place_ms, base_ms = (
        median_ms(timings[k]) for k in ("decode", "update", "shed", "place", "base")
    )
    cycle_ms = update_ms + shed_ms + place_ms
    return (
        f"| {bundles} | {brokers} | {decode_ms:.2f} | {update_ms:.2f} | {shed_ms:.2f} | "
        f"{place_ms:.2f} | **{cycle_ms:.2f}** | {unloaded / cycles:.1f} | {base_ms:.3f} | "
        f"{cycle_ms / base_ms:.0f}x |"
    )


async def _no_unload(bundle: str, destination_broker: str | None = None) -> None:
    """The bench measures the leader, not the owner's unload."""


class _Rows:
    """A trace sink that keeps the rows (the broker's sink buffers them the same way)."""

    def __init__(self) -> None:
        self.rows: list[object] = []

    def append(self, record: object) -> None:
        self.rows.append(record)


async def _runtime_case(
    bundles: int, brokers: int, cycles: int, strategy: str | None, seed: int
) -> str:
    rng, owners, weights, nic_bytes, conf = cluster(bundles, brokers, strategy, seed)
    store = MemoryMetadataTree().open_session()
    clock = FakeClock()
    aggregation = LeaderAggregation(store, conf, rng=random.Random(seed), now_ms=clock.wall_ms)
    runner = SheddingRunner(clock, broker_id="leader:8080", unload=_no_unload, trace=_Rows())
    keys = ("refresh", "shed", "write", "place", "base")
    timings: dict[str, list[float]] = {k: [] for k in keys}
    unloaded = 0
    for cycle in range(cycles + 2):  # two warm-up cycles
        for broker, data in make_reports(rng, owners, weights, nic_bytes).items():
            await store.put(load_report_path(broker), data)
        await clock.advance(60.0)
        t0 = time.perf_counter()
        await aggregation.refresh()
        t1 = time.perf_counter()
        unloads = await modular_shed(runner, aggregation.manager, cycle)
        t2 = time.perf_counter()
        await aggregation.write_bundle_data()
        t3 = time.perf_counter()
        for i in range(10):
            aggregation.manager.select_broker_for_assignment(
                f"tenant/new{cycle}/0x{i:08x}_0x{i + 1:08x}"
            )
        t4 = time.perf_counter()
        baseline(b.local_data for b in aggregation.manager.load_data.broker_data.values())
        t5 = time.perf_counter()
        for unload in unloads:
            owners[unload.source_broker].remove(unload.service_unit)
            owners[unload.dest_broker or unload.source_broker].append(unload.service_unit)
        if cycle >= 2:
            unloaded += len(unloads)
            for key, start, end in zip(
                keys, (t0, t1, t2, t3, t4), (t1, t2, t3, t4, t5), strict=True
            ):
                timings[key].append(end - start)
    refresh_ms, shed_ms, write_ms, place_ms, base_ms = (median_ms(timings[k]) for k in keys)
    cycle_ms = refresh_ms + shed_ms + place_ms
    return (
        f"| {bundles} | {brokers} | {refresh_ms:.2f} | {shed_ms:.2f} | {write_ms:.2f} | "
        f"{place_ms:.2f} | **{cycle_ms:.2f}** | {unloaded / cycles:.1f} | {base_ms:.3f} | "
        f"{cycle_ms / base_ms:.0f}x |"
    )


def run_runtime_case(
    bundles: int, brokers: int, cycles: int, strategy: str | None, seed: int
) -> str:
    return anyio.run(_runtime_case, bundles, brokers, cycles, strategy, seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bundles", default="10,100,1000")
    parser.add_argument("--brokers", default="3,5,10,20")
    parser.add_argument("--cycles", type=int, default=15)
    parser.add_argument("--strategy", default=None, help="loadBalancerLoadSheddingStrategy")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--path", choices=("pure", "runtime", "both"), default="pure")
    args = parser.parse_args()
    print(f"shedding: {args.strategy or BrokerConfig().loadBalancerLoadSheddingStrategy}")
    logging.basicConfig(level=logging.ERROR)  # the strategies log every decision at INFO/WARNING
    sizes = [
        (int(bundles), int(brokers))
        for bundles in args.bundles.split(",")
        for brokers in args.brokers.split(",")
    ]
    paths = {
        "pure": ("decode ms | update ms | shed ms", run_case),
        "runtime": ("refresh ms | shed ms | write ms", run_runtime_case),
    }
    for path, (steps, case) in paths.items():
        if args.path not in (path, "both"):
            continue
        print(
            f"| bundles | brokers | {steps} | place ms | cycle ms | unloads/cycle | baseline ms "
            "| ratio |"
        )
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for bundles, brokers in sizes:
            print(case(bundles, brokers, args.cycles, args.strategy, args.seed), flush=True)


if __name__ == "__main__":
    main()
