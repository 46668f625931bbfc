"""AvgShedder (PIP-364): pairs busy and idle brokers, sheds between them, places accordingly.

One object is both a shedding strategy and a placement strategy (spec §3.5, §4.5): a bundle it
sheds is bound to the idle partner of its broker, and ``select_broker`` returns that binding.

Per cycle: score = weighted usage × 100; brokers sorted by score with Pulsar's comparator, which
truncates score differences to ``int`` (so scores closer than 1 are "equal" and the comparator
is not transitive: we sort with Java's algorithm to get Java's order); pair the i-th lowest
with the i-th highest. A pair whose gap reaches ``loadBalancerAvgShedderLowThreshold`` is a
candidate and counts a "low hit" for both brokers, plus a "high hit" if the gap reaches
``loadBalancerAvgShedderHighThreshold``; a pair acts when a broker's high hits reach
``HitCountHighThreshold`` or its low hits ``HitCountLowThreshold``. It sheds
``(max - min) * maxUnloadPercentage`` of message rate (if above ``minUnloadMessage``) or else of
throughput (if above ``minUnloadMessageThroughput``). Unlike the other shedders it does not
spare a broker's sole bundle.

Bindings are keyed by the ``BundleData`` value, as Pulsar's ``HashMap<BundleData, String>``
is: a bundle whose data changed since it was shed is no longer found.
"""

from __future__ import annotations

import logging
import random
import zlib
from typing import TYPE_CHECKING, Any

import msgspec

from emubroker.loadbalance.model.codec import to_jackson
from emubroker.loadbalance.model.data import weighted_max_usage
from emubroker.loadbalance.model.javaorder import (
    double_key,
    hash_map_order,
    java_sort,
    table_capacity,
    to_int,
)
from emubroker.loadbalance.strategies.shedding import BYTES, MESSAGES

if TYPE_CHECKING:
    from collections.abc import Collection

    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.model.data import BundleData, LoadData

__all__ = ["AvgShedder"]

log = logging.getLogger(__name__)


def _bundle_key(bundle: BundleData) -> bytes:
    # Value identity of a BundleData, with numbers normalised the way Java's equals sees them.
    return msgspec.msgpack.encode(to_jackson(bundle))


class AvgShedder:
    """Pulsar's ``AvgShedder``, shedding and placement in one object.

    Args:
        rng: Where the random broker of an unbound placement comes from (Pulsar uses
            ``new Random().nextInt()``); seeded for reproducible runs.

    Attributes:
        broker_score: Broker -> score (0-100) of the last cycle.
        hit_count_high: Broker -> consecutive cycles in a pair with a gap above the high mark.
        hit_count_low: Broker -> consecutive cycles in a pair with a gap above the low mark.
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng if rng is not None else random.Random(0)
        self._bindings: dict[bytes, str] = {}
        self._score_table = table_capacity(0)
        self.broker_score: dict[str, float] = {}
        self.hit_count_high: dict[str, int] = {}
        self.hit_count_low: dict[str, int] = {}
        # The high hit counts as the last cycle found them (it resets a ripe pair's): what
        # ``explain`` reads to tell which count fired.
        self._hit_count_high_before: dict[str, int] = {}

    def find_bundles_for_unloading(
        self, load_data: LoadData, conf: BrokerConfig
    ) -> dict[str, list[str]]:
        """Which bundles to move from the busy broker of each ripe pair."""
        self._hit_count_high_before = dict(self.hit_count_high)
        result: dict[str, list[str]] = {}
        brokers = self._scores_sorted(load_data, conf)
        pairs = self._pairs(
            brokers,
            conf.loadBalancerAvgShedderLowThreshold,
            conf.loadBalancerAvgShedderHighThreshold,
        )
        if not pairs:
            self.hit_count_high.clear()
            self.hit_count_low.clear()
            return result
        high, low = (
            conf.loadBalancerAvgShedderHitCountHighThreshold,
            conf.loadBalancerAvgShedderHitCountLowThreshold,
        )
        for idle, busy in pairs:
            ripe = (
                self.hit_count_high.setdefault(idle, 0) >= high
                or self.hit_count_high.setdefault(busy, 0) >= high
                or self.hit_count_low.setdefault(idle, 0) >= low
                or self.hit_count_low.setdefault(busy, 0) >= low
            )
            if not ripe:
                continue
            for counts in (self.hit_count_high, self.hit_count_low):
                counts.pop(idle, None)
                counts.pop(busy, None)
            self._select_bundles(load_data, busy, idle, conf, result)
        return result

    def _scores_sorted(self, load_data: LoadData, conf: BrokerConfig) -> list[str]:
        # Pulsar refills one HashMap each cycle; clear() keeps its table, so its order depends
        # on the largest broker count seen.
        self.broker_score = {
            broker: weighted_max_usage(data.local_data, conf) * 100
            for broker, data in load_data.brokers_in_java_order()
        }
        self._score_table = max(self._score_table, table_capacity(len(self.broker_score)))
        order = hash_map_order(self.broker_score, initial=self._score_table)
        score = self.broker_score
        return java_sort(order, lambda a, b: to_int(score[a] - score[b]))

    def _pairs(self, brokers: list[str], low: float, high: float) -> list[tuple[str, str]]:
        pairs: list[tuple[str, str]] = []
        i, j = 0, len(brokers) - 1
        while i <= j:
            idle, busy = brokers[i], brokers[j]
            gap = self.broker_score[busy] - self.broker_score[idle]
            if gap < low:
                for counts in (self.hit_count_high, self.hit_count_low):
                    counts.pop(busy, None)
                    counts.pop(idle, None)
            else:
                pairs.append((idle, busy))
                for broker in (idle, busy):
                    self.hit_count_low[broker] = self.hit_count_low.get(broker, 0) + 1
                if gap < high:
                    self.hit_count_high.pop(busy, None)
                    self.hit_count_high.pop(idle, None)
                else:
                    for broker in (idle, busy):
                        self.hit_count_high[broker] = self.hit_count_high.get(broker, 0) + 1
            i += 1
            j -= 1
        return pairs

    def _select_bundles(
        self,
        load_data: LoadData,
        busy: str,
        idle: str,
        conf: BrokerConfig,
        result: dict[str, list[str]],
    ) -> None:
        idle_local = load_data.broker_data[idle].local_data
        busy_local = load_data.broker_data[busy].local_data
        share = conf.maxUnloadPercentage
        rate_needed = (
            busy_local.msg_rate_in
            + busy_local.msg_rate_out
            - idle_local.msg_rate_in
            - idle_local.msg_rate_out
        ) * share
        tp_needed = (
            busy_local.msg_throughput_in
            + busy_local.msg_throughput_out
            - idle_local.msg_throughput_in
            - idle_local.msg_throughput_out
        ) * share
        if rate_needed > conf.minUnloadMessage:
            by_rate, remaining = True, rate_needed
        elif tp_needed > conf.minUnloadMessageThroughput:
            by_rate, remaining = False, tp_needed
        else:
            log.info(
                "AvgShedder: %s -> %s: %.0f msg/s and %.2f MiB/s are below the minimums",
                busy,
                idle,
                rate_needed,
                tp_needed / (1024 * 1024),
            )
            return
        if len(busy_local.bundles) <= 1:
            log.warning(
                "AvgShedder: %s has %d bundle(s); shedding anyway", busy, len(busy_local.bundles)
            )
        recent = load_data.recently_unloaded_bundles
        sized: list[tuple[str, BundleData, float]] = []
        for bundle, data in load_data.bundle_data_for_load_shedding().items():
            if bundle in busy_local.bundles and bundle not in recent:
                short = data.short_term_data
                traffic = (
                    short.msg_rate_in + short.msg_rate_out
                    if by_rate
                    else short.msg_throughput_in + short.msg_throughput_out
                )
                sized.append((bundle, data, traffic))
        sized.sort(key=lambda item: double_key(item[2]), reverse=True)
        for bundle, data, traffic in sized:
            if 0 < traffic <= remaining:
                result.setdefault(busy, []).append(bundle)
                self._bindings[_bundle_key(data)] = idle
                remaining -= traffic
        log.info("AvgShedder: %s -> %s: %s", busy, idle, result.get(busy, []))

    def select_broker(
        self,
        candidates: Collection[str],
        bundle_to_assign: BundleData,
        load_data: LoadData | None = None,
        conf: BrokerConfig | None = None,
    ) -> str | None:
        """The broker the bundle was shed to, if it is a candidate; else a random candidate.

        The random choice becomes the bundle's binding. ``load_data`` and ``conf`` are unused
        (Pulsar's own test passes null). No candidates: ``None`` (Pulsar throws).
        """
        key = _bundle_key(bundle_to_assign)
        bound = self._bindings.get(key)
        if bound is not None and bound in candidates:
            return bound
        if not candidates:
            return None
        ordered = sorted(candidates)
        # Pulsar hashes a random int's decimal string with CRC-32 to pick an index.
        drawn = self._rng.randint(-(2**31), 2**31 - 1)
        broker = ordered[zlib.crc32(str(drawn).encode()) % len(ordered)]
        self._bindings[key] = broker
        return broker

    def bound_broker(self, bundle_data: BundleData) -> str | None:
        """The broker a bundle with this data is bound to, if any."""
        return self._bindings.get(_bundle_key(bundle_data))

    def bind(self, bundle_data: BundleData, broker: str) -> None:
        """Bind a bundle's data to a broker (what shedding does; for tests and replays)."""
        self._bindings[_bundle_key(bundle_data)] = broker

    def on_active_brokers_change(self, active_brokers: Collection[str]) -> None:
        """Nothing to forget (Pulsar keeps bindings and counters of departed brokers)."""

    def explain(
        self, load_data: LoadData, conf: BrokerConfig, broker: str, destination: str
    ) -> dict[str, Any]:
        """See ``LoadSheddingStrategy.explain``: the pair's scores and the hit count that fired.

        ``HighHitCount`` or ``LowHitCount``, and the amount the pair's gap asks for.
        """
        local = load_data.broker_data[broker].local_data
        score = self.broker_score
        busy, idle = score.get(broker, 0.0), score.get(destination, 0.0)
        high_hits = self._hit_count_high_before
        high = conf.loadBalancerAvgShedderHitCountHighThreshold
        gap_high = busy - idle >= conf.loadBalancerAvgShedderHighThreshold
        ripe_high = gap_high and any(high_hits.get(b, 0) + 1 >= high for b in (broker, destination))
        threshold = (
            conf.loadBalancerAvgShedderHighThreshold
            if ripe_high
            else conf.loadBalancerAvgShedderLowThreshold
        )
        numbers: dict[str, Any] = {
            "reason": "HighHitCount" if ripe_high else "LowHitCount",
            "broker_load": busy / 100,
            "cluster_load": idle / 100,
            "dest_load": idle / 100,
            "threshold": threshold / 100,
        }
        partner = load_data.broker_data.get(destination)
        if partner is None:
            return numbers
        idle_local = partner.local_data
        rate = local.msg_rate_in + local.msg_rate_out
        idle_rate = idle_local.msg_rate_in + idle_local.msg_rate_out
        rate_needed = (rate - idle_rate) * conf.maxUnloadPercentage
        if rate_needed > conf.minUnloadMessage:
            return numbers | {"to_offload": rate_needed, "offload_unit": MESSAGES}
        throughput = local.msg_throughput_in + local.msg_throughput_out
        idle_throughput = idle_local.msg_throughput_in + idle_local.msg_throughput_out
        tp_needed = (throughput - idle_throughput) * conf.maxUnloadPercentage
        return numbers | {"to_offload": tp_needed, "offload_unit": BYTES}
