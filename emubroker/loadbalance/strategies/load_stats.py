"""TransferShedder's load statistics: mean and deviation of broker loads, and the pairing cursor.

Loads are ``BrokerLoadData.weighted_max_ema``; the deviation is the population one,
``sqrt(sqSum / n - avg²)`` (Java's ``Math.sqrt``: NaN for the tiny negative values rounding can
produce). ``offload`` updates the deviation as if a transfer had already happened, which is how
one TransferShedder cycle pairs several brokers (spec §4.7).
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

from emubroker.loadbalance.model.extensible_data import Reason
from emubroker.loadbalance.model.javaorder import double_key, hash_map_order

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, MutableMapping

    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.model.extensible_data import BrokerLoadData

__all__ = ["LoadStats"]

log = logging.getLogger(__name__)


class LoadStats:
    """Mean and population standard deviation of the broker loads, and the pairing cursor."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Forget the previous cycle."""
        self.sum = self.sq_sum = self.avg = self.std = 0.0
        self.total_brokers = 0
        self.brokers_sorted_by_load: list[tuple[str, BrokerLoadData]] = []
        self.max_broker_index = self.min_broker_index = 0
        self.number_of_broker_shedding_per_cycle = 0
        self.max_number_of_broker_shedding_per_cycle = 0

    def _set(self, total: float, sq_sum: float, count: int) -> None:
        self.sum, self.sq_sum, self.total_brokers = total, sq_sum, count
        if count == 0:
            self.avg = self.std = 0.0
        else:
            self.avg = total / count
            self.std = _sqrt(sq_sum / count - self.avg * self.avg)

    def set_load_data_store(self, store: Mapping[str, BrokerLoadData]) -> None:
        """Sort the brokers by load, ascending (stable in the store's iteration order)."""
        self.brokers_sorted_by_load = sorted(
            _java_entries(store), key=lambda entry: double_key(entry[1].weighted_max_ema)
        )
        self.max_broker_index = len(self.brokers_sorted_by_load) - 1
        self.min_broker_index = 0

    def update(
        self,
        store: Mapping[str, BrokerLoadData],
        available_brokers: Collection[str],
        recently_unloaded_brokers: MutableMapping[str, int],
        conf: BrokerConfig,
        now: int,
    ) -> Reason | None:
        """Compute mean and deviation; a reason to skip the cycle, or ``None`` to go on.

        Data older than ``loadBalancerBrokerLoadDataTTLInSeconds`` is ignored; a broker whose
        data predates the end of ``loadBalanceSheddingDelayInSeconds`` after its last unload
        stops the whole cycle (``CoolDown``); expired unload records are removed.
        """
        self.max_number_of_broker_shedding_per_cycle = (
            conf.loadBalancerMaxNumberOfBrokerSheddingPerCycle
        )
        reason: Reason | None = None
        total = sq_sum = 0.0
        count = 0
        missing = set(available_brokers)
        for broker, data in _java_entries(store):
            missing.discard(broker)
            if now - data.updated_at > conf.loadBalancerBrokerLoadDataTTLInSeconds * 1000:
                log.warning("TransferShedder: ignoring outdated load data of %s", broker)
                reason = Reason.OutDatedData
                continue
            unloaded_at = recently_unloaded_brokers.get(broker)
            if unloaded_at is not None:
                if data.updated_at - unloaded_at < conf.loadBalanceSheddingDelayInSeconds * 1000:
                    self._set(0.0, 0.0, 0)
                    return Reason.CoolDown
                del recently_unloaded_brokers[broker]
            load = data.weighted_max_ema
            total += load
            sq_sum += load * load
            count += 1
        if count == 0:
            self._set(0.0, 0.0, 0)
            return reason or Reason.NoBrokers
        if missing:
            self._set(0.0, 0.0, 0)
            return Reason.NoLoadData
        self._set(total, sq_sum, count)
        return None

    def offload(self, max_load: float, min_load: float, offload: float) -> None:
        """Update the deviation as if ``offload`` moved from the max broker to the min broker."""
        self.sq_sum -= max_load * max_load + min_load * min_load
        max_after = max(0.0, max_load - offload)
        min_after = min_load + offload
        self.sq_sum += max_after * max_after + min_after * min_after
        self.std = math.sqrt(abs(self.sq_sum / self.total_brokers - self.avg * self.avg))
        self.number_of_broker_shedding_per_cycle += 1
        self.min_broker_index += 1

    def peek_min_broker(self) -> str:
        """The least loaded broker not yet paired."""
        return self.brokers_sorted_by_load[self.min_broker_index][0]

    def peek_max_broker(self) -> str:
        """The most loaded broker not yet shed from."""
        return self.brokers_sorted_by_load[self.max_broker_index][0]

    def poll_max_broker(self) -> str:
        """Take the most loaded broker."""
        broker = self.brokers_sorted_by_load[self.max_broker_index][0]
        self.max_broker_index -= 1
        return broker

    def has_transferable_brokers(self) -> bool:
        """Whether another pair may be formed this cycle."""
        return (
            self.number_of_broker_shedding_per_cycle < self.max_number_of_broker_shedding_per_cycle
            and self.min_broker_index < self.max_broker_index
        )


def _sqrt(value: float) -> float:
    # Java's Math.sqrt: NaN for a negative argument (rounding can make a variance -1e-17).
    return math.sqrt(value) if value >= 0 else math.nan


def _java_entries(store: Mapping[str, BrokerLoadData]) -> list[tuple[str, BrokerLoadData]]:
    # Pulsar's load data stores are table views over ConcurrentHashMaps.
    return [(broker, store[broker]) for broker in hash_map_order(store, concurrent=True)]
