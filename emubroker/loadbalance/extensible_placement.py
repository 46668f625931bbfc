"""The extensible load manager's broker selection (spec §4.7, last paragraph).

``LeastResourceUsageWithWeight`` here is Pulsar's ``extensions.strategy`` class, not the
modular one of the same name: it reads each broker's own ``weighted_max_ema`` instead of
keeping averages, and brokers without load data are left out of the mean and of the best set
but stay in the random fallback.
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING

from emubroker.loadbalance.placement import in_java_order

if TYPE_CHECKING:
    from collections.abc import Collection

    from emubroker.loadbalance.extensible_data import LoadManagerContext

__all__ = ["LeastResourceUsageWithWeight"]

log = logging.getLogger(__name__)


class LeastResourceUsageWithWeight:
    """Pick at random among brokers whose load is at least the threshold below the mean.

    Args:
        rng: Source of the random choice (seeded for reproducible runs).
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng if rng is not None else random.Random(0)

    def select(
        self, candidates: Collection[str], bundle_to_assign: object, context: LoadManagerContext
    ) -> str | None:
        """The broker for ``bundle_to_assign`` (unused, as in Pulsar); ``None`` if no candidate."""
        ordered = in_java_order(candidates)
        if not ordered:
            log.warning("no broker candidates for %s", bundle_to_assign)
            return None
        conf = context.broker_configuration
        store = context.broker_load_data_store
        threshold = conf.loadBalancerBrokerOverloadedThresholdPercentage / 100.0
        with_data = [b for b in ordered if b in store]
        total = 0.0
        for broker in with_data:
            load = store[broker].weighted_max_ema
            if load > threshold:
                log.warning("broker %s is overloaded: %.1f%%", broker, 100 * load)
            total += load
        best: list[str] = []
        if with_data:
            mean = total / len(with_data)
            margin = conf.loadBalancerAverageResourceUsageDifferenceThresholdPercentage / 100.0
            best = [b for b in with_data if store[b].weighted_max_ema + margin <= mean]
        if not best:
            best = ordered
        return best[self._rng.randrange(len(best))]
